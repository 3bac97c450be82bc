"""The JVM world's classpath: jvm/'s Maven project (Apache Kafka 4.4.0 and the project's small JVM programs), built
on first use and again whenever its sources change.

`mvn package` fetches the artifacts from Maven Central into ~/.m2 (the first time: about a minute and 130 MB) and
lays the runtime classpath out in jvm/target/libs, as the distribution's libs/ folder; the project's programs go in
jvm/target/coordinator-jvm.jar. A stamp file records the sources it was built from, so later calls cost a stat.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import subprocess
from pathlib import Path

_JVM_DIR_ENV_VAR = "COORDINATOR_JVM_DIR"


class JvmUnavailable(RuntimeError):
    """Java or Maven is missing, or the Maven build failed: Apache Kafka cannot run here."""


def jvm_dir() -> Path:
    """The Maven project: ``$COORDINATOR_JVM_DIR``, else jvm/ beside src/ in this checkout."""
    override = os.environ.get(_JVM_DIR_ENV_VAR)
    return Path(override) if override else Path(__file__).resolve().parents[2] / "jvm"


def kafka_version() -> str:
    """The Apache Kafka version jvm/pom.xml pins (its one place)."""
    found = re.search(r"<kafka\.version>([^<]+)</kafka\.version>", (jvm_dir() / "pom.xml").read_text())
    if found is None:
        raise JvmUnavailable(f"{jvm_dir() / 'pom.xml'} names no kafka.version")
    return found.group(1)


def missing_tools() -> list[str]:
    """What is missing to build and run the JVM programs ([] when Java and Maven are on PATH and jvm/ is here)."""
    missing = []
    if shutil.which("java") is None:
        missing.append("Java 17+ (java not on PATH)")
    if shutil.which("mvn") is None:
        missing.append("Maven 3.8+ (mvn not on PATH; Debian/Ubuntu: apt-get install maven)")
    if not (jvm_dir() / "pom.xml").is_file():
        missing.append(f"the Maven project {jvm_dir()} (a source checkout has it; or set ${_JVM_DIR_ENV_VAR})")
    return missing


def _sources_digest(project: Path) -> str:
    """A digest of the POM and every source file: a change of either asks for a new build."""
    digest = hashlib.sha256()
    for path in sorted([project / "pom.xml", *(project / "src").rglob("*")]):
        if path.is_file():
            digest.update(str(path.relative_to(project)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def ensure_built(quiet: bool = True) -> Path:
    """Build jvm/ unless its last build is of the same sources; return the classpath directory (target/libs, with
    the project's own jar in it). Concurrent callers wait for one build (a file lock)."""
    missing = missing_tools()
    if missing:
        raise JvmUnavailable("cannot run Apache Kafka here, missing: " + "; ".join(missing))
    project = jvm_dir()
    target = project / "target"
    target.mkdir(exist_ok=True)
    stamp = target / "built-from"
    with open(target / ".build-lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        digest = _sources_digest(project)
        if stamp.is_file() and stamp.read_text() == digest and (target / "libs").is_dir():
            return target / "libs"
        command = ["mvn", "-B", "-q" if quiet else "-ntp", "package", "-DskipTests"]
        done = subprocess.run(command, cwd=project, capture_output=quiet, text=True, check=False)
        if done.returncode != 0:
            output = (done.stdout or "") + (done.stderr or "") if quiet else ""
            raise JvmUnavailable(
                f"`{' '.join(command)}` in {project} failed (exit {done.returncode}); Maven Central must be reachable "
                f"the first time (artifacts are cached in ~/.m2 afterwards).\n{output[-4000:]}")
        stamp.write_text(digest)
    return target / "libs"


def classpath() -> str:
    """The JVM classpath of Kafka 4.4 and the project's programs (built first if need be)."""
    libs = ensure_built()
    return f"{libs / '*'}{os.pathsep}{libs.parent / 'coordinator-jvm.jar'}"
