"""A batch between the pipeline and the output: the fused loop's run (its produce calls made
or kept for later), the general path's rows and failures, and the grouping by partition."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaException

from app.engine.atomic import Undo
from app.kafka.ports import Message
from app.pipeline.fusion import FusedBatch
from app.pipeline.record import Failure, Row
from app.sink.output import Output


@dataclass(slots=True)
class Transformed:
    """A batch after the pipeline, before the output: ``fused`` records handled by the fused
    loop whose produce calls were kept in ``calls`` (not counted yet), then ``records`` more
    as ``rows`` and ``failures`` (with ``undo``, produced all or none)."""

    fused: int
    calls: list[tuple[Any, ...]] | None
    records: int = 0
    rows: list[Row] | None = None  # None: the general path did not run
    failures: list[Failure] = field(default_factory=list)
    undo: Undo | None = None  # a stateful pipeline's batch (app.engine.atomic)


def run_fused(
    output: Output,
    fused: FusedBatch,
    messages: list[Message],
    calls: list[tuple[Any, ...]] | None = None,
) -> int:
    """Run a fused pipeline with the one writer's produce hook, to the output topic of the
    messages' input topic (one, see :func:`by_partition`) unless it routes; returns how many
    messages it handled (the rest take the general path). With ``calls``, each produce call's
    arguments are appended there instead (see :func:`replay`).

    Raises:
        CheckpointAborted: the producer refused a record.
    """
    source = messages[0].topic() if messages else None
    writer, topic = output.collector, output.default_topic(source)
    produce, room = writer.hooks()
    if calls is not None:
        produce = _keep(calls)
    try:
        done, produced = fused(messages, produce, room, topic, output.keep_partition)
    except KafkaException as exc:
        raise writer.refusal(topic, exc) from exc
    if calls is None:
        writer.produced(produced)
    return done


def _keep(calls: list[tuple[Any, ...]]) -> Any:
    def keep(*args: Any) -> None:
        calls.append(args)

    return keep


def replay(output: Output, calls: list[tuple[Any, ...]]) -> None:
    """Make the produce calls a fused loop kept (positional, as ``Producer.produce`` takes
    them: topic, value, key, partition, callback, on_delivery, timestamp[, headers])."""
    writer = output.collector
    produce, room = writer.hooks()
    for args in calls:
        try:
            produce(*args)
        except BufferError:
            room(args[0], args[1], args[2], args[7] if len(args) > 7 else None, args[3], args[6])
        except KafkaException as exc:
            raise writer.refusal(args[0], exc) from exc
    writer.produced(len(calls))


def by_partition(messages: list[Message]) -> dict[tuple[str, int], list[Message]]:
    """``messages`` grouped by input partition, each group in consumed order."""
    groups: dict[tuple[str, int], list[Message]] = {}
    for m in messages:
        partition = m.partition()
        where = (m.topic() or "", partition if partition is not None else -1)
        groups.setdefault(where, []).append(m)
    return groups
