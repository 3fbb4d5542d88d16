"""What a pipeline should have written: the configured pipeline re-run over the committed input.

``verify --pipeline`` (or ``--pipeline-spec``) runs the same compiled steps, per input
partition in offset order, with state in memory, through the sink the bridge uses (codecs,
size and route checks, dead letters) into a capturing producer. The outputs it captures are
what a bridge that ran exactly once must have made visible, as a multiset per output topic;
the dead letters it captures are the inputs that must be in the DLQ.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import TopicPartition

from app.errors import DeserializationError
from app.kafka.topics import KafkaRecord
from app.pipeline.builder import Pipeline
from app.pipeline.record import Failure, Row
from app.pipeline.stateful.kit import SOURCE_OFFSET, SOURCE_PARTITION, SOURCE_TOPIC
from app.pipeline.steps import StepContext
from app.serde import Formats, json
from app.serde import formats as default_formats
from app.sink.collector import RecordCollector
from app.sink.output import H_OFFSET, H_PARTITION, H_TOPIC, Output

# (topic, key, value as compared): one output record
Written = tuple[str, bytes | None, bytes | None]
_PROVENANCE = (SOURCE_TOPIC, SOURCE_PARTITION, SOURCE_OFFSET)
_BATCH = 500


@dataclass(slots=True, eq=False)  # hashed by identity, as the steps key their views
class MemoryView:
    """One store partition in memory (a :class:`app.state.access.StateView`)."""

    data: dict[bytes, bytes] = field(default_factory=dict)
    keys: list[bytes] = field(default_factory=list)  # sorted, for scan()
    memo: dict[str, Any] = field(default_factory=dict)

    def get(self, key: bytes) -> bytes | None:
        return self.data.get(key)

    def set(self, key: bytes, value: bytes) -> None:
        if key not in self.data:
            insort(self.keys, key)
        self.data[key] = value

    def delete(self, key: bytes) -> None:
        if self.data.pop(key, None) is not None:
            self.keys.pop(bisect_left(self.keys, key))

    def scan(self, lower: bytes, upper: bytes) -> list[tuple[bytes, bytes]]:
        i = bisect_left(self.keys, lower)
        out = []
        while i < len(self.keys) and self.keys[i] < upper:
            out.append((self.keys[i], self.data[self.keys[i]]))
            i += 1
        return out


class MemoryState:
    """Every store partition in memory (a :class:`app.state.access.StateAccess`)."""

    def __init__(self) -> None:
        self._views: dict[tuple[str, str, int], MemoryView] = {}

    def partition(self, store: str, topic: str, partition: int) -> MemoryView:
        return self._views.setdefault((store, topic, partition), MemoryView())


class Capture:
    """A producer that keeps what it is given (a :class:`app.kafka.ports.ProducerPort`)."""

    def __init__(self) -> None:
        self.records: list[tuple[str, bytes | None, bytes | None, Any]] = []

    def produce(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        partition: int = -1,
        callback: Any = None,
        on_delivery: Any = None,
        timestamp: int = 0,
        headers: Any = None,
    ) -> None:
        self.records.append((topic, value, key, headers))

    def poll(self, timeout: float = -1) -> int:
        return 0

    def flush(self, timeout: float = -1) -> int:
        return 0

    def init_transactions(self, timeout: float = -1) -> None:
        pass

    def begin_transaction(self) -> None:
        pass

    def send_offsets_to_transaction(
        self, positions: list[TopicPartition], group_metadata: Any, timeout: float = -1
    ) -> None:
        pass

    def commit_transaction(self, timeout: float = -1) -> None:
        pass

    def abort_transaction(self, timeout: float = -1) -> None:
        pass


@dataclass(slots=True)
class Expected:
    """What the pipeline makes of the input: outputs per topic and dead-lettered sources."""

    outputs: Counter[Written] = field(default_factory=Counter)
    dead: set[tuple[str, int, int]] = field(default_factory=set)


def rerun(
    pipeline: Pipeline,
    inputs: Iterable[KafkaRecord],
    output_topic: str,
    topic_exists: Callable[[str], bool],
    formats: Formats | None = None,
) -> Expected:
    """Run ``pipeline`` over ``inputs`` as the bridge would, state in memory."""
    formats = formats or default_formats()
    capture = Capture()
    output = Output(
        RecordCollector(capture),
        output_topic,
        "\0dlq",
        1_000_000,
        topic_exists,
        value_codec=formats.value_out,
        key_codec=formats.key_out,
    )
    state = MemoryState()
    by_partition: dict[tuple[str, int], list[KafkaRecord]] = {}
    for record in inputs:
        by_partition.setdefault((record.topic, record.partition), []).append(record)
    for records in by_partition.values():
        records.sort(key=lambda r: r.offset)
        for i in range(0, len(records), _BATCH):
            _batch(pipeline, records[i : i + _BATCH], formats, output, state)
    expected = Expected()
    for topic, value, key, headers in capture.records:
        if topic == "\0dlq":
            h = dict(headers)
            expected.dead.add((h[H_TOPIC].decode(), int(h[H_PARTITION]), int(h[H_OFFSET])))
        else:
            expected.outputs[comparable(topic, key, value)] += 1
    return expected


def _batch(
    pipeline: Pipeline,
    records: list[KafkaRecord],
    formats: Formats,
    output: Output,
    state: MemoryState,
) -> None:
    rows, failures = [], []
    for r in records:
        row = Row(
            r.value,
            r.key,
            list(r.headers) or None,
            r.topic,
            r.partition,
            r.offset,
            r.timestamp,
            r.value,
        )
        try:
            if formats.value_in.structured:
                row.value = formats.value_in.decode(r.value, r.topic)
        except DeserializationError as exc:
            failures.append(Failure(row, "deserialize", exc))
            continue
        rows.append(row)
    ctx = StepContext(retries=0, state=state)
    for step in pipeline.steps:
        if rows:
            rows = step(rows, ctx)
    for failure in failures + ctx.failures + output.send(rows):
        output.dead_letter(failure)
    output.checkpoint_committed(len(records))


def comparable(topic: str, key: bytes | None, value: bytes | None) -> Written:
    """An output as compared: JSON objects without their ``_source_*`` provenance fields
    (a window's depend on where a batch ended), keys sorted."""
    if value is not None and value[:1] == b"{":
        try:
            decoded = json.loads(value)
        except json.JSONDecodeError:
            return topic, key, value
        kept = {k: v for k, v in decoded.items() if k not in _PROVENANCE}
        return topic, key, json.dumps(kept, option=json.OPT_SORT_KEYS)
    return topic, key, value
