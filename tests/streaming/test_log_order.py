"""The group step sorts a group's rows only when they are out of log order: the check must never miss disorder."""

from __future__ import annotations

import pandas as pd
from hypothesis import given
from hypothesis import strategies as st

from coordinator_job.job import _in_log_order


@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 50)), unique=True, max_size=12))
def test_in_log_order_exactly_when_sorted_by_partition_then_offset(positions: list[tuple[int, int]]) -> None:
    rows = pd.DataFrame({"partition": pd.array([p for p, _ in positions], dtype="int32"),
                         "offset": pd.array([o for _, o in positions], dtype="int64")})
    assert _in_log_order(rows) == (positions == sorted(positions))
