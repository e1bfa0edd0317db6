"""Asking a broker directly whether it refuses SASL PLAIN credentials (one socket exchange).

kafka-python does not reliably report refused SASL credentials: the broker closes the socket
right after its error response, and the client usually sees only a disconnect and retries until
its bootstrap timeout. :func:`sasl_plain_refused` sends one SaslHandshake + SaslAuthenticate
exchange per bootstrap broker on a plain socket and returns the broker's refusal, which the Kafka
error boundary (:mod:`._errors_map`) reports as
:class:`~dstream_exactly_once.errors.KafkaAuthError`.
"""

from __future__ import annotations

from typing import Any, Optional

from ._params import KafkaConfig

__all__ = ["sasl_plain_refused"]


def sasl_plain_refused(config: KafkaConfig, timeout_s: Optional[float] = None) -> Optional[str]:
    """Ask the bootstrap brokers whether they refuse ``config``'s SASL PLAIN credentials.

    One SaslHandshake + SaslAuthenticate exchange per broker on a plain socket (SASL_PLAINTEXT
    only). Returns the broker's refusal message (it never contains the password), or ``None`` when
    the answer is not a refusal (accepted, unreachable, other protocol or mechanism).
    """
    client = config.client
    if client.get("security_protocol") != "SASL_PLAINTEXT" or client.get("sasl_mechanism") != "PLAIN":
        return None
    config.register_secrets()  # kafka-python logs the token it sends at DEBUG
    if timeout_s is None:  # request.timeout.ms bounds the probe too, at most 5 s
        timeout_s = min(5.0, int(client.get("request_timeout_ms", 5000)) / 1000)
    user = str(client.get("sasl_plain_username") or "")
    token = "\0".join([user, user, str(client.get("sasl_plain_password") or "")]).encode("utf-8")
    for server in client.get("bootstrap_servers", ()):
        host, _, port = server.rpartition(":")
        try:
            refused = _sasl_plain_exchange(host.strip("[]"), int(port), token, timeout_s)
        except Exception:  # noqa: BLE001 - only a diagnosis; the caller reports the original error
            continue
        return None if refused is None else f"{refused} (SASL PLAIN user {user!r})"
    return None


def _sasl_plain_exchange(host: str, port: int, token: bytes, timeout_s: float) -> Optional[str]:
    import socket
    import time

    import kafka.errors as ke
    from kafka.protocol.parser import KafkaProtocol
    from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

    deadline = time.monotonic() + timeout_s
    proto = KafkaProtocol(client_id="dstream-exactly-once-auth-probe")
    with socket.create_connection((host, port), timeout=timeout_s) as sock:
        def call(request: Any) -> Any:
            proto.send_request(request)
            sock.sendall(proto.send_bytes())
            while True:
                sock.settimeout(max(0.01, deadline - time.monotonic()))
                data = sock.recv(65536)
                if not data:
                    raise ConnectionError("closed by the broker")
                responses = proto.receive_bytes(data)
                if responses:
                    return responses[0][1]

        handshake = call(SaslHandshakeRequest(mechanism="PLAIN", version=1))
        if handshake.error_code:
            return f"SASL mechanism PLAIN is not enabled (the broker offers {list(handshake.mechanisms)})"
        answer = call(SaslAuthenticateRequest(auth_bytes=token, version=1))
        if answer.error_code:
            return f"{ke.for_code(answer.error_code).__name__}: {answer.error_message}"
        return None
