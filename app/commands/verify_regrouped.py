"""``verify --pipeline`` of a regrouped pipeline (docs/state.md, Regrouping).

The tail's results depend on the order in which the repartition topic interleaved the input
partitions, so verify does not guess it: it reads the hop's committed records (``--group``
names the topic) and re-runs the tail over them, partition by partition, as the bridge did.
Dead letters are matched by the input record each hop record names; a hop record written
twice for one input record (its origin repeated) is reported as duplicated.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import orjson

from app.commands.rerun import comparable, rerun
from app.engine.regroup import KEY, ORIGIN, ROUTE, unpack
from app.kafka.topics import KafkaRecord
from app.pipeline.builder import Pipeline
from app.pipeline.split import Regroup

Origin = tuple[str, int, int]


def as_tail_input(record: KafkaRecord) -> tuple[KafkaRecord, Origin | None]:
    """A hop record as the tail's re-run reads it (value and key unpacked, our headers
    dropped), and the input record it names."""
    headers = dict(record.headers)
    origin = headers.get(ORIGIN)
    key = unpack(headers[KEY]) if KEY in headers else unpack(record.key)
    value = record.value or b"n"
    theirs = tuple(h for h in record.headers if h[0] not in (ORIGIN, KEY, ROUTE))
    tail = replace(
        record,
        key=key.encode() if isinstance(key, str) else key,
        value=value[1:] if value[:1] in (b"j", b"b") else None,
        headers=theirs,
    )
    return tail, None if origin is None else tuple(orjson.loads(origin))


def audit_regrouped(
    plan: Regroup,
    hop: list[KafkaRecord],
    outputs: list[KafkaRecord],
    output_topic: str,
    existing: set[str],
) -> tuple[Counter[object], Counter[object], set[Origin], list[str]]:
    """Expected and written outputs (comparable), the dead letters expected from the tail (by
    input record), and the input records the hop holds more than once."""
    tail, origins = [], {}
    for record in hop:
        converted, origin = as_tail_input(record)
        tail.append(converted)
        if origin is not None:
            origins[(record.topic, record.partition, record.offset)] = origin
    expected = rerun(Pipeline(plan.tail), tail, output_topic, existing.__contains__)
    got: Counter[object] = Counter(comparable(r.topic, r.key, r.value) for r in outputs)
    dead = {origins.get(d, d) for d in expected.dead}
    twice = [f"{o} twice in {plan.topic}" for o, n in Counter(origins.values()).items() if n > 1]
    return Counter(expected.outputs), got, dead, twice
