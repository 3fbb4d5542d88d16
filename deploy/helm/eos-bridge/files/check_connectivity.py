"""`helm test` connectivity check: reach Kafka with the bridge's settings, find its topics.

Runs in the bridge's image with the bridge's environment. Exit 0: the cluster answered and
every input, output and dead-letter topic exists; 1: it did not (one line says why); 2: the
configuration is invalid. It only reads metadata: no group join, no transaction, so a running
bridge is not disturbed.
"""

from __future__ import annotations

import argparse
import logging
import sys

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from app.config import load_settings
from app.errors import ConfigError


class _LastLine(logging.Handler):
    """Keeps librdkafka's last log line (e.g. why a TLS handshake failed) for the summary."""

    def __init__(self) -> None:
        super().__init__()
        self.last = ""

    def emit(self, record: logging.LogRecord) -> None:
        self.last = record.getMessage()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds to wait for metadata")
    args = parser.parse_args()
    try:
        settings = load_settings()
    except ConfigError as exc:
        print(f"check-connectivity: {exc}", file=sys.stderr)
        return 2
    librdkafka = logging.getLogger("librdkafka")
    librdkafka.propagate = False
    last = _LastLine()
    librdkafka.addHandler(last)
    conf = {**settings.client_common(), "bootstrap.servers": settings.bootstrap_servers}
    admin = AdminClient({**conf, "logger": librdkafka})
    try:
        metadata = admin.list_topics(timeout=args.timeout)
    except KafkaException as exc:
        admin.poll(0)  # delivers the queued log lines to the handler
        print(
            f"check-connectivity: no answer from Kafka at {settings.bootstrap_servers} within "
            f"{args.timeout:.0f}s ({exc.args[0].str()}; last client log: {last.last or '-'}); "
            f"check bridge.bootstrapServers, the network policy and the sasl/tls values",
            file=sys.stderr,
        )
        return 1
    wanted = [*settings.input_topics, settings.output_topic, settings.dead_letter_topic]
    missing = [t for t in wanted if t not in metadata.topics or metadata.topics[t].error]
    if missing:
        print(
            f"check-connectivity: topics missing or not readable: {', '.join(missing)} (the "
            f"bridge never creates them)",
            file=sys.stderr,
        )
        return 1
    print(
        f"check-connectivity: {len(metadata.brokers)} broker(s) at {settings.bootstrap_servers}; "
        f"topics {', '.join(wanted)} exist"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
