"""The secret shapes against fake credentials of every provider, and against ordinary text.

The corpus (``corpus.py``) is drawn from the providers' formats with random bodies; the
recall tests run it under several seeds. The false-positive tests feed text that looks
random but is no secret: hashes, UUIDs, base64 of ordinary data, code, this project's
own sources.
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import subprocess
import tomllib
import uuid
from importlib import resources
from pathlib import Path

import corpus
import pygit2
import pytest
from corpus import Fake

from agentrun import secrets
from agentrun.runner.guards import Rules, check_commit, check_workdir, secret_in, summary

SEEDS = range(corpus.SEED, corpus.SEED + 5)
EVERY = [fake for seed in SEEDS for fake in corpus.fakes(seed)]
ROOT = Path(__file__).resolve().parents[2]


def named(fake: Fake) -> str:
    return f"{fake.provider}:{fake.secret[:12]}"


def lines_of(fake: Fake) -> list[str]:
    """The lines a diff would show: a key block is looked at line by line."""
    return fake.line.splitlines()


def every_object(path: Path) -> bytes:
    argv = ["git", "cat-file", "--batch-all-objects", "--batch"]
    return subprocess.run(argv, cwd=path, capture_output=True, check=True).stdout


# --- the corpus ----------------------------------------------------------------------


def test_the_corpus_covers_every_provider_the_issue_names() -> None:
    providers = set(corpus.PROVIDERS)
    assert len(corpus.GENERATORS) >= 25
    for wanted in [
        "GitHub", "GitLab", "Slack", "Slack webhook", "Stripe", "AWS", "AWS secret",
        "Google", "npm", "PyPI", "Hugging Face", "OpenAI", "Anthropic", "SendGrid",
        "Twilio", "JWT", "private key", "Azure storage", "Shopify", "DigitalOcean",
        "Discord webhook", "Mailgun", "Databricks", "Linear", "Postman", "Doppler",
        "Telegram", "generic",
    ]:  # fmt: skip
        assert wanted in providers
    assert corpus.fakes() == corpus.fakes()  # seeded: the same corpus every run
    assert corpus.fakes(1) != corpus.fakes(2)


@pytest.mark.parametrize("fake", EVERY, ids=named)
def test_scrub_removes_every_fake(fake: Fake) -> None:
    cleaned = secrets.scrub(fake.line)
    assert fake.secret not in cleaned
    assert secrets.REDACTED in cleaned
    assert secrets.scrub_bytes(fake.line.encode()) == cleaned.encode()


@pytest.mark.parametrize("fake", EVERY, ids=named)
def test_scrub_removes_every_fake_inside_json(fake: Fake) -> None:
    """The store scrubs an event once it is encoded: quotes come escaped, lines joined."""
    encoded = json.dumps({"text": f"said {fake.line} and more", "more": [fake.line]})
    cleaned = secrets.scrub(encoded)
    assert fake.secret not in cleaned
    assert json.dumps(fake.secret)[1:-1] not in cleaned
    assert json.loads(cleaned)  # still JSON


@pytest.mark.parametrize("fake", EVERY, ids=named)
def test_shape_in_finds_every_fake_on_its_line(fake: Fake) -> None:
    assert any(secrets.shape_in(line) is not None for line in lines_of(fake))


def test_scrub_keeps_the_text_around_a_secret() -> None:
    token = next(f.secret for f in EVERY if f.provider == "Stripe")
    assert secrets.scrub(f"export STRIPE_KEY={token}\n") == "export STRIPE_KEY=[redacted]\n"
    assert secrets.scrub(f"the key ({token}), then more") == "the key ([redacted]), then more"


def test_a_private_key_block_goes_whole() -> None:
    block = next(f.line for f in EVERY if f.provider == "private key")
    assert secrets.scrub(block) == "the key:\n[redacted]\nend"


def test_many_secrets_in_one_text_are_all_scrubbed() -> None:
    text = "\n".join(fake.line for fake in corpus.fakes())
    cleaned = secrets.scrub(text)
    assert [f.provider for f in corpus.fakes() if f.secret in cleaned] == []


def test_findings_name_the_provider() -> None:
    kinds = {f.provider: secrets.shape_in(lines_of(f)[0]) for f in corpus.fakes()}
    assert kinds["GitHub"] == "a GitHub token"
    assert kinds["Slack webhook"] == "a Slack webhook"
    assert kinds["Discord webhook"] == "a Discord webhook"
    assert kinds["Telegram"] == "a Telegram bot token"
    assert kinds["generic"] == "a secret assignment"


# --- the guards refuse a file carrying each --------------------------------------------


def test_the_guard_refuses_a_commit_carrying_each_fake(repo_path: Path) -> None:
    fakes = corpus.fakes()
    for index, fake in enumerate(fakes):
        path = repo_path / "config" / f"{index}.txt"
        path.parent.mkdir(exist_ok=True)
        path.write_text(f"# settings\n{fake.line}\n")
    subprocess.run(["git", "add", "-A"], cwd=repo_path, check=True)
    subprocess.run(["git", "commit", "-q", "-m", "settings"], cwd=repo_path, check=True)
    repo = pygit2.Repository(str(repo_path))

    found = check_commit(repo, repo.head.peel(pygit2.Commit), Rules())

    flagged = {int(Path(f.path).stem) for f in found}
    assert [fakes[i].provider for i in range(len(fakes)) if i not in flagged] == []
    line = summary("the commit", found)
    assert all(fake.secret not in line for fake in fakes)


def test_the_phase_guard_refuses_the_working_tree_without_writing_a_blob(
    repo_path: Path,
) -> None:
    fakes = corpus.fakes()
    repo = pygit2.Repository(str(repo_path))
    base = repo.head.peel(pygit2.Commit).tree
    (repo_path / "leak.txt").write_text("\n".join(f.line for f in fakes) + "\n")

    found = check_workdir(repo, base, Rules())

    lines = {f.line for f in found}
    starts = [1 + sum(len(lines_of(f)) for f in fakes[:i]) for i in range(len(fakes))]
    missed = [
        fake.provider
        for fake, start in zip(fakes, starts, strict=True)
        if not any(n in lines for n in range(start, start + len(lines_of(fake))))
    ]
    assert missed == []
    objects = every_object(repo_path)
    assert all(fake.secret.encode() not in objects for fake in fakes)


# --- what is not a secret ------------------------------------------------------------


def ordinary(rng: random.Random) -> list[str]:
    """Lines that look random, or say secret, and hold none."""
    data = rng.randbytes(64)
    prose = b"The quick brown fox jumps over the lazy dog, again and again, all day long."
    return [
        f"commit {hashlib.sha1(data).hexdigest()}",
        f"sha256:{hashlib.sha256(data).hexdigest()}",
        f"md5 {hashlib.md5(data).hexdigest()}  file.tar.gz",
        f"request id {uuid.UUID(int=rng.getrandbits(128), version=4)}",
        f"build {uuid.UUID(int=rng.getrandbits(128), version=4).hex}",
        base64.b64encode(prose).decode(),
        base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(40)).decode(),
        f"data:image/png;base64,{base64.b64encode(b'GIF89a' + bytes(30)).decode()}",
        "integrity sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode(),
        "password = os.environ['DB_PASSWORD']",
        'password = "${DB_PASSWORD}"',
        "token = request.headers.get('Authorization')",
        "api_key = settings.OPENAI_API_KEY",
        "secret_key = get_secret_key_from_vault(name, version=3)",
        'headers = {"Authorization": f"Bearer {token}"}',
        "if not password: raise ValueError('a password is needed')",
        "def get_api_key(self, name: str) -> str | None:",
        "The access token expires after 3600 seconds; refresh it with the refresh token.",
        "sk-some-long-descriptive-name and task-management-Thing1-abcdefghijklmnop",
        "key_length = 2048  # bits",
        "AKIA is how AWS key ids start; xoxo-hugs",
        "-----BEGIN PUBLIC KEY-----",
        "-----BEGIN CERTIFICATE-----",
        "pip install rich==13.9.4 --hash=sha256:" + hashlib.sha256(data).hexdigest(),
        "Traceback (most recent call last): File \"/usr/lib/python3.11/tokenize.py\", line 42",
        f"https://github.com/psf/requests/blob/{hashlib.sha1(prose).hexdigest()}/README.md",
        "tzinfo=zoneinfo.ZoneInfo(key='Asia/Singapore')",
        "name='cache_key', max_length=255, unique=True, primary_key=True",
        "ADMIN_PASSWORD = 'pbkdf2_sha256$600000$Vo0VlMnkR4Bk$qEvtdyZRWTcOsCnI/oQ7fVOu1XAURIZY='",
        "_csrf_id_token = MASKED_TEST_SECRET2",
    ]  # fmt: skip


@pytest.mark.parametrize("seed", range(5))
def test_ordinary_lines_are_left_alone(seed: int) -> None:
    for line in ordinary(random.Random(seed)):
        assert secrets.shape_in(line) is None, line
        assert secrets.scrub(line) == line


def test_this_projects_own_sources_hold_no_secret_shape() -> None:
    """Code that says token, key, secret and password all over, and holds none."""
    sources = [
        p
        for p in sorted((ROOT / "src" / "agentrun").rglob("*"))
        if p.is_file() and p.suffix in {".py", ".md", ".toml", ".sh"} and "data" not in p.parts
    ]
    assert len(sources) > 50
    flagged = [
        f"{p.relative_to(ROOT)}:{n}"
        for p in sources
        for n, line in enumerate(p.read_text("utf-8").splitlines(), 1)
        if secret_in(line) is not None
    ]
    assert flagged == []


def test_the_entropy_threshold_is_what_decides_a_generic_value() -> None:
    assert secrets.entropy("") == 0.0
    assert secrets.entropy("aaaa") == 0.0
    assert secrets.entropy("abcd") == 2.0
    assert secrets.scrub('api_key = "aaaaaaaaaaaaaaaaaaaa1"') == 'api_key = "aaaaaaaaaaaaaaaaaaaa1"'
    assert secrets.scrub('api_key = "q8Zr2Lk5Vx9Tm3Wp7Ny4"') == 'api_key = "[redacted]"'


def test_every_rule_compiles_and_has_keywords() -> None:
    shipped = resources.files("agentrun").joinpath("data/shapes.toml").read_text("utf-8")
    rules = tomllib.loads(shipped)["rule"]
    assert len({rule["kind"] for rule in rules}) >= 25
    keywords = [k for rule in rules for k in rule["keywords"]]
    assert all(rule["keywords"] for rule in rules)
    assert keywords == [k.lower() for k in keywords]  # the scrubber looks in lower case
    # A rule's pattern runs where one of its keywords is: every keyword, then every pattern
    # compiles and runs, and none takes the bare keywords for a secret.
    text = " ".join(keywords)
    assert secrets.scrub(text) == text
