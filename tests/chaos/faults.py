"""The fault catalogue shared by the chaos scenarios and the nemesis.

Every fault takes a running :class:`Scene` and a seeded ``random.Random``, lands inside an open
transaction of the bridge (the scene feeds until one is seen), keeps the bridges supervised
while it lasts, and leaves the cluster to :meth:`Rig.heal`. Faults that are held for a span
hold it for a length defined by the fault ("longer than the request timeout"), never as a
synchronisation; what follows them always waits for a condition.
"""

from __future__ import annotations

import os
import random
import signal
from collections.abc import Callable
from pathlib import Path

from tests.chaos.scene import BATCH, Scene
from tests.support.bridge import BridgeProcess
from tests.support.chaos import REQUEST_TIMEOUT_MS, TRANSACTION_TIMEOUT_MS
from tests.support.feed import caught_up, open_records
from tests.support.toxiproxy import toxic_everywhere

Fault = Callable[[Scene, random.Random], None]
PROXIES = ["b1", "b2", "b3"]
PAST_REQUEST_TIMEOUT = 2 * REQUEST_TIMEOUT_MS / 1000
CHUNK = 1000


def kill_and_restart(scene: Scene, node: int) -> None:
    """SIGKILL broker ``node`` inside an open transaction, carry on with two, restart it."""
    scene.open_transaction()
    scene.rig.cluster.kill(node)
    scene.feed_and_commit(CHUNK)  # min ISR 2: the bridge must go on with two brokers
    scene.rig.cluster.restart(node)


def kill_leader(scene: Scene, rng: random.Random) -> None:
    kill_and_restart(scene, scene.rig.leader(scene.out, rng.randrange(4)))


def kill_txn_coordinator(scene: Scene, rng: random.Random) -> None:
    txid = rng.choice(scene.transactional_ids)
    kill_and_restart(scene, scene.rig.transaction_coordinator(txid))


def kill_group_coordinator(scene: Scene, rng: random.Random) -> None:
    kill_and_restart(scene, scene.rig.group_coordinator(scene.group))


def rolling_broker_restart(scene: Scene, rng: random.Random) -> None:
    """SIGTERM (controlled shutdown) and restart each broker in turn, waiting in sync between."""
    for node in rng.sample([1, 2, 3], 3):
        scene.open_transaction()
        scene.rig.cluster.restart(node)
        scene.rig.heal()
        scene.feed_and_commit(CHUNK)


def pause_broker(scene: Scene, rng: random.Random) -> None:
    """SIGSTOP a broker (the transaction coordinator or a random one) past the request timeout."""
    choices = [*(scene.rig.transaction_coordinator(t) for t in scene.transactional_ids), 1, 2, 3]
    pause_and_resume(scene, rng.choice(choices))


def pause_and_resume(scene: Scene, node: int) -> None:
    """SIGSTOP broker ``node`` inside an open transaction past the request timeout, SIGCONT."""
    scene.open_transaction()
    scene.rig.cluster.pause(node)
    scene.feeder.feed(CHUNK)
    scene.sup.hold(PAST_REQUEST_TIMEOUT)
    scene.rig.cluster.resume(node)


def zombie_bridge(scene: Scene, rng: random.Random) -> None:
    """SIGSTOP a bridge inside an open transaction until the others took its partitions (they
    commit everything fed meanwhile), then SIGCONT it: it must be fenced or abort."""
    running = [b for b in scene.bridges if b.running()]
    if len(running) < 2:
        scene.add_bridge().start()
    zombie = rng.choice([b for b in scene.bridges if b.running()])
    scene.open_transaction()
    scene.sup.paused.add(zombie.pid)
    os.kill(zombie.pid, signal.SIGSTOP)
    try:
        scene.feed_and_commit(CHUNK)
    finally:
        os.kill(zombie.pid, signal.SIGCONT)
        scene.sup.paused.discard(zombie.pid)


def kill_bridge(scene: Scene, rng: random.Random) -> None:
    """SIGKILL a bridge inside an open transaction and start it again (same instance id)."""
    bridge = rng.choice(scene.bridges)
    scene.open_transaction()
    bridge.kill()
    bridge.start()


def rolling_bridge_restart(scene: Scene, rng: random.Random) -> None:
    """SIGTERM and restart every instance in turn under load, StatefulSet style."""
    for bridge in scene.bridges:
        scene.open_transaction()
        code = bridge.terminate(90)
        if code == 3 and _ended_by_watchdog(bridge):
            # An earlier fault of the round (a group coordinator SIGKILL) left a transactional
            # librdkafka call hanging past its timeout (librdkafka issues #5456, #5511:
            # send_offsets_to_transaction); the watchdog ends such a call with exit 3 whether
            # or not SIGTERM came meanwhile (README "Errors and exit codes"). A restart.
            scene.sup.restarts += 1
        else:
            assert code == 0, f"{bridge.log_path.name} exited {code} on SIGTERM"
        bridge.start()
        scene.feed_and_commit(CHUNK)


