"""Cross-cluster runs: the probe of a contender that reads the bench broker and writes a
second one (docs/cross-cluster.md).

The bridge between two clusters commits its input positions to ``<group>.offsets`` on the
target, not to the source group, so "caught up" is read there (read_committed, to the end);
the input's end offsets come from the source, the output's appends from the target.
"""

from __future__ import annotations

from app.kafka.topics import partitions_of, read_all
from app.offsets.target import latest_positions
from bench.kafka import Probe


class XProbe(Probe):
    """:class:`Probe` for two clusters: each question asked of the cluster that knows."""

    def __init__(
        self, source: str, target: str, group: str, input_topic: str, output_topic: str
    ) -> None:
        super().__init__(source, group, input_topic, output_topic, output_bootstrap=target)
        self._target, self._group, self._input = target, group, input_topic
        self._offsets_topic = f"{group}.offsets"

    def committed(self) -> int:
        """Input records whose positions the target's offsets topic holds (0 before it exists)."""
        try:
            partitions_of(self._target, self._offsets_topic)
        except KeyError:
            return 0
        records = read_all(self._target, self._offsets_topic, read_committed=True, timeout=10)
        positions = latest_positions(self._group, ((r.key, r.value) for r in records))
        return sum(o for (t, _), o in positions.items() if t == self._input)
