"""One chaos scenario's topics, input, bridges, supervisor and live reader on the shared rig."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from devkit.kafka.cluster import free_port
from tests.support.bridge import BridgeProcess, bridge_topics, json_records
from tests.support.chaos import (
    Rig,
    Supervisor,
    Verdict,
    Watcher,
    check_exactly_once,
    fast_faults,
    wait_committed,
    wait_open_transaction,
)
from tests.support.feed import Feeder

BATCH = 500  # records per consume(): faults that stall mid-transaction count on it


class Scene:
    """Fresh topics (4 partitions), input fed in phases, bridges as subprocesses.

    Args:
        rig: the shared 3-broker cluster.
        log_dir: where bridge logs go.
        records: the pool of input records the scenario may feed (faults feed chunks until an
            open transaction is seen, so how many get fed varies; the oracle checks what was).
        proxied: bridges bootstrap through Toxiproxy (network-fault scenarios).
    """

    def __init__(self, rig: Rig, log_dir: Path, records: int = 100_000, proxied: bool = False,
                 partitions: int = 4, **extra: Any) -> None:  # fmt: skip
        self.rig = rig
        self.kafka = rig.kafka
        self.log_dir = log_dir
        self.src, self.out, self.dlq = bridge_topics(rig.kafka, partitions)
        self.group = rig.kafka.unique("g")
        self.feeder = Feeder(rig.kafka, self.src, *json_records(records))
        self.settings: dict[str, Any] = {
            "bootstrap_servers": rig.proxied_bootstrap if proxied else rig.cluster.bootstrap,
            "input_topics": [self.src], "output_topic": self.out, "dlq_topic": self.dlq,
            "group_id": self.group, "batch_size": BATCH,
            **fast_faults(extra.get("group_protocol", "consumer")), **extra,
        }  # fmt: skip
        self.bridges: list[BridgeProcess] = []
        self.sup = Supervisor(self.bridges)
        self.watcher = Watcher(rig.cluster.bootstrap, [self.out, self.dlq])

    @property
    def transactional_ids(self) -> list[str]:
        return [f"{self.group}-{b.settings['instance_id']}" for b in self.bridges]

    def start(self, instances: int = 1, **extra: Any) -> Scene:
        """Start ``instances`` bridges (ids i0, i1, ...) and the live reader."""
        for _ in range(instances):
            self.add_bridge(**extra).start()
        self.watcher.start()
        return self

    def add_bridge(self, **extra: Any) -> BridgeProcess:
        n = len(self.bridges)
        bridge = BridgeProcess(self.log_dir, f"bridge-i{n}", instance_id=f"i{n}",
                               state_dir=str(self.log_dir / f"state-i{n}"),
                               http_port=free_port(), http_host="127.0.0.1",
                               **{**self.settings, **extra})  # fmt: skip
        self.bridges.append(bridge)
        return bridge

    def feed_and_commit(self, n: int | None, timeout: float = 300) -> None:
        """Feed the next ``n`` records (the rest when None) and wait until committed."""
        self.feeder.feed(n)
        wait_committed(self.kafka, self.sup, self.group, self.src, timeout)

    def open_transaction(self, chunk: int = 1000) -> None:
        """Return once a bridge's transaction holds records on the output topic."""
        wait_open_transaction(self.kafka, self.sup, self.feeder, self.group, self.out, chunk)

    def finish(self, final: int = 1000, repeats: bool = False) -> Verdict:
        """Heal everything, feed a ``final`` chunk, wait until it is committed, stop the
        bridges and run the oracle on everything fed (``repeats``: ids fed again must have been
        dropped, see :func:`check_exactly_once`)."""
        self.rig.heal()
        for bridge in self.bridges:
            if bridge.proc is not None and bridge.running():
                bridge.proc.send_signal(18)  # SIGCONT: a paused bridge must go on
        self.feed_and_commit(final)
        self.sup.stop_all()
        self.watcher.stop()
        return check_exactly_once(self.kafka, self.src, self.out, self.dlq, self.group,
                                  self.watcher, repeats=repeats)  # fmt: skip

    def close(self) -> None:
        """Teardown: nothing left running, even after a failure."""
        self.watcher.stop()
        for bridge in self.bridges:
            if bridge.proc is not None and bridge.running():
                bridge.proc.send_signal(18)
            bridge.stop()
