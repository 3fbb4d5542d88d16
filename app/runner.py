"""Process life: the HTTP endpoints, signals, the watchdog, and the exit codes:
0 clean stop, 2 configuration, 3 fatal Kafka error (or a Kafka call stuck past its deadline,
see app.engine.watchdog), 4 record failure with on_error=fail, 5 another live instance uses this
instance_id. What is built comes from :func:`app.engine.start.build`.

A fenced static member (``FENCED_INSTANCE_ID``) is not always a live twin: after a group
coordinator fails over, the new coordinator can fence the member's own earlier membership
(librdkafka#3437). So the first fence is answered in-process: everything built is closed (its
open transaction aborted) and built again, which joins the group afresh, like a restart but
without leaving the process. A second fence within :data:`REJOIN_WINDOW_S` is a live twin: exit 5.
"""

from __future__ import annotations

import gc
import logging
import signal
import threading
import time
from collections.abc import Callable
from http.server import ThreadingHTTPServer
from types import FrameType
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from app.config import BridgeSettings
from app.engine.departure import group_session_s, leave_group, release_id
from app.engine.faults import NO_FAULTS, Faults
from app.engine.loop import Bridge
from app.engine.refusal import refusal
from app.engine.rejoin import UNRELEASED_RETRY_S, Rejoins
from app.engine.start import build
from app.engine.watchdog import Watchdog
from app.errors import (
    BridgeError,
    ConfigError,
    InstanceFenced,
    InstanceIdUnreleased,
    KafkaFatalError,
    RecordError,
)
from app.kafka.errors import describe
from app.kafka.stable import stable_offsets, written_partitions
from app.ops.health import Health, serve
from app.ops.logs import librdkafka_logging
from app.ops.metrics import Metrics
from app.ops.trim import Trimmer
from app.ops.unstable import UnstableOffsets
from app.serde.registry_settings import RegistryUnavailable
from changelog.naming import changelog_prefix

log = logging.getLogger(__name__)

EXIT_OK, EXIT_CONFIG, EXIT_FATAL, EXIT_RECORD, EXIT_FENCED = 0, 2, 3, 4, 5
_UNTIL_EVERY_S = 0.5
# A twin with our instance_id fences us again within seconds of each rejoin; coordinator moves
# (a failover, a rolling broker restart) are minutes apart.
REJOIN_WINDOW_S = 120.0


class _StoppedWhileStarting(BaseException):
    """SIGTERM/SIGINT while the bridge is being built: nothing was consumed, so nothing is
    left to commit (a BaseException: no start-up ``except Exception`` may swallow it)."""


class _Stop:
    """SIGTERM/SIGINT stop the bridge cleanly, also while it is being built (a rollout can stop
    a pod that is still starting, maybe waiting for an unreachable broker): the build is left
    at once, nothing is consumed, exit 0."""

    def __init__(self) -> None:
        self.requested = False
        self.building = False
        self.bridge: Bridge | None = None

    def __call__(self, signum: int, _frame: FrameType | None) -> None:
        log.info("received %s: stopping after the current batch", signal.Signals(signum).name)
        self.request()
        if self.building:
            raise _StoppedWhileStarting

    def hand_to(self, bridge: Bridge) -> None:
        self.bridge = bridge
        bridge.stopping = self.requested

    def request(self) -> None:
        """Stop the bridge running now (and any built after it)."""
        self.requested = True
        if self.bridge is not None:
            self.bridge.stopping = True


