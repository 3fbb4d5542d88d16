"""The one Maven fetcher: a fetch fills the cache once, a second call starts no Maven.

``java`` and ``mvn`` are small shell scripts on a private PATH; the fake ``mvn`` writes two
jars into the ``-DoutputDirectory`` it is given and counts its calls.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from spark_jobs.errors import EnvironmentProblem
from spark_jobs.maven import fetch_jars, jars_dir

FAKE_MVN = """#!/bin/sh
PATH=/usr/bin:/bin
echo run >> "{calls}"
[ -n "{fail}" ] && {{ echo "[ERROR] Could not resolve dependencies"; exit 1; }}
for arg in "$@"; do
  case "$arg" in -DoutputDirectory=*) out="${{arg#-DoutputDirectory=}}";; esac
done
touch "$out/a-1.0.jar" "$out/b-2.0.jar"
"""


def _tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fail: bool = False) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "mvn-calls"
    (bin_dir / "mvn").write_text(FAKE_MVN.format(calls=calls, fail="yes" if fail else ""))
    (bin_dir / "java").write_text("#!/bin/sh\nexit 0\n")
    for tool in ("mvn", "java"):
        (bin_dir / tool).chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))  # the real java and mvn stay out of reach
    monkeypatch.setenv("EOS_BRIDGE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    return calls


def _pom(tmp_path: Path, text: str = "<project/>\n") -> Path:
    pom = tmp_path / "pom.xml"
    pom.write_text(text)
    return pom


def test_a_fetch_fills_the_cache_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _tools(tmp_path, monkeypatch)
    pom = _pom(tmp_path)
    jars = fetch_jars(pom, "test-jars", "the test")
    assert [j.name for j in jars] == ["a-1.0.jar", "b-2.0.jar"]
    assert all(j.parent == jars_dir(pom, "test-jars") for j in jars)
    assert fetch_jars(pom, "test-jars", "the test") == jars
    assert calls.read_text().count("run") == 1
    _pom(tmp_path, "<project><!-- v2 --></project>\n")  # a changed pom fetches anew
    assert fetch_jars(pom, "test-jars", "the test") != jars
    assert calls.read_text().count("run") == 2


def test_a_failed_fetch_names_the_pom_and_leaves_no_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _tools(tmp_path, monkeypatch, fail=True)
    pom = _pom(tmp_path)
    failed = r"pom.xml with Maven failed:\n.*Could not resolve"
    with pytest.raises(EnvironmentProblem, match=failed):
        fetch_jars(pom, "test-jars", "the test")
    assert list((tmp_path / "home").iterdir()) == []


def test_a_missing_tool_names_who_needs_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _tools(tmp_path, monkeypatch)
    (tmp_path / "bin" / "mvn").unlink()
    with pytest.raises(EnvironmentProblem, match=r"^`mvn` was not found \(needed by the test\)"):
        fetch_jars(_pom(tmp_path), "test-jars", "the test")
