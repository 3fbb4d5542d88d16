"""``eos-bridge dlq replay DLQ``: dead letters back to their input topic, where the running
bridge meets them with its live state.

Each dead letter still holds its input's key, value and headers (``eos.dlq.*`` aside) and names
where it came from. The replay writes it back to that input topic and partition with its
original timestamp and provenance headers (``eos.replay.*``), exactly once: one transaction
holds a batch of them and the group ``<group_id>.replay``'s new position on the dead-letter topic
(app.kafka.transfer). A second run finds nothing left; a run killed half-way and run again
writes nothing twice. A stateless pipeline takes the same path (one way for every pipeline).
``--to TOPIC`` copies the dead letters to TOPIC instead (the producer places them by key).
docs/operations.md "Replaying dead letters" is the user's page.
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Protocol

from app.commands.lateness import Lateness
from app.config import BridgeSettings, load_settings
from app.engine.wiring import build_pipeline
from app.errors import ConfigError
from app.kafka.admin import require_topics
from app.kafka.topics import KafkaRecord, partitions_of
from app.kafka.transfer import Outgoing, Transfer, retention_ms, tails
from app.offsets.group import committed_offsets
from app.sink.fitting import H_HEADERS_DROPPED, H_KEY_DROPPED, H_VALUE_DROPPED
from app.sink.output import (
    DLQ_PREFIX,
    H_CLASS,
    H_OFFSET,
    H_PARTITION,
    H_STEP,
    H_TIMESTAMP,
    H_TOPIC,
)

# Provenance of a replayed record (not eos.dlq.*: the bridge treats those as a dead letter's).
H_RUN = "eos.replay.run"
H_DLQ_TOPIC = "eos.replay.dlq.topic"
H_DLQ_PARTITION = "eos.replay.dlq.partition"
H_DLQ_OFFSET = "eos.replay.dlq.offset"
H_SOURCE_TOPIC = "eos.replay.source.topic"
H_SOURCE_PARTITION = "eos.replay.source.partition"
H_SOURCE_OFFSET = "eos.replay.source.offset"
H_ERROR_CLASS = "eos.replay.error.class"
H_ERROR_STEP = "eos.replay.error.step"
_TAIL = 100  # records per input partition that set the lateness clock
_DROPPED = {H_VALUE_DROPPED: "value", H_KEY_DROPPED: "key", H_HEADERS_DROPPED: "headers"}


class Fault(Protocol):
    """A test's hook into the replay (handed to :func:`replay`; never a setting)."""

    def before_commit(self, transaction: int) -> None: ...


@dataclass(slots=True)
class Summary:
    """What one run did."""

    dlq: str
    read: int = 0
    produced: int = 0
    again: int = 0  # dead letters of an earlier replay's records: they failed again
    failed: int | None = None  # of this run's, dead-lettered again by the bridge (--wait)
    waited: float = 0.0
    skipped: Counter[str] = field(default_factory=Counter)  # reason → count
    ends: dict[int, int] = field(default_factory=dict)

    def lines(self, lateness: Lateness, grace: dict[str, int]) -> list[str]:
        if self.read == 0:
            return [f"nothing left to replay in {self.dlq!r} (read up to {self.ends})"]
        skipped = sum(self.skipped.values())
        out = [
            f"replayed {self.dlq!r} up to {self.ends}: read {self.read}, produced "
            f"{self.produced}, skipped {skipped}; {self.again} of those read had failed again "
            f"after an earlier replay"
        ]
        out += [f"skipped {n}: {why}" for why, n in self.skipped.most_common()]
        if self.failed is not None:
            out.append(f"dead-lettered again by the bridge: {self.failed} of {self.produced}")
        elif self.waited and self.produced:
            out.append(
                f"dead-lettered again: not known, the bridge had not processed them after "
                f"--wait {self.waited:g} s (see `eos-bridge dlq summary {self.dlq}` later)"
            )
        for name, g in grace.items():
            line = f"window {name!r}: {lateness.late[name]} will be dropped as late (grace {g} ms)"
            if lateness.unknown[name]:
                line += f", {lateness.unknown[name]} without a readable event time"
            out.append(line)
        return out


