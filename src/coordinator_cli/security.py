"""`coordinator users` and `coordinator acls`: the gateway's users file and ACL file (PROTOCOL.md section 11).

`users` does what `kafka-configs.sh --alter --add-config 'SCRAM-SHA-256=[iterations=4096,password=...]'
--entity-type users --entity-name NAME` does on a Kafka cluster: it stores a salted SCRAM credential, never the
password. `acls` does what `kafka-acls.sh` does and prints what it prints. Both files are re-read by a running
gateway when they change.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kafka_gateway.properties import read_properties
from kafka_gateway.security.acl import (
    CLUSTER_NAME,
    AccessControlEntry,
    AclBinding,
    Operation,
    PatternType,
    Permission,
    ResourcePattern,
    ResourceType,
    format_listing,
    parse_principal,
    read_acls,
    write_acls,
)
from kafka_gateway.security.credentials import (
    MIN_ITERATIONS,
    ScramMechanism,
    make_credential,
    read_users,
    write_users,
)

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
USERS_FILE_KEY, ACL_FILE_KEY = "coordinator.gateway.users.file", "coordinator.gateway.acl.file"
DEFAULT_USERS_FILE, DEFAULT_ACL_FILE = Path("conf/users.properties"), Path("conf/acls.jsonl")


def _file(explicit: str | None, config: str | None, key: str, default: Path) -> Path:
    """The file named on the command line, else by `key` in the gateway's --config file, else the default."""
    if explicit:
        return Path(explicit)
    if config:
        configured = read_properties(Path(config)).get(key)
        if configured:
            return Path(configured)
    return default


# ---- coordinator users -----------------------------------------------------------------------------------

def _users_file_arguments(parser: argparse.ArgumentParser, default: str | None) -> None:
    parser.add_argument("--users-file", metavar="FILE", default=default,
                        help=f"the users file (default: {USERS_FILE_KEY} of --config, else {DEFAULT_USERS_FILE})")
    parser.add_argument("--config", metavar="FILE", default=default,
                        help="the gateway's configuration file (properties)")


def add_users_arguments(parser: argparse.ArgumentParser) -> None:
    _users_file_arguments(parser, default=None)
    actions = parser.add_subparsers(dest="users_action", required=True, metavar="ACTION")
    add = actions.add_parser("add", help="store a SCRAM credential for a user (the password is read from stdin)",
                             description="Reads the password from the first line of standard input and stores its "
                                         "salted SCRAM credential (a new 32-byte salt), replacing the user's "
                                         "credential for that mechanism. The password itself is not stored.")
    add.add_argument("name", metavar="NAME")
    add.add_argument("--mechanism", required=True, choices=[m.value for m in ScramMechanism])
    add.add_argument("--iterations", type=int, default=MIN_ITERATIONS, metavar="N",
                     help="PBKDF2 iterations, 4096 to 16384 (Kafka's bounds); default %(default)s")
    remove = actions.add_parser("remove", help="remove a user's credentials")
    remove.add_argument("name", metavar="NAME")
    remove.add_argument("--mechanism", choices=[m.value for m in ScramMechanism],
                        help="remove only this mechanism's credential (default: all of the user's)")
    listing = actions.add_parser("list", help="list users and mechanisms (no keys)")
    # The files may also follow the action (`users add NAME --users-file F`, as PROTOCOL.md writes it);
    # suppressed when absent, so that an action's parse does not overwrite the value given before it.
    for action in (add, remove, listing):
        _users_file_arguments(action, default=argparse.SUPPRESS)


