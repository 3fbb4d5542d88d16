"""Kafka rows → typed records of the declared fields, and the rows that cannot be typed, with
the reason.

Nothing is dropped here: every input row lands in exactly one of ``good`` and ``bad``.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass
from functools import reduce
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    BooleanType,
    DataType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from spark_jobs.avro_input import DECODE_ERROR
from spark_jobs.spec import InputField

# Event times outside [1970, 9999] cannot be a Spark timestamp; such rows are bad, not fatal.
MAX_TS_MS = 253_402_300_799_999
SPARK_TYPES: dict[str, DataType] = {
    "string": StringType(),
    "int": IntegerType(),
    "long": LongType(),
    "double": DoubleType(),
    "boolean": BooleanType(),
    "timestamp": TimestampType(),
}

# Rows that could not be aggregated, kept with where they came from and why.
BAD_RECORD_SCHEMA = StructType(
    [
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("kafka_timestamp", TimestampType()),
        StructField("kafka_key", StringType()),
        StructField("value", StringType()),
        StructField("error", StringType()),
    ]
)


def record_schema(fields: Sequence[InputField]) -> StructType:
    """The declared JSON schema of one record, nested along the fields' paths."""
    tree: dict[str, Any] = {}
    for f in fields:
        *parents, leaf = f.json_path.split(".")
        node = tree
        for part in parents:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ValueError(f"input.fields: {f.json_path} is below a non-object field")
        node[leaf] = SPARK_TYPES[f.type]
    return _struct(tree)


def _struct(tree: dict[str, Any]) -> StructType:
    return StructType(
        [
            StructField(name, _struct(sub) if isinstance(sub, dict) else sub)
            for name, sub in tree.items()
        ]
    )


def typed_schema(fields: Sequence[InputField]) -> StructType:
    """The flat columns of a good record (``event_time`` is added by the plan)."""
    return StructType([StructField(f.name, SPARK_TYPES[f.type]) for f in fields])


@dataclass(slots=True, frozen=True)
class ParsedRecords:
    """``good``: the declared fields as columns. ``bad``: the raw row, where it was, and why."""

    good: DataFrame
    bad: DataFrame


def parse_records(
    raw: DataFrame, fields: Sequence[InputField], event_time: str | None = None
) -> ParsedRecords:
    """Split Kafka rows (``key``, ``value``, ``topic``, ...) into typed and rejected records.

    ``event_time`` names the declared field whose epoch-ms values must be a valid timestamp.
    """
    value = F.col("value").cast("string")
    # A registry source (spark_jobs.avro_input) says why a value did not decode.
    decode_error = F.col(DECODE_ERROR) if DECODE_ERROR in raw.columns else F.lit(None)
    texts = raw.select(
        "topic",
        "partition",
        "offset",
        F.col("timestamp").alias("kafka_timestamp"),
        F.col("key").cast("string").alias("kafka_key"),
        value.alias("value"),
        decode_error.cast("string").alias(DECODE_ERROR),
    )
    # Each parse of the text at most once per row, as the output of a generator (one row in,
    # one out): through plain projections Spark's optimiser substituted each parse into each
    # of its uses, some 20 parses of every row in the good rows' filter alone, but it cannot
    # push the filters on ``error`` below a generator.
    typed = texts.select("*", _once(F.from_json(F.col("value"), record_schema(fields)).alias("r")))
    # The raw texts only tell a missing field from a mistyped one or from a non-object: a row
    # whose declared fields are all there and typed (nearly every row) is not parsed again.
    fine = _fine(fields, event_time)
    suspects, good_rows = typed, None
    if all(f.required for f in fields):
        # Then a fine row is good and any other is bad (:func:`_error`): the good rows skip
        # the raw texts' generator and the diagnosis, and the bad ones are sought among the
        # rows that are not fine only (``fine`` is never NULL).
        decoded = F.col(DECODE_ERROR).isNull()
        suspects, good_rows = typed.where(~(fine & decoded)), typed.where(fine & decoded)
    raw_texts = [
        # The text as a JSON object of raw field texts: NULL exactly when the value is not a
        # JSON object, and a field's entry tells "absent or null" from "present, wrong type".
        F.when(~fine, F.from_json(F.col("value"), _RAW_OBJECT)).alias("raw"),
        *[
            F.when(~fine, F.get_json_object(F.col("value"), f"$.{f.json_path}")).alias(_text_of(f))
            for f in fields
            if "." in f.json_path
        ],
    ]
    checked = suspects.select("*", _once(*raw_texts)).withColumn(
        "error", F.coalesce(F.col(DECODE_ERROR), _error(fields, event_time))
    )
    if good_rows is None:
        good_rows = checked.where(F.col("error").isNull())
    good = good_rows.select(*[_typed(f).alias(f.name) for f in fields])
    bad = checked.where(F.col("error").isNotNull()).select(
        "topic", "partition", "offset", "kafka_timestamp", "kafka_key", "value", "error"
    )
    return ParsedRecords(good=good, bad=bad)


