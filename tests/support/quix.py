"""Quix Streams as a reference, run in its own virtualenv (``make quix-venv``).

Quix 3.28 pins confluent-kafka <2.13, older than the bridge's, so the tests never import it:
they run Quix code with :func:`bench.contenders.quix_python` in a subprocess and compare.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from types import TracebackType
from typing import Any

from app.kafka.topics import KafkaRecord
from bench.contenders import REPO, quix_python


class QuixOracle:
    """Quix's own changelog rules, asked of one long-lived :mod:`tests.support.quix_oracle`
    process (importing Quix takes a second; property tests ask hundreds of questions)."""

    def __init__(self) -> None:
        # A file, not a pipe (a full pipe would block Quix); closed by close().
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115
        self._proc = subprocess.Popen(
            [str(quix_python()), "-m", "tests.support.quix_oracle"],
            cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
            text=True,
        )  # fmt: skip

    def ask(self, op: str, **args: Any) -> Any:
        """Send one request; return Quix's answer (raises with Quix's stderr if it died)."""
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._proc.stdin.write(json.dumps({"op": op, **args}) + "\n")
        self._proc.stdin.flush()
        line = self._proc.stdout.readline()
        if not line:
            self._stderr.seek(0)
            tail = self._stderr.read().decode(errors="replace")[-3000:]
            raise RuntimeError(f"the Quix oracle exited on {op!r}: {tail}")
        return json.loads(line)["result"]

    def should_apply(self, processed: dict[str, int] | None, committed: dict[str, int]) -> bool:
        """``RecoveryPartition._should_apply_changelog`` for one changelog record."""
        return bool(self.ask("should_apply", processed=processed, committed=committed))

    def recover(
        self, records: list[KafkaRecord], committed: dict[str, int]
    ) -> tuple[int, dict[tuple[str, bytes], bytes]]:
        """Feed ``records`` through a real Quix ``RecoveryPartition``: (records applied, the
        resulting ``{(column family, key): value}``)."""
        wire = [
            {
                "key": None if r.key is None else r.key.hex(),
                "value": None if r.value is None else r.value.hex(),
                "offset": r.offset,
                "headers": [[k, v.hex()] for k, v in r.headers],
            }
            for r in records
        ]
        answer = self.ask("recover", records=wire, committed=committed)
        data = {(cf, bytes.fromhex(k)): bytes.fromhex(v) for cf, k, v in answer["data"]}
        return int(answer["applied"]), data

    def close(self) -> None:
        """End the process (EOF on its stdin) and wait for it."""
        if self._proc.stdin is not None:
            self._proc.stdin.close()
        try:
            self._proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._stderr.close()

    def __enter__(self) -> QuixOracle:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:  # fmt: skip
        self.close()
