"""Per-key state: RocksDB stores per (store, input partition), write-behind caches, changelog
recovery, and the stateful pipeline steps. The processing loop sees only :class:`StateBackend`.
"""

from app.state.backend import NoState, StateBackend
from app.state.factory import make_backend, reset_state

__all__ = ["NoState", "StateBackend", "make_backend", "reset_state"]
