"""Logging set-up: plain text or one JSON object per line."""

from __future__ import annotations

import logging
import sys
from typing import Any

from app.serde import json


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry).decode()


# librdkafka's own lines (connection failures, broker state, ``debug`` output) go through this
# logger rather than straight to stderr, so they share the bridge's format (JSON included).
LIBRDKAFKA_LOGGER = "librdkafka"


class _AtDebug(logging.LoggerAdapter):  # type: ignore[type-arg]
    """Every line at DEBUG, whatever level librdkafka gave it."""

    def log(self, level: int, msg: object, *args: Any, **kwargs: Any) -> None:
        super().log(logging.DEBUG, msg, *args, **kwargs)


def librdkafka_logging(reported_elsewhere: bool = False) -> dict[str, Any]:
    """The client setting that routes a librdkafka client's log lines to Python logging.

    confluent-kafka then queues them and hands them over in the client's ``poll``/``consume``
    calls (its ``logger`` setting), which the bridge makes on every batch.

    Args:
        reported_elsewhere: the start-up checks report a failure as one line of their own (exit
            2); the client's own lines about it (a FAIL per connection attempt) go to DEBUG.
    """
    logger = logging.getLogger(LIBRDKAFKA_LOGGER)
    return {"logger": _AtDebug(logger, {}) if reported_elsewhere else logger}


def setup(level: str, fmt: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # The schema registry client's HTTP library logs a line per request at INFO.
    for chatty in ("httpx", "httpx2", "httpcore"):
        logging.getLogger(chatty).setLevel(max(logging.WARNING, root.level))
