"""DescribeGroups (docs/OFFSETS_AND_LISTING.md section 4) of the envelope's one group, from its snapshot."""

from __future__ import annotations

from ...envelope import Response, response_envelope
from ...listing import describe_groups_body, described_group
from ...records import DescribeGroups
from ..data import ClassicGroup
from ..snapshot import snapshot


def _answer(req: DescribeGroups, t: int, group: ClassicGroup | None) -> Response:
    version = req.reply.version
    entry = described_group(req.group_id, None if group is None else snapshot(group), version,
                            req.include_authorized_operations)
    return response_envelope(req.reply, req.group_id, t, describe_groups_body(version, [entry]))


def absent_group(req: DescribeGroups, t: int) -> Response:
    """A group that does not exist is described as Dead (GroupMetadataManager.describeGroups): no error up to v5,
    GROUP_ID_NOT_FOUND from v6."""
    return _answer(req, t, None)


def of_another_type(req: DescribeGroups, t: int, group_type: str) -> Response:
    """A group of another type (a streams group) is described as Dead too, its v6 error saying it is not a classic
    group (GroupMetadataManager.classicGroup); `described_group` reads only the type of such a group."""
    version = req.reply.version
    entry = described_group(req.group_id, {"group_type": group_type}, version, req.include_authorized_operations)
    return response_envelope(req.reply, req.group_id, t, describe_groups_body(version, [entry]))


def handle_describe_groups(group: ClassicGroup, req: DescribeGroups, t: int) -> None:
    group.out.append(_answer(req, t, group))
