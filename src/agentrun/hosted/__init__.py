"""Steering builds from a forge, whatever the forge: what a CI job on a hosted forge does.

- ``site``: which forge and project a job works for, as its adapter names them;
- ``job``: creating an issue's build, running it, archiving it when its proposal
  closes, sweeping, and the config read from the default branch; ``result``: what it
  did (its lines and outputs);
- ``steering``: the comments and reviews since a build's cursor, who may steer it
  (``forge.base.Access``), and what each command appends (``kernel.requests``);
- ``commands``: the one grammar of ``/agentrun …`` commands in every forge's comments.

An adapter reads its forge's event payload and calls ``job``: ``github_action``
for GitHub Actions, ``gitlab_action`` for GitLab CI (``action_log``: the job log).
"""
