"""Stateful pipeline steps (dedupe, count, sum, windows). Registered into the spec compiler
by import; built on :class:`app.pipeline.steps.StateAccess`. Work in progress (issue 4)."""
