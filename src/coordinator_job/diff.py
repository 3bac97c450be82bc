"""`coordinator diff`: are two output files the same and, if not, where do they differ.

The kind of a file is the kind of its first line (PROTOCOL.md sections 3, 4 and 4a):
- responses: compared by (reply_to, correlation_id) in any order; an exact duplicate is dropped (an
  at-least-once sink may write one twice), and two different responses to one key in one file are a
  difference in themselves (every request gets exactly one response);
- snapshots: the last snapshot of each group in the file wins (as in the compacted topic); a
  tombstone `{"group_id": G, "tombstone": true}` is a value like any other;
- dead letters: multisets keyed by `source`;
- traffic (requests and ticks, anything else): line by line, in order, since order is meaning there.
Lines are compared as JSON values (key order and spacing do not matter), lines that are not JSON as text.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from coordinator_state.envelope import API, BODY, GROUP_ID, is_tombstone, response_key

KINDS = ("responses", "snapshots", "dead-letters", "traffic")
NOT_JSON = object()
FIELDS_SHOWN = 4
VALUE_CHARS = 60


class UnreadableFile(Exception):
    """A file that cannot be read, or compared with the other one; the message says which and why."""


@dataclass(frozen=True)
class Line:
    number: int
    text: str
    value: Any  # the parsed JSON, or NOT_JSON


@dataclass(frozen=True)
class Difference:
    key: str  # what is compared: a response key, a group, a dead letter's source, a line number
    side: str  # "A only", "B only", "A", "B" (a conflict inside one file) or "A != B"
    detail: str

    def __str__(self) -> str:
        return f"{self.key}  [{self.side}]  {self.detail}"


@dataclass
class DiffReport:
    kind: str
    sizes: tuple[int, int]  # items compared on each side: keys, groups, dead letters or lines
    differences: list[Difference] = field(default_factory=list)

    @property
    def equal(self) -> bool:
        return not self.differences


def canonical(value: Any) -> str:
    """A text equal for equal JSON values whatever their key order (and telling 1, 1.0 and true apart)."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def short(value: Any) -> str:
    if value is NOT_JSON:
        return "(not JSON)"
    text = canonical(value)
    return text if len(text) <= VALUE_CHARS else text[:VALUE_CHARS - 3] + "..."


def field_differences(a: Any, b: Any, path: str = "") -> list[str]:
    """`path: a != b` for every leaf that differs; lists of different lengths are one difference."""
    if isinstance(a, dict) and isinstance(b, dict):
        found = []
        for key in [*a, *(k for k in b if k not in a)]:
            sub = f"{path}.{key}" if path else str(key)
            if key not in b:
                found.append(f"{sub}: {short(a[key])} != absent")
            elif key not in a:
                found.append(f"{sub}: absent != {short(b[key])}")
            else:
                found += field_differences(a[key], b[key], sub)
        return found
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in field_differences(x, y, f"{path}[{i}]")]
    if isinstance(a, list) and isinstance(b, list):
        return [f"{path or 'value'}: {len(a)} items != {len(b)} items"]
    if canonical(a) == canonical(b):
        return []
    return [f"{path or 'value'}: {short(a)} != {short(b)}"]


def describe_difference(a: Any, b: Any) -> str:
    found = field_differences(a, b)
    more = f" (and {len(found) - FIELDS_SHOWN} more)" if len(found) > FIELDS_SHOWN else ""
    return "; ".join(found[:FIELDS_SHOWN]) + more


