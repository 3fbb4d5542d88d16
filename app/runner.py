"""Process life: the HTTP endpoints, signals, the watchdog, and the exit codes:
0 clean stop, 2 configuration, 3 fatal Kafka error (or a Kafka call stuck past its deadline,
see app.engine.watchdog), 4 record failure with on_error=fail, 5 another live instance uses this
instance_id. What is built comes from :func:`app.engine.wiring.build`.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable
from http.server import ThreadingHTTPServer
from types import FrameType

from confluent_kafka import KafkaException

from app.config import BridgeSettings
from app.engine.loop import Bridge
from app.engine.watchdog import Watchdog
from app.engine.wiring import build
from app.errors import BridgeError, ConfigError, InstanceFenced, KafkaFatalError, RecordError
from app.kafka.errors import describe
from app.ops.health import Health, serve
from app.ops.metrics import Metrics

log = logging.getLogger(__name__)

EXIT_OK, EXIT_CONFIG, EXIT_FATAL, EXIT_RECORD, EXIT_FENCED = 0, 2, 3, 4, 5
_UNTIL_EVERY_S = 0.5


class _Stop:
    """SIGTERM/SIGINT stop the bridge cleanly, also while it is being built (a rollout can stop
    a pod that is still starting): the build finishes, nothing is consumed."""

    def __init__(self) -> None:
        self.requested = False
        self.bridge: Bridge | None = None

    def __call__(self, signum: int, _frame: FrameType | None) -> None:
        log.info("received %s: stopping after the current batch", signal.Signals(signum).name)
        self.requested = True
        if self.bridge is not None:
            self.bridge.stopping = True

    def hand_to(self, bridge: Bridge) -> None:
        self.bridge = bridge
        bridge.stopping = self.requested


def run(
    settings: BridgeSettings,
    *,
    until: Callable[[], bool] | None = None,
    replaying: bool = False,
) -> int:
    """Run until SIGTERM/SIGINT (or until ``until()`` says done, asked every half second);
    returns the process exit code. ``replaying``: see :func:`app.engine.wiring.build`."""
    metrics = Metrics()
    health = Health(stale_after=max(30.0, 5 * settings.commit_interval))
    try:
        server = _serve(settings, health, metrics)
    except OSError as exc:  # typically EADDRINUSE: another process holds the port
        log.error(
            "http_port (BRIDGE_HTTP_PORT): cannot listen on %s:%d: %s; choose a free port "
            "or 0 to turn the endpoints off",
            settings.http_host, settings.http_port, exc.strerror or exc,
        )  # fmt: skip
        return EXIT_CONFIG
    log.info("starting eos-bridge: %s", {k: v for k, v in settings.masked().items() if v})
    log.info("%s", _first_line(settings))
    watchdog = Watchdog(health, stale_after=health.stale_after).start()
    stop = _Stop()
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    watchdog.watch_signals(settings.shutdown_timeout)
    try:
        built = _build(settings, metrics, health, watchdog, replaying)
        if isinstance(built, int):
            return built
        stop.hand_to(built)
        if until is not None:
            _stop_when(built, until)
        return _run(built)
    finally:
        watchdog.stop()
        if server is not None:
            server.shutdown()


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


def _serve(
    settings: BridgeSettings, health: Health, metrics: Metrics
) -> ThreadingHTTPServer | None:
    if not settings.http_port:
        return None
    return serve(settings.http_host, settings.http_port, health, metrics)


def _stop_when(bridge: Bridge, done: Callable[[], bool]) -> None:
    """Stop ``bridge`` cleanly once ``done()`` (a daemon thread asks every half second)."""

    def watch() -> None:
        while not bridge.stopping:
            if done():
                log.info("done: stopping after the current batch")
                bridge.stopping = True
                return
            time.sleep(_UNTIL_EVERY_S)

    threading.Thread(target=watch, name="eos-bridge-until", daemon=True).start()


def _build(
    settings: BridgeSettings,
    metrics: Metrics,
    health: Health,
    watchdog: Watchdog,
    replaying: bool = False,
) -> Bridge | int:
    """The bridge, or the exit code after one line saying why it cannot start."""
    try:
        return build(settings, metrics, health, watchdog, replaying=replaying)
    except ConfigError as exc:
        log.error("%s", exc)
        return EXIT_CONFIG
    except KafkaFatalError as exc:
        log.error("cannot start: %s", exc)
    except KafkaException as exc:  # a start-up request a faulty cluster refused unmapped
        log.error("cannot start: %s; exiting so Kubernetes restarts the instance", describe(exc))
    except TimeoutError as exc:  # an admin request the broker never answered (a busy broker)
        log.error(
            "cannot start: Kafka did not answer a start-up request within startup_timeout="
            "%.0fs%s; exiting so Kubernetes restarts the instance",
            settings.startup_timeout, f" ({exc})" if str(exc) else "",
        )  # fmt: skip
    return EXIT_FATAL


def _run(bridge: Bridge) -> int:
    """Run the built bridge; every way it can end, as an exit code."""
    try:
        bridge.run()
        log.info("stopped cleanly")
        return EXIT_OK
    except RecordError as exc:
        log.error("stopping: %s", exc)
        code = EXIT_RECORD
    except InstanceFenced as exc:
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
