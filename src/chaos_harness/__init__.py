"""The chaos harness: real `group_client` members against a coordinator, with faults injected, and a report.

`run.ChaosRun` drives a group of members through a scenario (`scenarios`) on a `Backend`, and `ledger`
and `latency` record what happened. Backends: `sim.SimBackend`, the engine in memory on a simulated clock
(`run.run_chaos`); `live.LiveBackend`, a running coordinator over its Kafka topics in real time, which
`spark_backend.run_chaos_spark` starts as the streaming job. `demo.Demo` keeps a group of static members
under rolling bounces for `coordinator run --demo`; `plot` draws a report's timeline (the `plot` extra).

May import the product (coordinator_state, coordinator_job, kafka_gateway, group_client); never the lab
(coordinator_lab) or the CLI. The product never imports it.
"""

from .run import Backend, ChaosRun, HarnessError, Progress, describe_progress, run_chaos, summary, write_report
from .scenarios import SCENARIOS, ChaosConfigError, config_overrides, normalize_config
from .sim import SimBackend

__all__ = [
    "SCENARIOS",
    "Backend",
    "ChaosConfigError",
    "ChaosRun",
    "HarnessError",
    "Progress",
    "SimBackend",
    "config_overrides",
    "describe_progress",
    "normalize_config",
    "run_chaos",
    "summary",
    "write_report",
]
