"""The one Spark plan a spec compiles to, shared by the streaming and the backfill job.

``raw Kafka rows → parse (declared fields; bad rows aside) → derive → filter → event time →
(watermark, streaming only) → group by + window → named aggregates``, or, in the Python form,
``… → event time → the user's function``. The backfill runs the very same functions on a batch
DataFrame, which is what makes "backfill over a range equals the stream" hold.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable
from dataclasses import dataclass

from pyspark.errors import PySparkException
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from spark_jobs.errors import JobConfigError
from spark_jobs.parse import ParsedRecords, parse_records, typed_schema
from spark_jobs.spec import Aggregate, AggregationSpec, Window

log = logging.getLogger("spark_jobs.plan")
Transform = Callable[[DataFrame], DataFrame]


@dataclass(slots=True, frozen=True)
class AggregationPlan:
    """A validated spec and, for the Python form, the user's function."""

    spec: AggregationSpec
    transform: Transform | None = None

    @classmethod
    def compile(cls, spec: AggregationSpec, python: str | None = None) -> AggregationPlan:
        """The plan of ``spec``; ``python`` (``module:function``) wins over ``spec.python``."""
        target = python or spec.python
        if target is not None and spec.python is None:
            spec = spec.model_copy(update={"python": target})
        return cls(spec, None if target is None else load_transform(target))

    @property
    def merge_keys(self) -> list[str]:
        return self.spec.merge_keys

    def parse(self, raw: DataFrame) -> ParsedRecords:
        column = None if self.spec.event_time is None else self.spec.event_time.column
        return parse_records(raw, self.spec.input.fields, column)

    @property
    def output_mode(self) -> str:
        """``update`` (each changed row, MERGEd), except session windows: Spark emits those
        only once closed (``append``), since a late row can merge two sessions into one."""
        window = self.spec.window
        return "append" if window is not None and window.type == "session" else "update"

    def records(self, good: DataFrame, streaming: bool) -> DataFrame:
        """Typed records → ``event_time`` (+ watermark on a stream) → derived columns → filter.

        Spark's optimiser pushes a filter below the watermark, so event time advances with
        the records the filter keeps (docs/spark.md, "Late data").
        """
        out = good
        event_time = self.spec.event_time
        if event_time is not None:
            ts = F.col(event_time.column)
            kind = dict(out.dtypes)[event_time.column]
            out = out.withColumn("event_time", F.timestamp_millis(ts) if kind == "bigint" else ts)
            if streaming:
                out = out.withWatermark("event_time", event_time.watermark)
        for d in self.spec.derive:
            out = _checked(f"derive.{d.name}", _with_column(out, d.name, d.expr))
        if self.spec.filter is not None:
            out = _checked("filter", _where(out, self.spec.filter))
        return out

    def aggregate(self, records: DataFrame) -> DataFrame:
        """The result rows of typed :meth:`records`."""
        if self.transform is not None:
            target = self.spec.python
            return _checked(f"python {target}", lambda: _call(self.transform, records, target))
        return _checked("aggregates", lambda: self._grouped(records))

    def rows(self, raw: DataFrame, streaming: bool) -> tuple[ParsedRecords, DataFrame]:
        """Parsed records and the aggregate rows of ``raw`` Kafka rows."""
        parsed = self.parse(raw)
        return parsed, self.aggregate(self.records(parsed.good, streaming))

    def output_schema(self, spark: SparkSession) -> StructType:
        """The result's schema, found by analysing the plan over no rows; checks every
        expression and column with Spark's own parser and analyser before any data is read."""
        empty = spark.createDataFrame([], typed_schema(self.spec.input.fields))
        schema = self.aggregate(self.records(empty, streaming=False)).schema
        missing = [k for k in self.merge_keys if k not in schema.fieldNames()]
        if missing:
            raise JobConfigError(
                f"output.merge_keys: {', '.join(missing)} not among the result's columns "
                f"({', '.join(schema.fieldNames())})"
            )
        return schema

    def _grouped(self, records: DataFrame) -> DataFrame:
        keys: list[Column] = [F.col(c) for c in self.spec.group_by]
        if self.spec.window is not None:
            keys.append(window_column(self.spec.window).alias("w"))
        grouped = records.groupBy(*keys).agg(*[c for a in self.spec.aggregates for c in _agg(a)])
        window = (
            [F.col("w.start").alias("window_start"), F.col("w.end").alias("window_end")]
            if self.spec.window is not None
            else []
        )
        return grouped.select(
            *self.spec.group_by, *window, *[c for a in self.spec.aggregates for c in _out(a)]
        )


