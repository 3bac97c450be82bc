"""Which ACL each API needs, and Kafka's answer when it is denied (PROTOCOL.md section 11, `KafkaApis`), sans I/O.

Theory of operation. For one connection (a principal from a host) and one request body, `authorize_request`
decides, as Kroxylicious's Authorization filter does, which parts of the request may go on and answers the others
itself, with the error Kafka's broker gives in the place where Kafka puts it:
- nothing denied: the body goes on unchanged;
- some parts denied (groups, topics, coordinator keys): the allowed parts go on, and `complete_answer` later puts
  the denied parts' errors into the answer that comes back, in Kafka's order;
- everything denied: nothing goes on, and the gateway's answer is the whole response;
- answers that list what a client may not see are filtered (ListGroups without Describe on the cluster, OffsetFetch
  of all topics, and every Metadata answer: a topic the client may not describe is left out even when the upstream
  lists it unasked).
Fetch and Produce are authorized by topic name; the gateway caps them below the versions that name topics by id
(Fetch v13, Produce v13), so every request it sees names its topics.
The checks read an `Authorizer` (acl.py); denials are reported to `on_denied` (for the metrics).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from kafka.protocol.api_key import ApiKey

from coordinator_state.listing import GROUP_OPERATION_CODES, authorized_operations

from ..envelopes import error_answer
from .acl import CLUSTER_NAME, Authorizer, Operation, ResourceType

TOPIC_AUTHORIZATION_FAILED: Final = 29
GROUP_AUTHORIZATION_FAILED: Final = 30
CLUSTER_AUTHORIZATION_FAILED: Final = 31
TRANSACTIONAL_ID_AUTHORIZATION_FAILED: Final = 53
KEY_TYPE_GROUP, KEY_TYPE_TRANSACTION = 0, 1
ZERO_UUID: Final = "00000000-0000-0000-0000-000000000000"
# The highest versions of the proxied APIs that still name topics (later ones name them by topic id only).
VERSION_CAPS: Final[dict[ApiKey, int]] = {ApiKey.Fetch: 12, ApiKey.Produce: 12}

Body = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Decision:
    """What becomes of a request: `forward` goes on (the same body when nothing was denied), or, when it is
    None, `answer` is the whole response. `pending` is what `complete_answer` needs to merge the denied parts."""

    forward: Body | None
    answer: Body | None = None
    pending: Any = None


@dataclass
class Authorization:
    """One connection's checks: its principal and peer address, and the authorizer as it is now (the ACL file is
    re-read when it changes, so every check reads the current one)."""

    principal: str
    host: str
    authorizer: Callable[[], Authorizer]
    on_denied: Callable[[ApiKey, ResourceType, Operation], None] = field(default=lambda *_: None)

    def allowed(self, api_key: ApiKey, operation: Operation, resource_type: ResourceType, name: str,
                count: bool = True) -> bool:
        verdict = self.authorizer().authorize(self.principal, self.host, operation, resource_type, name)
        if not verdict and count:
            self.on_denied(api_key, resource_type, operation)
        return verdict

    def is_super_user(self) -> bool:
        return self.principal in self.authorizer().super_users

    def authorize_request(self, api_key: ApiKey, version: int, body: Mapping[str, Any]) -> Decision:
        rule = _RULES.get(api_key)
        if rule is not None:
            return rule.request(self, api_key, version, body)
        if self.is_super_user():
            return Decision(dict(body))
        self.on_denied(api_key, ResourceType.CLUSTER, Operation.ALL)
        return Decision(None, CLUSTER_DENIED)

    def complete_answer(self, api_key: ApiKey, version: int, answer: Mapping[str, Any], pending: Any) -> Body:
        """The answer to a forwarded request with the denied parts put back and hidden parts removed."""
        rule = _RULES.get(api_key)
        return dict(answer) if rule is None else rule.response(self, api_key, version, dict(answer), pending)


# Any other proxied API is for super users: the answer carries CLUSTER_AUTHORIZATION_FAILED at its top level (an
# API whose answer has no top-level error cannot say it, and its connection is closed instead).
CLUSTER_DENIED: Final = {"error_code": CLUSTER_AUTHORIZATION_FAILED, "error_message": "Cluster authorization failed."}


class _Rule:
    """An API's checks; this base lets everything through (ApiVersions and the SASL APIs need no ACL)."""

    def request(self, auth: Authorization, api_key: ApiKey, version: int, body: Mapping[str, Any]) -> Decision:
        return Decision(dict(body))

    def response(self, auth: Authorization, api_key: ApiKey, version: int, answer: Body, pending: Any) -> Body:
        return answer


