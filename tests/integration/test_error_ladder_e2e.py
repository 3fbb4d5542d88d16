"""The error ladder end to end (real broker, bridge as a subprocess): a fenced producer is
re-created in-process, a fenced static membership joins again in-process once, a live twin
with our instance id is refused, a record the broker refuses goes to the dead-letter topic
while the bridge keeps committing."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from confluent_kafka import Consumer

from app.sink.output import H_CLASS, H_STEP
from tests.integration.conftest import MakeBridge
from tests.integration.test_bridge_eos import assert_exactly_once
from tests.support.bridge import (
    BridgeProcess,
    base_settings,
    bridge_topics,
    json_records,
    wait_caught_up,
)
from tests.support.kafka import KafkaFixture, wait_until

pytestmark = pytest.mark.integration


def _phase(kafka: KafkaFixture, src: str, start: int, n: int = 3000) -> None:
    values, keys = json_records(n, start=start)
    kafka.seed(src, values, keys)


def test_fenced_producer_is_recreated_in_process(kafka: KafkaFixture, bridges: MakeBridge) -> None:
    """A second producer with the bridge's transactional.id fences it, then goes away: the
    bridge makes a new producer (init_transactions), rewinds and goes on, never restarted."""
    src, out, dlq = bridge_topics(kafka)
    settings = base_settings(kafka, src, out, dlq)
    bridge = bridges(**settings).start()
    _phase(kafka, src, 0)
    wait_caught_up(kafka, settings["group_id"], src, 120, [bridge])

    names = _thread_names(bridge)
    intruder = kafka.transactional_producer(f"{settings['group_id']}-i0")  # bumps the epoch
    intruder.flush(10)
    del intruder  # ... and goes away

    _phase(kafka, src, 3000)
    wait_caught_up(kafka, settings["group_id"], src, 120, [bridge])
    logs = bridge.logs()
    assert "re-creating the producer (1/3 in a row)" in logs, logs[-3000:]
    assert bridge.running() and bridge.starts == 1
    # The old producer's librdkafka threads are gone (a long-running bridge re-creates its
    # producer after every fence; threads and fds must stay flat over hours).
    _wait_threads_back(bridge, names)
    assert bridge.terminate() == 0, bridge.logs()[-3000:]
    assert_exactly_once(kafka, src, out)
    assert kafka.read_all(dlq) == []


def test_a_fenced_membership_joins_again_in_process(
    kafka: KafkaFixture, bridges: MakeBridge
) -> None:
    """A consumer with the bridge's group.instance.id joins and goes away (as the coordinator's
    own stale membership does after a failover): the bridge is fenced once, closes what it
    built (its open transaction aborted, its stores closed) and joins again in the same
    process; its state and exactly once hold."""
    src, out, dlq = bridge_topics(kafka)
    settings = base_settings(kafka, src, out, dlq, pipeline="tests.state_pipelines:deduping")
    bridge = bridges(**settings).start()
    _phase(kafka, src, 0)
    wait_caught_up(kafka, settings["group_id"], src, 120, [bridge])

    names = _thread_names(bridge)
    twin = Consumer(
        {"bootstrap.servers": kafka.bootstrap, "group.id": settings["group_id"],
         "group.instance.id": "i0", "enable.auto.commit": False}
    )  # fmt: skip
    twin.subscribe([src])
    wait_until(lambda: bool(twin.poll(0.2) or twin.assignment()), 120, "the twin's assignment")
    twin.close()  # a static member leaves no LeaveGroup: the bridge rejoins in its place
    wait_until(lambda: "joining the group again in-process" in bridge.logs(), 120, "a rejoin")

    _phase(kafka, src, 3000)
    wait_caught_up(kafka, settings["group_id"], src, 120, [bridge])
    assert bridge.running() and bridge.starts == 1, bridge.logs()[-3000:]
    assert "fenced:" not in bridge.logs() and "Traceback" not in bridge.logs()
    # The closed clients' librdkafka threads are gone, not left for a garbage collection.
    _wait_threads_back(bridge, names)
    assert bridge.terminate() == 0, bridge.logs()[-3000:]
    assert_exactly_once(kafka, src, out)


def _wait_threads_back(bridge: BridgeProcess, names: list[str]) -> None:
    """No more threads than before (their names in the message when not: ``rdk:main`` is one
    per librdkafka client)."""
    wait_until(
        lambda: len(_thread_names(bridge)) <= len(names),
        60,
        f"threads back to {len(names)} {names} (now {_thread_names(bridge)})",
    )


def _thread_names(bridge: BridgeProcess) -> list[str]:
    """The names of the bridge's threads (librdkafka names its own ``rdk:…``)."""
    assert bridge.proc is not None
    names = []
    for task in Path(f"/proc/{bridge.proc.pid}/task").iterdir():
        try:
            names.append((task / "comm").read_text().strip())
        except OSError:  # the thread ended while we looked
            continue
    return sorted(names)


