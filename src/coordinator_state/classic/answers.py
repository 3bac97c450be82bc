"""The classic group's answers: a response decided at `t` is appended to the group's `out`, in the order decided."""

from __future__ import annotations

from typing import Any

from ..envelope import response_envelope
from ..errors import NO_ERROR, Error
from ..records import Reply
from ..responses import join_body, sync_body
from .data import ClassicGroup
from .model import IllegalTransition


def answer(group: ClassicGroup, reply: Reply, t: int, body: dict[str, Any]) -> None:
    group.out.append(response_envelope(reply, group.group_id, t, body))


def answer_join(group: ClassicGroup, reply: Reply, t: int, error: Error, **fields: Any) -> None:
    if reply.api != "JoinGroup":
        raise IllegalTransition(f"a {reply.api} parked as a JoinGroup")
    answer(group, reply, t, join_body(reply.version, error, **fields))


def answer_sync(group: ClassicGroup, reply: Reply, t: int, error: Error, assignment: str = "") -> None:
    body = (sync_body(reply.version, error, assignment=assignment, protocol_type=group.protocol_type,
                      protocol_name=group.protocol_name)
            if error is NO_ERROR else sync_body(reply.version, error))
    answer(group, reply, t, body)
