"""The tools' format options (app.commands.formats): which codec a flag names, and the one-line
mistakes (no registry, no schema to write); no registry is asked."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from app.commands.formats import add_registry_args, as_json, codec
from app.errors import ConfigError
from app.kafka.topics import KafkaRecord
from app.serde import Role
from app.serde.avro import AvroCodec

USER = '{"type": "record", "name": "User", "fields": [{"name": "id", "type": "long"}]}'


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_registry_args(parser, "--value-format", schema=True)
    return parser.parse_args(argv)


def test_a_registry_format_needs_a_registry_and_a_writer_its_schema(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("BRIDGE_SCHEMA_REGISTRY__URL", raising=False)
    with pytest.raises(ConfigError, match="--registry URL"):
        codec(_args("--value-format", "avro"), "--value-format", Role.INPUT_VALUE)
    with pytest.raises(ConfigError, match="--schema FILE"):
        codec(_args("--value-format", "avro", "--registry", "http://r:1"), "--value-format",
              Role.OUTPUT_VALUE)  # fmt: skip
    with pytest.raises(ConfigError, match=r"--registry: .*http"):
        codec(_args("--value-format", "avro", "--registry", "r:1"), "--value-format",
              Role.INPUT_VALUE)  # fmt: skip
    schema = tmp_path / "user.avsc"
    schema.write_text(USER)
    monkeypatch.setenv("BRIDGE_SCHEMA_REGISTRY__URL", "http://r:1")
    built = codec(_args("--value-format", "avro", "--schema", str(schema)), "--value-format",
                  Role.OUTPUT_VALUE)  # fmt: skip
    assert isinstance(built, AvroCodec) and built.registry.url == "http://r:1"


def test_json_records_are_left_as_they_are() -> None:
    record = KafkaRecord("t", 0, 0, None, b'{"id": 1}', (), 0)
    json_codec = codec(_args(), "--value-format", Role.INPUT_VALUE)
    assert as_json([record], json_codec) == [record]
