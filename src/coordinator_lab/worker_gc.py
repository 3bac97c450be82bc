"""What the full collection `pyspark.daemon` runs after every task costs a job's Python worker, before and after
`coordinator_job.worker_heap.freeze_long_lived_objects`.

    python -m coordinator_lab.worker_gc [--runs 5]

Loads what a worker of the job holds once its first task ran (PySpark's worker, pandas, pyarrow, the job's
modules), then prints one line: the objects the collector tracks and the median time of `gc.collect()`, before
and after the freeze.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import statistics
import time
from collections.abc import Sequence

from coordinator_job.worker_heap import freeze_long_lived_objects

# What a reused worker has imported by the end of its first task: PySpark's worker loop (with its pandas and Arrow
# serializers) and the job's modules its tasks unpickle.
WORKER_MODULES = ("pyspark.worker", "pandas", "pyarrow", "coordinator_job.job", "coordinator_job.kafka_source",
                  "coordinator_job.file_source")


def collect_ms(runs: int) -> float:
    """The median time of `gc.collect()` over `runs` runs, in ms."""
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        gc.collect()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m coordinator_lab.worker_gc", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5, help="collections timed each time (default: %(default)s)")
    args = parser.parse_args(argv)
    for name in WORKER_MODULES:
        importlib.import_module(name)
    before_objects, before_ms = len(gc.get_objects()), collect_ms(args.runs)
    freeze_long_lived_objects()
    after_objects, after_ms = len(gc.get_objects()), collect_ms(args.runs)
    print(f"gc.collect() in a worker: {before_objects} objects tracked, {before_ms:.1f} ms (median of {args.runs}); "
          f"after freeze_long_lived_objects(): {after_objects} objects, {after_ms:.3f} ms "
          f"({gc.get_freeze_count()} frozen)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
