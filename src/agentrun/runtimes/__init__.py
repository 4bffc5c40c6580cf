"""Runtimes: adapters that run an agent (DESIGN §7)."""
