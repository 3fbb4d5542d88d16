"""The runtime wheel: ``python -m build`` makes it, and it carries the service and nothing else.

The wheel is built from a copy of the working tree (so the tree gets no ``build/`` or
``*.egg-info``) into a temporary directory. Its file list must hold the service packages
(``app``, ``changelog``, ``spark_jobs``) and no dev-only code: not the local Kafka launcher or
the demo (``devkit/``, wherever they would sit), not ``tests/`` or ``bench/``. The service
modules of the unpacked wheel must import without the repository on the path, so the service
cannot depend on dev code either.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path, PurePosixPath

import pytest

from .helpers import REPO

SERVICE = {"app", "changelog", "spark_jobs"}
# Dev-only code by directory (the launcher's package, its old home inside app, test and bench
# trees) and by module name (the demo), wherever in the wheel it would be.
DEV_DIRECTORIES = {"devkit", "devkafka", "tests", "bench"}
DEV_MODULES = {"demo.py"}
_NOT_SOURCE = shutil.ignore_patterns(
    ".git", ".venv*", "__pycache__", "*.egg-info", "build", "dist", ".*_cache", "spark-warehouse"
)


def dev_only(names: list[str]) -> list[str]:
    """The wheel entries that are dev-only code (see :data:`DEV_DIRECTORIES`)."""
    found = []
    for name in names:
        path = PurePosixPath(name)
        if path.parts[0].endswith(".dist-info"):
            continue
        if DEV_DIRECTORIES & set(path.parts[:-1]) or path.name in DEV_MODULES:
            found.append(name)
    return found


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel ``python -m build --wheel`` makes of (a copy of) the working tree."""
    work = tmp_path_factory.mktemp("wheel")
    source = work / "source"
    shutil.copytree(REPO, source, ignore=_NOT_SOURCE, symlinks=True)
    built = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(work / "dist"), str(source)],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert built.returncode == 0, (
        f"python -m build failed:\n{(built.stdout + built.stderr)[-4000:]}"
    )
    wheels = sorted((work / "dist").glob("eos_bridge-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


@pytest.fixture(scope="module")
def names(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        return archive.namelist()


def test_the_wheel_holds_the_service_packages_only(wheel: Path, names: list[str]) -> None:
    packages = {PurePosixPath(n).parts[0] for n in names if ".dist-info/" not in n}
    assert packages == SERVICE
    for package in SERVICE:
        assert f"{package}/__init__.py" in names
        assert f"{package}/py.typed" in names
    assert "app/commands/cli.py" in names
    assert "spark_jobs/jars/pom.xml" in names  # package data the Spark jobs read at run time
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    with zipfile.ZipFile(wheel) as archive:
        assert "eos-bridge = app.commands.cli:main" in archive.read(entry_points).decode()


def test_the_wheel_has_no_launcher_demo_tests_or_bench(names: list[str]) -> None:
    assert dev_only(names) == []
    # The tree does have them: the wheel leaves them out, they are not simply missing.
    assert (REPO / "devkit" / "kafka" / "cluster.py").exists()
    assert (REPO / "devkit" / "demo.py").exists()


def test_the_dev_code_check_names_what_it_finds() -> None:
    """The check above can fail: the launcher and demo where they used to live are found."""
    names = [
        "app/__init__.py",
        "app/devkafka/cluster.py",
        "app/devkafka/pom.xml",
        "app/demo.py",
        "devkit/kafka/__main__.py",
        "tests/conftest.py",
        "eos_bridge-0.1.0.dist-info/METADATA",
    ]
    assert dev_only(names) == names[1:6]


def test_the_wheel_service_imports_without_the_repository(wheel: Path, tmp_path: Path) -> None:
    """Every service module imports from the unpacked wheel alone: nothing in the service
    needs the dev package (absent here: the repository is not on the path)."""
    unpacked = tmp_path / "site"
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(unpacked)
    code = (
        "import importlib, pkgutil, sys\n"
        "import app, changelog, spark_jobs\n"
        "for package in (app, changelog, spark_jobs):\n"
        "    assert package.__file__.startswith(sys.argv[1]), package.__file__\n"
        "    for module in pkgutil.walk_packages(package.__path__, package.__name__ + '.'):\n"
        "        importlib.import_module(module.name)\n"
        "try:\n"
        "    import devkit\n"
        "except ImportError:\n"
        "    print('no devkit')\n"
    )
    # -P: the working directory is not put on sys.path; the wheel comes first on PYTHONPATH.
    done = subprocess.run(
        [sys.executable, "-P", "-c", code, str(unpacked)],
        cwd=tmp_path, env={"PYTHONPATH": str(unpacked), "PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "no devkit"
