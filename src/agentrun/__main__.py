from __future__ import annotations

from agentrun.cli.main import main

main()
