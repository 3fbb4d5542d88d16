"""Schema Registry formats: settings, error classes and the pure rules they share.

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
from enum import StrEnum
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

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
from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

from app.errors import BridgeError, ConfigError, DeserializationError

MAGIC_BYTE = 0
HEADER_SIZE = 5
_UNAVAILABLE = frozenset({408, 429, 500, 502, 503, 504})


# ---- errors ---------------------------------------------------------------------------------


class NotWireFormat(DeserializationError):
    """The record is not in the Confluent wire format (wrong magic byte, truncated)."""


class UnknownSchemaId(DeserializationError):
    """The registry has no schema with the record's schema ID (HTTP 404)."""


class RecordUndecodable(DeserializationError):
    """The payload does not decode with the schema its header names."""


class RegistryUnavailable(BridgeError):
    """The registry is unreachable or answers 408/429/5xx: retriable, never a record's fault."""


class RegistryConfigError(ConfigError):
    """The registry refuses what the settings ask for; the message names the subject."""


class SchemaIncompatible(RegistryConfigError):
    """Auto-registration refused with HTTP 409: incompatible with the subject's versions."""


class SchemaNotRegistered(RegistryConfigError):
    """The schema (or any version) is not registered under the subject (HTTP 404)."""


class RegistryAccessDenied(RegistryConfigError):
    """HTTP 401/403: wrong or missing registry credentials."""


class RegistryCertificateRefused(RegistryConfigError):
    """The registry's TLS certificate does not verify against ``ca_location``."""


# ---- settings -------------------------------------------------------------------------------


class SubjectStrategy(StrEnum):
    """How a subject is named: ``<topic>-key|value``, ``<record name>``, ``<topic>-<record>``."""

    TOPIC = "topic"
    RECORD = "record"
    TOPIC_RECORD = "topic_record"


_STRATEGIES = {
    SubjectStrategy.TOPIC: topic_subject_name_strategy,
    SubjectStrategy.RECORD: record_subject_name_strategy,
    SubjectStrategy.TOPIC_RECORD: topic_record_subject_name_strategy,
}


class RegistrySettings(BaseModel):
    """How to reach one Schema Registry (Confluent API; Apicurio's ``/apis/ccompat/v7``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    url: str = Field(description="registry URL; several, comma-separated, are tried in turn")
    basic_auth: SecretStr | None = Field(None, description="'user:password' (never logged)")
    ca_location: Path | None = Field(None, description="CA bundle that signed the registry")
    cert_location: Path | None = Field(None, description="client certificate (mTLS), PEM")
    key_location: Path | None = Field(None, description="client key (mTLS), PEM")
    key_password: SecretStr | None = Field(None, description="client key password")
    timeout: float = Field(10.0, gt=0, description="seconds per HTTP request")
    # The bridge retries a RegistryUnavailable within its own deadline; the client's own
    # retries (with their sleeps) would only hide the outage inside one call.
    max_retries: int = Field(0, ge=0, description="client retries per request")

    @field_validator("url")
    @classmethod
    def _http_urls(cls, url: str) -> str:
        for one in url.split(","):
            if not one.strip().startswith(("http://", "https://")):
                raise ValueError(f"registry url {one.strip()!r} must start with http(s)://")
        return url

    def __repr_args__(self) -> Any:
        # A URL may carry user:password; repr and str show it without.
        for name, value in super().__repr_args__():
            yield name, (self.safe_url if name == "url" else value)

    @property
    def safe_url(self) -> str:
        """The URL(s) without any user:password, for messages and logs."""
        return ",".join(_without_userinfo(one.strip()) for one in self.url.split(","))

    def client_conf(self) -> dict[str, Any]:
        """The ``SchemaRegistryClient`` configuration."""
        conf: dict[str, Any] = {
            "url": self.url, "timeout": self.timeout, "max.retries": self.max_retries,
        }  # fmt: skip
        if self.basic_auth is not None:
            conf["basic.auth.user.info"] = self.basic_auth.get_secret_value()
        optional = {
            "ssl.ca.location": self.ca_location,
            "ssl.certificate.location": self.cert_location,
            "ssl.key.location": self.key_location,
            "ssl.key.password": self.key_password and self.key_password.get_secret_value(),
        }
        conf.update({k: str(v) for k, v in optional.items() if v is not None})
        return conf

    def client(self) -> SchemaRegistryClient:
        """A new client for this registry.

        Raises:
            RegistryConfigError: a TLS file cannot be read or the key password is wrong.
        """
        try:
            return SchemaRegistryClient(self.client_conf())
        except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
            raise RegistryConfigError(
                f"schema registry {self.safe_url}: ca_location, cert_location, key_location or "
                f"key_password is not usable: {exc}"
            ) from exc


class SchemaSettings(BaseModel):
    """What one topic role (input/output key/value) does with its registry format."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    subject_strategy: SubjectStrategy = SubjectStrategy.TOPIC
    auto_register: bool = Field(True, description="output: register the schema if absent")
    use_latest_version: bool = Field(
        False, description="output: write with the subject's latest version, not schema_file"
    )
    normalize: bool = Field(False, description="normalize schemas before register/lookup")
    schema_file: Path | None = Field(
        None, description="output: the schema written; input: the reader schema (evolution)"
    )
    message_name: str | None = Field(None, description="protobuf: the message of schema_file")


def load_schema_text(settings: SchemaSettings) -> str | None:
    """The text of ``schema_file``, or None; a missing file is a ConfigError naming it."""
    if settings.schema_file is None:
        return None
    try:
        return settings.schema_file.read_text()
    except OSError as exc:
        raise ConfigError(f"schema_file {settings.schema_file}: {exc.strerror}") from exc


# ---- pure rules -----------------------------------------------------------------------------


def parse_header(data: bytes) -> int:
    """The schema ID of a record in the Confluent wire format.

    Raises:
        NotWireFormat: shorter than the 5-byte header, or a magic byte other than 0.
    """
    if len(data) < HEADER_SIZE:
        raise NotWireFormat(f"{len(data)} bytes: shorter than the {HEADER_SIZE}-byte header")
    if data[0] != MAGIC_BYTE:
        raise NotWireFormat(f"magic byte {data[0]}, not {MAGIC_BYTE}: not written by a registry")
    return int.from_bytes(data[1:HEADER_SIZE], "big")


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


def _without_userinfo(url: str) -> str:
    parts = urlsplit(url)
    netloc = parts.hostname or ""
    if parts.port:
        netloc = f"{netloc}:{parts.port}"
    return urlunsplit(parts._replace(netloc=netloc))


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
