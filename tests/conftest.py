"""Shared pytest fixtures: Apache Kafka 4.4 (one node, or three), the Tansu fallback, a local Spark session, unique
topic names."""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import settings
from pyspark.sql import SparkSession

from coordinator_job.broker import EmbeddedBroker, wait_for_broker
from coordinator_job.settings import load_settings
from coordinator_job.spark_session import build_session
from kafka_jvm.build import missing_tools
from kafka_jvm.cluster import KafkaCluster

REPO_ROOT = Path(__file__).resolve().parents[1]
# Its assertions are the tests' own: rewritten (before a test module imports it) to explain a failure.
pytest.register_assert_rewrite("tests.replays")

# Hypothesis' per-example deadline is a timing assertion; on a shared 2-core machine it fails healthy tests.
# Speed is measured by `coordinator bench`, not asserted here.
settings.register_profile("shared-machine", deadline=None)
settings.load_profile("shared-machine")


# What the tests' Apache Kafka differs in from Kafka's defaults: no wait before a new group's first rebalance; and
# lower bounds that let a test give its streams group the short session and heartbeat interval the engine runs with
# (group configs `streams.session.timeout.ms` / `streams.heartbeat.interval.ms`; the defaults stay Kafka's).
TEST_BROKER_PROPERTIES = {"group.initial.rebalance.delay.ms": "0", "group.streams.initial.rebalance.delay.ms": "0",
                          "group.streams.min.session.timeout.ms": "1000",
                          "group.streams.min.heartbeat.interval.ms": "100"}


@pytest.fixture(scope="session")
def kafka_bootstrap() -> Iterator[str]:
    """Bootstrap servers of a broker for the whole session.

    ``$KAFKA_BOOTSTRAP_SERVERS`` if set, else Apache Kafka 4.4 (a KRaft node of this machine, built from jvm/ with
    Maven) where Java and Maven are present, else the embedded Tansu broker (``COORDINATOR_TEST_BROKER=tansu``
    chooses it).
    """
    external = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if external:
        wait_for_broker(external, timeout_s=30)
        yield external
    elif os.environ.get("COORDINATOR_TEST_BROKER") != "tansu" and not missing_tools():
        with KafkaCluster(1, TEST_BROKER_PROPERTIES) as cluster:
            yield cluster.bootstrap_servers
    else:
        with EmbeddedBroker() as broker:
            yield broker.bootstrap_servers


@pytest.fixture(scope="session")
def tansu_bootstrap() -> Iterator[str]:
    """The embedded Tansu broker: the fallback of a machine without Maven, kept working by a smoke test."""
    with EmbeddedBroker() as broker:
        yield broker.bootstrap_servers


@pytest.fixture(scope="session")
def kafka_cluster3() -> Iterator[KafkaCluster]:
    """Apache Kafka 4.4 as three KRaft nodes (skips the test where Java or Maven is missing)."""
    missing = missing_tools()
    if missing:
        pytest.skip("Apache Kafka cannot run here: missing " + "; ".join(missing))
    with KafkaCluster(3, TEST_BROKER_PROPERTIES) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """The job's own Spark session (each operator's state store, UTC, this interpreter for workers), local[2], quiet."""
    session = build_session(load_settings(overrides=["coordinator.shuffle.partitions=2"]), "local[2]",
                            app_name="coordinator-tests")
    yield session
    session.stop()


@pytest.fixture
def unique_topic(request: pytest.FixtureRequest) -> Callable[[str], str]:
    """Factory for topic names unique to this test run, e.g. ``unique_topic("in")``."""
    test_name = re.sub(r"[^A-Za-z0-9_-]", "-", request.node.name)[:80]

    def make(suffix: str = "t") -> str:
        return f"{test_name}.{suffix}.{uuid.uuid4().hex[:8]}"

    return make
