"""SCRAM credentials and the users file, checked against RFC 7677's example (Kafka's ScramFormatterTest) and an
independent SCRAM implementation (scramp)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import stat
from pathlib import Path

import pytest
import scramp
from hypothesis import given
from hypothesis import strategies as st

from kafka_gateway.security.credentials import (
    ScramCredential,
    ScramMechanism,
    Users,
    make_credential,
    password_matches,
    read_users,
    write_users,
)

SHA256 = ScramMechanism.SCRAM_SHA_256
SHA512 = ScramMechanism.SCRAM_SHA_512


def test_rfc7677_example_keys_check_the_proof_and_sign_the_answer() -> None:
    # ScramFormatterTest.rfc7677Example: the exchange of RFC 7677 section 3.
    client_first_bare = "n=user,r=rOprNGfwEbeRWgbNEkqO"
    server_first = "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    final_without_proof = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
    proof = base64.b64decode("dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    signature = base64.b64decode("6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
    auth_message = f"{client_first_bare},{server_first},{final_without_proof}".encode()

    credential = make_credential(SHA256, "pencil", 4096, base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ=="))

    client_key = bytes(a ^ b for a, b in zip(proof, hmac.digest(credential.stored_key, auth_message, "sha256"),
                                             strict=True))
    assert hashlib.sha256(client_key).digest() == credential.stored_key
    assert hmac.digest(credential.server_key, auth_message, "sha256") == signature


@pytest.mark.parametrize("mechanism", list(ScramMechanism))
def test_credentials_equal_those_of_an_independent_scram_implementation(mechanism: ScramMechanism) -> None:
    salt = bytes(range(32))
    salt_again, stored_key, server_key, iterations = scramp.ScramMechanism(mechanism.value).make_auth_info(
        "s3cret-Pass", 8192, salt)
    assert make_credential(mechanism, "s3cret-Pass", 8192, salt) == ScramCredential(
        salt_again, stored_key, server_key, iterations)


@pytest.mark.parametrize("mechanism", list(ScramMechanism))
def test_plain_password_is_checked_against_the_stored_key(mechanism: ScramMechanism) -> None:
    credential = make_credential(mechanism, "right")
    assert password_matches(mechanism, credential, "right")
    assert not password_matches(mechanism, credential, "wrong")
    assert not password_matches(mechanism, credential, "Right")


def test_a_new_credential_gets_a_new_32_byte_salt() -> None:
    first, second = make_credential(SHA256, "pw"), make_credential(SHA256, "pw")
    assert len(first.salt) == 32
    assert first.salt != second.salt and first.stored_key != second.stored_key


@pytest.mark.parametrize("iterations", [4095, 16385])
def test_iterations_outside_kafkas_bounds_are_refused(iterations: int) -> None:
    with pytest.raises(ValueError, match="between 4096 and 16384"):
        make_credential(SHA512, "pw", iterations)


def test_the_storage_string_is_kafkas() -> None:
    credential = ScramCredential(b"\x01\x02", b"\x03", b"\x04", 4096)
    assert str(credential) == "salt=AQI=,stored_key=Aw==,server_key=BA==,iterations=4096"


@given(st.binary(min_size=1, max_size=64), st.binary(min_size=1, max_size=64), st.binary(min_size=1, max_size=64),
       st.integers(4096, 16384))
def test_the_storage_string_reads_back(salt: bytes, stored: bytes, server: bytes, iterations: int) -> None:
    credential = ScramCredential(salt, stored, server, iterations)
    assert ScramCredential.parse(str(credential)) == credential


@pytest.mark.parametrize("text", [
    "salt=AQI=,stored_key=Aw==,server_key=BA==",  # ScramCredentialUtilsTest.invalidCredential: a field missing
    "salt=AQI=,stored_key=Aw==,server_key=BA==,iterations=4096,extra=1",
    "salt=AQI=,stored_key=Aw==,server_key=BA==,iterations=many",
    "salt=!!,stored_key=Aw==,server_key=BA==,iterations=4096",
    "salt,stored_key=Aw==,server_key=BA==,iterations=4096",
])
def test_a_bad_storage_string_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        ScramCredential.parse(text)


def test_users_file_round_trip_names_with_spaces_and_comments(tmp_path: Path) -> None:
    alice = make_credential(SHA256, "a")
    bob = make_credential(SHA512, "b")
    users = Users({}).with_credential("alice", SHA256, alice).with_credential("bob smith", SHA512, bob)
    path = tmp_path / "conf" / "users.properties"
    write_users(path, users)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert read_users(path) == users
    assert Users.parse("# a comment\n\n" + users.dump()) == users
    assert "a" not in path.read_text().split() and b"password" not in path.read_bytes()


def test_users_remove_one_mechanism_or_all() -> None:
    users = (Users({}).with_credential("u", SHA256, make_credential(SHA256, "x"))
             .with_credential("u", SHA512, make_credential(SHA512, "x"))
             .with_credential("v", SHA256, make_credential(SHA256, "y")))
    assert set(users.without("u", SHA512).credentials) == {("u", SHA256), ("v", SHA256)}
    assert set(users.without("u").credentials) == {("v", SHA256)}


def test_plain_uses_sha512_when_present() -> None:
    users = Users({}).with_credential("u", SHA256, make_credential(SHA256, "x"))
    assert users.plain_credential("u") is not None and users.plain_credential("u")[0] is SHA256  # type: ignore[index]
    users = users.with_credential("u", SHA512, make_credential(SHA512, "x"))
    assert users.plain_credential("u")[0] is SHA512  # type: ignore[index]
    assert users.plain_credential("nobody") is None


@pytest.mark.parametrize("line, message", [
    ("alice SCRAM-SHA-1 salt=AQI=,stored_key=Aw==,server_key=BA==,iterations=4096", "line 2: unknown SCRAM"),
    ("alice SCRAM-SHA-256", "line 2: expected NAME MECHANISM CREDENTIAL"),
    ("alice SCRAM-SHA-256 salt=AQI=", "line 2: a credential has exactly"),
])
def test_a_bad_users_file_names_its_line(line: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Users.parse("# users\n" + line + "\n")


def test_an_absent_users_file_has_no_users(tmp_path: Path) -> None:
    assert read_users(tmp_path / "none").credentials == {}
