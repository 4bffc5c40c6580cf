"""The pre-push hook (DESIGN §9): guards over the commits going to build branches.

``guards`` holds the two rules (protected paths, secrets), which the runner also
applies before every phase commit; ``prepush`` is the hook's work; ``install`` puts the
shell shim (``templates/pre-push``) into the repository's hooks folder.
"""
