"""Apache Kafka 4.4's admin command-line tools, run as its scripts run them.

    result = run_tool(CONSUMER_GROUPS, "--bootstrap-server", address, "--describe", "--group", "g")
    result.stdout, result.stderr, result.returncode

kafka-run-class.sh starts a tool's main class with `-Xmx256M` and `-Dlog4j2.configurationFile=tools-log4j2.yaml`
(WARN and above to stderr); `run_tool` does the same on jvm/'s classpath, through `run_java` (the JVM dies with this
process), and waits for it within a bound.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from kafka_jvm.cluster import run_java

CONSUMER_GROUPS = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"  # kafka-consumer-groups.sh
STREAMS_GROUPS = "org.apache.kafka.tools.streams.StreamsGroupCommand"  # kafka-streams-groups.sh
TOOLS_LOG4J2 = Path(__file__).with_name("tools-log4j2.yaml")
TOOLS_JVM_OPTIONS = ("-Xmx256M", f"-Dlog4j2.configurationFile={TOOLS_LOG4J2}")


@dataclass(frozen=True)
class ToolResult:
    """What a tool printed and its exit status."""

    command: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str


def run_tool(main_class: str, *args: str, timeout_s: float = 60.0) -> ToolResult:
    """Runs a tool to its end (killed after `timeout_s`, then TimeoutError) and returns what it printed."""
    process = run_java(main_class, *args, jvm_options=list(TOOLS_JVM_OPTIONS), stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        stdout, stderr = process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        raise TimeoutError(f"{main_class} {' '.join(args)} did not finish within {timeout_s} s") from None
    return ToolResult((main_class, *args), process.returncode, stdout.decode(), stderr.decode())
