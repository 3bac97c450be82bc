"""What one SASL login costs the gateway's event loop, per mechanism and iteration count.

`python -m coordinator_lab.sasl_cost` prints the milliseconds of one PLAIN check (a PBKDF2 of the password against
the stored SCRAM credential) and of the server's side of one SCRAM exchange (a few HMACs; the client does the
PBKDF2), each the mean of a number of runs on this machine.
"""

from __future__ import annotations

import base64
import time

import scramp

from kafka_gateway.security.credentials import ScramMechanism, Users, make_credential, password_matches
from kafka_gateway.security.sasl_server import Reply, SaslServerSession, SaslStep

RUNS = 20


def _scram_server_ms(mechanism: ScramMechanism, iterations: int) -> float:
    users = Users({}).with_credential("u", mechanism, make_credential(mechanism, "pw", iterations))
    total = 0.0
    for _ in range(RUNS):
        client = scramp.ScramClient([mechanism.value], "u", "pw")
        first = {"auth_bytes": _b64(client.get_client_first())}
        server = SaslServerSession([mechanism.value], lambda: users)
        server.receive(17, 1, lambda: {"mechanism": mechanism.value})
        started = time.perf_counter()
        answer = server.receive(36, 1, first.copy)
        total += time.perf_counter() - started
        client.set_server_first(_text(answer))
        final = {"auth_bytes": _b64(client.get_client_final())}
        started = time.perf_counter()
        server.receive(36, 1, final.copy)
        total += time.perf_counter() - started
    return total / RUNS * 1000


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _text(step: SaslStep) -> str:
    assert isinstance(step, Reply)
    return base64.b64decode(step.body["auth_bytes"]).decode()


def main() -> None:
    for mechanism in ScramMechanism:
        for iterations in (4096, 16384):
            credential = make_credential(mechanism, "pw", iterations)
            started = time.perf_counter()
            for _ in range(RUNS):
                password_matches(mechanism, credential, "pw")
            plain_ms = (time.perf_counter() - started) / RUNS * 1000
            print(f"{mechanism.value} iterations={iterations}: PLAIN check {plain_ms:.1f} ms, "
                  f"SCRAM server side {_scram_server_ms(mechanism, iterations):.2f} ms")


if __name__ == "__main__":
    main()
