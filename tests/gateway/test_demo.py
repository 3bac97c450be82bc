"""The real-consumer demo, against the in-process engine: bounces cost no rebalance and lose nothing, and its
gateway's metrics show it."""

from __future__ import annotations

import time

import pytest

from chaos_harness.real_demo import RealConsumerDemo
from tests.scrape import scrape, total

pytestmark = pytest.mark.kafka


def test_the_real_consumer_demo_bounces_without_rebalances_and_settles(kafka_bootstrap: str) -> None:
    settings = {"bootstrap.servers": kafka_bootstrap, "group.initial.rebalance.delay.ms": 300}
    demo = RealConsumerDemo(settings, members=3, engine="local", bounce_interval_s=1.5, metrics=True).start()
    deadline = time.monotonic() + 90
    while demo.summary()["bounces"] < 4 and time.monotonic() < deadline:
        time.sleep(0.5)
    assert "bouncing" in demo.status()
    assert demo.metrics_url is not None
    _, samples = scrape(demo.metrics_url)
    demo.stop()
    summary = demo.summary()
    assert summary["bounces"] >= 4, summary
    assert summary["partitions_kept"] == summary["resumed_from_committed"] == summary["bounces"], summary
    assert summary["rebalances"] == 0 and summary["records_read_twice"] == 0, summary
    assert summary["consistent"] and summary["libraries"] == {"kafka-python": 1, "confluent": 1, "java": 1}, summary
    assert summary["gateway"]["coordinator_timeouts"] == 0
    assert total(samples, "coordinator_groups", state="Stable") == 1
    # The members' first joins, then one per bounce (a static member joins again as it restarts).
    assert total(samples, "coordinator_gateway_requests_total", api="JoinGroup", error_code="0") >= 3 + 4
