"""The example pipelines of docs/pipelines.md in Python; each has a YAML twin next to it.

Run one with this directory on ``PYTHONPATH``::

    PYTHONPATH=examples/pipelines eos-bridge run --pipeline clicks_pipelines:clicks_per_minute
"""

from app.pipeline import Pipeline

# clicks-per-user.yaml: {"key": <user>, "count": <clicks so far>} per click.
clicks_per_user = Pipeline().key_by(lambda v: v["user"]).count(name="clicks-per-user")

# clicks-per-minute.yaml: clicks per user and minute of event time, once per closed window.
clicks_per_minute = (
    Pipeline()
    .key_by(lambda v: v["user"])
    .window(60, grace=10, timestamp="ts", name="clicks-per-minute")
    .aggregate("count")
)


def _destination(payment: dict[str, object]) -> str | None:
    if payment["kind"] == "refund":
        return "payments-refunds"
    return "payments-large" if payment["amount"] >= 100 else None  # type: ignore[operator]


# payments-routed.yaml: cents added; refunds and large payments to topics of their own.
payments_routed = (
    Pipeline()
    .filter(lambda v: v["amount"] > 0)
    .map(lambda v: {**v, "cents": round(v["amount"] * 100)})
    .route(_destination)
)
