"""Kafka's ACL evaluation, case for case from StandardAuthorizerTest, plus the ACL file and kafka-acls' listing."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafka_gateway.security.acl import (
    AccessControlEntry,
    AclBinding,
    Authorizer,
    Operation,
    PatternType,
    Permission,
    ResourcePattern,
    ResourceType,
    format_listing,
    parse_acls,
    parse_super_users,
    read_acls,
    write_acls,
)

TOPIC, GROUP = ResourceType.TOPIC, ResourceType.GROUP
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = Permission.ALLOW, Permission.DENY
Op = Operation
LOCAL = "127.0.0.1"


def acl(resource_type: ResourceType, name: str, pattern: PatternType, principal: str, host: str, operation: Operation,
        permission: Permission) -> AclBinding:
    return AclBinding(ResourcePattern(resource_type, name, pattern),
                      AccessControlEntry(principal, host, operation, permission))


def authorizer(*bindings: AclBinding, allow_if_none: bool = False) -> Authorizer:
    return Authorizer(bindings, frozenset({"User:superman"}), allow_if_none)


def verdicts(auth: Authorizer, user: str, actions: list[tuple[Operation, ResourceType, str]],
             host: str = LOCAL) -> list[bool]:
    return [auth.authorize(f"User:{user}", host, op, rt, name) for op, rt, name in actions]


def foo_acl(op: Operation, permission: Permission) -> AclBinding:
    return acl(TOPIC, "foo_", PREFIXED, "User:bob", "*", op, permission)


def bar_acl(op: Operation, permission: Permission) -> AclBinding:
    return acl(GROUP, "bar", LITERAL, "User:*", "*", op, permission)


def test_get_configured_super_users() -> None:
    assert parse_super_users("") == frozenset() and parse_super_users(" ") == frozenset()
    assert parse_super_users("User:bob;User:alice ") == {"User:bob", "User:alice"}
    assert parse_super_users(";  User:bob  ;  User:alice ") == {"User:bob", "User:alice"}
    with pytest.raises(ValueError, match="expected a string in format principalType:principalName but got bob"):
        parse_super_users("bob;:alice")


@pytest.mark.parametrize("allow_if_none, topic2", [(True, True), (False, False)])
def test_allow_everyone_if_no_acl_found(allow_if_none: bool, topic2: bool) -> None:
    auth = authorizer(acl(TOPIC, "topic1", LITERAL, "User:Alice", "*", Op.READ, ALLOW), allow_if_none=allow_if_none)
    assert verdicts(auth, "Bob", [(Op.READ, TOPIC, "topic1"), (Op.READ, TOPIC, "topic2")]) == [False, topic2]


def test_find_result_implication() -> None:
    def result(op: Operation, binding: AclBinding) -> Permission | None:
        return binding.entry.decides("User:bob", LOCAL, op)

    for op in (Op.DESCRIBE, Op.READ, Op.WRITE, Op.DELETE, Op.ALTER):
        assert result(Op.DESCRIBE, foo_acl(op, ALLOW)) is ALLOW
    assert result(Op.DESCRIBE, foo_acl(Op.CREATE, ALLOW)) is None
    for op in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER):  # deny ACLs don't imply
        assert result(Op.DESCRIBE, foo_acl(op, DENY)) is None
    assert result(Op.DESCRIBE, foo_acl(Op.DESCRIBE, DENY)) is DENY
    for op in (Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS):
        assert result(Op.DESCRIBE_CONFIGS, foo_acl(op, ALLOW)) is ALLOW
    assert result(Op.DESCRIBE_CONFIGS, foo_acl(Op.ALTER_CONFIGS, DENY)) is None
    assert result(Op.ALTER_CONFIGS, foo_acl(Op.ALTER_CONFIGS, DENY)) is DENY


def test_find_result_principal_matching() -> None:
    assert foo_acl(Op.READ, ALLOW).entry.decides("User:bob", LOCAL, Op.READ) is ALLOW
    assert foo_acl(Op.READ, ALLOW).entry.decides("User:alice", LOCAL, Op.READ) is None
    assert bar_acl(Op.READ, DENY).entry.decides("User:alice", LOCAL, Op.READ) is DENY


def test_simple_authorizations() -> None:
    auth = authorizer(foo_acl(Op.READ, ALLOW), foo_acl(Op.WRITE, ALLOW), bar_acl(Op.DESCRIBE_CONFIGS, ALLOW),
                      bar_acl(Op.ALTER_CONFIGS, ALLOW))
    assert verdicts(auth, "bob", [(Op.READ, TOPIC, "foo_")]) == [True]
    assert verdicts(auth, "fred", [(Op.ALTER_CONFIGS, GROUP, "bar")]) == [True]


def test_deny_precedence_with_operation_all() -> None:
    auth = authorizer(acl(TOPIC, "foo", LITERAL, "User:alice", "*", Op.ALL, DENY),
                      acl(TOPIC, "foo", PREFIXED, "User:alice", "*", Op.READ, ALLOW),
                      acl(TOPIC, "foo", LITERAL, "User:*", "*", Op.ALL, DENY),
                      acl(TOPIC, "foo", PREFIXED, "User:*", "*", Op.DESCRIBE, ALLOW))
    assert verdicts(auth, "alice", [(Op.WRITE, TOPIC, "foo"), (Op.READ, TOPIC, "foo"), (Op.DESCRIBE, TOPIC, "foo"),
                                    (Op.READ, TOPIC, "foobar")]) == [False, False, False, True]
    assert verdicts(auth, "bob", [(Op.DESCRIBE, TOPIC, "foo"), (Op.READ, TOPIC, "foo"), (Op.WRITE, TOPIC, "foo"),
                                  (Op.DESCRIBE, TOPIC, "foobaz"), (Op.READ, TOPIC, "foobaz")]) == \
        [False, False, False, True, False]


def test_topic_acl_with_operation_all() -> None:
    auth = authorizer(acl(TOPIC, "foo", LITERAL, "User:*", "*", Op.ALL, ALLOW),
                      acl(TOPIC, "bar", PREFIXED, "User:alice", "*", Op.ALL, ALLOW),
                      acl(TOPIC, "baz", LITERAL, "User:bob", "*", Op.ALL, ALLOW))
    assert verdicts(auth, "alice", [(Op.WRITE, TOPIC, "foo"), (Op.DESCRIBE_CONFIGS, TOPIC, "bar"),
                                    (Op.DESCRIBE, TOPIC, "baz")]) == [True, True, False]
    assert verdicts(auth, "bob", [(Op.WRITE, TOPIC, "foo"), (Op.READ, TOPIC, "bar"),
                                  (Op.DESCRIBE, TOPIC, "baz")]) == [True, False, True]
    assert verdicts(auth, "malory", [(Op.DESCRIBE, TOPIC, "foo"), (Op.WRITE, TOPIC, "bar"),
                                     (Op.READ, TOPIC, "baz")]) == [True, False, False]


def test_host_address_acl_validation() -> None:
    host1, host2 = "192.168.1.1", "192.168.1.2"
    auth = authorizer(acl(TOPIC, "foo", LITERAL, "User:alice", host1, Op.READ, DENY),
                      acl(TOPIC, "foo", LITERAL, "User:alice", "*", Op.READ, ALLOW),
                      acl(TOPIC, "bar", LITERAL, "User:bob", host2, Op.READ, ALLOW),
                      acl(TOPIC, "bar", LITERAL, "User:*", LOCAL, Op.DESCRIBE, ALLOW))
    actions = [(Op.READ, TOPIC, "foo"), (Op.READ, TOPIC, "bar"), (Op.DESCRIBE, TOPIC, "bar")]
    assert verdicts(auth, "alice", actions, LOCAL) == [True, False, True]
    assert verdicts(auth, "alice", actions, host1) == [False, False, False]
    assert verdicts(auth, "alice", actions, host2) == [True, False, False]
    assert verdicts(auth, "bob", actions, LOCAL) == [False, False, True]
    assert verdicts(auth, "bob", actions, host1) == [False, False, False]
    assert verdicts(auth, "bob", actions, host2) == [False, True, True]


def test_authorization_with_many_acls() -> None:
    auth = authorizer(acl(TOPIC, "green2", LITERAL, "User:*", "*", Op.READ, ALLOW),
                      acl(TOPIC, "green", PREFIXED, "User:bob", "*", Op.READ, ALLOW),
                      acl(TOPIC, "betamax4", LITERAL, "User:bob", "*", Op.READ, ALLOW),
                      acl(TOPIC, "betamax", LITERAL, "User:bob", "*", Op.READ, ALLOW),
                      acl(TOPIC, "beta", PREFIXED, "User:*", "*", Op.READ, ALLOW),
                      acl(TOPIC, "alpha", PREFIXED, "User:*", "*", Op.READ, ALLOW),
                      acl(TOPIC, "alp", PREFIXED, "User:bob", "*", Op.READ, DENY),
                      acl(GROUP, "*", LITERAL, "User:bob", "*", Op.WRITE, ALLOW),
                      acl(GROUP, "wheel", LITERAL, "User:*", "*", Op.WRITE, DENY))
    assert verdicts(auth, "bob", [(Op.READ, TOPIC, "green1"), (Op.WRITE, GROUP, "wheel")]) == [True, False]
    assert verdicts(auth, "bob", [(Op.READ, TOPIC, "alpha"), (Op.WRITE, GROUP, "arbitrary"),
                                  (Op.READ, TOPIC, "ala")]) == [False, True, False]


def test_prefix_acls() -> None:
    auth = authorizer(acl(TOPIC, "fooa", PREFIXED, "User:alice", "*", Op.ALL, ALLOW),
                      acl(TOPIC, "foobar", LITERAL, "User:bob", "*", Op.ALL, ALLOW),
                      acl(TOPIC, "f", PREFIXED, "User:bob", "*", Op.ALL, ALLOW))
    assert verdicts(auth, "bob", [(Op.WRITE, TOPIC, "foobarr"), (Op.READ, TOPIC, "goobar"),
                                  (Op.READ, TOPIC, "fooa")]) == [True, False, True]
    assert verdicts(auth, "alice", [(Op.DESCRIBE, TOPIC, "fooa"), (Op.WRITE, TOPIC, "bar"),
                                    (Op.READ, TOPIC, "baz")]) == [True, False, False]


def test_super_users_may_do_anything_even_when_denied() -> None:
    auth = authorizer(acl(GROUP, "*", LITERAL, "User:*", "*", Op.ALL, DENY))
    assert verdicts(auth, "superman", [(Op.READ, GROUP, "g"), (Op.DELETE, TOPIC, "t")]) == [True, True]
    assert verdicts(auth, "bob", [(Op.READ, GROUP, "g")]) == [False]


def test_a_literal_name_that_is_a_prefix_does_not_match() -> None:
    auth = authorizer(acl(TOPIC, "foo", LITERAL, "User:bob", "*", Op.READ, ALLOW), allow_if_none=True)
    # "foobar" has no ACL of its own, so the default applies; "foo"'s literal ACL is not its.
    assert verdicts(auth, "alice", [(Op.READ, TOPIC, "foobar"), (Op.READ, TOPIC, "foo")]) == [True, False]


NAMES = st.sampled_from(["a", "ab", "abc", "b", "*"])
BINDINGS = st.builds(acl, st.sampled_from([TOPIC, GROUP]), NAMES, st.sampled_from([LITERAL, PREFIXED]),
                     st.sampled_from(["User:bob", "User:*", "User:alice"]), st.sampled_from(["*", LOCAL, "10.0.0.1"]),
                     st.sampled_from(list(Operation)), st.sampled_from([ALLOW, DENY]))


@given(st.lists(BINDINGS, max_size=12), st.sampled_from([Op.READ, Op.DESCRIBE, Op.WRITE]), NAMES, st.booleans())
def test_deny_wins_and_order_does_not_matter(bindings: list[AclBinding], op: Operation, name: str,
                                             default: bool) -> None:
    forward = Authorizer(bindings, frozenset(), default).authorize("User:bob", LOCAL, op, GROUP, name)
    backward = Authorizer(bindings[::-1], frozenset(), default).authorize("User:bob", LOCAL, op, GROUP, name)
    assert forward == backward
    deny = acl(GROUP, name, LITERAL, "User:bob", "*", op, DENY)
    assert not Authorizer([*bindings, deny], frozenset(), default).authorize("User:bob", LOCAL, op, GROUP, name)


def test_acl_file_round_trip_and_duplicates_once(tmp_path: Path) -> None:
    bindings = [foo_acl(Op.READ, ALLOW), bar_acl(Op.DESCRIBE_CONFIGS, DENY)]
    path = tmp_path / "acls.jsonl"
    write_acls(path, bindings + bindings)
    assert read_acls(path) == bindings
    assert read_acls(tmp_path / "absent") == []


def test_acl_file_lines_take_kafkas_names_in_any_case() -> None:
    line = ('{"resource_type": "Group", "resource_name": "g1", "pattern_type": "literal", "principal": "User:alice",'
            ' "host": "*", "operation": "DescribeConfigs", "permission_type": "Allow"}')
    assert parse_acls(line) == [acl(GROUP, "g1", LITERAL, "User:alice", "*", Op.DESCRIBE_CONFIGS, ALLOW)]


@pytest.mark.parametrize("line, message", [
    ("{", "line 2: Expecting"),
    ('{"resource_type": "GROUP"}', "line 2: missing host, operation"),
    ('{"resource_type": "QUEUE", "resource_name": "g", "pattern_type": "LITERAL", "principal": "User:a", '
     '"host": "*", "operation": "READ", "permission_type": "ALLOW"}', "unknown ResourceType 'QUEUE'"),
    ('{"resource_type": "GROUP", "resource_name": "g", "pattern_type": "LITERAL", "principal": "alice", '
     '"host": "*", "operation": "READ", "permission_type": "ALLOW"}', "principalType:principalName"),
    ('{"resource_type": "CLUSTER", "resource_name": "c", "pattern_type": "LITERAL", "principal": "User:a", '
     '"host": "*", "operation": "READ", "permission_type": "ALLOW"}', "kafka-cluster"),
    ('{"resource_type": "GROUP", "resource_name": "g", "pattern_type": "LITERAL", "principal": "User:a", '
     '"host": "*", "operation": 3, "permission_type": "ALLOW"}', "every field is a string"),
])
def test_a_bad_acl_file_names_its_line(line: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_acls(bar_acl(Op.READ, ALLOW).to_json().__repr__().replace("'", '"') + "\n" + line)


def test_listing_is_kafka_acls_output() -> None:
    listing = format_listing([acl(GROUP, "g1", LITERAL, "User:alice", "*", Op.READ, ALLOW),
                              acl(TOPIC, "t", PREFIXED, "User:bob", "10.0.0.1", Op.WRITE, DENY),
                              acl(GROUP, "g1", LITERAL, "User:bob", "*", Op.DESCRIBE, ALLOW)])
    assert listing == (
        "Current ACLs for resource `ResourcePattern(resourceType=GROUP, name=g1, patternType=LITERAL)`: \n"
        " \t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)\n"
        "\t(principal=User:bob, host=*, operation=DESCRIBE, permissionType=ALLOW) \n\n"
        "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=t, patternType=PREFIXED)`: \n"
        " \t(principal=User:bob, host=10.0.0.1, operation=WRITE, permissionType=DENY) \n\n")
