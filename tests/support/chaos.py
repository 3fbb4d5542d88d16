"""The chaos rig: a 3-broker cluster behind Toxiproxy, a supervisor, a live reader, the oracle.

Every chaos scenario and the nemesis (tests/chaos/) share these pieces:

* :class:`Rig` — one 3-broker cluster (RF 3, min ISR 2, unclean election off) whose brokers
  also advertise a Toxiproxy port each, plus helpers naming the broker that leads a partition,
  coordinates a transactional.id or coordinates a group.
* :class:`Supervisor` — restarts a bridge that exited 3 (fatal Kafka error) or 5 (instance id
  fenced), as Kubernetes would; any other exit fails the test.
* :class:`Watcher` — a read_committed reader running *during* the faults; it must never see a
  duplicate or a record that is later not part of the committed log (an aborted one).
* :func:`check_exactly_once` — the oracle, once everything has healed.
"""

from __future__ import annotations

import threading
import time
from array import array
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from itertools import pairwise
from pathlib import Path

import orjson
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource

from app.kafka.topics import KafkaRecord, partitions_of
from app.sink.output import H_OFFSET, H_PARTITION, H_TOPIC
from devkit.kafka import LocalKafka
from devkit.kafka.cluster import free_ports
from tests.support.bridge import BridgeProcess, http_get
from tests.support.feed import Feeder, caught_up, open_records
from tests.support.kafka import TEST_BROKER_GROUPS, KafkaFixture, wait_until
from tests.support.toxiproxy import Toxiproxy

# Bridge settings that make faults resolve quickly: short session and request timeouts.
REQUEST_TIMEOUT_MS = 5000
SESSION_TIMEOUT_MS = 6000
TRANSACTION_TIMEOUT_MS = 10_000

# Broker settings that make faults resolve in seconds, not minutes.
BROKER_OVERRIDES: dict[str, object] = {
    "unclean.leader.election.enable": "false",
    # A transaction past its timeout is aborted within a second of it, not ten.
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": 1000,
    "group.min.session.timeout.ms": 3000,
    # group_protocol=consumer (KIP-848, the default): the broker holds the session timeout and
    # heartbeat; the same 6 s / 1 s the classic members set in the client (FAST_FAULTS).
    **TEST_BROKER_GROUPS,
    "group.consumer.session.timeout.ms": SESSION_TIMEOUT_MS,
}

FAST_FAULTS: dict[str, object] = {
    # Transactions stay open for a second: long enough for the test to see one and land a
    # fault in it, well below a third of the transaction timeout (config validation).
    "commit_interval": 1.0,
    "transaction_timeout_ms": TRANSACTION_TIMEOUT_MS,
    "kafka": {"socket.timeout.ms": REQUEST_TIMEOUT_MS, "reconnect.backoff.max.ms": 1000},
    "producer": {"request.timeout.ms": REQUEST_TIMEOUT_MS},
}
# Under group_protocol=classic the client sets them (the rig's brokers do under consumer).
CLASSIC_SESSION: dict[str, object] = {
    "session.timeout.ms": SESSION_TIMEOUT_MS,
    "heartbeat.interval.ms": 1000,
}


def fast_faults(protocol: str = "consumer") -> dict[str, object]:
    """FAST_FAULTS for a group of ``protocol``: the classic one also sets its session timeout."""
    if protocol == "classic":
        return {**FAST_FAULTS, "group_protocol": "classic", "consumer": dict(CLASSIC_SESSION)}
    return {**FAST_FAULTS, "group_protocol": protocol}


def java_hash_partition(key: str, partitions: int) -> int:
    """Kafka's ``Utils.abs(key.hashCode()) % partitions``: the internal-topic partition that
    holds a group's offsets or a transactional.id's state."""
    h = 0
    for unit in key.encode("utf-16-be").hex(" ", 2).split():
        h = (31 * h + int(unit, 16)) & 0xFFFFFFFF
    signed = h - (1 << 32) if h & 0x80000000 else h
    return 0 if signed == -(1 << 31) else abs(signed) % partitions


