"""The outcomes harness (bench/outcomes/run.py) on 3 real instances, through the real
``openai`` runtime against the scripted model server playing priced models.

A strong model (it knows each instance's fix) and a cheap one that never fixes the bug:
strong-only; a ladder from cheap to strong whose cheap failures are cheap (few tokens),
and one whose cheap failures are not (many turns of many tokens); and a ladder whose cheap
rung fixes one of the three. The dollars are checked against what the server reported,
priced by hand: the harness sums what agentrun recorded, so the two meet only when every
session's usage made it through the runtime, the log and the harness.

The sdists come from the package index (pip's configured one); without it, the test is
skipped and says so.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from support.model_server import ModelServer
from support.outcome_models import Behaviour, OutcomeModels

HARNESS = Path(__file__).resolve().parent.parent / "bench" / "outcomes"
COUNT = 3


def load_instances() -> ModuleType:
    spec = importlib.util.spec_from_file_location("outcome_instances", HARNESS / "_instances.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


INSTANCES = load_instances()
FIRST = INSTANCES.select(INSTANCES.load(), COUNT)
PRICES = {"strong": (3.0, 15.0), "cheap": (0.25, 2.0)}  # USD per million, in and out
MODELS = {  # model name: (priced as, how it behaves)
    "strong-model": ("strong", Behaviour(fixes=True, tokens_in=4_000, tokens_out=300)),
    "cheap-model": ("cheap", Behaviour(fixes=False, tokens_in=500, tokens_out=50)),
    "cheap-verbose": (
        "cheap",
        Behaviour(fixes=False, tokens_in=60_000, tokens_out=3_000, reading_turns=8),
    ),
    # It fixes the first instance's bug, and only that one.
    "cheap-lucky": (
        "cheap",
        Behaviour(fixes=False, tokens_in=500, tokens_out=50, fixes_only=frozenset({FIRST[0].id})),
    ),
}
CONFIGS = {  # name: the implement ladder's cheap model (None: strong only)
    "strong-only": None,
    "ladder-cheap-failures": "cheap-model",
    "ladder-expensive-failures": "cheap-verbose",
    "ladder-cheap-solves-one": "cheap-lucky",
}
UNREACHABLE = ("NewConnectionError", "Temporary failure in name resolution", "Network is")


def key_of(config: str) -> str:
    """The variable holding a configuration's key: each has its own, so that the server's
    log tells their requests apart."""
    return "OUTCOMES_KEY_" + config.upper().replace("-", "_")


def runtime(name: str, url: str, model: str, key: str) -> str:
    return (
        f'[runtimes.{name}]\nkind = "openai"\nbase_url = "{url}/v1"\nmodel = "{model}"\n'
        f'api_key_env = "{key}"\nmax_retries = 0\n'
    )


def config_text(url: str, cheap: str | None, key: str) -> str:
    """Plan and reviews on the strong model; implement too, or a ladder from ``cheap``."""
    text = '[roles]\ndefault = ["strong"]\n\n' + runtime("strong", url, "strong-model", key)
    if cheap:
        text += '\n[ladder.implement]\nrungs = ["cheap", "strong"]\nclimb_after = 1\n\n'
        text += runtime("cheap", url, cheap, key)
    for model, (tier, _) in MODELS.items():
        price_in, price_out = PRICES[tier]
        text += f'\n[prices."{model}"]\ninput = {price_in}\noutput = {price_out}\n'
    # The sandbox would only slow the project's tests here; it is not what is measured.
    return text + '\n[isolation]\nmode = "none"\n'


def priced(requests: list[Any]) -> float:
    """What the server's answers cost at the configured prices."""
    total = 0.0
    for request in requests:
        tier, behaviour = MODELS[request.body["model"]]
        price_in, price_out = PRICES[tier]
        total += behaviour.tokens_in * price_in + behaviour.tokens_out * price_out
    return total / 1_000_000


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The first instances' sdists, fetched from the package index now."""
    folder = tmp_path_factory.mktemp("sdists")
    for instance in FIRST:
        try:
            INSTANCES.fetch(instance.project, folder)
        except INSTANCES.InstanceError as err:
            if any(word in str(err) for word in UNREACHABLE):
                pytest.skip(f"the package index is unreachable: {err}")
            raise
    return folder


@pytest.fixture(scope="module")
def server() -> Iterator[ModelServer]:
    behaviours = {name: behaviour for name, (_, behaviour) in MODELS.items()}
    with ModelServer(OutcomeModels(FIRST, behaviours)) as running:
        yield running


