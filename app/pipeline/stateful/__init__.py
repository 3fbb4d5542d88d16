"""Stateful steps: dedupe, count, sum and event-time windows over per-partition state.

Steps live here, in the pipeline room; what they read and write (stores, caches, changelogs,
recovery) lives in :mod:`app.state`, which they reach only through
:class:`app.state.access.StateAccess`.
"""

from app.pipeline.stateful.aggregates import Aggregate, Combined
from app.pipeline.stateful.keyed import Count, Dedupe, Sum
from app.pipeline.stateful.kit import RowFn
from app.pipeline.stateful.windows import Window, window

__all__ = ["Aggregate", "Combined", "Count", "Dedupe", "RowFn", "Sum", "Window", "window"]