class _ReadGroup(_Rule):
    """JoinGroup, SyncGroup, Heartbeat, LeaveGroup: Read on the group, else GROUP_AUTHORIZATION_FAILED."""

    def request(self, auth: Authorization, api_key: ApiKey, version: int, body: Mapping[str, Any]) -> Decision:
        if auth.allowed(api_key, Operation.READ, ResourceType.GROUP, str(body.get("group_id"))):
            return Decision(dict(body))
        return Decision(None, error_answer(api_key, version, body, GROUP_AUTHORIZATION_FAILED))


class _FindCoordinator(_Rule):
    """Describe on the group (or transactional id) of each key; denied keys answered, the others forwarded."""

    ERRORS: Final = {KEY_TYPE_GROUP: (ResourceType.GROUP, GROUP_AUTHORIZATION_FAILED),
                     KEY_TYPE_TRANSACTION: (ResourceType.TRANSACTIONAL_ID, TRANSACTIONAL_ID_AUTHORIZATION_FAILED)}

    def _denial(self, auth: Authorization, key_type: int, key: str) -> int | None:
        checked = self.ERRORS.get(key_type)
        if checked is None or auth.allowed(ApiKey.FindCoordinator, Operation.DESCRIBE, checked[0], key):
            return None
        return checked[1]

    def request(self, auth: Authorization, api_key: ApiKey, version: int, body: Mapping[str, Any]) -> Decision:
        key_type = int(body.get("key_type") or 0)
        if version < 4:
            error = self._denial(auth, key_type, str(body.get("key")))
            if error is None:
                return Decision(dict(body))
            return Decision(None, {"error_code": error, "error_message": _MESSAGES[error], "node_id": -1,
                                   "host": "", "port": -1})
        keys = list(body.get("coordinator_keys") or [])
        denied = {key: error for key in keys if (error := self._denial(auth, key_type, key)) is not None}
        if not denied:
            return Decision(dict(body))
        entries = {key: {"key": key, "node_id": -1, "host": "", "port": -1, "error_code": error,
                         "error_message": _MESSAGES[error]} for key, error in denied.items()}
        allowed = [key for key in keys if key not in denied]
        if not allowed:
            return Decision(None, {"coordinators": [entries[key] for key in keys]})
        return Decision({**body, "coordinator_keys": allowed}, pending=(keys, entries))

    def response(self, auth: Authorization, api_key: ApiKey, version: int, answer: Body, pending: Any) -> Body:
        if pending is None:
            return answer
        keys, entries = pending
        answered = {entry.get("key"): entry for entry in answer.get("coordinators") or []}
        return {**answer, "coordinators": [entries.get(key) or answered.get(key) for key in keys
                                           if key in entries or key in answered]}


_MESSAGES: Final = {
    GROUP_AUTHORIZATION_FAILED: "Not authorized to access group: Group authorization failed.",
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED: "Transactional Id authorization failed.",
}


@dataclass(frozen=True)
class _Topics:
    """Where an API names topics and partitions, in its request and in its answer."""

    request_list: str
    request_name: str
    request_partitions: str
    request_index: str
    response_list: str
    response_name: str
    response_partitions: str
    response_index: str
    denied_fields: Mapping[str, Any] = field(default_factory=dict)

    def split(self, auth: Authorization, api_key: ApiKey, operation: Operation,
              body: Mapping[str, Any]) -> tuple[list[Any], list[Body]]:
        """The request's topics that are allowed, and the answer entries of the denied ones (29 per partition)."""
        allowed: list[Any] = []
        denied: list[Body] = []
        for topic in body.get(self.request_list) or []:
            name = topic.get(self.request_name) if isinstance(topic, Mapping) else topic
            if auth.allowed(api_key, operation, ResourceType.TOPIC, str(name)):
                allowed.append(topic)
            else:
                denied.append(self.denied_entry(str(name), topic.get(self.request_partitions) or []))
        return allowed, denied

    def denied_entry(self, name: str, partitions: Sequence[Any], error_code: int = TOPIC_AUTHORIZATION_FAILED) -> Body:
        return {self.response_name: name, self.response_partitions: [
            {self.response_index: p.get(self.request_index) if isinstance(p, Mapping) else p,
             "error_code": error_code, **self.denied_fields} for p in partitions]}


