"""``python -m bench.fused_cost``: CPU cost per record of the fused P1 loop, no broker.

Runs the fused functions (:func:`app.pipeline.steps.fuse`) of P1's spec form, its Python form
(one-expression functions inlined, :mod:`app.pipeline.inline`), the Python form with every
function called (inlining off: the loop before it) and the hand-written loop's body over the
same 200k in-memory records with a no-op produce. Each variant runs interleaved in rounds; the
figure is the fastest 2000-record batch (the least disturbed by a shared machine), so the
ratios hold where a broker run's are noise.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any

import orjson

import app.pipeline.fusion as fusion
from app.pipeline.spec import load_spec
from app.pipeline.steps import fuse
from app.serde import formats
from bench.contenders import REPO
from bench.data import make_value
from bench.pipelines import p1
from bench.transforms import enrich, keep

BATCH = 2000


class _Msg:
    __slots__ = ("_k", "_v")

    def __init__(self, value: bytes, key: bytes) -> None:
        self._v, self._k = value, key

    def error(self) -> None:
        return None

    def value(self) -> bytes:
        return self._v

    def key(self) -> bytes:
        return self._k

    def headers(self) -> None:
        return None

    def partition(self) -> int:
        return 0

    def timestamp(self) -> tuple[int, int]:
        return (1, 1_700_000_000_000)


def _produce(topic: str, value: bytes, key: Any, *placed: Any) -> None:
    pass


def _room(*_: Any) -> None:
    raise AssertionError("no full queue here")


def _hand(messages: list[Any], produce: Any, room: Any, default: str) -> tuple[int, int]:
    loads, dumps = orjson.loads, orjson.dumps
    for m in messages:
        value = loads(m.value())
        if keep(value):
            produce(default, dumps(enrich(value)), m.key())
    return len(messages), 0


def _fastest_batch_us(run: Callable[..., Any], messages: list[Any]) -> float:
    best = float("inf")
    for i in range(0, len(messages), BATCH):
        started = time.perf_counter()
        run(messages[i : i + BATCH], _produce, _room, "out")
        best = min(best, (time.perf_counter() - started) / BATCH * 1e6)
    return best


def main(records: int = 200_000, rounds: int = 5) -> int:
    rng = random.Random(7)
    messages: list[Any] = []
    for i in range(records):
        user = rng.randrange(100_000)
        value = make_value(i, user, rng, 1_700_000_000_000 + i)
        messages.append(_Msg(value, f"user-{user:06d}".encode()))
    json = formats()
    spec = fuse(load_spec(REPO / "bench" / "specs" / "p1.yaml").steps, json, 1_000_000)
    inlined = fuse(p1.steps, json, 1_000_000)
    real, fusion.inline = fusion.inline, lambda fn: None  # type: ignore[assignment]
    try:
        called = fuse(p1.steps, json, 1_000_000)
    finally:
        fusion.inline = real
    variants = {
        "spec form": spec, "Python form (inlined)": inlined,
        "Python form (called)": called, "hand loop body": _hand,
    }  # fmt: skip
    best: dict[str, float] = {}
    for _ in range(rounds):
        for name, run in variants.items():
            best[name] = min(best.get(name, float("inf")), _fastest_batch_us(run, messages))
    for name, us in best.items():
        print(f"{name:<24} {us:.3f} µs/record  x spec {best['spec form'] / us:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
