"""Avro values behind a Schema Registry (the Confluent wire format), decoded in the plan.

The bridge writes ``avro`` output as magic byte 0, a 4-byte big-endian schema ID and the Avro
body. The job reads it in three steps, all Spark expressions (no Python UDF):

1. the header is checked and split off; a value that is not in the wire format (too short,
   magic byte not 0) becomes a bad row with its offset;
2. the body is decoded with Spark's ``from_avro`` — one branch per writer schema ID — each
   writer schema resolved to **one reader schema**: the latest version of the topic's subject
   at job start (Avro schema resolution, so a record written with an older version gets the
   newer fields' defaults). One reader schema gives every branch the same Spark type, the
   table one set of columns, and keeps the plan and checkpoint the same across runs;
   decoding per ID without a reader schema would give each ID its own struct type, which one
   column cannot hold;
3. the decoded record becomes JSON text, so the declared fields, their types and the bad-row
   reasons are exactly those of a JSON topic (:mod:`spark_jobs.parse`).

Writer schemas are every version of the subject registered when the job starts (fetched once
per ID on the driver). A record whose ID was registered later, under another subject, or not
at all fails the query with one line naming the ID: restarting the job picks the new
version up, and since the batch never committed, nothing is lost or counted twice. A body
that does not decode with its writer schema is a bad row.

The registry comes from ``--registry-url`` or the spec's ``input.registry.url``, else from
what the bridge reads: ``$BRIDGE_SCHEMA_REGISTRY__URL``, then ``schema_registry.url`` of
``$BRIDGE_CONFIG_FILE`` (the chart's config file); basic auth only from
``$BRIDGE_SCHEMA_REGISTRY__BASIC_AUTH`` (the chart's Secret); the CA bundle from
``$BRIDGE_SCHEMA_REGISTRY__CA_LOCATION`` or the config file's ``schema_registry.ca_location``.
Messages show the URL without credentials.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from spark_jobs.errors import InfrastructureError, JobConfigError
from spark_jobs.security import CONFIG_FILE_ENV, bridge_config_section

URL_ENV = "BRIDGE_SCHEMA_REGISTRY__URL"
AUTH_ENV = "BRIDGE_SCHEMA_REGISTRY__BASIC_AUTH"
CA_ENV = "BRIDGE_SCHEMA_REGISTRY__CA_LOCATION"
DECODE_ERROR = "decode_error"  # the column :func:`decode_values` adds; parse.py reads it
_DECODED = "_eosbridge_decoded"  # see decode_values
NOT_WIRE_FORMAT = "not in the Confluent wire format (magic byte 0, 4-byte schema ID, body)"
_HTTP_CONFIG_ERRORS = frozenset({401, 403, 404})


def safe_url(url: str) -> str:
    """``url`` without any ``user:password@`` part (for messages and logs)."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit(parts._replace(netloc=netloc))


@dataclass(slots=True, frozen=True)
class RegistryInput:
    """The topic's values are Avro behind the registry at ``url`` (subject: ``<topic>-value``
    unless ``subject`` names one). Credentials never live here: see the module docstring."""

    url: str
    subject: str | None = None
    env: Mapping[str, str] = field(default_factory=dict, compare=False, hash=False, repr=False)

    def __post_init__(self) -> None:
        if not self.url.startswith(("http://", "https://")):
            raise JobConfigError(
                f"--registry-url {safe_url(self.url)!r} must start with http:// or https://"
            )
        if urlsplit(self.url).password is not None:
            raise JobConfigError(
                f"--registry-url {safe_url(self.url)}: put the credentials in {AUTH_ENV}, "
                "not in the URL"
            )

    def client_conf(self) -> dict[str, Any]:
        """confluent-kafka ``SchemaRegistryClient`` settings (credentials from the env, the
        CA also from the bridge's config file, as the chart mounts it)."""
        env = self.env or os.environ
        conf: dict[str, Any] = {"url": self.url, "timeout": 10, "max.retries": 0}
        if env.get(AUTH_ENV):
            conf["basic.auth.user.info"] = env[AUTH_ENV]
        ca = env.get(CA_ENV) or bridge_config_section(env, "schema_registry").get("ca_location")
        if ca:
            conf["ssl.ca.location"] = ca
        return conf

    def subjects(self, topics: list[str]) -> list[str]:
        return [self.subject] if self.subject else [f"{t}-value" for t in topics]


def registry_input(
    fmt: str, url: str | None, subject: str | None, env: Mapping[str, str] | None = None
) -> RegistryInput | None:
    """The :class:`RegistryInput` of ``--input-format``/``--registry-url``; None for JSON."""
    env = os.environ if env is None else env
    if fmt == "json":
        if url:
            raise JobConfigError("--registry-url is for --input-format avro")
        return None
    url = url or env.get(URL_ENV) or bridge_config_section(env, "schema_registry").get("url")
    if not url:
        raise JobConfigError(
            f"--input-format avro needs --registry-url (or {URL_ENV}, or schema_registry.url "
            f"in {CONFIG_FILE_ENV})"
        )
    return RegistryInput(url, subject, dict(env))


