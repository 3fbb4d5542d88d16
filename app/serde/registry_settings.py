"""Schema Registry settings, error classes and the wire header: what the settings tree and the
rooms above need without loading a registry client (:mod:`app.serde.registry` has the rest).

Importing this module loads no part of ``confluent_kafka.schema_registry``, fastavro, protobuf or
authlib: a JSON pipeline's start never pays for them (issue 57); :meth:`RegistrySettings.client`
imports the client when a registry format is built.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

from app.errors import BridgeError, ConfigError, DeserializationError

if TYPE_CHECKING:
    from confluent_kafka.schema_registry import SchemaRegistryClient

MAGIC_BYTE = 0
HEADER_SIZE = 5


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
            "url": self.url,
            "timeout": self.timeout,
            "max.retries": self.max_retries,
        }
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
            from confluent_kafka.schema_registry import SchemaRegistryClient  # lazy: issue 57

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


# ---- the wire header ----------------------------------------------------------------------


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


def _without_userinfo(url: str) -> str:
    parts = urlsplit(url)
    netloc = parts.hostname or ""
    if parts.port:
        netloc = f"{netloc}:{parts.port}"
    return urlunsplit(parts._replace(netloc=netloc))
