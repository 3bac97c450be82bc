"""OffsetFetch (docs/OFFSETS_AND_LISTING.md section 3): a group's committed offsets, listed or all.

A classic group answers every state the same way (ClassicGroup.validateOffsetFetch refuses only
Dead), and a group that does not exist answers like one without offsets: -1 for each listed
partition, no topics for all (OffsetMetadataManager.fetchOffsets / fetchAllOffsets). Nothing changes.
"""

from __future__ import annotations

from ...envelope import Response, response_envelope
from ...records import OffsetFetch
from ...responses import fetch_body
from ..answers import answer
from ..data import ClassicGroup


def absent_group(req: OffsetFetch, t: int) -> Response:
    return response_envelope(req.reply, req.group_id, t, fetch_body(req, None))


def handle_offset_fetch(group: ClassicGroup, req: OffsetFetch, t: int) -> None:
    answer(group, req.reply, t, fetch_body(req, group.offsets))
