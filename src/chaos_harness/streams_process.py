"""A Kafka Streams 4.4 instance as a process: the JVM program `coordinator.jvm.StreamsCounter` (jvm/), a stateful
count by key through a repartition topic, in a streams group (`group.protocol=streams`, KIP-1071).

    instance = StreamsProcess(bootstrap_servers, "app", "app.in", "app.out", work_dir / "slot-0", "app-0")
    instance.wait_for(lambda events: ..., timeout_s=30)
    instance.tasks()            # the active tasks it runs, e.g. ["0_1", "1_1"]
    instance.stop()             # SIGTERM: KafkaStreams.close() (a static member leaves only temporarily)
    instance.kill()             # SIGKILL: a crash

Its JSON-line events (`started`, `state` {from, to}, `tasks` {active, standby}, `error`, `stopped`; each with `t`
and `instance`) are collected as they come, like `real_consumer.ConsumerProcess`'s. The instance's directory holds
its state directory (kept across incarnations: Kafka Streams keeps its process id and its stores there) and the
client's log (`streams.log`, Kafka's own log lines at INFO, every incarnation appended), which `log_warnings`
summarizes.
"""

from __future__ import annotations

import re
import subprocess
import time
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import cast

from kafka_jvm.cluster import run_java

from .event_process import EventProcess

MAIN_CLASS = "coordinator.jvm.StreamsCounter"
# A small heap, and the client compiler only: an instance reached its first state change in 8-21 s with these, 11-30 s
# without (three starts each, on this 2-core machine at load 40).
JVM_OPTIONS = ["-Xms64m", "-Xmx384m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true"]
_LOG4J2 = """\
status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = file
"""
LOG_NAME = "streams.log"
_LEVEL = re.compile(r"^\[[^]]*\] (WARN|ERROR) (.*)$")
# What differs between runs in a log line: ids, counters, addresses, times, paths.
_VARYING = [(re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"), "<uuid>"),
            (re.compile(r"\b(?:\d{1,3}\.){3}\d{1,3}:\d+\b"), "<address>"),
            (re.compile(r"/\S+"), "<path>"),
            (re.compile(r"\d+"), "<n>")]


class StreamsProcess(EventProcess):
    """The parent's handle on one Kafka Streams instance: its events as they come, stop, kill."""

    def __init__(self, bootstrap_servers: str, application_id: str, input_topic: str, output_topic: str,
                 directory: Path, instance_id: str | None = None, *, threads: int = 1,
                 commit_interval_ms: int = 100) -> None:
        self.instance_id, self.directory = instance_id, directory
        directory.mkdir(parents=True, exist_ok=True)
        log4j = directory / "log4j2.properties"
        log4j.write_text(_LOG4J2.format(log=directory / LOG_NAME))
        args = ["--bootstrap-servers", bootstrap_servers, "--application-id", application_id,
                "--input", input_topic, "--output", output_topic, "--state-dir", str(directory / "state"),
                "--threads", str(threads), "--commit-interval-ms", str(commit_interval_ms)]
        if instance_id is not None:
            args += ["--instance-id", instance_id]
        self.started = time.time()
        process = cast("subprocess.Popen[str]", run_java(
            MAIN_CLASS, *args, jvm_options=[*JVM_OPTIONS, f"-Dlog4j2.configurationFile={log4j}"],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True))
        self._follow(process, f"streams-{instance_id or directory.name}")

    @property
    def alive(self) -> bool:
        return self._process.poll() is None

    def state(self) -> str | None:
        """The instance's latest state (KafkaStreams.State), None before its first change."""
        states = [e["to"] for e in list(self.events) if e["event"] == "state"]
        return states[-1] if states else None

    def running(self) -> bool:
        return self.alive and self.state() == "RUNNING"

    def tasks(self) -> list[str]:
        """The active tasks of its latest `tasks` event ([] before any)."""
        reported = [e["active"] for e in list(self.events) if e["event"] == "tasks"]
        return list(reported[-1]) if reported else []

    def errors(self) -> list[str]:
        return [str(e["message"]) for e in list(self.events) if e["event"] == "error"]


def log_warnings(directories: Iterable[Path]) -> dict[str, int]:
    """The WARN and ERROR lines of the instances' client logs, with ids, numbers, addresses and paths masked, each
    with how many times it appeared: what the Kafka Streams client complained about."""
    found: Counter[str] = Counter()
    for directory in directories:
        path = directory / LOG_NAME
        for line in path.read_text(errors="replace").splitlines() if path.exists() else []:
            if match := _LEVEL.match(line):
                text = f"{match[1]} {match[2]}"
                for pattern, mask in _VARYING:
                    text = pattern.sub(mask, text)
                found[text] += 1
    return dict(sorted(found.items()))
