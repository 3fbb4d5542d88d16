"""Pure pieces of the chaos suite: coordinator partition rule, nemesis plans, the table."""

from __future__ import annotations

import csv
import threading
from array import array
from pathlib import Path
from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError, KafkaException

from tests.chaos.faults import FAULTS
from tests.chaos.nemesis import RoundResult, Table, plan
from tests.support.chaos import (
    Supervisor,
    Watcher,
    _InputOrder,
    _SeenCheck,
    _Sources,
    java_hash_partition,
    record_id_of,
)


def test_java_hash_partition_matches_kafka_utils_abs_hashcode() -> None:
    # Values of Java 17's "...".hashCode(): "" -> 0, "a" -> 97, "eos-bridge-i0" -> -1430065689
    # (negative: Utils.abs), "polygenelubricants" -> Integer.MIN_VALUE (Utils.abs gives 0).
    assert java_hash_partition("", 50) == 0
    assert java_hash_partition("a", 50) == 97 % 50
    assert java_hash_partition("eos-bridge-i0", 50) == 1430065689 % 50
    assert java_hash_partition("polygenelubricants", 50) == 0


def test_nemesis_plan_is_a_function_of_seed_and_round() -> None:
    first = [plan(7, i)[1:] for i in range(20)]
    assert first == [plan(7, i)[1:] for i in range(20)]
    assert first != [plan(8, i)[1:] for i in range(20)]
    for instances, kinds in first:
        assert instances in (2, 3) and 2 <= len(kinds) <= 3
        assert set(kinds) <= set(FAULTS) and len(set(kinds)) == len(kinds)


def test_table_counts_faults_records_and_violations() -> None:
    table = Table()
    table.add(RoundResult(0, 2, ["latency", "kill-bridge"], records=10, aborted=3))
    table.add(RoundResult(1, 3, ["latency"], records=5, error="boom"))
    text = table.render(7)
    assert table.faults["latency"] == 2 and table.records == 15 and table.aborted == 3
    assert table.violations == [1]
    assert "seed 7" in text and "latency" in text


def test_a_supervised_wait_that_times_out_says_what_it_saw_last() -> None:
    def probe_fails() -> bool:
        raise KafkaException(KafkaError(KafkaError.NOT_COORDINATOR))

    with pytest.raises(AssertionError) as caught:
        Supervisor([]).wait(probe_fails, 0.3, "the group to commit", lambda: "committed {0: 5}")
    message = str(caught.value)
    assert message.startswith("timed out after 0.3s waiting for the group to commit; ")
    assert "last probe error: " in message and "NOT_COORDINATOR" in message
    assert message.endswith("; committed {0: 5}")


def _soak_csv(tmp_path: Path, rows: list[dict[str, float]]) -> Path:
    """The soak's CSV holding ``rows`` (missing columns 0)."""
    from tests.chaos.soak import FIELDS

    path = tmp_path / "soak.csv"
    with path.open("w", newline="") as f:
        out = csv.DictWriter(f, FIELDS, restval=0)
        out.writeheader()
        out.writerows(rows)
    return path


def test_soak_growth_is_per_process_after_the_warm_up(tmp_path: Path) -> None:
    from tests.chaos.soak import growth

    rows = []
    for t in range(0, 7200, 10):  # i0: one process, 100 MiB growing 2 MiB per hour
        rss = (100 + 2 * t / 3600) * 2**20
        rows.append({"t_s": t, "instance": "i0", "pid": 1, "rss_bytes": rss, "fds": 40,
                     "threads": 12})  # fmt: skip
    for t in range(0, 600, 10):  # i1: killed after 10 minutes, too short to measure
        rows.append({"t_s": t, "instance": "i1", "pid": 2, "rss_bytes": 2**27, "fds": 40,
                     "threads": 12})  # fmt: skip
    path = _soak_csv(tmp_path, rows)
    long_lived, short = growth(path)
    assert long_lived["instance"] == "i0" and long_lived["fds"] == [40, 40]
    # 2 MiB/h on ~100.6 MiB at 15 min: just under 2 % per hour
    assert 1.8 < long_lived["rss_growth_pct_per_hour"] < 2.0
    # no RocksDB memory in these rows: RSS less RocksDB grows as RSS does; the second half
    # (from ~1 h 7 min, ~102.2 MiB) grows the same 2 MiB/h
    assert (
        long_lived["rss_less_rocksdb_growth_pct_per_hour"] == long_lived["rss_growth_pct_per_hour"]
    )
    assert 1.8 < long_lived["rss_growth_pct_per_hour_second_half"] < 1.97
    assert 1.95 < long_lived["rss_trend_pct_per_hour"] < 2.0  # 2 MiB/h from ~100.5 MiB
    assert short == {"instance": "i1", "pid": 2, "seconds": 590.0}


