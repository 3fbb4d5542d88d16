"""Quix Streams 3.28 running the same pipelines: ``sdf.filter(...).apply(...).to_topic(...)``.

P2 counts with the State API (``apply(..., stateful=True)``), P3 with
``tumbling_window(...).agg(value=Sum("amount")).final()``. Stops on SIGTERM (Quix's handler).
With ``--registry``, values are Avro through Quix's own serializers
(``quixstreams.models.serializers.avro``, confluent-kafka's underneath): the input read by
writer schema ID, the output written with ``--schema`` registered under ``<output>-value``.

Runs in Quix's own virtualenv (``make quix-venv``: Quix pins an older confluent-kafka than the
bridge runs), started by :mod:`bench.contenders`. Quix runs as shipped;
``BENCH_QUIX_CONSUMER_EXTRA`` (JSON librdkafka settings) passes extra consumer settings to check
how much a setting would change it.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
from pathlib import Path
from typing import Any

from quixstreams import Application, State, message_context
from quixstreams.dataframe.windows.aggregations import Sum

from bench.transforms import WINDOW_SECONDS, enrich, keep


def count(value: Any, key: Any, _ts: int, _headers: Any, state: State) -> dict[str, Any]:
    total = state.get("count", 0) + 1
    state.set("count", total)
    ctx = message_context()
    return {
        "key": key.decode() if isinstance(key, bytes) else key, "count": total,
        "_source_topic": ctx.topic, "_source_partition": ctx.partition,
        "_source_offset": ctx.offset,
    }  # fmt: skip


def value_serdes(args: argparse.Namespace) -> tuple[Any, Any]:
    """The input's value deserializer and the output's value serializer: JSON, or Avro."""
    if not args.registry:
        return "json", "json"
    from quixstreams.models.serializers.avro import AvroDeserializer, AvroSerializer
    from quixstreams.models.serializers.schema_registry import SchemaRegistryClientConfig

    registry = SchemaRegistryClientConfig(url=args.registry)
    schema = json.loads(Path(args.schema).read_text())
    return AvroDeserializer(schema_registry_client_config=registry), AvroSerializer(
        schema, schema_registry_client_config=registry
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    for name in ("--bootstrap", "--input", "--output", "--group", "--pipeline", "--state-dir"):
        parser.add_argument(name, required=True)
    parser.add_argument("--commit-interval", type=float, default=1.0)
    parser.add_argument("--guarantee", choices=["exactly-once", "at-least-once"], required=True)
    parser.add_argument("--registry", help="Avro values: the Schema Registry URL")
    parser.add_argument("--schema", help="Avro values: the output schema (.avsc)")
    args = parser.parse_args()
    loads, dumps = value_serdes(args)

    app = Application(
        broker_address=args.bootstrap,
        consumer_group=args.group,
        processing_guarantee=args.guarantee,
        commit_interval=args.commit_interval,
        auto_offset_reset="earliest",
        state_dir=args.state_dir,
        loglevel=logging.WARNING,
        consumer_extra_config=json.loads(os.environ.get("BENCH_QUIX_CONSUMER_EXTRA", "{}")),
    )
    source = app.topic(args.input, key_deserializer="bytes", value_deserializer=loads)
    sink = app.topic(args.output, key_serializer="bytes", value_serializer=dumps)
    sdf = app.dataframe(source)
    if args.pipeline == "p1":
        sdf = sdf.filter(keep).apply(enrich)
    elif args.pipeline == "p2":
        sdf = sdf.apply(count, stateful=True, metadata=True)
    else:
        sdf = sdf.tumbling_window(duration_ms=WINDOW_SECONDS * 1000).agg(value=Sum("amount"))
        sdf = sdf.final()
    sdf.to_topic(sink)
    app.run()


if __name__ == "__main__":
    main()