class _ByTopic(_Rule):
    """Produce, Fetch, ListOffsets, OffsetForLeaderEpoch: an operation on each topic; denied topics answered
    TOPIC_AUTHORIZATION_FAILED per partition, the others forwarded."""

    def __init__(self, operation: Operation, topics: _Topics, empty_answer: Mapping[str, Any] | None = None) -> None:
        self.operation = operation
        self.topics = topics
        self.empty_answer = dict(empty_answer or {})

    def request(self, auth: Authorization, api_key: ApiKey, version: int, body: Mapping[str, Any]) -> Decision:
        allowed, denied = self.topics.split(auth, api_key, self.operation, body)
        if not denied:
            return Decision(dict(body))
        if not allowed:
            return Decision(None, {**self.empty_answer, self.topics.response_list: denied})
        return Decision({**body, self.topics.request_list: allowed}, pending=denied)

    def response(self, auth: Authorization, api_key: ApiKey, version: int, answer: Body, pending: Any) -> Body:
        if not pending:
            return answer
        return {**answer, self.topics.response_list: [*(answer.get(self.topics.response_list) or []), *pending]}


class _Produce(_ByTopic):
    """Produce: Write on each topic, and on the transactional id of a transactional produce."""

    def request(self, auth: Authorization, api_key: ApiKey, version: int, body: Mapping[str, Any]) -> Decision:
        transactional_id = body.get("transactional_id")
        if transactional_id is not None and not auth.allowed(api_key, Operation.WRITE, ResourceType.TRANSACTIONAL_ID,
                                                             str(transactional_id)):
            return Decision(None, {"responses": [
                self.topics.denied_entry(str(t.get("name")), t.get("partition_data") or [],
                                         TRANSACTIONAL_ID_AUTHORIZATION_FAILED) for t in body.get("topic_data") or []]})
        return super().request(auth, api_key, version, body)


_OFFSET_COMMIT_TOPICS: Final = _Topics("topics", "name", "partitions", "partition_index",
                                       "topics", "name", "partitions", "partition_index")


class _OffsetCommit(_Rule):
    """Read on the group (else 30 on every partition), then Read on each topic (else 29 on its partitions)."""

    def request(self, auth: Authorization, api_key: ApiKey, version: int, body: Mapping[str, Any]) -> Decision:
        if not auth.allowed(api_key, Operation.READ, ResourceType.GROUP, str(body.get("group_id"))):
            return Decision(None, error_answer(api_key, version, body, GROUP_AUTHORIZATION_FAILED))
        allowed, denied = _OFFSET_COMMIT_TOPICS.split(auth, api_key, Operation.READ, body)
        if not denied:
            return Decision(dict(body))
        if not allowed:
            return Decision(None, {"topics": denied})
        return Decision({**body, "topics": allowed}, pending=denied)

    def response(self, auth: Authorization, api_key: ApiKey, version: int, answer: Body, pending: Any) -> Body:
        # KafkaApis puts the denied topics first.
        return answer if not pending else {**answer, "topics": [*pending, *(answer.get("topics") or [])]}


_OFFSET_FETCH_TOPICS: Final = _Topics("topics", "name", "partition_indexes", "", "topics", "name", "partitions",
                                      "partition_index", {"committed_offset": -1, "metadata": ""})


