"""Where committed input positions live, behind one port (:class:`OffsetStore`).

Today: the source consumer group (:class:`GroupOffsets`), written inside the output
transaction with ``send_offsets_to_transaction`` and read with ``committed()``. A store for
offsets kept in the target cluster (cross-cluster exactly-once) implements the same port.
"""

from app.offsets.base import OffsetStore
from app.offsets.group import GroupOffsets

__all__ = ["GroupOffsets", "OffsetStore"]
