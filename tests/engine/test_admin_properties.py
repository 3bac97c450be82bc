"""Properties of DeleteGroups and OffsetDelete (PROTOCOL.md 11) over random commits and deletions of simple groups.

A model holds each group's committed offsets. After every request: a deleted group answers as absent (a
second DeleteGroups and an OffsetDelete find no group, `describe` has no snapshot), every offset it held fetches
as -1, and the offsets topic's last record of every key is the model's value, a tombstone for what is gone; an
Empty group goes with its last offset. The same requests through `run_group` in random micro-batches, as the
Spark job calls it, give the same answers and the same offsets topic.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator_state import EngineConfig, LocalCoordinator, parse_request, run_group
from coordinator_state.envelope import SIMULATION_EPOCH_MS, Api, request_envelope

GROUPS = ["g", "h"]
TOPICS = ["t", "u"]
PARTITIONS = [0, 1]
NOT_FOUND = 69

partitions = st.lists(st.tuples(st.sampled_from(TOPICS), st.sampled_from(PARTITIONS)), min_size=1, max_size=4)
operations = st.lists(st.one_of(
    st.tuples(st.just("commit"), st.sampled_from(GROUPS), partitions),
    st.tuples(st.just("delete_offsets"), st.sampled_from(GROUPS), partitions),
    st.tuples(st.just("delete_group"), st.sampled_from(GROUPS), st.just([])),
), min_size=1, max_size=25)


def _by_topic(chosen: list[tuple[str, int]]) -> dict[str, list[int]]:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in chosen:
        if partition not in by_topic.setdefault(topic, []):
            by_topic[topic].append(partition)
    return by_topic


def _request(operation: tuple[str, str, list[tuple[str, int]]], n: int) -> dict[str, Any]:
    kind, group, chosen = operation
    by_topic = _by_topic(chosen)
    if kind == "commit":
        api, body = Api.OFFSET_COMMIT, {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
                                        "topics": [{"name": topic, "partitions": [
                                            {"partition_index": p, "committed_offset": n, "committed_metadata": ""}
                                            for p in ps]} for topic, ps in by_topic.items()]}
    elif kind == "delete_offsets":
        api, body = Api.OFFSET_DELETE, {"group_id": group, "topics": [
            {"name": topic, "partitions": [{"partition_index": p} for p in ps]} for topic, ps in by_topic.items()]}
    else:
        api, body = Api.DELETE_GROUPS, {"groups_names": [group]}
    return request_envelope(api, body, correlation_id=n, client_id="admin", reply_to="admin",
                            timestamp_ms=SIMULATION_EPOCH_MS + n)


def _fetch(group: str, n: int) -> dict[str, Any]:
    topics = [{"name": topic, "partition_indexes": PARTITIONS} for topic in TOPICS]
    return request_envelope(Api.OFFSET_FETCH, {"groups": [{"group_id": group, "topics": topics}]}, version=8,
                            correlation_id=n, client_id="admin", reply_to="admin", timestamp_ms=SIMULATION_EPOCH_MS + n)


@settings(max_examples=150, deadline=None)
@given(operations, st.randoms(use_true_random=False))
def test_deleted_groups_and_offsets_are_gone_everywhere(ops: list[Any], rng: Any) -> None:
    coord = LocalCoordinator()
    model: dict[str, dict[tuple[str, int], int]] = {}
    requests = [_request(op, n) for n, op in enumerate(ops, start=1)]
    answers = []
    for request, (kind, group, chosen) in zip(requests, ops, strict=True):
        [answer] = coord.handle(request)
        answers.append(answer)
        body = answer["body"]
        n = request["correlation_id"]
        if kind == "commit":
            for topic, partition in chosen:
                model.setdefault(group, {})[(topic, partition)] = n
        elif group not in model:
            errors = [r["error_code"] for r in body["results"]] if kind == "delete_group" else [body["error_code"]]
            assert errors == [NOT_FOUND]
        elif kind == "delete_group":
            assert body["results"] == [{"group_id": group, "error_code": 0, "error": "NONE"}]
            del model[group]
        else:
            assert body["error_code"] == 0
            assert all(p["error_code"] == 0 for t in body["topics"] for p in t["partitions"])
            for topic, partition in chosen:
                model[group].pop((topic, partition), None)
            if not model[group]:
                del model[group]  # an Empty group goes with its last offset
        for name in GROUPS:
            assert (coord.describe(name) is not None) == (name in model)
            [fetched] = coord.handle(_fetch(name, 0))
            got = {(t["name"], p["partition_index"]): p["committed_offset"]
                   for t in fetched["body"]["groups"][0]["topics"] for p in t["partitions"]}
            assert got == {(t, p): model.get(name, {}).get((t, p), -1) for t in TOPICS for p in PARTITIONS}
    assert _topic(coord.offset_changes) == {
        f"{g}/{t}/{p}": offset for g, offsets in model.items() for (t, p), offset in offsets.items()}

    # The Spark job's path: the same requests, in random micro-batches, through run_group with the state encoded.
    config = EngineConfig.from_mapping({})
    states: dict[str, bytes | None] = {}
    batched: list[dict[str, Any]] = []
    changes = []
    pending = [parse_request(r) for r in requests]
    while pending:
        size = rng.randint(1, 5)
        batch, pending = pending[:size], pending[size:]
        for group in GROUPS:
            mine = [r for r in batch if r.group_id == group]
            if mine:
                outcome = run_group(states.get(group), 0, mine, config)
                states[group] = outcome.state
                batched += outcome.responses
                changes += outcome.offset_changes
    assert sorted(batched, key=lambda r: r["correlation_id"]) == answers
    assert _topic(changes) == _topic(coord.offset_changes)


def _topic(changes: list[Any]) -> dict[str, int]:
    """The compacted offsets topic after these records: each key's last value, tombstoned keys gone."""
    last: dict[str, int | None] = {}
    for change in changes:
        last[change.key] = None if change.value is None else change.value.offset
    return {key: value for key, value in last.items() if value is not None}
