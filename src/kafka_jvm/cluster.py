"""Apache Kafka 4.4 on loopback: a KRaft combined node, or a three-node cluster, as processes of this machine.

    with KafkaCluster(nodes=3) as cluster:
        cluster.bootstrap_servers         # "127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3"
        cluster.kill(2); cluster.restart(2)

Each node is a `kafka.Kafka` JVM (what kafka-server-start.sh runs) with a data directory formatted by
`kafka.tools.StorageTool` and its log in `<work dir>/node-N/server.log`. Client listeners bind port 0 (the node picks
its port; the launcher reads it from the node's log, and a restarted node binds the port it had). Controller ports
must be known before the quorum is formatted: they are probed free, and a node that could not bind its port sends
the whole start round again on fresh ports. The JVMs die with the process that started them (PR_SET_PDEATHSIG), so
a test run that is killed leaves none behind; `stop` terminates them cleanly (SIGTERM, then SIGKILL).
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import logging
import re
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from coordinator_job.broker import free_loopback_port, wait_for_broker
from kafka_jvm.build import classpath

log = logging.getLogger(__name__)


# Kafka's defaults, except what a cluster of one or three nodes on one machine needs: internal topics that fit it.
def _base_properties(nodes: int) -> dict[str, str]:
    replicas = str(min(nodes, 3))
    return {
        "offsets.topic.replication.factor": replicas,
        "transaction.state.log.replication.factor": replicas,
        "transaction.state.log.min.isr": "1",
        "share.coordinator.state.topic.replication.factor": replicas,
        "share.coordinator.state.topic.min.isr": "1",
        "default.replication.factor": "1",
        "min.insync.replicas": "1",
        # The tests, replays and benches write recorded traffic stamped with its event time (from 2023's simulation
        # epoch): Kafka's retention deletes by record time, so within its 5-minute check a topic's log start passed
        # offsets a test still read (OFFSET_OUT_OF_RANGE at offset 0). Nothing on these brokers lives long.
        "log.retention.ms": "-1",
    }


_LOG4J2 = """\
status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = ${sys:kafka.logs.dir}/server.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = file
"""
# The client listener's bound port, as the node's socket server logs it (the controller's line comes first).
_LISTENING = re.compile(r"Awaiting socket connections on 127\.0\.0\.1:(\d+)\.")
_STARTED = "Kafka Server started"
_BIND_FAILED = ("Address already in use", "BindException")
_JVM_OPTIONS = ["-Xms256m", "-Xmx1g", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-Djava.awt.headless=true"]
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL it when the process that started it ends (Linux; elsewhere a no-op)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def run_java(main_class: str, *args: str, jvm_options: list[str] | None = None, **popen: object
             ) -> subprocess.Popen[bytes]:
    """Start `main_class` of Kafka 4.4's classpath (or the project's programs) as a process that dies with this one."""
    command = ["java", *(jvm_options or []), "-cp", classpath(), main_class, *args]
    return subprocess.Popen(command, preexec_fn=_die_with_parent, **popen)  # type: ignore[call-overload,no-any-return]


class KafkaStartError(RuntimeError):
    """A node did not start; the message names its log."""


@dataclass
class KafkaNode:
    """One KRaft combined node (broker and controller) of a cluster."""

    node_id: int
    directory: Path
    controller_port: int
    directory_id: str
    port: int = 0  # the client listener's; 0 until the node has bound one
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def log_path(self) -> Path:
        return self.directory / "server.log"

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None


class KafkaCluster:
    """`nodes` (1 or 3) KRaft combined nodes of Apache Kafka 4.4 on loopback, each a process.

    `properties`: broker settings over the defaults (Kafka's, with replication factors that fit the cluster), e.g.
    ``{"group.initial.rebalance.delay.ms": "0"}``. `work_dir`: where data and logs go (a temporary directory,
    removed at stop, by default).
    """

    def __init__(self, nodes: int = 1, properties: Mapping[str, str] | None = None, work_dir: Path | None = None,
                 startup_timeout_s: float = 90.0) -> None:
        if nodes < 1:
            raise ValueError("a cluster has at least one node")
        self.node_count = nodes
        self.properties = {**_base_properties(nodes), **(properties or {})}
        self._own_work_dir = work_dir is None
        self.work_dir = work_dir or Path(tempfile.mkdtemp(prefix="kafka-4.4-"))
        self.startup_timeout_s = startup_timeout_s
        self.nodes: list[KafkaNode] = []
        self.cluster_id = ""

    @property
    def bootstrap_servers(self) -> str:
        """``host:port`` of every running node, comma-separated."""
        servers = [f"127.0.0.1:{node.port}" for node in self.nodes if node.port and node.alive]
        if not servers:
            raise RuntimeError("the Kafka cluster is not running")
        return ",".join(servers)

    def node(self, node_id: int) -> KafkaNode:
        return next(node for node in self.nodes if node.node_id == node_id)

    def start(self, attempts: int = 3) -> KafkaCluster:
        """Format and start every node, then wait until the cluster answers metadata with all of them."""
        last_error: KafkaStartError | None = None
        for _ in range(attempts):
            self._prepare()
            try:
                for node in self.nodes:
                    self._launch(node)
                self._await_started(self.nodes)
                wait_for_broker(self.bootstrap_servers, timeout_s=self.startup_timeout_s)
                self._await_brokers(self.node_count)
            except KafkaStartError as exc:
                last_error = exc
                self.stop(keep_work_dir=True)
                if not self._bind_failed():
                    raise
                log.warning("a Kafka node could not bind its controller port; starting again on fresh ports")
                continue
            except BaseException:
                self.stop()
                raise
            log.info("Apache Kafka 4.4 up: %s (logs in %s)", self.bootstrap_servers, self.work_dir)
            return self
        raise last_error or KafkaStartError("Kafka did not start")

    def _prepare(self) -> None:
        """Fresh directories, ports and ids for every node, formatted as one cluster."""
        for old in self.nodes:
            shutil.rmtree(old.directory, ignore_errors=True)
        self.cluster_id = kafka_uuid()
        self.nodes = [KafkaNode(node_id=n, directory=self.work_dir / f"node-{n}", controller_port=free_loopback_port(),
                                directory_id=kafka_uuid())
                      for n in range(1, self.node_count + 1)]
        voters = ",".join(f"{n.node_id}@127.0.0.1:{n.controller_port}:{n.directory_id}" for n in self.nodes)
        for node in self.nodes:
            node.directory.mkdir(parents=True)
            self._write_config(node)
            (node.directory / "log4j2.properties").write_text(_LOG4J2)
            quorum = ["--standalone"] if self.node_count == 1 else ["--initial-controllers", voters]
            _storage_tool_output("format", "-t", self.cluster_id, "-c", str(node.directory / "server.properties"),
                                 *quorum)

    def _write_config(self, node: KafkaNode) -> None:
        controllers = ",".join(f"127.0.0.1:{n.controller_port}" for n in self.nodes)
        settings = {
            "process.roles": "broker,controller",
            "node.id": str(node.node_id),
            "controller.quorum.bootstrap.servers": controllers,
            "listeners": f"PLAINTEXT://127.0.0.1:{node.port},CONTROLLER://127.0.0.1:{node.controller_port}",
            "inter.broker.listener.name": "PLAINTEXT",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(node.directory / "data"),
            **self.properties,
        }
        (node.directory / "server.properties").write_text("".join(f"{k}={v}\n" for k, v in settings.items()))

    def _launch(self, node: KafkaNode) -> None:
        with open(node.directory / "stdout.log", "ab") as output:
            node.process = run_java(
                "kafka.Kafka", str(node.directory / "server.properties"),
                jvm_options=[*_JVM_OPTIONS, f"-Dkafka.logs.dir={node.directory}",
                             f"-Dlog4j2.configurationFile={node.directory / 'log4j2.properties'}"],
                stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT)

    def _await_started(self, nodes: list[KafkaNode]) -> None:
        """Wait for each node's "started" line and read its client port from its log."""
        deadline = time.monotonic() + self.startup_timeout_s
        pending = list(nodes)
        while pending:
            for node in list(pending):
                text = node.log_path.read_text(errors="replace") if node.log_path.exists() else ""
                if not node.alive:
                    raise KafkaStartError(f"Kafka node {node.node_id} exited; see {node.log_path} and "
                                          f"{node.directory / 'stdout.log'}")
                if _STARTED in text:
                    ports = [int(p) for p in _LISTENING.findall(text) if int(p) != node.controller_port]
                    node.port = ports[-1]
                    pending.remove(node)
            if pending and time.monotonic() > deadline:
                self.stop(keep_work_dir=True)
                raise KafkaStartError(f"Kafka node(s) {[n.node_id for n in pending]} did not start within "
                                      f"{self.startup_timeout_s:.0f} s; see {pending[0].log_path}")
            time.sleep(0.1)

    def _await_brokers(self, count: int) -> None:
        """Wait until the cluster's metadata lists `count` unfenced brokers."""
        from kafka import KafkaAdminClient

        deadline = time.monotonic() + self.startup_timeout_s
        admin = KafkaAdminClient(bootstrap_servers=self.bootstrap_servers, client_id="kafka-launcher")
        try:
            while len(admin.describe_cluster()["brokers"]) < count:
                if time.monotonic() > deadline:
                    raise KafkaStartError(f"the cluster did not list {count} brokers within "
                                          f"{self.startup_timeout_s:.0f} s; see {self.work_dir}")
                time.sleep(0.2)
        finally:
            admin.close()

    def _bind_failed(self) -> bool:
        return any(marker in node.log_path.read_text(errors="replace") for node in self.nodes
                   if node.log_path.exists() for marker in _BIND_FAILED)

    def kill(self, node_id: int) -> None:
        """SIGKILL one node (a crash: no controlled shutdown)."""
        node = self.node(node_id)
        if node.process is not None:
            node.process.kill()
            node.process.wait()
        node.process = None

    def restart(self, node_id: int) -> None:
        """Start a stopped node again on the port it had, with its data, and wait until it is back in the cluster."""
        node = self.node(node_id)
        if node.alive:
            raise RuntimeError(f"node {node_id} is running")
        self._write_config(node)
        node.log_path.rename(node.log_path.with_suffix(f".{int(time.time())}.log"))
        self._launch(node)
        self._await_started([node])
        self._await_brokers(self.node_count)

    def stop(self, grace_s: float = 20.0, keep_work_dir: bool = False) -> None:
        """SIGTERM every node (a controlled shutdown), SIGKILL those still up after `grace_s`; idempotent."""
        running = [node.process for node in self.nodes if node.process is not None and node.process.poll() is None]
        for process in running:
            process.terminate()
        deadline = time.monotonic() + grace_s
        for process in running:
            try:
                process.wait(timeout=max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        for node in self.nodes:
            node.process = None
        if self._own_work_dir and not keep_work_dir:
            shutil.rmtree(self.work_dir, ignore_errors=True)

    def __enter__(self) -> KafkaCluster:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


def _storage_tool_output(*args: str) -> str:
    """Run kafka-storage.sh's class with the tools' JVM options; its stdout, stripped."""
    process = run_java("kafka.tools.StorageTool", *args, jvm_options=["-Xmx256m", "-XX:TieredStopAtLevel=1"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = process.communicate(timeout=120)
    if process.returncode != 0:
        raise KafkaStartError(f"kafka-storage {' '.join(args)} failed: {err.decode(errors='replace')[-2000:]}")
    return str(out.decode().strip().splitlines()[-1]) if out.strip() else ""


def kafka_uuid() -> str:
    """A random id as Kafka's Uuid.randomUuid() writes it (URL-safe base64 of 16 bytes, never starting with '-'), for
    cluster and directory ids without a JVM start each."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text
