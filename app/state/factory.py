"""Build the state backend from the settings and the pipeline; wipe local state on purpose."""

from __future__ import annotations

import logging
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient

from app.config import BridgeSettings
from app.errors import ConfigError
from app.kafka.errors import consumer_retriable, settling
from app.ops.logs import librdkafka_logging
from app.state.backend import NoState, StateBackend
from app.state.errors import changelog_errors
from app.state.locking import StateDirLock
from app.state.manager import RocksDBState
from app.state.store import set_block_cache
from app.state.version import check_state_dir
from changelog.naming import changelog_topic_name, validate_store_name
from changelog.recovery import RESTORE_CONSUMER_DEFAULTS, Restorer
from changelog.topics import ChangelogSpec, changelog_watermarks, ensure_changelog_topics

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


def state_root(settings: BridgeSettings) -> Path:
    """Where this group's databases live: ``<state_dir>/<group_id>``."""
    return settings.state_dir / settings.group_id


def make_backend(
    settings: BridgeSettings, pipeline: StepList, topics: Sequence[str] | None = None
) -> StateBackend:
    """The backend for ``pipeline``: :class:`NoState` when it keeps no state.

    Creates the changelog topics (or checks them) and locks the state directory; does not
    open any database (that happens per partition, in ``recover``).

    Args:
        settings: the bridge settings (state_dir, group_id, cache cap, Kafka clients).
        pipeline: the compiled pipeline.
        topics: the topics whose partitions hold state (default the input topics; a
            regrouped pipeline's: its repartition topic).

    Raises:
        ConfigError: bad store names, unusable changelog topics, or a state_dir in use.
    """
    stores = pipeline_stores(pipeline)
    if not stores:
        return NoState()
    set_block_cache(settings.state_block_cache_bytes)
    target = settings.target_cluster()  # changelogs live where the outputs are written
    common = {
        "bootstrap.servers": target.bootstrap_servers,
        **target.client_common(),
        **librdkafka_logging(),
    }
    admin = AdminClient(common)
    inputs = _source_admin(settings) if settings.cross_cluster else admin
    changelogs, specs = {}, []
    for topic in settings.input_topics if topics is None else topics:
        partitions = _partition_count(inputs, topic, settings.startup_timeout)
        for store in stores:
            with changelog_errors():
                name = changelog_topic_name(settings.group_id, topic, store)
            changelogs[(store, topic)] = name
            specs.append(ChangelogSpec(name, partitions))
    with changelog_errors():
        ensure_changelog_topics(admin, specs, timeout=settings.startup_timeout)
    restore_conf = {
        **RESTORE_CONSUMER_DEFAULTS,
        **common,
        "group.id": f"{settings.group_id}.restore",  # assign() only: never joins, never commits
        "enable.auto.commit": False,
        "isolation.level": "read_committed",
    }
    root = state_root(settings)
    lock = _lock_and_check(root)
    log.info("state: stores %s under %s, changelogs %s", stores, root, sorted(changelogs.values()))
    admin.poll(0)  # hand over the log lines the start-up requests queued (its logger setting)

    return RocksDBState(
        root,
        changelogs,
        settings.state_cache_max_bytes,
        Restorer(lambda: Consumer(restore_conf), retriable=consumer_retriable),
        _Watermarks(admin, common, settings.startup_timeout),
        lock,
    )


class _Watermarks:
    """The changelog partitions' watermarks, asked of one admin client, which is replaced by a
    new one when a settling error outlasts a quarter of the timeout (see
    ``changelog_watermarks``)."""

    def __init__(self, admin: AdminClient, conf: dict[str, Any], timeout: float) -> None:
        self._admin, self._conf, self._timeout = admin, conf, timeout

    def _renew(self) -> AdminClient:
        self._admin = AdminClient(self._conf)
        return self._admin

    def __call__(self, tps: list[tuple[str, int]]) -> dict[tuple[str, int], tuple[int, int]]:
        try:
            return changelog_watermarks(
                self._admin, tps, self._timeout, settling=settling, renew=self._renew
            )
        finally:
            self._admin.poll(0)  # and those of every restore's request: nothing else polls it


def _source_admin(settings: BridgeSettings) -> AdminClient:
    """An admin client of the source cluster: the inputs' partition counts are read there."""
    source = settings.source()
    return AdminClient(
        {"bootstrap.servers": source.bootstrap_servers, **source.client_common(),
         **librdkafka_logging()}
    )  # fmt: skip


def _lock_and_check(root: Path) -> StateDirLock:
    """Lock the state directory, then check its format (docs/state.md, Upgrades)."""
    lock = StateDirLock(root)
    try:
        check_state_dir(root)
    except ConfigError:
        lock.release()
        raise
    return lock


def _partition_count(admin: Any, topic: str, timeout: float) -> int:
    meta = admin.list_topics(topic, timeout=timeout).topics.get(topic)
    if meta is None or meta.error is not None:
        raise ConfigError(
            f"input_topics: topic {topic!r} does not exist; its changelog needs its partition count"
        )
    return len(meta.partitions)


def reset_state(settings: BridgeSettings) -> None:
    """``eos-bridge reset-state``: delete this group's local state (rebuilt from changelogs).

    Raises:
        ConfigError: a running bridge holds the state directory.
    """
    root = state_root(settings)
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
