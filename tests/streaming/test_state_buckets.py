"""Groups sharing a state key (no Spark session): the stored value's format, and a key's call answering exactly as
one call per group would."""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coordinator_job.job import CoordinatorStep, GroupRecords, OutputRow
from coordinator_job.live_job import pin_state_layout
from coordinator_job.settings import SettingsError, load_settings
from coordinator_job.state_buckets import (
    BucketFormatError,
    StoredGroup,
    bucket_keys,
    decode_bucket,
    encode_bucket,
    next_wake,
    spark_partition,
    state_key,
)
from coordinator_state import Invalid, Tick, for_one_group, parse_raw
from tests.traffic import build_traffic

STORED = st.dictionaries(st.text(max_size=12), st.builds(StoredGroup, st.binary(max_size=40),
                                                         st.none() | st.integers(0, 2**62)), max_size=6)


@given(STORED)
def test_a_buckets_groups_come_back_as_stored(groups: dict[str, StoredGroup]) -> None:
    assert decode_bucket(encode_bucket(groups)) == groups
    assert next_wake(groups) == min((g.wake_at_ms for g in groups.values() if g.wake_at_ms is not None), default=None)


def test_a_value_of_another_format_is_refused_with_what_to_do() -> None:
    with pytest.raises(BucketFormatError, match="fresh checkpoint"):
        decode_bucket(b"\x02" + encode_bucket({})[1:])


@given(st.text(), st.integers(1, 300), st.integers(1, 16))
def test_a_group_has_one_key_among_the_buckets(group_id: str, buckets: int, partitions: int) -> None:
    keys = bucket_keys(buckets, partitions)
    assert state_key(group_id, ()) == group_id
    assert state_key(group_id, keys) == state_key(group_id, keys) in keys
    assert len(set(keys)) == buckets


@given(st.integers(1, 300), st.integers(1, 16))
def test_the_buckets_spread_evenly_over_the_shuffle_partitions(buckets: int, partitions: int) -> None:
    placed = [spark_partition(key, partitions) for key in bucket_keys(buckets, partitions)]
    assert placed == [bucket % partitions for bucket in range(buckets)]


def run_keys(batches: list[list[bytes]], buckets: int) -> list[list[OutputRow]]:
    """The traffic through the step as a stateful operator runs it: per micro-batch, every key with records or
    whose wake-up the watermark (from the batches before, as Spark's) has reached, called once."""
    step = CoordinatorStep(load_settings(), live=False)
    keys = bucket_keys(buckets, 2)
    lateness = int(load_settings()["coordinator.lateness.ms"])
    stored: dict[str, tuple[bytes, int | None]] = {}
    latest, out = None, []
    for batch in batches:
        watermark = 0 if latest is None else latest - lateness
        by_key: dict[str, GroupRecords] = defaultdict(dict)
        for raw in batch:
            parsed = for_one_group(parse_raw(raw, record_timestamp_ms=None, max_clock_skew_ms=None))
            if isinstance(parsed, Invalid):
                continue
            latest = max(latest or parsed.timestamp_ms, parsed.timestamp_ms)
            if not isinstance(parsed, Tick):
                by_key[state_key(parsed.group_id, keys)].setdefault(parsed.group_id, []).append((raw, None))
        due = {key for key, (_, wake) in stored.items() if wake is not None and wake <= watermark}
        rows: list[OutputRow] = []
        for key in sorted(due.union(by_key)):
            state, _ = stored.pop(key, (None, None))
            outcome = step.step(by_key.get(key, {}), state, watermark)
            rows += outcome.rows
            if outcome.state is not None:
                stored[key] = (outcome.state, outcome.wake_at_ms)
        out.append(sorted(rows, key=str))
    return out


@pytest.mark.parametrize("batch_size", [7, 40])
def test_groups_sharing_keys_answer_as_groups_with_their_own_keys(batch_size: int) -> None:
    traffic = build_traffic("full")
    batches = [traffic[start:start + batch_size] for start in range(0, len(traffic), batch_size)]
    per_group = run_keys(batches, 0)
    assert sum(map(len, per_group)) > len(traffic) // 2
    assert run_keys(batches, 1) == run_keys(batches, 3) == per_group


def test_a_checkpoint_refuses_another_bucket_count_than_it_started_with(tmp_path: Path) -> None:
    checkpoint = tmp_path / "checkpoint"
    pin_state_layout(load_settings(overrides=["coordinator.state.buckets=8"]), checkpoint)
    pin_state_layout(load_settings(overrides=["coordinator.state.buckets=8"]), checkpoint)  # a restart
    with pytest.raises(SettingsError, match=re.escape("buckets=8, this run has 0: set it back to 8")):
        pin_state_layout(load_settings(overrides=["coordinator.state.buckets=0"]), checkpoint)
    with pytest.raises(SettingsError, match=re.escape("partitions=2, this run has 3: set it back to 2")):
        pin_state_layout(load_settings(overrides=["coordinator.state.buckets=8", "coordinator.shuffle.partitions=3"]),
                         checkpoint)
    (checkpoint / "coordinator-state.json").write_text('{"state_buckets": 8}')  # the layout before the spread keys
    with pytest.raises(SettingsError, match="fresh checkpoint"):
        pin_state_layout(load_settings(overrides=["coordinator.state.buckets=8"]), checkpoint)
    older = tmp_path / "older"
    (older / "offsets").mkdir(parents=True)  # a checkpoint of a version that wrote no layout
    with pytest.raises(SettingsError, match="fresh checkpoint"):
        pin_state_layout(load_settings(), older)
