"""Forges: where proposals go (DESIGN §8). Protocol plus a registry of implementations."""

from __future__ import annotations

from agentrun.forge.base import Comment, Forge, ProposalInfo, open_forge

__all__ = ["Comment", "Forge", "ProposalInfo", "open_forge"]
