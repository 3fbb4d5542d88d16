"""``python -m devkit.registry``: status of nothing, and a start without Java or Maven, each
one line and an exit code (no registry is started here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from devkit.registry.__main__ import main


def test_status_of_no_registry_is_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["status", "--dir", str(tmp_path)]) == 1
    assert capsys.readouterr().out == "dev-registry: not running\n"
    assert main(["stop", "--dir", str(tmp_path)]) == 0


def test_a_start_without_maven_says_so_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "java").write_text("#!/bin/sh\nexit 0\n")
    (bin_dir / "java").chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setenv("EOS_BRIDGE_HOME", str(tmp_path / "home"))  # nothing built there
    monkeypatch.delenv("JAVA_HOME", raising=False)
    assert main(["start", "--dir", str(tmp_path / "dev")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "`mvn` was not found" in err
