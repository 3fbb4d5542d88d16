"""Is the Schema Registry there? One cheap request (``GET /subjects``), asked at start-up
(a wrong URL or refused credentials stop the bridge, exit 2) and while the engine waits out an
outage (:mod:`app.engine.outage`)."""

from __future__ import annotations

from confluent_kafka.schema_registry import SchemaRegistryClient, SchemaRegistryError

from app.serde.registry import (
    RegistryConfigError,
    RegistrySettings,
    RegistryUnavailable,
    is_registry_error,
    registry_failure,
)


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

    def check_at_start(self) -> None:
        """:meth:`check`, with an unreachable registry said as a setting to check.

        Raises:
            RegistryConfigError: the registry does not answer, or refuses.
        """
        try:
            self.check()
        except RegistryUnavailable as exc:
            raise RegistryConfigError(f"{exc}; check {self._where})") from exc


class RegistryProbes:
    """Several registries (source and target) asked in turn: answers only if all answer."""

    def __init__(self, *probes: RegistryProbe) -> None:
        self.probes = probes

    def check(self) -> None:
        for probe in self.probes:
            probe.check()

    def check_at_start(self) -> None:
        for probe in self.probes:
            probe.check_at_start()
