"""agentrun: drive AI coding agents from a goal to a reviewed, verified draft proposal.

All state lives in git: an event log per build under ``refs/agentrun/``.
"""

from __future__ import annotations

__version__ = "0.1.0"
