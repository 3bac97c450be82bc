"""The Spark session the job runs in: its state store, UTC, this interpreter for the Python workers."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from pyspark.sql import SparkSession

from .settings import SPARK_STATE_STORE_KEY, state_store_provider

ROOT = Path(__file__).resolve().parent.parent
# Attempts per task, as Spark's cluster default: a source task that cannot read its range in time fails and is
# tried again instead of failing the query (spark.task.maxFailures overrides it).
TASK_ATTEMPTS = 4


def with_task_attempts(master: str, attempts: int) -> str:
    """`local[N]` and `local[*]` run each task once (Spark ignores spark.task.maxFailures there); `local[N,F]`
    gives it F attempts. Other masters are returned as they are."""
    found = re.fullmatch(r"local(?:\[(\d+|\*)\])?", master)
    return f"local[{found.group(1) or 1},{attempts}]" if found else master


def prepare_python_workers() -> None:
    """Spark's Python workers must run this interpreter and find the project's packages."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    paths = [str(ROOT), str(ROOT / "src"), *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]]
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))


def use_state_store(spark: SparkSession, settings: Mapping[str, Any]) -> None:
    """Sets the state store of the queries started next in `spark` (one session may run both operators).

    Spark records the provider in a checkpoint's offset log and restores it when a query restarts there, so a
    checkpoint keeps the store it was written with whatever the setting says now (the two cannot read each
    other's files); a changed `coordinator.state.store` takes effect on a fresh checkpoint."""
    spark.conf.set(SPARK_STATE_STORE_KEY, state_store_provider(settings))


# Spark's default checkpoint manager writes through Hadoop's FileContext, which on a local disk without Hadoop's native
# library starts a `readlink` process for every status and rename (and a `chmod` for every file it creates): ~190
# processes per idle micro-batch. The FileSystem-based manager renames with java.io (atomic on a local disk): state
# store commit 228 -> 79 ms, checkpoint commit 135 -> 65 ms per idle batch. (RawLocalFileSystem, without .crc files,
# would halve those again, but RocksDB's state store needs the checksummed LocalFileSystem.) Only local checkpoints.
LOCAL_CHECKPOINT_MANAGER = "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"
CHECKPOINT_MANAGER_KEY = "spark.sql.streaming.checkpointFileManagerClass"


def use_checkpoint(spark: SparkSession, location: str | Path) -> None:
    """Sets the checkpoint manager of the query started next in `spark` for its checkpoint `location`: the
    FileSystem-based one for a local directory, Spark's default (atomic on HDFS and object stores) otherwise; a
    `spark.sql.streaming.checkpointFileManagerClass` setting wins."""
    if spark.sparkContext.getConf().contains(CHECKPOINT_MANAGER_KEY):
        return
    scheme = urlparse(str(location)).scheme
    if scheme in ("", "file"):
        spark.conf.set(CHECKPOINT_MANAGER_KEY, LOCAL_CHECKPOINT_MANAGER)
    else:
        spark.conf.unset(CHECKPOINT_MANAGER_KEY)


def build_session(settings: Mapping[str, Any], master: str | None = "local[2]",
                  app_name: str = "group-coordinator") -> SparkSession:
    """A session for the coordinator; `master=None` takes spark-submit's master, else PySpark's `local[*]`."""
    from .file_source import register as register_file_source
    from .kafka_source import register as register_kafka

    prepare_python_workers()
    builder = SparkSession.builder.appName(app_name)
    if master is None and "PYSPARK_GATEWAY_PORT" not in os.environ:  # not under spark-submit: PySpark's default
        master = "local[*]"
    if master is not None:
        attempts = int(settings.get("spark.task.maxFailures", TASK_ATTEMPTS))
        builder = builder.master(with_task_attempts(master, attempts))
    conf: dict[str, str] = {
        # With RocksDB (see use_state_store), a commit writes the changes to a changelog file instead of
        # uploading a RocksDB checkpoint every micro-batch (snapshots are made in the background); Spark
        # switches existing checkpoints either way.
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
        "spark.sql.shuffle.partitions": str(settings["coordinator.shuffle.partitions"]),
        # Each micro-batch plans the query anew and its JVM operators move few rows (the work is in Python): whole-stage
        # code generation costs more than it saves there (idle batch 356 -> 324-335 ms, JIT compiler 0.25 -> 0.19 core).
        "spark.sql.codegen.wholeStage": "false",
        # Every stateful task talks to three Python workers (new data, timeouts, sink); Unix domain sockets instead of
        # TCP loopback: idle micro-batch 324-335 -> 251 ms, stateful stage 211 -> 85 ms (one run).
        "spark.python.unix.domain.socket.enabled": "true",
        "spark.sql.session.timeZone": "UTC",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.host": "127.0.0.1",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.executorEnv.PYTHONPATH": os.environ["PYTHONPATH"],
        "spark.executorEnv.PYSPARK_PYTHON": sys.executable,
    }
    conf.update({k: str(v) for k, v in settings.items() if k.startswith("spark.")})
    for key, value in conf.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    register_kafka(session)
    register_file_source(session)
    return session