def measure(server: ModelServer, cache: Path, tmp: Path) -> dict[str, Any]:
    """run.py on the first instances with every configuration at once: its JSON."""
    paths = []
    for name, cheap in CONFIGS.items():
        paths += ["--config", str(tmp / f"{name}.toml")]
        (tmp / f"{name}.toml").write_text(config_text(server.url, cheap, key_of(name)))
    options = ["--instances", str(COUNT), "--jobs", "4", "--cache", str(cache), "--json"]
    keys = {key_of(name): f"k-{name}" for name in CONFIGS}
    done = subprocess.run(
        [sys.executable, str(HARNESS / "run.py"), *paths, *options],
        capture_output=True,
        text=True,
        env={**os.environ, **keys},
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return {c["name"]: c for c in json.loads(done.stdout)["configs"]}


def served(server: ModelServer, name: str) -> list[Any]:
    """The requests one configuration's builds made: by the key they were sent with."""
    bearer = f"Bearer k-{name}"
    return [
        r
        for r in server.model_requests()
        if any(k.lower() == "authorization" and v == bearer for k, v in r.headers.items())
    ]


@pytest.mark.slow
def test_dollars_per_solved_instance(server: ModelServer, cache: Path, tmp_path: Path) -> None:
    reports = measure(server, cache, tmp_path)
    for name in CONFIGS:
        report = reports[name]
        s = report["summary"]
        print(f"dollars per solved instance, {name}: ${s['usd_per_solved']:.4f} ({s['solved']}/3)")
        # Every instance solved, on the strong model at the latest, and the dollars are
        # the server's usage priced: nothing lost or counted twice on the way.
        assert (s["instances"], s["solved"], s["solved_rate"]) == (COUNT, COUNT, 1.0), report
        assert [r["state"] for r in report["instances"]] == ["complete"] * COUNT
        assert s["usd"] == pytest.approx(priced(served(server, name)), abs=1e-5)
        assert s["usd_per_solved"] == pytest.approx(s["usd"] / COUNT, abs=1e-6)
        assert s["usd_unsolved"] == 0
        assert sum(s["by_phase"].values()) == pytest.approx(s["usd"], abs=1e-5)
        assert sum(s["by_model"].values()) == pytest.approx(s["usd"], abs=1e-5)
        assert s["unpriced"] == []

    strong, cheap, expensive, lucky = (reports[name]["summary"] for name in CONFIGS)
    assert strong["rounds"] == COUNT and strong["by_rung"] == {}
    assert set(strong["by_model"]) == {"strong:strong-model"}
    # The ladder: each instance fails a round on the cheap rung, then the strong one fixes it.
    assert cheap["rounds"] == expensive["rounds"] == 2 * COUNT
    assert set(cheap["by_rung"]) == {"implement#0 cheap", "implement#1 strong"}
    assert cheap["by_rung"]["implement#1 strong"] == pytest.approx(
        strong["by_phase"]["implement"], abs=1e-5
    )
    # Cheap failures cost little more than strong-only (the wasted round's cheap session
    # and its review); expensive ones cost more than the whole strong-only run.
    assert strong["usd_per_solved"] < cheap["usd_per_solved"] < 1.5 * strong["usd_per_solved"]
    assert expensive["by_rung"]["implement#0 cheap"] > strong["usd"]
    assert expensive["usd_per_solved"] > 2 * strong["usd_per_solved"]
    # A cheap rung that solves one instance of three pays for the others' failed rounds.
    assert lucky["rounds"] == 2 * COUNT - 1
    assert lucky["usd_per_solved"] < strong["usd_per_solved"]


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('[[verify]]\nname = "mine"\ncommand = "true"\n', "leave [verify] out"),
        ("[roles\n", "not TOML"),
        ('[roles]\ndefault = ["nowhere"]\n', "nowhere"),
    ],
)
def test_a_configuration_it_cannot_use_is_one_line(tmp_path: Path, text: str, said: str) -> None:
    config = tmp_path / "bad.toml"
    config.write_text(text)
    done = subprocess.run(
        [
            sys.executable,
            str(HARNESS / "run.py"),
            "--config",
            str(config),
            "--cache",
            "/nonexistent",
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1
    assert len(done.stderr.strip().splitlines()) == 1 and said in done.stderr, done.stderr
    assert done.stdout == ""
