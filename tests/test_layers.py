"""The package layering: no import cycle between packages, the client free of Spark, the harness and plotting.

The contracts are pyproject.toml's `[tool.importlinter]` (checked by import-linter over every import
statement, those inside functions included); the client's use of the engine is checked here by name.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
# What the client may take from the engine's package: its wire vocabulary, never the coordinator itself.
ENGINE_INTERNALS = {"LocalCoordinator", "run_group", "handle_in_group", "Group", "GroupOutcome", "encode_group",
                    "decode_group"}


# The tools over recorded traffic, run the way a user runs them; none of them runs Spark. `record` points at a
# closed port: it gives up at once, after importing all it needs.
TOOLS_WITHOUT_SPARK = f"""
import sys, tempfile
from pathlib import Path
from coordinator_cli import main
folder = Path(tempfile.mkdtemp())
traffic = {str(REPO_ROOT / "tests" / "fixtures" / "golden" / "hostile" / "traffic.jsonl")!r}
assert main(["replay", "--input", traffic, "--output", str(folder / "a.jsonl")]) == 0
assert main(["diff", traffic, traffic]) == 0
assert main(["record", "--topic", "t", "--output", str(folder / "r.jsonl"), "--bootstrap-servers", "127.0.0.1:1",
             "--connect-timeout", "0.1"]) == 1
print(sorted(m for m in sys.modules if m.split(".")[0] in ("pyspark", "pandas", "pyarrow")))
"""


def test_replay_record_and_diff_load_no_spark() -> None:
    result = subprocess.run([sys.executable, "-c", TOOLS_WITHOUT_SPARK], cwd=REPO_ROOT, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "[]"


def test_the_import_contracts_hold() -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT / "src"), str(REPO_ROOT)])}
    result = subprocess.run([str(Path(sys.executable).parent / "lint-imports"), "--no-cache"], cwd=REPO_ROOT,
                            env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout and "4 kept" in result.stdout, result.stdout


def test_the_client_takes_no_coordinator_from_the_engine() -> None:
    taken: dict[str, set[str]] = {}
    for path in sorted((REPO_ROOT / "src" / "group_client").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("coordinator_state"):
                taken.setdefault(path.name, set()).update(alias.name for alias in node.names)
    assert {name: names & ENGINE_INTERNALS for name, names in taken.items() if names & ENGINE_INTERNALS} == {}
