"""Spark's reused Python workers collect garbage after every task (`pyspark.daemon` calls `gc.collect()` between
tasks). A worker holds ~100,000 long-lived objects (pandas, pyarrow, kafka-python, PySpark, the engine), so each of
those full collections took 70-110 ms: in every source, operator and sink task of every micro-batch, and while the
worker collects, the next task waits for it. Freezing the long-lived objects once (`gc.freeze`) leaves the
collector only what the tasks allocate (`python -m coordinator_lab.worker_gc` measures both).
"""

from __future__ import annotations

import gc
import os

_frozen_in: int | None = None  # the process whose objects were frozen (a forked child collects its own)


def freeze_long_lived_objects() -> None:
    """Once per process: loads the libraries the job's Python code runs on, collects, and freezes what is left.

    Called first thing by every function the job runs in a Spark Python process, so whichever task a worker runs
    first freezes it. What is frozen is never collected: only objects alive at that moment, once."""
    global _frozen_in
    if _frozen_in == os.getpid():
        return
    import pandas  # noqa: F401  # the libraries of every stage, loaded before freezing so that they are frozen too
    import pyarrow  # noqa: F401

    from . import job, kafka_source  # noqa: F401
    gc.collect()
    gc.freeze()
    _frozen_in = os.getpid()
