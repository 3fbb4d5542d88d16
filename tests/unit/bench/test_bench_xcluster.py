"""The cross-cluster and bytes-passthrough contenders of the benchmark: which pipelines each
runs, and the settings the bridge gets (no broker, no timings)."""

from __future__ import annotations

from pathlib import Path

from bench.contenders import BY_KEY, COPY, Job, bridge_env
from bench.contenders.mm2 import output_topic, properties


def _job(pipeline: str, target: str | None = None) -> Job:
    return Job("src:9092", pipeline, "in", "out", "g", 1.0, Path("/tmp/s"), target=target)


def test_only_contenders_that_copy_without_parsing_run_the_copy_pipeline() -> None:
    copying = {key for key, c in BY_KEY.items() if c.runs(COPY)}
    assert copying == {
        "bridge-eos", "bridge-eos-pipe", "bridge-alo", "xc-bridge-eos", "raw-copy", "mm2-eos",
    }  # fmt: skip
    assert [p for p in ("p1", "p2", "p3", COPY) if BY_KEY["mm2-eos"].runs(p)] == [COPY]
    assert {p for p in ("p1", "p2", "p3", COPY) if BY_KEY["xc-bridge-eos"].runs(p)} == {"p1", COPY}
    assert all(c.runs("p2") for key, c in BY_KEY.items() if not c.xcluster)


def test_copy_is_bytes_in_bytes_out_and_a_target_is_the_second_cluster() -> None:
    one = bridge_env(_job(COPY), "exactly-once")
    assert "BRIDGE_PIPELINE" not in one
    assert (one["BRIDGE_INPUT_FORMAT"], one["BRIDGE_OUTPUT_FORMAT"]) == ("bytes", "bytes")
    assert "BRIDGE_TARGET__BOOTSTRAP_SERVERS" not in one
    two = bridge_env(_job("p1", target="tgt:9092"), "exactly-once")
    assert two["BRIDGE_TARGET__BOOTSTRAP_SERVERS"] == "tgt:9092"
    assert two["BRIDGE_BOOTSTRAP_SERVERS"] == "src:9092"
    assert two["BRIDGE_PIPELINE"] == "bench.pipelines:p1"


def test_mirrormaker_copies_exactly_once_to_a_topic_named_by_its_run() -> None:
    job = _job(COPY, target="tgt:9092")
    text = properties(job)
    config = dict(line.split(" = ", 1) for line in text.splitlines())
    assert config["g.bootstrap.servers"] == "src:9092"
    assert config["target.bootstrap.servers"] == "tgt:9092"
    assert config["g->target.topics"] == "in"
    assert config["target.exactly.once.source.support"] == "enabled"
    assert config["dedicated.mode.enable.internal.rest"] == "true"
    assert output_topic("bench-copy-x.1", "in") == "bench-copy-x-1.in"
