"""The state directory's format version: ``<state_dir>/<group_id>/state.json``.

Written when the directory is first used, checked at every start, before any database opens.
A directory without it holds state written before versions existed: format 1 (today's). What
happens for each version found is one pure decision (:func:`plan`), the policy of
docs/state.md ("Upgrades"):

- the version this code writes: keep;
- an older one: migrate in place when a migration is registered, else wipe the local copy and
  restore it from the changelogs (a full restore, said in a WARNING line);
- a newer one: refuse to start (exit 2), touching nothing — the changelogs hold records this
  code cannot read either.
"""

from __future__ import annotations

import enum
import logging
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import orjson

from app.errors import ConfigError
from changelog.errors import ChangelogFormatError
from changelog.format import LEGACY_FORMAT_VERSION, STATE_FORMAT_VERSION, check_format_version

log = logging.getLogger(__name__)

FORMAT_FILE = "state.json"
_NOT_STATE = {".lock", FORMAT_FILE, FORMAT_FILE + ".tmp"}
# In-place migrations of a state directory, by the version they start from (each brings it to
# the next version). None yet: format 1 is the only one.
MIGRATIONS: dict[int, Callable[[Path], None]] = {}


class Action(enum.Enum):
    KEEP = "keep"  # already the current format
    STAMP = "stamp"  # new, or legacy data in the current format: write the file, nothing else
    MIGRATE = "migrate"  # run the registered migrations, then stamp
    WIPE = "wipe"  # no migration: delete the local copy, the changelogs restore it
    REFUSE = "refuse"  # newer than this code: exit 2


def plan(found: int | None, has_data: bool) -> Action:
    """What to do with a state directory whose file says ``found`` (None: no file).

    Args:
        found: the version in ``state.json``, None when there is none.
        has_data: the directory holds databases.
    """
    if found is None:
        if not has_data:
            return Action.STAMP
        found = LEGACY_FORMAT_VERSION
        if found == STATE_FORMAT_VERSION:
            return Action.STAMP
    if found > STATE_FORMAT_VERSION:
        return Action.REFUSE
    if found == STATE_FORMAT_VERSION:
        return Action.KEEP
    if all(v in MIGRATIONS for v in range(found, STATE_FORMAT_VERSION)):
        return Action.MIGRATE
    return Action.WIPE


def read_version(root: Path) -> int | None:
    """The version in ``root/state.json``; None when absent.

    Raises:
        ValueError: the file is not ``{"format": <positive int>, ...}``.
    """
    path = root / FORMAT_FILE
    if not path.exists():
        return None
    parsed = orjson.loads(path.read_bytes())
    version = parsed.get("format") if isinstance(parsed, dict) else None
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise ValueError(f"{path} does not say which format it holds: {parsed!r:.100}")
    return version


def write_version(root: Path, version: int | None = None) -> None:
    """Write ``root/state.json`` (default: the current format) atomically: a crash leaves the
    old file or the new one."""
    tmp = root / (FORMAT_FILE + ".tmp")
    tmp.write_bytes(orjson.dumps({"format": version or STATE_FORMAT_VERSION}) + b"\n")
    os.replace(tmp, root / FORMAT_FILE)


def check_state_dir(root: Path, setting: str = "state_dir (BRIDGE_STATE_DIR)") -> Action:
    """Bring the (locked) state directory ``root`` to the current format, or refuse it.

    Returns:
        What was done.

    Raises:
        ConfigError: the directory holds state in a newer format than this code reads.
    """
    has_data = any(child.name not in _NOT_STATE for child in root.iterdir())
    try:
        found = read_version(root)
    except (ValueError, OSError) as exc:  # only the local copy is hurt: the changelogs have it
        log.warning("%s; wiping the local state, the changelogs restore it", exc)
        found, action = None, Action.WIPE
    else:
        action = plan(found, has_data)
    if action is Action.REFUSE:
        try:
            check_format_version(found or 0, f"{setting}: {root / FORMAT_FILE}")
        except ChangelogFormatError as exc:
            raise ConfigError(str(exc)) from None
    if action is Action.MIGRATE:
        for version in range(found or LEGACY_FORMAT_VERSION, STATE_FORMAT_VERSION):
            MIGRATIONS[version](root)
        log.info("state format %s migrated in place to %d", found, STATE_FORMAT_VERSION)
    if action is Action.WIPE:
        _wipe(root)
        log.warning(
            "state format %s at %s has no in-place migration to %d: local state wiped, "
            "a full restore from the changelogs follows",
            found,
            root,
            STATE_FORMAT_VERSION,
        )
    if action is not Action.KEEP:
        write_version(root)
    log.info("state format %d at %s (%s)", STATE_FORMAT_VERSION, root, action.value)
    return action


def _wipe(root: Path) -> None:
    for child in root.iterdir():
        if child.name not in _NOT_STATE:
            shutil.rmtree(child) if child.is_dir() else child.unlink()
