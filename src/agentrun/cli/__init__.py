"""The command line: ``git agentrun``."""
