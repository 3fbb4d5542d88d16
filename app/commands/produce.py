"""``eos-bridge produce TOPIC [--file FILE]``: JSON lines from a file or stdin, optionally keyed;
with ``--value-format avro|protobuf|json_schema --schema FILE`` written in that format.

Every line is checked before the first record is sent, so a bad line leaves the topic
untouched: a mistake costs a re-run, not a half-fed topic.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from dataclasses import dataclass

from app.commands.connect import EXIT_OK, Subparsers, connection, tool_parser
from app.commands.formats import add_registry_args, codec
from app.errors import BridgeError, ConfigError, OutputNotEncodable
from app.kafka.admin import require_topics
from app.kafka.topics import seed
from app.serde import Codec, Role, json


@dataclass(slots=True, frozen=True)
class Line:
    """One record to produce."""

    key: bytes | None
    value: bytes


def add_parser(sub: Subparsers) -> None:
    """Register ``produce``."""
    parser = tool_parser(sub, "produce", "produce JSON lines (one record per line) to a topic")
    parser.add_argument("topic")
    parser.add_argument("--file", default="-", help="JSON lines file (default: - = stdin)")
    keys = parser.add_mutually_exclusive_group()
    keys.add_argument("--key-field", metavar="FIELD", help="key = this field of each value")
    keys.add_argument("--tab-key", action="store_true", help="lines are KEY<TAB>VALUE")
    parser.add_argument("--raw", action="store_true", help="send lines as is (no JSON check)")
    parser.add_argument(
        "--header", action="append", default=[], metavar="NAME=VALUE", help="repeat"
    )
    parser.add_argument("--partition", type=int, help="default: by key (or sticky)")
    add_registry_args(parser, "--value-format", schema=True)
    parser.set_defaults(func=run)


def parse_lines(
    lines: Iterable[str], source: str, key_field: str | None, tab_key: bool, raw: bool
) -> list[Line]:
    """Turn input lines into records; blank lines are skipped.

    Raises:
        ConfigError: a line is not JSON (unless ``raw``) or lacks the key field; the message
            names the file and line number.
    """
    records = []
    for number, text in enumerate(lines, start=1):
        text = text.rstrip("\r\n")
        if not text.strip():
            continue
        key: bytes | None = None
        if tab_key:
            key_text, sep, text = text.partition("\t")
            if not sep:
                raise ConfigError(f"{source}:{number}: no TAB between key and value (--tab-key)")
            key = key_text.encode()
        where = f"{source}:{number}"
        if not raw or key_field:
            try:
                value = json.loads(text)
            except json.JSONDecodeError as exc:
                raise ConfigError(
                    f"{where}: not valid JSON ({exc}); --raw sends it as is"
                ) from None
            if key_field:
                key = _field_key(value, key_field, where)
        records.append(Line(key, text.encode()))
    return records


def encode_lines(records: list[Line], writer: Codec, topic: str, source: str) -> list[Line]:
    """Each line's JSON value checked exactly against the schema, types included (the library
    would write ``"12.50"`` as a double), then encoded by ``writer`` (a registry format), all
    before any is sent.

    Raises:
        ConfigError: a value the schema refuses (naming the record and the field) or a registry
            that cannot be reached or refuses the schema.
    """
    from app.serde.registry_codec import RegistryCodec  # loaded with the writer already

    encoded = []
    for number, line in enumerate(records, start=1):
        value = json.loads(line.value)
        problem = writer.exact_problem(value) if isinstance(writer, RegistryCodec) else None
        if problem is not None:
            raise ConfigError(f"{source}: record {number}: {problem}")
        try:
            value = writer.encode(value, topic)
        except OutputNotEncodable as exc:
            raise ConfigError(f"{source}: record {number}: {exc}") from None
        except BridgeError as exc:  # RegistryUnavailable; refusals are ConfigErrors already
            raise ConfigError(str(exc)) from None
        encoded.append(Line(line.key, value or b""))
    return encoded


def _field_key(value: object, field: str, where: str) -> bytes:
    if not isinstance(value, dict) or value.get(field) is None:
        raise ConfigError(f"{where}: no field {field!r} for the key (--key-field)")
    found = value[field]
    return (found if isinstance(found, str) else json.dumps(found).decode()).encode()


def _headers(pairs: list[str]) -> list[tuple[str, bytes]]:
    headers = []
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise ConfigError(f"--header {pair!r}: expected NAME=VALUE")
        headers.append((name, value.encode()))
    return headers


def run(args: argparse.Namespace) -> int:
    """Check every line, then produce them all (idempotent, acks=all) and flush."""
    conn = connection(args)
    headers = _headers(args.header)
    if args.file == "-":
        records = parse_lines(sys.stdin, "stdin", args.key_field, args.tab_key, args.raw)
    else:
        try:
            with open(args.file, encoding="utf-8") as handle:
                records = parse_lines(handle, args.file, args.key_field, args.tab_key, args.raw)
        except OSError as exc:
            raise ConfigError(f"cannot read {args.file}: {exc.strerror}") from None
    require_topics(conn, [("", args.topic)], args.timeout)
    writer = codec(args, "--value-format", Role.OUTPUT_VALUE)
    if writer.structured and writer.name != "json":
        if args.raw:
            raise ConfigError(f"--raw sends text as is: not with --value-format {writer.name}")
        records = encode_lines(records, writer, args.topic, args.file)
    try:
        seed(
            conn.client_config(),
            args.topic,
            [r.value for r in records],
            keys=[r.key for r in records],
            partition=args.partition,
            headers=[headers] * len(records) if headers else None,
        )
    except RuntimeError as exc:
        raise ConfigError(str(exc)) from None
    print(f"produced {len(records)} record(s) to {args.topic!r}", file=sys.stderr)
    return EXIT_OK
