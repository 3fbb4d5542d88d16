"""One throughput run: a contender works through the seeded backlog until its group has
committed the input end offsets.

records/s = input records / (last-output time - first-output time): from the first record
appended to the output topic to the last one. The time until the group has committed the input
end offsets is reported apart (``committed_records_per_s``): every contender commits once per
commit interval, so that end point waits up to one interval for the next commit after the work
is done, which on a run of a few seconds moves the rate by tens of percent at random. Start-up
(imports, group join, recovery of empty state) is reported apart as ``startup_s``; CPU seconds
are counted over the same interval as the rate.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.contenders import REPO, Contender, Job, mm2
from bench.kafka import Probe, count_committed, create_topics, delete_topics_of
from bench.process import ContenderProcess
from bench.xcluster import MM2Probe, XProbe

POLL_S = 0.05


class RunFailed(RuntimeError):
    """A contender exited or did not catch up in time; the message carries its log tail."""


@dataclass(slots=True)
class RunResult:
    pipeline: str
    contender: str
    rep: int
    records: int
    seconds: float
    records_per_s: float
    startup_s: float
    cpu_s: float
    cpu_s_per_million: float
    peak_rss_mb: float
    outputs: int
    exit_code: int
    committed_records_per_s: float  # to the group's commit of the input end offsets

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def throughput_run(
    contender: Contender,
    *,
    bootstrap: str,
    pipeline: str,
    input_topic: str,
    partitions: int,
    commit_interval: float,
    rep: int,
    workdir: Path,
    timeout: float,
    python_args: tuple[str, ...] = (),
    on_start: Callable[[int], None] | None = None,
    source: Path | None = None,
    target: str | None = None,
) -> RunResult:
    """Run ``contender`` on ``input_topic`` from the beginning; measure; stop; clean up.

    ``python_args`` go between the interpreter and its module, ``on_start`` gets the pid (to
    attach a profiler, see bench.profile). ``target``: the output is on that second cluster,
    the input positions in its offsets topic (a cross-cluster contender).
    """
    uid = f"{pipeline}-{contender.key}-{rep}-{uuid.uuid4().hex[:6]}"
    output_topic = (
        mm2.output_topic(f"bench-{uid}", input_topic)
        if contender.kind == "mm2"
        else f"bench-out-{uid}"
    )
    job = Job(
        bootstrap, pipeline, input_topic, output_topic, f"bench-{uid}",
        commit_interval, workdir / f"state-{uid}", source or REPO, target=target,
    )  # fmt: skip
    out = target or bootstrap  # the cluster of the output
    create_topics(out, [job.output_topic], partitions)
    probe = (
        (MM2Probe if contender.kind == "mm2" else XProbe)(
            bootstrap, target, job.group, input_topic, job.output_topic
        )
        if target is not None
        else Probe(bootstrap, job.group, input_topic, job.output_topic)
    )
    proc = ContenderProcess(contender, job, workdir / f"{uid}.log", python_args)
    if on_start is not None:
        on_start(proc.pid)
    try:
        first_t, first_cpu = _wait(proc, probe, timeout, "first output", probe.output_started)
        appends = _Appends(proc, probe)
        done_t, done_cpu = _wait(proc, probe, timeout, "caught up", appends.caught_up)
        last_t, last_cpu = appends.last_output(done_t, done_cpu)
        rss = proc.peak_rss_mb()
        exit_code = proc.stop()
        outputs = count_committed(out, job.output_topic)
    finally:
        if proc.alive():
            proc.stop(timeout=10)
        probe.close()
        delete_topics_of(bootstrap, uid)
        if target is not None:
            delete_topics_of(target, uid)
    seconds = max(last_t - first_t, 1e-6)
    return RunResult(
        pipeline, contender.key, rep, probe.total, seconds, probe.total / seconds,
        first_t - proc.started, last_cpu - first_cpu,
        (last_cpu - first_cpu) / probe.total * 1e6, rss, outputs, exit_code,
        probe.total / max(done_t - first_t, 1e-6),
    )  # fmt: skip


class _Appends:
    """The output's appended count at every poll until the group caught up, to find when the
    last output record was appended."""

    def __init__(self, proc: ContenderProcess, probe: Probe) -> None:
        self._proc, self._probe = proc, probe
        self._samples: list[tuple[float, float, int]] = []  # (time, CPU seconds, appended)

    def caught_up(self) -> bool:
        appended = self._probe.appended()
        if appended is not None:
            self._samples.append((time.monotonic(), self._proc.cpu_seconds(), appended))
        return self._probe.caught_up()

    def last_output(self, done_t: float, done_cpu: float) -> tuple[float, float]:
        """(time, CPU seconds) of the first poll that saw every output record appended;
        (done_t, done_cpu) if none did (output appended after the group caught up)."""
        final = self._probe.appended()  # now: the last commit's markers included
        if final is None:
            return done_t, done_cpu
        # An exactly-once contender's last commit appends one marker per output partition it
        # wrote to, after its last records: the records were all there at final - partitions.
        complete = final - self._probe.output_partitions
        for t, cpu, appended in self._samples:
            if appended >= complete:
                return t, cpu
        return done_t, done_cpu


def _wait(
    proc: ContenderProcess, probe: Probe, timeout: float, what: str, condition: Any
) -> tuple[float, float]:
    """Poll ``condition`` until true; returns (monotonic time, CPU seconds) at that moment."""
    deadline = proc.started + timeout
    while True:
        if not proc.alive():
            raise RunFailed(f"exited with {proc.proc.returncode} before {what}:\n{proc.tail()}")
        if condition():
            return time.monotonic(), proc.cpu_seconds()
        if time.monotonic() > deadline:
            raise RunFailed(
                f"no {what} after {timeout:.0f}s (committed {probe.committed()}):\n{proc.tail()}"
            )
        time.sleep(POLL_S)
