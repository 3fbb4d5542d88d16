"""devkit's port picker: distinct free ports, outside the kernel's ephemeral range."""

from __future__ import annotations

import socket

from devkit.kafka.cluster import _ephemeral_low, free_ports


def test_ports_are_distinct_bindable_and_below_the_ephemeral_range() -> None:
    ports = free_ports(50)
    assert len(set(ports)) == 50
    assert all(20000 <= p < _ephemeral_low() for p in ports)
    for port in ports[:5]:
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))  # free right after being handed out


def test_a_port_in_use_is_never_handed_out() -> None:
    """Hold every port of a small slice busy; the picker must draw around them."""
    held = []
    try:
        for port in range(20000, 20200):
            s = socket.socket()
            try:
                s.bind(("127.0.0.1", port))
                s.listen()
                held.append(s)
            except OSError:
                s.close()
        busy = {s.getsockname()[1] for s in held}
        assert not busy & set(free_ports(200))
    finally:
        for s in held:
            s.close()
