"""`to_json` writes exactly json.dumps's text (ensure_ascii=False, compact), and `from_json` reads exactly
json.loads's value, whichever of orjson and the standard library they take."""

from __future__ import annotations

import json
import uuid
from enum import Enum
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator_state import Api, to_json
from coordinator_state.classic.model import ClassicGroupState
from coordinator_state.errors import Error
from coordinator_state.output import declared_to_json, from_json


def reference(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


class Colour(Enum):
    """An enum json.dumps refuses (neither str nor int): so must to_json."""

    RED = "red"


ENUM_MEMBERS = st.sampled_from([*Api, *Error, *ClassicGroupState])
CHARACTERS = st.characters(codec=None, exclude_categories=()) | st.sampled_from(
    [*map(chr, range(0x20)), "\x7f", "\u2028", "\u2029", "\ud800", "\udfff", '"', "\\", "/", "é", "😀", "\ufeff"])
TEXT = st.text(CHARACTERS, max_size=12)
INTEGERS = st.integers() | st.sampled_from([2**63 - 1, -(2**63), 2**64 - 1, 2**64, -(2**63) - 1, 10**30])
SCALARS = st.none() | st.booleans() | INTEGERS | TEXT | ENUM_MEMBERS
KEYS = TEXT | st.sampled_from(["", "group_id"]) | ENUM_MEMBERS | INTEGERS | st.booleans() | st.none() | st.floats()
OBJECTS = st.recursive(
    SCALARS | st.floats(),
    lambda children: (st.lists(children, max_size=4) | st.dictionaries(KEYS, children, max_size=4)
                      | st.lists(children, max_size=3).map(tuple)),
    max_leaves=16)
PLAIN_OBJECTS = st.recursive(
    SCALARS, lambda children: st.lists(children, max_size=4) | st.dictionaries(TEXT, children, max_size=4),
    max_leaves=16)


@settings(max_examples=400, deadline=None)
@given(OBJECTS)
def test_to_json_writes_json_dumps_text(obj: Any) -> None:
    assert to_json(obj) == reference(obj)


@settings(max_examples=200, deadline=None)
@given(PLAIN_OBJECTS)
def test_plain_objects_write_json_dumps_text(obj: Any) -> None:
    """Mostly what orjson writes: no floats, no keys but str."""
    assert to_json(obj) == reference(obj)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(TEXT, PLAIN_OBJECTS, max_size=4))
def test_declared_values_write_json_dumps_text(value: dict[str, Any]) -> None:
    """What a stored state holds (str, int, bool, null, enum members; lone surrogates and huge integers too)."""
    assert declared_to_json(value) == reference(value)


@pytest.mark.parametrize("obj", [
    [float("nan"), float("inf"), -0.0, 1e16, 1e-7, 0.1],
    {"deep": json.loads("[" * 300 + "]" * 300)},
    [json.loads("[" * 900 + "]" * 900)],
    {"a": (1, "x"), "b": "\ud800"},
    {1: "x", None: 2, 1.5: 3, False: 4},
    [Api.HEARTBEAT, Error(0), ClassicGroupState.STABLE],
])
def test_what_orjson_writes_otherwise_is_json_dumps_text(obj: Any) -> None:
    assert to_json(obj) == reference(obj)


@pytest.mark.parametrize("obj", [[Colour.RED], {"id": uuid.UUID(int=1)}, {"s": {1, 2}}])
def test_what_json_dumps_refuses_to_json_refuses(obj: Any) -> None:
    with pytest.raises(TypeError):
        reference(obj)
    with pytest.raises(TypeError):
        to_json(obj)


TEXTS = st.one_of(
    PLAIN_OBJECTS.map(lambda obj: reference(obj).encode("utf-8", "surrogatepass")),
    OBJECTS.map(lambda obj: json.dumps(obj, default=str, skipkeys=True).encode("utf-8", "surrogatepass")),
    st.sampled_from([b"[18446744073709551616]", b'{"a":-9223372036854775809}', b"[NaN]", b"1E400", b'["\\ud800"]',
                     b"[" * 1100 + b"]" * 1100, b"\xef\xbb\xbf{}", b"{", b"\xff", "[1]".encode("utf-16")]))


@settings(max_examples=300, deadline=None)
@given(TEXTS)
def test_from_json_reads_json_loads_value(raw: bytes) -> None:
    try:
        expected = repr(json.loads(raw))
    except (ValueError, RecursionError) as exc:
        with pytest.raises(type(exc)):
            from_json(raw)
    else:
        assert repr(from_json(raw)) == expected
