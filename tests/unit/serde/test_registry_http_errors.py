"""The codecs against a fake registry on loopback that answers each request with the status
(and body) the test chose: errors by class, and one request per schema ID, not per record."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from app.serde.avro import AvroCodec
from app.serde.registry import (
    RegistryAccessDenied,
    RegistrySettings,
    RegistryUnavailable,
    SchemaIncompatible,
    SchemaNotRegistered,
    SchemaSettings,
    UnknownSchemaId,
)
from devkit.kafka.cluster import free_port

SCHEMA = {"type": "record", "name": "User", "fields": [{"name": "id", "type": "long"}]}
RECORD = b"\x00\x00\x00\x00\x2a\x02"  # schema ID 42, Avro long 1


class FakeRegistry(ThreadingHTTPServer):
    """Answers every request with ``status`` and a Confluent-style error body."""

    status = 200
    error_code = 0  # what Apicurio sends with a 409: the codecs must not need it
    body: dict[str, object] | None = None  # the answer when status is 200

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.requests: list[str] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/apis/ccompat/v7"


class _Handler(BaseHTTPRequestHandler):
    server: FakeRegistry

    def _answer(self) -> None:
        self.server.requests.append(f"{self.command} {self.path}")
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        answer = {"error_code": self.server.error_code, "message": "the fake said no"}
        body = json.dumps(self.server.body if self.server.status == 200 else answer)
        self.send_response(self.server.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body.encode())

    do_GET = do_POST = do_PUT = _answer

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def fake() -> Iterator[FakeRegistry]:
    server = FakeRegistry()
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.fixture
def schema_file(tmp_path: Path) -> Path:
    path = tmp_path / "user.avsc"
    path.write_text(json.dumps(SCHEMA))
    return path


def codec(url: str, schema_file: Path | None = None, **schema: object) -> AvroCodec:
    settings = SchemaSettings.model_validate({"schema_file": schema_file, **schema})
    return AvroCodec(RegistrySettings(url=url, timeout=5), settings)


def test_an_unknown_schema_id_is_a_record_error(fake: FakeRegistry) -> None:
    fake.status = 404
    with pytest.raises(UnknownSchemaId):
        codec(fake.url).decode(RECORD, "orders")
    assert fake.requests == ["GET /apis/ccompat/v7/schemas/ids/42"]


@pytest.mark.parametrize("status", [500, 503, 429])
def test_a_failing_registry_is_unavailable_on_decode_and_encode(
    fake: FakeRegistry, schema_file: Path, status: int
) -> None:
    fake.status = status
    with pytest.raises(RegistryUnavailable):
        codec(fake.url).decode(RECORD, "orders")
    with pytest.raises(RegistryUnavailable):
        codec(fake.url, schema_file).encode({"id": 1}, "orders")
    assert len(fake.requests) == 2  # max_retries 0: one request each, no hidden retry loop


def test_an_unreachable_registry_is_unavailable(schema_file: Path) -> None:
    nobody = f"http://127.0.0.1:{free_port()}/apis/ccompat/v7"
    with pytest.raises(RegistryUnavailable, match=re.escape(nobody)):
        codec(nobody).decode(RECORD, "orders")
    with pytest.raises(RegistryUnavailable):
        codec(nobody, schema_file).prepare("orders")


def test_refusals_at_start_are_config_errors_naming_the_subject(
    fake: FakeRegistry, schema_file: Path
) -> None:
    cases = [
        (409, {}, SchemaIncompatible),
        (404, {"auto_register": False}, SchemaNotRegistered),
        (401, {}, RegistryAccessDenied),
    ]
    for status, schema, expected in cases:
        fake.status = status
        with pytest.raises(expected, match="'orders-value'"):
            codec(fake.url, schema_file, **schema).prepare("orders")


def test_a_writer_schema_is_fetched_once_per_id_not_per_record(fake: FakeRegistry) -> None:
    fake.body = {"schema": json.dumps(SCHEMA), "schemaType": "AVRO", "references": []}
    reader = codec(fake.url)
    values = [reader.decode(b"\x00\x00\x00\x00\x2a" + bytes([2 * i]), "orders") for i in range(50)]
    assert values == [{"id": i} for i in range(50)]
    assert fake.requests == ["GET /apis/ccompat/v7/schemas/ids/42"]
