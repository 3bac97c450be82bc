"""The gateway's split of an OffsetDelete by what the upstream has (PROTOCOL.md section 11), as a property: every
partition asked for is answered exactly once, by the gateway (UNKNOWN_TOPIC_OR_PARTITION) when the upstream lacks
it, else by the engine."""

from __future__ import annotations

from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from kafka_gateway.offset_delete import UNKNOWN_TOPIC_OR_PARTITION, with_unknown_partitions, without_unknown_partitions

NAMES = st.sampled_from(["a", "b", "c"])
PARTITIONS = st.lists(st.fixed_dictionaries({"partition_index": st.integers(-2, 5)}), max_size=4,
                      unique_by=lambda p: p["partition_index"])
REQUEST_TOPICS = st.lists(st.fixed_dictionaries({"name": NAMES, "partitions": PARTITIONS}), max_size=3,
                          unique_by=lambda t: t["name"])
COUNTS = st.dictionaries(NAMES, st.integers(-1, 4))  # -1: absent; no entry: never counted


@given(REQUEST_TOPICS, COUNTS)
def test_every_partition_is_answered_once_by_the_gateway_or_by_the_engine(topics: list, counts: dict) -> None:
    sent, unknown = without_unknown_partitions({"group_id": "g", "topics": topics}, counts)
    engine_answer = {"error_code": 0, "topics": [
        {"name": t["name"], "partitions": [{"partition_index": p["partition_index"], "error_code": 0}
                                           for p in t["partitions"]]} for t in sent["topics"]]}
    answered = with_unknown_partitions(engine_answer, unknown)
    asked = Counter((t["name"], p["partition_index"]) for t in topics for p in t["partitions"])
    got = Counter((t["name"], p["partition_index"]) for t in answered["topics"] for p in t["partitions"])
    assert got == asked
    assert len({t["name"] for t in answered["topics"]}) == len(answered["topics"])
    for topic in answered["topics"]:
        count = counts.get(topic["name"])
        for partition in topic["partitions"]:
            exists = count is None or 0 <= partition["partition_index"] < count
            assert (partition["error_code"] == UNKNOWN_TOPIC_OR_PARTITION) == (not exists)
    assert all(t["partitions"] for t in sent["topics"])  # a topic left with nothing is not sent
