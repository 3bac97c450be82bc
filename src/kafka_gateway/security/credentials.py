"""SCRAM credentials as Kafka stores them, and the gateway's users file.

A credential is what Kafka's `ScramCredentialUtils.credentialToString` writes,
`salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>`, computed as Kafka's `ScramFormatter` does
(RFC 5802, the password's UTF-8 bytes without SASLprep):
SaltedPassword = PBKDF2-HMAC-H(password, salt, iterations); StoredKey = H(HMAC(SaltedPassword, "Client Key"));
ServerKey = HMAC(SaltedPassword, "Server Key"). The password itself is never kept.

The users file (PROTOCOL.md section 11) holds one credential per line, `NAME MECHANISM CREDENTIAL`; blank lines
and `#` comments are skipped. It is written atomically with mode 0600.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Final

from .reload import write_atomically

# Kafka's ScramMechanism: 4096 is RFC 7677's minimum, 16384 the most Kafka accepts.
MIN_ITERATIONS: Final = 4096
MAX_ITERATIONS: Final = 16384
SALT_BYTES: Final = 32


class ScramMechanism(Enum):
    """A SCRAM mechanism by its SASL name, with the hash it uses."""

    SCRAM_SHA_256 = "SCRAM-SHA-256"
    SCRAM_SHA_512 = "SCRAM-SHA-512"

    @property
    def hash_name(self) -> str:
        return "sha256" if self is ScramMechanism.SCRAM_SHA_256 else "sha512"

    @classmethod
    def named(cls, name: str) -> ScramMechanism:
        """The mechanism called `name` (as SASL spells it); ValueError naming the known ones otherwise."""
        for mechanism in cls:
            if mechanism.value == name:
                return mechanism
        raise ValueError(f"unknown SCRAM mechanism {name!r}: expected one of {', '.join(m.value for m in cls)}")


@dataclass(frozen=True, slots=True)
class ScramCredential:
    """Kafka's `ScramCredential`: what a server needs to check a SCRAM or PLAIN login, and no password."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def __str__(self) -> str:
        encode = base64.b64encode
        return (f"salt={encode(self.salt).decode()},stored_key={encode(self.stored_key).decode()},"
                f"server_key={encode(self.server_key).decode()},iterations={self.iterations}")

    @classmethod
    def parse(cls, text: str) -> ScramCredential:
        """Reads Kafka's storage string (`ScramCredentialUtils.credentialFromString`); ValueError if it is not one."""
        fields: dict[str, str] = {}
        for token in text.split(","):
            key, sep, value = token.partition("=")
            if not sep or not key:
                raise ValueError(f"credential field {token!r} is not key=value")
            fields[key] = value
        if sorted(fields) != ["iterations", "salt", "server_key", "stored_key"]:
            raise ValueError("a credential has exactly salt, stored_key, server_key and iterations")
        try:
            salt, stored_key, server_key = (base64.b64decode(fields[k], validate=True)
                                            for k in ("salt", "stored_key", "server_key"))
        except binascii.Error:
            raise ValueError("a credential's salt and keys are base64") from None
        if not fields["iterations"].isdigit():
            raise ValueError(f"iterations {fields['iterations']!r} is not a number")
        return cls(salt, stored_key, server_key, int(fields["iterations"]))


def salted_password(mechanism: ScramMechanism, password: str, salt: bytes, iterations: int) -> bytes:
    """RFC 5802's Hi(): PBKDF2 over HMAC with the mechanism's hash (Kafka's `ScramFormatter.hi`)."""
    return hashlib.pbkdf2_hmac(mechanism.hash_name, password.encode("utf-8"), salt, iterations)


def credential_from_salted(mechanism: ScramMechanism, salted: bytes, salt: bytes, iterations: int) -> ScramCredential:
    """The stored and server keys derived from a salted password."""
    client_key = hmac.digest(salted, b"Client Key", mechanism.hash_name)
    stored_key = hashlib.new(mechanism.hash_name, client_key).digest()
    server_key = hmac.digest(salted, b"Server Key", mechanism.hash_name)
    return ScramCredential(salt, stored_key, server_key, iterations)