def resend(
    record: KafkaRecord, partitions: dict[str, int], to: str | None, run: str
) -> Outgoing | str:
    """The input record a dead letter was, with provenance headers, or why it cannot be."""
    h = {k: v for k, v in record.headers}
    dropped = [what for name, what in _DROPPED.items() if name in h]
    if dropped:
        return f"the dead letter's {' and '.join(dropped)} were dropped (too large for the DLQ)"
    try:
        topic, partition = h[H_TOPIC].decode(), int(h[H_PARTITION])
        offset = int(h[H_OFFSET])
    except (KeyError, ValueError):
        return f"no {H_TOPIC}/{H_PARTITION}/{H_OFFSET} headers"
    if to is None and topic not in partitions:
        return f"source topic {topic!r} is not an input topic of this bridge"
    if to is None and partition >= partitions[topic]:
        return f"source partition {topic}[{partition}] does not exist"
    timestamp = int(h.get(H_TIMESTAMP, b"0") or 0) or record.timestamp
    provenance = [
        (H_RUN, run.encode()),
        (H_DLQ_TOPIC, record.topic.encode()),
        (H_DLQ_PARTITION, str(record.partition).encode()),
        (H_DLQ_OFFSET, str(record.offset).encode()),
        (H_SOURCE_TOPIC, topic.encode()),
        (H_SOURCE_PARTITION, str(partition).encode()),
        (H_SOURCE_OFFSET, str(offset).encode()),
        (H_ERROR_CLASS, h.get(H_CLASS, b"")),
        (H_ERROR_STEP, h.get(H_STEP, b"")),
    ]
    own = [(k, v) for k, v in record.headers if not k.startswith(DLQ_PREFIX)]
    own = [(k, v) for k, v in own if not k.startswith("eos.replay.")]  # the last replay's
    if to is not None:
        return Outgoing(to, -1, record.key, record.value, own + provenance, timestamp)
    return Outgoing(topic, partition, record.key, record.value, own + provenance, timestamp)


def replay(
    settings: BridgeSettings,
    dlq: str,
    to: str | None,
    batch: int,
    fault: Fault | None = None,
    wait: float = 0.0,
) -> list[str]:
    """Replay ``dlq`` up to its end offsets now; the summary's lines."""
    if settings.cross_cluster and to is None:
        raise ConfigError(
            "target.bootstrap_servers: dlq replay cannot write the dead letters (target "
            "cluster) back to the input topics (source cluster) in one transaction; copy them "
            "with --to TOPIC and feed that topic to the bridge"
        )
    conf = settings.client_config()
    require_topics(settings, [("", dlq), *(("", t) for t in [to] if t)], settings.startup_timeout)
    pipeline = build_pipeline(settings)
    lateness = Lateness(pipeline, settings.input_format == "json")
    partitions = {t: len(partitions_of(conf, t)) for t in settings.input_topics}
    timeout = settings.startup_timeout
    kept = {t: retention_ms(conf, t, timeout) for t in ([to] if to else settings.input_topics)}
    group = f"{settings.group_id}.replay"
    transfer = Transfer(conf, group, f"{group}-replay", dlq, settings.startup_timeout)
    summary = Summary(dlq)
    run = f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{uuid.uuid4().hex[:8]}"
    try:
        starts, summary.ends = transfer.span()
        if lateness.windows and to is None:
            for topic, n in partitions.items():
                lateness.observe(
                    tails(conf, topic, list(range(n)), _TAIL, settings.startup_timeout)
                )
        for transaction, (records, positions) in enumerate(
            transfer.batches(starts, summary.ends, batch), start=1
        ):
            outgoing = _outgoing(records, partitions, to, run, summary, lateness)
            _require_kept(outgoing, kept)
            transfer.begin(outgoing)
            if fault is not None:
                fault.before_commit(transaction)
            transfer.commit(positions)
            summary.produced += len(outgoing)
        if wait > 0 and to is None and summary.produced:
            summary.waited = wait
            summary.failed = _failed_again(settings, transfer, summary.ends, run, wait)
    finally:
        transfer.close()
    grace = {} if to is not None else lateness.graces
    return summary.lines(lateness, grace)


