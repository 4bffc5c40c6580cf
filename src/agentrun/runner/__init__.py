"""The runner: executes the kernel's decisions (DESIGN §4)."""
