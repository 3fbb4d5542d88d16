"""The dev registry's build: Maven runs once per pom, a missing tool is one clear line.

``java`` and ``mvn`` are small shell scripts on a private PATH; the fake ``mvn`` makes the
``target/quarkus-app/quarkus-run.jar`` a Quarkus build would and counts its calls.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from devkit.registry.build import EnvironmentProblem, app_dir, ensure_registry_app

FAKE_MVN = """#!/bin/sh
PATH=/usr/bin:/bin
echo run >> "{calls}"
[ -f pom.xml ] && [ -f src/main/resources/application.properties ] || exit 9
mkdir -p target/quarkus-app/lib && touch target/quarkus-app/quarkus-run.jar
"""


def _tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mvn: bool = True) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "mvn-calls"
    tools = {"java": "#!/bin/sh\nexit 0\n"}
    if mvn:
        tools["mvn"] = FAKE_MVN.format(calls=calls)
    for name, script in tools.items():
        (bin_dir / name).write_text(script)
        (bin_dir / name).chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))  # the real java and mvn stay out of reach
    monkeypatch.setenv("EOS_BRIDGE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    return calls


def _sources(tmp_path: Path, pom: str = "<project/>\n") -> tuple[Path, Path]:
    (tmp_path / "pom.xml").write_text(pom)
    (tmp_path / "application.properties").write_text("a=b\n")
    return tmp_path / "pom.xml", tmp_path / "application.properties"


def test_the_build_runs_once_per_pom(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _tools(tmp_path, monkeypatch)
    pom, properties = _sources(tmp_path)
    jar = ensure_registry_app(pom, properties)
    assert jar == app_dir(pom, properties) / "quarkus-app" / "quarkus-run.jar"
    assert jar.exists() and (jar.parent / "lib").is_dir()
    assert ensure_registry_app(pom, properties) == jar
    assert calls.read_text().count("run") == 1
    _sources(tmp_path, "<project><!-- v2 --></project>\n")  # a changed pom builds anew
    assert ensure_registry_app(pom, properties) != jar
    assert calls.read_text().count("run") == 2
    leftovers = [p.name for p in jar.parents[2].iterdir() if "partial" in p.name]
    assert leftovers == []


def test_missing_maven_is_one_clear_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _tools(tmp_path, monkeypatch, mvn=False)
    with pytest.raises(EnvironmentProblem, match=r"`mvn` was not found .*local Schema Registry"):
        ensure_registry_app(*_sources(tmp_path))
