"""Bridge-like output records for the Spark tests, written in Kafka transactions."""

from __future__ import annotations

import json
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass

from tests.support.kafka import KafkaFixture, wait_until

WINDOW_MS = 60_000
BAD_VALUES: tuple[bytes, ...] = (
    b"{not json",
    b'{"id": "x-1", "key": "user-1", "amount": 1.5}',  # no ts
    b'{"id": "x-2", "key": "user-2", "amount": "lots", "ts": 1}',  # mistyped
    b"[1, 2, 3]",
)


@dataclass(slots=True, frozen=True)
class Event:
    """One output record as the bridge writes it."""

    id: str
    key: str
    amount: float
    ts: int

    def value(self) -> bytes:
        return json.dumps(
            {"id": self.id, "key": self.key, "amount": self.amount, "ts": self.ts, "src": "t"}
        ).encode()


def first_window_ms() -> int:
    """A minute boundary 10 minutes from now: where the test events' time starts.

    The events' time is also their Kafka timestamp (so timestamp ranges select windows), and
    it must stay ahead of the wall clock: transaction markers carry the broker's current time,
    and a lookup by timestamp stops at the first batch at or after the target, marker or not.
    It must also stay within the broker's 1 hour ``message.timestamp.after.max.ms`` and away
    from retention, which deletes segments whose newest timestamp is 7 days old.
    """
    return (int(time.time() * 1000) // WINDOW_MS + 10) * WINDOW_MS


def make_events(n: int, seed: int, t0_ms: int, keys: int = 5, step_ms: int = 1_500) -> list[Event]:
    """``n`` events in event-time order from ``t0_ms``, a few ids repeated so distinct < count.

    Amounts are multiples of 0.25, so every sum is exact in binary floating point and the
    comparison with the reference can be exact.
    """
    rng = random.Random(seed)
    events = []
    for i in range(n):
        ident = f"order-{seed}-{i - 1 if i % 7 == 6 else i}"  # every 7th repeats its predecessor
        amount = rng.randrange(0, 400) / 4
        events.append(Event(ident, f"user-{rng.randrange(keys)}", amount, t0_ms + i * step_ms))
    return events


def produce_in_transactions(
    kafka: KafkaFixture,
    topic: str,
    batches: Sequence[Sequence[Event | bytes]],
    aborted: frozenset[int] = frozenset(),
) -> None:
    """One transaction per batch; the batches whose index is in ``aborted`` are aborted.

    Aborted batches are flushed first so their records really reach the log (abort alone
    would purge them from the client queue). Record timestamps are the events' ``ts``.
    Returns once every transaction marker is written (last stable offset = high watermark),
    so a read_committed reader sees all committed records.
    """
    producer = kafka.transactional_producer()
    for index, batch in enumerate(batches):
        producer.begin_transaction()
        for item in batch:
            if isinstance(item, Event):
                producer.produce(topic, item.value(), key=item.key.encode(), timestamp=item.ts)
            else:
                producer.produce(topic, item, key=b"bad")
        producer.flush(30)
        if index in aborted:
            producer.abort_transaction(30)
        else:
            producer.commit_transaction(30)
    wait_until(
        lambda: kafka.end_offsets(topic, True) == kafka.end_offsets(topic, False),
        30,
        f"the last stable offset of {topic} to reach its high watermark",
    )


def chunks(items: Sequence[Event], size: int) -> list[list[Event | bytes]]:
    """``items`` cut into transactions of ``size`` records."""
    return [list(items[i : i + size]) for i in range(0, len(items), size)]
