"""The parts every event shares: the frozen model, the actors, usage, the outcome words."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


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
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float | None = None

    @property
    def tokens(self) -> int:
        return self.tokens_in + self.tokens_out

    def describe(self) -> str:
        """``1,234 tokens (1,000 in, 234 out), $0.0123`` — or ``cost unknown``."""
        cost = f"${self.cost_usd:.4f}" if self.cost_usd is not None else "cost unknown"
        if not self.tokens and self.cost_usd is None:
            return "no tokens"
        return f"{self.tokens:,} tokens ({self.tokens_in:,} in, {self.tokens_out:,} out), {cost}"

    def __add__(self, other: Usage) -> Usage:
        cost = None
        if self.cost_usd is not None or other.cost_usd is not None:
            cost = (self.cost_usd or 0.0) + (other.cost_usd or 0.0)
        return Usage(
            tokens_in=self.tokens_in + other.tokens_in,
            tokens_out=self.tokens_out + other.tokens_out,
            cost_usd=cost,
        )


Verdict = Literal["approve", "revise"]
SessionOutcome = Literal["ok", "failed", "abandoned", "aborted", "interrupted", "timeout"]
VerifyOutcome = Literal["pass", "fail", "skipped"]
