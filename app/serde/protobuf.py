"""The ``protobuf`` codec: confluent-kafka's ``ProtobufSerializer``/``ProtobufDeserializer``.

The library's serde needs a generated message *class* on both sides (``message_type``): it
parses every record into that class. The bridge has no generated code, so it makes the classes
at run time:

- from a ``.proto`` file (``schema_file``, the output schema or the input's reader schema):
  compiled by ``protoc`` from ``grpcio-tools`` into a descriptor set, loaded into a private
  ``DescriptorPool``, the class made by ``message_factory.GetMessageClass``;
- without a reader ``.proto``, from the writer schema the registry holds for the record's ID
  (the library's own descriptor decoding): one class and one deserializer per
  (schema ID, message index), cached.

Messages are dicts both ways, in the Protobuf JSON mapping with the ``.proto`` field names:
every field present (defaults included), 64-bit integers as ints, enums by name, bytes as
base64 strings, ``Timestamp`` as RFC 3339 text. Output dicts go through ``ParseDict``: an
unknown field or a wrong type is :class:`~app.serde.registry.OutputNotEncodable`.
"""

from __future__ import annotations

import io
import subprocess
import sys
import tempfile
from importlib import resources
from pathlib import Path
from typing import Any

from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry._sync.protobuf import _resolve_named_schema
from confluent_kafka.schema_registry.common.protobuf import _init_pool, _str_to_proto
from confluent_kafka.schema_registry.common.serde import SchemaId
from confluent_kafka.schema_registry.protobuf import (
    ProtobufDeserializer,
    ProtobufSerializer,
    _schema_to_str,
)
from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory
from google.protobuf.message import Message

from app.errors import ConfigError
from app.serde.base import Role
from app.serde.registry import (
    RegistrySettings,
    SchemaSettings,
    message_full_name,
)
from app.serde.registry_codec import Deserialize, RegistryCodec, Serialize

MessageClass = type[Message]


def compile_proto(path: Path, message: str | None = None) -> MessageClass:
    """The message class ``message`` (full or short name; default: the file's first message)
    of the ``.proto`` file at ``path``, compiled by grpcio-tools' ``protoc``.

    Raises:
        ConfigError: the file does not compile or has no such message (protoc's own words).
    """
    try:
        include = str(resources.files("grpc_tools") / "_proto")
    except ModuleNotFoundError:
        raise ConfigError(
            f"schema_file {path}: compiling a .proto file needs protoc, which the protobuf extra "
            f"brings (pip install 'eos-bridge[protobuf]'); or leave schema_file unset and use "
            f"the schema registered for the subject (use_latest_version)"
        ) from None
    with tempfile.TemporaryDirectory(prefix="eos-bridge-protoc-") as scratch:
        out = Path(scratch) / "set.pb"
        cmd = [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            f"-I{include}",
            f"-I{path.parent}",
            f"--descriptor_set_out={out}",
            "--include_imports",
            path.name,
        ]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            said = (done.stderr or done.stdout).strip()
            raise ConfigError(f"schema_file {path} does not compile: {said}")
        files = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file
    pool = descriptor_pool.DescriptorPool()
    for proto in files:
        pool.Add(proto)
    main = files[-1]  # --include_imports lists dependencies first
    names = [m.name for m in main.message_type]
    wanted = message or (names[0] if names else None)
    if wanted is None:
        raise ConfigError(f"schema_file {path} defines no message")
    full = wanted if "." in wanted or not main.package else f"{main.package}.{wanted}"
    try:
        found: MessageClass = message_factory.GetMessageClass(pool.FindMessageTypeByName(full))
    except KeyError as exc:
        raise ConfigError(f"schema_file {path} has no message {wanted!r} ({names})") from exc
    return found


def registered_message_class(
    writer: Schema, indexes: list[int], client: SchemaRegistryClient
) -> MessageClass:
    """The message class for a registered schema and a record's message indexes."""
    pool = descriptor_pool.DescriptorPool()
    _init_pool(pool)
    _resolve_named_schema(writer, client, pool)
    pool.Add(_str_to_proto("default", writer.schema_str or ""))
    full = message_full_name(writer.schema_str or "", indexes or [0])
    if full is None:
        raise ValueError(f"message indexes {indexes} point at no message of the schema")
    found: MessageClass = message_factory.GetMessageClass(pool.FindMessageTypeByName(full))
    return found


def to_dict(message: Message) -> dict[str, Any]:
    """A message as a dict (see the module docstring for the mapping)."""
    converted: dict[str, Any] = json_format.MessageToDict(
        message,
        always_print_fields_with_no_presence=True,
        preserving_proto_field_name=True,
        unquote_int64_if_possible=True,
    )
    return converted


class ProtobufCodec(RegistryCodec):
    """Protobuf messages behind a Schema Registry, as dicts (see the module docstring)."""

    name = "protobuf"
    schema_type = "PROTOBUF"
    _writer_format = "serialized"

    def __init__(
        self,
        registry: RegistrySettings,
        schema: SchemaSettings,
        role: Role = Role.OUTPUT_VALUE,
        client: SchemaRegistryClient | None = None,
    ) -> None:
        super().__init__(registry, schema, role, client)
        self._class: MessageClass | None = None
        if schema.schema_file is not None:
            self._class = compile_proto(schema.schema_file, schema.message_name)
        self._readers: dict[tuple[int, tuple[int, ...]], Deserialize] = {}

    def _make_serializer(self) -> Serialize:
        conf = self.serde_conf()
        serializer = ProtobufSerializer(self._output_class(), self.client, conf=conf)
        return serializer  # type: ignore[no-any-return]

    def _deserializer(self, data: bytes, schema_id: int, writer: Schema) -> Deserialize:
        framing = SchemaId(self.schema_type)
        framing.from_bytes(io.BytesIO(data))
        indexes = framing.message_indexes or [0]
        key = (schema_id, tuple(indexes))
        reader = self._readers.get(key)
        if reader is None:
            cls = self._class or registered_message_class(writer, indexes, self.client)
            reader = ProtobufDeserializer(cls, self.reader_conf(), self.client)
            self._readers[key] = reader
        return reader

    def _output_class(self) -> MessageClass:
        if self._class is None:
            raise ConfigError("protobuf output needs schema_file (a .proto) and message_name")
        return self._class

    def _output_schema(self) -> Schema:
        # As ProtobufSerializer registers it: the base64 FileDescriptorProto of the file.
        file = self._output_class().DESCRIPTOR.file
        return Schema(_schema_to_str(file), "PROTOBUF")  # type: ignore[arg-type]

    def _to_library(self, value: Any) -> Any:
        return json_format.ParseDict(value, self._output_class()())

    def _from_library(self, obj: Any) -> Any:
        return to_dict(obj)
