"""DeleteGroups (PROTOCOL.md 11) of the envelope's one group: an Empty group is removed with every committed offset
(tombstones on the snapshot and offsets topics); one with members is refused NON_EMPTY_GROUP and left as it was;
one that does not exist is GROUP_ID_NOT_FOUND (GroupCoordinatorShard.deleteGroups)."""

from __future__ import annotations

from ...envelope import Response, response_envelope
from ...errors import NO_ERROR, Error
from ...records import DeleteGroups
from ...responses import delete_groups_body
from ..answers import answer
from ..data import ClassicGroup
from ..deletion_rules import delete_group_error
from ..expiry import remove_offset


def absent_group(req: DeleteGroups, t: int) -> Response:
    return response_envelope(req.reply, req.group_id, t, delete_groups_body(req.group_id, Error.GROUP_ID_NOT_FOUND))


def handle_delete_groups(group: ClassicGroup, req: DeleteGroups, t: int) -> None:
    error = delete_group_error(group.state)
    if error is NO_ERROR:
        for topic, partition, _ in list(group.offsets.items()):
            remove_offset(group, topic, partition)
        group.removed = True
        group.touch()
    answer(group, req.reply, t, delete_groups_body(req.group_id, error))
