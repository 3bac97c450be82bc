"""The project's own runner of conformance-style scenarios (the format of ../shared/conformance/README.md).

So that tests/engine/scenarios run from a clean clone, and through any coordinator with the interface of
PROTOCOL.md section 7 (`handle`, `advance_to`, `describe`): `LocalCoordinator`, or the Spark path's
`run_group` with the state encoded between events (paths.py).

A scenario is a list of steps: `send` (variables substituted), `advance_to`, `expect` (exactly one response
with that reply_to and correlation_id, matching), `expect_none`, `expect_group` (the snapshot matches). Matching:
an object matches when every key given matches (others are not checked); a list has the same length and
its elements match one to one in any order; scalars are equal with their type; `"$NAME"` binds or compares,
`"$!NAME"` differs from a bound value, `{"$re", "$as", "$not"}` is an operator object, `"$$x"` is `"$x"`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

OPERATOR_KEYS = frozenset({"$re", "$as", "$not"})


class Coordinator(Protocol):
    def handle(self, request: Any) -> list[dict[str, Any]]: ...

    def advance_to(self, ts_ms: int) -> list[dict[str, Any]]: ...

    def describe(self, group_id: str) -> dict[str, Any] | None: ...


class Mismatch(AssertionError):
    """The first difference between a scenario and what the coordinator did."""


Bindings = dict[str, Any]


def _variable(value: Any) -> str | None:
    """The name in `"$NAME"` (or `"$!NAME"`), None for any other value (`"$$x"` is a literal)."""
    if isinstance(value, str) and value.startswith("$") and not value.startswith("$$") and len(value) > 1:
        return value[1:]
    return None


def substitute(value: Any, bindings: Bindings, where: str = "send") -> Any:
    if isinstance(value, str):
        name = _variable(value)
        if name is None:
            return value[1:] if value.startswith("$$") else value
        if name not in bindings:
            raise Mismatch(f"{where}: {value} is not bound")
        return bindings[name]
    if isinstance(value, list):
        return [substitute(item, bindings, f"{where}[{i}]") for i, item in enumerate(value)]
    if isinstance(value, dict):
        return {key: substitute(item, bindings, f"{where}.{key}") for key, item in value.items()}
    return value


def _same(expected: Any, actual: Any) -> bool:
    """Equal, type included: true is not 1, 1 is not 1.0."""
    return type(expected) is type(actual) and expected == actual


def _bind(name: str, actual: Any, bindings: Bindings, where: str) -> None:
    if name.startswith("!"):
        other = name[1:]
        if other not in bindings:
            raise Mismatch(f"{where}: $!{other} compares with ${other}, which is not bound")
        if _same(bindings[other], actual):
            raise Mismatch(f"{where}: expected anything but ${other} = {bindings[other]!r}, got that")
    elif name in bindings:
        if not _same(bindings[name], actual):
            raise Mismatch(f"{where}: expected ${name} = {bindings[name]!r}, got {actual!r}")
    else:
        bindings[name] = actual


def match(expected: Any, actual: Any, bindings: Bindings, where: str = "") -> None:
    """Raises Mismatch at the first difference; binds variables on the way (in `bindings`, in place)."""
    name = _variable(expected)
    if name is not None:
        _bind(name, actual, bindings, where)
    elif isinstance(expected, dict) and expected and set(expected) <= OPERATOR_KEYS:
        if "$re" in expected and not (isinstance(actual, str) and re.fullmatch(expected["$re"], actual)):
            raise Mismatch(f"{where}: expected a string matching {expected['$re']!r}, got {actual!r}")
        if "$not" in expected:
            _bind("!" + expected["$not"], actual, bindings, where)
        if "$as" in expected:
            _bind(expected["$as"], actual, bindings, where)
    elif isinstance(expected, dict):
        if not isinstance(actual, dict):
            raise Mismatch(f"{where}: expected an object, got {actual!r}")
        for key, value in expected.items():
            if key not in actual:
                raise Mismatch(f"{where}.{key}: missing")
            match(value, actual[key], bindings, f"{where}.{key}")
    elif isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            raise Mismatch(f"{where}: expected a list of {len(expected)}, got {actual!r}")
        found = _match_any_order(expected, actual, dict(bindings), where)
        if found is None:
            raise Mismatch(f"{where}: no one-to-one match of {expected!r} in {actual!r}")
        bindings.update(found)
    else:
        if isinstance(expected, str) and expected.startswith("$$"):
            expected = expected[1:]
        if not _same(expected, actual):
            raise Mismatch(f"{where}: expected {expected!r}, got {actual!r}")


def _match_any_order(expected: list[Any], actual: list[Any], bindings: Bindings, where: str) -> Bindings | None:
    """Bindings under which each expected element matches a different actual element (backtracking)."""
    if not expected:
        return bindings
    first, rest = expected[0], expected[1:]
    for index, candidate in enumerate(actual):
        trial = dict(bindings)
        try:
            match(first, candidate, trial, f"{where}[{index}]")
        except Mismatch:
            continue
        found = _match_any_order(rest, actual[:index] + actual[index + 1:], trial, where)
        if found is not None:
            return found
    return None


def run_scenario(scenario: dict[str, Any], make: Callable[[dict[str, Any]], Coordinator]) -> None:
    """Plays the scenario against `make(config)`; raises Mismatch (with the step) at the first difference."""
    coordinator = make(scenario.get("config", {}))
    responses: list[dict[str, Any]] = []
    bindings: Bindings = {}
    for number, step in enumerate(scenario["steps"], start=1):
        [(kind, argument)] = step.items()
        try:
            _play(kind, argument, coordinator, responses, bindings)
        except Mismatch as mismatch:
            raise Mismatch(f"step {number} ({kind}) {mismatch}") from None


def _play(kind: str, argument: Any, coordinator: Coordinator, responses: list[dict[str, Any]],
          bindings: Bindings) -> None:
    if kind == "send":
        responses += coordinator.handle(substitute(argument, bindings))
    elif kind == "advance_to":
        responses += coordinator.advance_to(argument)
    elif kind in ("expect", "expect_none"):
        key = (substitute(argument["reply_to"], bindings), substitute(argument["correlation_id"], bindings))
        found = [r for r in responses if (r.get("reply_to"), r.get("correlation_id")) == key]
        if kind == "expect_none":
            if found:
                raise Mismatch(f"expected no response to {key}, got {found[0]!r}")
            return
        if len(found) != 1:
            raise Mismatch(f"expected one response to {key}, got {len(found)}")
        rest = {k: v for k, v in argument.items() if k not in ("reply_to", "correlation_id")}
        match(rest, found[0], bindings, f"[{key[0]}#{key[1]}]")
    elif kind == "expect_group":
        snapshot = coordinator.describe(argument["group_id"])
        if argument["snapshot"] is None:
            if snapshot is not None:
                raise Mismatch(f"expected no group {argument['group_id']!r}, got {snapshot!r}")
        elif snapshot is None:
            raise Mismatch(f"expected group {argument['group_id']!r}, there is none")
        else:
            match(argument["snapshot"], snapshot, bindings, "snapshot")
    else:
        raise Mismatch(f"unknown step {kind!r}")


def load(path: Path) -> dict[str, Any]:
    scenario: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return scenario
