"""The jobs' original fixed aggregate, expressed as a spec: the default job and the demo's.

Per key and tumbling window: ``record_count``, ``amount_sum``, ``distinct_ids``
(approximate) and ``amount_p50/p95/p99``, from JSON records with ``id``, ``key``, ``amount``
and ``ts`` (epoch ms) fields, whose names the command line may change.
"""

from __future__ import annotations

from spark_jobs.config import RecordFields, WindowSpec
from spark_jobs.spec import (
    Aggregate,
    AggregationSpec,
    EventTime,
    InputField,
    InputSpec,
    Window,
)

PERCENTILES = (0.5, 0.95, 0.99)
# Spark's default; with fewer rows per group than this every sample is kept, so exact.
PERCENTILE_ACCURACY = 10_000


def fixed_spec(
    fields: RecordFields | None = None, window: WindowSpec | None = None
) -> AggregationSpec:
    """The spec of the default job for these field names and window settings."""
    fields = fields or RecordFields()
    window = window or WindowSpec()
    return AggregationSpec(
        input=InputSpec(
            fields=[
                InputField(name="id", type="string", path=fields.id),
                InputField(name="key", type="string", path=fields.key),
                InputField(name="amount", type="double", path=fields.amount),
                InputField(name="ts", type="long", path=fields.ts),
            ]
        ),
        event_time=EventTime(column="ts", watermark=window.watermark),
        group_by=["key"],
        window=Window(type="tumbling", size=window.size),
        aggregates=[
            Aggregate(name="record_count", fn="count"),
            Aggregate(name="amount_sum", fn="sum", column="amount"),
            Aggregate(
                name="distinct_ids",
                fn="approx_count_distinct",
                column="id",
                rsd=window.distinct_rsd,
            ),
            Aggregate(
                name="amount",
                fn="percentile",
                column="amount",
                percentiles=list(PERCENTILES),
                accuracy=PERCENTILE_ACCURACY,
            ),
        ],
    )
