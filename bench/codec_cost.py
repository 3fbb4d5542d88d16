"""``python -m bench.codec_cost``: per-record cost of the value codecs on P1, no broker, no
registry.

Over the bench's own records (:func:`bench.data.records`: the kv input, in JSON and in its Avro
twin with the 5-byte Confluent header, as the seeded topics hold them), each operation in
µs per record: orjson ``loads``/``dumps``, fastavro's ``schemaless_reader``/``schemaless_writer``
as the hand-written Avro loop calls them (:class:`bench.contenders.hand_avro.AvroValues`), and
the hand loop's whole P1 body (decode, filter, map, encode, a no-op produce) with each codec.
Each operation runs interleaved in rounds; the figure is the fastest 2000-record batch (the
least disturbed by a shared machine). Then the arithmetic of the issue-29 goal: how many µs the
Avro codec may cost per input record for Avro P1 to reach a given fraction of JSON P1.
"""

from __future__ import annotations

import argparse
import io
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson
from fastavro import schemaless_writer

from bench.contenders import REPO
from bench.contenders.hand import p1 as hand_p1
from bench.contenders.hand_avro import AvroValues, header, parse
from bench.data import records
from bench.transforms import enrich, keep

BATCH = 2000
SCHEMAS = REPO / "bench" / "schemas"


@dataclass(slots=True, frozen=True)
class Budget:
    """The per-input-record arithmetic of "Avro P1 ≥ ``goal`` x JSON P1" for a loop whose
    JSON record path costs ``json_path_us`` of which ``json_codec_us`` is orjson."""

    json_path_us: float
    json_codec_us: float
    avro_codec_us: float
    goal: float = 0.8

    @property
    def avro_path_us(self) -> float:
        """The same path with the Avro codec in place of orjson."""
        return self.json_path_us - self.json_codec_us + self.avro_codec_us

    @property
    def ratio(self) -> float:
        """Avro/JSON throughput if CPU per record alone set the rate."""
        return self.json_path_us / self.avro_path_us

    @property
    def allowed_avro_codec_us(self) -> float:
        """The most the Avro codec may cost per input record for the goal."""
        return self.json_path_us / self.goal - self.json_path_us + self.json_codec_us


class _Msg:
    __slots__ = ("_k", "_v")

    def __init__(self, value: bytes, key: bytes) -> None:
        self._v, self._k = value, key

    def value(self) -> bytes:
        return self._v

    def key(self) -> bytes:
        return self._k


def inputs(n: int) -> tuple[list[_Msg], list[_Msg], AvroValues]:
    """``n`` kv records as JSON messages and as Avro messages (writer ID 1), and the hand
    loop's Avro codec for them (P1's output schema, ID 2)."""
    writer = parse((SCHEMAS / "input.avsc").read_text())
    avro = AvroValues(parse((SCHEMAS / "p1.avsc").read_text()), 2, lambda _id: writer)
    as_json, as_avro = [], []
    for key, value, _ts in records(n, 100_000, 7, 1_700_000_000_000):
        out = io.BytesIO()
        out.write(header(1))
        schemaless_writer(out, writer, orjson.loads(value))
        as_json.append(_Msg(value, key))
        as_avro.append(_Msg(out.getvalue(), key))
    return as_json, as_avro, avro


def _fastest_batch_us(run: Callable[[list[Any]], Any], items: list[Any]) -> float:
    best = float("inf")
    for i in range(0, len(items), BATCH):
        batch = items[i : i + BATCH]
        started = time.perf_counter()
        run(batch)
        best = min(best, (time.perf_counter() - started) / len(batch) * 1e6)
    return best


def _each(fn: Callable[[Any], Any]) -> Callable[[list[Any]], None]:
    def run(batch: list[Any]) -> None:
        for item in batch:
            fn(item)

    return run


def _emit(value: bytes, key: bytes | None) -> None:
    pass


def measure(n: int, rounds: int) -> dict[str, float]:
    """µs per record of each operation (the fastest batch over ``rounds`` rounds)."""
    as_json, as_avro, avro = inputs(n)
    json_values = [m.value() for m in as_json]
    avro_values = [m.value() for m in as_avro]
    outputs = [enrich(v) for v in map(orjson.loads, json_values) if keep(v)]
    json_body, avro_body = hand_p1(orjson.loads, orjson.dumps), hand_p1(avro.loads, avro.dumps)
    ops: dict[str, tuple[Callable[[list[Any]], Any], list[Any]]] = {
        "orjson loads (input)": (_each(orjson.loads), json_values),
        "orjson dumps (P1 output)": (_each(orjson.dumps), outputs),
        "fastavro decode (input, 5-byte header)": (_each(avro.loads), avro_values),
        "fastavro encode (P1 output, 5-byte header)": (_each(avro.dumps), outputs),
        "hand loop P1 body, JSON": (lambda b: json_body(b, _emit), as_json),
        "hand loop P1 body, Avro": (lambda b: avro_body(b, _emit), as_avro),
    }
    best: dict[str, float] = {}
    for _ in range(rounds):
        for name, (run, items) in ops.items():
            best[name] = min(best.get(name, float("inf")), _fastest_batch_us(run, items))
    best["P1 pass fraction"] = len(outputs) / n
    return best


def budget(costs: dict[str, float], json_path_us: float, goal: float) -> Budget:
    """Per input record: the codecs weighted by P1's pass fraction (only kept records are
    encoded)."""
    kept = costs["P1 pass fraction"]
    json_codec = costs["orjson loads (input)"] + kept * costs["orjson dumps (P1 output)"]
    avro_codec = (
        costs["fastavro decode (input, 5-byte header)"]
        + kept * costs["fastavro encode (P1 output, 5-byte header)"]
    )
    return Budget(json_path_us, json_codec, avro_codec, goal)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.codec_cost", description=__doc__)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--json-path-us", type=float, default=5.0,
        help="CPU µs per record of the whole JSON P1 path to budget against (a bench run's "
        "CPU s per M records); default 5.0, eos-bridge's JSON P1",
    )  # fmt: skip
    parser.add_argument("--goal", type=float, default=0.8, help="Avro P1 / JSON P1 to reach")
    args = parser.parse_args(argv)
    costs = measure(args.records, args.rounds)
    for name, us in costs.items():
        if name != "P1 pass fraction":
            print(f"{name:<44} {us:6.2f} µs/record")
    b = budget(costs, args.json_path_us, args.goal)
    print(f"P1 pass fraction {costs['P1 pass fraction']:.3f}; per input record: JSON codec "
          f"{b.json_codec_us:.2f} µs, Avro codec {b.avro_codec_us:.2f} µs")  # fmt: skip
    print(f"JSON path {b.json_path_us:.2f} µs -> Avro path {b.avro_path_us:.2f} µs: Avro/JSON "
          f"{b.ratio:.2f} if CPU alone set the rate; {args.goal}x allows an Avro codec of "
          f"{b.allowed_avro_codec_us:.2f} µs per input record")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
