"""Every conformance scenario (the shared ones and tests/engine/scenarios) through `run_group`, as the job runs them.

`RunGroupCoordinator` has LocalCoordinator's interface (PROTOCOL.md section 7) but keeps each group only as
the bytes `run_group` returns, as Spark's state store does: every request is one `run_group` call on the
group's serialised state at the coordinator's clock, `advance_to` is a call with no requests at the new
watermark. ListGroups, which no single group's step can answer, is answered from every group's state the
way a gateway answers it from the snapshot topic.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from coordinator_state import (
    EngineConfig,
    Invalid,
    ListGroups,
    Tick,
    decode_group,
    invalid_response,
    list_groups_body,
    parse_request,
    run_group,
)
from coordinator_state.responses import envelope

HERE = Path(__file__).resolve().parent
SHARED = HERE.parents[1].parent / "shared" / "conformance"
SCENARIOS = sorted((HERE / "scenarios").glob("*.json")) + sorted((SHARED / "scenarios").glob("*.json"))


class RunGroupCoordinator:
    """LocalCoordinator's interface over `run_group` and serialised group states."""

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        self.config = EngineConfig.from_mapping(config)
        self.states: dict[str, bytes] = {}
        self.clock = 0

    def _step(self, group_id: str, watermark: int, requests: list[Any]) -> list[dict[str, Any]]:
        outcome = run_group(self.states.get(group_id), watermark, requests, self.config)
        if outcome.state is None:
            self.states.pop(group_id, None)
        else:
            self.states[group_id] = outcome.state
        return outcome.responses

    def handle(self, request: Any) -> list[dict[str, Any]]:
        parsed = parse_request(request)
        if isinstance(parsed, Tick):
            return []
        if isinstance(parsed, Invalid):
            answer = invalid_response(parsed)
            return [] if answer is None else [answer]
        if isinstance(parsed, ListGroups):
            t = max(parsed.timestamp_ms, self.clock)
            responses = [r for group_id in list(self.states) for r in self._step(group_id, t, [])]
            snapshots = [decode_group(state, self.config).snapshot() for state in self.states.values()]
            body = list_groups_body(parsed.reply.version, snapshots, parsed.states_filter, parsed.types_filter)
            return [*responses, envelope(parsed.reply, None, t, body)]
        return self._step(parsed.group_id, self.clock, [parsed])

    def advance_to(self, ts_ms: int) -> list[dict[str, Any]]:
        self.clock = max(self.clock, ts_ms)
        return [r for group_id in list(self.states) for r in self._step(group_id, ts_ms, [])]

    def describe(self, group_id: str) -> dict[str, Any] | None:
        state = self.states.get(group_id)
        return None if state is None else decode_group(state, self.config).snapshot()


def _runner() -> ModuleType:
    spec = importlib.util.spec_from_file_location("run_conformance", SHARED / "run_conformance.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(not (SHARED / "run_conformance.py").is_file(),
                    reason="../shared/conformance is not beside the checkout")
@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.name)
def test_the_scenario_passes_through_run_group(path: Path) -> None:
    _runner().run_scenario(json.loads(path.read_text()), RunGroupCoordinator)
