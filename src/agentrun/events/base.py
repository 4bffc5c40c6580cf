"""The parts every event shares: the frozen model, the actors, usage, the outcome words."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from agentrun.errors import MalformedEventError


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class PayloadModel(Frozen):
    """What every payload has: ``summary``, its commit's subject line (DESIGN §2).

    Most summaries are a template of the payload's fields, named with the class
    (``class ProposalReady(PayloadModel, summary="#{number} ready for review")``);
    a payload whose summary needs more overrides ``summary``.
    """

    summary_template: ClassVar[str] = ""

    def __init_subclass__(cls, summary: str = "", **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if summary:
            cls.summary_template = summary

    def summary(self) -> str:
        return self.summary_template.format_map(self.__dict__)


def check_version(version: object, newest: int, what: str, kind: str) -> int:
    """``version`` (of ``what``'s ``kind``: schema, snapshot), if this release reads it.

    Versions count from 1; a newer one than this release knows asks to upgrade.
    """
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise MalformedEventError(f"{what} has no valid {kind} version ({version!r})")
    if version > newest:
        raise MalformedEventError(
            f"{what} is of {kind} v{version}; this agentrun reads up to v{newest}: upgrade agentrun"
        )
    return version


# --- actors -----------------------------------------------------------------


class KernelActor(Frozen):
    kind: Literal["kernel"] = "kernel"


class AgentActor(Frozen):
    kind: Literal["agent"] = "agent"
    role: str
    session: str


class HumanActor(Frozen):
    kind: Literal["human"] = "human"
    login: str


Actor = Annotated[KernelActor | AgentActor | HumanActor, Field(discriminator="kind")]


def describe_actor(actor: KernelActor | AgentActor | HumanActor) -> str:
    if isinstance(actor, AgentActor):
        return f"agent:{actor.role}"
    if isinstance(actor, HumanActor):
        return f"human:{actor.login}"
    return "kernel"


class Usage(Frozen):
    """What sessions spent. ``tokens_in`` is the input billed at the full rate; input read
    from or written to a prompt cache is ``cache_read`` and ``cache_write``, each priced at
    its own rate, and all four count toward ``max_tokens``. ``reported`` is False for a
    session whose agent reported nothing (a ``command`` agent that never called
    ``agent usage``): its zeros are unknown, not free."""

    tokens_in: int = 0
    tokens_out: int = 0
    cache_read: int = 0
    cache_write: int = 0
    cost_usd: float | None = None
    reported: bool = True

    @property
    def tokens(self) -> int:
        return self.tokens_in + self.tokens_out + self.cache_read + self.cache_write

    def describe(self) -> str:
        """``1,234 tokens (1,000 in, 234 out), $0.0123`` — or ``cost unknown``; a cache's
        tokens are named when there are any (``…, 5,000 cache read, 200 cache write``)."""
        if not self.reported and not self.tokens:
            return "usage unreported"
        cost = f"${self.cost_usd:.4f}" if self.cost_usd is not None else "cost unknown"
        if not self.tokens and self.cost_usd is None:
            return "no tokens"
        parts = [f"{self.tokens_in:,} in", f"{self.tokens_out:,} out"]
        parts += [f"{self.cache_read:,} cache read"] if self.cache_read else []
        parts += [f"{self.cache_write:,} cache write"] if self.cache_write else []
        return f"{self.tokens:,} tokens ({', '.join(parts)}), {cost}"

    def __add__(self, other: Usage) -> Usage:
        cost = None
        if self.cost_usd is not None or other.cost_usd is not None:
            cost = (self.cost_usd or 0.0) + (other.cost_usd or 0.0)
        return Usage(
            tokens_in=self.tokens_in + other.tokens_in,
            tokens_out=self.tokens_out + other.tokens_out,
            cache_read=self.cache_read + other.cache_read,
            cache_write=self.cache_write + other.cache_write,
            cost_usd=cost,
            reported=self.reported and other.reported,
        )


Verdict = Literal["approve", "revise"]
SessionOutcome = Literal["ok", "failed", "abandoned", "aborted", "interrupted", "timeout"]
VerifyOutcome = Literal["pass", "fail", "skipped"]
