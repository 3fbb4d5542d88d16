"""Importing the CLI, loading a JSON configuration and building its formats load no Schema
Registry client, authlib/joserfc, fastavro or protobuf (issue 57: 942 modules instead of 428);
a registry format's codec loads them when it is built. Each check runs in a fresh interpreter,
where ``sys.modules`` starts empty."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
HEAVY = ("confluent_kafka.schema_registry", "authlib", "joserfc", "fastavro", "google.protobuf")


def _loaded(code: str, **env: str) -> list[str]:
    """The modules of :data:`HEAVY` (or under them) that ``code`` leaves in ``sys.modules``."""
    probe = (
        f"{code}\nimport json, sys\n"
        f"print(json.dumps([h for h in {HEAVY!r} if any(m == h or m.startswith(h + '.') "
        f"for m in sys.modules)]))"
    )
    environ = {**os.environ, "PYTHONPATH": str(ROOT), **env}
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=environ, check=False
    )
    assert done.returncode == 0, done.stderr
    return list(json.loads(done.stdout.splitlines()[-1]))


def test_importing_the_cli_loads_no_registry_module() -> None:
    assert _loaded("import app.commands.cli") == []


def test_a_json_configuration_and_its_formats_load_no_registry_module() -> None:
    code = (
        "import app.commands.cli\n"
        "from app.config import load_settings\n"
        "import app.engine.start\n"
        "from app.engine.preflight import registries\n"
        "registries(load_settings())"
    )
    env = {"BRIDGE_INPUT_TOPICS": "in", "BRIDGE_OUTPUT_TOPIC": "out"}
    assert _loaded(code, **env) == []


def test_a_registry_format_loads_its_codec_when_built() -> None:
    code = (
        "from app.serde import Role, codec_for\n"
        "from app.serde.registry_settings import RegistrySettings\n"
        "codec_for('avro', Role.INPUT_VALUE, RegistrySettings(url='http://localhost:1'))"
    )
    assert "fastavro" in _loaded(code)
