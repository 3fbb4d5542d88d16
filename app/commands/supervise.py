"""``eos-bridge supervise [--max-restarts N] [--window S] -- run ...``: restart the bridge at once.

Exit 3 means "a restart recovers" (a call stuck inside librdkafka, a fatal producer, an unknown
commit outcome): the new process's ``init_transactions`` fences the old epoch and state is
restored from the local store plus the changelog tail. On Kubernetes the kubelet restarts a
container that exits, but with its crash-loop back-off (10 s, 20 s, 40 s … for repeated exits);
this supervisor, the image's entry point, restarts the child in the same container at once.

Bounded: more than ``max_restarts`` restarts within ``window`` seconds and it exits with the
child's code, so a real crash loop still reaches Kubernetes. Any exit other than 3 (0 clean, 2
configuration, 4 record) ends the supervisor with that code: a restart cannot fix those. Exit
5 (this static member fenced) is restarted like 3: after a coordinator failover the group can
fence the instance's own earlier membership, which a restart fixes; a live twin fences it again
at once and spends the budget. SIGTERM/SIGINT go to the child (also one that arrives while a
restarted child is being started); the supervisor then waits for it and exits with its code,
never restarting it. A child killed by a signal N ends the supervisor with 128 + N.
"""

from __future__ import annotations

import argparse
import logging
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

from pydantic import Field

from app.config import ConnectionSettings, LogFormat, LogLevel, load_tool_settings
from app.errors import ConfigError
from app.ops import logs

log = logging.getLogger("app.supervise")

# The bridge's EXIT_FATAL ("the restart recovers") and EXIT_FENCED (fenced by its own earlier
# static membership after a coordinator failover: the restart joins afresh; a live twin keeps
# fencing and spends the budget, so it still surfaces).
RESTARTABLE = frozenset({3, 5})
DEFAULT_MAX_RESTARTS = 5
DEFAULT_WINDOW_S = 600.0


@dataclass(slots=True)
class RestartBudget:
    """At most ``max_restarts`` restarts within any ``window_s`` seconds (pure: times are
    handed in)."""

    max_restarts: int
    window_s: float
    _times: deque[float] = field(default_factory=deque)

    def allow(self, now: float) -> bool:
        """Whether a restart at ``now`` is within the budget; an allowed one is counted."""
        while self._times and now - self._times[0] >= self.window_s:
            self._times.popleft()
        if len(self._times) >= self.max_restarts:
            return False
        self._times.append(now)
        return True

    @property
    def used(self) -> int:
        return len(self._times)


class Supervisor:
    """Runs ``command`` as a child until it ends with a code a restart cannot help.

    Args:
        command: the child's argv.
        budget: how many exit-3 restarts are allowed.
        clock: monotonic seconds (tests hand in their own).
        http_port: the child's ``/readyz`` port, watched after a restart (0: not watched).
    """

    def __init__(
        self,
        command: Sequence[str],
        budget: RestartBudget,
        clock: Callable[[], float] = time.monotonic,
        http_port: int = 0,
    ) -> None:
        self._command = list(command)
        self._http_port = http_port
        self._budget = budget
        self._clock = clock
        self._child: subprocess.Popen[bytes] | None = None
        self._stopping: int | None = None  # the signal that asked to stop
        self._signalled: subprocess.Popen[bytes] | None = None  # the child that received it

    def forward(self, signum: int, _frame: FrameType | None = None) -> None:
        """SIGTERM/SIGINT: hand the signal to the child; no restart after it ends."""
        self._stopping = signum
        child = self._child
        if child is not None and child.poll() is None:
            child.send_signal(signum)
            self._signalled = child

    def run(self) -> int:
        """Start the child, restart it on exit 3 or 5 within the budget; the final exit code."""
        restarts = 0
        while True:
            started = self._clock()
            # Its own process group: a terminal's Ctrl-C reaches the child once, through us.
            self._child = subprocess.Popen(self._command, process_group=0)
            if self._stopping is not None and self._signalled is not self._child:
                # The signal came while this child was being started (a restart): it stops too.
                self.forward(self._stopping)
            if restarts:
                self._report_ready(restarts, started)
            code = exit_status(self._child.wait())
            ended = self._clock()
            if self._stopping is not None or code not in RESTARTABLE:
                return code
            if not self._budget.allow(ended):
                log.error(
                    "bridge exited %d: %d restarts within %.0fs already (--max-restarts, "
                    "--window); exiting %d so the crash loop is seen",
                    code,
                    self._budget.max_restarts,
                    self._budget.window_s,
                    code,
                )
                return code
            restarts += 1
            log.warning(
                "bridge exited %d after %.1fs; restart %d (%d of %d within %.0fs), at once",
                code,
                ended - started,
                restarts,
                self._budget.used,
                self._budget.max_restarts,
                self._budget.window_s,
            )

    def _report_ready(self, restart: int, exited: float) -> None:
        """Log when the restarted child answers ``/readyz`` again: what the restart cost."""
        child, port = self._child, self._http_port
        if not port:
            return

        def watch() -> None:
            while child is not None and child.poll() is None:
                if _ready(port):
                    log.info(
                        "restart %d: ready again %.1fs after the exit",
                        restart,
                        self._clock() - exited,
                    )
                    return
                time.sleep(0.2)

        threading.Thread(target=watch, name="supervise-ready", daemon=True).start()


