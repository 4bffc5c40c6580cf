"""Core functions behind the CLI commands: each parses nothing and prints nothing."""
