"""A gateway in front of a coordinator, for real consumer processes: the stack chaos runs and benches stand up.

`gateway_stack("local", ...)` puts the gateway in front of an in-process engine; `gateway_stack("spark",
...)` in front of the streaming job (`coordinator_job.live_job.LiveJob`, the one runner of the live job, on its own
topics, a fresh checkpoint and a local Spark session unless one is given), the gateway in topic mode. Both
on the given broker or an embedded one. `read_group` reads a group back the same way in both: as admin tools
see it through the gateway (ListGroups, DescribeGroups), with the generation the gateway last answered a
JoinGroup of it with (`JoinGenerations`, which watches the gateway's answers: no Kafka API tells it).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kafka import KafkaAdminClient
from kafka.protocol.api_key import ApiKey

from kafka_gateway.gateway import Answered
from kafka_gateway.runner import BackgroundGateway, loopback_gateway
from kafka_jvm.embedded import broker_or_embedded

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from coordinator_job.live_job import LiveJob

ENGINES = ("local", "spark")
# The streaming job's first micro-batch: a Spark session's start and the first query plans.
JOB_READY_TIMEOUT_S = 180.0


class JoinGenerations:
    """Per group, the generation of the latest JoinGroup the gateway answered without error: the coordinator's
    count of rebalances as its clients saw it, whichever coordinator is behind the gateway."""

    def __init__(self) -> None:
        self.latest: dict[str, int] = {}

    def __call__(self, answered: Answered) -> None:
        """The gateway's answer observer (called on its loop)."""
        generation = answered.body.get("generation_id")
        if (answered.api_key == ApiKey.JoinGroup and answered.body.get("error_code") == 0
                and isinstance(generation, int)):
            self.latest[str(answered.parts[0].get("group_id"))] = generation


@dataclass(frozen=True)
class GatewayStack:
    """A running gateway, its upstream broker and, with the spark engine, the streaming job behind it."""

    engine: str
    bootstrap_servers: str
    gateway: BackgroundGateway
    job: LiveJob | None
    generations: JoinGenerations


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
        generations = JoinGenerations()
        if engine == "spark":
            from .spark_backend import fresh_live_job, job_settings

            settings = job_settings({"coordinator_config": coordinator_config}, bootstrap)
            job = stack.enter_context(fresh_live_job(settings, spark))
            job.start()
            job.wait_ready(JOB_READY_TIMEOUT_S)
            gateway = loopback_gateway(bootstrap, "topics", settings, generations)
        else:
            gateway = loopback_gateway(bootstrap, "local", coordinator_config, generations)
        yield GatewayStack(engine, bootstrap, stack.enter_context(gateway), job, generations)


def generation(stack: GatewayStack, group: str) -> int | None:
    """The generation of the latest JoinGroup of `group` the gateway answered without error, None before any."""
    found: int | None = stack.gateway.call(lambda: stack.generations.latest.get(group))
    return found


def read_group(stack: GatewayStack, group: str) -> dict[str, Any]:
    """`group` as an admin client sees it through the gateway: whether ListGroups lists it, its state, its
    members' instance ids (DescribeGroups), and its generation (`generation`)."""
    admin = KafkaAdminClient(bootstrap_servers=stack.gateway.address, client_id="gateway-stack-admin")
    try:
        listed = group in [g["group_id"] for g in admin.list_groups()]
        described = admin.describe_groups([group])[group]
    finally:
        admin.close()
    members = described["members"] or []
    return {"listed": listed, "state": described["group_state"], "generation_id": generation(stack, group),
            "members": len(members), "instance_ids": sorted(str(m["group_instance_id"]) for m in members)}
