"""`coordinator users` and `coordinator acls`: the files they write, read back by the gateway's own units."""

from __future__ import annotations

import io
import stat
from pathlib import Path

import pytest

from coordinator_cli.main import main
from kafka_gateway.security.acl import Authorizer, Operation, ResourceType, read_acls
from kafka_gateway.security.credentials import ScramMechanism, password_matches, read_users


def users(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], argv: list[str],
          stdin: str = "") -> tuple[int, str, str]:
    monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    code = main(["users", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_users_add_list_remove(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                               capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "users.properties"
    f = ["--users-file", str(path)]
    assert users(monkeypatch, capsys, [*f, "add", "alice", "--mechanism", "SCRAM-SHA-256"], "s3cret\n")[0] == 0
    code, out, _ = users(monkeypatch, capsys, [*f, "add", "alice", "--mechanism", "SCRAM-SHA-512", "--iterations",
                                               "8192"], "s3cret\nignored second line\n")
    assert (code, out) == (0, "Completed updating config for user alice.\n")
    stored = read_users(path)
    sha512 = stored.credential("alice", ScramMechanism.SCRAM_SHA_512)
    assert sha512 is not None and sha512.iterations == 8192
    assert password_matches(ScramMechanism.SCRAM_SHA_512, sha512, "s3cret")
    assert "s3cret" not in path.read_text() and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert users(monkeypatch, capsys, [*f, "list"])[1] == \
        "alice SCRAM-SHA-256 iterations=4096\nalice SCRAM-SHA-512 iterations=8192\n"
    assert users(monkeypatch, capsys, [*f, "remove", "alice", "--mechanism", "SCRAM-SHA-256"])[0] == 0
    assert users(monkeypatch, capsys, [*f, "list"])[1] == "alice SCRAM-SHA-512 iterations=8192\n"
    code, _, err = users(monkeypatch, capsys, [*f, "remove", "bob"])
    assert code == 1 and "bob has no SCRAM credential" in err


def test_users_file_may_follow_the_action_as_protocol_md_writes_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    before, after = tmp_path / "before.users", tmp_path / "after.users"
    assert users(monkeypatch, capsys, ["add", "bob", "--mechanism", "SCRAM-SHA-256", "--users-file", str(after)],
                 "pw\n")[0] == 0
    assert users(monkeypatch, capsys, ["--users-file", str(before), "add", "carol", "--mechanism", "SCRAM-SHA-512"],
                 "pw\n")[0] == 0
    assert users(monkeypatch, capsys, ["list", "--users-file", str(after)])[1] == "bob SCRAM-SHA-256 iterations=4096\n"
    assert users(monkeypatch, capsys, ["--users-file", str(before), "list"])[1] == \
        "carol SCRAM-SHA-512 iterations=4096\n"
    assert users(monkeypatch, capsys, ["remove", "bob", "--users-file", str(after)])[0] == 0
    assert read_users(after).credentials == {}
    config = tmp_path / "gateway.properties"
    config.write_text(f"coordinator.gateway.users.file = {before}\n")
    assert users(monkeypatch, capsys, ["list", "--config", str(config)])[1] == "carol SCRAM-SHA-512 iterations=4096\n"


@pytest.mark.parametrize("stdin, iterations, message", [
    ("\n", "4096", "the password is empty"),
    ("", "4096", "the password is empty"),
    ("pw\n", "100", "between 4096 and 16384"),
])
def test_users_add_refuses_bad_input_with_exit_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str], stdin: str, iterations: str,
                                                 message: str) -> None:
    path = tmp_path / "users.properties"
    code, _, err = users(monkeypatch, capsys, ["--users-file", str(path), "add", "u", "--mechanism", "SCRAM-SHA-256",
                                               "--iterations", iterations], stdin)
    assert code == 2 and message in err and not path.exists()


def test_users_file_comes_from_the_gateway_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "gateway.properties"
    config.write_text(f"coordinator.gateway.users.file = {tmp_path / 'from-config.users'}\n")
    users(monkeypatch, capsys, ["--config", str(config), "add", "u", "--mechanism", "SCRAM-SHA-512"], "pw\n")
    assert read_users(tmp_path / "from-config.users").credential("u", ScramMechanism.SCRAM_SHA_512) is not None


def acls(capsys: pytest.CaptureFixture[str], path: Path, *argv: str) -> tuple[int, str, str]:
    code = main(["acls", "--acl-file", str(path), *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_acls_add_list_remove_as_kafka_acls(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "acls.jsonl"
    code, out, _ = acls(capsys, path, "--add", "--allow-principal", "User:alice", "--operation", "Read",
                        "--operation", "describe", "--group", "g1")
    assert code == 0 and out.startswith("Adding ACLs for resource `ResourcePattern(resourceType=GROUP, name=g1, ")
    acls(capsys, path, "--add", "--deny-principal", "User:*", "--deny-host", "10.0.0.9", "--operation", "All",
         "--topic", "pay", "--resource-pattern-type", "prefixed")
    acls(capsys, path, "--add", "--allow-principal", "User:alice", "--operation", "Read", "--group", "g1")  # again
    assert len(read_acls(path)) == 3
    assert acls(capsys, path, "--list", "--group", "g1")[1] == (
        "Current ACLs for resource `ResourcePattern(resourceType=GROUP, name=g1, patternType=LITERAL)`: \n"
        " \t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)\n"
        "\t(principal=User:alice, host=*, operation=DESCRIBE, permissionType=ALLOW) \n\n")
    assert acls(capsys, path, "--list", "--topic", "payments", "--resource-pattern-type", "match")[1] == (
        "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=pay, patternType=PREFIXED)`: \n"
        " \t(principal=User:*, host=10.0.0.9, operation=ALL, permissionType=DENY) \n\n")
    out = acls(capsys, path, "--list", "--principal", "User:alice")[1]
    assert out.startswith("ACLs for principal `User:alice`\nCurrent ACLs") and "TOPIC" not in out
    auth = Authorizer(read_acls(path))
    assert auth.authorize("User:alice", "127.0.0.1", Operation.READ, ResourceType.GROUP, "g1")
    assert not auth.authorize("User:bob", "127.0.0.1", Operation.READ, ResourceType.GROUP, "g1")
    assert acls(capsys, path, "--remove", "--allow-principal", "User:alice", "--operation", "READ",
                "--group", "g1")[0] == 0
    assert [b.entry.operation for b in read_acls(path) if b.pattern.name == "g1"] == [Operation.DESCRIBE]


@pytest.mark.parametrize("argv, message", [
    (["--add", "--operation", "Read", "--group", "g"], "--allow-principal, --deny-principal"),
    (["--add", "--allow-principal", "User:a", "--group", "g"], "at least one --operation"),
    (["--add", "--allow-principal", "User:a", "--operation", "Fly", "--group", "g"], "unknown Operation 'Fly'"),
    (["--add", "--allow-principal", "alice", "--operation", "Read", "--group", "g"], "principalType:principalName"),
    (["--add", "--allow-principal", "User:a", "--operation", "Read"], "--topic, --group, --cluster"),
    (["--add", "--allow-principal", "User:a", "--operation", "Read", "--group", "g", "--resource-pattern-type",
      "match"], "not valid"),
])
def test_acls_bad_options_exit_2_and_write_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                   argv: list[str], message: str) -> None:
    path = tmp_path / "acls.jsonl"
    code, _, err = acls(capsys, path, *argv)
    assert code == 2 and message in err and not path.exists()
