"""How builds, events and proposals read on a terminal or in a CI log: text, no I/O."""