class _OffsetFetch(_Rule):
    """Describe on each group (else 30: top level v2-7, per group v8+); then Describe on each topic: named denied
    topics answered 29 per partition, and when all topics are asked for, those not describable left out."""

    def _group(self, auth: Authorization, group: Mapping[str, Any]) -> tuple[bool, list[Body] | None]:
        """(group allowed, denied topic entries or None when the group asks for all topics)."""
        if not auth.allowed(ApiKey.OffsetFetch, Operation.DESCRIBE, ResourceType.GROUP, str(group.get("group_id"))):
            return False, None
        if group.get("topics") is None:
            return True, None
        return True, _OFFSET_FETCH_TOPICS.split(auth, ApiKey.OffsetFetch, Operation.DESCRIBE, group)[1]

    def _allowed_topics(self, auth: Authorization, group: Mapping[str, Any]) -> Body:
        if group.get("topics") is None:
            return dict(group)
        return {**group, "topics": _OFFSET_FETCH_TOPICS.split(auth, ApiKey.OffsetFetch, Operation.DESCRIBE,
                                                              group)[0]}

    def request(self, auth: Authorization, api_key: ApiKey, version: int, body: Mapping[str, Any]) -> Decision:
        if version < 8:
            allowed, denied = self._group(auth, body)
            if not allowed:
                return Decision(None, error_answer(api_key, version, body, GROUP_AUTHORIZATION_FAILED))
            return Decision(self._allowed_topics(auth, body), pending=[denied])
        groups = list(body.get("groups") or [])
        verdicts = [(group.get("group_id"), *self._group(auth, group)) for group in groups]
        forward = [self._allowed_topics(auth, group) for group, (_, ok, _) in zip(groups, verdicts, strict=True) if ok]
        if not forward:
            return Decision(None, error_answer(api_key, version, body, GROUP_AUTHORIZATION_FAILED))
        return Decision({**body, "groups": forward}, pending=verdicts)

    def _complete_group(self, auth: Authorization, group: Body, denied: list[Body] | None) -> Body:
        if group.get("error_code"):
            return group  # Kafka returns a group-level error as it is
        topics = group.get("topics") or []
        if denied is None:  # all topics: those the client may not describe are left out
            topics = [t for t in topics if auth.allowed(ApiKey.OffsetFetch, Operation.DESCRIBE, ResourceType.TOPIC,
                                                        str(t.get("name")), count=False)]
        return {**group, "topics": [*topics, *(denied or [])]}

    def response(self, auth: Authorization, api_key: ApiKey, version: int, answer: Body, pending: Any) -> Body:
        if version < 8:
            return self._complete_group(auth, answer, pending[0])
        answered = iter(answer.get("groups") or [])  # the forwarded groups' answers, in their order
        groups = []
        for group_id, ok, denied in pending:
            if ok:
                group = next(answered, {"group_id": group_id, "error_code": 0, "topics": []})
                groups.append(self._complete_group(auth, group, denied))
            else:
                groups.append({"group_id": group_id, "error_code": GROUP_AUTHORIZATION_FAILED, "topics": []})
        return {**answer, "groups": groups}


class _GroupList(_Rule):
    """DescribeGroups and StreamsGroupDescribe (Describe), DeleteGroups (Delete): each group checked; denied groups
    answered 30 (first, as KafkaApis does for the describes; after, for DeleteGroups), the others forwarded."""

    def __init__(self, operation: Operation, request_list: str, response_list: str, denied_first: bool) -> None:
        self.operation = operation
        self.request_list = request_list
        self.response_list = response_list
        self.denied_first = denied_first

    def request(self, auth: Authorization, api_key: ApiKey, version: int, body: Mapping[str, Any]) -> Decision:
        groups = list(body.get(self.request_list) or [])
        allowed = [g for g in groups if auth.allowed(api_key, self.operation, ResourceType.GROUP, str(g))]
        if len(allowed) == len(groups):
            return Decision(dict(body))
        denied = [{"group_id": g, "error_code": GROUP_AUTHORIZATION_FAILED} for g in groups if g not in allowed]
        if not allowed:
            return Decision(None, {self.response_list: denied})
        return Decision({**body, self.request_list: allowed}, pending=denied)

    def response(self, auth: Authorization, api_key: ApiKey, version: int, answer: Body, pending: Any) -> Body:
        if not pending:
            return answer
        answered = list(answer.get(self.response_list) or [])
        return {**answer, self.response_list: [*pending, *answered] if self.denied_first else [*answered, *pending]}


class _DescribeGroups(_GroupList):
    """DescribeGroups: Describe on each group, as `_GroupList`; when the request asks for authorized operations (v3+),
    each group answered without error gets the operations this principal may do on it (KafkaApis: the supported
    group operations the authorizer allows, checked without counting denials)."""

    def __init__(self) -> None:
        super().__init__(Operation.DESCRIBE, "groups", "groups", denied_first=True)

    def request(self, auth: Authorization, api_key: ApiKey, version: int, body: Mapping[str, Any]) -> Decision:
        decision = super().request(auth, api_key, version, body)
        if decision.forward is None or version < 3 or not body.get("include_authorized_operations"):
            return decision
        return Decision(decision.forward, pending=(decision.pending, True))

    def response(self, auth: Authorization, api_key: ApiKey, version: int, answer: Body, pending: Any) -> Body:
        denied, include_operations = pending if isinstance(pending, tuple) else (pending, False)
        if include_operations:
            answer = {**answer, "groups": [self._with_operations(auth, group) for group in answer.get("groups") or []]}
        return super().response(auth, api_key, version, answer, denied)

    @staticmethod
    def _with_operations(auth: Authorization, group: Body) -> Body:
        if group.get("error_code"):
            return group
        name = str(group.get("group_id"))
        allowed = [op for op in GROUP_OPERATION_CODES
                   if auth.allowed(ApiKey.DescribeGroups, Operation[op], ResourceType.GROUP, name, count=False)]
        return {**group, "authorized_operations": authorized_operations(allowed)}