def exit_status(returncode: int) -> int:
    """A child's exit code as a shell reports it: killed by signal N is 128 + N (137 for the
    OOM killer's SIGKILL), never a negative code that would leave the supervisor as 256 - N."""
    return 128 - returncode if returncode < 0 else returncode


def _ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1) as resp:
            return bool(resp.status == 200)
    except OSError:
        return False


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``supervise``."""
    parser = sub.add_parser(
        "supervise",
        help="run an eos-bridge command (run) and restart it at once when it exits 3 or 5",
        description="Run an eos-bridge command (run) as a child process and restart it at once "
        "when it exits 3 or 5 (at most --max-restarts times within --window seconds, then exit "
        "with its code); any other exit code ends the supervisor with that code; SIGTERM/SIGINT "
        "go to the child.",
    )
    parser.add_argument(
        "--max-restarts",
        type=int,
        default=DEFAULT_MAX_RESTARTS,
        help=f"restarts allowed within --window (default {DEFAULT_MAX_RESTARTS})",
    )
    parser.add_argument(
        "--window",
        type=float,
        default=DEFAULT_WINDOW_S,
        help=f"seconds (default {DEFAULT_WINDOW_S:.0f})",
    )
    parser.add_argument("child", nargs=argparse.REMAINDER, help="-- then the command, e.g. run")
    parser.set_defaults(func=cmd_supervise)


class ProcessSettings(ConnectionSettings):
    """What the supervisor reads of the bridge's settings, from the same sources (the rest
    ignored): its own lines take the bridge's log format and level, and it watches the
    bridge's ``/readyz`` on ``http_port``."""

    http_port: int = Field(9000, ge=0, le=65535)
    log_format: LogFormat = "text"
    log_level: LogLevel = "INFO"


def child_settings(child: Sequence[str]) -> ProcessSettings:
    """The child's log format, log level and HTTP port, from its settings (``BRIDGE_*``, its
    config file: ``BRIDGE_CONFIG_FILE`` or its ``--config``); the defaults when they do not
    load (the child then says why in one line and exits 2, which ends the supervisor)."""
    config: Path | None = None
    for i, arg in enumerate(child):
        if arg == "--config" and i + 1 < len(child):
            config = Path(child[i + 1])
        elif arg.startswith("--config="):
            config = Path(arg.partition("=")[2])
    try:
        return load_tool_settings(ProcessSettings, config)
    except ConfigError:
        return ProcessSettings.model_construct()


def cmd_supervise(args: argparse.Namespace) -> int:
    child = args.child[1:] if args.child[:1] == ["--"] else args.child
    if not child or args.max_restarts < 0 or args.window <= 0:
        print(
            "eos-bridge supervise: usage: supervise [--max-restarts N] [--window S] -- run ...",
            file=sys.stderr,
        )
        return 2
    settings = child_settings(child)
    logs.setup(settings.log_level, settings.log_format)  # its lines as the bridge's (JSON too)
    supervisor = Supervisor(
        [sys.executable, "-m", "app", *child],
        RestartBudget(args.max_restarts, args.window),
        http_port=settings.http_port,
    )
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, supervisor.forward)
    return supervisor.run()
