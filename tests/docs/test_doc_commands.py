"""Every shell block of README.md and docs/*.md, run verbatim against a dev broker.

Each document gets its own broker from the project's launcher (``LocalKafka``) in a private
directory on a free port, and the blocks run in document order from the repository root with
bash (``-e -o pipefail``), in an environment that points the commands at that broker:
``EOS_BRIDGE_DEV_KAFKA_DIR``/``_PORT`` (so ``python -m devkit.kafka start|stop`` manage it) and
``BRIDGE_BOOTSTRAP_SERVERS``; ``EOS_BRIDGE_DEV_REGISTRY_DIR``/``_PORT`` for a private dev Schema
Registry (``python -m devkit.registry``, stopped with the document if a block left it
running); plus ``BRIDGE_STATE_DIR`` in a temporary directory and ``BRIDGE_HTTP_PORT=0`` (the
machine may have port 9000 taken). Any other ``BRIDGE_*`` variable
of the calling environment is removed. Markers before a block: see :mod:`tests.docs.blocks`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from devkit.kafka import LocalKafka
from devkit.kafka.cluster import free_port
from devkit.registry import LocalRegistry
from tests.support.kafka import wait_until

from .blocks import Block, extract

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
BLOCKS = [block for doc in DOCS for block in extract(doc)]
BLOCK_TIMEOUT = 180.0  # a block waits on the bridge only through `tail --max N`
STOP_TIMEOUT = 60.0

pytestmark = pytest.mark.integration


class DocSession:
    """One document's broker, environment and background commands."""

    def __init__(self, workdir: Path, broker: bool = True) -> None:
        self.workdir = workdir
        self.kafka = LocalKafka(workdir / "dev-kafka", first_port=free_port())
        bootstrap = self.kafka.bootstrap
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("BRIDGE_")}
        self.env |= {
            "EOS_BRIDGE_DEV_KAFKA_DIR": str(self.kafka.directory),
            "EOS_BRIDGE_DEV_KAFKA_PORT": bootstrap.rsplit(":", 1)[1],
            "BRIDGE_BOOTSTRAP_SERVERS": bootstrap,
            "BRIDGE_STATE_DIR": str(workdir / "state"),
            "BRIDGE_HTTP_PORT": "0",
            "EOS_BRIDGE_DEV_REGISTRY_DIR": str(workdir / "dev-registry"),
            "EOS_BRIDGE_DEV_REGISTRY_PORT": str(free_port()),
        }
        self.started = not broker  # the broker starts with the first block that needs it
        self.failed: str | None = None
        self.background: list[tuple[Block, subprocess.Popen[bytes], Path]] = []

    def run(self, block: Block) -> None:
        if not self.started and not block.own_broker:
            self.kafka.start()
            self.started = True
        if block.ctrl_c:
            self.ctrl_c()
        if block.background:
            log = self.workdir / f"background-{block.line}.log"
            with log.open("wb") as out:
                proc = subprocess.Popen(
                    ["bash", "-e", "-o", "pipefail", "-c", block.script],
                    cwd=REPO, env=self.env, stdout=out, stderr=subprocess.STDOUT,
                    start_new_session=True,
                )  # fmt: skip
            self.background.append((block, proc, log))
            return
        out = self.workdir / f"block-{block.line}.log"
        with out.open("wb") as sink:
            proc = subprocess.Popen(
                ["bash", "-e", "-o", "pipefail", "-c", block.script],
                cwd=REPO, env=self.env, stdout=sink, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        deadline = time.monotonic() + (block.timeout or BLOCK_TIMEOUT)
        while (code := proc.poll()) is None:
            # A block that waits on a background command (`tail --max N` on the bridge's
            # output) fails at once, with the reason, when that command has ended.
            ended = [(b, p.poll()) for b, p, _ in self.background if p.poll() is not None]
            if ended or time.monotonic() > deadline:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                what = (
                    f"background {ended[0][0].where} ended (exit code {ended[0][1]}) while "
                    f"this block waited"
                    if ended
                    else f"still running after {block.timeout or BLOCK_TIMEOUT:.0f}s"
                )
                self._fail(block, what, out.read_text(errors="replace"))
            time.sleep(0.2)
        if code != 0:
            self._fail(block, f"exit code {code}", out.read_text(errors="replace"))

    def ctrl_c(self) -> None:
        """SIGINT every background command, as Ctrl-C in its terminal; each must exit 0."""
        running, self.background = self.background, []
        for block, proc, log in running:
            os.killpg(proc.pid, signal.SIGINT)
            try:
                code = proc.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                self._fail(block, "did not stop within a minute of Ctrl-C", log.read_text())
            if code != 0:
                self._fail(block, f"exit code {code} after Ctrl-C", log.read_text())

    def close(self) -> None:
        for _, proc, _ in self.background:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        registry = LocalRegistry.attach(self.workdir / "dev-registry")
        if registry is not None:
            registry.stop()
        self.kafka.stop()

    def _fail(self, block: Block, what: str, output: str) -> None:
        self.failed = block.where
        bg = "".join(
            f"\n--- background {b.where}:\n{log.read_text()[-3000:]}"
            for b, _, log in self.background
        )
        pytest.fail(f"{block.where}: {what}\n{block.script}\n--- output:\n{output[-6000:]}{bg}")


@pytest.fixture(scope="module")
def sessions(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[Path, DocSession]]:
    made: dict[Path, DocSession] = {}
    yield made
    for session in made.values():
        session.close()


@pytest.mark.parametrize("block", BLOCKS, ids=lambda b: b.where)
def test_doc_block(
    block: Block, sessions: dict[Path, DocSession], tmp_path_factory: pytest.TempPathFactory
) -> None:
    if block.skip:
        pytest.skip(f"{block.where}: {block.skip}")
    if block.path not in sessions:
        sessions[block.path] = DocSession(tmp_path_factory.mktemp(block.path.stem))
    session = sessions[block.path]
    if session.failed:
        pytest.fail(f"not run: {session.failed} of the same document failed before it")
    session.run(block)


def test_blocks_and_markers_are_extracted(tmp_path: Path) -> None:
    """The extraction itself, on a document made for it."""
    doc = tmp_path / "doc.md"
    doc.write_text(
        "text\n```bash\necho one\n```\n<!-- doc-test: ctrl-c background -->\n```sh\nrun\n```\n"
        "<!-- doc-test: skip no cluster here -->\n```bash\nhelm install\n```\n"
        "```console\n$ echo two\ntwo\n```\n```text\nnot a command\n```\n"
        "<!-- doc-test: timeout=900 -->\n```bash\nslow\n```\n"
        "<!-- doc-test: own-broker -->\n```bash\nmine\n```\n"
    )
    blocks = extract(doc)
    assert [b.script for b in blocks][:4] == ["echo one\n", "run\n", "helm install\n", "echo two\n"]
    assert [b.timeout for b in blocks] == [None, None, None, None, 900.0, None]
    assert [(b.background, b.ctrl_c, b.skip) for b in blocks] == [
        (False, False, None), (True, True, None), (False, False, "no cluster here"),
        (False, False, None), (False, False, None), (False, False, None),
    ]  # fmt: skip
    assert [b.own_broker for b in blocks] == [False] * 5 + [True]
    assert any(b.background for b in BLOCKS if b.path.name == "README.md")


def test_a_failing_block_and_an_unclean_stop_fail_the_test(tmp_path: Path) -> None:
    """The harness can fail: a non-zero exit, a background command that Ctrl-C kills, and
    one that ends while a block waits on it."""
    session = DocSession(tmp_path, broker=False)
    doc = tmp_path / "doc.md"
    try:
        with pytest.raises(pytest.fail.Exception, match=r"doc.md:1: exit code 3"):
            session.run(Block(doc, 1, "true\nexit 3\n"))
        trapped = tmp_path / "trapped"  # the handler is set: Ctrl-C now exits 7, not -2
        # One process that handles SIGINT itself: a bash trap around a `sleep` child once
        # missed the signal under load (CI run 6) and the block never stopped.
        handler = "signal.signal(signal.SIGINT, lambda *_: sys.exit(7))"
        forever = (
            f'exec python3 -c "import pathlib, signal, sys; {handler}; '
            f"pathlib.Path('{trapped}').touch(); signal.pause()\"\n"
        )
        session.run(Block(doc, 5, forever, background=True))
        wait_until(trapped.exists, 60, "the background block to set its trap")
        with pytest.raises(pytest.fail.Exception, match=r"doc.md:5: exit code 7 after Ctrl-C"):
            session.ctrl_c()
        # A block waiting on a background command that died fails at once, naming it.
        session.run(Block(doc, 9, "exit 4\n", background=True))
        waiting = "while true; do sleep 0.1; done\n"
        expected = r"doc.md:12: background doc.md:9 ended \(exit code 4\) while this block waited"
        with pytest.raises(pytest.fail.Exception, match=expected):
            session.run(Block(doc, 12, waiting))
    finally:
        session.close()
