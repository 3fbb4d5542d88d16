"""Poison isolation: the last line of defence against a batch that aborts again and again.

Whatever the error's code or wording, a transaction that aborts ``after_aborts`` times in a
row without a commit means something in it cannot be written and no earlier rung of the
ladder recognised it. The loop then narrows the input down (halving the batch, each batch in
its own transaction) until one record alone aborts its transaction twice; that record is
dead-lettered (``OutputRefused``) in the next one, then, if that is refused too, as its
smallest dead letter (no value, no headers of its own, a key so that a compacted DLQ takes
it); if even that aborts, the process exits 3 naming the record. Then back to normal
batches. At most :meth:`Isolation.bound` aborts in a row: docs/operations.md.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from app.errors import KafkaFatalError, OutputRefused
from app.kafka.ports import Message
from app.pipeline.record import Failure, Row

log = logging.getLogger(__name__)

Where = tuple[str, int, int]  # topic, partition, offset
AFTER_ABORTS = 5  # the default of isolation_after_aborts
FULL, SMALLEST = 1, 2  # the dead-letter forms a blamed record goes through, in order
# Aborts of a record alone before it is blamed: the transaction after an abort can fail for
# what the aborted one left in the producer (an innocent record gets a second try).
ALONE = 2


@dataclass(slots=True)
class Isolation:
    """Counts aborts without commits and narrows the batches down (see the module docstring).

    Args:
        after_aborts: aborts in a row without a commit that start the narrowing.
        batch_size: the loop's normal batch size (the first narrowed batch is half of it).
    """

    after_aborts: int
    batch_size: int
    _in_row: int = 0
    _size: int | None = None  # the narrowed batch size; None: not isolating
    _open: list[Where] = field(default_factory=list)  # records of the open transaction
    _blamed: dict[Where, int] = field(default_factory=dict)  # record → dead-letter form
    _errors: dict[Where, str] = field(default_factory=dict)
    _alone: dict[Where, int] = field(default_factory=dict)  # record → aborts of it alone

    @property
    def active(self) -> bool:
        """Narrowing: one batch per transaction, no pipelined commit."""
        return self._size is not None

    def bound(self) -> int:
        """The most aborts in a row before a dead letter commits or the process exits 3."""
        return self.after_aborts + self.batch_size.bit_length() + ALONE + 1

    def size(self, normal: int) -> int:
        """The batch size to consume now."""
        return normal if self._size is None else min(normal, self._size)

    def aborted(self, error: BaseException) -> None:
        """The open transaction aborts because of ``error``.

        Raises:
            KafkaFatalError: a record whose smallest dead letter cannot be written either, or
                more aborts in a row than :meth:`bound` (exit 3).
        """
        self._in_row += 1
        batch, self._open = self._open, []
        if self._in_row > self.bound():
            raise KafkaFatalError(
                f"{self._in_row} transactions in a row aborted without a commit, last "
                f"because: {_short(error)}; the restart retries"
            )
        if self._size is None:
            if self._in_row >= self.after_aborts:
                self._size = max(1, self.batch_size // 2)
                log.warning(
                    "%d aborts in a row without a commit: isolating the record that cannot be "
                    "written, %d records per transaction",
                    self._in_row,
                    self._size,
                )
        elif len(batch) == 1:
            where = batch[0]
            self._alone[where] = alone = self._alone.get(where, 0) + 1
            if where in self._blamed or alone >= ALONE:
                self._blame(where, error)
        elif len(batch) > 1:
            self._size = max(1, min(self._size, len(batch)) // 2)

    def _blame(self, where: Where, error: BaseException) -> None:
        form = self._blamed.get(where, 0) + 1
        topic, partition, offset = where
        if form > SMALLEST:
            raise KafkaFatalError(
                f"record {topic}[{partition}]@{offset}: neither its output nor its dead letter "
                f"can be written ({_short(error)}); the restart retries it"
            )
        self._blamed[where] = form
        self._errors.setdefault(where, _short(error))
        log.warning(
            "record %s[%d]@%d alone aborts its transaction: dead-lettering it (%s form)",
            topic,
            partition,
            offset,
            "full" if form == FULL else "smallest",
        )

    def committed(self, consumed: int) -> None:
        """A checkpoint committed: the aborts in a row end; a committed dead letter of a blamed
        record (or a narrowed transaction that commits with none) ends the narrowing."""
        del consumed
        self._in_row = 0
        for where in self._open:  # committed: not the one that cannot be written
            self._alone.pop(where, None)
        done = [w for w in self._open if w in self._blamed]
        for where in done:
            del self._blamed[where]
            self._errors.pop(where, None)
        self._open = []
        if self._size is not None and done and not self._blamed:
            self._size = None
            log.warning("isolation done: back to batches of %d", self.batch_size)

    def screen(self, messages: list[Message]) -> tuple[list[Message], list[Failure]]:
        """Split a batch into what is processed as usual and the dead letters of blamed
        records (empty unless :attr:`active`)."""
        if self._size is None:
            return messages, []
        rest: list[Message] = []
        letters: list[Failure] = []
        for m in messages:
            where = (m.topic() or "", m.partition() or 0, m.offset() or 0)
            self._open.append(where)
            form = self._blamed.get(where)
            if form is None or m.error() is not None:
                rest.append(m)
            else:
                letters.append(self._letter(m, where, form))
        return rest, letters

    def _letter(self, m: Message, where: Where, form: int) -> Failure:
        topic, partition, offset = where
        error = OutputRefused(
            f"{topic}[{partition}]@{offset} aborted its transaction alone, again and again: "
            f"{self._errors.get(where, 'unknown error')}"
        )
        if form == FULL:
            raw = m.value()
            row = Row(raw, m.key(), m.headers(), topic, partition, offset, m.timestamp()[1], raw)
        else:  # the smallest dead letter: the source headers say the rest
            key = m.key() or f"{topic}[{partition}]@{offset}".encode()
            row = Row(None, key, None, topic, partition, offset, m.timestamp()[1])
        return Failure(row, "output", error)


def _short(error: BaseException) -> str:
    """The error as one line of at most 300 characters (the exit line, the dead letter)."""
    text = " ".join(str(error).split())
    return text if len(text) <= 300 else text[:299] + "…"
