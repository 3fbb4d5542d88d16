"""A real local Schema Registry for the tests, the docs and ``python -m devkit.registry``.

Apicurio Registry 2.4.2 (Confluent-compatible API at ``/apis/ccompat/v7``, in-memory storage),
built from Maven Central by :mod:`devkit.registry.build` and run by
:class:`devkit.registry.server.LocalRegistry` on a free loopback port. Dev-only: the service
never imports it.
"""

from devkit.registry.build import EnvironmentProblem, ensure_registry_app
from devkit.registry.server import LocalRegistry, LocalRegistryError

__all__ = ["EnvironmentProblem", "LocalRegistry", "LocalRegistryError", "ensure_registry_app"]
