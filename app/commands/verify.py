"""``eos-bridge verify``: audit an id-preserving bridge from its topics alone.

Reads the input, output and dead-letter topics with ``read_committed`` and checks that every
input record is either in the output (as many times as it was in the input) or dead-lettered,
and that nothing else is in the output.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from dataclasses import asdict, dataclass, field

from app.commands.connect import DEFAULT_TIMEOUT, add_connection_args, connection
from app.commands.settings import settings_epilog
from app.config import ConnectionSettings
from app.errors import ConfigError
from app.kafka.admin import require_topics
from app.kafka.topics import KafkaRecord, read_all
from app.serde.json import JSONDecodeError, loads
from app.sink.output import H_OFFSET, H_PARTITION, H_TOPIC


@dataclass(slots=True)
class Report:
    """What ``verify`` found; ``ok`` when every list is empty."""

    inputs: int = 0
    outputs: int = 0
    dead_lettered: int = 0
    missing: list[str] = field(default_factory=list)
    duplicated: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    dead_letter_unknown_source: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (
            self.missing or self.duplicated or self.unexpected or self.dead_letter_unknown_source
        )

    def summary(self) -> str:
        return (
            f"{self.inputs} in, {self.outputs} out, {len(self.duplicated)} duplicates, "
            f"{len(self.missing)} missing, {self.dead_lettered} dead-lettered"
            + ("" if self.ok else f", {len(self.unexpected)} unexpected: VIOLATION")
        )


class IdExtractor:
    """Record id from a JSON field or a header; None when the record has none."""

    def __init__(self, field_name: str | None, header: str | None) -> None:
        if (field_name is None) == (header is None):
            raise ValueError("give exactly one of --id-field and --id-header")
        self.field = field_name
        self.header = header

    def __call__(self, record: KafkaRecord) -> str | None:
        if self.header is not None:
            raw = record.header(self.header)
            return raw.decode() if raw is not None else None
        try:
            value = loads(record.value or b"")
        except JSONDecodeError:
            return None
        found = value.get(self.field) if isinstance(value, dict) else None
        return None if found is None else str(found)


def audit(
    inputs: list[KafkaRecord],
    outputs: list[KafkaRecord],
    dead: list[KafkaRecord],
    record_id: IdExtractor,
    limit: int = 20,
) -> Report:
    """Compare the three topics' contents (pure: unit-testable without a broker)."""
    report = Report(inputs=len(inputs), outputs=len(outputs), dead_lettered=len(dead))
    by_source = {(r.topic, r.partition, r.offset): r for r in inputs}
    dead_sources: set[tuple[str, int, int]] = set()
    for r in dead:
        source = _source_of(r)
        if source not in by_source:
            report.dead_letter_unknown_source.append(f"dlq offset {r.offset}: source {source}")
        dead_sources.add(source)  # type: ignore[arg-type]
    expected = Counter(record_id(r) for key, r in by_source.items() if key not in dead_sources)
    got = Counter(record_id(r) for r in outputs)
    for rid, want in expected.items():
        have = got.get(rid, 0)
        if have < want:
            report.missing.append(str(rid))
        elif have > want:
            report.duplicated.append(str(rid))
    report.unexpected = [str(rid) for rid in got if rid not in expected]
    for name in ("missing", "duplicated", "unexpected", "dead_letter_unknown_source"):
        items = getattr(report, name)
        setattr(
            report,
            name,
            sorted(items)[:limit] + ([f"... {len(items)}"] if len(items) > limit else []),
        )
    return report


def _source_of(record: KafkaRecord) -> tuple[str, int, int] | None:
    topic, partition, offset = (record.header(h) for h in (H_TOPIC, H_PARTITION, H_OFFSET))
    if topic is None or partition is None or offset is None:
        return None
    return topic.decode(), int(partition), int(offset)


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "verify",
        help="audit input vs output vs dead-letter topics",
        description="Audit input vs output vs dead-letter topics (read_committed). Exit codes: "
        "0 every input accounted for, 1 a violation, 2 a usage or connection mistake.",
        epilog=settings_epilog(ConnectionSettings, "connection settings"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_connection_args(parser, timeout=False)
    parser.add_argument("--input", action="append", required=True, help="input topic (repeat)")
    parser.add_argument("--output", action="append", required=True, help="output topic (repeat)")
    parser.add_argument("--dlq", action="append", default=[], help="dead-letter topic (repeat)")
    parser.add_argument("--id-field", help="JSON field holding the record id")
    parser.add_argument("--id-header", help="header holding the record id")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds to read the topics")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Exit 0 when the audit passes, 1 on any violation, 2 on bad arguments or connection."""
    try:
        record_id = IdExtractor(args.id_field, args.id_header)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    conn = connection(args)
    wanted = [(f"--{opt}", t) for opt in ("input", "output", "dlq") for t in getattr(args, opt)]
    require_topics(conn, wanted, DEFAULT_TIMEOUT)
    config = conn.client_config()
    inputs = read_all(config, args.input, True, args.timeout)
    outputs = read_all(config, args.output, True, args.timeout)
    dead = read_all(config, args.dlq, True, args.timeout) if args.dlq else []
    report = audit(inputs, outputs, dead, record_id)
    if args.json:
        print(json.dumps({**asdict(report), "ok": report.ok}, indent=2))
    else:
        print(report.summary())
        for name in ("missing", "duplicated", "unexpected", "dead_letter_unknown_source"):
            if getattr(report, name):
                print(f"  {name}: {', '.join(getattr(report, name))}")
    return 0 if report.ok else 1
