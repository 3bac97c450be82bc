"""The group APIs between Kafka's wire structs and the coordinator's envelopes (PROTOCOL.md 2, 3, 8, 11).

A request body is the decoded request in the envelope's naming (`codec.message_to_body`). Most requests
become one envelope. OffsetFetch v8+, DescribeGroups and DeleteGroups may name several groups, while an envelope
holds exactly one (sections 8 and 11): `split_request` makes one body per group (DeleteGroups' duplicate group ids
once, as `KafkaApis` takes them), and `merge_answers` puts the answers back together in the request's order. A part
the coordinator did not answer in time, or answered with a bare error (an invalid request has only `error_code`),
is answered with that error where the API carries its errors (per group, per partition), so the client sees the
error instead of an empty success.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from kafka.protocol.api_key import ApiKey

from coordinator_state.envelope import GROUPS, GROUPS_NAMES, Error

from .apis import GROUP_APIS

COORDINATOR_NOT_AVAILABLE: Final = int(Error.COORDINATOR_NOT_AVAILABLE)
API_NAMES: Final[dict[ApiKey, str]] = {api_key: api_key.name for api_key in GROUP_APIS}
# The requests split by group: the request's list of groups, and the answer's list of per-group entries.
_SPLIT_FIELDS: Final[dict[ApiKey, tuple[str, str]]] = {
    ApiKey.DescribeGroups: (GROUPS, GROUPS),
    ApiKey.DeleteGroups: (GROUPS_NAMES, "results"),
    ApiKey.OffsetFetch: (GROUPS, GROUPS),  # v8+
}


def is_split_by_group(api_key: ApiKey, version: int) -> bool:
    """True for the requests that may name several groups: DescribeGroups, DeleteGroups, OffsetFetch v8+."""
    return api_key in _SPLIT_FIELDS and (api_key != ApiKey.OffsetFetch or version >= 8)


def answer_list(api_key: ApiKey) -> str:
    """The field of a request split by group's answer that holds its per-group entries."""
    return _SPLIT_FIELDS[api_key][1]


def split_request(api_key: ApiKey, version: int, body: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One envelope body per group the request names (none for a request of no group)."""
    if not is_split_by_group(api_key, version):
        return [dict(body)]
    field = _SPLIT_FIELDS[api_key][0]
    groups = body.get(field) or []
    if api_key == ApiKey.DeleteGroups:
        groups = list(dict.fromkeys(groups))
    return [{**body, field: [group]} for group in groups]


def merge_answers(
    api_key: ApiKey,
    version: int,
    parts: Sequence[Mapping[str, Any]],
    answers: Sequence[Mapping[str, Any] | None],
) -> dict[str, Any]:
    """The response body for the whole request: `answers[i]` answers `parts[i]`, None when it never came."""
    if not is_split_by_group(api_key, version):
        (part,), (answer,) = parts, answers
        if answer is None:
            return error_answer(api_key, version, part, COORDINATOR_NOT_AVAILABLE)
        return _complete(api_key, version, part, answer)
    entries: list[Any] = []
    for part, answer in zip(parts, answers, strict=True):
        entries += group_entries(api_key, version, part, answer)
    return {answer_list(api_key): entries}


def group_entries(api_key: ApiKey, version: int, part: Mapping[str, Any], answer: Mapping[str, Any] | None) -> Any:
    """A part's share of the per-group entries of a request split by group: its answer's, or, when the answer is a
    bare error or never came, that error (COORDINATOR_NOT_AVAILABLE) for its group."""
    field = answer_list(api_key)
    if answer is None:
        return error_answer(api_key, version, part, COORDINATOR_NOT_AVAILABLE)[field]
    return _complete(api_key, version, part, answer)[field]


def _complete(api_key: ApiKey, version: int, part: Mapping[str, Any], answer: Mapping[str, Any]) -> dict[str, Any]:
    """An answer as it is, or, when it is a bare error where the API reports errors per group or per
    partition, that error spread over the request's groups or partitions."""
    carrier = _error_carrier(api_key, version)
    if carrier is not None and carrier not in answer:
        return error_answer(api_key, version, part, int(answer.get("error_code", COORDINATOR_NOT_AVAILABLE)))
    return dict(answer)


def _error_carrier(api_key: ApiKey, version: int) -> str | None:
    """The field that holds per-group or per-partition errors, for the APIs that have one."""
    if api_key == ApiKey.OffsetCommit:
        return "topics"
    if api_key == ApiKey.OffsetFetch:
        return "groups" if version >= 8 else "topics"
    if api_key in (ApiKey.DescribeGroups, ApiKey.DeleteGroups):
        return answer_list(api_key)
    return None


def error_answer(api_key: ApiKey, version: int, part: Mapping[str, Any], error_code: int) -> dict[str, Any]:
    """The answer to one request part that carries `error_code` wherever this API reports errors."""
    if api_key == ApiKey.OffsetCommit:
        return {"topics": [
            {"name": topic.get("name"),
             "partitions": [{"partition_index": partition.get("partition_index"), "error_code": error_code}
                            for partition in topic.get("partitions") or []]}
            for topic in part.get("topics") or []]}
    if api_key == ApiKey.OffsetFetch and version >= 8:
        return {"groups": [{"group_id": group.get("group_id"), "error_code": error_code, "topics": []}
                           for group in part.get("groups") or []]}
    if api_key == ApiKey.OffsetFetch:
        # v0-1 report coordinator errors per partition, v2+ at the top.
        topics = [] if version >= 2 else [
            {"name": topic.get("name"),
             "partitions": [{"partition_index": index, "committed_offset": -1, "metadata": "",
                             "error_code": error_code} for index in topic.get("partition_indexes") or []]}
            for topic in part.get("topics") or []]
        return {"error_code": error_code, "topics": topics}
    if api_key == ApiKey.DescribeGroups:
        return {"groups": [{"group_id": group_id, "error_code": error_code} for group_id in part.get("groups") or []]}
    if api_key == ApiKey.DeleteGroups:
        return {"results": [{"group_id": group_id, "error_code": error_code}
                            for group_id in part.get(GROUPS_NAMES) or []]}
    return {"error_code": error_code}