# Every value of an object as its JSON text (Spark renders any token as a string field).
_RAW_OBJECT = "map<string,string>"


def _typed(f: InputField) -> Column:
    column = F.col("r")
    for part in f.json_path.split("."):
        column = column.getField(part)
    return column


def _once(*columns: Column) -> Column:
    """``columns`` as the output of a generator of one row per row (see :func:`parse_records`)."""
    return F.inline(F.array(F.struct(*columns)))


def _text_of(f: InputField) -> str:
    """The column holding a nested field's raw JSON text (see :func:`parse_records`)."""
    return f"__text_{f.name}"


def _present(f: InputField) -> Column:
    """The field is in the object with a non-null value (of any type). A typed value says so
    even where the raw texts do not: ``get_json_object`` returns NULL for text with ``NaN``."""
    if "." not in f.json_path:
        return _typed(f).isNotNull() | F.col("raw").getItem(f.json_path).isNotNull()
    return _typed(f).isNotNull() | F.col(_text_of(f)).isNotNull()


def _names(columns: list[tuple[Column, str]]) -> Column:
    return F.concat_ws(", ", *[F.when(cond, F.lit(name)) for cond, name in columns])


def _fine(fields: Sequence[InputField], event_time: str | None) -> Column:
    """Every declared field is in the typed record (so present and of its type) and no value
    is out of bounds: the row is good, whatever its raw texts say."""
    checks = [_typed(f).isNotNull() for f in fields]
    checks += [~fault for fault, _ in _value_faults(fields, event_time)]
    return reduce(operator.and_, checks)


def _value_faults(fields: Sequence[InputField], event_time: str | None) -> list[tuple[Column, str]]:
    """Typed values that cannot be aggregated, each with its reason."""
    faults = [
        (F.isnan(_typed(f)) | (F.abs(_typed(f)) == float("inf")), f"{f.json_path} is not finite")
        for f in fields
        if f.type == "double"
    ]
    faults += [
        ((_typed(f) < 0) | (_typed(f) > MAX_TS_MS), f"{f.json_path} out of range")
        for f in fields
        if f.name == event_time and f.type == "long"
    ]
    return faults


def _error(fields: Sequence[InputField], event_time: str | None) -> Column:
    """Why a row cannot be aggregated, or NULL when it can.

    Since Spark 3.0 ``from_json`` turns malformed text into a struct of NULL fields rather than
    NULL, so the typed struct alone cannot tell malformed JSON from a wrong type. ``raw`` (the
    object as a map) is NULL for anything that is not a JSON object, and ``get_json_object``
    then separates valid non-object JSON (``42``, ``[1]``, ``null``) from text that is not JSON.
    A :func:`_fine` row has no ``raw`` (it was not needed) and no error.
    """
    missing = _names([(~_present(f), f.json_path) for f in fields if f.required])
    mistyped = _names([(_present(f) & _typed(f).isNull(), f.json_path) for f in fields])
    value, raw = F.col("value"), F.col("raw")
    error = (
        F.when(_fine(fields, event_time), F.lit(None).cast("string"))
        .when(value.isNull(), F.lit("null value"))
        .when(raw.isNull() & F.get_json_object(value, "$").isNotNull(), F.lit("not a JSON object"))
        .when(raw.isNull(), F.lit("malformed JSON"))
        .when(
            (missing != "") | (mistyped != ""),
            F.concat_ws(
                "; ",
                F.when(missing != "", F.concat(F.lit("missing: "), missing)),
                F.when(mistyped != "", F.concat(F.lit("wrong type: "), mistyped)),
            ),
        )
    )
    for fault, reason in _value_faults(fields, event_time):
        error = error.when(fault, F.lit(reason))
    return error