def _ended_by_watchdog(bridge: BridgeProcess) -> bool:
    this_run = bridge.logs().rsplit("===== start #", 1)[-1]
    return "CRITICAL app.engine.watchdog:" in this_run


def stall_step(scene: Scene, rng: random.Random) -> None:
    """A step blocks (tests.chaos.pipelines:stall_once) past transaction.timeout.ms, then goes
    on. With one instance the stall is retried until it holds an open transaction and lasts
    until the broker aborted that transaction. Needs the stall pipeline."""
    stall_dir = Path(os.environ["CHAOS_STALL_DIR"])
    marker, stalled = stall_dir / "stall", stall_dir / "stalled"
    single = len(scene.bridges) == 1  # only then is every open record the stalled one's

    def stuck() -> bool:
        if stalled.exists():
            return True
        if caught_up(scene.kafka, scene.group, scene.src) and not scene.feeder.feed(3 * BATCH):
            raise AssertionError("input ran out before the step stalled")
        return False

    try:
        for _ in range(20):
            # One batch goes through and is sent; the stall comes in the next batch of the
            # same transaction (the next chunk is fed only once the group caught up).
            armed = marker.with_name("stall.tmp")
            armed.write_text(str(BATCH))
            armed.rename(marker)  # atomic: the step never reads a half-written marker
            scene.sup.wait(stuck, 300, "the step to stall")
            if not single:
                scene.sup.hold(TRANSACTION_TIMEOUT_MS / 1000 + 2)
                return
            if open_records(scene.kafka, scene.out) > 0:
                scene.sup.wait(lambda: open_records(scene.kafka, scene.out) == 0, 120, "abort")
                return
            # Stalled between two transactions: release, wait until the step went on, re-arm.
            marker.unlink()
            scene.sup.wait(lambda: not stalled.exists(), 60, "the step to go on")
        raise AssertionError("the step never stalled inside an open transaction")
    finally:
        marker.unlink(missing_ok=True)


def latency(scene: Scene, rng: random.Random) -> None:
    scene.open_transaction()
    toxic_everywhere(scene.rig.proxy, PROXIES, "latency", latency=REQUEST_TIMEOUT_MS + 2000)
    scene.feeder.feed(CHUNK)
    scene.sup.hold(PAST_REQUEST_TIMEOUT)
    scene.rig.proxy.heal()


def blackhole_coordinator(scene: Scene, rng: random.Random) -> None:
    """The transaction coordinator swallows every byte (timeout=0 never closes the
    connection): the commit the bridge sends next gets no answer (an indeterminate commit)."""
    node = scene.rig.transaction_coordinator(rng.choice(scene.transactional_ids))
    scene.open_transaction()
    toxic_everywhere(scene.rig.proxy, [f"b{node}"], "timeout", timeout=0)
    scene.sup.hold(PAST_REQUEST_TIMEOUT)
    scene.rig.proxy.heal()


def bandwidth(scene: Scene, rng: random.Random) -> None:
    toxic_everywhere(scene.rig.proxy, PROXIES, "bandwidth", rate=32)  # KB/s each way
    scene.feed_and_commit(CHUNK * 2)  # all of it crawls through the limit
    scene.rig.proxy.heal()


def bandwidth_held(scene: Scene, rng: random.Random) -> None:
    """The soak's bandwidth fault: the links throttled while a chunk is fed, for a fixed span,
    then healed (what follows waits for the commit). The soak's bridges carry a backlog into a
    fault, and a fetch of up to ``max.partition.fetch.bytes`` per partition cannot cross a
    32 KB/s link within the request timeout, so waiting for the commit under the limit (as
    :func:`bandwidth` does with the suite's small topics) would wait on the client's settings,
    not on the bridge."""
    toxic_everywhere(scene.rig.proxy, PROXIES, "bandwidth", rate=32)  # KB/s each way
    scene.feeder.feed(CHUNK * 2)
    scene.sup.hold(3 * PAST_REQUEST_TIMEOUT)
    scene.rig.proxy.heal()


def reset_peer(scene: Scene, rng: random.Random) -> None:
    """TCP RST on every connection to a partition leader while records are being produced."""
    node = scene.rig.leader(scene.out, rng.randrange(4))
    scene.open_transaction()
    toxic_everywhere(scene.rig.proxy, [f"b{node}"], "reset_peer", timeout=0)
    scene.feeder.feed(CHUNK)
    scene.sup.hold(PAST_REQUEST_TIMEOUT)
    scene.rig.proxy.heal()


FAULTS: dict[str, Fault] = {
    "kill-leader": kill_leader,
    "kill-txn-coordinator": kill_txn_coordinator,
    "kill-group-coordinator": kill_group_coordinator,
    "rolling-broker-restart": rolling_broker_restart,
    "pause-broker": pause_broker,
    "zombie-bridge": zombie_bridge,
    "kill-bridge": kill_bridge,
    "rolling-bridge-restart": rolling_bridge_restart,
    "stall-step": stall_step,
    "latency": latency,
    "blackhole-coordinator": blackhole_coordinator,
    "bandwidth": bandwidth,
    "reset-peer": reset_peer,
}
