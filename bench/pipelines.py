"""The eos-bridge side of each benchmark pipeline (``BRIDGE_PIPELINE=bench.pipelines:p1``)."""

from __future__ import annotations

import os

from app.pipeline import Pipeline
from bench.transforms import WINDOW_SECONDS, enrich, keep

# P1: filter + map on ~200-byte JSON.
p1 = Pipeline().filter(keep).map(enrich)

# P2: count by key (the Kafka key; 100k distinct keys in the input).
p2 = Pipeline().count(name="count")

# P3: tumbling window, sum of ``amount`` per key, one final result per closed window.
p3 = Pipeline().window(size=WINDOW_SECONDS).aggregate("sum", of="amount")

# P2r: P2 counted by a value field (``user``, which the bench's key also is, so the counts
# equal P2's) that the pipeline cannot know is the key: regrouped through a repartition topic
# (docs/state.md, Regrouping); Kafka Streams' groupBy + count repartitions the same way.
p2r = Pipeline().key_by(lambda v: v["user"]).count(name="count")

PIPELINES = {"p1": p1, "p2": p2, "p2r": p2r, "p3": p3}

# Routes (python -m bench.bench_routes): every record named-routed to the run's output topic
# (it exists: the route check is a cache hit), or to a topic that does not exist (each record
# is dead-lettered as UnknownRouteTopic; the bench's dead-letter topic is the output topic).
ROUTE_MISSING = "bench-route-missing"
route_existing = Pipeline().route(lambda v: os.environ["BRIDGE_OUTPUT_TOPIC"])
route_missing = Pipeline().route(lambda v: ROUTE_MISSING)
