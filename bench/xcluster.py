"""Cross-cluster runs: the probes of a contender that reads the bench broker and writes a
second one (docs/cross-cluster.md), the bridge's and MirrorMaker 2's.

The bridge between two clusters commits its input positions to ``<group>.offsets`` on the
target, not to the source group, so "caught up" is read there (read_committed, to the end);
the input's end offsets come from the source, the output's appends from the target.
"""

from __future__ import annotations

from confluent_kafka import Consumer, TopicPartition

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


class MM2Probe(XProbe):
    """:class:`XProbe` for MirrorMaker 2's copy: its positions live in Connect's offsets topic,
    written in the same transaction as the copied records, so the committed copies are the
    committed input (every record is copied): counted as they become visible, read_committed."""

    def __init__(
        self, source: str, target: str, group: str, input_topic: str, output_topic: str
    ) -> None:
        super().__init__(source, target, group, input_topic, output_topic)
        self._reader = Consumer(
            {
                "bootstrap.servers": target,
                "group.id": f"{group}-probe",  # assigned, never subscribes or commits
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                "log_level": 0,
            }
        )
        self._reader.assign([TopicPartition(output_topic, tp.partition, 0) for tp in self._outputs])
        self._copied = 0

    def committed(self) -> int:
        self._copied += sum(1 for m in self._reader.consume(10_000, 0) if m.error() is None)
        return self._copied

    def close(self) -> None:
        self._reader.close()
        super().close()
