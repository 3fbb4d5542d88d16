"""The group leave after a clean stop: whether this instance's static member leaves its group
for good (``leave_group_on_shutdown``, docs/operations.md), and the removal
(:mod:`app.kafka.leave`), one log line whatever happens. The runner calls it once the final
checkpoint is committed and the consumer closed. Also the release of this instance's id when
KIP-848 refuses it because a member that never left still holds it (app.engine.rejoin)."""

from __future__ import annotations

import logging
import time

from confluent_kafka.admin import AdminClient

from app.config import BridgeSettings
from app.kafka.admin import group_session_timeout_ms
from app.kafka.leave import LeaveFailed, remove_static_member
from app.ops.logs import librdkafka_logging
from app.ops.statefulset import Pod, scale_in_verdict

# Its lines are the runner's: docs/operations.md names the logger operators filter on.
log = logging.getLogger("app.runner")

# Within the shutdown_timeout the watchdog enforces.
LEAVE_TIMEOUT_S = 10.0


def leave_group(settings: BridgeSettings, pod: Pod | None = None) -> bool:
    """After a clean stop (final checkpoint committed, consumer closed): remove this instance's
    static member from the group when it is gone for good (``leave_group_on_shutdown``), so
    its partitions move now instead of after the broker's session timeout (app.kafka.leave).
    Never raises: a failure is one warning line. Returns whether the member was removed."""
    why = _why_leave(settings, pod)
    if why is None:
        return False
    source, started = settings.source(), time.monotonic()
    try:
        removed = remove_static_member(
            source.bootstrap_servers,
            source.client_common(),
            settings.group_id,
            settings.instance_id,
            f"eos-bridge stopped for good: {why}"[:200],
            min(LEAVE_TIMEOUT_S, settings.call_timeout),
        )
    except LeaveFailed as exc:
        log.warning(
            "could not remove static member %r from group %r (%s): %s; its partitions move "
            "after the broker's session timeout",
            settings.instance_id,
            settings.group_id,
            why,
            exc,
        )
        return False
    took = time.monotonic() - started
    if removed:
        log.info(
            "removed static member %r from group %r in %.1fs (%s): its partitions go to the "
            "other members now",
            settings.instance_id,
            settings.group_id,
            took,
            why,
        )
    else:
        log.info(
            "static member %r was no longer in group %r (%s): nothing to remove",
            settings.instance_id,
            settings.group_id,
            why,
        )
    return removed


def _why_leave(settings: BridgeSettings, pod: Pod | None) -> str | None:
    """Why this instance leaves the group for good, or None (said) when it stays in it."""
    mode = settings.leave_group_on_shutdown
    if not settings.static_membership or mode == "never":
        return None  # a dynamic member's close already left the group
    if mode != "scale-in":
        return "leave_group_on_shutdown=always"
    verdict = scale_in_verdict(pod or Pod.here())
    if not verdict.leave:
        say = log.warning if verdict.unsure else log.info
        say(
            "staying in group %r as static member %r (leave_group_on_shutdown=scale-in): "
            "%s; its partitions wait for it until the broker's session timeout",
            settings.group_id,
            settings.instance_id,
            verdict.why,
        )
        return None
    return verdict.why


def release_id(settings: BridgeSettings) -> bool:
    """KIP-848 refused this instance's id: a member that never left holds it (its own killed
    process, or a live twin). Remove that member (app.engine.rejoin); never raises."""
    source, member = settings.source(), (settings.group_id, settings.instance_id)
    reason = "eos-bridge restarted: releasing its earlier membership"
    timeout = min(LEAVE_TIMEOUT_S, settings.call_timeout)
    try:
        removed = remove_static_member(
            source.bootstrap_servers, source.client_common(), *member, reason, timeout
        )
    except LeaveFailed as exc:
        log.warning("could not release instance_id %r: %s", settings.instance_id, exc)
        return False
    if removed:
        log.warning(
            "group %r, instance_id %r: held by a member that never left (this instance's "
            "earlier process, killed, or a live twin); removed it and joining again at once",
            *member,
        )
    return removed


def group_session_s(settings: BridgeSettings) -> float | None:
    """The group's session timeout as the broker holds it (KIP-848), None if it does not say."""
    source = settings.source()
    conf = {"bootstrap.servers": source.bootstrap_servers, **source.client_common()}
    admin = AdminClient({**conf, **librdkafka_logging()})
    ms = group_session_timeout_ms(admin, settings.group_id, settings.call_timeout)
    return None if ms is None else ms / 1000