def run(
    settings: BridgeSettings,
    *,
    until: Callable[[], bool] | None = None,
    replaying: bool = False,
    faults: Faults = NO_FAULTS,
) -> int:
    """Run until SIGTERM/SIGINT (or until ``until()`` says done, asked every half second);
    returns the process exit code. ``replaying``, ``faults``: see
    :func:`app.engine.start.build`."""
    metrics, health = Metrics(), _health(settings)
    try:
        server = _serve(settings, health, metrics)
    except OSError as exc:  # typically EADDRINUSE: another process holds the port
        log.error(
            "http_port (BRIDGE_HTTP_PORT): cannot listen on %s:%d: %s; choose a free port "
            "or 0 to turn the endpoints off",
            settings.http_host,
            settings.http_port,
            exc.strerror or exc,
        )
        return EXIT_CONFIG
    log.info("starting eos-bridge: %s", {k: v for k, v in settings.masked().items() if v})
    log.info("%s", _first_line(settings))
    watchdog = Watchdog(health, stale_after=health.stale_after).start()
    trimmer = Trimmer().start()  # RSS back down after a backlog's peak (app.ops.trim)
    unstable: UnstableOffsets | None = None
    stop = _stop_on_signals(settings, watchdog, until)
    rejoins = Rejoins(
        REJOIN_WINDOW_S, lambda: group_session_s(settings), release=lambda: release_id(settings)
    )
    try:
        while True:
            built = _build_unless_stopped(
                stop, settings, metrics, health, watchdog, replaying, faults
            )
            if isinstance(built, int):
                return built
            unstable = unstable or _watch_unstable(settings, metrics)
            stop.hand_to(built)
            code = _run(built, rejoin=lambda exc: not stop.requested and rejoins.allow(exc))
            if code == EXIT_OK:
                leave_group(settings)
            if code is not _REJOIN:
                return code
            # The closed clients sit in reference cycles (callbacks <-> their owners): collect
            # them now, so their librdkafka threads and sockets end before new ones start.
            stop.bridge = built = None  # type: ignore[assignment]
            gc.collect()
            metrics.rebalances.labels("rejoined_after_fence").inc()
            health.set_ready(False, "fenced: joining the group again")
            metrics.ready.set(0)
    finally:
        if unstable is not None:
            unstable.stop()
        trimmer.stop()
        watchdog.stop()
        if server is not None:
            server.shutdown()


def _health(settings: BridgeSettings) -> Health:
    """/livez and /readyz; /livez also fails when input waits and no checkpoint commits for
    longer than an open transaction may live (docs/operations.md: an abort loop is not alive)."""
    stale_after = max(30.0, 5 * settings.commit_interval)
    return Health(stale_after, commit_bound=max(stale_after, settings.transaction_timeout_ms / 1e3))


def _first_line(settings: BridgeSettings) -> str:
    """What the bridge waits for at start, said before it waits (a wrong address is then not
    ``startup_timeout`` seconds of silence)."""
    target = settings.target_cluster().bootstrap_servers
    written = f"; writing to {target} (target)" if settings.cross_cluster else ""
    return (
        f"connecting to {settings.bootstrap_servers} (bootstrap_servers){written}; waiting up "
        f"to {settings.startup_timeout:.0f}s (startup_timeout) for the cluster, then for "
        f"{', '.join(settings.input_topics)} -> {settings.output_topic} and the group "
        f"{settings.group_id!r} to assign partitions"
    )


def _watch_unstable(settings: BridgeSettings, metrics: Metrics) -> UnstableOffsets | None:
    """The gap between the end and the LSO of every output, dead-letter and changelog
    partition, measured on its own thread (app.ops.unstable). Started once the first build
    succeeded: its admin client is made here, with settings the bridge's own clients already
    accepted, so it exists for the whole run (none is made later, beside the work)."""
    target = settings.target_cluster()
    conf = {
        "bootstrap.servers": target.bootstrap_servers,
        **target.client_common(),
        **librdkafka_logging(reported_elsewhere=True),
    }
    try:
        admin = AdminClient(conf)
    except KafkaException as exc:  # a metric must never stop the bridge
        log.warning("eos_bridge_output_unstable_offsets not measured: %s", describe(exc))
        return None
    topics = list(settings.output_topics.values())
    if settings.on_error == "dlq":
        topics.append(settings.dead_letter_topic)
    prefix = changelog_prefix(settings.group_id)
    timeout = settings.call_timeout

    def measure() -> dict[tuple[str, int], tuple[int, int]]:
        return stable_offsets(admin, written_partitions(admin, topics, prefix, timeout), timeout)

    return UnstableOffsets(measure, metrics.registry).start()


