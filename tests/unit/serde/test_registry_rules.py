"""Pure rules of the registry codecs: the wire header, error classes by HTTP status, subject
names, settings that never show a secret."""

from __future__ import annotations

import base64
import json
import ssl
from pathlib import Path

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryError
from confluent_kafka.schema_registry.common._httpx_compat import httpx
from confluent_kafka.serialization import MessageField
from google.protobuf import descriptor_pb2

from app.errors import ConfigError, DeserializationError, RecordError
from app.serde.protobuf import compile_proto
from app.serde.registry import (
    NotWireFormat,
    RecordUndecodable,
    RegistryAccessDenied,
    RegistryCertificateRefused,
    RegistryConfigError,
    RegistrySettings,
    RegistryUnavailable,
    SchemaIncompatible,
    SchemaNotRegistered,
    SubjectStrategy,
    UnknownSchemaId,
    message_full_name,
    parse_header,
    record_name,
    registry_failure,
    subject_name,
)

URL = "http://127.0.0.1:1/apis/ccompat/v7"


@pytest.mark.parametrize(
    ("data", "schema_id"),
    [(b"\x00\x00\x00\x00\x07payload", 7), (b"\x00\x00\x01\x00\x00", 65536),
     (b"\x00\xff\xff\xff\xff\x02", 2**32 - 1)],
)  # fmt: skip
def test_the_header_names_the_schema_id(data: bytes, schema_id: int) -> None:
    assert parse_header(data) == schema_id


@pytest.mark.parametrize(
    "data",
    [b"", b"\x00", b"\x00\x00\x00\x07", b"\x01\x00\x00\x00\x07abc", b'{"id": 1}', b"plain text"],
)
def test_anything_else_is_not_the_wire_format(data: bytes) -> None:
    with pytest.raises(NotWireFormat):
        parse_header(data)


def test_record_errors_and_registry_errors_are_different_branches() -> None:
    for record_fault in (NotWireFormat, UnknownSchemaId, RecordUndecodable):
        assert issubclass(record_fault, DeserializationError)
    assert not issubclass(RegistryUnavailable, RecordError | ConfigError)
    for refusal in (SchemaIncompatible, SchemaNotRegistered, RegistryAccessDenied):
        assert issubclass(refusal, ConfigError) and not issubclass(refusal, RecordError)


@pytest.mark.parametrize(
    ("status", "expected"),
    [(500, RegistryUnavailable), (502, RegistryUnavailable), (503, RegistryUnavailable),
     (504, RegistryUnavailable), (408, RegistryUnavailable), (429, RegistryUnavailable),
     (409, SchemaIncompatible), (404, SchemaNotRegistered), (401, RegistryAccessDenied),
     (403, RegistryAccessDenied), (422, RegistryConfigError)],
)  # fmt: skip
def test_registry_answers_are_classified_by_status(status: int, expected: type) -> None:
    # error_code 0 as Apicurio sends it: the class must come from the HTTP status alone.
    error = registry_failure(SchemaRegistryError(status, 0, "said"), URL, "orders-value")
    assert type(error) is expected
    assert "orders-value" in str(error) and URL in str(error)


def test_a_transport_failure_is_unavailable() -> None:
    refused = httpx.ConnectError("connection refused")
    assert isinstance(registry_failure(refused, URL, None), RegistryUnavailable)


def test_settings_never_show_credentials() -> None:
    settings = RegistrySettings(
        url="https://alice:pw-in-url@registry.example:8081/apis/ccompat/v7",
        basic_auth="bob:s3cret",  # type: ignore[arg-type]
        key_password="k3y",  # type: ignore[arg-type]
    )
    shown = f"{settings!r} {settings} {settings.safe_url}"
    assert not any(secret in shown for secret in ("s3cret", "k3y", "pw-in-url"))
    assert settings.safe_url == "https://registry.example:8081/apis/ccompat/v7"
    conf = settings.client_conf()
    assert conf["basic.auth.user.info"] == "bob:s3cret"
    assert conf["ssl.key.password"] == "k3y"
    assert conf["max.retries"] == 0  # the bridge retries within its own deadline


def test_a_registry_url_must_be_http() -> None:
    with pytest.raises(ValueError, match="http"):
        RegistrySettings(url="registry:8081")


def test_subject_names_follow_the_strategy() -> None:
    name = "demo.User"
    assert subject_name(SubjectStrategy.TOPIC, "t", MessageField.VALUE, name) == "t-value"
    assert subject_name(SubjectStrategy.TOPIC, "t", MessageField.KEY, name) == "t-key"
    assert subject_name(SubjectStrategy.RECORD, "t", MessageField.VALUE, name) == name
    assert subject_name(SubjectStrategy.TOPIC_RECORD, "t", MessageField.VALUE, name) == f"t-{name}"
    with pytest.raises(ConfigError):
        subject_name(SubjectStrategy.RECORD, "t", MessageField.VALUE, None)


def test_record_names_of_each_schema_type() -> None:
    avro = {"type": "record", "name": "User", "namespace": "demo", "fields": []}
    assert record_name(Schema(json.dumps(avro), "AVRO")) == "demo.User"
    assert record_name(Schema(json.dumps({**avro, "name": "x.Y"}), "AVRO")) == "x.Y"
    assert record_name(Schema(json.dumps({"title": "Order"}), "JSON")) == "Order"
    assert record_name(Schema('"string"', "AVRO")) is None
    proto = descriptor_pb2.FileDescriptorProto(name="f.proto", package="shop")
    outer = proto.message_type.add(name="Order")
    outer.nested_type.add(name="Line")
    proto.message_type.add(name="Refund")
    text = base64.b64encode(proto.SerializeToString()).decode()
    assert message_full_name(text, [0]) == "shop.Order"
    assert message_full_name(text, [0, 0]) == "shop.Order.Line"
    assert message_full_name(text, [1]) == "shop.Refund"
    assert message_full_name(text, [2]) is None
    assert record_name(Schema(text, "PROTOBUF"), [1]) == "shop.Refund"


def test_a_proto_that_does_not_compile_names_the_file(tmp_path: Path) -> None:
    broken = tmp_path / "broken.proto"
    broken.write_text('syntax = "proto3";\nmessage A { int32 x = ; }\n')
    with pytest.raises(ConfigError, match=r"broken\.proto"):
        compile_proto(broken)
    good = tmp_path / "good.proto"
    good.write_text('syntax = "proto3";\npackage p;\nmessage A { int32 x = 1; }\n')
    assert compile_proto(good).DESCRIPTOR.full_name == "p.A"
    with pytest.raises(ConfigError, match="'B'"):
        compile_proto(good, "B")


def test_a_certificate_that_does_not_verify_is_a_config_error() -> None:
    refused = httpx.ConnectError("handshake")
    refused.__cause__ = ssl.SSLCertVerificationError("certificate verify failed")
    assert isinstance(registry_failure(refused, URL, None), RegistryCertificateRefused)


def test_a_missing_ca_file_is_a_config_error(tmp_path: Path) -> None:
    """Loading a real encrypted client key needs certificates (openssl processes): that part
    is in tests/integration/test_security.py, on the secure broker's certificates."""
    with pytest.raises(RegistryConfigError):
        RegistrySettings(url=URL, ca_location=tmp_path / "missing.pem").client()
