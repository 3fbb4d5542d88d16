"""The state directory's format file and the upgrade policy (docs/state.md, Upgrades)."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.errors import ConfigError
from app.state import version as v
from app.state.version import Action, check_state_dir, plan, read_version, write_version
from changelog.format import STATE_FORMAT_VERSION

CURRENT = STATE_FORMAT_VERSION


def test_plan_is_the_documented_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    assert plan(None, has_data=False) is Action.STAMP, "a new directory is stamped"
    assert plan(None, has_data=True) is Action.STAMP, "pre-version data is format 1: kept"
    assert plan(CURRENT, has_data=True) is Action.KEEP
    assert plan(CURRENT + 1, has_data=True) is Action.REFUSE
    assert plan(CURRENT + 1, has_data=False) is Action.REFUSE
    # A later code version (format 3) reading formats 1 and 2.
    monkeypatch.setattr(v, "STATE_FORMAT_VERSION", 3)
    assert plan(2, has_data=True) is Action.WIPE, "no migration: a full restore"
    assert plan(None, has_data=True) is Action.WIPE, "pre-version data is format 1, not 3"
    monkeypatch.setattr(v, "MIGRATIONS", {1: lambda root: None, 2: lambda root: None})
    assert plan(1, has_data=True) is Action.MIGRATE
    monkeypatch.setattr(v, "MIGRATIONS", {2: lambda root: None})
    assert plan(1, has_data=True) is Action.WIPE, "a migration chain with a hole"
    assert plan(2, has_data=True) is Action.MIGRATE


def _store(root: Path) -> Path:
    db = root / "counts" / "orders" / "0"
    db.mkdir(parents=True)
    (db / "CURRENT").write_text("MANIFEST-000001\n")
    return db


def test_a_legacy_directory_keeps_its_data_and_is_stamped(tmp_path: Path) -> None:
    db = _store(tmp_path)
    (tmp_path / ".lock").write_text("pid 1\n")
    assert read_version(tmp_path) is None
    assert check_state_dir(tmp_path) is Action.STAMP
    assert read_version(tmp_path) == CURRENT
    assert (db / "CURRENT").exists(), "no restore for a format-1 directory"
    assert check_state_dir(tmp_path) is Action.KEEP


def test_a_newer_directory_is_refused_untouched(tmp_path: Path) -> None:
    db = _store(tmp_path)
    write_version(tmp_path, CURRENT + 1)
    with pytest.raises(ConfigError) as err:
        check_state_dir(tmp_path)
    line = str(err.value)
    assert "\n" not in line
    assert f"state.json: state format version {CURRENT + 1} is newer" in line
    assert line.startswith("state_dir (BRIDGE_STATE_DIR): ")
    assert read_version(tmp_path) == CURRENT + 1 and (db / "CURRENT").exists()


def test_an_older_directory_without_migration_is_wiped_for_a_full_restore(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    db = _store(tmp_path)
    (tmp_path / ".lock").write_text("pid 1\n")
    monkeypatch.setattr(v, "STATE_FORMAT_VERSION", CURRENT + 1)
    assert check_state_dir(tmp_path) is Action.WIPE
    assert not db.exists() and (tmp_path / ".lock").exists()
    assert read_version(tmp_path) == CURRENT + 1
    assert "a full restore from the changelogs follows" in caplog.text


def test_an_older_directory_with_migrations_is_migrated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = _store(tmp_path)
    ran: list[int] = []
    monkeypatch.setattr(v, "STATE_FORMAT_VERSION", CURRENT + 1)
    monkeypatch.setattr(v, "MIGRATIONS", {CURRENT: lambda root: ran.append(CURRENT)})
    assert check_state_dir(tmp_path) is Action.MIGRATE
    assert ran == [CURRENT] and db.exists() and read_version(tmp_path) == CURRENT + 1


@pytest.mark.parametrize("content", [b"{", b"[]", b'{"format": "1"}', b'{"format": 0}'])
def test_an_unreadable_format_file_is_local_damage(tmp_path: Path, content: bytes) -> None:
    db = _store(tmp_path)
    (tmp_path / "state.json").write_bytes(content)
    assert check_state_dir(tmp_path) is Action.WIPE, "the changelogs restore it"
    assert not db.exists() and read_version(tmp_path) == CURRENT
