"""A Python pipeline for the README: ``--pipeline payments_pipeline:pipeline``.

Run with this directory on ``PYTHONPATH`` (``PYTHONPATH=examples/pipelines``), or install it
as a package into the image (``examples/custom-image/``).
"""

from app.pipeline import Pipeline, Record


def enrich(record: Record) -> dict[str, object]:
    """The value plus where it came from: ``record=True`` functions see the whole record."""
    return {
        **record.value,
        "cents": round(record.value["amount"] * 100),
        "source": f"{record.topic}/{record.partition}@{record.offset}",
        "key": record.key.decode() if record.key else None,
        "ts": record.timestamp,
    }


pipeline = (
    Pipeline()
    .filter(lambda v: v["kind"] != "refund")
    .map(enrich, record=True)
    .key_by(lambda v: v["user"])
)