def read_lines(path: Path) -> list[Line]:
    """The lines of a JSON-lines file, parsed; split on newlines only (U+2028 may sit inside a string)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UnreadableFile(f"cannot read {path}: {exc.strerror}") from None
    texts = data.decode("utf-8", errors="surrogateescape").split("\n")
    if texts and texts[-1] == "":
        texts.pop()
    lines = []
    for number, text in enumerate(texts, start=1):
        text = text.removesuffix("\r")
        try:
            value = json.loads(text)
        except (ValueError, RecursionError):
            value = NOT_JSON
        lines.append(Line(number, text, value))
    return lines


def line_kind(value: Any) -> str:
    if isinstance(value, dict):
        if "source" in value and "reason" in value:
            return "dead-letters"
        if isinstance(value.get(BODY), dict) and "error_code" in value[BODY] and API in value:
            return "responses"
        if API not in value and GROUP_ID in value and ("state" in value or is_tombstone(value)):
            return "snapshots"
    return "traffic"


def file_kind(path: Path, lines: Sequence[Line]) -> str | None:
    """The kind of the first line (None for an empty file); every line must be of it, unless it is traffic."""
    if not lines:
        return None
    kind = line_kind(lines[0].value)
    if kind != "traffic":
        for line in lines:
            if line_kind(line.value) != kind:
                raise UnreadableFile(f"{path}:{line.number}: not {kind} like line 1: {line.text[:VALUE_CHARS]!r}")
    return kind


def _response_summary(value: dict[str, Any]) -> str:
    body = value.get("body") or {}
    return f"{value.get('api')} of group {value.get('group_id')}: {body.get('error')} at {value.get('timestamp_ms')}"


def compare_responses(a: Sequence[Line], b: Sequence[Line]) -> DiffReport:
    def keyed(lines: Sequence[Line]) -> dict[str, dict[str, Any]]:
        found: dict[str, dict[str, Any]] = defaultdict(dict)
        for line in lines:
            matched = response_key(line.value)
            key = "no response key" if matched is None else f"reply_to={matched[0]} correlation_id={matched[1]}"
            found[key].setdefault(canonical(line.value), line.value)  # an exact duplicate is dropped
        return found

    left, right = keyed(a), keyed(b)
    report = DiffReport("responses", (len(left), len(right)))
    for key in [*left, *(k for k in right if k not in left)]:
        ours, theirs = list(left.get(key, {}).values()), list(right.get(key, {}).values())
        for side, answers in (("A", ours), ("B", theirs)):
            if len(answers) > 1:
                report.differences.append(Difference(key, side, f"{len(answers)} different responses: "
                                                                + describe_difference(answers[0], answers[1])))
        if not theirs:
            report.differences.append(Difference(key, "A only", _response_summary(ours[0])))
        elif not ours:
            report.differences.append(Difference(key, "B only", _response_summary(theirs[0])))
        elif len(ours) == len(theirs) == 1 and canonical(ours[0]) != canonical(theirs[0]):
            report.differences.append(Difference(key, "A != B", describe_difference(ours[0], theirs[0])))
    return report


def _snapshot_summary(value: dict[str, Any]) -> str:
    if is_tombstone(value):
        return "tombstone"
    return f"{value.get('state')}, generation {value.get('generation_id')}, version {value.get('version')}"


def compare_snapshots(a: Sequence[Line], b: Sequence[Line]) -> DiffReport:
    left = {str(line.value["group_id"]): line.value for line in a}  # the last one of each group wins
    right = {str(line.value["group_id"]): line.value for line in b}
    report = DiffReport("snapshots", (len(left), len(right)))
    for group in [*left, *(g for g in right if g not in left)]:
        key = f"group {group}"
        if group not in right:
            report.differences.append(Difference(key, "A only", _snapshot_summary(left[group])))
        elif group not in left:
            report.differences.append(Difference(key, "B only", _snapshot_summary(right[group])))
        elif canonical(left[group]) != canonical(right[group]):
            ours, theirs = left[group], right[group]
            if is_tombstone(ours) or is_tombstone(theirs):
                detail = f"{_snapshot_summary(ours)} != {_snapshot_summary(theirs)}"
            else:
                detail = describe_difference(ours, theirs)
            report.differences.append(Difference(key, "A != B", detail))
    return report


def compare_dead_letters(a: Sequence[Line], b: Sequence[Line]) -> DiffReport:
    def keyed(lines: Sequence[Line]) -> dict[str, Counter[str]]:
        found: dict[str, Counter[str]] = defaultdict(Counter)
        for line in lines:
            found[str(line.value["source"])][canonical(line.value)] += 1
        return found

    left, right = keyed(a), keyed(b)
    report = DiffReport("dead-letters", (len(a), len(b)))
    for source in [*left, *(s for s in right if s not in left)]:
        ours, theirs = left.get(source, Counter()), right.get(source, Counter())
        if ours == theirs:
            continue
        key = f"source {source}"
        if ours.total() == theirs.total() == 1:
            detail = describe_difference(json.loads(next(iter(ours))), json.loads(next(iter(theirs))))
            report.differences.append(Difference(key, "A != B", detail))
            continue
        for side, extra in (("A only", ours - theirs), ("B only", theirs - ours)):
            for letter, count in extra.items():
                times = f"{count} x " if count > 1 else ""
                report.differences.append(Difference(key, side, times + short(json.loads(letter))))
    return report


def compare_traffic(a: Sequence[Line], b: Sequence[Line]) -> DiffReport:
    report = DiffReport("traffic", (len(a), len(b)))
    for index in range(max(len(a), len(b))):
        key = f"line {index + 1}"
        if index >= len(b):
            report.differences.append(Difference(key, "A only", a[index].text[:VALUE_CHARS]))
        elif index >= len(a):
            report.differences.append(Difference(key, "B only", b[index].text[:VALUE_CHARS]))
        elif a[index].value is NOT_JSON or b[index].value is NOT_JSON:
            if a[index].text != b[index].text:
                detail = f"{a[index].text[:VALUE_CHARS]!r} != {b[index].text[:VALUE_CHARS]!r}"
                report.differences.append(Difference(key, "A != B", detail))
        elif canonical(a[index].value) != canonical(b[index].value):
            report.differences.append(Difference(key, "A != B", describe_difference(a[index].value, b[index].value)))
    return report


COMPARE: dict[str, Callable[[Sequence[Line], Sequence[Line]], DiffReport]] = {
    "responses": compare_responses, "snapshots": compare_snapshots,
    "dead-letters": compare_dead_letters, "traffic": compare_traffic,
}


def diff_files(path_a: Path, path_b: Path) -> DiffReport:
    """Compares two files of the same kind; raises UnreadableFile if one cannot be read or they differ in kind."""
    a, b = read_lines(path_a), read_lines(path_b)
    kind_a, kind_b = file_kind(path_a, a), file_kind(path_b, b)
    if kind_a is not None and kind_b is not None and kind_a != kind_b:
        raise UnreadableFile(f"{path_a} holds {kind_a} and {path_b} {kind_b}: nothing to compare")
    return COMPARE[kind_a or kind_b or "traffic"](a, b)


def format_report(report: DiffReport, name_a: str, name_b: str, limit: int) -> str:
    """A header, then the first `limit` differences, one a line."""
    if report.equal:
        return f"{report.kind}: equal ({report.sizes[0]} compared)"
    lines = [f"A = {name_a}", f"B = {name_b}",
             f"{report.kind}: {len(report.differences)} difference{'' if len(report.differences) == 1 else 's'} "
             f"(A: {report.sizes[0]}, B: {report.sizes[1]})"]
    lines += [f"  {difference}" for difference in report.differences[:limit]]
    if len(report.differences) > limit:
        lines.append(f"  ... and {len(report.differences) - limit} more (--limit N shows more)")
    return "\n".join(lines)


def add_diff_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("a", metavar="A.jsonl")
    parser.add_argument("b", metavar="B.jsonl")
    parser.add_argument("--limit", type=int, default=20, metavar="N", help="show at most N differences (default: 20)")


def diff_main(args: argparse.Namespace) -> int:
    """Runs `coordinator diff`: 0 when equal, 1 when not, 2 when a file cannot be read or compared."""
    try:
        report = diff_files(Path(args.a), Path(args.b))
    except UnreadableFile as exc:
        print(f"cannot compare: {exc}", file=sys.stderr)
        return 2
    print(format_report(report, args.a, args.b, args.limit))
    return 0 if report.equal else 1