def test_soak_growth_after_the_block_cache_filled(tmp_path: Path) -> None:
    """RocksDB's memory fills to its cap over the first 40 minutes (memtables adding +-8 MiB
    sample to sample); RSS follows it and otherwise grows 1 MiB per hour. Growth from minute 15
    includes the filling; from when the cache is full it is the 1 MiB/h alone."""
    from tests.chaos.soak import growth

    rows = []
    for k, t in enumerate(range(0, 7200, 10)):
        rocksdb = (10 + 54 * min(t, 2400) / 2400 + (8 if k % 2 else -8)) * 2**20
        rss = 100 * 2**20 + rocksdb + t / 3600 * 2**20
        rows.append({"t_s": t, "instance": "i0", "pid": 1, "rss_bytes": rss,
                     "rocksdb_bytes": rocksdb, "fds": 40, "threads": 12})  # fmt: skip
    path = _soak_csv(tmp_path, rows)
    (process,) = growth(path)
    assert 2200 <= process["cache_full_at_s"] <= 2700
    assert process["rss_growth_pct_per_hour"] > 10  # the filling, from ~122 MiB at 15 min
    assert 0.4 < process["rss_growth_pct_per_hour_after_cache_full"] < 0.8  # 1 MiB/h, ~165 MiB
    assert 0.55 < process["rss_trend_pct_per_hour_after_cache_full"] < 0.65


