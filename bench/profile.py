"""Profile one eos-bridge run: ``python -m bench.profile --pipeline p1 [--tool py-spy]``.

Starts its own broker, seeds the pipeline's input, runs the bridge until its group caught up,
stops it with SIGTERM and writes ``bench/results/profile-<pipeline>-<guarantee>-<tool>.*``:

* ``pyinstrument`` (wall clock, call tree): ``.txt`` and ``.html``;
* ``phases`` (:mod:`bench.checkpoint_phases`): wall and main-thread CPU per checkpoint step,
  ``.md``;
* ``py-spy`` (attached sampler, on-CPU samples only, native frames off): ``.txt`` with the
  functions and source lines that use the most CPU.

Profiled rates are slower than real ones: compare profiles with profiles, rates with
``python -m bench``.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import tempfile
from collections import Counter
from pathlib import Path

from bench.checkpoint_phases import render as render_phases
from bench.cli import INPUT_KEYS, INPUTS, log
from bench.contenders import BY_KEY, REPO
from bench.data import seed_topic
from bench.kafka import create_topics
from bench.throughput import throughput_run
from devkit.kafka import LocalKafka


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.profile", description=__doc__)
    p.add_argument("--pipeline", default="p1", choices=sorted(INPUTS))
    p.add_argument(
        "--contender",
        default="bridge-eos",
        choices=["bridge-eos", "bridge-eos-spec", "bridge-alo", "bridge-eos-pipe"],
    )
    p.add_argument("--tool", default="pyinstrument", choices=["pyinstrument", "py-spy", "phases"])
    p.add_argument("--records", type=int, default=200_000)
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument("--commit-interval", type=float, default=1.0)
    p.add_argument("--out", type=Path, default=REPO / "bench" / "results")
    args = p.parse_args(argv)
    contender = BY_KEY[args.contender]
    workdir = Path(tempfile.mkdtemp(prefix="eos-bench-profile-"))
    args.out.mkdir(parents=True, exist_ok=True)
    form = "-spec" if contender.spec else ""
    stem = args.out / f"profile-{args.pipeline}-{contender.guarantee}{form}-{args.tool}"
    session = workdir / "profile.pyisession"
    spies: list[subprocess.Popen[bytes]] = []
    python_args: tuple[str, ...] = ()
    if args.tool == "pyinstrument":
        python_args = ("-m", "pyinstrument", "-r", "pyisession", "-o", str(session))
    elif args.tool == "phases":  # wall and main-thread CPU per checkpoint step
        python_args = ("-m", "bench.checkpoint_phases", str(workdir / "phases.json"))

    def attach(pid: int) -> None:
        if args.tool == "py-spy":
            spies.append(_py_spy(pid, workdir / "stacks.txt"))

    kafka = LocalKafka(workdir / "kafka", brokers=1).start()
    try:
        topic = INPUTS[args.pipeline]
        create_topics(kafka.bootstrap, [topic], args.partitions)
        seed_topic(kafka.bootstrap, topic, args.records, INPUT_KEYS[topic])
        result = throughput_run(
            contender, bootstrap=kafka.bootstrap, pipeline=args.pipeline, input_topic=topic,
            partitions=args.partitions, commit_interval=args.commit_interval, rep=0,
            workdir=workdir, timeout=120 + args.records / 200, python_args=python_args,
            on_start=attach,
        )  # fmt: skip
        log(f"profiled run: {result.records_per_s:,.0f} rec/s (slowed by the profiler)")
        if args.tool == "pyinstrument":
            _render_pyinstrument(session, stem)
        elif args.tool == "phases":
            text = render_phases(workdir / "phases.json", args.commit_interval)
            stem.with_suffix(".md").write_text(text)
            print(text)
        else:
            spies[0].wait(60)  # py-spy ends with the process it samples
            _render_py_spy(workdir / "stacks.txt", stem)
    finally:
        for spy in spies:
            if spy.poll() is None:
                spy.terminate()
        kafka.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    log(f"wrote {stem}.*")
    return 0


def _py_spy(pid: int, out: Path) -> subprocess.Popen[bytes]:
    exe = shutil.which("py-spy") or str(Path(REPO / ".venv" / "bin" / "py-spy"))
    argv = [exe, "record", "--pid", str(pid), "--rate", "250", "--format", "raw", "-o", str(out)]
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _render_py_spy(stacks: Path, stem: Path, top: int = 30) -> None:
    """On-CPU sample shares from py-spy's collapsed stacks: per function (self, inclusive)
    and per source line (self: where a C call such as ``produce`` or ``loads`` shows up)."""
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    lines_self: Counter[str] = Counter()
    total = 0
    for line in stacks.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = [_frame(f) for f in stack.split(";") if f]
        if not frames:
            continue
        n = int(count)
        total += n
        own[frames[-1][0]] += n
        lines_self[frames[-1][1]] += n
        for function in {f[0] for f in frames}:
            inclusive[function] += n
    out = [f"py-spy on-CPU samples: {total} (imports and start-up included)"]
    for title, counter in (
        ("self % by function", own),
        ("inclusive % by function", inclusive),
        ("self % by line", lines_self),
    ):
        out += ["", title]
        out += [f"{100 * n / total:6.1f}   {name}" for name, n in counter.most_common(top)]
    stem.with_suffix(".txt").write_text("\n".join(out) + "\n")


def _frame(frame: str) -> tuple[str, str]:
    """``"Bridge.run (app/engine/loop.py:86)"`` → (``"Bridge.run (loop.py)"``, ``"loop.py:86"``)."""
    name, _, where = frame.partition(" (")
    where = where.rstrip(")").rsplit("/", 1)[-1]
    file = where.rsplit(":", 1)[0]
    return f"{name} ({file})", where


def _render_pyinstrument(session_path: Path, stem: Path) -> None:
    from pyinstrument.renderers import ConsoleRenderer, HTMLRenderer
    from pyinstrument.session import Session

    session = Session.load(str(session_path))
    text = ConsoleRenderer(unicode=True, color=False, show_all=False, short_mode=False)
    stem.with_suffix(".txt").write_text(text.render(session))
    stem.with_suffix(".html").write_text(HTMLRenderer().render(session))


if __name__ == "__main__":
    raise SystemExit(main())
