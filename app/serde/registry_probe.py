"""Is the Schema Registry there? One cheap request (``GET /subjects``), asked at start-up
(refused credentials or no registry API stop the bridge, exit 2; an unreachable registry is
waited for up to ``startup_timeout``, then exit 3) and while the engine waits out an outage
(:mod:`app.engine.outage`)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from confluent_kafka.schema_registry import SchemaRegistryClient, SchemaRegistryError

from app.serde.registry import (
    RegistryConfigError,
    RegistrySettings,
    RegistryUnavailable,
    is_registry_error,
    registry_failure,
)

log = logging.getLogger(__name__)
_RETRY_S = 1.0  # between the start-up probes of an unreachable registry


class RegistryProbe:
    """Asks one registry for its subjects (an answer at all is what counts).

    Args:
        registry: its settings (the URL named in messages, without credentials).
        client: the client the codecs share.
    """

    def __init__(
        self,
        registry: RegistrySettings,
        client: SchemaRegistryClient,
        setting: str = "schema_registry",
    ) -> None:
        self.registry, self.setting = registry, setting
        self._client = client

    @property
    def url(self) -> str:
        return self.registry.safe_url

    @property
    def _where(self) -> str:
        return f"{self.setting}.url (BRIDGE_{self.setting.upper()}__URL"

    def check(self) -> None:
        """Return when the registry answers.

        Raises:
            RegistryUnavailable: unreachable, timed out, or 408/429/5xx.
            RegistryConfigError: credentials refused (401/403), or not a registry API (404).
        """
        try:
            self._client.get_subjects()
        except Exception as exc:
            if isinstance(exc, SchemaRegistryError) and exc.http_status_code == 404:
                raise RegistryConfigError(
                    f"schema registry {self.url} answers 404 to GET /subjects: not a Schema "
                    f"Registry API; check {self._where}; "
                    f"Apicurio's ends in /apis/ccompat/v7)"
                ) from exc
            if is_registry_error(exc):
                raise registry_failure(exc, self.url, None) from exc
            raise

    def check_at_start(self, deadline: float, clock: Callable[[], float] = time.monotonic) -> None:
        """:meth:`check` until it answers, as a broker outage is waited out at start.

        Args:
            deadline: ``clock()`` value (``startup_timeout`` from now) after which to give up.

        Raises:
            RegistryUnavailable: still unreachable at ``deadline`` (exit 3: the restart tries
                again, and ``supervise`` restarts it).
            RegistryConfigError: the registry refuses (credentials, not a registry API).
        """
        said = False
        while True:
            try:
                self.check()
                return
            except RegistryUnavailable as exc:
                if clock() + _RETRY_S > deadline:
                    raise RegistryUnavailable(
                        f"{exc}; still unreachable at startup_timeout; check {self._where})"
                    ) from exc
                if not said:
                    log.warning("%s; waiting up to startup_timeout for it", exc)
                    said = True
            time.sleep(_RETRY_S)


class RegistryProbes:
    """Several registries (source and target) asked in turn: answers only if all answer."""

    def __init__(self, *probes: RegistryProbe) -> None:
        self.probes = probes

    def check(self) -> None:
        for probe in self.probes:
            probe.check()

    def check_at_start(self, deadline: float) -> None:
        for probe in self.probes:
            probe.check_at_start(deadline)
