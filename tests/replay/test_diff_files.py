"""`coordinator diff`: kinds of file, what counts as a difference, how it is reported, exit codes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from coordinator_cli import main
from coordinator_job.diff import UnreadableFile, diff_files, field_differences
from coordinator_state import to_json


def response(reply_to: str, correlation_id: int, generation: int = 1, error: str = "NONE") -> dict[str, Any]:
    return {"api": "JoinGroup", "version": 9, "correlation_id": correlation_id, "client_id": "c",
            "reply_to": reply_to, "group_id": "orders", "timestamp_ms": 1_700_000_003_000,
            "body": {"error_code": 0 if error == "NONE" else 27, "error": error, "generation_id": generation,
                     "members": []}}


def snapshot(group: str, generation: int, state: str = "Stable") -> dict[str, Any]:
    return {"group_id": group, "state": state, "generation_id": generation, "protocol_type": "consumer",
            "protocol_name": "range", "leader": None, "members": [], "pending_members": [],
            "timestamp_ms": 1_700_000_003_000, "version": generation}


def letter(source: str, reason: str = "not valid JSON") -> dict[str, Any]:
    return {"source": source, "reason": reason, "size": 3, "sha256": "ab", "raw": "{x:"}


def write(path: Path, *items: dict[str, Any] | str) -> Path:
    path.write_text("".join((item if isinstance(item, str) else to_json(item)) + "\n" for item in items))
    return path


def test_responses_in_another_order_with_a_duplicate_are_equal(tmp_path: Path) -> None:
    a = write(tmp_path / "a", response("x", 1), response("y", 2))
    b = write(tmp_path / "b", response("y", 2), response("x", 1), response("y", 2))
    report = diff_files(a, b)
    assert (report.kind, report.equal, report.sizes) == ("responses", True, (2, 2))


def test_key_order_and_spacing_do_not_matter(tmp_path: Path) -> None:
    a = write(tmp_path / "a", '{"group_id": "g", "tombstone": true}')
    b = write(tmp_path / "b", '{"tombstone":true,"group_id":"g"}')
    assert diff_files(a, b).equal


def test_a_differing_field_is_reported_with_its_path(tmp_path: Path) -> None:
    a = write(tmp_path / "a", response("x", 1, generation=2))
    b = write(tmp_path / "b", response("x", 1, generation=3))
    [difference] = diff_files(a, b).differences
    assert str(difference) == "reply_to=x correlation_id=1  [A != B]  body.generation_id: 2 != 3"


def test_a_missing_response_is_reported_on_its_side(tmp_path: Path) -> None:
    a = write(tmp_path / "a", response("x", 1), response("x", 2))
    b = write(tmp_path / "b", response("x", 1), response("z", 9))
    found = {(d.key, d.side, d.detail) for d in diff_files(a, b).differences}
    assert found == {("reply_to=x correlation_id=2", "A only", "JoinGroup of group orders: NONE at 1700000003000"),
                     ("reply_to=z correlation_id=9", "B only", "JoinGroup of group orders: NONE at 1700000003000")}


def test_two_different_answers_to_one_key_are_a_difference_even_on_both_sides(tmp_path: Path) -> None:
    both = (response("x", 1), response("x", 1, error="REBALANCE_IN_PROGRESS"))
    report = diff_files(write(tmp_path / "a", *both), write(tmp_path / "b", *both))
    assert [(d.side, d.detail.split(":")[0]) for d in report.differences] == [
        ("A", "2 different responses"), ("B", "2 different responses")]
    assert 'body.error: "NONE" != "REBALANCE_IN_PROGRESS"' in report.differences[0].detail


def test_the_last_snapshot_of_a_group_wins(tmp_path: Path) -> None:
    a = write(tmp_path / "a", snapshot("g", 1), snapshot("h", 4), snapshot("g", 2))
    b = write(tmp_path / "b", snapshot("h", 4), snapshot("g", 2))
    assert diff_files(a, b).equal
    c = write(tmp_path / "c", snapshot("g", 2), snapshot("h", 4), snapshot("g", 1))
    [difference] = diff_files(a, c).differences
    assert (difference.key, difference.side) == ("group g", "A != B")
    assert difference.detail.startswith("generation_id: 2 != 1")


def test_a_tombstone_is_a_value(tmp_path: Path) -> None:
    gone = {"group_id": "g", "tombstone": True}
    a = write(tmp_path / "a", snapshot("g", 1), gone)
    assert diff_files(a, write(tmp_path / "b", gone)).equal
    [difference] = diff_files(a, write(tmp_path / "c", gone, snapshot("g", 1, "Empty"))).differences
    assert difference.detail == "tombstone != Empty, generation 1, version 1"


def test_dead_letters_are_multisets_per_source(tmp_path: Path) -> None:
    a = write(tmp_path / "a", letter("file:3"), letter("file:7"), letter("file:7"))
    assert diff_files(a, write(tmp_path / "b", letter("file:7"), letter("file:3"), letter("file:7"))).equal
    report = diff_files(a, write(tmp_path / "c", letter("file:3"), letter("file:7")))
    assert [(d.key, d.side, d.detail[:5]) for d in report.differences] == [("source file:7", "A only", '{"raw')]
    [changed] = diff_files(a, write(tmp_path / "d", letter("file:3", "other"), letter("file:7"),
                                    letter("file:7"))).differences
    assert changed.detail == 'reason: "not valid JSON" != "other"'


def test_traffic_is_compared_line_by_line(tmp_path: Path) -> None:
    tick = {"api": "Tick", "timestamp_ms": 5}
    a = write(tmp_path / "a", tick, "not json", {"api": "Tick", "timestamp_ms": 6})
    assert diff_files(a, write(tmp_path / "b", tick, "not json", {"timestamp_ms": 6, "api": "Tick"})).equal
    report = diff_files(a, write(tmp_path / "c", tick, "not JSON"))
    assert [(d.key, d.side) for d in report.differences] == [("line 2", "A != B"), ("line 3", "A only")]


def test_lists_of_different_lengths_are_one_difference() -> None:
    assert field_differences({"members": [1, 2]}, {"members": [1]}) == ["members: 2 items != 1 items"]
    assert field_differences([True], [1]) == ["[0]: true != 1"]


def test_a_line_of_another_kind_makes_the_file_unreadable(tmp_path: Path) -> None:
    a = write(tmp_path / "a", response("x", 1), "garbage")
    with pytest.raises(UnreadableFile, match=r"a:2: not responses like line 1"):
        diff_files(a, a)


def test_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = write(tmp_path / "a.jsonl", response("x", 1, generation=2))
    assert main(["diff", str(a), str(write(tmp_path / "same.jsonl", response("x", 1, generation=2)))]) == 0
    assert capsys.readouterr().out == "responses: equal (1 compared)\n"

    assert main(["diff", str(a), str(write(tmp_path / "b.jsonl", response("x", 1, generation=3)))]) == 1
    out = capsys.readouterr().out
    assert "responses: 1 difference (A: 1, B: 1)" in out
    assert "body.generation_id: 2 != 3" in out

    assert main(["diff", str(a), str(tmp_path / "missing.jsonl")]) == 2
    assert "cannot read" in capsys.readouterr().err
    assert main(["diff", str(a), str(write(tmp_path / "s.jsonl", snapshot("g", 1)))]) == 2
    assert "holds responses" in capsys.readouterr().err


def test_limit_caps_the_differences_shown(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = write(tmp_path / "a", *(response("x", i) for i in range(5)))
    assert main(["diff", "--limit", "2", str(a), str(write(tmp_path / "empty"))]) == 1
    out = capsys.readouterr().out
    assert "responses: 5 differences (A: 5, B: 0)" in out
    assert out.count("[A only]") == 2
    assert "... and 3 more" in out
