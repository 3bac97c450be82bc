"""kafka-python's network threads, to check that a client which failed left none running."""

from __future__ import annotations

import threading


def kafka_network_threads_since(before: set[threading.Thread]) -> list[str]:
    """The names of kafka-python's network threads (`kafka-io-<client id>`) running now and not in `before`."""
    return [thread.name for thread in set(threading.enumerate()) - before if thread.name.startswith("kafka-io-")]
