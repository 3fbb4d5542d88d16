"""app.kafka.defaults.retried_after: librdkafka's socket.timeout.ms, its default when unset."""

from __future__ import annotations

from app.kafka.defaults import retried_after


def test_retried_after_is_the_socket_timeout_or_librdkafkas_default() -> None:
    assert retried_after({"socket.timeout.ms": 5000}) == 5.0
    assert retried_after({"request.timeout.ms": 5000}) == 60.0  # produce requests only
