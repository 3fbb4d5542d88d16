"""The aggregation spec: what a user's Spark job computes, as YAML/JSON or Helm values.

One spec describes the input records (topics, format, declared schema with nested paths), the
derived columns and filter (Spark SQL expressions, checked by Spark's own parser when the plan
is compiled), the event time and watermark, the grouping and window, the named aggregates and
the Delta table's merge keys. :mod:`spark_jobs.plan` compiles it to the one Spark plan that the
streaming job and the backfill job share. A spec that does not hold together is refused here,
before Spark starts, with one line naming the field (:func:`load_spec`).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from spark_jobs.errors import JobConfigError
from spark_jobs.iceberg_output import IcebergOutput

INTERVAL = re.compile(r"^\s*[1-9]\d*\s+(second|minute|hour|day|week)s?\s*$")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_PATH = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
FIELD_TYPES = ("string", "int", "long", "double", "boolean", "timestamp")
AGGREGATES = (
    "count",
    "sum",
    "avg",
    "min",
    "max",
    "count_distinct",
    "approx_count_distinct",
    "percentile",
    "first",
    "last",
    "collect_set",
)
# Columns the plan itself adds; a user's column of the same name would be ambiguous.
RESERVED = frozenset({"event_time", "window_start", "window_end"})


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _name(value: str) -> str:
    if not _NAME.match(value):
        raise ValueError(f"{value!r} is not a column name (letters, digits, _)")
    if value in RESERVED:
        raise ValueError(f"{value!r} is reserved for the plan's own column")
    return value


def _interval(value: str) -> str:
    if not INTERVAL.match(value):
        raise ValueError(f'"{value}" is not an interval like "30 seconds" or "5 minutes"')
    return value.strip()


class InputField(_Model):
    """One declared field of the JSON records: its column name, type and JSON path."""

    name: str
    type: str
    path: str | None = None  # dotted JSON path, e.g. payment.amount; default: the name
    required: bool = True

    _check_name = field_validator("name")(_name)

    @field_validator("type")
    @classmethod
    def _known_type(cls, value: str) -> str:
        if value not in FIELD_TYPES:
            raise ValueError(f"unknown type {value!r}; one of {', '.join(FIELD_TYPES)}")
        return value

    @field_validator("path")
    @classmethod
    def _dotted(cls, value: str | None) -> str | None:
        if value is not None and not _PATH.match(value):
            raise ValueError(f"{value!r} is not a dotted JSON path like payment.amount")
        return value

    @property
    def json_path(self) -> str:
        return self.path or self.name


class InputRegistry(_Model):
    """Where ``format: avro`` finds its schemas (spark_jobs.avro_input). Basic auth only from
    ``BRIDGE_SCHEMA_REGISTRY__BASIC_AUTH``, never here."""

    url: str | None = None  # default: --registry-url, then $BRIDGE_SCHEMA_REGISTRY__URL
    subject: str | None = None  # default: <topic>-value


class InputSpec(_Model):
    """Where the records come from and what they hold: JSON text, or Avro behind a Schema
    Registry decoded to the same fields (``format: avro``)."""

    topics: list[str] = Field(default_factory=list)
    format: Literal["json", "avro"] = "json"
    registry: InputRegistry | None = None
    fields: list[InputField] = Field(min_length=1)

    @model_validator(mode="after")
    def _registry_for_avro(self) -> InputSpec:
        if self.registry is not None and self.format != "avro":
            raise ValueError("input.registry is for format: avro")
        return self


class Derived(_Model):
    """A column computed from others with a Spark SQL expression."""

    name: str
    expr: str = Field(min_length=1)

    _check_name = field_validator("name")(_name)


class EventTime(_Model):
    """The declared column holding event time (``long`` epoch ms or ``timestamp``)."""

    column: str
    watermark: str = "10 minutes"

    _check_watermark = field_validator("watermark")(_interval)


class Window(_Model):
    """Tumbling (``size``), hopping (``size`` + ``slide``) or session (``gap``) windows."""

    type: Literal["tumbling", "hopping", "session"]
    size: str | None = None
    slide: str | None = None
    gap: str | None = None

    @field_validator("size", "slide", "gap")
    @classmethod
    def _intervals(cls, value: str | None) -> str | None:
        return None if value is None else _interval(value)

    @model_validator(mode="after")
    def _shape(self) -> Window:
        wanted = {"tumbling": {"size"}, "hopping": {"size", "slide"}, "session": {"gap"}}[self.type]
        given = {k for k in ("size", "slide", "gap") if getattr(self, k) is not None}
        if given != wanted:
            raise ValueError(f"a {self.type} window takes {' and '.join(sorted(wanted))}")
        return self


class Aggregate(_Model):
    """One named aggregate of one column."""

    name: str
    fn: str
    column: str | None = None  # only count may omit it (counts rows)
    percentiles: list[float] | None = None  # percentile: one output column per value
    accuracy: int = Field(default=10_000, ge=1)  # percentile: percentile_approx accuracy
    rsd: float = Field(default=0.05, gt=0.0, le=0.39)  # approx_count_distinct
    limit: int = Field(default=100, ge=1)  # collect_set: at most this many (smallest) values

    _check_name = field_validator("name")(_name)

    @field_validator("fn")
    @classmethod
    def _known_fn(cls, value: str) -> str:
        if value not in AGGREGATES:
            raise ValueError(f"unknown aggregate {value!r}; one of {', '.join(AGGREGATES)}")
        return value

    @model_validator(mode="after")
    def _arguments(self) -> Aggregate:
        if self.column is None and self.fn != "count":
            raise ValueError(f"{self.fn} needs a column")
        if self.fn == "percentile":
            if not self.percentiles or not all(0.0 < p < 1.0 for p in self.percentiles):
                raise ValueError("percentile needs percentiles: a list of values in (0, 1)")
        elif self.percentiles is not None:
            raise ValueError("percentiles belong to fn: percentile only")
        return self

    def output_names(self) -> list[str]:
        """The table columns this aggregate writes: its name, or name_p<percent> each."""
        if self.fn != "percentile":
            return [self.name]
        return [f"{self.name}_p{_percent(p)}" for p in self.percentiles or []]


def _percent(p: float) -> str:
    return f"{p * 100:g}".replace(".", "_")


_TOPIC = re.compile(r"^[A-Za-z0-9._-]{1,249}$")


def _topic(value: str | None) -> str | None:
    if value is not None and not _TOPIC.match(value):
        raise ValueError(f"{value!r} is not a Kafka topic name (letters, digits, . _ -)")
    return value


class KafkaOutput(_Model):
    """The results also go to a Kafka topic, exactly once for read_committed readers: each
    micro-batch's rows and a marker with its batch id in one transaction
    (:mod:`spark_jobs.results`)."""

    topic: str
    batches_topic: str | None = None  # default: <topic>.batches (compacted)
    transactional_id: str | None = None  # default: eos-bridge-spark-<spec name>
    bootstrap_servers: str | None = None  # default: the job's --bootstrap

    _check_topics = field_validator("topic", "batches_topic")(_topic)

    @field_validator("transactional_id", "bootstrap_servers")
    @classmethod
    def _not_blank(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("must not be empty (leave it out for the default)")
        return value


class OutputSpec(_Model):
    """The Delta table: where (the command line's ``--table`` wins) and its merge keys; and,
    beside it, an optional Kafka results topic."""

    table: str | None = None
    merge_keys: list[str] | None = None  # default: group_by + window_start
    kafka: KafkaOutput | None = None
    iceberg: IcebergOutput | None = None


class AggregationSpec(_Model):
    """A whole job: input → derive → filter → event time → group/window → aggregates → table."""

    name: str = "aggregates"
    input: InputSpec
    derive: list[Derived] = Field(default_factory=list)
    filter: str | None = None
    event_time: EventTime | None = None
    group_by: list[str] = Field(default_factory=list)
    window: Window | None = None
    aggregates: list[Aggregate] = Field(default_factory=list)
    python: str | None = None  # module:function, DataFrame -> DataFrame, instead of aggregates
    output: OutputSpec = Field(default_factory=OutputSpec)
    # Rows that cannot be aggregated: kept with their offsets in <table>_bad_records by a
    # second streaming query (true), or only counted (a log line per micro-batch and the
    # summary's bad_records) and dropped, with no second query reading the topic again (false).
    bad_records: bool = True

    @model_validator(mode="after")
    def _consistent(self) -> AggregationSpec:
        known = self.column_names()
        _unique("input.fields/derive", known)
        if self.event_time is not None:
            _known_column("event_time.column", self.event_time.column, known)
            declared = {f.name: f.type for f in self.input.fields}
            if declared.get(self.event_time.column) not in ("long", "timestamp"):
                raise ValueError(
                    f"event_time.column {self.event_time.column!r} must be a declared field "
                    "of type long (epoch ms) or timestamp"
                )
        if self.window is not None and self.event_time is None:
            raise ValueError("a window needs event_time")
        for column in self.group_by:
            _known_column("group_by", column, known)
        if self.python is not None:
            return self._python_form()
        if not self.aggregates:
            raise ValueError("aggregates: give at least one (or python: module:function)")
        for agg in self.aggregates:
            if agg.column is not None:
                _known_column(f"aggregates.{agg.name}.column", agg.column, known)
            if agg.fn in ("first", "last") and self.event_time is None:
                raise ValueError(
                    f"aggregates.{agg.name}: {agg.fn} is by event time; set event_time"
                )
        _unique("group_by/aggregates output columns", self.output_columns())
        self._check_merge_keys()
        return self

    def _python_form(self) -> AggregationSpec:
        if self.aggregates:
            raise ValueError("python: and aggregates: exclude each other")
        if not self.output.merge_keys:
            raise ValueError(
                "output.merge_keys: required with python: (the function's key columns)"
            )
        return self

    def _check_merge_keys(self) -> None:
        wanted = self.default_merge_keys()
        if not wanted:
            raise ValueError("group_by is empty and there is no window: nothing to merge rows on")
        given = self.output.merge_keys
        if given is None:
            return
        missing = [k for k in wanted if k not in given]
        if missing:
            raise ValueError(
                f"output.merge_keys misses {', '.join(missing)}: the merge keys are the "
                f"group-by columns and the window start ({', '.join(wanted)})"
            )
        extra = [k for k in given if k not in wanted]
        if extra:
            raise ValueError(f"output.merge_keys: {', '.join(extra)} is not a group-by column")

    def column_names(self) -> list[str]:
        """Columns available to expressions, group_by and aggregates, in order."""
        return [f.name for f in self.input.fields] + [d.name for d in self.derive]

    def default_merge_keys(self) -> list[str]:
        return [*self.group_by, *(["window_start"] if self.window else [])]

    @property
    def merge_keys(self) -> list[str]:
        return list(self.output.merge_keys or self.default_merge_keys())

    def output_columns(self) -> list[str]:
        window = ["window_start", "window_end"] if self.window else []
        return [*self.group_by, *window, *(n for a in self.aggregates for n in a.output_names())]

    def shape(self) -> dict[str, Any]:
        """What fixes the meaning of the table's rows: stored with the table, compared at start."""
        return {
            "window": None if self.window is None else self.window.model_dump(exclude_none=True),
            "merge_keys": self.merge_keys,
            "aggregates": {a.name: a.model_dump(exclude={"name"}) for a in self.aggregates},
            "python": self.python,
        }


def _known_column(where: str, column: str, known: list[str]) -> None:
    if column not in known:
        raise ValueError(f"{where}: unknown column {column!r}; known: {', '.join(known)}")


def _unique(where: str, names: list[str]) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise ValueError(f"{where}: column {name!r} appears twice")
        seen.add(name)


def parse_spec(doc: Any, source: str = "spec") -> AggregationSpec:
    """Validate a spec given as a dict (a parsed file, Helm values); one-line errors."""
    try:
        return AggregationSpec.model_validate(doc)
    except ValidationError as exc:
        raise JobConfigError(f"{source}: {_one_line(exc)}") from None


def load_spec(path: str) -> AggregationSpec:
    """Read a YAML or JSON spec file (``--spec``)."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise JobConfigError(f"--spec {path}: cannot read it ({exc.strerror})") from None
    try:
        doc = json.loads(text) if path.endswith(".json") else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise JobConfigError(f"--spec {path}: not valid YAML/JSON ({first})") from None
    return parse_spec(doc, f"--spec {path}")


def _one_line(exc: ValidationError) -> str:
    """The first problem pydantic found, as ``where: what`` on one line."""
    error = exc.errors()[0]
    where = ".".join(str(part) for part in error["loc"])
    message = str(error["msg"]).removeprefix("Value error, ")
    more = exc.error_count() - 1
    suffix = f" (and {more} more)" if more else ""
    return f"{where}: {message}{suffix}" if where else f"{message}{suffix}"


_UNIT_SECONDS = {"second": 1, "minute": 60, "hour": 3600, "day": 86_400, "week": 604_800}


def interval_micros(interval: str) -> int:
    """``"30 seconds"`` → 30 000 000 (intervals are validated by :data:`INTERVAL`)."""
    count, unit = interval.split()
    return int(count) * _UNIT_SECONDS[unit.rstrip("s")] * 1_000_000
