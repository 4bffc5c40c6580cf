"""The pre-push hook (DESIGN §9): guards over the commits going to build branches.

``push`` reads what git (or pre-commit) hands the hook; ``prepush`` is the hook's work:
the guards (``runner.guards``: protected paths, secrets, the rules the runner applies
before every phase commit too), the goals a push carries (``commands.goals``), and the
builds' refs pushed along; ``install`` puts the shell shim (``templates/pre-push``) into
the repository's hooks folder.
"""
