"""A gateway in front of a coordinator, for real consumer processes: the stack chaos runs and benches stand up.

`gateway_stack("local", ...)` puts the gateway in front of an in-process engine; `gateway_stack("spark",
...)` in front of the streaming job (`coordinator_job.live_job.LiveJob`, the one runner of the live job, on its own
topics, a fresh checkpoint and a local Spark session unless one is given), the gateway in topic mode. Both
on the given broker or an embedded one. `read_group` reads a group back the same way in both: as admin tools
see it through the gateway (ListGroups, DescribeGroups), with the generation the gateway last answered a
JoinGroup of it with.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kafka import KafkaAdminClient

from coordinator_job.broker import broker_or_embedded
from kafka_gateway.runner import BackgroundGateway, loopback_gateway

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from coordinator_job.live_job import LiveJob

ENGINES = ("local", "spark")
# The streaming job's first micro-batch: a Spark session's start and the first query plans.
JOB_READY_TIMEOUT_S = 180.0


@dataclass(frozen=True)
class GatewayStack:
    """A running gateway, its upstream broker and, with the spark engine, the streaming job behind it."""

    engine: str
    bootstrap_servers: str
    gateway: BackgroundGateway
    job: LiveJob | None


@contextlib.contextmanager
def gateway_stack(engine: str, coordinator_config: Mapping[str, Any], *, bootstrap_servers: str | None = None,
                  spark: SparkSession | None = None) -> Iterator[GatewayStack]:
    """Starts a broker (unless `bootstrap_servers`), the coordinator `engine` names configured with
    `coordinator_config` (Kafka's group settings), and a gateway in front of them; stops them after."""
    if engine not in ENGINES:
        raise ValueError(f"engine {engine!r}: expected one of {', '.join(ENGINES)}")
    with contextlib.ExitStack() as stack:
        bootstrap = stack.enter_context(broker_or_embedded(bootstrap_servers))
        job: LiveJob | None = None
        if engine == "spark":
            from .spark_backend import fresh_live_job, job_settings

            settings = job_settings({"coordinator_config": coordinator_config}, bootstrap)
            job = stack.enter_context(fresh_live_job(settings, spark))
            job.start()
            job.wait_ready(JOB_READY_TIMEOUT_S)
            gateway = loopback_gateway(bootstrap, "topics", settings)
        else:
            gateway = loopback_gateway(bootstrap, "local", coordinator_config)
        yield GatewayStack(engine, bootstrap, stack.enter_context(gateway), job)


def generation(gateway: BackgroundGateway, group: str) -> int | None:
    """The generation of the latest JoinGroup of `group` the gateway answered without error, None before any."""
    server = gateway.server
    assert server is not None
    found: int | None = gateway.call(lambda: server.gateway.generations.get(group))
    return found


def read_group(gateway: BackgroundGateway, group: str) -> dict[str, Any]:
    """`group` as an admin client sees it through the gateway: whether ListGroups lists it, its state, its
    members' instance ids (DescribeGroups), and its generation (`generation`)."""
    admin = KafkaAdminClient(bootstrap_servers=gateway.address, client_id="gateway-stack-admin")
    try:
        listed = group in [g["group_id"] for g in admin.list_groups()]
        described = admin.describe_groups([group])[group]
    finally:
        admin.close()
    members = described["members"] or []
    return {"listed": listed, "state": described["group_state"], "generation_id": generation(gateway, group),
            "members": len(members), "instance_ids": sorted(str(m["group_instance_id"]) for m in members)}
