"""A real Quix Streams application that counts per key (run as a subprocess by the
compatibility test): ``python -m tests.support.quix_app BOOTSTRAP TOPIC GROUP STATE_DIR N
GUARANTEE``."""

from __future__ import annotations

import sys
from typing import Any

from quixstreams import Application, State


def count(value: Any, state: State) -> dict[str, Any]:
    total = state.get("count", 0) + 1
    state.set("count", total)
    state.set("last_id", value["id"])
    if total % 7 == 0:
        state.delete("last_id")  # tombstones in the changelog too
    return {"count": total}


def main(bootstrap: str, topic: str, group: str, state_dir: str, n: int, guarantee: str) -> None:
    app = Application(
        broker_address=bootstrap,
        consumer_group=group,
        state_dir=state_dir,
        auto_offset_reset="earliest",
        commit_every=25,
        commit_interval=60,
        processing_guarantee=guarantee,  # type: ignore[arg-type]
        loglevel="WARNING",
    )
    sdf = app.dataframe(app.topic(topic, value_deserializer="json"))
    sdf = sdf.apply(count, stateful=True)
    app.run(count=n, timeout=60)


if __name__ == "__main__":
    bootstrap, topic, group, state_dir, n, guarantee = sys.argv[1:7]
    main(bootstrap, topic, group, state_dir, int(n), guarantee)
