"""How the composition makes its Kafka clients: one seam, so that the unit tests build a whole
bridge from fakes without a client (httpx's transport seam)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient


@dataclass(slots=True, frozen=True)
class Clients:
    """A maker per kind of client, each called with the client's settings."""

    consumer: Callable[[dict[str, Any]], Any]
    producer: Callable[[dict[str, Any]], Any]
    admin: Callable[[dict[str, Any]], Any]


def _consumer(conf: dict[str, Any]) -> Consumer:
    return Consumer(conf)


def _producer(conf: dict[str, Any]) -> Producer:
    return Producer(conf)


def _admin(conf: dict[str, Any]) -> AdminClient:
    return AdminClient(conf)


KAFKA = Clients(consumer=_consumer, producer=_producer, admin=_admin)  # the real clients
