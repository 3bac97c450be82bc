"""The checkpoint manager the job's session gives a query, by where its checkpoint is."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from coordinator_job.spark_session import CHECKPOINT_MANAGER_KEY, LOCAL_CHECKPOINT_MANAGER, use_checkpoint

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


def test_a_query_on_a_local_checkpoint_writes_it_without_hadoop_checksum_files(
        session: SparkSession, tmp_path: Path) -> None:
    """Spark's default manager (Hadoop's FileContext) writes a `.crc` file beside each checkpoint and state file;
    the FileSystem-based one on the session's RawLocalFileSystem writes none."""
    (tmp_path / "input").mkdir()
    (tmp_path / "input" / "lines.txt").write_text("a\nb\na\n")
    checkpoint = tmp_path / "checkpoint"
    session.conf.unset(CHECKPOINT_MANAGER_KEY)
    use_checkpoint(session, checkpoint)
    query = (session.readStream.text(str(tmp_path / "input")).dropDuplicates(["value"]).writeStream.format("noop")
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    query.awaitTermination()
    written = {path.relative_to(checkpoint).as_posix() for path in checkpoint.rglob("*") if path.is_file()}
    assert {"offsets/0", "commits/0"} <= written
    assert any(name.startswith("state/0/") for name in written)  # the operator's store (of whichever provider)
    assert [name for name in written if name.endswith(".crc")] == []


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
