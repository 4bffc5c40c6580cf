"""The verbs agents use to report back (DESIGN §6)."""
