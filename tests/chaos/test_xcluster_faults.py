"""Broker faults between two clusters (issue 30, point 6): exactly-once at the target with the
positions in the target's offsets topic and one transactional producer per input partition.

The chaos rig (3 brokers, RF 3, min ISR 2, unclean election off) is the cluster under fault;
the session broker (``kafka``) is the other one, so the two tests share two clusters. Each
fault lands inside a transaction seen open on the target's output topic; the bridge runs under
the chaos :class:`Supervisor` (it restarts a bridge that exited 3 or 5, as Kubernetes would);
the oracle is the cross-cluster one of tests/support/xcluster.py.

``XCLUSTER_RECORDS`` sets the records per test (the issue's figure is 100,000; the suite runs
8,000 here, as ``tests/integration/test_xcluster_eos.py`` reads it with 20,000).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.bridge import BridgeProcess, base_settings, json_records
from tests.support.chaos import FAST_FAULTS, SESSION_TIMEOUT_MS, Rig, Supervisor
from tests.support.feed import Feeder, open_records
from tests.support.kafka import KafkaFixture
from tests.support.toxiproxy import toxic_everywhere
from tests.support.xcluster import assert_counts_exact_across, target_positions, xcaught_up

pytestmark = [pytest.mark.integration, pytest.mark.chaos]

RECORDS = int(os.environ.get("XCLUSTER_RECORDS", "8000"))
CHUNK = 1_000


class XScene:
    """A stateful count from ``source`` to ``target`` (4 partitions), one supervised bridge."""

    def __init__(self, source: KafkaFixture, target: KafkaFixture, tmp_path: Path,
                 source_bootstrap: str, target_bootstrap: str) -> None:  # fmt: skip
        self.source, self.target = source, target
        src = source.create_topic(source.unique("in"), 4)
        out = target.create_topic(target.unique("out"), 4)
        dlq = target.create_topic(target.unique("dlq"), 1)
        self.s: dict[str, Any] = {
            **base_settings(source, src, out, dlq), "bootstrap_servers": source_bootstrap,
            "batch_size": 500, **FAST_FAULTS, "state_dir": str(tmp_path / "state"),
            "pipeline": "tests.state_pipelines:counting",
            "target": {"bootstrap_servers": target_bootstrap, "kafka": FAST_FAULTS["kafka"]},
        }  # fmt: skip
        # the source group's session timeout: in the client (classic) or the broker (consumer)
        self.s["consumer"] = source.fast_handover(self.s, SESSION_TIMEOUT_MS)
        self.src, self.out = src, out
        self.feeder = Feeder(source, src, *json_records(RECORDS))
        self.bridge = BridgeProcess(tmp_path, "bridge-x", **self.s)
        self.sup = Supervisor([self.bridge])

    @property
    def task_id(self) -> str:
        """The transactional id of task 0 (app.engine.tasks.task_transactional_id)."""
        return f"{self.s['group_id']}-task-0"

    def start(self) -> None:
        """The bridge running, the first two chunks committed."""
        self.bridge.start()
        self.feed_and_commit(2 * CHUNK)

    def caught_up(self) -> bool:
        return xcaught_up(self.source, self.target, self.s)

    def feed_and_commit(self, n: int | None, timeout: float = 300) -> None:
        self.feeder.feed(n)
        self.sup.wait(self.caught_up, timeout, f"{self.s['group_id']} to commit everything fed")

    def open_transaction(self) -> None:
        """Feed a chunk each time everything fed is committed, until a transaction of the
        bridge holds records on the target's output topic."""

        def open_now() -> bool:
            if open_records(self.target, self.out) > 0:
                return True
            if self.caught_up() and not self.feeder.feed(CHUNK):
                raise AssertionError("input ran out before an open transaction was seen")
            return False

        self.sup.wait(open_now, 300, f"an open transaction on {self.out}")

    def finish(self) -> None:
        """Feed the rest, wait until committed, stop the bridge, run the oracle."""
        self.feed_and_commit(None)
        code = self.bridge.terminate(90)
        assert code == 0, self.bridge.logs()[-3000:]
        assert_counts_exact_across(self.source, self.target, self.src, self.out)
        assert self.feeder.fed == RECORDS
        # No source offset skipped: the positions in the target's offsets topic are the ends.
        ends = self.source.end_offsets(self.src)
        assert target_positions(self.target, self.s) == {(self.src, p): e for p, e in ends.items()}

    def recovery(self) -> str:
        """What the bridge did about the fault: recovered by itself, or exited 3/5 and was
        restarted (the supervisor's count), for the report."""
        return f"restarts by the supervisor: {self.sup.restarts}, starts: {self.bridge.starts}"

    def close(self) -> None:
        if self.bridge.proc is not None and self.bridge.running():
            self.bridge.stop()