class _ListGroups(_Rule):
    """All groups with Describe on the cluster, else only the groups the client may describe (no error)."""

    def response(self, auth: Authorization, api_key: ApiKey, version: int, answer: Body, pending: Any) -> Body:
        if auth.allowed(api_key, Operation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME, count=False):
            return answer
        return {**answer, "groups": [g for g in answer.get("groups") or [] if auth.allowed(
            api_key, Operation.DESCRIBE, ResourceType.GROUP, str(g.get("group_id")), count=False)]}


_OFFSET_DELETE_TOPICS: Final = _Topics("topics", "name", "partitions", "partition_index",
                                       "topics", "name", "partitions", "partition_index")


class _OffsetDelete(_Rule):
    """Delete on the group (else a top-level 30 with no topics), Read on each topic (else 29 per partition)."""

    def request(self, auth: Authorization, api_key: ApiKey, version: int, body: Mapping[str, Any]) -> Decision:
        if not auth.allowed(api_key, Operation.DELETE, ResourceType.GROUP, str(body.get("group_id"))):
            return Decision(None, {"error_code": GROUP_AUTHORIZATION_FAILED, "topics": []})
        allowed, denied = _OFFSET_DELETE_TOPICS.split(auth, api_key, Operation.READ, body)
        if not denied:
            return Decision(dict(body))
        if not allowed:
            return Decision(None, {"error_code": 0, "topics": denied})
        return Decision({**body, "topics": allowed}, pending=denied)

    def response(self, auth: Authorization, api_key: ApiKey, version: int, answer: Body, pending: Any) -> Body:
        if not pending or answer.get("error_code"):
            return answer
        return {**answer, "topics": [*(answer.get("topics") or []), *pending]}


class _Metadata(_Rule):
    """Describe on each named topic (else 29 in its entry, no partitions); any other topic the answer carries
    (all topics, or more than were named), only if describable. A client that may not create the topics it names
    (Create on the cluster or on the topic) does not get them auto-created: the forwarded request asks for no
    auto-creation, and a topic that then does not exist is answered 29, as KafkaApis answers topics unauthorized
    for Create."""

    def request(self, auth: Authorization, api_key: ApiKey, version: int, body: Mapping[str, Any]) -> Decision:
        topics = body.get("topics")
        if topics is None or (version == 0 and not topics):
            return Decision(dict(body), pending=None)
        names = [str(t.get("name")) for t in topics]
        denied = [name for name in names if not auth.allowed(api_key, Operation.DESCRIBE, ResourceType.TOPIC, name)]
        allowed = [t for t in topics if str(t.get("name")) not in denied]
        no_create: list[str] = []
        forward = {**body, "topics": allowed}
        if version >= 4 and body.get("allow_auto_topic_creation") and not auth.allowed(
                api_key, Operation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME, count=False):
            no_create = [str(t.get("name")) for t in allowed
                         if not auth.allowed(api_key, Operation.CREATE, ResourceType.TOPIC, str(t.get("name")))]
            if no_create:
                forward["allow_auto_topic_creation"] = False
        if version == 0 and not allowed:
            forward["topics"] = [{"name": name} for name in denied[:1]]  # v0's empty list would mean all topics
        return Decision(forward, pending=(denied, no_create))

    def response(self, auth: Authorization, api_key: ApiKey, version: int, answer: Body, pending: Any) -> Body:
        # Every topic the answer carries is checked, not only those asked for: some brokers list all topics
        # whatever was asked, and a topic the client may not describe must not reach it either way.
        topics = [t for t in answer.get("topics") or [] if auth.allowed(
            api_key, Operation.DESCRIBE, ResourceType.TOPIC, str(t.get("name")), count=False)]
        if pending is None:  # all topics
            return {**answer, "topics": topics}
        denied, no_create = pending
        unknown_topic = 3
        topics = [_topic_denied(t["name"]) if t.get("name") in no_create and t.get("error_code") == unknown_topic
                  else t for t in topics if t.get("name") not in denied]
        return {**answer, "topics": [*topics, *(_topic_denied(name) for name in denied)]}


def _topic_denied(name: str) -> Body:
    return {"error_code": TOPIC_AUTHORIZATION_FAILED, "name": name, "topic_id": ZERO_UUID, "is_internal": False,
            "partitions": []}


