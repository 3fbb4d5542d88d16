"""When a fenced or refused static member may join the group again in-process (app.runner).

Two cases, told apart by the broker's answer:

- ``FENCED_INSTANCE_ID`` (:class:`~app.errors.InstanceFenced`): after a group coordinator fails
  over, the new coordinator can fence the member's own earlier membership (librdkafka#3437).
  The first fence is answered by joining again; a second within ``window_s`` is a live twin.
- ``UNRELEASED_INSTANCE_ID`` (:class:`~app.errors.InstanceIdUnreleased`, KIP-848 only): the
  group still holds a member with this ``group.instance.id`` that never left — this instance's
  own previous process, killed (SIGKILL, OOM, a lost node) within the session timeout. A
  clean stop leaves for a moment (member epoch -2) and is never refused, so a refusal means
  the previous process did not stop cleanly. The broker would refuse the new member until that
  session expires (45 s by default), where the classic protocol lets a restarted static member
  replace its old one at once. So, once per process, the bridge removes the member holding its
  id (KIP-345, as a scale-in's leave does: app.kafka.leave) and joins at once, as under
  classic. Refused again (a live twin took the id back, or the removal failed), it tries again
  every second for the group's session timeout (read from the broker) and a margin; still
  refused past that, the id is a live twin's: exit 5.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from app.errors import InstanceFenced, InstanceIdUnreleased

log = logging.getLogger(__name__)

UNRELEASED_MARGIN_S = 15.0  # over the session timeout: the broker's expiry check runs late
UNRELEASED_RETRY_S = 1.0  # between two joins while the previous member's session runs out
_EPISODE_GAP_S = 30.0  # a refusal this long after the last one starts a new wait


class Rejoins:
    """Whether a fence or refusal may be answered in-process (join the group again).

    Args:
        window_s: a second fence within it is a live twin.
        session_s: the group's session timeout, asked at the first refusal (None: unknown,
            the broker's default of 45 s is taken).
        release: removes the member that holds this instance's id; True when it did (asked
            at the first refusal of the process only).
    """

    def __init__(
        self,
        window_s: float,
        session_s: Callable[[], float | None] = lambda: None,
        clock: Callable[[], float] = time.monotonic,
        release: Callable[[], bool] = lambda: False,
    ) -> None:
        self._window_s = window_s
        self._release: Callable[[], bool] | None = release
        self._session_s = session_s
        self._clock = clock
        self._last_fence: float | None = None
        self._refused_since: float | None = None
        self._refused_last = 0.0
        self._wait_s = 0.0

    def allow(self, exc: InstanceFenced | None = None) -> bool:
        now = self._clock()
        if isinstance(exc, InstanceIdUnreleased):
            return self._allow_refused(now)
        if self._last_fence is not None and now - self._last_fence < self._window_s:
            return False
        self._last_fence = now
        return True

    def _allow_refused(self, now: float) -> bool:
        release, self._release = self._release, None
        if release is not None and release():
            return True  # joined again at once, as a classic static member replaces its old one
        if self._refused_since is None or now - self._refused_last > _EPISODE_GAP_S:
            self._refused_since = now
            session = self._session_s()
            self._wait_s = (45.0 if session is None else session) + UNRELEASED_MARGIN_S
            log.warning(
                "instance_id still held by a member that never left: joining again every "
                "%.0fs for up to %.0fs (its session timeout and a margin), then exit 5",
                UNRELEASED_RETRY_S,
                self._wait_s,
            )
        self._refused_last = now
        return now - self._refused_since < self._wait_s
