"""What agentrun does differently inside a hosted CI job (GitHub Actions)."""