def users_main(args: argparse.Namespace) -> int:
    try:
        path = _file(args.users_file, args.config, USERS_FILE_KEY, DEFAULT_USERS_FILE)
        users = read_users(path)
    except (OSError, ValueError) as exc:
        print(f"users: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.users_action == "list":
        for (name, mechanism), credential in sorted(users.credentials.items(), key=lambda i: (i[0][0], i[0][1].value)):
            print(f"{name} {mechanism.value} iterations={credential.iterations}")
        return EXIT_OK
    if args.users_action == "add":
        password = sys.stdin.readline().rstrip("\r\n")
        mechanism = ScramMechanism.named(args.mechanism)
        try:
            credential = make_credential(mechanism, password, args.iterations)
        except ValueError as exc:
            print(f"users: {exc} (the password is the first line of standard input)", file=sys.stderr)
            return EXIT_USAGE
        write_users(path, users.with_credential(args.name, mechanism, credential))
    else:
        mechanism_or_all = ScramMechanism.named(args.mechanism) if args.mechanism else None
        remaining = users.without(args.name, mechanism_or_all)
        if remaining == users:
            print(f"users: {args.name} has no {args.mechanism or 'SCRAM'} credential in {path}", file=sys.stderr)
            return EXIT_FAILED
        write_users(path, remaining)
    print(f"Completed updating config for user {args.name}.")
    return EXIT_OK


# ---- coordinator acls ------------------------------------------------------------------------------------

def add_acls_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--acl-file", metavar="FILE",
                        help=f"the ACL file (default: {ACL_FILE_KEY} of --config, else {DEFAULT_ACL_FILE})")
    parser.add_argument("--config", metavar="FILE", help="the gateway's configuration file (properties)")
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--add", action="store_true", help="add the ACLs the other options describe")
    action.add_argument("--remove", action="store_true", help="remove exactly those ACLs (no prompt)")
    action.add_argument("--list", action="store_true", help="print the ACLs, as kafka-acls.sh --list does")
    parser.add_argument("--allow-principal", action="append", default=[], metavar="PRINCIPAL",
                        help="e.g. User:alice, or User:* for everyone (repeatable)")
    parser.add_argument("--deny-principal", action="append", default=[], metavar="PRINCIPAL")
    parser.add_argument("--allow-host", action="append", default=[], metavar="HOST",
                        help="an IP address the allowed principals connect from (default: * with --allow-principal)")
    parser.add_argument("--deny-host", action="append", default=[], metavar="HOST")
    parser.add_argument("--operation", action="extend", nargs="+", default=[], metavar="OP",
                        help="Read, Write, Create, Delete, Alter, Describe, DescribeConfigs, AlterConfigs, "
                             "IdempotentWrite, All, ... (any case; repeatable)")
    parser.add_argument("--principal", action="append", default=[], metavar="PRINCIPAL",
                        help="with --list: only this principal's ACLs")
    resource = parser.add_mutually_exclusive_group()
    resource.add_argument("--topic", metavar="TOPIC")
    resource.add_argument("--group", metavar="GROUP")
    resource.add_argument("--cluster", action="store_true")
    resource.add_argument("--transactional-id", metavar="ID")
    parser.add_argument("--resource-pattern-type", default="literal",
                        choices=["literal", "prefixed", "any", "match"],
                        help="literal (default) or prefixed; with --list also any, or match (every ACL that "
                             "applies to the named resource)")


def _resource(args: argparse.Namespace) -> tuple[ResourceType, str] | None:
    if args.topic is not None:
        return ResourceType.TOPIC, args.topic
    if args.group is not None:
        return ResourceType.GROUP, args.group
    if args.cluster:
        return ResourceType.CLUSTER, CLUSTER_NAME
    if args.transactional_id is not None:
        return ResourceType.TRANSACTIONAL_ID, args.transactional_id
    return None


def _named_bindings(args: argparse.Namespace, pattern: ResourcePattern) -> list[AclBinding]:
    """The bindings --add or --remove names: each principal with each of its hosts and each operation."""
    if not args.allow_principal and not args.deny_principal:
        raise ValueError("You must specify one of: --allow-principal, --deny-principal when trying to add ACLs.")
    if not args.operation:
        raise ValueError("You must specify at least one --operation.")
    operations = [Operation.parse(op) for op in args.operation]
    entries = [(parse_principal(p), host, Permission.ALLOW) for p in args.allow_principal
               for host in args.allow_host or ["*"]]
    entries += [(parse_principal(p), host, Permission.DENY) for p in args.deny_principal
                for host in args.deny_host or ["*"]]
    return [AclBinding(pattern, AccessControlEntry(principal, host, operation, permission))
            for principal, host, permission in entries for operation in operations]


def _listed(args: argparse.Namespace, bindings: list[AclBinding]) -> str:
    resource = _resource(args)
    kind = args.resource_pattern_type
    if resource is not None:
        resource_type, name = resource
        if kind == "match":
            bindings = [b for b in bindings if b.pattern.matches(resource_type, name)]
        else:
            bindings = [b for b in bindings if b.pattern.resource_type is resource_type and b.pattern.name == name
                        and (kind == "any" or b.pattern.pattern_type is PatternType.parse(kind))]
    if not args.principal:
        return format_listing(bindings)
    return "".join(f"ACLs for principal `{principal}`\n"
                   + format_listing(b for b in bindings if b.entry.principal == principal)
                   for principal in args.principal)


def acls_main(args: argparse.Namespace) -> int:
    try:
        path = _file(args.acl_file, args.config, ACL_FILE_KEY, DEFAULT_ACL_FILE)
        bindings = read_acls(path)
        if args.list:
            print(_listed(args, bindings), end="")
            return EXIT_OK
        resource = _resource(args)
        if resource is None:
            raise ValueError("You must specify one of: --topic, --group, --cluster, --transactional-id.")
        if args.resource_pattern_type not in ("literal", "prefixed"):
            raise ValueError(f"A '--resource-pattern-type' value of '{args.resource_pattern_type}' is not valid "
                             f"when adding or removing acls.")
        pattern = ResourcePattern(*resource, PatternType.parse(args.resource_pattern_type))
        named = _named_bindings(args, pattern)
    except (OSError, ValueError) as exc:
        print(f"acls: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.add:
        print(f"Adding ACLs for resource `{pattern}`: \n {chr(10).join(chr(9) + str(b.entry) for b in named)} \n")
        write_acls(path, list(dict.fromkeys([*bindings, *named])))
    else:
        removing = set(named)
        print(f"Removing ACLs for resource `{pattern}`: \n {chr(10).join(chr(9) + str(b.entry) for b in named)} \n")
        write_acls(path, [b for b in bindings if b not in removing])
    return EXIT_OK
