"""Test helper: one of Kafka 4.4's group tools run against the gateway and against a plain Kafka 4.4 broker at once,
and the two outputs compared once what legitimately differs is masked.

Each side has a group of its own (the same state, reached by the same clients), on the same broker's topics: the
gateway in front of the session's broker, and that broker directly. A command is written once with `{group}` (and
any other `{name}` a side fills in) and run on both sides in parallel (a tool's JVM takes seconds to start).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from kafka_jvm.tools import ToolResult, run_tool

# A classic member id is the client's `group.instance.id` (or client id) and a UUID the coordinator draws: Kafka a
# random one, the engine one derived from the request (so that a replay gives the same ids). Only the UUID is masked.
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
# The coordinator's address in the state views: the gateway's port against the broker's (both on loopback). The
# node id beside it is the same (the gateway's ports map node 1).
_ADDRESS = re.compile(r"127\.0\.0\.1:\d+")
# A log line's timestamp (the tools log WARN and above to stderr).
_LOG_TIME = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\]", re.MULTILINE)


@dataclass(frozen=True)
class Side:
    """Where one side's tool connects, and the names its groups and topics have there."""

    name: str
    bootstrap: str
    names: dict[str, str] = field(default_factory=dict)  # e.g. {"group": "gw-group-1a2b"}


def mask(text: str, side: Side) -> str:
    """`text` with the side's own names written as their keys ({group}), member UUIDs and addresses masked."""
    for key, value in sorted(side.names.items(), key=lambda item: -len(item[1])):  # longer names first
        text = text.replace(value, "{" + key + "}")
    text = _UUID.sub("<uuid>", text)
    text = _ADDRESS.sub("<host:port>", text)
    return _LOG_TIME.sub("[<time>]", text)


def only_our_groups(text: str) -> str:
    """A `--list` with only the groups this test named ({key} once masked), in sorted order, columns one space apart.
    The session's broker also holds every other test's groups: their lines go, and the tools size the GROUP column to
    the longest id they list, theirs included; the broker lists in its coordinator's hash map order. The header, the
    streams' labels and the exit status stay where they are."""
    kept: list[str] = []
    ours: list[str] = []
    for line in text.split("\n"):
        if line.startswith("{"):
            ours.append(" ".join(line.split()))
            continue
        kept.extend(sorted(ours))
        ours = []
        if line.startswith("GROUP"):
            kept.append(" ".join(line.split()))
        elif line.startswith(("[", "exit")) or not line.strip():
            kept.append(line)
    return "\n".join([*kept, *sorted(ours)])


def rows_in_any_order(text: str) -> str:
    """A table's rows sorted (its header line first): for views whose row order is a hash map's (Kafka lists a
    classic group's members in the order of a HashMap keyed by member id, whose UUID part is random)."""
    lines = text.split("\n")
    header = next((i for i, line in enumerate(lines) if line.startswith("GROUP")), None)
    if header is None:
        return text
    end = next((i for i in range(header + 1, len(lines)) if not lines[i].strip() or lines[i].startswith("[")),
               len(lines))  # the table ends at a blank line or at the next stream's label
    return "\n".join([*lines[:header + 1], *sorted(lines[header + 1:end]), *lines[end:]])


@dataclass(frozen=True)
class Compared:
    """One command's masked outputs on both sides."""

    command: str
    gateway: ToolResult
    kafka: ToolResult
    gateway_text: str
    kafka_text: str

    def explain(self) -> str:
        return (f"`{self.command}` printed differently through the gateway than against Kafka 4.4 (masked):\n"
                f"--- gateway (exit {self.gateway.returncode}) ---\n{self.gateway_text}\n"
                f"--- Kafka 4.4 (exit {self.kafka.returncode}) ---\n{self.kafka_text}")


def run_on(tool: str, command: str, side: Side) -> ToolResult:
    """`tool --bootstrap-server B <command>` against one side, `command`'s `{name}`s that side's names."""
    return run_tool(tool, "--bootstrap-server", side.bootstrap, *command.format(**side.names).split())


def printed(result: ToolResult, side: Side) -> str:
    """A tool's exit status, stdout and stderr, masked."""
    return mask(f"exit {result.returncode}\n[stdout]\n{result.stdout}[stderr]\n{result.stderr}", side)


def compare(tool: str, command: str, gateway: Side, kafka: Side,
            normalise: Callable[[str], str] = lambda text: text) -> Compared:
    """Runs `tool --bootstrap-server B <command>` on both sides at once; `command`'s `{name}`s are each side's names.
    `normalise` is applied to both masked outputs (e.g. `rows_in_any_order`)."""
    with ThreadPoolExecutor(2) as pool:
        on_gateway, on_kafka = pool.map(lambda side: run_on(tool, command, side), (gateway, kafka))
    return Compared(command, on_gateway, on_kafka, normalise(printed(on_gateway, gateway)),
                    normalise(printed(on_kafka, kafka)))


def assert_same(tool: str, command: str, gateway: Side, kafka: Side,
                normalise: Callable[[str], str] = lambda text: text) -> Compared:
    """Runs the command on both sides (`compare`) and asserts that both printed the same; returns both outputs."""
    compared = compare(tool, command, gateway, kafka, normalise)
    assert compared.gateway_text == compared.kafka_text, compared.explain()
    return compared
