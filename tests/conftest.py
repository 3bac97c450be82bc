"""Shared pytest fixtures: a Kafka-compatible broker, a local Spark session, unique topic names."""

from __future__ import annotations

import os
import re
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from streaming.broker import EmbeddedBroker, wait_for_broker
from streaming.kafka_source import register

REPO_ROOT = Path(__file__).resolve().parents[1]


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
    """A quiet local[2] Spark session with the ``coordinator_kafka`` data source registered."""
    with pytest.MonkeyPatch.context() as env:
        # Python workers must run this interpreter and import the project's packages by name.
        env.setenv("PYSPARK_PYTHON", sys.executable)
        env.setenv("PYSPARK_DRIVER_PYTHON", sys.executable)
        paths = [str(REPO_ROOT), str(REPO_ROOT / "src"), os.environ.get("PYTHONPATH", "")]
        env.setenv("PYTHONPATH", os.pathsep.join(p for p in paths if p))
        session = (
            SparkSession.builder.master("local[2]")
            .appName("coordinator-tests")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.sql.session.timeZone", "UTC")
            .getOrCreate()
        )
        session.sparkContext.setLogLevel("ERROR")
        register(session)
        yield session
        session.stop()


@pytest.fixture
def unique_topic(request: pytest.FixtureRequest) -> Callable[[str], str]:
    """Factory for topic names unique to this test run, e.g. ``unique_topic("in")``."""
    test_name = re.sub(r"[^A-Za-z0-9_-]", "-", request.node.name)[:80]

    def make(suffix: str = "t") -> str:
        return f"{test_name}.{suffix}.{uuid.uuid4().hex[:8]}"

    return make
