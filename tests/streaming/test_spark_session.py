"""The checkpoint manager the job's session gives a query, by where its checkpoint is; where Spark puts a state key."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from coordinator_job.settings import SPARK_STATE_STORE_KEY as STATE_STORE_KEY
from coordinator_job.spark_session import CHECKPOINT_MANAGER_KEY, LOCAL_CHECKPOINT_MANAGER, use_checkpoint
from coordinator_job.state_buckets import bucket_keys, spark_partition

pytestmark = [pytest.mark.spark]


@pytest.fixture
def session(spark: SparkSession) -> Iterator[SparkSession]:
    """The tests' session, its checkpoint manager setting put back afterwards."""
    kept = spark.conf.get(CHECKPOINT_MANAGER_KEY, None)
    yield spark
    if kept is None:
        spark.conf.unset(CHECKPOINT_MANAGER_KEY)
    else:
        spark.conf.set(CHECKPOINT_MANAGER_KEY, kept)


@pytest.mark.parametrize("provider", ["org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider",
                                      "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"],
                         ids=["hdfs", "rocksdb"])
def test_a_stateful_query_commits_on_a_local_checkpoint_under_either_state_store(
        session: SparkSession, tmp_path: Path, provider: str) -> None:
    (tmp_path / "input").mkdir()
    (tmp_path / "input" / "lines.txt").write_text("a\nb\na\n")
    checkpoint = tmp_path / "checkpoint"
    kept_provider = session.conf.get(STATE_STORE_KEY)
    session.conf.set(STATE_STORE_KEY, provider)
    try:
        use_checkpoint(session, checkpoint)
        assert session.conf.get(CHECKPOINT_MANAGER_KEY, None) == LOCAL_CHECKPOINT_MANAGER
        query = (session.readStream.text(str(tmp_path / "input")).dropDuplicates(["value"]).writeStream
                 .format("noop").option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
        query.awaitTermination()
    finally:
        session.conf.set(STATE_STORE_KEY, kept_provider)
    assert query.exception() is None
    written = {path.relative_to(checkpoint).as_posix() for path in checkpoint.rglob("*") if path.is_file()}
    assert {"offsets/0", "commits/0"} <= written
    assert any(name.startswith("state/0/0/") for name in written)


@pytest.mark.parametrize("local", [lambda tmp: str(tmp), lambda tmp: tmp.as_uri()], ids=["path", "file URI"])
def test_a_local_location_takes_the_filesystem_based_manager(
        session: SparkSession, tmp_path: Path, local: Callable[[Path], str]) -> None:
    session.conf.unset(CHECKPOINT_MANAGER_KEY)
    use_checkpoint(session, local(tmp_path))
    assert session.conf.get(CHECKPOINT_MANAGER_KEY, None) == LOCAL_CHECKPOINT_MANAGER


@pytest.mark.parametrize("remote", ["hdfs://namenode:8020/checkpoints/group-coordinator",
                                    "s3a://bucket/checkpoints/group-coordinator"])
def test_a_remote_checkpoint_keeps_sparks_default_manager_after_a_local_one(
        session: SparkSession, tmp_path: Path, remote: str) -> None:
    use_checkpoint(session, tmp_path)
    use_checkpoint(session, remote)
    assert session.conf.get(CHECKPOINT_MANAGER_KEY, None) is None


def test_spark_places_a_key_in_the_shuffle_partition_state_buckets_computes(spark: SparkSession) -> None:
    """The buckets' keys are spread by state_buckets' copy of Spark's hash partitioning: it must be Spark's."""
    keys = [*bucket_keys(64, 3), "group-1", "ü", "a longer group id with a tail", ""]
    frame = spark.createDataFrame([(key,) for key in keys], "key string")
    for partitions in (2, 3, 7):
        placed = frame.repartition(partitions, "key").select("key", F.spark_partition_id().alias("at")).collect()
        assert {row.key: row.at for row in placed} == {key: spark_partition(key, partitions) for key in keys}
