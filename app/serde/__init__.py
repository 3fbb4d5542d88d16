"""Wire formats per topic role (:mod:`app.serde.base`): :func:`codec_for` picks one by name."""

from __future__ import annotations

from collections.abc import Mapping

from confluent_kafka.schema_registry import SchemaRegistryClient

from app.errors import BridgeError, ConfigError
from app.serde.avro import AvroCodec
from app.serde.base import Codec, Formats, Inline, Role
from app.serde.json import JsonCodec
from app.serde.json_schema import JsonSchemaCodec
from app.serde.protobuf import ProtobufCodec
from app.serde.raw import BytesCodec
from app.serde.registry import RegistrySettings, SchemaSettings
from app.serde.registry_codec import RegistryCodec

__all__ = [
    "FORMATS",
    "REGISTRY_FORMATS",
    "BytesCodec",
    "Codec",
    "Formats",
    "Inline",
    "JsonCodec",
    "RegistryCodec",
    "Role",
    "codec_for",
    "formats",
]

FORMATS = ("json", "bytes", "avro", "protobuf", "json_schema")
_REGISTRY_CODECS: dict[str, type[RegistryCodec]] = {
    "avro": AvroCodec,
    "protobuf": ProtobufCodec,
    "json_schema": JsonSchemaCodec,
}
REGISTRY_FORMATS = tuple(_REGISTRY_CODECS)


def codec_for(
    fmt: str,
    role: Role,
    registry: RegistrySettings | None = None,
    schema: SchemaSettings | None = None,
    client: SchemaRegistryClient | None = None,
) -> Codec:
    """The codec of format ``fmt`` for ``role``.

    Args:
        fmt: a format name (the settings' Literal types allow no other).
        role: the topic role the codec serves.
        registry: how to reach the Schema Registry (registry formats only).
        schema: the role's schema settings (default: topic strategy, no schema file).
        client: a registry client to share between roles (made from ``registry`` if None).

    Raises:
        ConfigError: a registry format without ``registry``, or an unusable schema file.
    """
    if fmt == "json":
        return JsonCodec()
    if fmt == "bytes":
        return BytesCodec(lenient=role.is_key)
    codec = _REGISTRY_CODECS.get(fmt)
    if codec is None:
        raise ValueError(f"unknown format {fmt!r}; one of {', '.join(FORMATS)}")
    if registry is None:
        raise ConfigError(f"the {role.value} format {fmt} needs schema_registry.url")
    schema = schema or SchemaSettings.model_validate({})
    try:
        return codec(registry, schema, role, client)
    except BridgeError:
        raise
    except Exception as exc:  # the libraries' schema parse errors share no class
        setting = f"{role.name.lower()}_schema.schema_file".replace("_value", "")
        raise ConfigError(
            f"{setting} ({schema.schema_file}) is not a usable {fmt} schema: {exc!r}"
        ) from exc


def formats(
    value_in: str = "json",
    value_out: str = "json",
    key_in: str = "bytes",
    key_out: str = "bytes",
    *,
    registry: RegistrySettings | None = None,
    schemas: Mapping[Role, SchemaSettings] | None = None,
    client: SchemaRegistryClient | None = None,
) -> Formats:
    """The codecs of the four roles by format name (today's defaults when none is given);
    the registry formats share ``client`` (one is made when none is given)."""
    names = {
        Role.INPUT_VALUE: value_in, Role.OUTPUT_VALUE: value_out,
        Role.INPUT_KEY: key_in, Role.OUTPUT_KEY: key_out,
    }  # fmt: skip
    if registry is not None and client is None and set(names.values()) & set(REGISTRY_FORMATS):
        client = registry.client()
    schemas = schemas or {}
    built = {
        role: codec_for(fmt, role, registry, schemas.get(role), client)
        for role, fmt in names.items()
    }
    return Formats(
        built[Role.INPUT_VALUE],
        built[Role.OUTPUT_VALUE],
        built[Role.INPUT_KEY],
        built[Role.OUTPUT_KEY],
    )
