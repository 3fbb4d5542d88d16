"""What a job is told: the source topic, the record fields, the windowing, the tables.

Plain frozen dataclasses with their own validation, so a bad option fails before Spark starts
and the message names the command-line option.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from spark_jobs.avro_input import RegistryInput
from spark_jobs.errors import JobConfigError
from spark_jobs.spec import AggregationSpec

_INTERVAL = re.compile(r"^\s*[1-9]\d*\s+(second|minute|hour|day|week)s?\s*$")
AVAILABLE_NOW = "available-now"


@dataclass(slots=True, frozen=True)
class RecordFields:
    """Names of the JSON fields read from each bridge output record (all required)."""

    id: str = "id"
    key: str = "key"
    amount: str = "amount"
    ts: str = "ts"

    def __post_init__(self) -> None:
        names = [self.id, self.key, self.amount, self.ts]
        if any(not n for n in names) or len(set(names)) != len(names):
            raise JobConfigError(
                f"--id-field/--key-field/--amount-field/--ts-field must be distinct and "
                f"non-empty, got {names}"
            )


@dataclass(slots=True, frozen=True)
class KafkaSource:
    """The bridge's output topic. ``options`` are extra ``kafka.*`` settings (e.g. SASL);
    ``registry``: the values are Avro behind that Schema Registry (None: JSON text)."""

    bootstrap: str
    topic: str
    options: tuple[tuple[str, str], ...] = ()
    isolation_level: str = "read_committed"
    registry: RegistryInput | None = None

    def __post_init__(self) -> None:
        if not self.bootstrap or not self.topic:
            raise JobConfigError("--bootstrap and --topic are required")
        for key, _ in self.options:
            if not key.startswith("kafka."):
                raise JobConfigError(f"--kafka-option {key}: only kafka.* settings belong here")
            if key == "kafka.isolation.level":
                raise JobConfigError(
                    "--kafka-option kafka.isolation.level is fixed to read_committed: "
                    "read_uncommitted would count records of aborted bridge transactions"
                )

    @property
    def topic_names(self) -> list[str]:
        """The topics read (``--topic`` may list several, comma-separated)."""
        return [t.strip() for t in self.topic.split(",") if t.strip()]


@dataclass(slots=True, frozen=True)
class WindowSpec:
    """Event-time tumbling windows and how the per-window statistics are computed.

    Stored as a table property when the aggregate table is created, so a later run with a
    different window size is refused instead of mixing window sizes in one table.
    """

    size: str = "1 minute"
    watermark: str = "10 minutes"
    distinct_rsd: float = 0.05

    def __post_init__(self) -> None:
        for option, value in (("--window", self.size), ("--watermark", self.watermark)):
            if not _INTERVAL.match(value):
                raise JobConfigError(
                    f'{option} "{value}" is not an interval like "30 seconds" or "5 minutes"'
                )
        if not 0.0 < self.distinct_rsd <= 0.39:
            raise JobConfigError(f"--distinct-rsd {self.distinct_rsd} must be in (0, 0.39]")

    def table_property(self) -> str:
        """The part of the spec that shapes the table's rows, as stable JSON."""
        return json.dumps({"window": self.size, "distinct_rsd": self.distinct_rsd})


_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def _local_path(option: str, path: str) -> str | None:
    """The local file system path of ``path``; None for another file system's URL."""
    if not path:
        raise JobConfigError(f"{option} is required")
    if _URL.match(path) and not path.startswith("file:"):
        return None  # s3a://, abfss://, hdfs://: the Hadoop connector decides
    local = path.removeprefix("file://").removeprefix("file:")
    if not local.startswith("/"):
        raise JobConfigError(f"{option} {path}: give an absolute path (or a URL such as s3a://...)")
    return local


def check_table_path(option: str, path: str) -> None:
    """A table path must be absolute or a URL: Spark takes a relative one for a table name."""
    _local_path(option, path)