def window_column(window: Window) -> Column:
    """Spark's window grouping expression over ``event_time``."""
    if window.type == "session":
        return F.session_window("event_time", str(window.gap))
    if window.type == "hopping":
        return F.window("event_time", str(window.size), str(window.slide))
    return F.window("event_time", str(window.size))


def _agg(a: Aggregate) -> list[Column]:
    """The aggregate expression(s) of ``a`` inside ``agg``."""
    col = F.col(a.column) if a.column is not None else F.lit(1)
    match a.fn:
        case "count":
            expr = F.count(col)
        case "sum":
            expr = F.sum(col)
        case "avg":
            expr = F.avg(col)
        case "min":
            expr = F.min(col)
        case "max":
            expr = F.max(col)
        case "count_distinct":
            # Exact; countDistinct is not supported on streams, a set of the values is.
            expr = F.size(F.collect_set(col))
        case "approx_count_distinct":
            expr = F.approx_count_distinct(col, a.rsd)
        case "percentile":
            expr = F.percentile_approx(col, list(a.percentiles or []), a.accuracy)
            return [expr.alias(f"__pct_{a.name}")]
        case "first":
            expr = F.min_by(col, F.col("event_time"))
        case "last":
            expr = F.max_by(col, F.col("event_time"))
        case "collect_set":
            expr = F.slice(F.array_sort(F.collect_set(col)), 1, a.limit)
        case _:  # pragma: no cover - the spec refuses unknown names
            raise JobConfigError(f"aggregates.{a.name}: unknown aggregate {a.fn!r}")
    return [expr.alias(a.name)]


def _out(a: Aggregate) -> list[Column]:
    """The result column(s) of ``a`` after ``agg``."""
    if a.fn != "percentile":
        return [F.col(a.name)]
    pct = F.col(f"__pct_{a.name}")
    return [pct[i].alias(name) for i, name in enumerate(a.output_names())]


def _with_column(frame: DataFrame, name: str, expr: str) -> Callable[[], DataFrame]:
    return lambda: frame.withColumn(name, F.expr(expr))


def _where(frame: DataFrame, condition: str) -> Callable[[], DataFrame]:
    return lambda: frame.where(F.expr(condition))


def _checked(where: str, build: Callable[[], DataFrame]) -> DataFrame:
    """Run one plan step; Spark's parse/analysis errors become one line naming the step."""
    try:
        return build()
    except PySparkException as exc:
        log.debug("%s refused by Spark", where, exc_info=True)
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise JobConfigError(f"spec {where}: {first}") from None


def _call(transform: Transform | None, records: DataFrame, target: str | None) -> DataFrame:
    assert transform is not None
    result = transform(records)
    if not isinstance(result, DataFrame):
        raise JobConfigError(f"python {target}: returned {type(result).__name__}, not a DataFrame")
    return result


def load_transform(target: str) -> Transform:
    """Import ``module:function`` (as the bridge's ``--pipeline`` does)."""
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise JobConfigError(f"python {target!r} must look like module:function")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise JobConfigError(f"python {target}: cannot import {module_name} ({exc})") from None
    function = getattr(module, attr, None)
    if not callable(function):
        raise JobConfigError(f"python {target}: {module_name} has no function {attr}")
    return function  # type: ignore[no-any-return]
