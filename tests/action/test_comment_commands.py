"""``/agentrun …`` lines in comments: parsed exactly, anything else refused clearly."""

from __future__ import annotations

from agentrun.hosted.commands import Command, Refusal, parse


def test_a_comment_without_commands_has_none() -> None:
    assert parse("LGTM, thanks!\nagentrun is nice /agentrun pause") == []


def test_each_control_verb() -> None:
    for verb in ("pause", "resume", "abort", "retry", "reconcile", "status"):
        assert parse(f"/agentrun {verb}") == [Command(verb)]  # type: ignore[arg-type]


def test_verbs_are_case_insensitive_and_leading_space_is_allowed() -> None:
    assert parse("  /agentrun PAUSE") == [Command("pause")]


def test_answer_without_id() -> None:
    assert parse("/agentrun answer use the v2 API") == [Command("answer", "use the v2 API")]


def test_answer_with_an_escalation_id() -> None:
    assert parse("/agentrun answer e2 yes, drop it") == [Command("answer", "yes, drop it", "e2")]


def test_answer_text_spans_the_following_lines_up_to_the_next_command() -> None:
    body = (
        "Thoughts first.\n/agentrun answer e1\nKeep the old name.\n\n"
        "And add a test.\n/agentrun resume"
    )
    assert parse(body) == [
        Command("answer", "Keep the old name.\n\nAnd add a test.", "e1"),
        Command("resume"),
    ]


def test_an_empty_answer_is_refused() -> None:
    (found,) = parse("/agentrun answer e3   ")
    assert isinstance(found, Refusal)
    assert "answer is empty" in found.message


def test_unknown_verbs_and_a_bare_prefix_are_refused_with_the_usage() -> None:
    unknown, bare = parse("/agentrun merge\n/agentrun")
    assert isinstance(unknown, Refusal) and isinstance(bare, Refusal)
    assert unknown.message.startswith("unknown command `merge`")
    assert "`/agentrun answer [ID] TEXT`" in unknown.message
    assert bare.message.startswith("a command needs a verb")


def test_a_longer_word_is_not_the_prefix() -> None:
    assert parse("/agentrunner pause") == []


def test_quoted_and_fenced_commands_do_not_run() -> None:
    body = (
        "> /agentrun abort\n"
        "To answer, write:\n"
        "```\n/agentrun answer e1 TEXT\n```\n"
        "~~~~\n/agentrun abort\n~~~~\n"
        "/agentrun status"
    )
    assert parse(body) == [Command("status")]


def test_crlf_comment_bodies() -> None:
    assert parse("/agentrun answer ok\r\nthanks\r\n") == [Command("answer", "ok\nthanks")]


def test_an_odd_unknown_verb_is_not_echoed() -> None:
    (found,) = parse("/agentrun @everyone`x`")
    assert isinstance(found, Refusal)
    assert found.message.startswith("unknown command: use `/agentrun answer")
    assert "@everyone" not in found.message
