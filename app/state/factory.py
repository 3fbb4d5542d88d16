"""Build the state backend from its settings and the changelog topics prepared at start
(:mod:`app.engine.preflight`); wipe local state on purpose."""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from app.errors import ConfigError
from app.kafka.errors import consumer_retriable, settling
from app.state.backend import NoState, StateBackend
from app.state.errors import changelog_errors
from app.state.locking import StateDirLock
from app.state.manager import RocksDBState
from app.state.store import set_block_cache
from app.state.version import check_state_dir
from changelog.naming import validate_store_name
from changelog.recovery import RESTORE_CONSUMER_DEFAULTS, Restorer
from changelog.topics import changelog_watermarks

log = logging.getLogger(__name__)


class StepList(Protocol):
    """What the backend needs of a pipeline: its steps (a step that keeps state has
    ``stateful`` true and a ``store`` name)."""

    @property
    def steps(self) -> Sequence[object]: ...


def pipeline_stores(pipeline: StepList) -> list[str]:
    """The store names of the pipeline's stateful steps, checked to be unique and legal."""
    stores: list[str] = []
    for i, step in enumerate(pipeline.steps):
        if not getattr(step, "stateful", False):
            continue
        name = getattr(step, "name", "")
        store = getattr(step, "store", None) or name
        with changelog_errors():
            validate_store_name(store, f"pipeline step {i} ({name})")
        if store in stores:
            raise ConfigError(
                f"pipeline step {i} ({name}): store name {store!r} is used by another "
                f"stateful step; give each one its own name (name=... / 'name:' in the spec)"
            )
        stores.append(store)
    return stores


@dataclass(slots=True, frozen=True)
class StateConfig:
    """What the backend reads of the settings (the composition builds it).

    Attributes:
        root: where this group's databases live (``<state_dir>/<group_id>``).
        group_id: the consumer group (the restore consumer's group name derives from it).
        cache_max_bytes: the write-behind cache's cap.
        block_cache_bytes: RocksDB's shared block cache.
        client: the changelogs' cluster's client settings.
        timeout: seconds a start-up or watermark request may take (``startup_timeout``).
    """

    root: Path
    group_id: str
    cache_max_bytes: int
    block_cache_bytes: int
    client: Mapping[str, Any]
    timeout: float


def make_backend(
    config: StateConfig,
    changelogs: Mapping[tuple[str, str], str],
    admin: Any,
    new_admin: Callable[[dict[str, Any]], Any],
    new_consumer: Callable[[dict[str, Any]], Any],
) -> StateBackend:
    """The backend over ``changelogs`` (created or checked at start): :class:`NoState` when
    there are none. Locks the state directory; does not open any database (that happens per
    partition, in ``recover``) and makes no client itself.

    Args:
        config: the settings it reads.
        changelogs: (store, topic whose partitions hold state) → changelog topic.
        admin: an admin client of the changelogs' cluster (watermarks).
        new_admin: makes another one when a settling error outlasts its requests.
        new_consumer: makes a restore consumer from its settings.

    Raises:
        ConfigError: a state_dir in use or in a newer format.
    """
    if not changelogs:
        return NoState()
    set_block_cache(config.block_cache_bytes)
    restore_conf = {
        **RESTORE_CONSUMER_DEFAULTS,
        **config.client,
        "group.id": f"{config.group_id}.restore",  # assign() only: never joins, never commits
        "enable.auto.commit": False,
        "isolation.level": "read_committed",
    }
    lock = _lock_and_check(config.root)
    stores = list(dict.fromkeys(store for store, _ in changelogs))
    log.info(
        "state: stores %s under %s, changelogs %s", stores, config.root, sorted(changelogs.values())
    )
    admin.poll(0)  # hand over the log lines the start-up requests queued (its logger setting)

    return RocksDBState(
        config.root,
        dict(changelogs),
        config.cache_max_bytes,
        Restorer(lambda: new_consumer(restore_conf), retriable=consumer_retriable),
        _Watermarks(admin, lambda: new_admin(dict(config.client)), config.timeout),
        lock,
    )


class _Watermarks:
    """The changelog partitions' watermarks, asked of one admin client, which is replaced by a
    new one when a settling error outlasts a quarter of the timeout (see
    ``changelog_watermarks``)."""

    def __init__(self, admin: Any, new_admin: Callable[[], Any], timeout: float) -> None:
        self._admin, self._new_admin, self._timeout = admin, new_admin, timeout

    def _renew(self) -> Any:
        self._admin = self._new_admin()
        return self._admin

    def __call__(self, tps: list[tuple[str, int]]) -> dict[tuple[str, int], tuple[int, int]]:
        try:
            return changelog_watermarks(
                self._admin, tps, self._timeout, settling=settling, renew=self._renew
            )
        finally:
            self._admin.poll(0)  # and those of every restore's request: nothing else polls it


def _lock_and_check(root: Path) -> StateDirLock:
    """Lock the state directory, then check its format (docs/state.md, Upgrades)."""
    lock = StateDirLock(root)
    try:
        check_state_dir(root)
    except ConfigError:
        lock.release()
        raise
    return lock


def reset_state(root: Path) -> None:
    """``eos-bridge reset-state``: delete this group's local state under ``root``
    (``<state_dir>/<group_id>``; rebuilt from the changelogs).

    Raises:
        ConfigError: a running bridge holds the state directory.
    """
    if not root.exists():
        log.info("reset-state: nothing to delete at %s", root)
        return
    lock = StateDirLock(root)
    try:
        for child in root.iterdir():
            if child.name != ".lock":
                shutil.rmtree(child) if child.is_dir() else child.unlink()
    finally:
        lock.release()
    log.info("reset-state: deleted local state under %s; it is restored from the changelogs", root)
