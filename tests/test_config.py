"""``.agentrun.toml``: one model, one loader; errors name the file, the key path, the rule."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agentrun.commands.init import template_text
from agentrun.config import (
    CONFIG_FILE,
    Config,
    FinalizeStep,
    Pipeline,
    Policy,
    RuntimeConfig,
    VerifyStep,
    config_from_data,
    load_config,
    parse_config,
)
from agentrun.errors import AgentrunError, ConfigError

SOURCE = "/repo/.agentrun.toml"


def error(text: str) -> str:
    with pytest.raises(ConfigError) as err:
        parse_config(text, SOURCE)
    return str(err.value)


def test_an_empty_file_is_valid() -> None:
    assert parse_config("", SOURCE) == Config()


def test_comments_only_are_valid() -> None:
    assert parse_config("# nothing yet\n\n# [policy]\n", SOURCE) == Config()


def test_defaults() -> None:
    config = Config()
    assert config.roles == {}
    assert config.runtimes == {}
    assert config.policy == Policy(
        max_phase_attempts=2,
        max_review_rounds=3,
        session_budget_seconds=1800,
        check_timeout_seconds=600,
    )
    assert config.pipeline == Pipeline(plan_review=True, code_review=True)
    assert config.verify == ()
    assert config.finalize == ()
    assert config.forge.kind == "auto"


def test_a_full_file() -> None:
    config = parse_config(
        """
[roles]
default = ["scripted"]
code-review = ["reviewer", "scripted"]

[runtimes.scripted]
kind = "script"
script = "tools/agent-script.toml"

[runtimes.reviewer]
kind = "command"
command = ["python3", "tools/review.py"]
prompt = "arg"
env = { MODE = "strict" }
model = "small"

[policy]
max_phase_attempts = 3
max_review_rounds = 5
session_budget_seconds = 60.5
check_timeout_seconds = 30

[pipeline]
plan_review = false

[[verify]]
name = "tests"
command = "pytest -q"
paths = ["src/**", "tests/**"]

[[verify]]
name = "security"
agent = "security-review"