def _require_kept(outgoing: list[Outgoing], kept: dict[str, int | None]) -> None:
    """Refuse (before its transaction) a batch with a record its topic's time retention would
    delete at once: the replay's position would move past a record the bridge never reads."""
    now = int(time.time() * 1000)
    for record in outgoing:
        retention = kept.get(record.topic)
        if retention is not None and record.timestamp < now - retention:
            h = dict(record.headers)
            where = f"{h[H_DLQ_TOPIC].decode()}[{h[H_DLQ_PARTITION].decode()}]@"
            raise ConfigError(
                f"retention.ms of topic {record.topic!r} is {retention}: the dead letter "
                f"{where}{h[H_DLQ_OFFSET].decode()} has timestamp {record.timestamp}, so its "
                f"replay would be deleted before the bridge reads it; raise the topic's "
                f"retention.ms and run dlq replay again (nothing from there on was written)"
            )


def _failed_again(
    settings: BridgeSettings, transfer: Transfer, ends: dict[int, int], run: str, wait: float
) -> int | None:
    """How many of ``run``'s records the bridge dead-lettered again, once its group committed
    past every one of them (None: not within ``wait`` seconds)."""
    conf, deadline = settings.client_config(), time.monotonic() + wait
    topics = {topic for topic, _ in transfer.written}
    while True:
        committed = {t: committed_offsets(conf, settings.group_id, t) for t in topics}
        if all(committed[t].get(p, -1) > o for (t, p), o in transfer.written.items()):
            break
        if time.monotonic() > deadline:
            return None
        time.sleep(0.5)
    _, now = transfer.span()
    letters = (r for records, _ in transfer.batches(ends, now, 1000) for r in records)
    return sum(1 for r in letters if r.header(H_RUN) == run.encode())


def _outgoing(
    records: list[KafkaRecord],
    partitions: dict[str, int],
    to: str | None,
    run: str,
    summary: Summary,
    lateness: Lateness,
) -> list[Outgoing]:
    outgoing = []
    for record in records:
        summary.read += 1
        summary.again += any(k == H_RUN for k, _ in record.headers)
        made = resend(record, partitions, to, run)
        if isinstance(made, str):
            summary.skipped[made] += 1
            continue
        outgoing.append(made)
        if to is None:
            lateness.judge(
                KafkaRecord(made.topic, made.partition, 0, made.key, made.value, (), made.timestamp)
            )
    return outgoing


def run_replay(args: argparse.Namespace, fault: Fault | None = None) -> int:
    """``dlq replay``: exit 0 after printing the summary."""
    if args.pipeline:
        raise ConfigError(
            "--pipeline: dlq replay no longer runs a pipeline of its own; it writes the dead "
            "letters back to their input topics, where the running bridge (deploy the fix "
            "there) processes them with its state (docs/operations.md)"
        )
    if args.config is not None and not args.config.exists():
        raise ConfigError(f"config file {args.config} does not exist")
    settings = load_settings(args.config)
    if args.batch < 1:
        raise ConfigError(f"--batch must be at least 1, got {args.batch}")
    if args.wait < 0:
        raise ConfigError(f"--wait must be 0 or more seconds, got {args.wait}")
    for line in replay(settings, args.topic, args.to, args.batch, fault, args.wait):
        print(line)
    sys.stdout.flush()
    return 0
