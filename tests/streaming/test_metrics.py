"""The job's metrics without Spark: the group census both shells share, and the figures read from a progress
report (PROTOCOL.md section 11)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from coordinator_cli.main import main
from coordinator_job.metrics import JobMetrics, input_lag
from coordinator_metrics import GroupCensus, census_entry
from tests.scrape import Samples, total


def samples_of(metrics: JobMetrics) -> Samples:
    text = generate_latest(metrics.registry).decode()
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


# Per step: a group (of three) and its next (state, generation increase), or its removal.
changes = st.lists(st.tuples(st.sampled_from(["a", "b", "c"]),
                             st.none() | st.tuples(st.sampled_from(["Stable", "PreparingRebalance"]),
                                                   st.integers(0, 3))))


@given(changes)
def test_the_census_counts_every_generation_increment_and_each_groups_latest_state(
        steps: list[tuple[str, tuple[str, int] | None]]) -> None:
    census, generations, states, expected = GroupCensus(), {}, {}, 0
    for group_id, change in steps:
        if change is None:
            census.update({group_id: None})
            generations.pop(group_id, None)
            states.pop(group_id, None)
            continue
        state, increase = change
        generations[group_id] = generations.get(group_id, 0) + increase
        states[group_id] = state
        expected += increase
        census.update({group_id: (state, generations[group_id])})
        census.update({group_id: (state, generations[group_id])})  # seen again: nothing more
    [groups, rebalances] = list(census.families())
    assert {s.labels["state"]: s.value for s in groups.samples if s.value} == {
        state: sum(1 for s in states.values() if s == state) for state in set(states.values())}
    assert rebalances.samples[0].value == expected


def test_groups_counted_without_their_past_generations_count_only_what_comes_after() -> None:
    census = GroupCensus()
    census.update({"g": census_entry({"state": "Stable", "generation_id": 7}),
                   "s": census_entry({"state": "Stable", "group_epoch": 4, "group_type": "streams"})}, count=False)
    census.update({"g": ("PreparingRebalance", 8)})
    census.replace({"g": ("PreparingRebalance", 8)})  # "s" is gone
    [groups, rebalances] = list(census.families())
    assert {s.labels["state"]: s.value for s in groups.samples if s.value} == {"PreparingRebalance": 1}
    assert {s.labels["state"] for s in groups.samples} >= {"Empty", "PreparingRebalance", "CompletingRebalance",
                                                           "Stable", "Dead"}
    assert rebalances.samples[0].value == 1


def test_input_lag_is_the_latest_minus_the_processed_offsets_over_partitions() -> None:
    assert input_lag('{"0": 120, "1": 40, "2": 7}', {"0": 100, "1": 40}) == 20 + 7
    assert input_lag(None, {"0": 3}) == 0


def test_a_progress_report_moves_the_job_series() -> None:
    metrics = JobMetrics("coordinator.requests")
    progress = {"numInputRows": 40, "inputRowsPerSecond": 80.0, "processedRowsPerSecond": 200.0,
                "durationMs": {"triggerExecution": 200},
                "sources": [{"endOffset": {"0": 10, "1": 30}, "latestOffset": {"0": 15, "1": 30}}]}
    metrics.progress(progress, dead_letters=2)
    metrics.progress({**progress, "sources": [{"endOffset": {"0": 15, "1": 30}, "latestOffset": {"0": 15, "1": 31}}]},
                     dead_letters=0)
    metrics.late_requests(3)
    samples = samples_of(metrics)
    assert total(samples, "coordinator_job_batches_total") == 2
    assert total(samples, "coordinator_job_input_rows_total") == 80
    assert total(samples, "coordinator_job_dead_letters_total") == 2
    assert total(samples, "coordinator_job_late_requests_total") == 3
    assert total(samples, "coordinator_job_input_rows_per_second") == 80.0
    assert total(samples, "coordinator_job_processed_rows_per_second") == 200.0
    assert total(samples, "coordinator_job_input_lag_records", topic="coordinator.requests") == 1
    assert total(samples, "coordinator_job_batch_duration_seconds_count") == 2
    assert total(samples, "coordinator_job_batch_duration_seconds_bucket", le="0.25") == 2


def test_coordinator_run_refuses_a_metrics_address_that_is_not_host_port(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--embedded", "--set", "coordinator.metrics.listen=9464"]) == 2  # before any broker starts
    assert "coordinator.metrics.listen: expected HOST:PORT, got '9464'" in capsys.readouterr().err
