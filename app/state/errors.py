"""Where the state room calls into :mod:`changelog`: its errors become the bridge's."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from app.errors import ConfigError, RecoveryError
from changelog.errors import ChangelogConfigError, ChangelogReadError


@contextmanager
def changelog_errors() -> Iterator[None]:
    """A changelog name or topic the bridge cannot use is a configuration mistake (exit 2); a
    changelog that cannot be restored from is a recovery failure (exit 3)."""
    try:
        yield
    except ChangelogConfigError as exc:
        raise ConfigError(str(exc)) from None
    except ChangelogReadError as exc:
        raise RecoveryError(str(exc)) from exc
