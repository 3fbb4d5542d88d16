"""The objects behind the ``registry`` fixtures: a real local Schema Registry per session."""

from __future__ import annotations

import uuid
from pathlib import Path

from confluent_kafka.schema_registry import SchemaRegistryClient

from app.serde.registry import RegistrySettings
from devkit.registry import LocalRegistry


class RegistryFixture:
    """One running registry (BACKWARD compatibility) and unique names for subjects/topics.

    Args:
        url: its Confluent-compatible API.
        server: the local registry behind it (None for an external one).
    """

    def __init__(self, url: str, server: LocalRegistry | None = None) -> None:
        self.url = url
        self.server = server

    def stop(self) -> None:
        """Stop the local registry (an external one is left alone)."""
        if self.server is not None:
            self.server.stop()

    def settings(self, **extra: object) -> RegistrySettings:
        """Bridge settings that reach this registry."""
        return RegistrySettings.model_validate({"url": self.url, **extra})

    def client(self) -> SchemaRegistryClient:
        """A plain confluent-kafka client (the test's own, independent of the codecs)."""
        return SchemaRegistryClient({"url": self.url})

    def unique(self, prefix: str) -> str:
        return f"{prefix}-{uuid.uuid4().hex[:10]}"


def start_registry(directory: Path, compatibility: str = "BACKWARD") -> RegistryFixture:
    """Start a registry in ``directory`` on a free port; the caller calls ``stop()``."""
    server = LocalRegistry(directory)
    server.start()
    try:
        server.set_compatibility(compatibility)
    except Exception:
        server.stop()
        raise
    return RegistryFixture(server.url, server)