def test_the_soak_growth_trend_is_not_moved_by_where_the_swings_fall(tmp_path: Path) -> None:
    """Flat RSS swinging ±20 MiB, low through the span's first 5 % and high through its last
    (attempt 12's 26-minute span read +23 %/h from its two 5 % windows): the fit over every
    sample moves far less."""
    from tests.chaos.soak import growth

    rows = []
    for t in range(0, 3600, 10):
        swing = -20 if t < 1030 else 20 if t >= 3470 else (20 if (t // 10) % 2 else -20)
        rows.append({"t_s": t, "instance": "i0", "pid": 1, "rss_bytes": (200 + swing) * 2**20,
                     "fds": 40, "threads": 12})  # fmt: skip
    path = _soak_csv(tmp_path, rows)
    (process,) = growth(path)
    assert process["rss_growth_pct_per_hour"] > 25  # the two windows: 180 -> 220 MiB in 45 min
    assert abs(process["rss_trend_pct_per_hour"]) < process["rss_growth_pct_per_hour"] / 3


def test_the_soak_feed_goes_on_after_a_chunk_that_was_not_confirmed() -> None:
    """Attempt 11's feed thread died when a rolling broker restart outlasted a seed's flush;
    the soak then ran on without input. Now the chunk is noted and the feed goes on with new
    ids (never the same ids twice: the oracle requires unique inputs)."""
    from tests.chaos.soak import FIRST_ID, RateFeed

    class Kafka:
        def __init__(self) -> None:
            self.chunks: list[list[bytes]] = []  # values
            self.more = threading.Event()

        def seed(self, topic: str, values: list[bytes], keys: list[bytes]) -> None:
            self.chunks.append(values)
            if len(self.chunks) == 1:
                raise RuntimeError(f"seeding {topic!r} failed: flush timed out")
            if len(self.chunks) >= 3:
                self.more.set()

    kafka = Kafka()
    feed = RateFeed(SimpleNamespace(kafka=kafka, src="in"), rate=1000)  # type: ignore[arg-type]
    feed.start()
    try:
        assert kafka.more.wait(60), "the feed stopped after the failed chunk"
    finally:
        feed.stopped.set()
        feed.join()
    assert len(feed.errors) == 1 and "flush timed out" in feed.errors[0]
    assert f"ids from {FIRST_ID}:" in feed.errors[0]
    ids = [record_id_of(v) for chunk in kafka.chunks for v in chunk]
    assert len(ids) == len(set(ids)), "an id was fed twice"


def test_soak_fault_choice() -> None:
    from tests.chaos.soak import BRIDGE_FAULTS, SOAK_FAULTS, fault_names

    assert fault_names("all") == SOAK_FAULTS
    assert not set(fault_names("brokers")) & BRIDGE_FAULTS
    assert fault_names("kill-leader, latency") == ["kill-leader", "latency"]
    with pytest.raises(SystemExit, match="unknown"):
        fault_names("kill-leader,nope")


def test_soak_runs_the_bridges_with_the_images_environment() -> None:
    from tests.chaos.soak import IMAGE_ENV

    dockerfile = (Path(__file__).parents[2] / "Dockerfile").read_text()
    for name, value in IMAGE_ENV.items():
        assert f"{name}={value}" in dockerfile, name


def _watcher(seen: dict[tuple[str, int], list[tuple[int, str]]]) -> Watcher:
    watcher = Watcher("unused:9092", ["out"])
    for tp, records in seen.items():
        watcher.seen[tp] = (
            array("q", [o for o, _ in records]), array("q", [hash(i) for _, i in records])
        )  # fmt: skip
    return watcher


def test_the_live_reader_check_finds_aborted_and_duplicate_records() -> None:
    committed = [(0, 0, "a"), (0, 2, "b"), (1, 0, "c")]  # (partition, offset, id) of "out"

    def check(seen: dict[tuple[str, int], list[tuple[int, str]]]) -> None:
        walk = _SeenCheck(_watcher(seen))
        for partition, offset, rid in committed:
            walk.committed("out", partition, offset, rid)
        walk.finish()

    check({("out", 0): [(0, "a"), (2, "b")], ("out", 1): [(0, "c")]})  # what was committed
    check({("out", 0): [(0, "a")]})  # a reader that had not yet read everything
    for aborted in (
        {("out", 0): [(0, "a"), (1, "x"), (2, "b")]},  # an offset that is a marker or aborted
        {("out", 0): [(0, "z")]},  # another record at a committed offset
        {("out", 1): [(0, "c"), (5, "y")]},  # past the last committed record
    ):
        with pytest.raises(AssertionError, match="aborted records"):
            check(aborted)
    with pytest.raises(AssertionError, match="1 duplicates"):
        _SeenCheck(_watcher({("out", 0): [(0, "a")], ("out", 1): [(0, "a")]}))


def test_the_order_check_follows_each_input_partition_per_output_partition() -> None:
    order = _InputOrder()
    order.check(0, (0, 5))  # (output partition, where the record was input)
    order.check(0, (1, 1))
    order.check(1, (0, 7))  # another output partition: its own sequence
    order.check(0, (0, 7))
    order.check(0, None)  # not an input: left to the count (an unknown id)
    with pytest.raises(AssertionError, match="order broken: input 0@5 after 0@7"):
        order.check(0, (0, 5))


def test_the_oracles_id_index_counts_each_input_once_in_arrays_or_a_dict() -> None:
    source = _Sources()
    for rid, part, off in [("r10000000", 2, 9), ("r3", 0, 4), ("r0", 1, 0), ("q7", 3, 1),
                           ("r007", 0, 5), ("r", 1, 2), ("?", 1, 3)]:  # fmt: skip
        assert source.get(rid) is None and source.add(rid, part, off) is None
        assert source.get(rid) == (part, off) and source.add(rid, 9, 99) == (part, off)
    assert len(source) == 7 and source.get("r4") is None and source.get("r7") is None
    assert sorted(source.missing()) == sorted(["r10000000", "r3", "r0", "q7", "r007", "r", "?"])
    assert source.count("r3") == (0, 4) and source.count("q7") == (3, 1)
    assert source.count("r4") is None and source.count("zz") is None
    for rid in ["r10000000", "r3", "r0", "q7", "r007", "r", "?", "zz"]:
        source.count(rid)
    assert source.missing() == []
    assert source.extra() == {"r3": 2, "q7": 2, "r4": 1, "zz": 2}
    for _ in range(300):
        source.count("r0")
    assert source.extra()["r0"] == 255  # saturates: "255 or more"


def test_soak_heap_split_reads_the_main_heap_and_the_thread_arenas() -> None:
    from tests.chaos.soak import smaps_heaps

    smaps = """\
55d0c0000000-55d0c2000000 rw-p 00000000 00:00 0                          [heap]
Size:              32768 kB
Rss:               20480 kB
7f3a04000000-7f3a08000000 rw-p 00000000 00:00 0
Size:              65536 kB
Rss:               36864 kB
7f3a0c021000-7f3a0c121000 rw-p 00000000 00:00 0
Rss:                1024 kB
7f3a10000000-7f3a10400000 r--p 00000000 08:01 1234                       /usr/lib/librocksdb.so
Rss:                4096 kB
VmFlags: rd mr mw me ac sd
""".splitlines()
    # the unaligned anonymous map (a Python arena, an mmapped buffer) and the file map count in
    # neither
    assert smaps_heaps(smaps) == (20480 * 1024, 36864 * 1024)
