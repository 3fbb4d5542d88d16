"""User mistakes that need no broker: one line on stderr, a documented exit code, no traceback.

Exit codes (README "Exit codes"): 2 for every usage, configuration or connection mistake.
``main`` runs in this process (``eos_bridge_here``: a subprocess costs a second of imports, far
more on a loaded machine); tests/integration/test_cli_process.py runs the real ``python -m app``.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

import pytest

from app.pipeline.builder import Pipeline
from tests.support.cli import eos_bridge_here, help_text

BASE = {"BRIDGE_INPUT_TOPICS": "in", "BRIDGE_OUTPUT_TOPIC": "out"}


@pytest.fixture
def modules(tmp_path: Path) -> dict[str, str]:
    """A directory of pipeline modules (good and broken), as PYTHONPATH for the command."""
    (tmp_path / "broken_syntax.py").write_text("from app.pipeline import Pipeline\npipeline = (\n")
    (tmp_path / "raises_on_import.py").write_text("raise RuntimeError('no database here')\n")
    (tmp_path / "good.py").write_text(
        "from app.pipeline import Pipeline\npipeline = Pipeline().map(lambda r: r, record=True)\n"
    )
    return {"PYTHONPATH": str(tmp_path)}


def test_pipeline_with_a_syntax_error(modules: dict[str, str]) -> None:
    result = eos_bridge_here(
        "check-config", "--pipeline", "broken_syntax:pipeline", env={**BASE, **modules}
    )
    assert result.code == 2
    line = result.one_line_error()
    assert "broken_syntax.py:" in line and "syntax error" in line


def test_pipeline_with_a_missing_attribute(modules: dict[str, str]) -> None:
    result = eos_bridge_here("check-config", "--pipeline", "good:pipelin", env={**BASE, **modules})
    assert result.code == 2
    assert "module has no attribute 'pipelin'" in result.one_line_error()


def test_pipeline_module_that_is_not_on_the_path() -> None:
    result = eos_bridge_here("check-config", "--pipeline", "nowhere_to_be_found:p", env=BASE)
    assert result.code == 2
    assert "cannot import 'nowhere_to_be_found'" in result.one_line_error()


def test_pipeline_module_raising_at_import(modules: dict[str, str]) -> None:
    result = eos_bridge_here(
        "check-config", "--pipeline", "raises_on_import:p", env={**BASE, **modules}
    )
    assert result.code == 2
    assert "raised RuntimeError at " in result.one_line_error()
    assert "raises_on_import.py:1: no database here" in result.one_line_error()


def test_run_with_a_broken_pipeline_logs_one_error_and_exits_2(modules: dict[str, str]) -> None:
    env = {**BASE, **modules, "BRIDGE_HTTP_PORT": "0", "BRIDGE_PIPELINE": "broken_syntax:p"}
    result = eos_bridge_here("run", env=env)
    assert result.code == 2
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if " ERROR " in line]
    assert len(errors) == 1 and "syntax error" in errors[0], result.stderr


def test_check_config_compiles_a_good_pipeline(modules: dict[str, str]) -> None:
    result = eos_bridge_here("check-config", "--pipeline", "good:pipeline", env={**BASE, **modules})
    assert result.code == 0, result.stderr
    assert "configuration ok: pipeline of 1 stateless step(s)" in result.stderr


@pytest.mark.parametrize(
    ("env", "line"),
    [
        ({}, "eos-bridge: group protocol: consumer (KIP-848, incremental rebalancing)"),
        ({"BRIDGE_GROUP_PROTOCOL": "classic"}, "eos-bridge: group protocol: classic (eager)"),
        (
            {"BRIDGE_GROUP_PROTOCOL": "consumer"},
            "eos-bridge: group protocol: consumer (KIP-848, incremental rebalancing)",
        ),
    ],
)
def test_check_config_names_the_group_protocol(env: dict[str, str], line: str) -> None:
    result = eos_bridge_here("check-config", env={**BASE, **env})
    assert result.code == 0, result.stderr
    assert line in result.stderr.splitlines()
    shown = json.loads(result.stdout)["group_protocol"]
    assert shown == env.get("BRIDGE_GROUP_PROTOCOL", "consumer")


def test_spec_with_an_unknown_step(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text("steps:\n  - fliter: 'amount > 0'\n")
    result = eos_bridge_here("check-config", env={**BASE, "BRIDGE_PIPELINE_SPEC": str(spec)})
    assert result.code == 2
    assert "unknown step 'fliter'" in result.one_line_error()


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def test_run_with_a_busy_metrics_port(busy_port: int) -> None:
    env = {**BASE, "BRIDGE_HTTP_PORT": str(busy_port), "BRIDGE_HTTP_HOST": "127.0.0.1"}
    result = eos_bridge_here("run", env=env)
    assert result.code == 2
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if " ERROR " in line]
    assert len(errors) == 1, result.stderr
    assert f"BRIDGE_HTTP_PORT): cannot listen on 127.0.0.1:{busy_port}" in errors[0]


def test_misspelled_variable_is_named_with_the_closest_setting() -> None:
    result = eos_bridge_here("check-config", env={**BASE, "BRIDGE_BOOTSTRAP_SERVER": "kafka:9092"})
    assert result.code == 0
    assert (
        "BRIDGE_BOOTSTRAP_SERVER is not a setting of eos-bridge and is ignored; "
        "did you mean BRIDGE_BOOTSTRAP_SERVERS?"
    ) in result.stderr


def test_verify_with_an_unreachable_broker() -> None:
    result = eos_bridge_here(
        "verify", "--bootstrap", "127.0.0.1:1", "--input", "a", "--output", "b", "--id-field", "id",
        "--timeout", "0.5",
    )  # fmt: skip
    assert result.code == 2
    assert "cannot reach Kafka at bootstrap_servers='127.0.0.1:1'" in result.one_line_error()


def test_verify_without_an_id_option_is_a_usage_error() -> None:
    result = eos_bridge_here("verify", "--input", "a", "--output", "b")
    assert result.code == 2
    assert "give exactly one of --id-field and --id-header" in result.one_line_error()


def test_produce_rejects_a_line_that_is_not_json() -> None:
    result = eos_bridge_here("produce", "t", stdin='{"id": 1}\n{"id": 2\n')
    assert result.code == 2
    assert result.one_line_error().startswith("eos-bridge produce: stdin:2: not valid JSON")


def test_tools_name_a_missing_config_file() -> None:
    result = eos_bridge_here("topics", "list", "--config", "/no/such/file.yaml")
    assert result.code == 2
    assert "config file /no/such/file.yaml does not exist" in result.one_line_error()


def test_version_and_help_list_settings_with_their_env_names() -> None:
    version = eos_bridge_here("--version")
    assert version.code == 0 and version.stdout.startswith("eos-bridge ")
    for command in (["run"], ["check-config"], ["verify"], ["tail"], ["topics", "create"]):
        text = help_text(*command)
        assert "BRIDGE_BOOTSTRAP_SERVERS" in text and "BRIDGE_SASL_PASSWORD" in text, command
    assert "BRIDGE_COMMIT_INTERVAL" in help_text("run")


def test_check_config_counts_the_stateful_steps() -> None:
    pipeline = Pipeline().filter(lambda v: True).count(name="clicks").map(lambda v: v)
    assert pipeline.describe() == "pipeline of 3 step(s), 1 stateful: 'clicks'"


def test_a_module_that_raises_inside_is_named_with_its_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "needs_a_library.py").write_text("x = 1\nimport not_installed_anywhere\n")
    (tmp_path / "fails_at_line_3.py").write_text("a = 1\nb = {}\nc = b['missing']\n")
    env = {**BASE, "PYTHONPATH": str(tmp_path)}
    result = eos_bridge_here("check-config", "--pipeline", "needs_a_library:p", env=env)
    assert result.code == 2
    error = result.one_line_error()
    assert "ModuleNotFoundError at" in error and "needs_a_library.py:2" in error
    assert "PYTHONPATH" not in error  # the module was found; a library it imports was not
    result = eos_bridge_here("check-config", "--pipeline", "fails_at_line_3:p", env=env)
    assert "raised KeyError at" in result.one_line_error()
    assert "fails_at_line_3.py:3" in result.one_line_error()


def test_a_config_file_typo_gets_the_closest_setting(tmp_path: Path) -> None:
    config = tmp_path / "bridge.yaml"
    config.write_text("input_topics: [in]\noutput_topic: out\ncommit_intervall: 2\n")
    result = eos_bridge_here("check-config", "--config", str(config), env={})
    assert result.code == 2
    assert "commit_intervall (BRIDGE_COMMIT_INTERVALL): not a setting; did you mean " in (
        result.stderr
    )
    assert "'commit_interval'?" in result.stderr


def test_run_says_where_it_connects_before_it_waits() -> None:
    env = {**BASE, "BRIDGE_BOOTSTRAP_SERVERS": "127.0.0.1:1", "BRIDGE_HTTP_PORT": "0",
           "BRIDGE_STARTUP_TIMEOUT": "1"}  # fmt: skip
    result = eos_bridge_here("run", env=env)
    assert result.code == 2
    lines = result.stderr.splitlines()
    first = next(i for i, line in enumerate(lines) if "connecting to 127.0.0.1:1" in line)
    error = next(i for i, line in enumerate(lines) if " ERROR " in line)
    assert first < error and "startup_timeout" in lines[first] and "in -> out" in lines[first]


def test_run_help_lists_exit_codes_and_the_allowed_values_of_enumerated_settings() -> None:
    text = help_text("run")
    assert "BRIDGE_PROCESSING_GUARANTEE" in text
    assert "(exactly-once|at-least-once)" in text and "(dlq|fail)" in text
    assert "exit codes:" in text and "  5  the group coordinator fenced" in text


def test_bash_completion_completes_commands_and_options() -> None:
    import subprocess

    script = eos_bridge_here("completion", "bash").stdout
    probe = (
        f"{script}\nCOMP_WORDS=(eos-bridge ch); COMP_CWORD=1; _eos_bridge; echo ${{COMPREPLY[@]}}\n"
        "COMP_WORDS=(eos-bridge run --pi); COMP_CWORD=2; _eos_bridge; echo ${COMPREPLY[@]}\n"
    )
    done = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.splitlines() == ["check-config", "--pipeline"]


@pytest.mark.parametrize(
    ("var", "meant"),
    [
        ("BRIDGE_SCHEMA_REGISTRY_URL", "BRIDGE_SCHEMA_REGISTRY__URL"),
        ("BRIDGE_INPUT_SCHEMA_SCHEMA_FILE", "BRIDGE_INPUT_SCHEMA__SCHEMA_FILE"),
        ("BRIDGE_OUTPUT_SCHEMA_FILE", "BRIDGE_OUTPUT_SCHEMA__SCHEMA_FILE"),
        ("BRIDGE_TARGET_REGISTRY_URL", "BRIDGE_TARGET_REGISTRY__URL"),
        ("BRIDGE_TARGET_BOOTSTRAP_SERVERS", "BRIDGE_TARGET__BOOTSTRAP_SERVERS"),
        ("BRIDGE_KAFKA_SECURITY_PROTOCOL", "BRIDGE_KAFKA__security.protocol"),
        ("BRIDGE_OUTPUT_TOPICS", "BRIDGE_OUTPUT_TOPIC"),
    ],
)
def test_did_you_mean_names_the_field_of_a_block(var: str, meant: str) -> None:
    """A block's field written with one `_` is pointed at its `__` variable, not the block."""
    result = eos_bridge_here("check-config", env={**BASE, var: "x"})
    assert f"{var} is not a setting of eos-bridge and is ignored; did you mean {meant}?" in (
        result.stderr
    )


