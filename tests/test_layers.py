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


def test_the_import_contracts_hold() -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT / "src"), str(REPO_ROOT)])}
    result = subprocess.run([str(Path(sys.executable).parent / "lint-imports"), "--no-cache"], cwd=REPO_ROOT,
                            env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout and "3 kept" in result.stdout, result.stdout


def test_the_envelope_needs_none_of_the_engines_state_machine() -> None:
    """envelope.py is the vocabulary every side imports: it reaches only the record types, the listing rule and
    the error codes, never a group, a handler or the parser."""
    package = REPO_ROOT / "src" / "coordinator_state"
    reached, todo = set(), ["envelope"]
    while todo:
        module = todo.pop()
        reached.add(module)
        for node in ast.walk(ast.parse((package / f"{module}.py").read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module not in reached:
                todo.append(str(node.module))
    assert reached == {"envelope", "records", "listing", "errors"}


def test_the_client_takes_no_coordinator_from_the_engine() -> None:
    taken: dict[str, set[str]] = {}
    for path in sorted((REPO_ROOT / "src" / "group_client").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("coordinator_state"):
                taken.setdefault(path.name, set()).update(alias.name for alias in node.names)
    assert {name: names & ENGINE_INTERNALS for name, names in taken.items() if names & ENGINE_INTERNALS} == {}
