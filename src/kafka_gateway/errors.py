"""The gateway's errors: a GatewayError closes one client connection, with a log line, and nothing else."""

from __future__ import annotations


class GatewayError(Exception):
    """A problem confined to one client connection."""


class MalformedFrame(GatewayError):
    """A frame whose size, header or body cannot be trusted."""


class UnsupportedRequest(GatewayError):
    """A well-formed request for an API or version the gateway does not serve."""


class UpstreamError(GatewayError):
    """The upstream broker broke the protocol or went away while the connection relied on it."""


class UnencodableAnswer(Exception):
    """An answer that does not fit its response's wire format (a string longer than Kafka allows, a value out of
    range): not the connection's fault; the request gets Kafka's error answer instead."""