def test_live_twin_with_the_same_instance_id_is_refused(
    kafka: KafkaFixture, bridges: MakeBridge
) -> None:
    """Two live instances with one instance_id: one leaves with exit 5 and a line naming the
    id, the other keeps going; exactly once holds."""
    src, out, dlq = bridge_topics(kafka)
    settings = base_settings(kafka, src, out, dlq)
    # KIP-848: the refused twin waits the group's session timeout (+ 15 s) before exit 5
    settings["consumer"] = kafka.fast_handover(settings)
    first = bridges(**settings).start()
    _phase(kafka, src, 0)
    wait_caught_up(kafka, settings["group_id"], src, 120, [first])
    twin = bridges(**settings).start()

    pair = (first, twin)
    wait_until(lambda: any(not b.running() for b in pair), 120, "one of the twins to leave")
    gone = next(b for b in pair if not b.running())
    alive = next(b for b in pair if b is not gone)
    assert gone.wait(0) == 5, gone.logs()[-3000:]
    fenced = [line for line in gone.logs().splitlines() if "fenced:" in line]
    assert len(fenced) == 1 and "instance_id='i0'" in fenced[0], gone.logs()[-3000:]
    assert "Traceback" not in gone.logs()

    _phase(kafka, src, 3000)
    wait_caught_up(kafka, settings["group_id"], src, 120, [alive])
    assert alive.terminate() == 0, alive.logs()[-3000:]
    assert_exactly_once(kafka, src, out)


def test_record_refused_by_the_broker_goes_to_the_dlq(
    kafka: KafkaFixture, bridges: MakeBridge, tmp_path: Path
) -> None:
    """An output record under max_output_bytes but over a routed-to topic's
    max.message.bytes (a limit the bridge does not read at start): the broker refuses it; it
    ends in the DLQ once, whole, everything else in the output once, and the bridge keeps
    committing (no abort/replay livelock)."""
    src = kafka.create_topic(kafka.unique("in"), 2)
    out = kafka.create_topic(kafka.unique("out"), 2)
    side = kafka.create_topic(kafka.unique("side"), 1, {"max.message.bytes": "4000"})
    dlq = kafka.create_topic(kafka.unique("dlq"), 1)
    spec = tmp_path / "route.yaml"
    spec.write_text(f"steps:\n  - route: \"'{side}' if id == 'big' else None\"\n")
    values, keys = json_records(2000)
    big = orjson.dumps({"id": "big", "key": "user-7", "amount": 1, "pad": "x" * 8000})
    values[1000], keys[1000] = big, b"user-7"
    kafka.seed(src, values, keys)
    settings = base_settings(kafka, src, out, dlq, pipeline_spec=str(spec))
    bridge: BridgeProcess = bridges(**settings).start()
    wait_caught_up(kafka, settings["group_id"], src, 120, [bridge])

    dead = kafka.read_all(dlq)
    assert [r.value for r in dead] == [big], bridge.logs()[-3000:]
    assert dead[0].header(H_CLASS) == b"OutputRefused" and dead[0].header(H_STEP) == b"output"
    outputs = kafka.read_all(out)
    ids = sorted(orjson.loads(r.value)["id"] for r in outputs)
    assert ids == sorted(f"r{i}" for i in range(2000) if i != 1000)

    _phase(kafka, src, 5000, 500)  # and it keeps committing afterwards
    wait_caught_up(kafka, settings["group_id"], src, 120, [bridge])
    assert bridge.terminate() == 0, bridge.logs()[-3000:]
    assert len(kafka.read_all(out)) == 1999 + 500


