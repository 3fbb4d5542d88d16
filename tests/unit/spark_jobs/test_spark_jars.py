"""The jar fetch names the missing tool, and a pre-filled jar directory needs no tools."""

from __future__ import annotations

from pathlib import Path

import pytest

from spark_jobs.errors import EnvironmentProblem
from spark_jobs.jars import JARS_DIR_ENV, ensure_jars


def _isolate(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, path: str) -> None:
    monkeypatch.setenv("EOS_BRIDGE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PATH", path)
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.delenv(JARS_DIR_ENV, raising=False)


def test_missing_java_is_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _isolate(monkeypatch, tmp_path, str(tmp_path / "empty"))
    with pytest.raises(EnvironmentProblem, match=r"`java` was not found.*EOS_SPARK_JARS_DIR"):
        ensure_jars()


def test_missing_maven_is_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    java = bin_dir / "java"
    java.write_text("#!/bin/sh\nexit 0\n")
    java.chmod(0o755)
    _isolate(monkeypatch, tmp_path, str(bin_dir))
    with pytest.raises(EnvironmentProblem, match="`mvn` was not found"):
        ensure_jars()


def test_a_prefilled_jar_directory_is_used_as_is(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _isolate(monkeypatch, tmp_path, str(tmp_path / "empty"))
    (tmp_path / "jars").mkdir()
    for name in ("b.jar", "a.jar"):
        (tmp_path / "jars" / name).write_bytes(b"")
    monkeypatch.setenv(JARS_DIR_ENV, str(tmp_path / "jars"))
    assert ensure_jars() == [tmp_path / "jars" / "a.jar", tmp_path / "jars" / "b.jar"]
    (tmp_path / "jars" / "a.jar").unlink()
    (tmp_path / "jars" / "b.jar").unlink()
    with pytest.raises(EnvironmentProblem, match=JARS_DIR_ENV):
        ensure_jars()
