"""The package layering: no import cycle between packages or modules, the product apart from the lab.

The contracts are pyproject.toml's `[tool.importlinter]` (checked by import-linter over every import
statement, those inside functions included); the client's use of the engine, the module-level import graph of
everything under src and what the job's package holds are checked here from the source.
"""

from __future__ import annotations

import ast
import graphlib
import importlib.metadata
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO_ROOT = Path(__file__).resolve().parents[1]
SRC = REPO_ROOT / "src"
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
    assert "0 broken" in result.stdout and "6 kept" in result.stdout, result.stdout


def test_the_client_takes_no_coordinator_from_the_engine() -> None:
    taken: dict[str, set[str]] = {}
    for path in sorted((REPO_ROOT / "src" / "group_client").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("coordinator_state"):
                taken.setdefault(path.name, set()).update(alias.name for alias in node.names)
    assert {name: names & ENGINE_INTERNALS for name, names in taken.items() if names & ENGINE_INTERNALS} == {}


def _module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(path): path for path in sorted(SRC.rglob("*.py"))}


def _runs_on_import(body: list[ast.stmt]) -> Iterator[ast.Import | ast.ImportFrom]:
    """The import statements a module executes when imported: at top level, under `if` (but for `if
    TYPE_CHECKING`) and `try`, not inside functions or classes."""
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.If) and not (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"):
            yield from _runs_on_import(node.body + node.orelse)
        elif isinstance(node, ast.Try):
            yield from _runs_on_import(node.body + [s for h in node.handlers for s in h.body] + node.orelse
                                       + node.finalbody)


def imported_modules(module: str, nodes: Iterator[ast.Import | ast.ImportFrom]) -> set[str]:
    """The modules under src that `nodes` import: `from package import name` means the submodule `name` when
    there is one, else the package itself."""
    package = module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in MODULES)
            continue
        base = package
        for _ in range(node.level - 1):
            base = base.rpartition(".")[0]
        source = (f"{base}.{node.module}" if node.module else base) if node.level else str(node.module)
        for alias in node.names:
            if f"{source}.{alias.name}" in MODULES:
                found.add(f"{source}.{alias.name}")
            elif source in MODULES:
                found.add(source)
    return found - {module}


def module_import_graph() -> dict[str, set[str]]:
    graph = {}
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        graph[module] = imported_modules(module, _runs_on_import(tree.body))
    return graph


def test_no_import_circle_between_modules() -> None:
    graph = module_import_graph()
    assert len(graph) > 80 and graph["coordinator_job.replay"] >= {"coordinator_job.traffic_file"}, "graph not built"
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as error:
        raise AssertionError(f"import circle: {' -> '.join(error.args[1])}") from None


def test_the_envelope_needs_none_of_the_engines_state_machine() -> None:
    """envelope.py is the vocabulary every side imports: it reaches only the record types, the listing rule and
    the error codes, never a group, a handler or the parser."""
    graph = module_import_graph()
    reached, todo = set(), ["coordinator_state.envelope"]
    while todo:
        module = todo.pop()
        reached.add(module)
        todo += graph[module] - reached
    assert reached == {f"coordinator_state.{name}" for name in ("envelope", "records", "listing", "errors")}


# What the job's package may import: the engine, itself, Spark and what a deployment installs with it.
JOB_MAY_IMPORT = {"coordinator_state", "coordinator_metrics", "coordinator_job", "pyspark", "pyarrow", "pandas",
                  "kafka", "confluent_kafka", "prometheus_client", "py4j"}
LAB_WORDS = re.compile(r"bench|traffic_gen|generat|soak|ceiling|empty_(step|operator|processor)", re.IGNORECASE)


def test_the_job_package_holds_and_imports_no_benchmark_or_traffic_generator() -> None:
    imported: dict[str, set[str]] = {}
    lab_names: dict[str, list[str]] = {}
    for path in sorted((SRC / "coordinator_job").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        roots = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                 for alias in node.names}
        roots |= {str(node.module).split(".")[0] for node in ast.walk(tree)
                  if isinstance(node, ast.ImportFrom) and not node.level}
        imported[path.name] = roots - JOB_MAY_IMPORT - set(sys.stdlib_module_names)
        defined = [node.name for node in tree.body if isinstance(node, ast.FunctionDef | ast.ClassDef)]
        lab_names[path.name] = [name for name in [path.stem, *defined] if LAB_WORDS.search(name)]
    assert len(imported) >= 10, imported
    assert {name: roots for name, roots in imported.items() if roots} == {}
    assert {name: found for name, found in lab_names.items() if found} == {}


PRODUCT = ("coordinator_state", "coordinator_job", "kafka_gateway", "group_client", "coordinator_metrics")


def test_the_product_needs_only_the_runtime_dependencies() -> None:
    """What a deployment runs imports nothing that only an extra (demo, plot, dev) installs, not even lazily."""
    requirements = [Requirement(text) for text in importlib.metadata.requires("spark-group-coordinator") or []]
    runtime = {canonicalize_name(r.name) for r in requirements if r.marker is None}
    providers = importlib.metadata.packages_distributions()
    outside: dict[str, set[str]] = {}
    for package in PRODUCT:
        for path in sorted((SRC / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            roots = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                     for alias in node.names}
            roots |= {str(node.module).split(".")[0] for node in ast.walk(tree)
                      if isinstance(node, ast.ImportFrom) and not node.level}
            for root in roots - set(sys.stdlib_module_names) - set(PRODUCT):
                if not {canonicalize_name(d) for d in providers.get(root, [])} & runtime:
                    outside.setdefault(root, set()).add(path.relative_to(SRC).as_posix())
    assert "pyspark" in runtime and "matplotlib" not in runtime, runtime
    assert outside == {}
