"""``make demo``: the bridge on an embedded local Kafka, killed mid-run, audited.

Starts a broker, feeds live traffic (a few malformed records among it), runs the bridge,
SIGKILLs it at a random point *inside an open transaction*, restarts it, waits until it caught
up, stops it with SIGTERM, shows what the kill left behind (records only a read_uncommitted
reader sees) and runs ``verify``. Ends with the Spark aggregation over the committed output
when Spark is installed. Its working directory is removed at the end unless something failed.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import orjson

from app.kafka.topics import create_topic, end_offsets, read_all, seed
from app.offsets.group import committed_offsets
from app.ops.logs import librdkafka_logging
from devkit.kafka import LocalKafka

REPO = Path(__file__).resolve().parents[1]
RECORDS, BATCH, PARTITIONS = 60_000, 3_000, 4
IN, OUT, DLQ, GROUP = "payments", "payments-enriched", "payments-enriched.dlq", "demo"
# What the demo prints is its own lines; its Kafka clients' librdkafka lines (a transient
# "GETPID ... Coordinator load in progress: retrying" while the broker starts) go to DEBUG, as
# the bridge's start-up checks do; the bridge's own log is bridge.log, kept if anything fails.
QUIET = librdkafka_logging(reported_elsewhere=True)
DISTINCT_NOTE = (
    "demo: distinct_ids is approx_count_distinct (HyperLogLog, relative error ~5%): in a window "
    "with few records it can exceed record_count; the counts and sums are exact"
)


def _quiet(bootstrap: str) -> dict[str, object]:
    """The demo's own clients of ``bootstrap``: librdkafka's log lines at DEBUG."""
    return {"bootstrap.servers": bootstrap, **QUIET}


def _traffic(bootstrap: str, done: threading.Event) -> None:
    """Live input: JSON payments in batches, a few malformed or poison records among them."""
    rng = random.Random(7)
    base = int(time.time() * 1000)
    for start in range(0, RECORDS, BATCH):
        values, keys = [], []
        for i in range(start, start + BATCH):
            user = f"user-{rng.randrange(500)}"
            if i % 10_007 == 5:
                values.append(b"{this is not json")  # undecodable -> DLQ
            elif i % 12_011 == 9:
                values.append(orjson.dumps({"id": f"p{i}", "user": user, "amount": "n/a"}))
            else:
                kind = "refund" if i % 50 == 0 else "payment"
                amount = round(rng.uniform(1, 500), 2)
                values.append(
                    orjson.dumps(
                        {
                            "id": f"p{i}",
                            "user": user,
                            "kind": kind,
                            "amount": amount,
                            "ts": base + i,
                        }
                    )
                )
            keys.append(user.encode())
        seed(_quiet(bootstrap), IN, values, keys)
        time.sleep(0.25)
    done.set()


def _bridge(bootstrap: str, state_dir: Path, log: Path) -> subprocess.Popen[bytes]:
    env = dict(
        os.environ,
        BRIDGE_BOOTSTRAP_SERVERS=bootstrap,
        BRIDGE_INPUT_TOPICS=IN,
        BRIDGE_OUTPUT_TOPIC=OUT,
        BRIDGE_GROUP_ID=GROUP,
        BRIDGE_INSTANCE_ID="demo-0",
        BRIDGE_PIPELINE_SPEC=str(REPO / "examples" / "demo-pipeline.yaml"),
        BRIDGE_STATE_DIR=str(state_dir),
        BRIDGE_COMMIT_INTERVAL="0.5",
        BRIDGE_HTTP_PORT="0",
    )
    with open(log, "ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "app", "run"], env=env, stdout=out, stderr=subprocess.STDOUT
        )


def _committed(bootstrap: str) -> int:
    return sum(max(0, o) for o in committed_offsets(_quiet(bootstrap), GROUP, IN).values())


def _progress(bootstrap: str) -> float:
    ends = end_offsets(_quiet(bootstrap), IN)
    done = committed_offsets(_quiet(bootstrap), GROUP, IN)
    return sum(max(0, done.get(p, 0)) for p in ends) / max(1, sum(ends.values()))


def _wait(condition: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise SystemExit(f"demo: timed out waiting for {what}")
        time.sleep(0.2)


def _open_records(bootstrap: str) -> int:
    """Output records inside an open transaction (high watermark minus last stable offset)."""
    hw, lso = end_offsets(_quiet(bootstrap), OUT, False), end_offsets(_quiet(bootstrap), OUT, True)
    return sum(hw[p] - lso.get(p, 0) for p in hw)


def _kill_inside_a_transaction(bootstrap: str, bridge: subprocess.Popen[bytes]) -> None:
    """SIGKILL at a random point, once an open transaction holds output records."""
    share = random.uniform(0.15, 0.6)
    _wait(lambda: _committed(bootstrap) > RECORDS * share, 180, f"{share:.0%} committed")
    _wait(lambda: _open_records(bootstrap) > 0, 60, "an open transaction")
    bridge.send_signal(signal.SIGKILL)
    bridge.wait()
    print(
        f"demo: SIGKILL the bridge with {_open_records(bootstrap)} output records in an open "
        f"transaction, {_committed(bootstrap)} of {RECORDS} inputs committed",
        flush=True,
    )


def _leftovers(bootstrap: str) -> None:
    """What the kill left: records a read_uncommitted reader sees and read_committed never."""
    committed = len(read_all(_quiet(bootstrap), OUT, read_committed=True))
    everything = len(read_all(_quiet(bootstrap), OUT, read_committed=False))
    print(
        f"demo: output topic: read_uncommitted sees {everything} records, read_committed "
        f"{committed}: {everything - committed} aborted records, 0 of them visible to "
        f"read_committed readers",
        flush=True,
    )


def main() -> int:
    work = Path(tempfile.mkdtemp(prefix="eos-bridge-demo-"))
    print(f"demo: starting a local Kafka broker under {work} (first run: Maven fetches the jars)")
    with LocalKafka(work / "kafka") as kafka:
        bootstrap = kafka.bootstrap
        print(f"demo: broker up at {bootstrap}; topics {IN} -> {OUT} (+ {DLQ})", flush=True)
        create_topic(_quiet(bootstrap), IN, PARTITIONS)
        create_topic(_quiet(bootstrap), OUT, PARTITIONS)
        create_topic(_quiet(bootstrap), DLQ, 1)
        fed = threading.Event()
        feeder = threading.Thread(target=_traffic, args=(bootstrap, fed), daemon=True)
        feeder.start()
        log = work / "bridge.log"
        bridge = _bridge(bootstrap, work / "state", log)
        print(f"demo: bridge running, {RECORDS} payments arriving in batches", flush=True)
        _kill_inside_a_transaction(bootstrap, bridge)
        bridge = _bridge(bootstrap, work / "state", log)
        print("demo: bridge restarted with the same instance id (fences the killed one)")
        _wait(fed.is_set, 300, "the traffic to end")
        _wait(lambda: _progress(bootstrap) >= 1.0, 300, "the bridge to catch up")
        bridge.send_signal(signal.SIGTERM)
        code = bridge.wait(60)
        print(f"demo: bridge stopped with SIGTERM, exit code {code}")
        _leftovers(bootstrap)
        verify = [
            sys.executable, "-m", "app", "verify", "--bootstrap", bootstrap,
            "--input", IN, "--output", OUT, "--dlq", DLQ, "--id-field", "id",
        ]  # fmt: skip
        print("demo: verify ->", end=" ", flush=True)
        audit = subprocess.run(verify, check=False)
        spark = _spark_summary(bootstrap, work)
        dead = _dead_letters(bootstrap)
    failed = audit.returncode or spark or code or dead
    if failed:
        print(f"demo: something failed; logs kept under {work} (bridge log: {log})")
    else:
        shutil.rmtree(work, ignore_errors=True)
    return failed


def _dead_letters(bootstrap: str) -> int:
    """The dead letters the malformed records became: ``dlq summary``, the next command."""
    print(f"demo: the malformed records, in {DLQ} -> eos-bridge dlq summary {DLQ}", flush=True)
    summary = [sys.executable, "-m", "app", "dlq", "summary", DLQ, "--bootstrap", bootstrap]
    return subprocess.run(summary, check=False).returncode


def _spark_summary(bootstrap: str, work: Path) -> int:
    """Aggregate the committed output with the Spark streaming job (available-now)."""
    try:
        from spark_jobs.stream import main as spark_stream
    except ImportError:
        print("demo: the spark extra is not installed; skipping the aggregation")
        return 0
    print("demo: Spark aggregation of the committed output (per user and minute):", flush=True)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # the broker is on loopback too
    spark = work / "spark"
    args = [
        "--bootstrap", bootstrap, "--topic", OUT, "--key-field", "user", "--window", "1 minute",
        "--table", str(spark / "aggregates"), "--checkpoint", str(spark / "checkpoint"),
        "--show", "10", "--spark-log-level", "ERROR",
    ]  # fmt: skip
    code = spark_stream(args)
    print(DISTINCT_NOTE, flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
