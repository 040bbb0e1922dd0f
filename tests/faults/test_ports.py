"""Ports picked for one stack never collide: the kernel may hand the same free port to two
binds in a row, and a stack picks all its ports before any process binds one. A CI run once
gave the math API and the gateway the same port; math exited with "address already in use"
and its readiness check was answered by the gateway."""

from __future__ import annotations

import socket

from tribunal.testing.stack import free_port


def test_free_port_never_repeats_and_is_bindable() -> None:
    # 2,000 draws from the ~28,000 ephemeral ports repeat ~70 times by chance alone.
    ports = [free_port() for _ in range(2000)]
    assert len(set(ports)) == len(ports)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", ports[-1]))