@dataclass(slots=True, frozen=True)
class AvroSchemas:
    """The reader schema (JSON text) and every known writer schema by schema ID."""

    reader: str
    writers: dict[int, str]


def fetch_schemas(registry: RegistryInput, topics: list[str]) -> AvroSchemas:
    """Every version of the topics' subjects; the reader is the first subject's latest.

    Raises:
        JobConfigError: a subject the registry does not know, refused credentials, a non-Avro
            or non-record schema (exit 2).
        InfrastructureError: the registry cannot be reached or fails (exit 3).
    """
    from confluent_kafka.schema_registry import SchemaRegistryClient, SchemaRegistryError

    client = SchemaRegistryClient(registry.client_conf())
    writers: dict[int, str] = {}
    readers: list[str] = []  # the first subject's versions, oldest first
    subjects = registry.subjects(topics)
    try:
        for subject in subjects:
            for version in sorted(_versions(client, registry, subject)):
                found = client.get_version(subject, version)
                _check_avro_record(subject, found.schema.schema_type, found.schema.schema_str)
                writers[int(found.schema_id or 0)] = str(found.schema.schema_str)
                if subject == subjects[0]:
                    readers.append(str(found.schema.schema_str))
    except SchemaRegistryError as exc:
        if exc.http_status_code in _HTTP_CONFIG_ERRORS:
            raise JobConfigError(
                f"schema registry {safe_url(registry.url)}: HTTP {exc.http_status_code} "
                f"({exc.error_message})"
            ) from None
        raise _unreachable(registry, exc) from None
    except (JobConfigError, InfrastructureError):
        raise
    except Exception as exc:  # connection refused, timeout, TLS: not the user's setting
        raise _unreachable(registry, exc) from None
    finally:
        client.close()
    if not readers:
        raise JobConfigError(f"subject {subjects[0]} has no versions")
    return AvroSchemas(readers[-1], writers)


def _versions(client: Any, registry: RegistryInput, subject: str) -> list[int]:
    from confluent_kafka.schema_registry import SchemaRegistryError

    try:
        return [int(v) for v in client.get_versions(subject)]
    except SchemaRegistryError as exc:
        if exc.http_status_code == 404:
            raise JobConfigError(
                f"schema registry {safe_url(registry.url)} has no subject {subject} (is the "
                "bridge writing avro output to this topic?)"
            ) from None
        raise


def _unreachable(registry: RegistryInput, exc: BaseException) -> InfrastructureError:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return InfrastructureError(f"schema registry {safe_url(registry.url)} unreachable: {text}")


def _check_avro_record(subject: str, schema_type: str | None, text: str | None) -> None:
    if (schema_type or "AVRO") != "AVRO" or text is None:
        raise JobConfigError(f"subject {subject} holds a {schema_type} schema, not Avro")
    doc = json.loads(text)
    if not isinstance(doc, dict) or doc.get("type") != "record":
        raise JobConfigError(f"subject {subject}: the job reads Avro records, not {text[:60]}")


def decode_values(raw: DataFrame, schemas: AvroSchemas) -> DataFrame:
    """``raw`` (Spark's Kafka columns) with ``value`` as the record's JSON text and
    ``decode_error`` saying why a value could not be decoded (NULL when it could, or when the
    value itself is NULL)."""
    from pyspark.sql.avro.functions import from_avro

    value = F.col("value")
    wire = (F.length(value) > 5) & (F.hex(value.substr(1, 1)) == F.lit("00"))
    schema_id = F.conv(F.hex(value.substr(2, 4)), 16, 10).cast("long")
    body = value.substr(F.lit(6), F.length(value) - 5)
    # PERMISSIVE turns a body that does not decode into a row of NULL fields, which a record
    # of nullable fields could also be: a field only the reader has, default true, tells them
    # apart (NULL exactly when decoding failed).
    reader = json.loads(schemas.reader)
    reader["fields"] = [*reader["fields"], {"name": _DECODED, "type": "boolean", "default": True}]
    options = {"mode": "PERMISSIVE", "avroSchema": json.dumps(reader)}
    decoded: Column = F.when(value.isNull() | ~wire, F.lit(None))
    for sid, writer in sorted(schemas.writers.items()):
        decoded = decoded.when(schema_id == sid, from_avro(body, writer, options))
    unknown = F.concat(
        F.lit("schema ID "),
        schema_id.cast("string"),
        F.lit(" is not a version of the input subject known at job start; restart the job"),
    )
    decoded = decoded.otherwise(F.raise_error(unknown))
    error = (
        F.when(value.isNull(), F.lit(None))
        .when(~wire, F.lit(NOT_WIRE_FORMAT))
        .when(
            F.col("_avro").getField(_DECODED).isNull(),
            F.concat(F.lit("does not decode with schema ID "), schema_id.cast("string")),
        )
    )
    record = F.to_json(F.col("_avro").dropFields(_DECODED))
    text = F.when(F.col(DECODE_ERROR).isNull(), record).otherwise(value.cast("string"))
    return (
        raw.withColumn("_avro", decoded)
        .withColumn(DECODE_ERROR, error)
        .withColumn("value", text)
        .drop("_avro")
    )
