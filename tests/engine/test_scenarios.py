"""Every conformance-style scenario through both engine paths (one suite, two backends).

The project's scenarios (tests/engine/scenarios, and the streams groups' tests/engine/scenarios_streams) always run,
with the project's own runner; the shared ones (../shared/conformance/scenarios and streams) too when the folder is
beside the checkout. Each runs against
`LocalCoordinator` and against `run_group` with the group's state encoded and decoded between every call,
so the Spark path's codec and its timeout rule are covered in milliseconds.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from coordinator_state import LocalCoordinator

from .paths import PATHS
from .scenario_runner import Mismatch, load, run_scenario

OWN = Path(__file__).resolve().parent / "scenarios"
OWN_STREAMS = Path(__file__).resolve().parent / "scenarios_streams"
SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "conformance"
FILES = [path for folder in (OWN, OWN_STREAMS, SHARED / "scenarios", SHARED / "streams")
         for path in sorted(folder.glob("*.json"))]


@pytest.mark.parametrize("path", sorted(PATHS))
@pytest.mark.parametrize("scenario", FILES, ids=lambda p: f"{p.parent.parent.name}/{p.parent.name}/{p.stem}")
def test_scenario(scenario: Path, path: str) -> None:
    run_scenario(load(scenario), PATHS[path])


def test_the_project_scenarios_are_there() -> None:
    assert len(list(OWN.glob("*.json"))) >= 41
    assert len(list(OWN_STREAMS.glob("*.json"))) >= 30


def _first_scenario() -> dict[str, Any]:
    return load(sorted(OWN.glob("x34_*.json"))[0])


@pytest.mark.parametrize("spoil", ["a value", "a type", "a list length", "a bound variable", "an absent response"])
def test_the_runner_finds_a_wrong_expectation(spoil: str) -> None:
    """The runner can fail: the same scenario with one expectation spoiled does."""
    scenario = copy.deepcopy(_first_scenario())
    run_scenario(scenario, LocalCoordinator)
    expects = [s["expect"] for s in scenario["steps"] if "expect" in s]
    joined = expects[2]["body"]  # a's JoinGroup answer: generation 1, two members
    if spoil == "a value":
        joined["generation_id"] = 2
    elif spoil == "a type":
        joined["skip_assignment"] = 0
    elif spoil == "a list length":
        joined["members"] = joined["members"][:1]
    elif spoil == "a bound variable":
        joined["leader"] = "$B"
    else:
        scenario["steps"].insert(1, {"expect": {"reply_to": "a", "correlation_id": 99}})
    with pytest.raises(Mismatch):
        run_scenario(scenario, LocalCoordinator)


def test_the_runner_matches_lists_in_any_order_and_operators() -> None:
    from .scenario_runner import match

    bindings: dict[str, Any] = {}
    match([{"id": "$X"}, {"id": "b"}], [{"id": "b"}, {"id": "a"}], bindings)
    assert bindings == {"X": "a"}
    match({"$re": "a-[0-9]+", "$as": "Y", "$not": "X"}, "a-1", bindings)
    assert bindings["Y"] == "a-1"
    match("$$lit", "$lit", bindings)
    with pytest.raises(Mismatch):
        match("$!X", "a", bindings)
    with pytest.raises(Mismatch):
        match(True, 1, bindings)