def test_run_warns_of_misspelled_variables_as_check_config_does() -> None:
    """A misspelled variable is often why the configuration is invalid: run says so too."""
    env = {"BRIDGE_INPUT_TOPICS": "in", "BRIDGE_OUTPUT_TOPICS": "out"}
    check = eos_bridge_here("check-config", env=env)
    run = eos_bridge_here("run", env=env)
    assert check.code == run.code == 2
    warning = (
        "eos-bridge: warning: BRIDGE_OUTPUT_TOPICS is not a setting of eos-bridge and is "
        "ignored; did you mean BRIDGE_OUTPUT_TOPIC?"
    )
    assert run.stderr.splitlines()[0] == check.stderr.splitlines()[0] == warning
    assert "output_topic (BRIDGE_OUTPUT_TOPIC): Field required" in run.stderr


@pytest.mark.parametrize(
    ("env", "warning"),
    [
        (
            {"BRIDGE_SCHEMA_IDS": "passthrough"},
            "schema_ids=passthrough (BRIDGE_SCHEMA_IDS) has no effect: it applies to "
            "output_format=bytes with a target_registry, and output_format is json and no "
            "target_registry is set",
        ),
        (
            {"BRIDGE_OUTPUT_SCHEMA__SCHEMA_FILE": "out.avsc"},
            "output_schema (BRIDGE_OUTPUT_SCHEMA) has no effect: output_format is json, not a "
            "registry format (avro, protobuf, json_schema)",
        ),
    ],
)
def test_a_setting_without_effect_is_one_warning_of_check_config_and_run(
    env: dict[str, str], warning: str
) -> None:
    check = eos_bridge_here("check-config", env={**BASE, **env})
    assert check.code == 0
    assert [line for line in check.stderr.splitlines() if "warning" in line] == [
        f"eos-bridge: warning: {warning}"
    ]
    with mock.patch("app.runner.run", return_value=0):
        run = eos_bridge_here("run", env={**BASE, **env, "BRIDGE_LOG_FORMAT": "text"})
    assert run.code == 0
    warned = [line for line in run.stderr.splitlines() if "WARNING" in line]
    assert len(warned) == 1 and warned[0].endswith(f"WARNING app.config: {warning}"), run.stderr


