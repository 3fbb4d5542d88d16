"""Why the bridge cannot start, as one line and an exit code: what :func:`app.engine.start.build`
raised, said alike by ``run`` (logged) and ``check-config`` (printed), so that both give the
same first error line for the same mistake."""

from __future__ import annotations

from dataclasses import dataclass

from confluent_kafka import KafkaError, KafkaException

from app.config import BridgeSettings
from app.errors import ConfigError, KafkaFatalError
from app.kafka.errors import describe
from app.serde.registry_settings import RegistryUnavailable

EXIT_CONFIG, EXIT_FATAL = 2, 3
# ``run`` only: exit 3 is restarted (supervise, Kubernetes); check-config does not restart.
RESTARTED = "; exiting so Kubernetes restarts the instance"


@dataclass(slots=True, frozen=True)
class Refusal:
    """One start-up refusal.

    Attributes:
        line: what is wrong, the same for ``run`` and ``check-config``.
        code: ``run``'s exit code (2: a setting; 3: the restart may recover).
    """

    line: str
    code: int

    def for_run(self) -> str:
        """The line ``run`` logs: with exit 3, that the restart tries again."""
        return self.line + (RESTARTED if self.code == EXIT_FATAL else "")


def refusal(exc: BaseException, settings: BridgeSettings) -> Refusal | None:
    """The refusal that ``exc``, raised by the start-up checks or the build, means; None: not a
    start-up refusal (raised on)."""
    if isinstance(exc, ConfigError):
        return Refusal(str(exc), EXIT_CONFIG)
    if isinstance(exc, KafkaFatalError):
        return Refusal(f"cannot start: {exc}", EXIT_FATAL)
    if isinstance(exc, KafkaException):  # a start-up request a faulty cluster refused unmapped
        if invalid_arg(exc):  # librdkafka refused a client's configuration: no restart helps
            said = f"cannot start: librdkafka refuses the client settings: {describe(exc)}"
            return Refusal(said, EXIT_CONFIG)
        return Refusal(f"cannot start: {describe(exc)}", EXIT_FATAL)
    if isinstance(exc, RegistryUnavailable):  # still unreachable at startup_timeout
        return Refusal(f"cannot start: {exc}", EXIT_FATAL)
    if isinstance(exc, TimeoutError):  # an admin request the broker never answered (busy)
        why = f" ({exc})" if str(exc) else ""
        said = (
            "cannot start: Kafka did not answer a start-up request within "
            f"startup_timeout={settings.startup_timeout:.0f}s{why}"
        )
        return Refusal(said, EXIT_FATAL)
    return None


def invalid_arg(exc: KafkaException) -> bool:
    """Client creation refused its configuration (``_INVALID_ARG``): the user's settings
    together with the bridge's (each user key alone was checked: app.kafka.probe)."""
    err = exc.args[0] if exc.args else None
    return isinstance(err, KafkaError) and err.code() == KafkaError._INVALID_ARG
