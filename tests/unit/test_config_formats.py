"""The registry formats in the settings: each role's format, the ``schema_registry`` block
from the environment, validation naming the setting, secrets masked; and ``codec_for``
building the codec each format names (no registry is asked: building a codec asks nothing)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from app import serde
from app.config import load_settings
from app.errors import ConfigError, OutputNotEncodable
from app.serde.avro import AvroCodec
from app.serde.json_schema import JsonSchemaCodec
from app.serde.registry import RegistrySettings, SchemaSettings, SubjectStrategy
from app.serde.translate import TranslatingCodec

BASE = {"input_topics": ["in"], "output_topic": "out"}
USER = '{"type": "record", "name": "User", "fields": [{"name": "id", "type": "long"}]}'


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in list(os.environ):
        if key.startswith("BRIDGE_"):
            monkeypatch.delenv(key)


def test_registry_settings_come_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    schema = tmp_path / "user.avsc"
    schema.write_text(USER)
    for key, value in {
        "INPUT_TOPICS": "in", "OUTPUT_TOPIC": "out",
        "INPUT_FORMAT": "avro", "OUTPUT_FORMAT": "avro", "OUTPUT_KEY_FORMAT": "json_schema",
        "SCHEMA_REGISTRY__URL": "https://registry:8081",
        "SCHEMA_REGISTRY__BASIC_AUTH": "svc:hunter2",
        "OUTPUT_SCHEMA__SCHEMA_FILE": str(schema),
        "OUTPUT_SCHEMA__SUBJECT_STRATEGY": "topic_record",
        "OUTPUT_SCHEMA__AUTO_REGISTER": "false",
        "OUTPUT_KEY_SCHEMA__USE_LATEST_VERSION": "true",
        "INPUT_SCHEMA__SCHEMA_FILE": str(schema),
    }.items():  # fmt: skip
        monkeypatch.setenv(f"BRIDGE_{key}", value)
    s = load_settings()
    assert (s.input_format, s.output_format, s.output_key_format) == (
        "avro", "avro", "json_schema",
    )  # fmt: skip
    assert s.schema_registry is not None
    assert s.schema_registry.client_conf()["basic.auth.user.info"] == "svc:hunter2"
    assert s.output_schema.subject_strategy is SubjectStrategy.TOPIC_RECORD
    assert not s.output_schema.auto_register
    assert s.output_key_schema.use_latest_version
    assert s.input_schema.schema_file == schema


def test_a_registry_format_without_a_registry_names_the_setting() -> None:
    with pytest.raises(ConfigError) as err:
        load_settings(**BASE, input_format="avro")
    assert "input_format=avro" in str(err.value)
    assert "BRIDGE_SCHEMA_REGISTRY__URL" in str(err.value)
    assert len(str(err.value).splitlines()) == 2  # the heading and one line


def test_an_output_registry_format_needs_the_schema_it_writes() -> None:
    with pytest.raises(ConfigError, match="BRIDGE_OUTPUT_SCHEMA__SCHEMA_FILE"):
        load_settings(**BASE, output_format="avro", schema_registry={"url": "http://r:8081"})
    s = load_settings(
        **BASE, output_format="avro", schema_registry={"url": "http://r:8081"},
        output_schema={"use_latest_version": True},
    )  # fmt: skip
    assert s.output_schema.use_latest_version


def test_an_unknown_format_is_refused_naming_the_setting() -> None:
    with pytest.raises(ConfigError, match=r"output_format \(BRIDGE_OUTPUT_FORMAT\)"):
        load_settings(**BASE, output_format="thrift")


def test_registry_secrets_and_url_credentials_are_masked() -> None:
    s = load_settings(
        **BASE, input_format="avro",
        schema_registry={
            "url": "https://svc:url-secret@registry:8081", "basic_auth": "svc:hunter2",
            "key_password": "pem-secret",
        },
    )  # fmt: skip
    shown = str(s.masked())
    for secret in ("url-secret", "hunter2", "pem-secret"):
        assert secret not in shown
    assert s.masked()["schema_registry"]["url"] == "https://registry:8081"


def test_codec_for_builds_the_codec_each_format_names(tmp_path: Path) -> None:
    schema = tmp_path / "user.avsc"
    schema.write_text(USER)
    registry = RegistrySettings(url="http://127.0.0.1:1")  # never asked
    built = serde.formats(
        "avro", "avro", "bytes", "json_schema", registry=registry,
        schemas={serde.Role.OUTPUT_VALUE: SchemaSettings(schema_file=schema)},
    )  # fmt: skip
    assert isinstance(built.value_in, AvroCodec) and isinstance(built.value_out, AvroCodec)
    assert isinstance(built.key_out, JsonSchemaCodec)
    assert built.key_out.role is serde.Role.OUTPUT_KEY
    assert built.value_in.client is built.value_out.client is built.key_out.client  # one client
    assert built.value_out.subject("out") == "out-value"
    assert built.key_out.subject("out") == "out-key"
    with pytest.raises(ConfigError, match=r"schema_registry\.url"):
        serde.codec_for("protobuf", serde.Role.INPUT_VALUE)


@pytest.mark.parametrize("text", ["not json", '{"type": "record", "name": "X", "fields": 1}'])
def test_an_unusable_schema_file_is_a_config_error_naming_the_setting(
    tmp_path: Path, text: str
) -> None:
    schema = tmp_path / "bad.avsc"
    schema.write_text(text)
    with pytest.raises(ConfigError, match=r"^input_schema\.schema_file .*bad\.avsc"):
        serde.codec_for(
            "avro", serde.Role.INPUT_VALUE, RegistrySettings(url="http://127.0.0.1:1"),
            SchemaSettings(schema_file=schema),
        )  # fmt: skip


def test_a_target_registry_needs_the_source_one_and_its_secrets_are_masked() -> None:
    with pytest.raises(ConfigError, match="target_registry needs schema_registry"):
        load_settings(**BASE, target_registry={"url": "http://t:8081"})
    s = load_settings(
        **BASE, input_format="bytes", output_format="bytes",
        schema_registry={"url": "http://source:8081"},
        target_registry={"url": "https://svc:url-secret@target:8081", "basic_auth": "t:hunter3"},
    )  # fmt: skip
    shown = str(s.masked())
    assert "url-secret" not in shown and "hunter3" not in shown
    assert s.masked()["target_registry"]["url"] == "https://target:8081"
    assert s.schema_ids == "translate"


def test_the_output_roles_use_the_target_registry_and_bytes_are_translated(
    tmp_path: Path,
) -> None:
    schema = tmp_path / "user.avsc"
    schema.write_text(USER)
    source, target = RegistrySettings(url="http://s:1"), RegistrySettings(url="http://t:1")
    built = serde.formats(
        "avro", "avro", registry=source, target=target,
        schemas={serde.Role.OUTPUT_VALUE: SchemaSettings(schema_file=schema)},
    )  # fmt: skip
    assert isinstance(built.value_in, AvroCodec) and built.value_in.registry is source
    assert isinstance(built.value_out, AvroCodec) and built.value_out.registry is target
    copied = serde.formats("bytes", "bytes", registry=source, target=target, translate=True)
    assert isinstance(copied.value_out, TranslatingCodec)
    assert copied.value_out.encode(None, "out") is None  # a tombstone asks no registry
    with pytest.raises(OutputNotEncodable, match=r"\(NotWireFormat\)"):  # a dead letter
        copied.value_out.encode(b"\x07 plain text", "out")
    untouched = serde.formats("bytes", "bytes", registry=source, target=target)
    assert not isinstance(untouched.value_out, TranslatingCodec)
