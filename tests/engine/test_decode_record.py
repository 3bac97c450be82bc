"""`decode_record` reads a record as the standard library does: the same values, integers of any size included."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from coordinator_state import Invalid, decode_record

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4),
    max_leaves=12)


def standard_library(raw: bytes) -> Any:
    try:
        return json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError):
        return "invalid"


def decoded(raw: bytes) -> Any:
    value = decode_record(raw)
    return "invalid" if isinstance(value, Invalid) else value


@given(JSON_VALUES)
def test_valid_json_decodes_to_the_standard_librarys_value(value: Any) -> None:
    raw = json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass")
    assert repr(decoded(raw)) == repr(standard_library(raw))


@given(st.binary(max_size=40) | st.text(max_size=40).map(lambda t: t.encode("utf-8", "surrogatepass")))
def test_any_bytes_decode_as_the_standard_library_decodes_them(raw: bytes) -> None:
    assert repr(decoded(raw)) == repr(standard_library(raw))


def test_numbers_beyond_64_bits_stay_integers() -> None:
    for text in ("18446744073709551616", "-9223372036854775809", '{"correlation_id": 123456789012345678901}'):
        assert repr(decoded(text.encode())) == repr(json.loads(text))
