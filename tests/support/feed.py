"""Input the test feeds in phases, so where a fault lands never depends on machine speed.

A bridge can only get as far as the test has fed it. Tests that used to wait for "x % of a
pre-seeded stream committed" (a condition a fast machine can jump past, or a slow one never
reach in time) instead feed a phase, wait until it is committed, and act then; a fault that
must land inside an open transaction waits for one to be seen on the output topic, feeding
another chunk each time the bridge has caught up.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from tests.support.bridge import BridgeProcess, wait_caught_up
from tests.support.kafka import KafkaFixture


class Feeder:
    """The test's input records, produced to ``topic`` only when the test asks."""

    def __init__(
        self, kafka: KafkaFixture, topic: str, values: Sequence[bytes], keys: Sequence[bytes]
    ) -> None:
        self.kafka = kafka
        self.topic = topic
        self._values = values
        self._keys = keys
        self.fed = 0

    @property
    def remaining(self) -> int:
        return len(self._values) - self.fed

    def feed(self, n: int | None = None) -> int:
        """Produce the next ``n`` records (all that are left when None); returns how many."""
        n = self.remaining if n is None else min(n, self.remaining)
        if n:
            end = self.fed + n
            self.kafka.seed(self.topic, self._values[self.fed : end], self._keys[self.fed : end])
            self.fed = end
        return n


def open_records(kafka: KafkaFixture, topic: str) -> int:
    """Records of ``topic`` inside open transactions: high watermark minus last stable offset."""
    hw = kafka.end_offsets(topic, read_committed=False)
    lso = kafka.end_offsets(topic, read_committed=True)
    return sum(hw[p] - lso.get(p, 0) for p in hw)


def caught_up(kafka: KafkaFixture, group: str, topic: str) -> bool:
    """``group`` has committed the end offset of every non-empty partition of ``topic``."""
    ends = kafka.end_offsets(topic)
    committed = kafka.committed_offsets(group, topic)
    return all(end == 0 or committed.get(p, -1) >= end for p, end in ends.items())


def wait_for_open_transaction(
    kafka: KafkaFixture,
    feeder: Feeder,
    group: str,
    out: str,
    chunk: int,
    check: Callable[[], None] = lambda: None,
    timeout: float = 300,
) -> None:
    """Return once a transaction holds records on ``out``.

    Each time the group has committed everything fed so far, the next ``chunk`` is fed, so the
    bridge always has work and an open transaction always comes (it stays open for a whole
    commit interval). ``check`` runs on every look (e.g. fail or restart a bridge that exited).
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        check()
        if open_records(kafka, out) > 0:
            return
        if caught_up(kafka, group, feeder.topic):
            if not feeder.feed(chunk):
                raise AssertionError("input ran out before an open transaction was seen")
        else:
            time.sleep(0.05)
    raise AssertionError(f"no open transaction on {out} within {timeout}s")


def kill_in_open_transaction(
    kafka: KafkaFixture,
    bridge: BridgeProcess,
    feeder: Feeder,
    group: str,
    out: str,
    chunk: int,
    timeout: float = 300,
) -> None:
    """SIGKILL ``bridge`` while its transaction holds records on ``out``.

    If the transaction happened to commit between the look and the kill, the bridge is
    restarted and the look repeated: the kill that counts leaves records behind that only
    ``read_uncommitted`` sees.
    """

    def alive() -> None:
        if not bridge.running():
            raise AssertionError(f"bridge exited before the kill:\n{bridge.logs()[-3000:]}")

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        wait_for_open_transaction(kafka, feeder, group, out, chunk, alive, timeout)
        bridge.kill()
        if open_records(kafka, out) > 0:
            return
        bridge.start()  # committed just before the kill: try again
    raise AssertionError(f"no kill inside an open transaction on {out} within {timeout}s")


def feed_and_catch_up(
    kafka: KafkaFixture,
    feeder: Feeder,
    group: str,
    n: int | None,
    bridges: Sequence[BridgeProcess],
    timeout: float = 300,
) -> None:
    """Feed the next ``n`` records (the rest when None) and wait until all are committed."""
    feeder.feed(n)
    wait_caught_up(kafka, group, feeder.topic, timeout, list(bridges))
