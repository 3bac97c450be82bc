"""Shared pytest fixtures: a Kafka-compatible broker, a local Spark session, unique topic names."""

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

REPO_ROOT = Path(__file__).resolve().parents[1]
# Its assertions are the tests' own: rewritten (before a test module imports it) to explain a failure.
pytest.register_assert_rewrite("tests.replays")

# Hypothesis' per-example deadline is a timing assertion; on a shared 2-core machine it fails healthy tests.
# Speed is measured by `coordinator bench`, not asserted here.
settings.register_profile("shared-machine", deadline=None)
settings.load_profile("shared-machine")


def _docker_engine_answers() -> bool:
    """True if a Docker engine responds to a ping within a couple of seconds."""
    try:
        import docker

        docker.from_env(timeout=2).ping()
    except Exception:
        return False
    return True


@pytest.fixture(scope="session")
def kafka_bootstrap() -> Iterator[str]:
    """Bootstrap servers of a broker for the whole session.

    ``$KAFKA_BOOTSTRAP_SERVERS`` if set, else a testcontainers Kafka if Docker is usable, else the
    embedded Tansu broker.
    """
    external = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if external:
        wait_for_broker(external, timeout_s=30)
        yield external
    elif _docker_engine_answers():
        from testcontainers.community.kafka import KafkaContainer

        with KafkaContainer() as kafka:
            yield kafka.get_bootstrap_server()
    else:
        with EmbeddedBroker() as broker:
            yield broker.bootstrap_servers


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
