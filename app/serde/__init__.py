"""Wire formats per topic role (:mod:`app.serde.base`): :func:`codec_for` picks one by name.

A registry format's codec (and with it the Schema Registry client, fastavro, protobuf, authlib)
is imported when one is built, never by importing this package: a JSON pipeline and the CLI load
none of it (issue 57; ``tests/unit/serde/test_lazy_imports.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from app.errors import BridgeError, ConfigError
from app.serde.base import Codec, Formats, Inline, Role
from app.serde.json import JsonCodec
from app.serde.raw import BytesCodec
from app.serde.registry_settings import RegistrySettings, SchemaSettings

if TYPE_CHECKING:
    from confluent_kafka.schema_registry import SchemaRegistryClient

    from app.serde.registry_codec import RegistryCodec

__all__ = [
    "FORMATS",
    "FORMAT_SETTINGS",
    "REGISTRY_FORMATS",
    "BytesCodec",
    "Codec",
    "Formats",
    "Inline",
    "JsonCodec",
    "Role",
    "check_formats",
    "codec_for",
    "formats",
]

FORMATS = ("json", "bytes", "avro", "protobuf", "json_schema")
REGISTRY_FORMATS = ("avro", "protobuf", "json_schema")
FORMAT_SETTINGS = (
    "input_format",
    "output_format",
    "input_key_format",
    "output_key_format",
)  # formats()


def check_formats(
    names: Mapping[str, str],
    schemas: Mapping[str, SchemaSettings],
    *,
    registry: bool,
    target: bool = False,
) -> None:
    """A registry format needs a registry; an output one needs a schema to write; a target
    registry needs the source one (``schema_registry``) its IDs are translated from.

    Args:
        names: format setting (``input_format``, ...) → its value.
        schemas: format setting → the value of its role's schema setting (``input_schema``...).
        registry, target: ``schema_registry`` / ``target_registry`` are set.

    Raises:
        ValueError: one line naming the setting and its env var (a settings validator's).
    """
    if target and not registry:
        raise ValueError(
            "target_registry needs schema_registry, the registry the input's schema IDs "
            "belong to (BRIDGE_SCHEMA_REGISTRY__URL)"
        )
    for name, fmt in names.items():
        where = name.replace("_format", "_schema")
        if fmt not in REGISTRY_FORMATS:
            continue
        if not registry:
            raise ValueError(
                f"{name}={fmt} needs a Schema Registry: set schema_registry.url "
                f"(BRIDGE_SCHEMA_REGISTRY__URL)"
            )
        schema = schemas[name]
        if name.startswith("output") and not (schema.schema_file or schema.use_latest_version):
            raise ValueError(
                f"{name}={fmt} needs the schema it writes: set {where}.schema_file "
                f"(BRIDGE_{where.upper()}__SCHEMA_FILE) or {where}.use_latest_version"
            )


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
    if fmt not in REGISTRY_FORMATS:
        raise ValueError(f"unknown format {fmt!r}; one of {', '.join(FORMATS)}")
    if registry is None:
        raise ConfigError(f"the {role.value} format {fmt} needs schema_registry.url")
    schema = schema or SchemaSettings.model_validate({})
    codec = _registry_codec(fmt)
    try:
        return codec(registry, schema, role, client)
    except BridgeError:
        raise
    except Exception as exc:  # the libraries' schema parse errors share no class
        setting = f"{role.name.lower()}_schema.schema_file".replace("_value", "")
        raise ConfigError(
            f"{setting} ({schema.schema_file}) is not a usable {fmt} schema: {exc!r}"
        ) from exc


def _registry_codec(fmt: str) -> type[RegistryCodec]:
    """The codec class of a registry format, imported now (the libraries load with it)."""
    if fmt == "avro":
        from app.serde.avro import AvroCodec

        return AvroCodec
    if fmt == "protobuf":
        from app.serde.protobuf import ProtobufCodec

        return ProtobufCodec
    from app.serde.json_schema import JsonSchemaCodec

    return JsonSchemaCodec


def formats(
    value_in: str = "json",
    value_out: str = "json",
    key_in: str = "bytes",
    key_out: str = "bytes",
    *,
    registry: RegistrySettings | None = None,
    schemas: Mapping[Role, SchemaSettings] | None = None,
    client: SchemaRegistryClient | None = None,
    target: RegistrySettings | None = None,
    target_client: SchemaRegistryClient | None = None,
    translate: bool = False,
) -> Formats:
    """The codecs of the four roles by format name (today's defaults when none is given).

    The input roles use ``registry``; the output roles use ``target`` when given (a bridge
    between two registries), else ``registry``; each registry's formats share one client
    (made when none is given). ``translate``: a ``bytes`` output value gets the target's
    schema ID for the input's (:class:`TranslatingCodec`); otherwise bytes pass untouched.
    """
    names = {
        Role.INPUT_VALUE: value_in,
        Role.OUTPUT_VALUE: value_out,
        Role.INPUT_KEY: key_in,
        Role.OUTPUT_KEY: key_out,
    }
    wanted = {fmt for fmt in names.values() if fmt in REGISTRY_FORMATS}
    if registry is not None and client is None and wanted:
        client = registry.client()
    if target is not None and target_client is None and {value_out, key_out} & wanted:
        target_client = target.client()
    schemas = schemas or {}
    built: dict[Role, Codec] = {}
    for role, fmt in names.items():
        out = target is not None and role in (Role.OUTPUT_VALUE, Role.OUTPUT_KEY)
        reg, cli = (target, target_client) if out else (registry, client)
        built[role] = codec_for(fmt, role, reg, schemas.get(role), cli)
    if translate and value_out == "bytes" and registry is not None and target is not None:
        from app.serde.translate import SchemaTranslator, TranslatingCodec

        translator = SchemaTranslator(
            registry, target, schemas.get(Role.OUTPUT_VALUE) or SchemaSettings.model_validate({})
        )
        built[Role.OUTPUT_VALUE] = TranslatingCodec(built[Role.OUTPUT_VALUE], translator)
    return Formats(
        built[Role.INPUT_VALUE],
        built[Role.OUTPUT_VALUE],
        built[Role.INPUT_KEY],
        built[Role.OUTPUT_KEY],
    )