def test_a_setting_with_its_effect_is_no_warning() -> None:
    env = {**BASE, "BRIDGE_SCHEMA_IDS": "passthrough", "BRIDGE_OUTPUT_FORMAT": "bytes",
           "BRIDGE_SCHEMA_REGISTRY__URL": "http://source-registry:8081",
           "BRIDGE_TARGET_REGISTRY__URL": "http://target-registry:8081"}  # fmt: skip
    result = eos_bridge_here("check-config", env=env)
    assert result.code == 0, result.stderr
    assert "warning" not in result.stderr


def test_a_misspelled_field_of_a_block_is_named_with_its_variable_and_the_closest_field() -> None:
    result = eos_bridge_here("check-config", env={**BASE, "BRIDGE_INPUT_SCHEMA__SCHEMA_FILEE": "x"})
    assert result.code == 2
    assert (
        "input_schema.schema_filee (BRIDGE_INPUT_SCHEMA__SCHEMA_FILEE): not a field of "
        "input_schema; did you mean 'schema_file' (BRIDGE_INPUT_SCHEMA__SCHEMA_FILE)?"
    ) in result.stderr
    result = eos_bridge_here("check-config", env={**BASE, "BRIDGE_SCHEMA_REGISTRY__URLL": "x"})
    assert "schema_registry.url (BRIDGE_SCHEMA_REGISTRY__URL): Field required" in result.stderr
