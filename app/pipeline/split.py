"""Where a pipeline is cut for regrouping (Kafka Streams' sub-topologies).

A stateful step keeps state per partition, so it must see every record of a state key on
one partition. When a step before it changes the key (``key_by``, a Python step with
``target="key"``), or a ``dedupe`` keeps state by a field rather than by the record key, the
pipeline is cut there: the *head* (the steps up to and including the re-key) runs on the input
records and writes its results to the internal topic ``<group>-<step>-repartition`` keyed by
the state key; the *tail* (the stateful step and what follows) runs on that topic's records.
``repartition=False`` on the step says the input is already partitioned that way.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from app.errors import ConfigError
from app.pipeline.stateful.keyed import Dedupe
from app.pipeline.stateful.kit import Extractor, extractor
from app.pipeline.steps import Step

REPARTITION_SUFFIX = "-repartition"


@dataclass(slots=True, frozen=True)
class Regroup:
    """A pipeline cut in two around its repartition topic.

    Attributes:
        head: the steps run on the input records (up to and including the re-key).
        tail: the steps run on the repartition topic's records.
        step: the name of the step the cut is named after.
        topic: the repartition topic, ``<group>-<step>-repartition``.
        by: the state key when it is not the record key (``dedupe`` by a field), else None.
        partitions: the topic's partition count (None: the input topics' largest).
    """

    head: list[Step]
    tail: list[Step]
    step: str
    topic: str
    by: Extractor | None = None
    partitions: int | None = None


def repartition_topic_name(group_id: str, step: str) -> str:
    """``<group>-<step>-repartition``; a spec step's name (``<file> steps[2].key_by``) is
    written ``key_by-2``, other characters a topic name cannot hold become ``_``."""
    spec = re.search(r"steps\[(\d+)\]\.(\w+)$", step)
    name = f"{spec.group(2)}-{spec.group(1)}" if spec else step
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_") or "step"
    return f"{group_id}-{name}{REPARTITION_SUFFIX}"


def split(steps: Sequence[Step], group_id: str) -> Regroup | None:
    """The cut of ``steps``, or None when the stateful steps see records by their key
    already (no stateful step, no re-key before the first one, or ``repartition=False``)."""
    first = next((i for i, s in enumerate(steps) if s.stateful), None)
    if first is None or not getattr(steps[first], "repartition", True):
        return None
    rekeys = [i for i in range(first) if getattr(steps[i], "target", None) == "key"]
    if rekeys:
        cut = rekeys[-1]
        if not getattr(steps[cut], "repartition", True):
            return None
        name = steps[cut].name
        topic, n = repartition_topic_name(group_id, name), _partitions(steps[cut])
        return Regroup(list(steps[: cut + 1]), list(steps[cut + 1 :]), name, topic, None, n)
    stateful = steps[first]
    if isinstance(stateful, Dedupe) and stateful.by is not None:
        name = stateful.name
        topic, by = repartition_topic_name(group_id, name), extractor(stateful.by)
        return Regroup(
            list(steps[:first]), list(steps[first:]), name, topic, by, _partitions(stateful)
        )
    return None


def _partitions(step: Step) -> int | None:
    """The step's ``partitions`` option, checked: a positive integer or None."""
    n = getattr(step, "partitions", None)
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
        raise ConfigError(f"pipeline step {step.name!r}: partitions must be a positive integer")
    return n if isinstance(n, int) else None
