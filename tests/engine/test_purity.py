"""The engine is sans-I/O: it imports with Spark, Kafka, pandas and randomness blocked, and reads no clock.

orjson is blocked too: it only speeds up reading records, and the engine must run on the standard library alone
(the shared conformance runner imports it from whatever environment it runs in)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "coordinator_state"
BLOCKED = ["pyspark", "kafka", "pandas", "pyarrow", "numpy", "random", "secrets", "socket", "orjson"]


def test_engine_imports_and_runs_with_io_modules_blocked() -> None:
    code = (
        "import sys\n"
        f"for name in {BLOCKED!r}: sys.modules[name] = None\n"
        f"sys.path.insert(0, {str(PACKAGE.parent)!r})\n"
        "from coordinator_state import LocalCoordinator, decode_record\n"
        "assert decode_record(b'{\"a\": [1, 2]}') == {'a': [1, 2]}\n"
        "c = LocalCoordinator({})\n"
        "r = c.handle({'api': 'Heartbeat', 'correlation_id': 1, 'reply_to': 'a', 'timestamp_ms': 5,"
        " 'body': {'group_id': 'g', 'generation_id': 1, 'member_id': 'm'}})\n"
        "assert r[0]['body']['error'] == 'UNKNOWN_MEMBER_ID', r\n"
        "print('ok')\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.stdout.strip() == "ok", result.stderr


def test_engine_source_reads_no_clock_and_draws_no_random_numbers() -> None:
    forbidden = {"time", "datetime", "random", "secrets", "uuid", "os", "socket", "threading"}
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name.split(".")[0] for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module.split(".")[0]]
            offenders += [f"{path.name}: {name}" for name in names if name in forbidden]
    assert offenders == []
