"""The dev registry launcher: ready when it says so, stopped by its own pid, a failed start
named with the registry's own log lines."""

from __future__ import annotations

import socket
import urllib.request
from pathlib import Path

import pytest

from devkit.registry import LocalRegistry, LocalRegistryError

pytestmark = pytest.mark.integration


def test_start_serves_the_confluent_api_and_stop_ends_the_process(tmp_path: Path) -> None:
    registry = LocalRegistry(tmp_path / "registry").start()
    try:
        pid = registry.pid
        assert registry.ready()
        with urllib.request.urlopen(f"{registry.url}/subjects", timeout=10) as answer:
            assert answer.read() == b"[]"
        attached = LocalRegistry.attach(tmp_path / "registry")
        assert attached is not None and attached.pid == pid and attached.alive()
    finally:
        registry.stop()
    assert not registry.alive() and not Path(f"/proc/{pid}").exists()
    assert LocalRegistry.attach(tmp_path / "registry") is None


def test_a_taken_port_fails_the_start_with_the_registrys_log(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        registry = LocalRegistry(tmp_path / "registry", port=taken.getsockname()[1])
        with pytest.raises(LocalRegistryError, match=r"registry\.log"):
            registry.start(timeout=120, attempts=1)
    assert not registry.alive()
