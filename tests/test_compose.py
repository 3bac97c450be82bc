"""docker-compose.yml: the broker, the topics it creates and the job's address and settings match the project's.

PyYAML is not a dependency, so the file is read with a parser for the subset of YAML it uses (block
mappings and sequences, `|` blocks, JSON-style flow values); `docker compose config` checks the real
thing where the compose CLI is installed.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from coordinator_job.live_job import topic_specs
from coordinator_job.settings import DEFAULTS, env_name, load_settings
from kafka_jvm.build import kafka_version

COMPOSE = Path(__file__).resolve().parents[1] / "docker-compose.yml"
PROMETHEUS = COMPOSE.parent / "docker" / "prometheus.yml"


def _scalar(text: str) -> Any:
    if text.startswith(("[", "{", '"')):
        return json.JSONDecoder().raw_decode(text)[0]
    return text.split(" #", 1)[0].strip().strip("'")


def parse_compose_yaml(text: str) -> Any:
    """Block mappings, block sequences of scalars, `key: |` blocks and JSON-style flow values."""
    lines = text.splitlines()

    def meaningful(i: int) -> int:
        while i < len(lines) and (not lines[i].strip() or lines[i].lstrip().startswith("#")):
            i += 1
        return i

    def indent(i: int) -> int:
        return len(lines[i]) - len(lines[i].lstrip())

    def block(i: int, level: int) -> tuple[Any, int]:
        i = meaningful(i)
        if lines[i].lstrip().startswith("- "):
            items = []
            while i < len(lines) and indent(i) == level and lines[i].lstrip().startswith("- "):
                item = lines[i].strip()[2:]
                if item == "|":
                    value, i = literal(i + 1, level)
                else:
                    value, i = _scalar(item), i + 1
                items.append(value)
                i = meaningful(i)
            return items, i
        mapping: dict[str, Any] = {}
        while i < len(lines) and indent(i) == level:
            key, _, rest = lines[i].strip().partition(":")
            rest = rest.strip()
            if rest == "|":
                mapping[key], i = literal(i + 1, level)
            elif rest:
                mapping[key], i = _scalar(rest), i + 1
            else:
                nxt = meaningful(i + 1)
                deeper = nxt < len(lines) and indent(nxt) > level
                mapping[key], i = block(nxt, indent(nxt)) if deeper else (None, nxt)
            i = meaningful(i)
        return mapping, i

    def literal(i: int, level: int) -> tuple[str, int]:
        body = []
        while i < len(lines) and (not lines[i].strip() or indent(i) > level):
            body.append(lines[i])
            i += 1
        margin = min(len(line) - len(line.lstrip()) for line in body if line.strip())
        return "\n".join(line[margin:] for line in body).strip() + "\n", i

    return block(0, 0)[0]


@pytest.fixture(scope="module")
def compose() -> Any:
    return parse_compose_yaml(COMPOSE.read_text())


def test_the_parser_reads_the_subset() -> None:
    text = 'a:\n  # note\n  b: "x:y"\n  c: [1, "2"]\n  d:\n    - "p"  # q\n    - r\n  e: |\n    one\n      two\nf:\n'
    assert parse_compose_yaml(text) == {"a": {"b": "x:y", "c": [1, "2"], "d": ["p", "r"], "e": "one\n  two\n"},
                                        "f": None}


def test_services(compose: Any) -> None:
    assert set(compose["services"]) == {"kafka", "topics", "coordinator", "gateway", "prometheus"}
    assert set(compose["volumes"]) == {"kafka-data", "checkpoints"}


def test_kafka_is_a_single_kraft_node_reachable_from_the_host_and_from_containers(compose: Any) -> None:
    kafka = compose["services"]["kafka"]
    env = kafka["environment"]
    # The version the tests run (jvm/pom.xml's), so that what users start is what was tested.
    assert kafka["image"] == f"apache/kafka:{kafka_version()}"
    assert compose["services"]["topics"]["image"] == kafka["image"]
    assert env["KAFKA_PROCESS_ROLES"] == "broker,controller"
    listeners = dict(item.split("://") for item in env["KAFKA_LISTENERS"].split(","))
    advertised = dict(item.split("://") for item in env["KAFKA_ADVERTISED_LISTENERS"].split(","))
    protocols = dict(item.split(":") for item in env["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"].split(","))
    assert advertised["PLAINTEXT"] == "kafka:9092" and listeners["PLAINTEXT"] == ":9092"
    [published] = kafka["ports"]
    host_port, container_port = published.split(":")
    [host_listener] = [name for name, address in listeners.items() if address == f":{container_port}"]
    assert (host_port, advertised[host_listener]) == ("9092", "localhost:9092")
    assert protocols[host_listener] == protocols["PLAINTEXT"] == "PLAINTEXT"
    assert env["KAFKA_CONTROLLER_QUORUM_VOTERS"] == f"{env['KAFKA_NODE_ID']}@kafka{listeners['CONTROLLER']}"


def test_the_topics_are_the_coordinators(compose: Any) -> None:
    topics = compose["services"]["topics"]
    assert topics["depends_on"] == {"kafka": {"condition": "service_healthy"}}
    [script] = topics["command"]
    created = []
    for line in script.splitlines():
        assert "--bootstrap-server kafka:9092" in line and "--if-not-exists" in line
        name = re.search(r"--topic (\S+)", line)
        partitions = re.search(r"--partitions (\d+)", line)
        assert name is not None and partitions is not None, line
        created.append((name.group(1), int(partitions.group(1)), "cleanup.policy=compact" in line))
    assert created == topic_specs(load_settings(environ={}))


def test_the_job_uses_kafka_on_the_compose_network_with_its_settings_overridden(compose: Any) -> None:
    job = compose["services"]["coordinator"]
    command = job["command"]
    assert command[:2] == ["coordinator", "run"]
    assert command[command.index("--bootstrap-servers") + 1] == "kafka:9092"
    assert job["depends_on"] == {"topics": {"condition": "service_completed_successfully"}}
    env = {name: str(value) for name, value in job["environment"].items()}
    names = {env_name(key): key for key in DEFAULTS}
    assert env and set(env) <= set(names), set(env) - set(names)
    settings = load_settings(environ=env)
    for name, value in env.items():
        assert str(settings[names[name]]) == value
    checkpoints = settings["coordinator.checkpoint.root"]
    assert job["volumes"] == [f"checkpoints:{checkpoints}"]


def _compose_cli() -> str | None:
    """Why `docker compose` cannot be run here, or None if it can."""
    docker = shutil.which("docker")
    if docker is None:
        return "the docker CLI is not installed"
    probe = subprocess.run([docker, "compose", "version"], capture_output=True, text=True, timeout=30)
    if probe.returncode != 0:
        first_line = (probe.stderr or probe.stdout).strip().partition("\n")[0]
        return f"`docker compose` is not available: {first_line}"
    return None


def test_docker_compose_config_accepts_the_file() -> None:
    reason = _compose_cli()
    if reason is not None:
        pytest.skip(reason)
    checked = subprocess.run(["docker", "compose", "-f", str(COMPOSE), "config", "--quiet"], capture_output=True,
                             text=True, timeout=60)
    assert checked.returncode == 0, checked.stderr


def test_the_gateway_fronts_kafka_on_the_compose_network_with_its_ports_published(compose: Any) -> None:
    gateway = compose["services"]["gateway"]
    command = gateway["command"]
    assert command[:2] == ["coordinator", "gateway"]
    assert command[command.index("--bootstrap-servers") + 1] == "kafka:9092"
    listen_port = int(command[command.index("--listen") + 1].rpartition(":")[2])
    # The bootstrap port, then node 1's (the single broker's) right after it.
    assert gateway["ports"] == [f"{listen_port}:{listen_port}", f"{listen_port + 1}:{listen_port + 1}"]
    assert gateway["depends_on"] == {"topics": {"condition": "service_completed_successfully"}}


def _metrics_ports(compose: Any) -> dict[str, int]:
    """Where each service serves its metrics (coordinator.metrics.listen, or --metrics-listen)."""
    job_env = compose["services"]["coordinator"]["environment"]
    command = compose["services"]["gateway"]["command"]
    return {"coordinator": int(job_env[env_name("coordinator.metrics.listen")].rpartition(":")[2]),
            "gateway": int(command[command.index("--metrics-listen") + 1].rpartition(":")[2])}


def test_prometheus_scrapes_the_job_and_the_gateway_where_they_serve_their_metrics(compose: Any) -> None:
    prometheus = compose["services"]["prometheus"]
    assert prometheus["image"].startswith("prom/prometheus:")
    assert prometheus["volumes"] == [f"./docker/{PROMETHEUS.name}:/etc/prometheus/prometheus.yml:ro"]
    targets = re.findall(r'targets: \["([^"]+)"\]', PROMETHEUS.read_text())
    assert sorted(targets) == sorted(f"{service}:{port}" for service, port in _metrics_ports(compose).items())
    assert set(prometheus["depends_on"]) == {"coordinator", "gateway"}
