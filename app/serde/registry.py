"""Schema Registry formats: the pure rules they share, over the settings and error classes of
:mod:`app.serde.registry_settings` (re-exported here).

Records carry the Confluent wire format (magic byte 0, 4-byte big-endian schema ID, payload).
Everything past the header check is confluent-kafka's own: its ``SchemaRegistryClient`` and its
Avro, Protobuf and JSON Schema serializers (:mod:`app.serde.avro`, :mod:`app.serde.protobuf`,
:mod:`app.serde.json_schema`, on the shared base :mod:`app.serde.registry_codec`). Writer schemas
are fetched once per schema ID (the client caches them), never per record.

Errors, by class and HTTP status, never by message text::

    DeserializationError (app.errors)   one input record: dead letter
    ├── NotWireFormat                   no magic byte 0, or shorter than the 5-byte header
    ├── UnknownSchemaId                 the registry answers 404 for the record's schema ID
    └── RecordUndecodable               the payload does not decode with its schema
    OutputNotEncodable (app.errors)     an output value does not match the output schema
    RegistryUnavailable (BridgeError)   unreachable, timeout, HTTP 408/429/5xx: not the
                                        record's fault; retry within a deadline, then rewind
    RegistryConfigError (ConfigError)   refuse to start, one line naming the subject
    ├── SchemaIncompatible              HTTP 409: the schema breaks the subject's compatibility
    ├── SchemaNotRegistered             HTTP 404 on lookup (auto-registration off)
    ├── RegistryAccessDenied            HTTP 401/403: credentials
    └── RegistryCertificateRefused      the registry's certificate does not verify
"""

from __future__ import annotations

import base64
import json
import ssl
from collections.abc import Callable

from confluent_kafka.schema_registry import (
    Schema,
    SchemaRegistryClient,
    SchemaRegistryError,
    record_subject_name_strategy,
    topic_record_subject_name_strategy,
    topic_subject_name_strategy,
)
from confluent_kafka.schema_registry.common._httpx_compat import httpx
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2
from google.protobuf.message import DecodeError

from app.errors import BridgeError, ConfigError
from app.serde.registry_settings import (
    HEADER_SIZE,
    MAGIC_BYTE,
    NotWireFormat,
    RecordUndecodable,
    RegistryAccessDenied,
    RegistryCertificateRefused,
    RegistryConfigError,
    RegistrySettings,
    RegistryUnavailable,
    SchemaIncompatible,
    SchemaNotRegistered,
    SchemaSettings,
    SubjectStrategy,
    UnknownSchemaId,
    load_schema_text,
    parse_header,
)

__all__ = [  # the settings and errors live in app.serde.registry_settings (no client import)
    "HEADER_SIZE",
    "MAGIC_BYTE",
    "NotWireFormat",
    "RecordUndecodable",
    "RegistryAccessDenied",
    "RegistryCertificateRefused",
    "RegistryConfigError",
    "RegistrySettings",
    "RegistryUnavailable",
    "SchemaIncompatible",
    "SchemaNotRegistered",
    "SchemaSettings",
    "SubjectStrategy",
    "UnknownSchemaId",
    "fetch_schema",
    "is_registry_error",
    "load_schema_text",
    "message_full_name",
    "parse_header",
    "record_name",
    "registry_failure",
    "strategy_function",
    "subject_name",
]

_UNAVAILABLE = frozenset({408, 429, 500, 502, 503, 504})

_STRATEGIES = {
    SubjectStrategy.TOPIC: topic_subject_name_strategy,
    SubjectStrategy.RECORD: record_subject_name_strategy,
    SubjectStrategy.TOPIC_RECORD: topic_record_subject_name_strategy,
}


# ---- pure rules -----------------------------------------------------------------------------


