"""The bridge image builds from the Dockerfile and passes records exactly once.

No Docker engine here: a Debian bookworm + python3 base is made with debootstrap
(tools/image/build_base.sh, cached), the Dockerfile is built with `buildah bud --isolation=chroot
--build-arg BASE_IMAGE=<that base>`, and the image's entrypoint runs with `buildah run
--isolation=chroot`, which shares the host's network, so the bridge in the container reaches the
test broker on 127.0.0.1. Slow the first time (debootstrap, dependency layer); later runs reuse
the cached base and buildah's layer cache.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
import tomllib
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from .helpers import REPO

pytestmark = pytest.mark.image

IMAGE = "localhost/eos-bridge:image-test"
UID = 10001
RECORDS = 1000


def sh(*args: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(args, capture_output=True, text=True, timeout=timeout, check=False)
    if check and result.returncode != 0:
        pytest.fail(f"{' '.join(args)} exited {result.returncode}:\n{result.stderr[-4000:]}")
    return result


@pytest.fixture(scope="module")
def base_image() -> str:
    """Local Debian bookworm + python3 base, in buildah's storage (debootstrap once, cached)."""
    if os.geteuid() != 0:
        pytest.fail("the image test needs root (debootstrap, buildah chroot isolation)")
    result = sh(str(REPO / "tools" / "image" / "build_base.sh"), timeout=900)
    return result.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def image(base_image: str) -> str:
    """The Dockerfile built on the local base; --layers keeps the dependency layer cached."""
    return build(base_image, IMAGE, "--layers")


def build(base_image: str, tag: str, cache: str) -> str:
    """``buildah bud`` of the Dockerfile; ``cache`` is --layers or --no-cache."""
    sh(
        "buildah", "bud", "--isolation=chroot", cache, "--pull-never",
        "--build-arg", f"BASE_IMAGE={base_image}",
        "--file", str(REPO / "Dockerfile"), "--tag", tag, str(REPO),
        timeout=1800,
    )  # fmt: skip
    return tag


@pytest.fixture()
def container(image: str) -> Iterator[str]:
    """A working container of the image, removed afterwards."""
    name = f"eos-bridge-image-test-{uuid.uuid4().hex[:8]}"
    sh("buildah", "from", "--pull-never", "--name", name, image)
    try:
        yield name
    finally:
        sh("buildah", "rm", name, check=False)


def image_config(image: str) -> dict[str, Any]:
    info = json.loads(sh("buildah", "inspect", "--type", "image", image).stdout)
    config: dict[str, Any] = info["OCIv1"]["config"]
    return config


def test_image_runs_as_non_root_with_exec_form_entrypoint(image: str) -> None:
    config = image_config(image)
    assert config["Entrypoint"] == ["eos-bridge"]
    assert config["Cmd"] == ["supervise", "--", "run"]
    assert config["User"] == f"{UID}:{UID}"
    assert "9000/tcp" in config["ExposedPorts"]
    env = dict(e.split("=", 1) for e in config["Env"])
    assert env["BRIDGE_STATE_DIR"] == "/var/lib/eos-bridge/state"
    assert env["PATH"].startswith("/opt/venv/bin:")


# --- reproducible: the lock drives the install --------------------------------------------------

RUNTIME_LOCK = REPO / "requirements" / "runtime.lock"
SPARK_LOCK = REPO / "requirements" / "spark.lock"
_INSTALLED = (
    "import importlib.metadata as m, json; "
    "print(json.dumps(sorted([d.metadata['Name'], d.version] for d in m.distributions())))"
)


def locked_pins(lock: Path = RUNTIME_LOCK) -> dict[str, str]:
    """name → version of every requirement in a lock file, each with at least one hash."""
    pins = {}
    for block in re.split(r"\n(?=[a-z0-9])", lock.read_text()):
        head = block.split(" ", 1)[0]
        if "==" in head:
            name, version = head.split("==")
            assert "--hash=sha256:" in block, f"{name} has no hash in {lock}"
            pins[canonicalize_name(name)] = version
    return pins


def installed(image: str) -> dict[str, str]:
    """name → version of every distribution the image's service interpreter sees."""
    name = f"eos-bridge-image-versions-{uuid.uuid4().hex[:8]}"
    sh("buildah", "from", "--pull-never", "--name", name, image)
    try:
        out = sh(
            "buildah", "run", "--isolation=chroot", "--user", f"{UID}:{UID}", name,
            "--", "/opt/venv/bin/python", "-c", _INSTALLED,
        ).stdout  # fmt: skip
    finally:
        sh("buildah", "rm", name, check=False)
    return {canonicalize_name(n): v for n, v in json.loads(out)}


