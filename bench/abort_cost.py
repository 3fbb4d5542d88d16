"""What one abort costs, with and without the new producer epoch after it (issue 55).

::

    python -m bench.abort_cost [--aborts 40] [--bootstrap HOST:PORT]

The production owner of a transaction (:class:`app.engine.transactions.Transactions`) against
a real broker (an embedded one unless ``--bootstrap`` is given): each cycle begins a
transaction, produces one record, flushes it and aborts; the abort is timed from the call to
the next transaction being open (with the new epoch: a new producer, its ``init_transactions``,
``begin_transaction``). The two ways alternate cycle by cycle (A B, B A, ...) so the broker and
the machine are the same for both. Prints the median and p90 wall milliseconds and the main
thread's CPU milliseconds per abort, and the difference.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from confluent_kafka import Consumer, Producer

from app.engine.transactions import Transactions
from app.engine.watchdog import Watchdog
from app.offsets import GroupOffsets
from app.ops.health import Health
from bench.kafka import broker_or_embedded, create_topics

_TOPIC = f"abort-cost-{time.time_ns()}"  # a new topic per run


def _owner(bootstrap: str, txn_id: str, renew: bool) -> Transactions:
    conf = {"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 0}
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{txn_id}-group"})
    watchdog = Watchdog(Health(stale_after=60.0))  # not started: a guard is recorded only
    txn = Transactions(
        lambda: Producer(conf), consumer, GroupOffsets(consumer, watchdog, 30.0),
        exactly_once=True, call_timeout=30.0, watchdog=watchdog, new_epoch_per_abort=renew,
    )  # fmt: skip
    txn.init()
    txn.begin()
    return txn


def _one_abort(txn: Transactions) -> tuple[float, float]:
    """One record produced and flushed in the open transaction, then the abort: (wall ms,
    CPU ms) of the abort until the next transaction is open."""
    txn.producer.produce(_TOPIC, b"v", b"k")
    txn.producer.flush(30.0)
    wall, cpu = time.perf_counter(), time.thread_time()
    txn.abort("bench", rewind=False)
    return (time.perf_counter() - wall) * 1000, (time.thread_time() - cpu) * 1000


def measure(bootstrap: str, aborts: int) -> dict[str, list[tuple[float, float]]]:
    create_topics(bootstrap, [_TOPIC], 1)
    owners = {
        "same epoch": _owner(bootstrap, f"abort-cost-same-{time.time_ns()}", False),
        "new epoch": _owner(bootstrap, f"abort-cost-new-{time.time_ns()}", True),
    }
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in owners}
    order = list(owners)
    for n in range(aborts):
        for name in order if n % 2 == 0 else reversed(order):
            samples[name].append(_one_abort(owners[name]))
    return samples


def report(samples: dict[str, list[tuple[float, float]]]) -> str:
    lines = ["| abort | median ms | p90 ms | CPU ms (median) | aborts |"]
    lines.append("|---|---:|---:|---:|---:|")
    medians = {}
    for name, values in samples.items():
        walls = sorted(w for w, _ in values)
        cpus = sorted(c for _, c in values)
        medians[name] = statistics.median(walls)
        p90 = walls[int(len(walls) * 0.9) - 1]
        lines.append(
            f"| {name} | {medians[name]:.1f} | {p90:.1f} | {statistics.median(cpus):.1f} "
            f"| {len(values)} |"
        )
    lines.append(
        f"\nthe new epoch adds {medians['new epoch'] - medians['same epoch']:.1f} ms per abort "
        f"(median)"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--aborts", type=int, default=40, help="aborts of each way")
    parser.add_argument("--bootstrap", help="an existing broker instead of an embedded one")
    args = parser.parse_args(argv)
    with broker_or_embedded(args.bootstrap) as bootstrap:
        print(report(measure(bootstrap, args.aborts)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