def test_a_record_over_the_output_topics_limit_is_dead_lettered_before_it_is_sent(
    kafka: KafkaFixture, bridges: MakeBridge
) -> None:
    """The output topic's max.message.bytes is read at start: a record over it is an
    OutputTooLarge dead letter at once (no refused batch, no abort), whole in a DLQ that
    takes it."""
    src = kafka.create_topic(kafka.unique("in"), 2)
    out = kafka.create_topic(kafka.unique("out"), 2, {"max.message.bytes": "4000"})
    dlq = kafka.create_topic(kafka.unique("dlq"), 1)
    values, keys = json_records(2000)
    big = orjson.dumps({"id": "big", "key": "user-7", "amount": 1, "pad": "x" * 8000})
    values[1000], keys[1000] = big, b"user-7"
    kafka.seed(src, values, keys)
    settings = base_settings(kafka, src, out, dlq)
    bridge: BridgeProcess = bridges(**settings).start()
    wait_caught_up(kafka, settings["group_id"], src, 120, [bridge])
    assert bridge.terminate() == 0, bridge.logs()[-3000:]
    dead = kafka.read_all(dlq)
    assert [r.value for r in dead] == [big]
    assert dead[0].header(H_CLASS) == b"OutputTooLarge"
    assert len(kafka.read_all(out)) == 1999
    assert "aborting transaction" not in bridge.logs()


def test_a_hung_step_ends_the_process_before_the_transaction_times_out(
    kafka: KafkaFixture, bridges: MakeBridge
) -> None:
    """A step that never returns: the watchdog names it and exits 3 before the open
    transaction reaches transaction.timeout.ms; nothing of that transaction is visible."""
    src, out, dlq = bridge_topics(kafka, 1)
    settings = base_settings(
        kafka, src, out, dlq, pipeline="tests.pipelines:hangs", transaction_timeout_ms=6000
    )
    bridge = bridges(**settings).start()
    _phase(kafka, src, 0, 100)
    wait_caught_up(kafka, settings["group_id"], src, 120, [bridge])
    kafka.seed(src, [orjson.dumps({"id": "stuck", "hang": True})], [b"k"])
    assert bridge.wait(120) == 3, bridge.logs()[-3000:]
    line = next(ln for ln in bridge.logs().splitlines() if "did not return" in ln)
    assert "step 'hang'" in line and "transaction.timeout.ms" in line
    assert len(kafka.read_all(out)) == 100


def test_sigterm_is_honoured_while_the_loop_is_stuck(
    kafka: KafkaFixture, bridges: MakeBridge
) -> None:
    """SIGTERM while a step hangs: the process is gone within shutdown_timeout (exit 3)."""
    src, out, dlq = bridge_topics(kafka, 1)
    settings = base_settings(
        kafka, src, out, dlq, pipeline="tests.pipelines:hangs", shutdown_timeout=3
    )
    bridge = bridges(**settings).start()
    kafka.seed(src, [orjson.dumps({"id": "stuck", "hang": True})], [b"k"])
    wait_until(lambda: "blocking forever" in bridge.logs(), 120, "the step to hang", step=0.2)
    assert bridge.terminate(timeout=120) == 3, bridge.logs()[-3000:]
    line = next(ln for ln in bridge.logs().splitlines() if "SIGTERM not honoured" in ln)
    assert "shutdown_timeout=3s" in line and "step 'hang'" in line