class Rig:
    """A 3-broker cluster with a Toxiproxy proxy in front of each broker."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.proxy = Toxiproxy(directory / "toxiproxy.log")
        self.proxy_ports = free_ports(3)
        self.cluster = LocalKafka(
            directory / "kafka3", brokers=3, heap="512m",
            proxy_ports=self.proxy_ports, overrides=BROKER_OVERRIDES,
        )  # fmt: skip
        self.kafka = KafkaFixture("", replication=3)
        self._admin: AdminClient | None = None

    def start(self) -> Rig:
        self.proxy.start()
        self.cluster.start(timeout=180)
        self.kafka.bootstrap = self.cluster.bootstrap
        for broker in self.cluster.brokers:
            assert broker.proxied_port is not None
            self.proxy.add_proxy(f"b{broker.node_id}", self.proxy_ports[broker.node_id - 1],
                                 broker.proxied_port)  # fmt: skip
        return self

    def stop(self) -> None:
        self.cluster.stop()
        self.proxy.stop()

    @property
    def proxied_bootstrap(self) -> str:
        """Bootstrap through the proxies: clients then reach every broker through them."""
        return ",".join(f"127.0.0.1:{p}" for p in self.proxy_ports)

    def admin(self) -> AdminClient:
        # One client for the rig's life: a client dropped while its future is pending
        # destroys the handle and fails the future (_DESTROY).
        if self._admin is None:
            self._admin = AdminClient({"bootstrap.servers": self.cluster.bootstrap, "log_level": 0})
        return self._admin

    # ---- who does what -------------------------------------------------------------------

    def leader(self, topic: str, partition: int) -> int:
        """Node id of the broker leading ``topic``/``partition``."""
        meta = self.admin().list_topics(topic, timeout=10).topics[topic]
        return int(meta.partitions[partition].leader)

    def transaction_coordinator(self, transactional_id: str) -> int:
        """Node id of the transaction coordinator of ``transactional_id`` (the leader of its
        ``__transaction_state`` partition)."""
        topic = "__transaction_state"
        count = len(partitions_of(self.cluster.bootstrap, topic))
        return self.leader(topic, java_hash_partition(transactional_id, count))

    def group_coordinator(self, group: str) -> int:
        """Node id of the group coordinator of ``group`` (as the broker reports it)."""
        future = self.admin().describe_consumer_groups([group], request_timeout=10)[group]
        return int(future.result(timeout=15).coordinator.id)

    def unclean_election_enabled(self) -> bool:
        resource = ConfigResource(ConfigResource.Type.BROKER, "1")
        configs = self.admin().describe_configs([resource])[resource].result(timeout=15)
        return str(configs["unclean.leader.election.enable"].value).lower() == "true"

    # ---- healing -------------------------------------------------------------------------

    def heal(self, timeout: float = 180) -> None:
        """Remove every toxic, resume and restart every broker, wait until fully replicated."""
        self.proxy.heal()
        heal_brokers(self.cluster, self.admin(), timeout)

    def fully_replicated(self) -> bool:
        return fully_replicated(self.admin())


def heal_brokers(cluster: LocalKafka, admin: AdminClient, timeout: float = 180) -> None:
    """Resume every paused broker of ``cluster``, restart every dead one, and wait until every
    partition is in sync on all of them (the next test starts from a whole cluster)."""
    for broker in cluster.brokers:
        if broker.alive():
            cluster.resume(broker.node_id)
        else:
            cluster.restart(broker.node_id, timeout)
    cluster.wait_ready(timeout)
    n = len(cluster.brokers)
    wait_until(partial(fully_replicated, admin, n), timeout, f"every partition in sync on {n}", 0.5)


def fully_replicated(admin: AdminClient, brokers: int = 3) -> bool:
    try:
        topics = admin.list_topics(timeout=10).topics
    except Exception:
        return False
    return all(
        p.leader >= 0 and len(p.isrs) == brokers
        for t in topics.values()
        for p in t.partitions.values()
    )


class Supervisor:
    """What Kubernetes does for the bridge pods: restart one that exited 3 or 5 (fatal Kafka
    error, instance id fenced), and SIGKILL + restart one whose ``/livez`` keeps failing (its
    loop stopped beating, e.g. stuck inside a librdkafka call). Any other exit fails the test.
    Bridges the test paused on purpose (``paused``, by pid) are not probed."""

    PROBE_EVERY = 5.0  # seconds between two probes of one bridge (periodSeconds)
    FAILURES = 3  # failed probes in a row before the kill (failureThreshold)

    def __init__(self, bridges: list[BridgeProcess]) -> None:
        self.bridges = bridges  # the scene's own list: bridges added later are supervised too
        self.restarts = 0
        self.liveness_kills = 0
        self.paused: set[int] = set()
        self._probed: dict[int, tuple[float, int]] = {}  # pid -> (last probe, failures)

    def check(self) -> None:
        for bridge in self.bridges:
            if bridge.proc is None:
                continue
            if bridge.running():
                self._probe(bridge)
                continue
            code = bridge.proc.returncode
            # 3: fatal Kafka error; 5: its group.instance.id was fenced, which a coordinator
            # failover can do to a lone instance too. Kubernetes restarts either.
            if code not in (3, 5):
                raise AssertionError(
                    f"{bridge.log_path.name} exited {code}:\n{bridge.logs()[-4000:]}"
                )
            self.restarts += 1
            bridge.start()

    def _probe(self, bridge: BridgeProcess) -> None:
        port = int(bridge.settings.get("http_port", 0))
        if not port or bridge.pid in self.paused:
            return
        last, failures = self._probed.get(bridge.pid, (0.0, 0))
        if time.monotonic() - last < self.PROBE_EVERY:
            return
        status, _body = http_get(port, "/livez")
        failures = failures + 1 if status == 503 else 0  # 0 = not listening yet: starting
        self._probed[bridge.pid] = (time.monotonic(), failures)
        if failures >= self.FAILURES:
            self.liveness_kills += 1
            with open(bridge.log_path, "ab") as log:
                log.write(b"\n===== supervisor: /livez failed, SIGKILL (liveness probe) =====\n")
            bridge.kill()
            bridge.start()

    def wait(
        self,
        condition: Callable[[], bool],
        timeout: float,
        what: str,
        detail: Callable[[], str] | None = None,
    ) -> None:
        """``wait_until`` with the bridges supervised; on a timeout the message adds the last
        error of the test's own probe and ``detail()`` (what the test saw last)."""
        last_error: list[str] = []

        def supervised() -> bool:
            self.check()
            try:
                return condition()
            except KafkaException as exc:
                # The test's own probe (watermarks, committed offsets) met the fault too, e.g.
                # a partition without a leader for a moment: look again, within the deadline.
                last_error[:] = [str(exc)]
                return False

        try:
            wait_until(supervised, timeout, what, step=0.2)
        except AssertionError as exc:
            seen = [f"last probe error: {e}" for e in last_error]
            if detail is not None:
                try:
                    seen.append(detail())
                except Exception as probe:  # the cluster may still be faulty
                    seen.append(f"detail unavailable: {probe}")
            raise AssertionError("; ".join([str(exc), *seen])) from None

    def hold(self, seconds: float) -> None:
        """Keep a fault in place for ``seconds`` (a property of the fault, e.g. "longer than the
        request timeout", never a synchronisation), supervising meanwhile."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.check()
            time.sleep(0.2)

    def stop_all(self) -> None:
        for bridge in self.bridges:
            if bridge.running():
                code = bridge.terminate(90)
                # -15: SIGTERM came while a just-restarted bridge was starting, before its
                # handler was installed (nothing in flight); the oracle still runs.
                assert code in (0, 3, -15), f"{bridge.log_path.name} exited {code} on SIGTERM"


def wait_committed(
    kafka: KafkaFixture, sup: Supervisor, group: str, topic: str, timeout: float = 300
) -> None:
    """Wait until ``group`` has committed the end of ``topic`` (bridges supervised)."""
    sup.wait(
        lambda: caught_up(kafka, group, topic), timeout, f"{group} to commit all of {topic}",
        lambda: _offsets_seen(kafka, group, topic),
    )  # fmt: skip


def wait_open_transaction(
    kafka: KafkaFixture, sup: Supervisor, feeder: Feeder, group: str, out: str, chunk: int
) -> None:
    """Feed ``chunk`` records each time the group caught up, until a transaction holds records
    on ``out``: the next fault then lands inside an open transaction."""

    def open_now() -> bool:
        if open_records(kafka, out) > 0:
            return True
        if caught_up(kafka, group, feeder.topic) and not feeder.feed(chunk):
            raise AssertionError("input ran out before an open transaction was seen")
        return False

    sup.wait(
        open_now, 300, f"an open transaction on {out}",
        lambda: f"{_offsets_seen(kafka, group, feeder.topic)}, fed {feeder.fed}",
    )  # fmt: skip


def _offsets_seen(kafka: KafkaFixture, group: str, topic: str) -> str:
    """End and committed offsets of ``topic`` per partition, for a timeout message."""
    return (
        f"{topic} end offsets {kafka.end_offsets(topic)}, committed by {group} "
        f"{kafka.committed_offsets(group, topic)}"
    )


@dataclass
class Watcher:
    """A read_committed reader of ``topics`` running in a thread while faults happen.

    What it saw is kept compact (a 2-hour soak reads 13 M records): per partition the offsets
    and the hashes of the record ids, in the order read (offset order)."""

    bootstrap: str
    topics: list[str]
    seen: dict[tuple[str, int], tuple[array[int], array[int]]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> Watcher:
        self._thread = threading.Thread(target=self._run, name="watcher", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        consumer = Consumer({
            "bootstrap.servers": self.bootstrap, "group.id": "chaos-watcher",
            "enable.auto.commit": False, "isolation.level": "read_committed", "log_level": 0,
        })  # fmt: skip
        tps = [TopicPartition(t, p, OFFSET_BEGINNING) for t in self.topics
               for p in partitions_of(self.bootstrap, t)]  # fmt: skip
        consumer.assign(tps)
        try:
            while not self._stop.is_set():
                for msg in consumer.consume(1000, timeout=0.2):
                    if msg.error() is None:
                        tp = (str(msg.topic()), int(msg.partition() or 0))
                        offsets, ids = self.seen.setdefault(tp, (array("q"), array("q")))
                        offsets.append(int(msg.offset() or 0))
                        ids.append(hash(record_id_of(msg.value())))
        except Exception as exc:  # the oracle reports it: a dead watcher saw nothing
            self.errors.append(repr(exc))
        finally:
            consumer.close()

    def count(self) -> int:
        return sum(len(offsets) for offsets, _ids in self.seen.values())

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)


def record_id_of(value: bytes | None) -> str:
    try:
        return str(orjson.loads(value or b"{}").get("id"))
    except orjson.JSONDecodeError:
        return "?"


@dataclass
class Verdict:
    """What the oracle checked."""

    records: int
    aborted_uncommitted: int
    repeats: int = 0  # inputs whose id came before (``repeats=True``)


def check_exactly_once(
    kafka: KafkaFixture,
    src: str,
    out: str,
    dlq: str,
    group: str,
    watcher: Watcher | None,
    *,
    repeats: bool = False,
) -> Verdict:
    """The exactly-once oracle (call after healing and stopping the bridges).

    Every committed input is once in output + DLQ and nothing else is there; per input
    partition the output keeps input order; no open transaction (LSO == HW); the group
    committed the end of the input; the live reader saw no duplicate and no aborted record.
    The topics are read as streams of the client's messages and what is kept per input id is a
    few bytes (:class:`_Sources`): a 2-hour soak's 31 M records, read three times.

    ``repeats``: input ids may repeat (in one partition), and the pipeline is a dedupe that
    must drop every repeat: only an id's first input counts, so a dedupe that lost its state
    emits an id twice and fails the check. Otherwise ids must be unique.
    """
    # 31 M records (a 2-hour soak) take minutes to read: the deadline grows with the input.
    timeout = 60.0 + sum(kafka.end_offsets(src).values()) / 10_000
    dead = kafka.read_all(dlq)
    dead_at = _dead_letter_positions(dead, src)
    source, dead_ids, inputs = _Sources(), list[str](), 0
    for m in kafka.iter_messages(src, timeout=timeout):
        inputs += 1
        rid, part, off = record_id_of(m.value()), m.partition(), m.offset()
        first = source.add(rid, part, off)  # a partition's offsets ascend: the first comes first
        if first is not None:
            assert repeats, f"test input ids are not unique: {rid}"
            assert first[0] == part, f"id {rid} repeated in another partition"
        if (part, off) in dead_at:
            dead_ids.append(rid)
    assert len(dead_ids) == len(dead_at), f"dead letters of unknown inputs: {sorted(dead_at)}"
    for rid in dead_ids:
        source.count(rid)
    order = _InputOrder()
    seen = _SeenCheck(watcher)
    outputs = 0
    for m in kafka.iter_messages([out, dlq], timeout=timeout):
        rid = record_id_of(m.value())
        seen.committed(m.topic(), m.partition(), m.offset(), rid)
        if m.topic() == out:
            outputs += 1
            order.check(m.partition(), source.count(rid))
    missing, extra = source.missing(), source.extra()
    assert not missing, f"{len(missing)} inputs missing from output+DLQ, e.g. {missing[:5]}"
    assert not extra, f"{len(extra)} ids duplicated or unknown, e.g. {list(extra.items())[:5]}"
    for topic in (out, dlq):
        hw, lso = kafka.end_offsets(topic, False), kafka.end_offsets(topic, True)
        assert lso == hw, f"open transaction left on {topic}: LSO {lso} != HW {hw}"
    assert kafka.committed_offsets(group, src) == kafka.end_offsets(src), "committed != end"
    seen.finish()
    written = sum(1 for _ in kafka.iter_messages(out, read_committed=False, timeout=timeout))
    return Verdict(
        records=inputs, aborted_uncommitted=written - outputs, repeats=inputs - len(source)
    )


def _dead_letter_positions(dead: list[KafkaRecord], src: str) -> set[tuple[int, int]]:
    """The (partition, offset) of ``src`` each dead letter names (each once)."""
    at = set()
    for r in dead:
        topic, part, off = (r.header(h) for h in (H_TOPIC, H_PARTITION, H_OFFSET))
        assert topic is not None and topic.decode() == src, f"dead letter of unknown source {r}"
        assert part is not None and off is not None
        position = (int(part), int(off))
        assert position not in at, f"two dead letters for {src} {position}"
        at.add(position)
    return at


class _Sources:
    """Per input id: the (partition, offset) it was first read at, and how often it was found
    in output + DLQ. Ids of the test feeds' form ``r<n>`` are kept in arrays indexed by n (13
    bytes an id: a soak's 31 M ids take 0.5 GB, where a dict took 9 GB and, with three brokers
    on the machine, most of an hour); any other id in a dict."""

    def __init__(self) -> None:
        self._part, self._off, self._hits = array("i"), array("q"), bytearray()
        self._other: dict[str, list[int]] = {}  # id -> [partition, offset, hits]
        self._unknown: Counter[str] = Counter()  # found, but never an input
        self._size = 0

    def __len__(self) -> int:
        return self._size

    @staticmethod
    def _slot(rid: str) -> int | None:
        n = rid[1:]
        if rid[:1] == "r" and n.isdigit() and n.isascii() and (n == "0" or n[0] != "0"):
            return int(n)
        return None

    def get(self, rid: str) -> tuple[int, int] | None:
        n = self._slot(rid)
        if n is None:
            found = self._other.get(rid)
            return None if found is None else (found[0], found[1])
        if n >= len(self._off) or self._off[n] < 0:
            return None
        return self._part[n], self._off[n]

    def add(self, rid: str, partition: int, offset: int) -> tuple[int, int] | None:
        """Keep ``rid`` at (``partition``, ``offset``), unless it was added before: then where."""
        n = self._slot(rid)
        if n is None:
            found = self._other.get(rid)
            if found is not None:
                return found[0], found[1]
            self._other[rid] = [partition, offset, 0]
            self._size += 1
            return None
        if n < len(self._off) and self._off[n] >= 0:
            return self._part[n], self._off[n]
        self._size += 1
        if n >= len(self._off):
            grow = max(n + 1, 2 * len(self._off)) - len(self._off)
            self._part.extend(array("i", [0]) * grow)
            self._off.extend(array("q", [-1]) * grow)
            self._hits.extend(bytes(grow))
        self._part[n], self._off[n] = partition, offset
        return None

    def count(self, rid: str) -> tuple[int, int] | None:
        """``rid`` was found once more in output + DLQ: where it was input (None: never)."""
        n = self._slot(rid)
        if n is None:
            found = self._other.get(rid)
            if found is not None:
                found[2] += 1
                return found[0], found[1]
        elif n < len(self._off) and self._off[n] >= 0:
            self._hits[n] = min(self._hits[n] + 1, 255)
            return self._part[n], self._off[n]
        self._unknown[rid] += 1
        return None

    def missing(self) -> list[str]:
        """Input ids never found."""
        lost = [f"r{n}" for n, off in enumerate(self._off) if off >= 0 and not self._hits[n]]
        return lost + [rid for rid, (_p, _o, hits) in self._other.items() if not hits]

    def extra(self) -> dict[str, int]:
        """Ids found more than once (how often; 255 means 255 or more), or never an input."""
        twice = {f"r{n}": c for n, c in enumerate(self._hits) if c > 1}
        twice |= {rid: hits for rid, (_p, _o, hits) in self._other.items() if hits > 1}
        return twice | dict(self._unknown)


class _InputOrder:
    """In each output partition, the records of one input partition keep their input order
    (fed the output in each partition's offset order)."""

    def __init__(self) -> None:
        self._last: dict[tuple[int, int], int] = {}

    def check(self, out_part: int, position: tuple[int, int] | None) -> None:
        """The next record of output partition ``out_part`` was input at ``position``."""
        if position is None:  # not an input: the oracle reports it as unknown
            return
        in_part, in_off = position
        prev = self._last.get((out_part, in_part), -1)
        assert in_off > prev, (
            f"order broken: input {in_part}@{in_off} after {in_part}@{prev} "
            f"in output partition {out_part}"
        )
        self._last[(out_part, in_part)] = in_off


class _SeenCheck:
    """The live reader saw no duplicate and no aborted record: each offset it saw holds, in
    the final committed read, the record it saw there (a merge of two offset-ordered walks)."""

    def __init__(self, watcher: Watcher | None) -> None:
        self._watcher = watcher
        self._at: dict[tuple[str, int], int] = {}
        self._aborted: list[tuple[str, int, int]] = []
        if watcher is not None:
            assert not watcher.errors, f"live reader failed: {watcher.errors}"
            assert watcher.count(), "live reader saw nothing"
            ids = sorted(h for _offsets, hashes in watcher.seen.values() for h in hashes)
            dupes = sum(1 for a, b in pairwise(ids) if a == b)
            assert not dupes, f"live read_committed reader saw {dupes} duplicates"

    def committed(self, topic: str, partition: int, offset: int, rid: str) -> None:
        """The final committed read has ``rid`` at ``offset`` of ``topic``[``partition``]."""
        tp = (topic, partition)
        if self._watcher is None or tp not in self._watcher.seen:
            return
        offsets, hashes = self._watcher.seen[tp]
        i = self._at.get(tp, 0)
        while i < len(offsets) and offsets[i] < offset:  # seen, but not committed there
            self._aborted.append((topic, partition, offsets[i]))
            i += 1
        if i < len(offsets) and offsets[i] == offset:
            if hashes[i] != hash(rid):
                self._aborted.append((topic, partition, offsets[i]))
            i += 1
        self._at[tp] = i

    def finish(self) -> None:
        if self._watcher is not None:
            for tp, (offsets, _hashes) in self._watcher.seen.items():
                self._aborted += [(*tp, o) for o in offsets[self._at.get(tp, 0) :]]
        assert not self._aborted, (
            f"live read_committed reader saw {len(self._aborted)} aborted records, e.g. "
            f"{self._aborted[:5]}"
        )
