"""OffsetCommit (docs/OFFSETS_AND_LISTING.md section 2): a member, or a "simple" client, stores its positions.

The whole-request checks are Kafka's `ClassicGroup.validateOffsetCommit` (offset_rules.commit_error); an
accepted request stores each partition whose metadata fits `offset.metadata.max.bytes` and answers
each partition on its own. A commit to a group that does not exist either creates a simple group
(negative generation) or is refused (`absent_group`).
"""

from __future__ import annotations

from functools import partial

from ...envelope import Response
from ...errors import Error
from ...offsets import absent_group_commit_error, commit_partitions
from ...records import OffsetCommit
from ...responses import commit_body, commit_refused
from ..answers import answer
from ..data import ClassicGroup
from ..expiry import commit_offset
from ..membership import schedule_session, validate_member
from ..offset_rules import commit_error, commit_keeps_session

_NONE = Error.NONE


def absent_group(req: OffsetCommit, t: int) -> Response | None:
    """The answer for a group that does not exist, or None when the commit creates a simple group."""
    error = absent_group_commit_error(req.reply.version, req.generation_id)
    return None if error is None else commit_refused(req, t, error)


def handle_offset_commit(group: ClassicGroup, req: OffsetCommit, t: int) -> None:
    error = commit_error(group.state, group.generation_id, req.generation_id, req.member_id,
                         req.group_instance_id, partial(validate_member, group))
    if error is not _NONE:
        group.out.append(commit_refused(req, t, error))
        return
    if commit_keeps_session(group.state):
        schedule_session(group, group.members[req.member_id], t)
    results = commit_partitions(req, t, group.config.offset_metadata_max_bytes, partial(commit_offset, group))
    answer(group, req.reply, t, commit_body(req.reply.version, _NONE, results))
