"""``eos-bridge supervise -- run``: the image's entry point restarts a bridge that exits 3 at
once, gives up (with exit 3) after its restart budget, and hands SIGTERM to the bridge."""

from __future__ import annotations

import re
import sys

import orjson
import pytest

from tests.integration.conftest import MakeBridge
from tests.support.bridge import BridgeProcess, base_settings, bridge_topics, wait_caught_up
from tests.support.kafka import KafkaFixture

pytestmark = pytest.mark.integration

GUARD_S = 300  # hang guard, never a timing claim


def _supervised(bridge: BridgeProcess, *options: str) -> BridgeProcess:
    bridge.command = [sys.executable, "-m", "app", "supervise", *options, "--", "run"]
    return bridge


def test_exit_3_is_restarted_at_once_until_the_budget_is_spent(
    kafka: KafkaFixture, bridges: MakeBridge
) -> None:
    """A record that hangs its step: each child exits 3 (the transaction age bound), the
    supervisor restarts it twice without waiting, then exits 3 itself (a crash loop). With
    ``log_format=json`` every line, the supervisor's too, is one JSON object."""
    src, out, dlq = bridge_topics(kafka, partitions=1)
    kafka.seed(src, [orjson.dumps({"id": "r0", "hang": True})])
    s = base_settings(kafka, src, out, dlq, pipeline="tests.pipelines:hangs",
                      transaction_timeout_ms=6000, log_format="json")  # fmt: skip
    bridge = _supervised(bridges(**s), "--max-restarts", "2", "--window", "600").start()
    assert bridge.wait(GUARD_S) == 3, bridge.logs()[-3000:]
    # Every line but the harness's own start markers.
    lines = [orjson.loads(line) for line in bridge.logs().splitlines()
             if line.strip() and not line.startswith("===== start #")]  # fmt: skip
    loggers = {line["logger"] for line in lines}
    assert "app.supervise" in loggers and len(loggers) > 1, loggers
    log = "\n".join(line["message"] for line in lines)
    assert log.count("test step hang: blocking forever") == 3, "first start + 2 restarts"
    pattern = r"bridge exited 3 after [\d.]+s; restart (\d) \(\d of 2 within 600s\)"
    restarts = re.findall(pattern, log)
    assert restarts == ["1", "2"], log[-3000:]
    assert "2 restarts within 600s already (--max-restarts, --window); exiting 3" in log
    assert "Traceback" not in log


def test_sigterm_reaches_the_bridge_and_is_not_restarted(
    kafka: KafkaFixture, bridges: MakeBridge
) -> None:
    src, out, dlq = bridge_topics(kafka, partitions=2)
    kafka.seed(src, [orjson.dumps({"id": f"r{i}"}) for i in range(100)])
    s = base_settings(kafka, src, out, dlq)
    bridge = _supervised(bridges(**s)).start()
    wait_caught_up(kafka, s["group_id"], src, GUARD_S, [bridge])
    assert bridge.terminate() == 0, bridge.logs()[-3000:]
    log = bridge.logs()
    assert "received SIGTERM" in log and "stopped cleanly" in log
    assert "bridge exited" not in log, "a stop is not a crash: no restart"
    assert len(kafka.read_all(out)) == 100
