"""The answer that refuses a request with one error and the default body (SEMANTICS.md 9.3 for its member id):
given by the checks that need no group, for a group that does not exist, and at the error boundary."""

from __future__ import annotations

from .errors import Error
from .requests import JoinGroup, Request
from .responses import Response, envelope, error_response_body


def error_response(req: Request, t: int, error: Error) -> Response:
    member_id = req.member_id if isinstance(req, JoinGroup) and error is not Error.UNKNOWN_SERVER_ERROR else ""
    return envelope(req.reply, req.group_id, t, error_response_body(req.reply.api, req.reply.version, error, member_id))
