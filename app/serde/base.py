"""The codec seam: how the bytes of one topic role become values and back.

A :class:`Codec` is chosen per topic role (input key, input value, output key, output value;
the dead-letter topic always keeps the input's raw bytes), as Kafka Streams chooses a ``Serde``
per source and sink and Quix Streams a serializer per ``Topic``. The loop, the sink, the fused
loop and the fused count all decode and encode through it; none of them names a format.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any, Protocol


class Role(Enum):
    """Where a codec is used; a registry format names its subject by it (key or value)."""

    INPUT_KEY = "input key"
    INPUT_VALUE = "input value"
    OUTPUT_KEY = "output key"
    OUTPUT_VALUE = "output value"

    @property
    def is_key(self) -> bool:
        return self in (Role.INPUT_KEY, Role.OUTPUT_KEY)


@dataclass(slots=True, frozen=True)
class Inline:
    """What the fused compiler may call by name in its generated loop instead of
    :meth:`Codec.decode` / :meth:`Codec.encode` (no topic argument, no error mapping: any
    exception sends the record to the general path, which calls the codec and isolates it).

    ``json``: the encoder writes NaN/inf as ``null`` (orjson), so the loop checks for it.
    ``per_topic``: ``dumps`` writes for the output topic only (a registry schema ID names the
    topic's subject), so a record routed elsewhere is encoded with :meth:`Codec.encode`.
    """

    loads: Callable[[bytes], Any]
    dumps: Callable[[Any], bytes]
    json: bool = False
    per_topic: bool = False


class Codec(Protocol):
    """Decode one role's bytes into a value and encode a value into bytes.

    ``decode`` raises :class:`app.errors.DeserializationError` (or a subclass) for a record it
    cannot read; ``encode`` raises :class:`app.errors.OutputNotEncodable` for a value it cannot
    write faithfully. Both messages say why, not where: the caller adds the topic, partition
    and offset. Any other exception (a registry that cannot be reached) is not the record's
    fault and must not be dead-lettered.
    """

    @property
    def name(self) -> str:
        """The format's setting value: ``json``, ``bytes``, ..."""

    @property
    def structured(self) -> bool:
        """Decodes to dicts (a pipeline's field expressions apply), not to bytes."""

    @property
    def inline(self) -> Inline | None:
        """Functions the fused compiler may inline, or None (it calls decode/encode)."""

    def decode(self, data: bytes | None, topic: str) -> Any: ...

    def encode(self, value: Any, topic: str) -> bytes | None: ...


@dataclass(slots=True, frozen=True)
class Formats:
    """The codec of each topic role, chosen once from the settings."""

    value_in: Codec
    value_out: Codec
    key_in: Codec
    key_out: Codec

    @property
    def keys_raw(self) -> bool:
        """Keys pass as the broker holds them (what a fused loop assumes of ``m.key()``)."""
        return self.key_in.name == "bytes" and self.key_out.name == "bytes"
