"""Kafka's ACLs: bindings, the ACL file, and the authorizer's decision (`StandardAuthorizerData.authorize`).

Theory of operation. A binding allows or denies one operation (or ALL) on a resource pattern to one principal
(or `User:*`) from one host (or `*`). A pattern is LITERAL (that name; the name `*` is every resource of its
type) or PREFIXED (every name starting with it). To decide whether a principal connected from a host may do an
operation on a resource:
1. a super user may do anything;
2. the bindings whose pattern matches the resource are looked at; if there is none at all, the answer is
   `allow.everyone.if.no.acl.found`;
3. of those, the bindings for this principal (or `User:*`) and host (or `*`) decide: a DENY for the operation or
   for ALL denies, whatever else matches (deny wins); else an ALLOW for the operation, for ALL, or for an operation
   that implies it allows (READ, WRITE, DELETE and ALTER imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS;
   only ALLOW bindings imply: a DENY for READ does not deny DESCRIBE); else the answer is deny.

The ACL file (PROTOCOL.md section 11) holds one binding per line as JSON, with the fields of Kafka's CreateAcls
in snake_case and enum names.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, Final

from .reload import write_atomically

WILDCARD: Final = "*"
WILDCARD_PRINCIPAL: Final = "User:*"
CLUSTER_NAME: Final = "kafka-cluster"


class _Named(Enum):
    """An enum read as Kafka's `SecurityUtils` reads it: the name (READ, DESCRIBE_CONFIGS) or its Pascal case
    (Read, DescribeConfigs), in any letter case."""

    @classmethod
    def parse(cls, text: str) -> Any:
        wanted = text.strip().replace("_", "").upper()
        for member in cls:
            if member.name.replace("_", "") == wanted:
                return member
        raise ValueError(f"unknown {cls.__name__} {text!r}: expected one of {', '.join(m.name for m in cls)}")


class ResourceType(_Named):
    TOPIC = "TOPIC"
    GROUP = "GROUP"
    CLUSTER = "CLUSTER"
    TRANSACTIONAL_ID = "TRANSACTIONAL_ID"


class PatternType(_Named):
    LITERAL = "LITERAL"
    PREFIXED = "PREFIXED"


class Operation(_Named):
    ALL = "ALL"
    READ = "READ"
    WRITE = "WRITE"
    CREATE = "CREATE"
    DELETE = "DELETE"
    ALTER = "ALTER"
    DESCRIBE = "DESCRIBE"
    CLUSTER_ACTION = "CLUSTER_ACTION"
    DESCRIBE_CONFIGS = "DESCRIBE_CONFIGS"
    ALTER_CONFIGS = "ALTER_CONFIGS"
    IDEMPOTENT_WRITE = "IDEMPOTENT_WRITE"
    CREATE_TOKENS = "CREATE_TOKENS"
    DESCRIBE_TOKENS = "DESCRIBE_TOKENS"
    TWO_PHASE_COMMIT = "TWO_PHASE_COMMIT"


class Permission(_Named):
    ALLOW = "ALLOW"
    DENY = "DENY"


# Which ALLOWed operations imply another (StandardAuthorizerData.IMPLIES_DESCRIBE, IMPLIES_DESCRIBE_CONFIGS).
_IMPLIED_BY: Final[dict[Operation, frozenset[Operation]]] = {
    Operation.DESCRIBE: frozenset({Operation.DESCRIBE, Operation.READ, Operation.WRITE, Operation.DELETE,
                                   Operation.ALTER}),
    Operation.DESCRIBE_CONFIGS: frozenset({Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS}),
}


def parse_principal(text: str) -> str:
    """A principal `Type:name` as Kafka's `SecurityUtils.parseKafkaPrincipal` accepts it; ValueError otherwise."""
    if ":" not in text:
        raise ValueError(f"expected a string in format principalType:principalName but got {text}")
    return text


def parse_super_users(text: str) -> frozenset[str]:
    """`super.users`: principals separated by semicolons, blanks ignored (as `getConfiguredSuperUsers`)."""
    return frozenset(parse_principal(part.strip()) for part in text.split(";") if part.strip())


