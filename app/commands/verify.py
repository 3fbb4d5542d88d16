"""``eos-bridge verify``: audit a bridge from its topics.

Reads the input, output and dead-letter topics with ``read_committed``. Two ways to know what
the output should be:

- ``--pipeline``/``--pipeline-spec``: the pipeline re-run over the committed input, state in
  memory (:mod:`app.commands.rerun`); outputs compared as a multiset per output topic, dead
  letters by their source offsets. Any deterministic pipeline: filters, routes, counts,
  windows. A pipeline that gives two different results over the same records is refused.
- ``--id-field``/``--id-header``: an id-preserving pipeline, without its code at hand: every
  input id in the output as many times as in the input, or dead-lettered, nothing else.

Counts are exact; the lists show the first examples.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from app.commands.clusters import (
    TwoClusterSettings,
    add_target_args,
    committed_positions,
    two_cluster_settings,
)
from app.commands.connect import DEFAULT_TIMEOUT, add_connection_args
from app.commands.formats import add_registry_args, as_json, codec
from app.commands.rerun import comparable, rerun
from app.commands.settings import settings_epilog
from app.commands.verify_regrouped import audit_regrouped
from app.errors import ConfigError
from app.kafka.admin import require_topics
from app.kafka.topics import KafkaRecord, read_all
from app.pipeline.builder import Pipeline, load_pipeline
from app.pipeline.spec import load_spec
from app.pipeline.split import Regroup, split
from app.serde import Role
from app.serde.json import JSONDecodeError, loads
from app.sink.output import H_OFFSET, H_PARTITION, H_TOPIC

_DETERMINISM_SAMPLE = 2_000


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
    counts: dict[str, int] = field(default_factory=dict)  # records, not ids: exact

    @property
    def ok(self) -> bool:
        return not (
            self.missing or self.duplicated or self.unexpected or self.dead_letter_unknown_source
        )

    def summary(self) -> str:
        n = self.counts
        return (
            f"{self.inputs} in, {self.outputs} out, {n.get('duplicated', 0)} duplicates, "
            f"{n.get('missing', 0)} missing, {self.dead_lettered} dead-lettered"
            + ("" if self.ok else f", {n.get('unexpected', 0)} unexpected: VIOLATION")
        )

    def cut(self, limit: int) -> None:
        """Keep the first ``limit`` examples of each list (the counts stay exact)."""
        for name in ("missing", "duplicated", "unexpected", "dead_letter_unknown_source"):
            items = getattr(self, name)
            self.counts.setdefault(name, len(items))
            setattr(self, name, sorted(items)[:limit])


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
    compare(report, expected, got, limit)
    return report


def compare(report: Report, expected: Counter[Any], got: Counter[Any], limit: int = 20) -> None:
    """Fill ``report`` from two multisets: exact record counts, the first ``limit`` examples."""
    missing = duplicated = unexpected = 0
    for item, want in expected.items():
        have = got.get(item, 0)
        if have < want:
            report.missing.append(str(item))
            missing += want - have
        elif have > want:
            report.duplicated.append(str(item))
            duplicated += have - want
    for item, have in got.items():
        if item not in expected:
            report.unexpected.append(str(item))
            unexpected += have
    report.counts.update(missing=missing, duplicated=duplicated, unexpected=unexpected)
    report.cut(limit)


def audit_pipeline(
    pipeline: Pipeline,
    inputs: list[KafkaRecord],
    outputs: list[KafkaRecord],
    dead: list[KafkaRecord],
    output_topic: str,
    existing: set[str],
    limit: int = 20,
) -> Report:
    """Compare the topics with what ``pipeline`` makes of ``inputs`` (see the module doc)."""
    exists = existing.__contains__
    sample = inputs[:_DETERMINISM_SAMPLE]
    if rerun(pipeline, sample, output_topic, exists) != rerun(
        pipeline, sample, output_topic, exists
    ):
        raise ConfigError(
            "the pipeline is not deterministic (two runs over the same records differ: wall-clock"
            " time or randomness?), so verify cannot re-run it; use --id-field or --id-header"
        )
    expected = rerun(pipeline, inputs, output_topic, exists)
    report = Report(inputs=len(inputs), outputs=len(outputs), dead_lettered=len(dead))
    got = Counter(comparable(r.topic, r.key, r.value) for r in outputs)
    compare(report, expected.outputs, got, limit)
    considered = {(r.topic, r.partition, r.offset) for r in inputs}
    sources = {s for s in (_source_of(r) for r in dead) if s is not None} & considered
    gone, extra = sorted(expected.dead - sources), sorted(sources - expected.dead)
    report.dead_letter_unknown_source = [f"no dead letter for {s}" for s in gone]
    report.dead_letter_unknown_source += [f"unexpected dead letter for {s}" for s in extra]
    report.counts["dead_letter_unknown_source"] = len(report.dead_letter_unknown_source)
    report.cut(limit)
    return report


def regrouped(pipeline: Pipeline, args: argparse.Namespace) -> Regroup | None:
    """The cut of a regrouped pipeline; it needs ``--group`` (its hop is named by it)."""
    plan = split(pipeline.steps, args.group or "G")
    if plan is not None and not args.group:
        raise ConfigError(
            f"pipeline step {plan.step!r} regroups through a repartition topic: give --group "
            f"so verify re-runs the rest over <group>-...-repartition as the bridge did"
        )
    return plan


def _audit_hop(
    plan: Regroup,
    conn: TwoClusterSettings,
    args: argparse.Namespace,
    inputs: list[KafkaRecord],
    outputs: list[KafkaRecord],
    dead: list[KafkaRecord],
    existing: set[str],
) -> Report:
    hop = _read(conn.source().client_config(), [plan.topic], "repartition", args.timeout)
    hop = _committed_only(conn, args.group, hop, args.timeout)
    expected, got, dead_expected, twice = audit_regrouped(
        plan, hop, outputs, args.output[0], existing
    )
    report = Report(inputs=len(inputs), outputs=len(outputs), dead_lettered=len(dead))
    compare(report, expected, got)
    sources = {s for s in (_source_of(r) for r in dead) if s is not None}
    report.duplicated += twice
    report.counts["duplicated"] += len(twice)
    gone = sorted(dead_expected - sources)
    report.dead_letter_unknown_source = [f"no dead letter for {s}" for s in gone]
    report.counts["dead_letter_unknown_source"] = len(gone)
    report.cut(20)
    return report


def _pipeline(args: argparse.Namespace) -> Pipeline | None:
    if args.pipeline and args.pipeline_spec:
        raise ConfigError("give --pipeline or --pipeline-spec, not both")
    if args.pipeline:
        return load_pipeline(args.pipeline)
    if args.pipeline_spec:
        return load_spec(args.pipeline_spec)
    return None


def _read(
    config: dict[str, Any], topics: list[str], what: str, timeout: float
) -> list[KafkaRecord]:
    _progress(f"reading the {what} topics {', '.join(topics)} (read_committed) ...")
    records = read_all(config, topics, True, timeout)
    _progress(f"{len(records)} {what} records")
    return records


def _progress(line: str) -> None:
    print(f"verify: {line}", file=sys.stderr, flush=True)


def _committed_only(
    conn: TwoClusterSettings, group: str, inputs: list[KafkaRecord], timeout: float
) -> list[KafkaRecord]:
    """The input records ``group`` has committed (its positions are past them); between two
    clusters the positions are those of the offsets topic on the target."""
    committed, where = committed_positions(conn, group, timeout)
    kept = [r for r in inputs if r.offset < committed.get((r.topic, r.partition), 0)]
    _progress(f"{len(kept)} of them committed by group {group!r} (positions {where})")
    return kept


def _read_topics(
    args: argparse.Namespace, conn: TwoClusterSettings
) -> tuple[list[KafkaRecord], list[KafkaRecord], list[KafkaRecord], set[str]]:
    """The input (on the source), the output and dead letters (on the target; the source
    with one cluster), and every topic name of the target."""
    source, target = conn.source(), conn.target_cluster()
    readers = [codec(args, f"--{side}-format", Role.INPUT_VALUE) for side in ("input", "output")]
    reach = min(DEFAULT_TIMEOUT, args.timeout)  # a short --timeout waits no longer to connect
    existing = require_topics(source, [("--input", t) for t in args.input], reach)
    wanted = [(f"--{opt}", t) for opt in ("output", "dlq") for t in getattr(args, opt)]
    existing = require_topics(target, wanted, reach, None if conn.cross_cluster else existing)
    if conn.cross_cluster:
        _progress(f"input on {source.bootstrap_servers}, the rest on {target.bootstrap_servers}")
    config, written = source.client_config(), target.client_config()
    inputs = as_json(_read(config, args.input, "input", args.timeout), readers[0])
    if args.group:
        inputs = _committed_only(conn, args.group, inputs, args.timeout)
    outputs = as_json(_read(written, args.output, "output", args.timeout), readers[1])
    dead = _read(written, args.dlq, "dead-letter", args.timeout) if args.dlq else []
    return inputs, outputs, dead, existing


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
        epilog=settings_epilog(TwoClusterSettings, "connection settings"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_connection_args(parser, timeout=False)
    add_target_args(parser)
    parser.add_argument("--input", action="append", required=True, help="input topic (repeat)")
    parser.add_argument("--output", action="append", required=True, help="output topic (repeat)")
    parser.add_argument("--dlq", action="append", default=[], help="dead-letter topic (repeat)")
    parser.add_argument("--id-field", help="JSON field holding the record id")
    parser.add_argument("--id-header", help="header holding the record id")
    parser.add_argument("--pipeline", help="re-run this pipeline (module:attr) over the input")
    parser.add_argument("--pipeline-spec", type=Path, help="re-run this YAML pipeline spec")
    parser.add_argument("--group", help="only the input this consumer group has committed")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument(
        "--timeout",
        type=float,
        default=300.0,
        help="seconds to read the topics (at most 15 to connect)",
    )
    add_registry_args(parser, "--input-format", "--output-format")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Exit 0 when the audit passes, 1 on any violation, 2 on bad arguments or connection."""
    pipeline = _pipeline(args)
    try:
        record_id = None if pipeline is not None else IdExtractor(args.id_field, args.id_header)
    except ValueError as exc:
        raise ConfigError(f"{exc}, or --pipeline/--pipeline-spec") from None
    conn = two_cluster_settings(args)
    inputs, outputs, dead, existing = _read_topics(args, conn)
    plan = None if pipeline is None else regrouped(pipeline, args)
    if plan is not None:
        report = _audit_hop(plan, conn, args, inputs, outputs, dead, existing)
    elif pipeline is not None:
        report = audit_pipeline(pipeline, inputs, outputs, dead, args.output[0], existing)
    else:
        assert record_id is not None
        report = audit(inputs, outputs, dead, record_id)
    hint = ID_AUDIT_HINT if record_id is not None and report.missing else None
    if args.json:
        print(json.dumps({**asdict(report), "ok": report.ok, "hint": hint}, indent=2))
    else:
        print("\n".join(report_lines(report, hint)))
    return 0 if report.ok else 1


# An id audit expects every input id in the output: a filtering pipeline's drops look missing.
ID_AUDIT_HINT = (
    "hint: an --id-field/--id-header audit expects every input in the output; if the pipeline "
    "filters, routes or aggregates, give it (--pipeline-spec FILE or --pipeline module:attr) "
    "and verify re-runs it over the input"
)


def report_lines(report: Report, hint: str | None = None) -> list[str]:
    """The text report: the summary, the examples of each finding, then ``hint``."""
    lines = [report.summary()]
    for name in ("missing", "duplicated", "unexpected", "dead_letter_unknown_source"):
        if getattr(report, name):
            lines.append(f"  {name}: {', '.join(getattr(report, name))}")
    return [*lines, hint] if hint else lines
