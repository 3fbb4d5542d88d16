"""The tools' value formats: ``--value-format`` (``produce``, ``tail``), ``--input-format`` and
``--output-format`` (``verify``), and the Schema Registry they need (``--registry URL`` or
``BRIDGE_SCHEMA_REGISTRY__URL``; basic auth only from ``BRIDGE_SCHEMA_REGISTRY__BASIC_AUTH``).

The codecs are the bridge's own (:func:`app.serde.codec_for`), so a tool reads and writes
exactly what the bridge does.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterable
from contextlib import suppress
from dataclasses import replace
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from app.errors import BridgeError, ConfigError, DeserializationError
from app.kafka.topics import KafkaRecord
from app.serde import FORMATS, REGISTRY_FORMATS, Codec, Role, codec_for, json
from app.serde.registry_settings import (
    HEADER_SIZE,
    MAGIC_BYTE,
    RegistrySettings,
    SchemaSettings,
)

REGISTRY_ENV = "BRIDGE_SCHEMA_REGISTRY__URL"
AUTH_ENV = "BRIDGE_SCHEMA_REGISTRY__BASIC_AUTH"


def add_registry_args(parser: argparse.ArgumentParser, *flags: str, schema: bool = False) -> None:
    """``flags`` (each a format choice, default ``json``), ``--registry`` and, for a writer,
    ``--schema`` / ``--message-name``."""
    group = parser.add_argument_group("formats")
    for flag in flags:
        group.add_argument(
            flag,
            choices=FORMATS,
            default="json",
            help="json (default), bytes, or a Schema Registry format",
        )
    group.add_argument("--registry", metavar="URL", help=f"Schema Registry URL (or {REGISTRY_ENV})")
    if schema:
        group.add_argument(
            "--schema", type=Path, metavar="FILE", help="the schema written (.avsc, .proto, JSON)"
        )
        group.add_argument("--message-name", help="protobuf: the message of --schema")


def codec(args: argparse.Namespace, flag: str, role: Role) -> Codec:
    """The codec ``flag`` (e.g. ``--value-format``) names for ``role``.

    Raises:
        ConfigError: a registry format without a registry URL, or a writer without --schema.
    """
    fmt = getattr(args, flag.removeprefix("--").replace("-", "_"))
    if fmt not in REGISTRY_FORMATS:
        return codec_for(fmt, role)
    url = args.registry or os.environ.get(REGISTRY_ENV)
    if not url:
        raise ConfigError(
            f"{flag} {fmt} needs the Schema Registry: --registry URL ({REGISTRY_ENV})"
        )
    schema_file = getattr(args, "schema", None)
    if role is Role.OUTPUT_VALUE and schema_file is None:
        raise ConfigError(f"{flag} {fmt} needs the schema it writes: --schema FILE")
    try:
        registry = RegistrySettings.model_validate(
            {"url": url, "basic_auth": os.environ.get(AUTH_ENV)}
        )
        schema = SchemaSettings.model_validate(
            {"schema_file": schema_file, "message_name": getattr(args, "message_name", None)}
        )
    except ValidationError as exc:
        raise ConfigError(f"--registry: {exc.errors()[0]['msg']}") from None
    return codec_for(fmt, role, registry, schema)


def framing_hint(args: argparse.Namespace, data: bytes | None, topic: str) -> str | None:
    """For a value read as JSON: if it carries Schema Registry framing (magic byte 0, then a
    4-byte schema ID; JSON text never starts with byte 0), the line saying which
    ``--value-format`` to add; the registry (``--registry`` or the env), if there is one, is
    asked which format the schema ID is."""
    if args.value_format != "json" or not data or len(data) <= HEADER_SIZE:
        return None
    if data[0] != MAGIC_BYTE:
        return None
    schema_id = int.from_bytes(data[1:HEADER_SIZE], "big")
    fmt = _registry_format(args.registry or os.environ.get(REGISTRY_ENV), schema_id)
    said = f"{topic!r}: its values carry Schema Registry framing (schema ID {schema_id}"
    if fmt is None:
        return f"{said}): add --value-format avro, protobuf or json_schema and --registry URL"
    flag = "" if args.registry or os.environ.get(REGISTRY_ENV) else " --registry URL"
    return f"{said}, {fmt}): add --value-format {fmt}{flag}"


def _registry_format(url: str | None, schema_id: int) -> str | None:
    """The format of ``schema_id`` as the registry at ``url`` says, or None (no registry, or
    it cannot say: the hint then lists the three)."""
    if not url:
        return None
    try:
        registry = RegistrySettings.model_validate(
            {"url": url, "basic_auth": os.environ.get(AUTH_ENV), "timeout": 5.0}
        )
        kind = registry.client().get_schema(schema_id).schema_type or "AVRO"
    except Exception:  # a hint only: any failure falls back to naming all three formats
        return None
    return {"AVRO": "avro", "PROTOBUF": "protobuf", "JSON": "json_schema"}.get(kind)


def decode(codec: Codec, data: bytes | None, topic: str) -> Any:
    """``codec.decode`` with a registry that cannot be reached said in one line (exit 2)."""
    try:
        return codec.decode(data, topic)
    except (DeserializationError, ConfigError):
        raise
    except BridgeError as exc:  # RegistryUnavailable
        raise ConfigError(str(exc)) from None


def as_json(records: Iterable[KafkaRecord], codec: Codec) -> list[KafkaRecord]:
    """``records`` with each registry-encoded value as JSON text (for the JSON-reading audit);
    a value that does not decode stays as it is (it then has no id: reported, not fatal)."""
    if codec.name not in REGISTRY_FORMATS:
        return list(records)
    converted = []
    for record in records:
        value = record.value
        with suppress(DeserializationError):
            value = json.dumps(decode(codec, record.value, record.topic), default=str)
        converted.append(replace(record, value=value))
    return converted
