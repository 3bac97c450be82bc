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
    """A group that does not exist is described as Dead, with no error (GroupMetadataManager.describeGroups)."""
    return _answer(req, t, None)


def handle_describe_groups(group: ClassicGroup, req: DescribeGroups, t: int) -> None:
    group.out.append(_answer(req, t, group))
