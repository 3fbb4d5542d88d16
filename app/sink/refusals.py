"""Records the broker refused: remember them, abort, and dead-letter them on replay.

The broker refuses a record for what it is (larger than the topic's ``max.message.bytes``,
an invalid timestamp, a policy violation), and it refuses the whole produce batch it came in:
every record of that batch gets the same delivery error. So a refused record is first a
*suspect*; the transaction aborts and the input is replayed (Kafka Streams'
``RecordCollectorImpl`` sees the same error per record and hands it to its production
exception handler). On replay a suspect is produced alone (flushed before and after): refused
again, it is *confirmed* and the next replay dead-letters it; delivered, it was innocent. A
refusal that came alone is confirmed at once: one abort, then the dead letter. A confirmed
record stays known (up to :data:`REMEMBERED`): if the transaction holding its dead letter
aborts for another reason, the next replay dead-letters it again instead of re-offering it.

Records are known by ``(topic, key bytes, value bytes)``: the pipeline is deterministic, so a
replay produces the same bytes, and the replayed row names the source topic/partition/offset.
"""

from __future__ import annotations

from app.errors import RecordRefused
from app.kafka.errors import describe

Fingerprint = tuple[str, bytes | None, bytes | None]
ALONE = "produce alone"
REMEMBERED = 10_000  # confirmed refusals kept (oldest forgotten first)


class Refusals:
    """The refused records of this process, from delivery reports to dead letters."""

    def __init__(self) -> None:
        self._suspects: dict[Fingerprint, str] = {}
        self._confirmed: dict[Fingerprint, str] = {}
        self._unsettled: set[Fingerprint] = set()  # confirmed, dead letter not yet written
        self._dead_in_txn: set[Fingerprint] = set()  # dead letters in the open transaction
        self._alone: set[Fingerprint] = set()  # produced alone in the open transaction
        self._this_txn: list[Fingerprint] = []
        self._first: RecordRefused | None = None
        self.diagnosing = False  # per-record delivery reports until the next clean flush

    def note(self, err: object, topic: str, key: bytes | None, value: bytes | None) -> None:
        """A delivery report refused this record (call only for ``record_refused(err)``)."""
        fp = (topic, key, value)
        what = f"{describe(err)} (topic {topic})"
        if fp in self._alone:
            self._confirm(fp, what)
        else:
            self._suspects[fp] = what
        self._this_txn.append(fp)
        if self._first is None:
            self._first = RecordRefused(f"the broker refused a record: {what}", topic, key, value)

    def _confirm(self, fp: Fingerprint, what: str) -> None:
        self._confirmed[fp] = what
        self._unsettled.add(fp)
        if len(self._confirmed) > REMEMBERED:
            oldest = next(iter(self._confirmed))
            del self._confirmed[oldest]
            self._unsettled.discard(oldest)

    def _confirm_lone(self) -> None:
        """One refusal in the whole transaction: it was alone in its batch, so it is guilty."""
        if len(self._this_txn) == 1 and self._this_txn[0] in self._suspects:
            fp = self._this_txn[0]
            self._confirm(fp, self._suspects.pop(fp))

    @property
    def refused_in_txn(self) -> bool:
        """The broker refused a record of the open transaction."""
        return self._first is not None

    @property
    def pending(self) -> bool:
        """Some replayed output must be checked here (the fused fast path cannot)."""
        return bool(self._suspects or self._unsettled or self.diagnosing)

    def diagnose_replay(self) -> None:
        """A transaction failed at commit for a delivery nobody reported (no producer-level
        delivery callback): report every record of the replay to find a refused one."""
        self.diagnosing = True

    def check(self, fp: Fingerprint) -> str | None:
        """Before producing ``fp``: None (produce it as usual), :data:`ALONE` (a suspect:
        produce it alone, flushed before and after) or the broker's error (confirmed: send
        the input to the dead-letter topic instead)."""
        confirmed = self._confirmed.get(fp)
        if confirmed is not None:
            self._unsettled.discard(fp)
            self._dead_in_txn.add(fp)
            return confirmed
        if self._suspects.pop(fp, None) is not None:
            self._alone.add(fp)
            return ALONE
        return None

    def raise_if_refused(self) -> None:
        """After the flush: abort if anything was refused (a lone refusal is confirmed)."""
        if self._first is None:
            self.diagnosing = False  # a clean transaction: the diagnosis is over
            return
        self._confirm_lone()
        raise self._first

    def reset(self) -> None:
        """The transaction was aborted; suspects and confirmed refusals wait for the replay."""
        self._confirm_lone()
        self._unsettled |= self._dead_in_txn  # their dead letters were aborted too
        self._dead_in_txn.clear()
        self._alone.clear()
        self._this_txn.clear()
        self._first = None
