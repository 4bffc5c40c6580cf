"""The build's state in git: event logs, leases, the archive, notes, memory, sync."""
