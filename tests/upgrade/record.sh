#!/usr/bin/env bash
# Record an upgrade bundle: four builds made by the `git-agentrun` on PATH, bundled with
# every ref (logs, archive, notes, build branches, local proposals). Run once per schema
# version with that release installed; the bundle is committed and read by every later
# release (tests/upgrade/test_bundles.py).
#
#   PATH=<venv of release X>/bin:$PATH bash tests/upgrade/record.sh tests/upgrade/vX.bundle
set -euo pipefail
out=$(realpath -m "$1")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export GIT_AUTHOR_NAME=Recorder GIT_AUTHOR_EMAIL=recorder@example.com
export GIT_COMMITTER_NAME=Recorder GIT_COMMITTER_EMAIL=recorder@example.com
export GIT_CONFIG_NOSYSTEM=1 HOME="$work/home" AGENTRUN_WORKTREES="$work/worktrees"
mkdir -p "$HOME" && cd "$work" && git init -q -b main repo && cd repo
git config user.name Recorder && git config user.email recorder@example.com

cat >pager.py <<'PY'
def page_count(total_items, per_page):
    return total_items // per_page
PY
cat >check.py <<'PY'
from pager import page_count
assert page_count(21, 10) == 3, "partial last page"
PY
cat >straight.toml <<'TOML'
[[step]]
phase = "implement"
write = { "pager.py" = "def page_count(total_items, per_page):\n    return -(-total_items // per_page)\n" }
verb = "done"
text = "round up"
TOML
cat >asks.toml <<'TOML'
[[step]]
phase = "plan"
attempt = 1
verb = "escalate"
text = "Should a page size of zero raise ValueError?"

[[step]]
phase = "implement"
write = { "pager.py" = "def page_count(total_items, per_page):\n    if per_page <= 0:\n        raise ValueError(per_page)\n    return -(-total_items // per_page)\n" }
verb = "done"
text = "round up, refuse empty pages"
TOML
cat >notes.toml <<'TOML'
[[step]]
phase = "implement"
write = { "CHANGES.md" = "- page_count rounds up\n" }
verb = "done"
text = "note the change"
TOML
cat >.agentrun.toml <<'TOML'
[roles]
default = ["straight"]

[runtimes.straight]
kind = "script"
script = "straight.toml"

[runtimes.asks]
kind = "script"
script = "asks.toml"

[runtimes.notes]
kind = "script"
script = "notes.toml"

[[verify]]
name = "check"
command = "python3 check.py"
paths = ["*.py"]
TOML
git add -A && git commit -qm "pager with an off-by-one"

slug() { git agentrun status --json | python3 -c "import json,sys; print([b['slug'] for b in json.load(sys.stdin)['builds'] if b['slug'].startswith('$1')][0])"; }
pull() { git agentrun status --json | python3 -c "import json,sys; print([b['proposal']['number'] for b in json.load(sys.stdin)['builds'] if b['slug']=='$1'][0])"; }

git agentrun run "Round up the closed page count" >/dev/null
closed=$(slug round-up-the-closed)
git agentrun pulls close "$(pull "$closed")" >/dev/null

git agentrun run "Round up the merged page count" >/dev/null
merged=$(slug round-up-the-merged)
git agentrun pulls merge "$(pull "$merged")" >/dev/null

git agentrun run --role plan=asks --role implement=asks "Ask before refusing empty pages" >/dev/null || true
# Its own change: since schema v2 a build that changes nothing parks with a question.
git agentrun run --role implement=notes "Round up the open page count" >/dev/null

git agentrun status
git bundle create -q "$out" --all
echo "recorded $out"
