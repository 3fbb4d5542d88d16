"""Per-key state: RocksDB stores per (store, input partition), write-behind caches, changelog
recovery, and the stateful pipeline steps. The processing loop sees only :class:`StateBackend`.
"""

from app.state.backend import NoState, StateBackend

__all__ = ["NoState", "StateBackend"]
