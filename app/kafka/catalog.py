"""Which topics exist, answered from memory for routed records.

A route is asked about once per record, so the answer must not cost a metadata request: one
request per record made a stream of records routed to a missing topic outlive its
transaction. The catalog holds the names of one full metadata request and refreshes them
when they are older than ``refresh_s`` at the time of a question: a topic created or deleted
while the bridge runs is seen within ``refresh_s``, and both answers, "exists" and "does not",
cost a set lookup in between.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

from confluent_kafka import KafkaException

from app.kafka.errors import describe

log = logging.getLogger(__name__)

REFRESH_S = 10.0
LIST_TIMEOUT_S = 5.0


class TopicCatalog:
    """``catalog(name)`` → whether topic ``name`` exists, from a periodically refreshed list.

    Args:
        list_topics: a client's ``list_topics(timeout=...)`` (all topics; one seam for tests).
        known: names known to exist now (the start-up check's listing).
        refresh_s: age after which the next question refreshes the list.
        clock: seconds, monotonic.
    """

    def __init__(
        self,
        list_topics: Callable[..., Any],
        known: Iterable[str] = (),
        refresh_s: float = REFRESH_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._list_topics = list_topics
        self._names = frozenset(known)
        self._refresh_s = refresh_s
        self._clock = clock
        self._next_refresh = clock() + refresh_s
        self.refreshes = 0

    def __call__(self, name: str) -> bool:
        if self._clock() >= self._next_refresh:
            self.refresh()
        return name in self._names

    def refresh(self) -> None:
        """Re-read the topic names; on failure keep the old ones and try again later."""
        self._next_refresh = self._clock() + self._refresh_s
        self.refreshes += 1
        try:
            meta = self._list_topics(timeout=LIST_TIMEOUT_S)
        except KafkaException as exc:
            log.warning(
                "topic metadata refresh failed (%s); routes are checked against the previous "
                "list of %d topics until the next try in %.0fs",
                describe(exc),
                len(self._names),
                self._refresh_s,
            )
            return
        self._names = frozenset(n for n, t in meta.topics.items() if t.error is None)
