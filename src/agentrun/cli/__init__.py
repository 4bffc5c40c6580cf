"""The command line: ``git agentrun``."""

COMPLETE_VAR = "_GIT_AGENTRUN_COMPLETE"  # click's shell completion (main.py, help.py)