def test_lock_pins_every_runtime_dependency() -> None:
    """requirements/runtime.lock is current with pyproject.toml (rerun `make lock` if not)."""
    pins = locked_pins()
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    for dependency in map(Requirement, project["dependencies"]):
        version = pins.get(canonicalize_name(dependency.name))
        assert version is not None, f"{dependency.name} is not in {RUNTIME_LOCK}"
        assert dependency.specifier.contains(version), f"{dependency} vs locked {version}"
    dockerfile = (REPO / "Dockerfile").read_text()
    assert re.search(r"--require-hashes .*\n.* -r /tmp/runtime\.lock", dockerfile)


def test_spark_lock_pins_runtime_and_spark_dependencies_as_the_runtime_lock() -> None:
    """requirements/spark.lock (Dockerfile.spark) is current with pyproject.toml's dependencies
    and spark extra, and pins what the bridge image shares with it at the bridge's versions."""
    pins = locked_pins(SPARK_LOCK)
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    spark = project["optional-dependencies"]["spark"]
    for dependency in map(Requirement, [*project["dependencies"], *spark]):
        version = pins.get(canonicalize_name(dependency.name))
        assert version is not None, f"{dependency.name} is not in {SPARK_LOCK}"
        assert dependency.specifier.contains(version), f"{dependency} vs locked {version}"
    runtime = locked_pins()
    assert {name: pins.get(name) for name in runtime} == runtime
    dockerfile = (REPO / "Dockerfile.spark").read_text()
    assert re.search(r"--require-hashes .*\n.* -r /tmp/spark\.lock", dockerfile)


def test_image_rebuilds_to_the_same_installed_versions(base_image: str, image: str) -> None:
    """A second build from scratch (no layer cache, fresh downloads) installs the same
    distributions at the same versions: the locked ones and the project, and nothing that
    builds or installs packages."""
    rebuilt = build(base_image, f"{IMAGE}-rebuilt", "--no-cache")
    try:
        first, second = installed(image), installed(rebuilt)
    finally:
        sh("buildah", "rmi", rebuilt, check=False)
    assert first == second
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert first == {**locked_pins(), "eos-bridge": project["version"]}
    assert not {"pip", "setuptools", "wheel"} & set(first)


def test_image_has_no_build_tools_and_ships_byte_code(container: str) -> None:
    """No compiler, no pip in the service's venv, no dev launcher (app/devkafka, devkit)."""
    probe = (
        "for t in gcc cc c++ make git /opt/venv/bin/pip; do command -v $t; done; "
        "/opt/venv/bin/python -m pip --version >/dev/null 2>&1 && echo venv-has-pip; "
        "find /opt/venv -name devkafka -o -name devkit -o -name demo.py | head -n 3; "
        "id -u; "
        "find /opt/venv/lib -path '*/site-packages/app/__pycache__/*.pyc' | head -n 1; "
        "eos-bridge --help >/dev/null && echo cli-ok"
    )
    out = sh(
        "buildah", "run", "--isolation=chroot", "--user", f"{UID}:{UID}", container,
        "--", "sh", "-c", probe,
    ).stdout.split()  # fmt: skip
    assert out[0] == str(UID), out  # nothing of the above printed before the uid
    assert out[1].endswith(".pyc"), out
    assert out[-1] == "cli-ok", out


def wait_for(
    records_wanted: int, read: Any, proc: subprocess.Popen[bytes], deadline: float
) -> list[Any]:
    """Read the output (read_committed) until it has the records, the bridge dies, or time is up."""
    records: list[Any] = []
    while time.monotonic() < deadline and proc.poll() is None:
        records = read()
        if len(records) >= records_wanted:
            break
    return records


def rootfs_snapshot(container: str) -> dict[str, tuple[int, int]]:
    """(mtime, size) of every path in the container's root filesystem, /proc etc. excluded."""
    root = Path(sh("buildah", "mount", container).stdout.strip())
    try:
        snapshot = {}
        for path in root.rglob("*"):
            rel = "/" + str(path.relative_to(root))
            if rel.startswith(("/proc/", "/sys/", "/dev/")):
                continue
            st = path.lstat()
            snapshot[rel] = (st.st_mtime_ns, st.st_size)
        return snapshot
    finally:
        sh("buildah", "umount", container)


def descendants(pid: int) -> list[int]:
    """Every process below ``pid``, from /proc."""
    parents: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # exited meanwhile
        parents.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        children = parents.get(todo.pop(), [])
        found += children
        todo += children
    return found


def entrypoint_process(proc: subprocess.Popen[bytes]) -> int | None:
    """The containerised entrypoint below `buildah run` (what `docker stop` signals)."""
    for pid in descendants(proc.pid):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(arg.endswith(b"/eos-bridge") for arg in argv) and b"buildah" not in argv[0]:
            return pid
    return None