[[finalize]]
name = "changelog"
agent = "implement"
""",
        SOURCE,
    )
    assert config.roles == {"default": ("scripted",), "code-review": ("reviewer", "scripted")}
    assert config.runtimes["scripted"] == RuntimeConfig(
        kind="script", script="tools/agent-script.toml"
    )
    assert config.runtimes["reviewer"] == RuntimeConfig(
        kind="command",
        command=("python3", "tools/review.py"),
        prompt="arg",
        env={"MODE": "strict"},
        model="small",
    )
    assert config.policy == Policy(
        max_phase_attempts=3,
        max_review_rounds=5,
        session_budget_seconds=60.5,
        check_timeout_seconds=30,
    )
    assert config.pipeline == Pipeline(plan_review=False, code_review=True)
    assert config.verify == (
        VerifyStep(name="tests", command="pytest -q", paths=("src/**", "tests/**")),
        VerifyStep(name="security", agent="security-review"),
    )
    assert config.finalize == (FinalizeStep(name="changelog", agent="implement"),)


def test_the_snapshot_in_build_created_reads_back_the_same() -> None:
    config = parse_config(
        '[roles]\ndefault = "a"\n[runtimes.a]\nkind = "command"\ncommand = ["x"]\n'
        '[[verify]]\nname = "t"\ncommand = "pytest"\npaths = ["src/**"]\n',
        SOURCE,
    )
    assert config_from_data(config.model_dump(mode="json"), "snapshot") == config


# --- errors -----------------------------------------------------------------


def test_an_unknown_top_level_key() -> None:
    assert error("colour = 1") == f"{SOURCE} at `colour`: unknown key"


def test_an_unknown_nested_key() -> None:
    assert (
        error("[policy]\nmax_phase_atempts = 2")
        == f"{SOURCE} at `policy.max_phase_atempts`: unknown key"
    )


def test_an_unknown_key_in_a_step() -> None:
    text = error('[[finalize]]\nname = "n"\ncommand = "x"\ncolour = 1')
    assert text == f"{SOURCE} at `finalize.0.colour`: unknown key"


def test_a_wrong_type() -> None:
    text = error('[policy]\nmax_phase_attempts = "two"')
    assert text.startswith(f"{SOURCE} at `policy.max_phase_attempts`: ")
    assert "valid integer" in text


def test_a_value_out_of_range() -> None:
    text = error("[policy]\nmax_phase_attempts = 0")
    assert text.startswith(f"{SOURCE} at `policy.max_phase_attempts`: ")
    assert "greater than or equal to 1" in text


def test_an_unknown_runtime_kind() -> None:
    text = error('[runtimes.x]\nkind = "docker"')
    assert text.startswith(f"{SOURCE} at `runtimes.x.kind`: ")
    assert "'script', 'command', 'claude', 'codex', 'aider', 'openai' or 'anthropic'" in text


def test_a_script_runtime_needs_its_script() -> None:
    assert error('[runtimes.s]\nkind = "script"') == (
        f'{SOURCE} at `runtimes.s`: a script runtime needs `script = "path/to/script.toml"`'
    )


def test_a_command_runtime_needs_its_command() -> None:
    assert error('[runtimes.c]\nkind = "command"') == (
        f'{SOURCE} at `runtimes.c`: a command runtime needs `command = ["program", "arg", ...]`'
    )


def test_an_empty_command_is_no_command() -> None:
    text = error('[runtimes.c]\nkind = "command"\ncommand = []')
    assert "a command runtime needs" in text


@pytest.mark.parametrize(
    "body",
    ['command = "pytest"\nagent = "security"', ""],
    ids=["both", "neither"],
)
@pytest.mark.parametrize("group", ["verify", "finalize"])
def test_a_step_needs_exactly_one_of_command_and_agent(group: str, body: str) -> None:
    text = error(f'[[{group}]]\nname = "t"\n{body}')
    assert text == f"{SOURCE} at `{group}.0`: step 't' needs exactly one of `command` or `agent`"


@pytest.mark.parametrize("body", ['command = ""', 'agent = ""', 'command = "  "'])
def test_an_empty_command_or_agent_is_not_a_step(body: str) -> None:
    """A blank command would "pass" every build; a blank agent names no role."""
    text = error(f'[[verify]]\nname = "t"\n{body}')
    assert text.startswith(f"{SOURCE} at `verify.0")


@pytest.mark.parametrize("group", ["verify", "finalize"])
def test_step_names_are_unique(group: str) -> None:
    text = error(
        f'[[{group}]]\nname = "t"\ncommand = "a"\n'
        f'[[{group}]]\nname = "u"\ncommand = "b"\n'
        f'[[{group}]]\nname = "t"\ncommand = "c"\n'
    )
    assert text == f"{SOURCE}: [[{group}]] step names must be unique: t"


def test_a_verify_and_a_finalize_step_may_share_a_name() -> None:
    config = parse_config(
        '[[verify]]\nname = "t"\ncommand = "a"\n[[finalize]]\nname = "t"\ncommand = "b"\n', SOURCE
    )
    assert [s.name for s in config.verify] == [s.name for s in config.finalize] == ["t"]


@pytest.mark.parametrize("name", ["two words", "a/b", "tests@2", "verify:x", ""])
def test_a_step_name_is_a_plain_word(name: str) -> None:
    text = error(f'[[verify]]\nname = "{name}"\ncommand = "x"')
    assert text.startswith(f"{SOURCE} at `verify.0.name`: ")
    assert "plain word" in text


def test_bad_toml() -> None:
    text = error("[policy\nmax_phase_attempts = 2")
    assert text.startswith(f"{SOURCE}: not valid TOML: ")
    assert "\n" not in text


def test_errors_are_config_errors_that_exit_1() -> None:
    with pytest.raises(ConfigError) as err:
        parse_config("colour = 1", SOURCE)
    assert isinstance(err.value, AgentrunError)  # what the CLI turns into exit 1


# --- roles ------------------------------------------------------------------


def test_a_role_given_as_a_string_becomes_a_list() -> None:
    config = parse_config('[roles]\ndefault = "claude"\ncode-review = ["codex", "claude"]', SOURCE)
    assert config.roles == {"default": ("claude",), "code-review": ("codex", "claude")}


def test_a_role_must_name_runtimes() -> None:
    text = error("[roles]\ndefault = 3")
    assert text.startswith(f"{SOURCE} at `roles.default`: ")


def test_runtimes_for_a_role_fall_back_to_default() -> None:
    config = Config(roles={"default": ("claude",), "code-review": ("codex", "claude")})
    assert config.runtimes_for("code-review") == ("codex", "claude")
    assert config.runtimes_for("plan") == ("claude",)
    assert config.runtimes_for("security-review") == ("claude",)


def test_runtimes_for_a_role_without_default_is_empty() -> None:
    config = Config(roles={"code-review": ("codex",)})
    assert config.runtimes_for("code-review") == ("codex",)
    assert config.runtimes_for("implement") == ()
    assert Config().runtimes_for("plan") == ()


# --- files ------------------------------------------------------------------


def test_the_init_template_parses_to_the_defaults() -> None:
    assert parse_config(template_text(), "template") == Config()


def test_the_init_template_examples_parse_when_uncommented() -> None:
    """Each commented example in the template is valid once its `# ` is removed."""
    setting = re.compile(r"^# (\[\[?[a-z.\"-]+\]\]?$|[a-z_-]+ = )")
    lines = [line[2:] if setting.match(line) else "" for line in template_text().splitlines()]
    config = parse_config("\n".join(lines), "template")
    assert config.roles == {"default": ("my-agent",), "code-review": ("codex", "my-agent")}
    assert set(config.runtimes) == {"my-agent", "scripted"}
    assert [s.name for s in config.verify] == ["tests"]
    assert [s.name for s in config.finalize] == ["changelog"]
    assert config.budget.max_cost_usd == 5.0
    assert set(config.prices) == {"my-model"}
    assert (config.forge.kind, config.forge.labels.done) == ("auto", "agentrun:done")
    assert config.sync.remote == "origin"
    assert set(config.mcp.servers) == {"docs"}
    assert (config.mcp.servers_for("implement"), config.mcp.servers_for("code-review")) == (
        ("docs",),
        (),
    )


def test_load_config_without_a_file_means_defaults(tmp_path: Path) -> None:
    assert load_config(tmp_path) == Config()


def test_load_config_reads_the_file(tmp_path: Path) -> None:
    (tmp_path / CONFIG_FILE).write_text("[policy]\nmax_review_rounds = 7\n", encoding="utf-8")
    assert load_config(tmp_path).policy.max_review_rounds == 7


def test_load_config_names_the_file_in_errors(tmp_path: Path) -> None:
    path = tmp_path / CONFIG_FILE
    path.write_text("[policy]\nmax_phase_atempts = 2\n", encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        load_config(tmp_path)
    assert str(err.value) == f"{path} at `policy.max_phase_atempts`: unknown key"


def test_load_config_reads_utf8(tmp_path: Path) -> None:
    (tmp_path / CONFIG_FILE).write_text(
        '# Prüfung\n[[verify]]\nname = "tests"\ncommand = "echo ✓"\n', encoding="utf-8"
    )
    assert load_config(tmp_path).verify[0].command == "echo ✓"


# --- errors in TOML's words ---------------------------------------------------------


def test_a_command_given_as_a_string_says_to_write_an_array() -> None:
    text = '[runtimes.mine]\nkind = "command"\ncommand = "python3 tools/agent.py --fast"\n'
    assert error(text) == (
        f"{SOURCE} at `runtimes.mine.command`: expects an array of strings, not a string: "
        'write command = ["python3", "tools/agent.py", "--fast"]'
    )


@pytest.mark.parametrize("group", ["verify", "finalize"])
def test_a_single_bracket_step_table_says_to_write_two_brackets(group: str) -> None:
    assert error(f'[{group}]\nname = "tests"\ncommand = "pytest -q"\n') == (
        f"{SOURCE}: [{group}] is one table, but each {group} step is an entry of an array "
        f"of tables: write [[{group}]] (two brackets), once per step"
    )


def test_a_misspelled_role_is_refused_with_did_you_mean() -> None:
    message = error('[roles]\nimplment = ["claude"]\n')
    assert message.startswith(
        f"{SOURCE} at `roles.implment`: no role 'implment': did you mean 'implement'? (roles: "
        "default, plan, plan-review, implement, code-review, verify, finalize, reconcile, select)"
    )


def test_an_agent_steps_role_is_a_role() -> None:
    text = '[roles]\nsecurity = ["claude"]\n\n[[verify]]\nname = "audit"\nagent = "security"\n'
    assert parse_config(text, SOURCE).roles["security"] == ("claude",)


def test_a_misspelled_runtime_is_refused_at_the_key_written() -> None:
    """`roles.default`, not the `roles.plan` a role without its own entry falls back to."""
    message = error('[roles]\ndefault = ["cluade"]\n')
    assert message == (
        f"{SOURCE} at `roles.default`: no runtime 'cluade': did you mean 'claude'? (configure "
        "[runtimes.cluade], or use one of: claude, codex, aider, openai, anthropic)"
    )
    mine = '[runtimes.my-agent]\nkind = "command"\ncommand = ["true"]\n'
    assert error(mine + '[roles]\ncode-review = ["my-agnet:gpt"]\n').startswith(
        f"{SOURCE} at `roles.code-review`: no runtime 'my-agnet': did you mean 'my-agent'? "
    )
    assert parse_config(mine + '[roles]\ndefault = ["my-agent", "claude:opus"]\n', SOURCE)


def test_mcp_servers_and_the_roles_that_get_them() -> None:
    config = parse_config(
        """
