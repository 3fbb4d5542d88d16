"""One throughput run: a contender works through the seeded backlog until its group has
committed the input end offsets.

records/s = input records / (caught-up time - first-output time). Start-up (imports, group
join, recovery of empty state) is reported apart as ``startup_s``; CPU seconds are counted over
the same interval as the rate.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.contenders import REPO, Contender, Job
from bench.kafka import Probe, count_committed, create_topics, delete_topics_of
from bench.process import ContenderProcess

POLL_S = 0.1


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
) -> RunResult:
    """Run ``contender`` on ``input_topic`` from the beginning; measure; stop; clean up.

    ``python_args`` go between the interpreter and its module, ``on_start`` gets the pid (to
    attach a profiler, see bench.profile).
    """
    uid = f"{pipeline}-{contender.key}-{rep}-{uuid.uuid4().hex[:6]}"
    job = Job(
        bootstrap, pipeline, input_topic, f"bench-out-{uid}", f"bench-{uid}",
        commit_interval, workdir / f"state-{uid}", source or REPO,
    )  # fmt: skip
    create_topics(bootstrap, [job.output_topic], partitions)
    probe = Probe(bootstrap, job.group, input_topic, job.output_topic)
    proc = ContenderProcess(contender, job, workdir / f"{uid}.log", python_args)
    if on_start is not None:
        on_start(proc.pid)
    try:
        first_t, first_cpu = _wait(proc, probe, timeout, "first output", probe.output_started)
        done_t, done_cpu = _wait(proc, probe, timeout, "caught up", probe.caught_up)
        rss = proc.peak_rss_mb()
        exit_code = proc.stop()
        outputs = count_committed(bootstrap, job.output_topic)
    finally:
        if proc.alive():
            proc.stop(timeout=10)
        probe.close()
        delete_topics_of(bootstrap, uid)
    seconds = max(done_t - first_t, 1e-6)
    return RunResult(
        pipeline, contender.key, rep, probe.total, seconds, probe.total / seconds,
        first_t - proc.started, done_cpu - first_cpu,
        (done_cpu - first_cpu) / probe.total * 1e6, rss, outputs, exit_code,
    )  # fmt: skip


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