def stop(proc: subprocess.Popen[bytes], grace: float) -> int:
    """SIGTERM the bridge (as `docker stop` / the kubelet would), wait for it, then SIGKILL.

    Only the bridge gets SIGTERM: `buildah run` answers its own SIGTERM by killing the child.
    """
    if proc.poll() is not None:
        return proc.returncode
    bridge = entrypoint_process(proc)
    if bridge is not None:
        os.kill(bridge, signal.SIGTERM)
        try:
            return proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass
    os.killpg(proc.pid, signal.SIGKILL)  # the group is ours: start_new_session=True
    proc.wait(timeout=30)
    return -signal.SIGKILL


def test_container_bridges_records_exactly_once(kafka: Any, container: str, tmp_path: Path) -> None:
    source = kafka.create_topic(partitions=3)
    sink = kafka.create_topic(partitions=3)
    dead_letters = kafka.create_topic()  # the bridge never creates topics itself
    values = [json.dumps({"id": i, "amount": i % 97}).encode() for i in range(RECORDS)]
    kafka.seed(source, values, keys=[str(i % 31).encode() for i in range(RECORDS)])

    # The state dir is a bind mount owned by the image's user, as a fsGroup'd volume would be.
    state = tmp_path / "state"
    state.mkdir()
    os.chown(state, UID, UID)
    env = {
        "BRIDGE_BOOTSTRAP_SERVERS": kafka.bootstrap,
        "BRIDGE_INPUT_TOPICS": json.dumps([source]),
        "BRIDGE_OUTPUT_TOPIC": sink,
        "BRIDGE_DLQ_TOPIC": dead_letters,
        "BRIDGE_GROUP_ID": kafka.unique("image-test-group"),
        "BRIDGE_INSTANCE_ID": "image-test-0",
        "BRIDGE_TRANSACTIONAL_ID_PREFIX": kafka.unique("image-test"),
        "BRIDGE_PROCESSING_GUARANTEE": "exactly-once",
        "BRIDGE_COMMIT_INTERVAL": "0.5",
        "BRIDGE_LOG_FORMAT": "text",
        "BRIDGE_HTTP_PORT": str(free_port()),
    }
    command = image_config(container_image(container))
    argv = [*command["Entrypoint"], *command["Cmd"]]  # what `docker run IMAGE` would run
    env_args = [arg for name, value in env.items() for arg in ("--env", f"{name}={value}")]
    sh("buildah", "run", "--isolation=chroot", container, "--", "true")  # create mount points
    before = rootfs_snapshot(container)
    log_path = tmp_path / "bridge.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [
                "buildah", "run", "--isolation=chroot", "--user", f"{UID}:{UID}",
                "--volume", f"{state}:/var/lib/eos-bridge/state:rw",
                *env_args, container, "--", *argv,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, for the SIGKILL fallback
        )  # fmt: skip
        try:
            records = wait_for(
                RECORDS,
                lambda: kafka.read_all(sink, read_committed=True, timeout=10.0),
                proc,
                # A hang guard, not a speed requirement: the container's start-up and its
                # 1000 records take seconds on a quiet machine, minutes on a loaded one.
                deadline=time.monotonic() + 600,
            )
        finally:
            exit_code = stop(proc, grace=60)
    log_tail = log_path.read_text(errors="replace")[-4000:]

    counts = Counter(json.loads(r.value)["id"] for r in records)
    missing = set(range(RECORDS)) - set(counts)
    duplicated = {i: n for i, n in counts.items() if n > 1}
    assert not missing, f"{len(missing)} records missing from the output\n{log_tail}"
    assert not duplicated, f"records seen more than once: {duplicated}\n{log_tail}"
    # The bridge re-encodes JSON, so compare documents rather than bytes.
    by_id = {doc["id"]: doc for doc in (json.loads(r.value) for r in records)}
    assert by_id == {i: json.loads(v) for i, v in enumerate(values)}
    assert exit_code == 0, f"the bridge did not stop cleanly on SIGTERM ({exit_code})\n{log_tail}"
    # After the final checkpoint nothing more may appear: read again, same committed output.
    assert len(kafka.read_all(sink, read_committed=True, timeout=10.0)) == RECORDS
    # A read-only root filesystem is enough: the run wrote nothing outside /tmp (the state dir
    # is a mount; /run belongs to `buildah run`, which sets up its mount points there).
    after = rootfs_snapshot(container)
    written = {p for p in after if before.get(p) != after[p]} - {"/tmp", "/run"}
    assert {p for p in written if not p.startswith(("/tmp/", "/run/"))} == set()


def container_image(container: str) -> str:
    info = json.loads(sh("buildah", "inspect", "--type", "container", container).stdout)
    return str(info["FromImageID"])


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