@dataclass(frozen=True, slots=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType = PatternType.LITERAL

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("a resource name must not be empty")
        if self.resource_type is ResourceType.CLUSTER and self.name != CLUSTER_NAME:
            raise ValueError(f"the cluster resource is named {CLUSTER_NAME!r}, not {self.name!r}")

    def matches(self, resource_type: ResourceType, name: str) -> bool:
        """Whether this pattern covers the resource `name` of `resource_type`."""
        if resource_type is not self.resource_type:
            return False
        if self.pattern_type is PatternType.PREFIXED:
            return name.startswith(self.name)
        return self.name in (name, WILDCARD)

    def __str__(self) -> str:  # Kafka's ResourcePattern.toString, as kafka-acls.sh prints it
        return (f"ResourcePattern(resourceType={self.resource_type.name}, name={self.name}, "
                f"patternType={self.pattern_type.name})")


@dataclass(frozen=True, slots=True)
class AccessControlEntry:
    principal: str
    host: str
    operation: Operation
    permission: Permission

    def __str__(self) -> str:  # Kafka's AccessControlEntryData.toString
        return (f"(principal={self.principal}, host={self.host}, operation={self.operation.name}, "
                f"permissionType={self.permission.name})")

    def decides(self, principal: str, host: str, operation: Operation) -> Permission | None:
        """This entry's verdict on the request, or None when it does not apply (`StandardAuthorizerData.findResult`)."""
        if self.principal not in (principal, WILDCARD_PRINCIPAL) or self.host not in (WILDCARD, host):
            return None
        if self.operation is not Operation.ALL and self.operation is not operation and not (
                self.permission is Permission.ALLOW and self.operation in _IMPLIED_BY.get(operation, ())):
            return None
        return self.permission


@dataclass(frozen=True, slots=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry

    @classmethod
    def from_json(cls, record: Any) -> AclBinding:
        """A binding from one line of the ACL file; ValueError naming the field at fault."""
        if not isinstance(record, dict):
            raise ValueError("an ACL is a JSON object")
        missing = sorted({"resource_type", "resource_name", "pattern_type", "principal", "host", "operation",
                          "permission_type"} - record.keys())
        if missing:
            raise ValueError(f"missing {', '.join(missing)}")
        text = {key: value for key, value in record.items() if isinstance(value, str)}
        if len(text) != len(record):
            raise ValueError("every field is a string")
        pattern = ResourcePattern(ResourceType.parse(text["resource_type"]), text["resource_name"],
                                  PatternType.parse(text["pattern_type"]))
        return cls(pattern, AccessControlEntry(parse_principal(text["principal"]), text["host"] or WILDCARD,
                                               Operation.parse(text["operation"]),
                                               Permission.parse(text["permission_type"])))

    def to_json(self) -> dict[str, str]:
        return {"resource_type": self.pattern.resource_type.name, "resource_name": self.pattern.name,
                "pattern_type": self.pattern.pattern_type.name, "principal": self.entry.principal,
                "host": self.entry.host, "operation": self.entry.operation.name,
                "permission_type": self.entry.permission.name}


@dataclass(frozen=True)
class Authorizer:
    """Kafka's decision for one request on one resource, from the bindings, the super users and the default."""

    bindings: Sequence[AclBinding] = ()
    super_users: frozenset[str] = frozenset()
    allow_everyone_if_no_acl_found: bool = False
    _by_type: dict[ResourceType, list[AclBinding]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        by_type: dict[ResourceType, list[AclBinding]] = {}
        for binding in self.bindings:
            by_type.setdefault(binding.pattern.resource_type, []).append(binding)
        object.__setattr__(self, "_by_type", by_type)

    def authorize(self, principal: str, host: str, operation: Operation, resource_type: ResourceType,
                  name: str) -> bool:
        """Whether `principal`, connected from `host` (an IP address), may do `operation` on the resource."""
        if principal in self.super_users:
            return True
        found_resource_acls = allowed = False
        for binding in self._by_type.get(resource_type, ()):
            if not binding.pattern.matches(resource_type, name):
                continue
            found_resource_acls = True
            verdict = binding.entry.decides(principal, host, operation)
            if verdict is Permission.DENY:
                return False
            allowed = allowed or verdict is Permission.ALLOW
        return allowed or (not found_resource_acls and self.allow_everyone_if_no_acl_found)


# ---- the ACL file ----------------------------------------------------------------------------------------

def parse_acls(text: str) -> list[AclBinding]:
    """The bindings of an ACL file's text, in file order, duplicates once; ValueError naming the first bad line."""
    bindings: dict[AclBinding, None] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        try:
            bindings[AclBinding.from_json(json.loads(line))] = None
        except ValueError as exc:  # json.JSONDecodeError is one
            raise ValueError(f"ACL file line {number}: {exc}") from None
    return list(bindings)


def read_acls(path: Path) -> list[AclBinding]:
    """The ACL file at `path`; an absent file has no bindings. OSError or ValueError when unreadable."""
    try:
        return parse_acls(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return []


def write_acls(path: Path, bindings: Iterable[AclBinding]) -> None:
    """Writes the ACL file atomically."""
    write_atomically(path, "".join(json.dumps(binding.to_json()) + "\n" for binding in bindings))


def format_listing(bindings: Iterable[AclBinding]) -> str:
    """What `kafka-acls.sh --list` prints for these bindings: one block per resource pattern, in first-seen order."""
    by_pattern: dict[ResourcePattern, list[AccessControlEntry]] = {}
    for binding in bindings:
        by_pattern.setdefault(binding.pattern, []).append(binding.entry)
    # AclCommand: s"Current ACLs for resource `$resource`: $Newline ${acls.map("\t" + _).mkString(Newline)} $Newline"
    return "".join(f"Current ACLs for resource `{pattern}`: \n {chr(10).join(chr(9) + str(e) for e in entries)} \n\n"
                   for pattern, entries in by_pattern.items())
