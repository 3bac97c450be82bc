"""Late requests (PROTOCOL.md section 5): a request older than the watermark the records before it set. The
summaries of `coordinator replay` and `coordinator record` count them and say what they do to a replay."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coordinator_cli import main
from coordinator_job.replay import replay_local
from coordinator_job.settings import load_settings
from coordinator_job.traffic_file import scan_traffic
from coordinator_lab.traffic_gen import heartbeat_request
from coordinator_state import SIMULATION_EPOCH_MS as EPOCH_MS
from coordinator_state import tick_envelope, to_json
from tests.traffic import write_traffic

BATCH_NOTE = "make a replay of this traffic depend on its micro-batch boundaries"


def heartbeat(t: int, correlation_id: int) -> bytes:
    return to_json(heartbeat_request("g", 0, "m", 1, t, correlation_id, dynamic=True)).encode()


RECORDS = st.lists(st.tuples(st.sampled_from(["heartbeat", "tick", "bad"]), st.integers(0, 10_000)), max_size=30)


@given(records=RECORDS, lateness_ms=st.sampled_from([0, 1, 2000]))
def test_the_scan_counts_what_the_local_replay_processes_late(tmp_path_factory: pytest.TempPathFactory,
                                                              records: list[tuple[str, int]],
                                                              lateness_ms: int) -> None:
    """The count a recording and the Spark replay's summary give without a coordinator is the local engine's."""
    lines = [heartbeat(EPOCH_MS + t, i) if kind == "heartbeat" else to_json(tick_envelope(EPOCH_MS + t)).encode()
             if kind == "tick" else b'{"api":"Heartbeat"}' for i, (kind, t) in enumerate(records)]
    path = write_traffic(tmp_path_factory.mktemp("late") / "traffic.jsonl", lines)
    settings = load_settings(overrides=[f"coordinator.lateness.ms={lateness_ms}"], environ={})
    assert scan_traffic(path, lateness_ms) == (len(lines), replay_local(lines, settings).counts["late_requests"])


@pytest.mark.parametrize("late", [False, True])
def test_the_replay_summary_counts_late_requests_and_says_what_they_do(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], late: bool) -> None:
    lines = [heartbeat(EPOCH_MS + 5000, 1), to_json(tick_envelope(EPOCH_MS + 9000)).encode(),
             heartbeat(EPOCH_MS + (6000 if late else 8000), 2)]  # late: older than 9000 - 2000
    traffic = write_traffic(tmp_path / "traffic.jsonl", lines)
    assert main(["replay", "--input", str(traffic), "--output", str(tmp_path / "responses.jsonl"),
                 "--lateness-ms", "2000"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out.splitlines()[-1])["late_requests"] == int(late)
    assert (BATCH_NOTE in captured.err) == late
    assert ("coordinator.lateness.ms = 2000" in captured.err) == late
