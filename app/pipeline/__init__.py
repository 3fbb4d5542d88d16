"""Pipelines: what the bridge does to each record, as a chain of batch steps.

Build one in Python (:class:`Pipeline`, loaded with ``--pipeline module:attr``) or declare it in
YAML (:func:`app.pipeline.spec.compile_spec`); both produce the same steps.
"""

from app.pipeline.builder import Pipeline, load_pipeline
from app.pipeline.record import Row
from app.pipeline.record_steps import Record
from app.pipeline.steps import Step, StepContext

__all__ = ["Pipeline", "Record", "Row", "Step", "StepContext", "load_pipeline"]
