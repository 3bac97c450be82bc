"""Configuration: built-in defaults < conf/coordinator.toml < COORDINATOR__* environment < --set KEY=VALUE.

Keys are PROTOCOL.md section 6's, written quoted in the TOML file exactly as there. `spark.*` keys
pass through to the Spark session untouched.
"""

from __future__ import annotations

import difflib
import os
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from coordinator_state import DEFAULTS as ENGINE_DEFAULTS

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CONF = ROOT / "conf" / "coordinator.toml"
ENV_PREFIX = "COORDINATOR__"
APPLY_IN_PANDAS_WITH_STATE = "applyInPandasWithState"
TRANSFORM_WITH_STATE = "transformWithState"
STATEFUL_OPERATORS = (APPLY_IN_PANDAS_WITH_STATE, TRANSFORM_WITH_STATE)
# The state store providers by the setting's names: RocksDB (on disk, changelog checkpoints) or Spark's default
# HDFS-backed one (every key in memory, a delta file per commit). transformWithState runs on RocksDB only.
STATE_STORE_PROVIDERS = {
    "rocksdb": "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
    "hdfs": "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider",
}
# applyInPandasWithState answers ~15-20% sooner on the HDFS-backed store than on RocksDB (idle and at 2,000 req/s,
# `coordinator bench --live --set coordinator.state.store=...`); its groups are small enough to sit in memory.
DEFAULT_STATE_STORES = {APPLY_IN_PANDAS_WITH_STATE: "hdfs", TRANSFORM_WITH_STATE: "rocksdb"}
SPARK_STATE_STORE_KEY = "spark.sql.streaming.stateStore.providerClass"

DEFAULTS: dict[str, Any] = {
    **ENGINE_DEFAULTS,
    "bootstrap.servers": "127.0.0.1:9092",
    "coordinator.requests.topic": "coordinator.requests",
    "coordinator.responses.topic": "coordinator.responses",
    "coordinator.snapshots.topic": "coordinator.snapshots",
    "coordinator.dead.letters.topic": "coordinator.dead-letters",
    "coordinator.offsets.topic": "coordinator.offsets",
    "coordinator.requests.partitions": 1,  # conf/coordinator.toml says why one
    "coordinator.responses.partitions": 3,
    "coordinator.query.name": "group-coordinator",
    "coordinator.checkpoint.root": "checkpoints",
    "coordinator.trigger.interval.ms": 500,
    "coordinator.shuffle.partitions": 2,
    "coordinator.max.records.per.batch": 20000,
    "coordinator.starting.offsets": "earliest",
    "coordinator.source.fetch.max.wait.ms": 500,
    "coordinator.stateful.operator": APPLY_IN_PANDAS_WITH_STATE,
    "coordinator.state.store": "",  # rocksdb or hdfs; empty: the operator's default (DEFAULT_STATE_STORES)
    "coordinator.state.buckets": 64,  # 0: one state key per group; N: the groups share N keys (state_buckets)
    "coordinator.metrics.listen": "",  # HOST:PORT of the Prometheus endpoint; empty: none
}


class SettingsError(ValueError):
    """A configuration the job cannot start with; the message says which key and what to do."""


def _convert(key: str, value: Any) -> Any:
    default = DEFAULTS[key]
    if isinstance(default, int) and not isinstance(value, int):
        try:
            return int(str(value).strip())
        except ValueError:
            raise SettingsError(f"{key} must be an integer, got {value!r}") from None
    if isinstance(default, str) and not isinstance(value, str):
        raise SettingsError(f"{key} must be a string, got {value!r}")
    return value


def _check_key(key: str, origin: str) -> None:
    if key in DEFAULTS or key.startswith("spark."):
        return
    close = difflib.get_close_matches(key, DEFAULTS, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise SettingsError(f"unknown configuration key {key!r} in {origin}{hint}; known keys: see conf/coordinator.toml")


def env_name(key: str) -> str:
    return ENV_PREFIX + key.upper().replace(".", "_").replace("-", "_")


def load_settings(conf_file: str | Path | None = None, overrides: Sequence[str] = (),
                  environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Resolves every key from the layers, the later winning; fails with a clear message on a bad key."""
    settings = dict(DEFAULTS)
    path = Path(conf_file) if conf_file is not None else DEFAULT_CONF
    if conf_file is not None or path.exists():
        try:
            with path.open("rb") as fh:
                data = tomllib.load(fh)
        except FileNotFoundError:
            raise SettingsError(f"configuration file {path} does not exist") from None
        except tomllib.TOMLDecodeError as exc:
            raise SettingsError(f"{path} is not valid TOML: {exc}") from None
        for key, value in data.items():
            _check_key(key, str(path))
            settings[key] = _convert(key, value) if key in DEFAULTS else value
    environ = os.environ if environ is None else environ
    by_env_name = {env_name(key): key for key in DEFAULTS}
    for name, value in environ.items():
        if name.startswith(ENV_PREFIX):
            if name not in by_env_name:
                raise SettingsError(f"environment variable {name} names no configuration key")
            settings[by_env_name[name]] = _convert(by_env_name[name], value)
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep:
            raise SettingsError(f"--set expects KEY=VALUE, got {item!r}")
        key = key.strip()
        _check_key(key, "--set")
        settings[key] = _convert(key, value) if key in DEFAULTS else value
    state_store_provider(settings)
    return settings


def stateful_operator(settings: Mapping[str, Any]) -> str:
    """The Spark operator that runs the per-group step: the design's `applyInPandasWithState`, or the
    Row-based `transformWithState` (same step, state and answers; their checkpoints are not interchangeable)."""
    operator = str(settings["coordinator.stateful.operator"])
    if operator not in STATEFUL_OPERATORS:
        raise SettingsError(f"coordinator.stateful.operator must be one of {', '.join(STATEFUL_OPERATORS)}, "
                            f"got {operator!r}")
    return operator


def state_store_provider(settings: Mapping[str, Any]) -> str:
    """The class of the state store the stateful operator keeps its groups in: `coordinator.state.store` by name,
    else the operator's default; a `spark.sql.streaming.stateStore.providerClass` setting names it directly."""
    operator = stateful_operator(settings)
    if SPARK_STATE_STORE_KEY in settings:
        return str(settings[SPARK_STATE_STORE_KEY])
    name = str(settings.get("coordinator.state.store") or DEFAULT_STATE_STORES[operator])
    if name not in STATE_STORE_PROVIDERS:
        raise SettingsError(f"coordinator.state.store must be one of {', '.join(STATE_STORE_PROVIDERS)} or empty, "
                            f"got {name!r}")
    if operator == TRANSFORM_WITH_STATE and name != "rocksdb":
        raise SettingsError(f"transformWithState keeps its state in RocksDB only: set coordinator.state.store to "
                            f"rocksdb (or empty), or coordinator.stateful.operator to {APPLY_IN_PANDAS_WITH_STATE}")
    return STATE_STORE_PROVIDERS[name]


def engine_config(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The part of the settings the engine reads."""
    return {key: settings[key] for key in ENGINE_DEFAULTS}
