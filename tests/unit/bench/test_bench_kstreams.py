"""The Kafka Streams contender's build cache key and command line (no Maven, no JVM run)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.contenders import BY_KEY, Job, kstreams
from bench.contenders.kstreams import VARIANTS, build, project_digest


def _project(root: Path) -> Path:
    src = root / "src" / "main" / "java" / "X.java"
    src.parent.mkdir(parents=True)
    src.write_text("class X {}\n")
    (root / "pom.xml").write_text("<project/>\n")
    return root


def test_digest_follows_the_sources_and_the_pom(tmp_path: Path) -> None:
    project = _project(tmp_path / "p")
    before = project_digest(project)
    assert project_digest(project) == before
    (project / "src" / "main" / "java" / "X.java").write_text("class X { int y; }\n")
    changed = project_digest(project)
    assert changed != before
    (project / "pom.xml").write_text("<project><!-- v2 --></project>\n")
    assert project_digest(project) != changed


def test_a_cached_build_starts_no_maven(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EOS_BRIDGE_HOME", str(tmp_path / "home"))
    project = _project(tmp_path / "p")
    cached = tmp_path / "home" / f"kstreams-bench-{project_digest(project)}"
    cached.mkdir(parents=True)
    (cached / ".complete").write_text("ok")

    def no_maven() -> str:
        raise AssertionError("Maven must not run for a cached build")

    monkeypatch.setattr(kstreams, "require_maven", no_maven)
    assert build(project) == cached


@pytest.mark.parametrize("key", sorted(VARIANTS))
def test_every_variant_is_registered_with_its_settings(
    key: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(kstreams, "build", lambda project: tmp_path / "built")
    job = Job("127.0.0.1:9092", "p2", "in", "out", "grp", 1.0, tmp_path / "state")
    argv, _env = BY_KEY[key].command(job)
    args = dict(zip(argv[5::2], argv[6::2], strict=True))  # after java, -D, -cp, cp, class
    assert argv[4] == kstreams.MAIN_CLASS
    assert args["--group"] == "grp"
    assert args["--commit-interval"] == "1.0"
    assert args["--state-dir"] == str(tmp_path / "state")
    variant = VARIANTS[key]
    assert args["--warmup-records"] == str(variant.warmup_records)
    assert args.get("--cache-max-bytes") == (
        None if variant.cache_max_bytes is None else str(variant.cache_max_bytes)
    )
    assert ("-c0" in key) == (variant.cache_max_bytes == 0)
    assert key.endswith("-warm") == (variant.warmup_records > 0)
