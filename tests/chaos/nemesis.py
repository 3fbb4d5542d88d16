"""A seeded nemesis: random faults against 2-3 bridge instances and 3 brokers under live input.

    make chaos ROUNDS=20 SEED=7
    python -m tests.chaos.nemesis --rounds 20 --seed 7 [--only-round 12] [--protocol classic]
        [--workdir DIR]

Each round draws (from ``random.Random(f"{seed}/{round}")``, so any round replays alone) how
many instances run and which faults of :data:`tests.chaos.faults.FAULTS` hit them one after
the other, each inside an open transaction, and the group protocol its bridges speak (from
``random.Random(f"{seed}/{round}/protocol")``, so that the faults a seed drew before the
protocol was drawn stay the same); then it heals everything and runs the
exactly-once oracle with the live read_committed reader. A line per round, a table at the end;
on a violation the round's logs are kept and the command that replays it is printed.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import tempfile
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from tests.chaos.faults import FAULTS
from tests.chaos.scene import Scene
from tests.support.chaos import Rig

RECORDS_PER_ROUND = 100_000  # a pool: a round feeds what its faults need
STALL_PIPELINE = "tests.chaos.pipelines:stall_once"


@dataclass
class RoundResult:
    index: int
    instances: int
    faults: list[str]
    protocol: str = "consumer"
    records: int = 0
    aborted: int = 0
    restarts: int = 0
    liveness_kills: int = 0
    error: str | None = None
    seconds: float = 0.0

    def line(self, seed: int) -> str:
        verdict = "ok" if self.error is None else f"VIOLATION: {self.error.splitlines()[0]}"
        return (
            f"round {self.index:3d} seed={seed} bridges={self.instances} "
            f"protocol={self.protocol} "
            f"faults={','.join(self.faults)} records={self.records} "
            f"aborted_seen_uncommitted={self.aborted} exit3_restarts={self.restarts} "
            f"liveness_kills={self.liveness_kills} "
            f"{self.seconds:.0f}s {verdict}"
        )


def plan(seed: int, index: int) -> tuple[random.Random, int, list[str]]:
    """The round's random source, instance count and faults: a function of seed and index."""
    rng = random.Random(f"{seed}/{index}")
    instances = rng.choice([2, 3])
    kinds = rng.sample(sorted(FAULTS), rng.choice([2, 3]))
    return rng, instances, kinds


def protocol_of(seed: int, index: int) -> str:
    """The round's group protocol: a function of seed and index, drawn apart from the faults."""
    return random.Random(f"{seed}/{index}/protocol").choice(["consumer", "classic"])


def run_round(
    rig: Rig, log_dir: Path, seed: int, index: int, protocol: str | None = None
) -> RoundResult:
    """One round on ``rig``; never raises for a violation (it is in ``error``). ``protocol``:
    the round's group protocol instead of the seed's (``make test`` runs one of each)."""
    rng, instances, kinds = plan(seed, index)
    protocol = protocol or protocol_of(seed, index)
    result = RoundResult(index, instances, kinds, protocol)
    started = time.monotonic()
    log_dir.mkdir(parents=True, exist_ok=True)
    os.environ["CHAOS_STALL_DIR"] = str(log_dir)  # the bridges inherit it (stall-step)
    scene = Scene(
        rig, log_dir, records=RECORDS_PER_ROUND, proxied=True, pipeline=STALL_PIPELINE,
        group_protocol=protocol,
    )  # fmt: skip
    try:
        scene.start(instances)
        scene.feed_and_commit(2000)
        for kind in kinds:
            FAULTS[kind](scene, rng)
        verdict = scene.finish()
        result.records, result.aborted = verdict.records, verdict.aborted_uncommitted
    except Exception as exc:  # a violation or a stuck round: both are reported, logs kept
        result.error = f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"
    finally:
        result.restarts = scene.sup.restarts
        result.liveness_kills = scene.sup.liveness_kills
        scene.close()
        try:
            rig.heal()
        except Exception as exc:
            result.error = result.error or f"cluster did not heal: {exc}"
        result.seconds = time.monotonic() - started
    return result


@dataclass
class Table:
    rounds: int = 0
    violations: list[int] = field(default_factory=list)
    faults: Counter[str] = field(default_factory=Counter)
    records: int = 0
    aborted: int = 0
    restarts: int = 0
    liveness_kills: int = 0

    def add(self, r: RoundResult) -> None:
        self.rounds += 1
        self.faults.update(r.faults)
        self.records += r.records
        self.aborted += r.aborted
        self.restarts += r.restarts
        self.liveness_kills += r.liveness_kills
        if r.error is not None:
            self.violations.append(r.index)

    def render(self, seed: int) -> str:
        rows = [f"{'fault':<24}{'times':>6}"]
        rows += [f"{kind:<24}{self.faults[kind]:>6}" for kind in sorted(FAULTS)]
        rows += [
            f"{'rounds':<24}{self.rounds:>6}",
            f"{'violations':<24}{len(self.violations):>6}",
            f"{'records checked':<24}{self.records:>6}",
            f"{'aborted (uncommitted)':<24}{self.aborted:>6}",
            f"{'exit-3 restarts':<24}{self.restarts:>6}",
            f"{'liveness kills':<24}{self.liveness_kills:>6}",
            f"seed {seed}",
        ]
        return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.chaos.nemesis", description=__doc__)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--only-round", type=int, default=None, help="replay one round")
    parser.add_argument("--workdir", type=Path, default=None, help="default: a temp dir")
    parser.add_argument(
        "--protocol", choices=["consumer", "classic"], default=None,
        help="every round's group protocol (default: drawn per round from the seed)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="eos-chaos-"))
    rounds = [args.only_round] if args.only_round is not None else range(args.rounds)
    table = Table()
    rig = Rig(workdir / "rig").start()
    try:
        for index in rounds:
            result = run_round(rig, workdir / f"round-{index}", args.seed, index, args.protocol)
            table.add(result)
            print(result.line(args.seed), flush=True)
            if result.error is None:
                shutil.rmtree(workdir / f"round-{index}", ignore_errors=True)
            else:
                print(result.error, file=sys.stderr)
                replay = f"python -m tests.chaos.nemesis --seed {args.seed} --only-round {index}"
                print(f"  logs kept in {workdir / f'round-{index}'}; replay: {replay}", flush=True)
    finally:
        rig.stop()
    print(table.render(args.seed))
    if table.violations:
        print(f"VIOLATIONS in rounds {table.violations} (seed {args.seed}); logs in {workdir}")
        return 1
    shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