def check_writable(option: str, path: str) -> None:
    """A local table or checkpoint path must be a directory the job can create or write.

    Raises:
        JobConfigError: naming the option and the directory that is in the way.
    """
    local = _local_path(option, path)
    if local is None:
        return
    target = Path(local)
    existing = next(p for p in (target, *target.parents) if p.exists())
    if not existing.is_dir():
        raise JobConfigError(f"{option} {path}: {existing} is not a directory")
    # Try it rather than ask os.access: root passes every access check, and a read-only or
    # virtual file system (/proc) refuses only the write itself.
    probe = target / ".eosbridge-write-probe"
    try:
        target.mkdir(parents=True, exist_ok=True)
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise JobConfigError(f"{option} {path}: cannot write there ({exc.strerror})") from None


@dataclass(slots=True, frozen=True)
class StreamConfig:
    """Everything ``python -m spark_jobs.stream`` needs.

    ``spec`` is the aggregation (None: the fixed aggregate of ``fields`` and ``window``);
    ``python`` a ``module:function`` that replaces the spec's aggregates.
    """

    source: KafkaSource
    table: str
    checkpoint: str
    fields: RecordFields = field(default_factory=RecordFields)
    window: WindowSpec = field(default_factory=WindowSpec)
    trigger: str = AVAILABLE_NOW
    starting_offsets: str = "earliest"
    max_offsets_per_trigger: int | None = None
    bad_records_table: str | None = None
    spec: AggregationSpec | None = None
    python: str | None = None

    def __post_init__(self) -> None:
        check_table_path("--table", self.table)
        check_table_path("--bad-records-table", self.bad_table)
        check_table_path("--checkpoint", self.checkpoint)
        if self.trigger != AVAILABLE_NOW and not _INTERVAL.match(self.trigger):
            raise JobConfigError(
                f'--trigger "{self.trigger}" must be {AVAILABLE_NOW} or an interval like '
                '"10 seconds"'
            )
        if self.max_offsets_per_trigger is not None and self.max_offsets_per_trigger < 1:
            raise JobConfigError("--max-offsets-per-trigger must be at least 1")

    @property
    def bad_table(self) -> str:
        """Where rows that cannot be aggregated go (default: ``<table>_bad_records``)."""
        return self.bad_records_table or f"{self.table.rstrip('/')}_bad_records"


@dataclass(slots=True, frozen=True)
class KafkaRange:
    """A slice of the topic for the backfill: offsets (Spark JSON) or record timestamps (ms).

    Offsets use Spark's per-partition JSON, ``{"topic": {"0": 100, "1": -2}}``, with the end
    exclusive; timestamps select records whose Kafka timestamp is in ``[start, end)``.
    """

    starting_offsets: str | None = None
    ending_offsets: str | None = None
    starting_timestamp: int | None = None
    ending_timestamp: int | None = None

    def __post_init__(self) -> None:
        by_offset = self.starting_offsets is not None or self.ending_offsets is not None
        by_time = self.starting_timestamp is not None or self.ending_timestamp is not None
        if by_offset == by_time:
            raise JobConfigError(
                "give the range either as --starting-offsets/--ending-offsets or as "
                "--starting-timestamp/--ending-timestamp"
            )
        for option, value in (
            ("--starting-offsets", self.starting_offsets),
            ("--ending-offsets", self.ending_offsets),
        ):
            if value is not None and value not in ("earliest", "latest"):
                try:
                    json.loads(value)
                except ValueError as exc:
                    raise JobConfigError(f"{option} is not JSON: {exc}") from None

    def reader_options(self) -> dict[str, str]:
        """The Kafka source options selecting this range in a batch read."""
        if self.starting_timestamp is not None or self.ending_timestamp is not None:
            opts = {}
            if self.starting_timestamp is not None:
                opts["startingTimestamp"] = str(self.starting_timestamp)
            if self.ending_timestamp is not None:
                opts["endingTimestamp"] = str(self.ending_timestamp)
            return opts
        return {
            "startingOffsets": self.starting_offsets or "earliest",
            "endingOffsets": self.ending_offsets or "latest",
        }


@dataclass(slots=True, frozen=True)
class BackfillConfig:
    """Everything ``python -m spark_jobs.backfill`` needs."""

    source: KafkaSource
    table: str
    range: KafkaRange
    fields: RecordFields = field(default_factory=RecordFields)
    window: WindowSpec | None = None  # fixed aggregate with this window; see ``spec``
    spec: AggregationSpec | None = None  # None and no window: the spec the table records
    python: str | None = None

    def __post_init__(self) -> None:
        check_table_path("--table", self.table)
