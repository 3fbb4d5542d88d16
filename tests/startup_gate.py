"""A pipeline whose import waits at a gate, for the start-up tests
(``BRIDGE_PIPELINE=tests.startup_gate:pipeline``, ``EOS_TEST_START_GATE`` = a directory).

Importing it writes ``reached`` into the gate directory, then waits until the test writes
``open`` there: the bridge stays inside its start-up, before it consumes anything, for exactly
as long as the test wants, whatever the machine's speed.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from app.pipeline import Pipeline

_GATE = Path(os.environ["EOS_TEST_START_GATE"])
(_GATE / "reached").write_text(str(os.getpid()))
while not (_GATE / "open").exists():
    time.sleep(0.05)

pipeline = Pipeline()  # passthrough