def registry_failure(exc: Exception, registry: str, subject: str | None) -> BridgeError:
    """The bridge's error for a registry call that failed, by HTTP status.

    Args:
        exc: what the client raised (``SchemaRegistryError`` or an httpx transport error).
        registry: the registry URL, without credentials.
        subject: the subject the call was about, for the message.
    """
    about = f" for subject {subject!r}" if subject else ""
    if _caused_by(exc, ssl.SSLCertVerificationError):
        return RegistryCertificateRefused(
            f"schema registry {registry}: its TLS certificate does not verify{about}; set "
            f"ca_location to the CA that signed it ({exc})"
        )
    if not isinstance(exc, SchemaRegistryError):
        return RegistryUnavailable(f"schema registry {registry} unreachable{about}: {exc!r}")
    status, said = exc.http_status_code, exc.error_message
    if status in _UNAVAILABLE:
        return RegistryUnavailable(f"schema registry {registry} answered {status}{about}: {said}")
    if status in (401, 403):
        return RegistryAccessDenied(
            f"schema registry {registry} refused the credentials ({status}){about}: set "
            f"basic_auth or the TLS client certificate; it said: {said}"
        )
    if status == 409:
        return SchemaIncompatible(f"schema refused{about} by {registry} (409): {said}")
    if status == 404:
        return SchemaNotRegistered(f"no such schema{about} in {registry} (404): {said}")
    return RegistryConfigError(f"schema registry {registry} answered {status}{about}: {said}")


def _caused_by(exc: BaseException, kind: type[BaseException]) -> bool:
    """``exc`` or an exception in its cause chain is a ``kind``."""
    seen: BaseException | None = exc
    for _ in range(10):  # causes can loop through __context__
        if seen is None:
            return False
        if isinstance(seen, kind):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def is_registry_error(exc: BaseException) -> bool:
    """A failure of the registry call itself (HTTP error answer or transport)."""
    return isinstance(exc, SchemaRegistryError | httpx.TransportError)


def subject_name(
    strategy: SubjectStrategy, topic: str, field: MessageField, record_name: str | None
) -> str:
    """The subject a schema is registered under, by confluent-kafka's own strategies."""
    name = _STRATEGIES[strategy](SerializationContext(topic, field), record_name)
    if name is None:
        raise ConfigError(f"subject_strategy {strategy} needs a named schema (a record name)")
    return name


def strategy_function(strategy: SubjectStrategy) -> Callable[..., str | None]:
    """The library's subject name function for ``strategy``."""
    return _STRATEGIES[strategy]


def record_name(schema: Schema, indexes: list[int] | None = None) -> str | None:
    """The fully qualified record name of a registered schema (record subject strategies)."""
    text = schema.schema_str or ""
    kind = schema.schema_type or "AVRO"
    if kind == "PROTOBUF":
        return message_full_name(text, indexes or [0])
    try:
        parsed = json.loads(text)
    except ValueError:
        return None
    if not isinstance(parsed, dict):
        return None
    if kind == "JSON":
        title = parsed.get("title")
        return str(title) if title else None
    name, namespace = parsed.get("name"), parsed.get("namespace")
    if not name:
        return None
    return str(name) if "." in str(name) or not namespace else f"{namespace}.{name}"


def message_full_name(schema_str: str, indexes: list[int]) -> str | None:
    """The full name of the message that ``indexes`` point at in a registered Protobuf schema
    (base64 ``FileDescriptorProto``, as confluent-kafka registers it); None if unreadable."""
    try:
        proto = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(schema_str))
    except (ValueError, DecodeError):
        return None
    names: list[str] = [proto.package] if proto.package else []
    messages = proto.message_type
    for index in indexes:
        if not 0 <= index < len(messages):
            return None
        names.append(messages[index].name)
        messages = messages[index].nested_type
    return ".".join(names)


def fetch_schema(
    client: SchemaRegistryClient, schema_id: int, url: str, where: str, fmt: str | None = None
) -> Schema:
    """The schema of ``schema_id`` from the registry at ``url`` (``where`` starts the 404 line).

    Raises:
        UnknownSchemaId: the registry answers 404 (the record's fault: a dead letter).
        BridgeError: the registry cannot be reached or refuses (:func:`registry_failure`).
    """
    try:
        return client.get_schema(schema_id, None, fmt)
    except Exception as exc:
        if isinstance(exc, SchemaRegistryError) and exc.http_status_code == 404:
            raise UnknownSchemaId(f"{where}: schema ID {schema_id} is unknown to {url}") from exc
        if is_registry_error(exc):
            raise registry_failure(exc, url, None) from exc
        raise
