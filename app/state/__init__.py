"""Per-key state: RocksDB stores per (store, input partition), write-behind caches, changelog
recovery. The processing loop sees only :class:`StateBackend`; stateful steps (in
:mod:`app.pipeline.stateful`) see only :class:`app.state.access.StateAccess`.
"""

from app.state.backend import NoState, StateBackend
from app.state.factory import StateConfig, make_backend, reset_state

__all__ = ["NoState", "StateBackend", "StateConfig", "make_backend", "reset_state"]
