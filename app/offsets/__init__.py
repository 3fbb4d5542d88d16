"""Where committed input positions live, behind one port (:class:`OffsetStore`).

The source consumer group (:class:`GroupOffsets`), written inside the output transaction with
``send_offsets_to_transaction`` and read with ``committed()`` (one cluster); or a compacted
topic in the target cluster (:class:`TargetOffsets`), written as records inside the output
transaction and read read_committed to the end (two clusters, docs/cross-cluster.md).
"""

from app.offsets.base import OffsetStore
from app.offsets.group import GroupOffsets
from app.offsets.target import TargetOffsets

__all__ = ["GroupOffsets", "OffsetStore", "TargetOffsets"]
