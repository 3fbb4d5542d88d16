"""Rolling upgrades with state on disk: three instances of an earlier eos-bridge (its wheel built
from this repository's git history) rolled one at a time to a later one, then to the working
tree, while input keeps coming — exactly once, counts equal to a reference, no full restore the
format did not ask for; then a state directory and a changelog record of a newer format are
refused (exit 2).

The contract under test is docs/state.md's "Upgrades" section (Kafka Streams keeps
``EosV2UpgradeIntegrationTest`` for the same reason).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import sysconfig
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.state.version import FORMAT_FILE, read_version, write_version
from changelog.format import STATE_FORMAT_VERSION, VERSION_HEADER, changelog_headers
from changelog.naming import changelog_topic_name
from devkit.kafka.cluster import free_port
from tests.integration.test_state_e2e import assert_counts_exact
from tests.support.bridge import REPO, BridgeProcess, base_settings, bridge_topics, json_records
from tests.support.bridge import wait_caught_up as _wait_caught_up
from tests.support.feed import Feeder
from tests.support.kafka import KafkaFixture, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.chaos]

# The versions each instance is rolled through before the working tree: the end of wave 2
# (2026-11-24), the last release before state carried a format version; then a wave-3 commit
# (2026-11-29) writing format 1 with the eos.state.v header, so that the working tree also
# restores versioned records an earlier version wrote (a header renamed without a migration
# shows only there: a record without the version header is read as Quix's or wave 2's).
CHAIN = ("c115d902060edfba864dba7092ec32bb902a968e", "507adb31715af7289e6ff0c2a0c3515081a9ff53")
INSTANCES = 3
CHUNK = 200  # records per feed while the instances roll
GUARD_S = 300  # hang guard of every wait (a loaded 2-core machine), never a timing claim


@pytest.fixture(scope="module")
def old_versions(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Per commit of :data:`CHAIN`, a virtualenv with its wheel (``venv/bin/python``) and its
    test pipelines (``pipelines/``)."""
    return [_build(commit, tmp_path_factory.mktemp(f"eos-bridge-{commit[:7]}")) for commit in CHAIN]


