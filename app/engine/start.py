"""Start: the start-up checks (:mod:`app.engine.preflight`, I/O), the composition from their
record (:mod:`app.engine.wiring`, no I/O), then ``init_transactions``."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from confluent_kafka import libversion

from app.config import BridgeSettings
from app.engine import preflight
from app.engine.faults import NO_FAULTS, Faults
from app.engine.loop import Bridge
from app.engine.transactions import Transactions, epoch_policy
from app.engine.watchdog import Watchdog
from app.engine.wiring import build_pipeline, compose, producer_common, state_config
from app.errors import KafkaFatalError
from app.kafka.access import transactional_access_error
from app.kafka.clients import KAFKA
from app.ops.health import Health
from app.ops.metrics import Metrics
from app.pipeline.builder import Pipeline
from app.state import NoState, StateBackend, make_backend

log = logging.getLogger(__name__)


def build(
    settings: BridgeSettings,
    metrics: Metrics,
    health: Health,
    watchdog: Watchdog,
    *,
    replaying: bool = False,
    faults: Faults = NO_FAULTS,
) -> Bridge:
    """The checks, the bridge built from what they found, its producer initialised; nothing
    is consumed until :meth:`Bridge.run`. ``faults``: a test rig's (:mod:`app.engine.faults`),
    never from settings."""
    pipeline = build_pipeline(settings)
    facts = preflight.check(settings, pipeline)
    bridge = compose(
        settings, pipeline, facts, metrics, health, watchdog, replaying=replaying, faults=faults
    )
    try:
        init_transactions(bridge.transactions, settings)
    except BaseException:
        bridge.close_state()  # the state directory's lock, for a build in the same process
        raise
    return bridge


def init_transactions(txn: Transactions, settings: BridgeSettings) -> None:
    """``init_transactions``, with a missing TransactionalId ACL said as such (exit 2); one
    line says how an abort is kept from leaking into the next transaction."""
    if settings.exactly_once:
        log.info(epoch_policy(libversion()[0])[1])
    try:
        txn.init()
    except KafkaFatalError as exc:
        common = producer_common(settings)
        refused = transactional_access_error(exc, common, settings.transactional_id)
        if refused is not None:
            raise refused from None
        raise


def open_state(
    settings: BridgeSettings, pipeline: Pipeline, topics: Sequence[str] | None = None
) -> StateBackend:
    """The state backend of ``pipeline`` alone, its changelog topics created or checked (the
    tools, tests and benchmarks that drive state without a bridge)."""
    changelogs = preflight.prepare_changelogs(
        settings, pipeline, None if topics is None else list(topics)
    )
    if changelogs is None:
        return NoState()
    return make_backend(
        state_config(settings), changelogs.names, changelogs.admin, KAFKA.admin, KAFKA.consumer
    )
