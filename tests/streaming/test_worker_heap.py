"""A Spark Python process freezes its long-lived objects once, so that `pyspark.daemon`'s collection after every
task only walks what the tasks allocate; a worker forked from a frozen process freezes its own. Run in a fresh
interpreter: the test process has frozen nothing and must not start to."""

from __future__ import annotations

import json
import subprocess
import sys

# Each call is followed by 1,000 new long-lived objects; the next call in the same process leaves them to the
# collector, the first one in a forked child freezes them.
FREEZES = """
import gc, json, os
import pandas, pyarrow, coordinator_job.job  # what a worker has loaded when its first task calls it
from coordinator_job.worker_heap import freeze_long_lived_objects

def figures(**more):
    return {"frozen": gc.get_freeze_count(), "tracked": len(gc.get_objects()), **more}

before = len(gc.get_objects())
freeze_long_lived_objects()
first = figures(before=before)
kept = [[] for _ in range(1000)]
freeze_long_lived_objects()
second = figures()
print(json.dumps({"first": first, "second": second}), flush=True)
child = os.fork()
if child == 0:
    freeze_long_lived_objects()
    print(json.dumps({"child": figures()}), flush=True)
    os._exit(0)
assert os.waitpid(child, 0)[1] == 0
"""


def test_a_process_freezes_its_long_lived_objects_once_and_a_forked_child_its_own() -> None:
    result = subprocess.run([sys.executable, "-c", FREEZES], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    parent, child = (json.loads(line) for line in result.stdout.splitlines())
    first, second = parent["first"], parent["second"]
    # pandas, pyarrow and the job's modules: tens of thousands of objects, of which the collector keeps few.
    assert first["before"] > 20_000
    assert first["frozen"] > first["before"] / 2
    assert first["tracked"] < first["before"] / 20
    # Called again in the same process: nothing more frozen, the 1,000 new lists still tracked.
    assert second["frozen"] == first["frozen"]
    assert second["tracked"] >= first["tracked"] + 1000
    # A forked child (a worker of pyspark.daemon) freezes what it inherited unfrozen.
    assert child["child"]["frozen"] >= second["frozen"] + 1000
    assert child["child"]["tracked"] < 1000
