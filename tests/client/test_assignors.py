"""Range and round-robin assignors: Kafka's own test cases, invariants, and KIP-345 static ordering."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from coordinator_state.consumer_protocol import Assignment
from group_client.assignors import ASSIGNORS, MemberSubscription, range_assign, round_robin_assign


def by_topic(result: dict[str, Assignment]) -> dict[str, dict[str, list[int]]]:
    return {m: a.by_topic() for m, a in result.items()}


def member(member_id: str, *topics: str, instance: str | None = None) -> MemberSubscription:
    return MemberSubscription(member_id, instance, topics)


def test_range_two_consumers_two_topics_three_partitions_each() -> None:
    # Kafka RangeAssignorTest.testTwoConsumersTwoTopicsSixPartitions
    result = range_assign([member("c1", "t1", "t2"), member("c2", "t1", "t2")], {"t1": 3, "t2": 3})
    assert by_topic(result) == {"c1": {"t1": [0, 1], "t2": [0, 1]}, "c2": {"t1": [2], "t2": [2]}}


def test_range_only_assigns_subscribed_topics_with_metadata() -> None:
    result = range_assign([member("c1", "t1", "unknown"), member("c2", "t2")], {"t1": 2, "t2": 1, "other": 4})
    assert by_topic(result) == {"c1": {"t1": [0, 1]}, "c2": {"t2": [0]}}


def test_round_robin_two_consumers_two_topics() -> None:
    # Kafka RoundRobinAssignorTest.testTwoConsumersTwoTopicsSixPartitions
    result = round_robin_assign([member("c1", "t1", "t2"), member("c2", "t1", "t2")], {"t1": 3, "t2": 3})
    assert by_topic(result) == {"c1": {"t1": [0, 2], "t2": [1]}, "c2": {"t1": [1], "t2": [0, 2]}}


def test_round_robin_multiple_consumers_mixed_topics() -> None:
    # Kafka RoundRobinAssignorTest.testMultipleConsumersMixedTopics
    members = [member("c1", "t1"), member("c2", "t1", "t2"), member("c3", "t1")]
    result = round_robin_assign(members, {"t1": 3, "t2": 2})
    assert by_topic(result) == {"c1": {"t1": [0]}, "c2": {"t1": [1], "t2": [0, 1]}, "c3": {"t1": [2]}}


def test_static_members_sort_before_dynamic_ones_by_instance_id() -> None:
    # Member ids would put "a" first; instance ids put "z-member" (instance "i1") first, dynamic last.
    members = [member("a", "t"), member("z-member", "t", instance="i1"),
               member("m-member", "t", instance="i2")]
    result = range_assign(members, {"t": 3})
    assert by_topic(result) == {"z-member": {"t": [0]}, "m-member": {"t": [1]}, "a": {"t": [2]}}


instance_ids = st.lists(st.text("abcdef", min_size=1, max_size=6), min_size=1, max_size=12, unique=True)


assignor_names = st.sampled_from(sorted(ASSIGNORS))


@given(instance_ids, st.integers(1, 40), st.randoms(use_true_random=False), assignor_names)
def test_a_restarted_static_member_keeps_its_partitions(
    instances: list[str], partitions: int, rng: random.Random, name: str
) -> None:
    # KIP-345: every member restarts with a new member id; the assignment per instance id is unchanged.
    # (Member ids unrelated to instance ids, so that sorting by member id would reorder them.)
    assign = ASSIGNORS[name]
    before = [member(f"m-{rng.random()}-{k}", "t", instance=i) for k, i in enumerate(instances)]
    after = [member(f"m-{rng.random()}-{k}", "t", instance=i) for k, i in enumerate(instances)]
    rng.shuffle(after)
    first, second = assign(before, {"t": partitions}), assign(after, {"t": partitions})
    assert {m.group_instance_id: first[m.member_id] for m in before} == {
        m.group_instance_id: second[m.member_id] for m in after}


subscriptions = st.lists(st.sets(st.sampled_from(["t1", "t2", "t3"]), min_size=1), min_size=1, max_size=8)


@given(subscriptions, st.fixed_dictionaries({t: st.integers(0, 12) for t in ("t1", "t2", "t3")}),
       assignor_names)
def test_every_subscribed_partition_goes_to_exactly_one_subscriber(
    topic_sets: list[set[str]], counts: dict[str, int], name: str
) -> None:
    members = [member(f"m{i}", *sorted(ts)) for i, ts in enumerate(topic_sets)]
    result = ASSIGNORS[name](members, counts)
    assert set(result) == {m.member_id for m in members}
    owned = [tp for a in result.values() for tp in a.partitions]
    wanted = {(t, p) for ts in topic_sets for t in ts for p in range(counts[t])}
    assert sorted(owned) == sorted(wanted)
    for m in members:
        assert all(t in m.topics for t, _ in result[m.member_id].partitions)


@given(st.integers(1, 20), st.integers(0, 100), assignor_names)
def test_one_topic_is_balanced_within_one_partition(members: int, partitions: int, name: str) -> None:
    result = ASSIGNORS[name]([member(f"m{i:02d}", "t") for i in range(members)], {"t": partitions})
    sizes = [len(a.partitions) for a in result.values()]
    assert max(sizes) - min(sizes) <= 1