def _build(commit: str, root: Path) -> Path:
    """The wheel of ``commit`` in a virtualenv under ``root``.

    The wheel is built by ``pip wheel`` in an isolated environment from pip's cache or PyPI
    (setuptools); nothing else is downloaded: the virtualenv reaches this one's packages through
    a ``.pth`` line (the earlier version pins the same dependencies). That line does not run
    this virtualenv's own ``.pth`` hooks, so the working tree's editable install stays out.
    """
    src, wheels = root / "src", root / "wheels"
    src.mkdir()
    archive = subprocess.run(["git", "-C", str(REPO), "archive", commit],
                             capture_output=True, check=False)  # fmt: skip
    assert archive.returncode == 0, (
        f"the rolling upgrade test needs this repository's git history (commit {commit}): "
        f"{archive.stderr.decode()[-500:]} (a shallow clone: git fetch --unshallow)"
    )
    subprocess.run(["tar", "-x", "-C", str(src)], input=archive.stdout, check=True)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "wheel", "--no-deps", "-w", str(wheels), str(src)], check=True)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / "venv")], check=True)
    site = subprocess.run(
        [str(root / "venv" / "bin" / "python"), "-c",
         "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    (Path(site) / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    wheel = next(wheels.glob("eos_bridge-*.whl"))
    subprocess.run([*pip, "install", "--no-deps", "--target", site, str(wheel)], check=True)
    pipes = root / "pipelines" / "tests"
    pipes.mkdir(parents=True)
    for name in ("__init__.py", "state_pipelines.py"):
        shutil.copy(src / "tests" / name, pipes / name)
    if (src / "app" / "__main__.py").exists():
        (root / "has_main").touch()
    shutil.rmtree(src)  # from here on only the wheel's code can run
    return root


def _old(bridge: BridgeProcess, old: Path) -> BridgeProcess:
    """Run ``bridge`` from the earlier version's wheel: not from the working tree."""
    # Its CLI: ``app.cli`` up to wave 2, ``python -m app`` since.
    cli = "app" if (old / "has_main").exists() else "app.cli"
    bridge.command = [str(old / "venv" / "bin" / "python"), "-m", cli, "run"]
    bridge.pythonpath = str(old / "pipelines")
    bridge.cwd = old
    return bridge


class ContinuousFeed:
    """Feeds CHUNK records at a time from a background thread until stopped (or the pool runs
    dry): the instances roll under live input. How much gets fed varies; the oracle checks
    what was."""

    def __init__(self, feeder: Feeder) -> None:
        self.feeder = feeder
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="feed", daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.2) and self.feeder.feed(CHUNK):
            pass

    def __enter__(self) -> ContinuousFeed:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


@pytest.fixture
def instances() -> Iterator[list[BridgeProcess]]:
    started: list[BridgeProcess] = []
    yield started
    for bridge in started:
        bridge.stop()


def _caught_up(kafka: KafkaFixture, s: dict[str, Any], running: list[BridgeProcess]) -> None:
    """Wait until the group committed every record produced so far (the feed goes on)."""
    src = s["input_topics"][0]
    _wait_caught_up(kafka, s["group_id"], src, GUARD_S, running)


def _wait_serving(b: BridgeProcess) -> None:
    """Until the new instance holds partitions and recovered their state."""

    def serving() -> bool:
        assert b.running(), f"{b.log_path.name} exited: {b.logs()[-3000:]}"
        return "partitions resumed" in b.logs()

    wait_until(serving, GUARD_S, f"{b.log_path.name} to process its partitions", step=0.5)


def _restores(log: str) -> list[tuple[str, int, int]]:
    found = re.finditer(r"restoring (\S+)\[\d+\] from offset (\d+) to (\d+)", log)
    return [(m[1], int(m[2]), int(m[3])) for m in found]


def test_rolling_upgrade_from_an_earlier_version_stays_exactly_once(
    kafka: KafkaFixture, tmp_path: Path, old_versions: list[Path], instances: list[BridgeProcess]
) -> None:
    src, out, dlq = bridge_topics(kafka, partitions=6)
    s = base_settings(kafka, src, out, dlq, batch_size=500,
                      pipeline="tests.state_pipelines:counting")  # fmt: skip
    # The earlier versions speak the classic protocol (the client sets their session timeout);
    # the working tree joins the same group under its default, consumer (KIP-848): the broker
    # migrates the group online (group.consumer.migration.policy, bidirectional by default)
    # and holds the session timeout of its KIP-848 members (the group's config, set here).
    classic = kafka.fast_handover({**s, "group_protocol": "classic"})
    kafka.fast_handover(s)
    feeder = Feeder(kafka, src, *json_records(400_000))

    def bridge(i: int, stage: int) -> BridgeProcess:
        """Instance ``i`` as the ``stage``-th version: CHAIN's, then the working tree."""
        own = {"instance_id": f"i{i}", "state_dir": str(tmp_path / f"state-i{i}"),
               "http_port": free_port()}  # fmt: skip
        if stage < len(CHAIN):
            own["consumer"] = classic
        b = BridgeProcess(tmp_path, f"v{stage}-i{i}", **{**s, **own})
        instances.append(b)
        return _old(b, old_versions[stage]) if stage < len(CHAIN) else b

    stages = [[bridge(i, 0).start() for i in range(INSTANCES)]]
    feeder.feed(5_000)
    _caught_up(kafka, s, stages[0])
    with ContinuousFeed(feeder):
        for stage in range(1, len(CHAIN) + 1):
            old, new = stages[-1], []
            for i in range(INSTANCES):
                assert old[i].terminate() == 0, old[i].logs()[-3000:]
                # The others take its partitions over (session timeout): the next version then
                # restores changelog records an earlier version wrote, and an earlier instance
                # reads what the next one writes.
                _caught_up(kafka, s, old[i + 1 :] + new)
                new.append(bridge(i, stage).start())
                _wait_serving(new[i])
                _caught_up(kafka, s, old[i + 1 :] + new)
            stages.append(new)
    _caught_up(kafka, s, stages[-1])
    for b in stages[-1]:
        assert b.terminate() == 0, b.logs()[-3000:]
    assert feeder.fed > 5_000 + len(CHAIN) * INSTANCES * CHUNK, "the input kept coming"
    assert_counts_exact(kafka, src, out)  # 0 duplicates, 0 missing, counts = the reference
    _assert_no_format_restore(tmp_path, s["group_id"], stages)
    _newer_state_dir_is_refused(tmp_path, s, stages[-1][0])
    _newer_changelog_record_is_refused(kafka, tmp_path, s, stages[-1][0])


def _assert_no_format_restore(
    tmp_path: Path, group: str, stages: list[list[BridgeProcess]]
) -> None:
    """The earliest version's state directories are format 1: stamped by the next version,
    kept by the ones after it, never wiped; every later version restored changelog records an
    earlier one wrote."""
    for b in stages[0]:
        assert "state format" not in b.logs(), "the first instances ran a later version's code"
    for stage, bridges in enumerate(stages[1:], 1):
        action = "stamp" if stage == 1 else "keep"
        for i, b in enumerate(bridges):
            log = b.logs()
            root = tmp_path / f"state-i{i}" / group
            assert f"state format {STATE_FORMAT_VERSION} at {root} ({action})" in log, log[-3000:]
            assert "local state wiped" not in log and "no in-place migration" not in log
            assert read_version(root) == STATE_FORMAT_VERSION
        restored = [r for b in bridges for r in _restores(b.logs())]
        assert restored, f"no instance of version {stage} restored an earlier one's records"


def _alone(tmp_path: Path, like: BridgeProcess, name: str) -> BridgeProcess:
    """The working tree's bridge alone, on ``like``'s settings and state directory."""
    return BridgeProcess(tmp_path, name, **like.settings).start()


def _refused(b: BridgeProcess, what: str) -> str:
    """The bridge exits 2 with one line saying ``what``; it must not start processing."""
    wait_until(lambda: not b.running() or "partitions resumed" in b.logs(), GUARD_S,
               f"{b.log_path.name} to refuse or to start")  # fmt: skip
    assert not b.running(), f"{b.log_path.name} started on state it cannot read"
    lines = [ln for ln in b.logs().splitlines() if what in ln]
    assert b.wait(10) == 2 and len(lines) == 1, b.logs()[-3000:]
    assert "Traceback" not in b.logs()
    return lines[0]


def _newer_state_dir_is_refused(tmp_path: Path, s: dict[str, Any], like: BridgeProcess) -> None:
    """A downgrade past a format change: refused before anything is opened, left as it was."""
    root = Path(like.settings["state_dir"]) / s["group_id"]
    write_version(root, STATE_FORMAT_VERSION + 1)
    line = _refused(_alone(tmp_path, like, "newer-dir"), "is newer than this eos-bridge")
    assert f"{root / FORMAT_FILE}: state format version {STATE_FORMAT_VERSION + 1}" in line
    assert read_version(root) == STATE_FORMAT_VERSION + 1
    write_version(root)


def _newer_changelog_record_is_refused(
    kafka: KafkaFixture, tmp_path: Path, s: dict[str, Any], like: BridgeProcess
) -> None:
    """A changelog record a newer format wrote stops the restore that meets it (exit 2)."""
    src = s["input_topics"][0]
    changelog = changelog_topic_name(s["group_id"], src, "counts")
    headers = [*changelog_headers("default", None)[:2], (VERSION_HEADER, b"99")]
    kafka.seed(changelog, [b"1"], [b"from-the-future"], partition=0, headers=[headers])
    shutil.rmtree(like.settings["state_dir"])  # a fresh volume: restores every partition
    line = _refused(_alone(tmp_path, like, "newer-record"), "is newer than this eos-bridge")
    assert f"changelog {changelog}[0]@" in line and "state format version 99" in line