class _CreateOrDeleteTopics(_Rule):
    """CreateTopics (Create on the cluster or the topic) and DeleteTopics (Delete on the topic): 29 per topic."""

    def __init__(self, operation: Operation, request_list: str, response_list: str) -> None:
        self.operation = operation
        self.request_list = request_list
        self.response_list = response_list

    def _allowed(self, auth: Authorization, api_key: ApiKey, name: str) -> bool:
        if self.operation is Operation.CREATE and auth.allowed(api_key, Operation.CREATE, ResourceType.CLUSTER,
                                                               CLUSTER_NAME, count=False):
            return True
        return auth.allowed(api_key, self.operation, ResourceType.TOPIC, name)

    def request(self, auth: Authorization, api_key: ApiKey, version: int, body: Mapping[str, Any]) -> Decision:
        request_list = self.request_list if self.request_list in body else "topics"  # DeleteTopics v6+: topics
        topics = list(body.get(request_list) or [])
        names = [str(t.get("name") if isinstance(t, Mapping) else t) for t in topics]
        verdicts = [self._allowed(auth, api_key, name) for name in names]
        if all(verdicts):
            return Decision(dict(body))
        denied = [{"name": name, "error_code": TOPIC_AUTHORIZATION_FAILED, "error_message": None}
                  for name, ok in zip(names, verdicts, strict=True) if not ok]
        allowed = [t for t, ok in zip(topics, verdicts, strict=True) if ok]
        if not allowed:
            return Decision(None, {self.response_list: denied})
        return Decision({**body, request_list: allowed}, pending=denied)

    def response(self, auth: Authorization, api_key: ApiKey, version: int, answer: Body, pending: Any) -> Body:
        if not pending:
            return answer
        return {**answer, self.response_list: [*(answer.get(self.response_list) or []), *pending]}


_RULES: Final[dict[ApiKey, _Rule]] = {
    ApiKey.ApiVersions: _Rule(),
    ApiKey.SaslHandshake: _Rule(),
    ApiKey.SaslAuthenticate: _Rule(),
    ApiKey.FindCoordinator: _FindCoordinator(),
    ApiKey.JoinGroup: _ReadGroup(),
    ApiKey.SyncGroup: _ReadGroup(),
    ApiKey.Heartbeat: _ReadGroup(),
    ApiKey.LeaveGroup: _ReadGroup(),
    ApiKey.OffsetCommit: _OffsetCommit(),
    ApiKey.OffsetFetch: _OffsetFetch(),
    ApiKey.DescribeGroups: _DescribeGroups(),
    ApiKey.DeleteGroups: _GroupList(Operation.DELETE, "groups_names", "results", denied_first=False),
    ApiKey.ListGroups: _ListGroups(),
    ApiKey.OffsetDelete: _OffsetDelete(),
    # KafkaApis' streams paths, as its consumer-group ones: Read on the group; a describe's denied groups first.
    ApiKey.StreamsGroupHeartbeat: _ReadGroup(),
    ApiKey.StreamsGroupDescribe: _GroupList(Operation.DESCRIBE, "group_ids", "groups", denied_first=True),
    ApiKey.Metadata: _Metadata(),
    ApiKey.Produce: _Produce(Operation.WRITE, _Topics(
        "topic_data", "name", "partition_data", "index", "responses", "name", "partition_responses", "index",
        {"base_offset": -1, "log_append_time_ms": -1, "log_start_offset": -1})),
    ApiKey.Fetch: _ByTopic(Operation.READ, _Topics(
        "topics", "topic", "partitions", "partition", "responses", "topic", "partitions", "partition_index",
        {"high_watermark": -1, "last_stable_offset": -1, "log_start_offset": -1}), {"error_code": 0, "session_id": 0}),
    ApiKey.ListOffsets: _ByTopic(Operation.DESCRIBE, _Topics(
        "topics", "name", "partitions", "partition_index", "topics", "name", "partitions", "partition_index",
        {"timestamp": -1, "offset": -1})),
    ApiKey.OffsetForLeaderEpoch: _ByTopic(Operation.DESCRIBE, _Topics(
        "topics", "topic", "partitions", "partition", "topics", "topic", "partitions", "partition",
        {"leader_epoch": -1, "end_offset": -1})),
    ApiKey.CreateTopics: _CreateOrDeleteTopics(Operation.CREATE, "topics", "topics"),
    ApiKey.DeleteTopics: _CreateOrDeleteTopics(Operation.DELETE, "topic_names", "responses"),
}