def _serve(
    settings: BridgeSettings, health: Health, metrics: Metrics
) -> ThreadingHTTPServer | None:
    if not settings.http_port:
        return None
    return serve(settings.http_host, settings.http_port, health, metrics)


def _stop_on_signals(
    settings: BridgeSettings, watchdog: Watchdog, until: Callable[[], bool] | None
) -> _Stop:
    """SIGTERM/SIGINT (and ``until()``, when given) stop the bridge cleanly; the watchdog
    bounds the shutdown."""
    stop = _Stop()
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    watchdog.watch_signals(settings.shutdown_timeout)
    if until is not None:
        _stop_when(stop, until)
    return stop


def _stop_when(stop: _Stop, done: Callable[[], bool]) -> None:
    """Stop the bridge cleanly once ``done()`` (a daemon thread asks every half second)."""

    def watch() -> None:
        while not stop.requested:
            if done():
                log.info("done: stopping after the current batch")
                stop.request()
                return
            time.sleep(_UNTIL_EVERY_S)

    threading.Thread(target=watch, name="eos-bridge-until", daemon=True).start()


def _build_unless_stopped(stop: _Stop, *args: Any) -> Bridge | int:
    """:func:`_build`, left at once (exit 0) when SIGTERM/SIGINT comes meanwhile."""
    if stop.requested:
        return EXIT_OK
    stop.building = True
    try:
        try:
            return _build(*args)
        finally:
            stop.building = False
    except _StoppedWhileStarting:
        log.info("stopped cleanly while starting: nothing was consumed")
        return EXIT_OK


def _build(
    settings: BridgeSettings,
    metrics: Metrics,
    health: Health,
    watchdog: Watchdog,
    replaying: bool = False,
    faults: Faults = NO_FAULTS,
) -> Bridge | int:
    """The bridge, or the exit code after one line saying why it cannot start."""
    try:
        return build(settings, metrics, health, watchdog, replaying=replaying, faults=faults)
    except (ConfigError, KafkaFatalError, KafkaException, RegistryUnavailable, TimeoutError) as exc:
        said = refusal(exc, settings)
        if said is None:
            raise
        log.error("%s", said.for_run())
        return said.code


_REJOIN = -1  # not an exit code: build the bridge again (a fence answered in-process)


def _run(bridge: Bridge, rejoin: Callable[[InstanceFenced], bool] = lambda _: False) -> int:
    """Run the built bridge; every way it can end, as an exit code (or :data:`_REJOIN` after a
    fence that ``rejoin()`` allows to be answered in-process)."""
    try:
        bridge.run()
        log.info("stopped cleanly")
        return EXIT_OK
    except RecordError as exc:
        log.error("stopping: %s", exc)
        code = EXIT_RECORD
    except InstanceIdUnreleased as exc:
        if rejoin(exc):
            log.info("%s; joining again in %.0fs", exc, UNRELEASED_RETRY_S)
            time.sleep(UNRELEASED_RETRY_S)
            code = _REJOIN
        else:
            log.error("fenced: %s, for longer than its session timeout: a live twin", exc)
            code = EXIT_FENCED
    except InstanceFenced as exc:
        if rejoin(exc):
            log.warning(
                "%s; closing and joining the group again in-process (a second fence within "
                "%.0fs exits 5)",
                exc,
                REJOIN_WINDOW_S,
            )
            code = _REJOIN
        else:
            log.error("fenced: %s", exc)
            code = EXIT_FENCED
    except ConfigError as exc:  # found while running: state in a newer format than ours
        log.error("%s", exc)
        code = EXIT_CONFIG
    except BridgeError as exc:
        log.error("fatal: %s; exiting so Kubernetes restarts the instance", exc)
        code = EXIT_FATAL
    except KafkaException as exc:  # a client call nobody mapped, raised while reacting
        log.error("fatal: %s; exiting so Kubernetes restarts the instance", describe(exc))
        code = EXIT_FATAL
    bridge.close_after_failure()
    return code
