"""The Spark image's entrypoint (deploy/spark/entrypoint.sh) turns Spark on Kubernetes' `driver`
and `executor` arguments into the right process and runs anything else unchanged.

Run with stub `spark-submit`, `java` and other commands that record the argv, environment and
pid they were exec'd with; tests/spark/test_entrypoint.py runs the same script against the real
spark-submit and executor backend.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
ENTRYPOINT = REPO / "deploy" / "spark" / "entrypoint.sh"

# Writes its pid, $0 and each argument, NUL-separated, and its environment to $RECORD(.env).
STUB = """#!/bin/sh
printf '%s\\0' "$$" "$0" "$@" > "$RECORD"
env -0 > "$RECORD.env"
"""

EXECUTOR_ENV = {
    "SPARK_DRIVER_URL": "spark://CoarseGrainedScheduler@driver-svc.ns.svc:7078",
    "SPARK_EXECUTOR_ID": "3",
    "SPARK_EXECUTOR_CORES": "2",
    "SPARK_EXECUTOR_MEMORY": "4096m",
    "SPARK_APPLICATION_ID": "spark-0123abcd",
    "SPARK_EXECUTOR_POD_IP": "10.0.0.7",
    "SPARK_EXECUTOR_POD_NAME": "demo-spark-exec-3",
    "SPARK_RESOURCE_PROFILE_ID": "0",
}


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str
    pid: int
    argv: list[str] | None  # $0 and the arguments the stub got; None: no stub ran
    env: dict[str, str]
    stub_pid: int | None


@pytest.fixture()
def stubs(tmp_path: Path) -> Path:
    """Stub commands: spark/bin/spark-submit, java/bin/java and bin/python (on PATH)."""
    for rel in ("spark/bin/spark-submit", "java/bin/java", "bin/python"):
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(STUB)
        path.chmod(0o755)
    return tmp_path


def run(stubs: Path, args: list[str], env: Mapping[str, str]) -> Run:
    record = stubs / "record"
    record.unlink(missing_ok=True)
    base = {"PATH": f"{stubs / 'bin'}:/usr/bin:/bin", "RECORD": str(record)}
    proc = subprocess.Popen(
        ["bash", str(ENTRYPOINT), *args],
        env={**base, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    stdout, stderr = proc.communicate(timeout=30)
    if not record.exists():
        return Run(proc.returncode, stdout, stderr, proc.pid, None, {}, None)
    pid, *argv = record.read_text().split("\0")[:-1]
    pairs = (item.split("=", 1) for item in Path(f"{record}.env").read_text().split("\0") if item)
    return Run(proc.returncode, stdout, stderr, proc.pid, argv, dict(pairs), int(pid))


def test_driver_runs_spark_submit_in_client_mode_with_the_pod_address(stubs: Path) -> None:
    app = [
        "--properties-file", "/opt/spark/conf/spark.properties",
        "--class", "org.apache.spark.deploy.PythonRunner",
        "local:///opt/venv/lib/python3.11/site-packages/spark_jobs/stream.py",
        "--trigger", "1 minute", "--master", "",
    ]  # fmt: skip
    env = {
        "SPARK_HOME": str(stubs / "spark"),
        "SPARK_DRIVER_BIND_ADDRESS": "10.0.0.5",
        "EOS_SPARK_JARS_DIR": "/opt/spark-jars",
    }

    result = run(stubs, ["driver", *app], env)

    assert result.returncode == 0, result.stderr
    assert result.argv == [
        str(stubs / "spark" / "bin" / "spark-submit"),
        "--conf", "spark.driver.bindAddress=10.0.0.5",
        "--deploy-mode", "client",
        *app,
    ]  # fmt: skip
    # exec'd, not a child: the JVM is the container's main process and gets its SIGTERM.
    assert result.stub_pid == result.pid
    assert result.env["SPARK_HOME"] == str(stubs / "spark")
    # spark-submit's launcher puts SPARK_DIST_CLASSPATH on the driver JVM's class path.
    assert result.env["SPARK_DIST_CLASSPATH"] == "/opt/spark-jars/*"
    assert result.stdout == ""


def test_our_jars_are_appended_to_an_existing_dist_classpath(stubs: Path) -> None:
    env = {
        "SPARK_HOME": str(stubs / "spark"),
        "SPARK_DRIVER_BIND_ADDRESS": "10.0.0.5",
        "EOS_SPARK_JARS_DIR": "/opt/spark-jars",
        "SPARK_DIST_CLASSPATH": "/opt/hadoop/lib/*",
    }
    result = run(stubs, ["driver", "app.py"], env)
    assert result.env["SPARK_DIST_CLASSPATH"] == "/opt/hadoop/lib/*:/opt/spark-jars/*"


def test_executor_runs_the_kubernetes_backend_from_the_pod_variables(stubs: Path) -> None:
    spark_home = stubs / "spark"
    env = {
        **EXECUTOR_ENV,
        "SPARK_HOME": str(spark_home),
        "JAVA_HOME": str(stubs / "java"),
        "EOS_SPARK_JARS_DIR": "/opt/spark-jars",
        "SPARK_CONF_DIR": "/opt/spark/conf",
        # Spark numbers them from 0; the order is numeric, and a value may hold spaces.
        "SPARK_JAVA_OPT_10": "-Dk=ten",
        "SPARK_JAVA_OPT_2": "-Dk=two words",
        "SPARK_JAVA_OPT_0": "-Djava.net.preferIPv6Addresses=false",
    }

    result = run(stubs, ["executor"], env)

    assert result.returncode == 0, result.stderr
    assert result.argv == [
        str(stubs / "java" / "bin" / "java"),
        "-Djava.net.preferIPv6Addresses=false", "-Dk=two words", "-Dk=ten",
        "-Xms4096m", "-Xmx4096m",
        "-cp", f"/opt/spark/conf:{spark_home}/jars/*:/opt/spark-jars/*",
        "org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend",
        "--driver-url", EXECUTOR_ENV["SPARK_DRIVER_URL"],
        "--executor-id", "3",
        "--cores", "2",
        "--app-id", "spark-0123abcd",
        "--hostname", "10.0.0.7",
        "--resourceProfileId", "0",
        "--podName", "demo-spark-exec-3",
    ]  # fmt: skip
    assert result.stub_pid == result.pid


def test_spark_home_defaults_to_the_pip_pyspark(stubs: Path) -> None:
    # The image sets no SPARK_HOME: the script asks python3 where pyspark is.
    finder = stubs / "bin" / "python3"
    finder.write_text(f"#!/bin/sh\necho {stubs / 'spark'}\n")
    finder.chmod(0o755)
    env = {**EXECUTOR_ENV, "JAVA_HOME": str(stubs / "java")}

    result = run(stubs, ["executor"], env)

    assert result.returncode == 0, result.stderr
    assert result.argv is not None
    assert result.argv[result.argv.index("-cp") + 1] == f"{stubs}/spark/conf:{stubs}/spark/jars/*"
    assert result.env["SPARK_HOME"] == str(stubs / "spark")


@pytest.mark.parametrize("missing", sorted(set(EXECUTOR_ENV) - {"SPARK_RESOURCE_PROFILE_ID"}))
def test_executor_without_a_pod_variable_names_it(stubs: Path, missing: str) -> None:
    env = {**EXECUTOR_ENV, "SPARK_HOME": str(stubs / "spark"), "JAVA_HOME": str(stubs / "java")}
    del env[missing]

    result = run(stubs, ["executor"], env)

    assert result.returncode == 2
    assert result.argv is None
    assert result.stderr == (
        f"spark entrypoint: executor needs {missing} (Spark on Kubernetes sets it in the pod)\n"
    )


def test_driver_without_a_bind_address_names_it(stubs: Path) -> None:
    result = run(stubs, ["driver", "app.py"], {"SPARK_HOME": str(stubs / "spark")})
    assert result.returncode == 2
    assert result.argv is None
    assert "driver needs SPARK_DRIVER_BIND_ADDRESS" in result.stderr


def test_other_commands_run_unchanged(stubs: Path) -> None:
    # What `docker run IMAGE python -m spark_jobs.stream ...` passes; empty arguments survive.
    args = ["python", "-m", "spark_jobs.stream", "--trigger", "1 minute", "--master", ""]

    result = run(stubs, args, {"SPARK_DRIVER_BIND_ADDRESS": "10.0.0.5"})

    assert result.returncode == 0, result.stderr
    assert result.argv is not None
    assert result.argv[0] == str(stubs / "bin" / "python")
    assert result.argv[1:] == args[1:]
    assert result.stub_pid == result.pid
    assert (result.stdout, result.stderr) == ("", "")
    assert "SPARK_DIST_CLASSPATH" not in result.env


def test_a_uid_without_passwd_entry_is_warned_about_not_refused(stubs: Path) -> None:
    getent = stubs / "bin" / "getent"
    getent.write_text("#!/bin/sh\nexit 2\n")  # getent's "key not found"
    getent.chmod(0o755)
    env = {"SPARK_HOME": str(stubs / "spark"), "SPARK_DRIVER_BIND_ADDRESS": "10.0.0.5"}

    result = run(stubs, ["driver", "app.py"], env)

    assert result.returncode == 0
    assert result.argv is not None and result.argv[-1] == "app.py"
    assert "has no passwd entry" in result.stderr


def test_no_command_is_a_usage_error(stubs: Path) -> None:
    result = run(stubs, [], {})
    assert result.returncode == 2
    assert "no command given" in result.stderr