[mcp.servers.docs]
command = "docs-mcp"
args = ["--stdio"]
env = { DOCS_MODE = "read" }
pass_env = ["DOCS_TOKEN"]

[mcp.servers.search]
url = "https://mcp.example.com/mcp"

[mcp.roles]
default = ["docs"]
implement = ["docs", "search"]
""",
        "t.toml",
    )
    docs = config.mcp.servers["docs"]
    assert (docs.command, docs.args, docs.env, docs.pass_env) == (
        "docs-mcp",
        ("--stdio",),
        {"DOCS_MODE": "read"},
        ("DOCS_TOKEN",),
    )
    assert config.mcp.servers_for("implement") == ("docs", "search")
    assert config.mcp.servers_for("code-review") == ("docs",)
    every = parse_config('[mcp.servers.a]\ncommand = "a"\n[mcp.servers.b]\nurl = "http://x/"', "t")
    assert every.mcp.servers_for("plan") == ("a", "b")  # no [mcp.roles]: every role, every one


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('[mcp.servers.x]\nargs = ["a"]', "exactly one"),
        ('[mcp.servers.x]\ncommand = "a"\nurl = "http://h/"', "exactly one"),
        ('[mcp.servers.x]\nurl = "ftp://h/"', "is not an http"),
        ('[mcp.servers.x]\nurl = "http://h/"\npass_env = ["A"]', "are for a `command` server"),
        ('[mcp.servers.agentrun]\ncommand = "a"', "'agentrun' is reserved for agentrun's own"),
        ('[mcp.servers.x]\ncommand = ["a", "b"]', "its arguments go in `args`"),
        ('[mcp.servers.x]\ncommand = "a"\n[mcp.roles]\nplan = ["y"]', "'y' is not a server"),
        ('[mcp.servers.x]\ncommand = "a"\n[mcp.roles]\nplann = ["x"]', "'plann' is not a role"),
        ('[mcp.servers.x]\ncommand = "a"\npass_env = ["GITHUB_TOKEN"]', "would pass GITHUB_TOKEN"),
        ('[mcp.servers.x]\ncommand = "a"\nbogus = 1', "`mcp.servers.x.bogus`: unknown key"),
    ],
)
def test_a_wrong_mcp_table_is_one_line(text: str, expected: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(text, "t.toml")
    assert expected in str(err.value)
    assert "\n" not in str(err.value)