@pytest.fixture
def xscenes() -> Any:
    made: list[XScene] = []
    yield made
    for scene in made:
        scene.close()


def kill_broker(rig: Rig, scene: XScene, node_of: Callable[[], int], what: str) -> None:
    """SIGKILL broker ``node_of()`` of the rig inside an open transaction, go on with two
    brokers (min ISR 2), restart it; then the oracle."""
    scene.start()
    node = node_of()
    scene.open_transaction()
    rig.cluster.kill(node)
    scene.feed_and_commit(CHUNK)
    rig.cluster.restart(node)
    rig.heal()
    scene.finish()
    print(f"killed broker {node} ({what}); {scene.recovery()}")


def cut_network(rig: Rig, scene: XScene, what: str) -> None:
    """Inside an open transaction every byte between the bridge and the rig is swallowed (a
    ``timeout`` toxic with timeout=0 on both directions of the three proxies: no answer, no
    reset, as a network partition) for twice the session timeout, then restored; the oracle."""
    scene.start()
    scene.open_transaction()
    toxic_everywhere(rig.proxy, ["b1", "b2", "b3"], "timeout", timeout=0)
    scene.feeder.feed(CHUNK)
    scene.sup.hold(2 * SESSION_TIMEOUT_MS / 1000)  # the fault's span, not a synchronisation
    rig.proxy.heal()
    rig.heal()
    scene.finish()
    print(f"cut the {what} for {2 * SESSION_TIMEOUT_MS} ms; {scene.recovery()}")


def test_sigkill_target_transaction_coordinator(
    kafka: KafkaFixture, rig: Rig, tmp_path: Path, xscenes: list[XScene]
) -> None:
    """Source: the session broker; target: the rig. SIGKILL the broker coordinating task 0's
    transactional id. The bridge goes on by itself."""
    scene = XScene(kafka, rig.kafka, tmp_path, kafka.bootstrap, rig.cluster.bootstrap)
    xscenes.append(scene)
    kill_broker(
        rig, scene, lambda: rig.transaction_coordinator(scene.task_id),
        f"coordinator of {scene.task_id}",
    )  # fmt: skip


def test_sigkill_source_partition_leader(
    kafka: KafkaFixture, rig: Rig, tmp_path: Path, xscenes: list[XScene]
) -> None:
    """Source: the rig; target: the session broker. SIGKILL the leader of source partition 0
    (inside an open transaction on the target): its partitions move to the other two."""
    scene = XScene(rig.kafka, kafka, tmp_path, rig.cluster.bootstrap, kafka.bootstrap)
    xscenes.append(scene)
    kill_broker(rig, scene, lambda: rig.leader(scene.src, 0), f"leader of {scene.src}[0]")


def test_network_cut_to_target_past_session_timeout(
    kafka: KafkaFixture, rig: Rig, tmp_path: Path, xscenes: list[XScene]
) -> None:
    """Source: the session broker; target: the rig, which the bridge reaches only through
    Toxiproxy: the cut outlives the transaction timeout, the task producer is fenced (exit 3),
    the restart goes on."""
    scene = XScene(kafka, rig.kafka, tmp_path, kafka.bootstrap, rig.proxied_bootstrap)
    xscenes.append(scene)
    cut_network(rig, scene, "target")


def test_network_cut_to_source_past_session_timeout(
    kafka: KafkaFixture, rig: Rig, tmp_path: Path, xscenes: list[XScene]
) -> None:
    """Source: the rig, reached by the bridge only through Toxiproxy; target: the session
    broker: the source group drops the member, the bridge rejoins by itself."""
    scene = XScene(rig.kafka, kafka, tmp_path, rig.proxied_bootstrap, kafka.bootstrap)
    xscenes.append(scene)
    cut_network(rig, scene, "source")