def make_credential(mechanism: ScramMechanism, password: str, iterations: int = MIN_ITERATIONS,
                    salt: bytes | None = None) -> ScramCredential:
    """A new credential for `password` (a fresh random salt unless one is given); ValueError on a bad input."""
    if not password:
        raise ValueError("the password is empty")
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise ValueError(f"iterations must be between {MIN_ITERATIONS} and {MAX_ITERATIONS}, got {iterations}")
    salt = os.urandom(SALT_BYTES) if salt is None else salt
    return credential_from_salted(mechanism, salted_password(mechanism, password, salt, iterations), salt, iterations)


def password_matches(mechanism: ScramMechanism, credential: ScramCredential, password: str) -> bool:
    """Whether `password` is the one `credential` was made from: its StoredKey recomputed and compared in
    constant time (how PLAIN is checked without storing a password)."""
    again = credential_from_salted(mechanism, salted_password(mechanism, password, credential.salt,
                                                              credential.iterations),
                                   credential.salt, credential.iterations)
    return hmac.compare_digest(again.stored_key, credential.stored_key)


# ---- the users file --------------------------------------------------------------------------------------

UserKey = tuple[str, ScramMechanism]


@dataclass(frozen=True)
class Users:
    """The users file's content: one credential per user and mechanism."""

    credentials: Mapping[UserKey, ScramCredential]

    def credential(self, name: str, mechanism: ScramMechanism) -> ScramCredential | None:
        return self.credentials.get((name, mechanism))

    def plain_credential(self, name: str) -> tuple[ScramMechanism, ScramCredential] | None:
        """The credential a PLAIN login is checked against: SCRAM-SHA-512 if the user has one, else SCRAM-SHA-256."""
        for mechanism in (ScramMechanism.SCRAM_SHA_512, ScramMechanism.SCRAM_SHA_256):
            credential = self.credentials.get((name, mechanism))
            if credential is not None:
                return mechanism, credential
        return None

    def with_credential(self, name: str, mechanism: ScramMechanism, credential: ScramCredential) -> Users:
        return Users({**self.credentials, (name, mechanism): credential})

    def without(self, name: str, mechanism: ScramMechanism | None = None) -> Users:
        """These users less `name`'s credential for `mechanism` (all of them when None)."""
        return Users({key: value for key, value in self.credentials.items()
                      if key[0] != name or (mechanism is not None and key[1] is not mechanism)})

    @classmethod
    def parse(cls, text: str) -> Users:
        """Reads a users file's text; ValueError naming the first bad line."""
        credentials: dict[UserKey, ScramCredential] = {}
        for number, raw in enumerate(text.splitlines(), 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            # Mechanism and credential hold no whitespace, so a name may.
            parts = line.rsplit(None, 2)
            try:
                if len(parts) != 3:
                    raise ValueError("expected NAME MECHANISM CREDENTIAL")
                name, mechanism, credential = parts
                credentials[(name, ScramMechanism.named(mechanism))] = ScramCredential.parse(credential)
            except ValueError as exc:
                raise ValueError(f"users file line {number}: {exc}") from None
        return cls(credentials)

    def lines(self) -> Iterable[str]:
        for (name, mechanism), credential in sorted(self.credentials.items(), key=lambda i: (i[0][0], i[0][1].value)):
            yield f"{name} {mechanism.value} {credential}"

    def dump(self) -> str:
        return "".join(line + "\n" for line in self.lines())


def read_users(path: Path) -> Users:
    """The users file at `path`; an absent file has no users. OSError or ValueError when unreadable."""
    try:
        return Users.parse(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return Users({})


def write_users(path: Path, users: Users) -> None:
    """Writes the users file atomically, readable by its owner only."""
    write_atomically(path, users.dump())
