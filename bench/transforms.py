"""The user code every contender runs: one definition, imported by all of them.

Values are ~200-byte JSON objects (see :mod:`bench.data`). P1 keeps ~95% of them and maps each
kept one to a smaller object; P2 counts per key; P3 sums ``amount`` per key in tumbling windows.
"""

from __future__ import annotations

from typing import Any

WINDOW_SECONDS = 10  # P3 tumbling window size (event time = the Kafka record timestamp)


def keep(value: dict[str, Any]) -> bool:
    """P1 filter."""
    return bool(value["amount"] >= 5.0)


def enrich(value: dict[str, Any]) -> dict[str, Any]:
    """P1 map (keeps ``ts`` so end-to-end latency can be read off the output)."""
    return {
        "id": value["id"],
        "user": value["user"],
        "cents": int(value["amount"] * 100),
        "country": value["country"],
        "ts": value["ts"],
    }
