"""run_member, the real-time loop, driven on a simulated clock: the transport's waits move the time."""

from __future__ import annotations

from typing import Any

from chaos_harness.sim import SimBackend
from coordinator_state import SIMULATION_EPOCH_MS
from group_client.member import GroupMember, MemberConfig, MemberState
from group_client.realtime import run_member


class WaitingSim:
    """A SimBackend whose `receive` lets simulated time pass while it waits, as a real transport would."""

    def __init__(self) -> None:
        self.sim = SimBackend({"group.initial.rebalance.delay.ms": 0})

    def send(self, request: dict[str, Any]) -> None:
        self.sim.send(request)

    def receive(self, reply_to: str, timeout_ms: int = 0) -> list[dict[str, Any]]:
        responses = self.sim.receive(reply_to)
        if not responses and timeout_ms > 0:
            self.sim.advance_to(self.sim.now_ms + timeout_ms)
            responses = self.sim.receive(reply_to)
        return responses

    def close(self) -> None:
        self.sim.close()


def test_run_member_joins_heartbeats_and_leaves_when_told_to_stop() -> None:
    transport = WaitingSim()
    assigned: list[frozenset[tuple[str, int]]] = []
    config = MemberConfig(group_id="g", client_id="c", topics=("t",), topic_partitions={"t": 3},
                          session_timeout_ms=6000, heartbeat_interval_ms=1000, rebalance_timeout_ms=10000)
    member = GroupMember(config, "c-1", on_assigned=lambda a: assigned.append(a.partitions))
    stop_at = SIMULATION_EPOCH_MS + 20000
    run_member(member, transport, clock=lambda: transport.sim.now_ms,
               should_stop=lambda: transport.sim.now_ms >= stop_at)
    assert assigned == [frozenset({("t", 0), ("t", 1), ("t", 2)})]
    assert member.state is MemberState.CLOSED and transport.sim.now_ms < stop_at + 1000
    sent = [r["api"] for r in transport.sim.traffic if r["api"] != "Tick"]
    assert sent[:3] == ["JoinGroup", "JoinGroup", "SyncGroup"] and sent[-1] == "LeaveGroup"
    assert 15 <= sent.count("Heartbeat") <= 20  # one a second once joined
    snapshot = transport.sim.describe("g")
    assert snapshot is not None and snapshot["state"] == "Empty"
