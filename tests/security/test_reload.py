"""Files re-read when they change; a bad edit keeps the last good content."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kafka_gateway.security.acl import read_acls
from kafka_gateway.security.reload import WatchedFile

LINE = ('{"resource_type": "GROUP", "resource_name": "%s", "pattern_type": "LITERAL", "principal": "User:a", '
        '"host": "*", "operation": "READ", "permission_type": "ALLOW"}\n')


def rewrite(path: Path, text: str, bump_ns: int) -> None:
    path.write_text(text)
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + bump_ns))  # a distinct mtime even on coarse clocks


def test_changes_are_read_and_bad_edits_keep_the_old_content(tmp_path: Path) -> None:
    path = tmp_path / "acls.jsonl"
    path.write_text(LINE % "g1")
    watched = WatchedFile(path, read_acls)
    assert [b.pattern.name for b in watched.value] == ["g1"] and not watched.check()
    rewrite(path, LINE % "g1" + LINE % "g2", 1_000_000)
    assert watched.check() and [b.pattern.name for b in watched.value] == ["g1", "g2"]
    rewrite(path, "{broken\n", 2_000_000)
    assert not watched.check() and [b.pattern.name for b in watched.value] == ["g1", "g2"]
    path.unlink()
    assert watched.check() and watched.value == []  # removed: an absent ACL file has no bindings


def test_a_bad_file_at_start_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "acls.jsonl"
    path.write_text("nope\n")
    with pytest.raises(ValueError, match="line 1"):
        WatchedFile(path, read_acls)
