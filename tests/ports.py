"""A free TCP port for a test's server, chosen outside the kernel's ephemeral range.

``bind(("127.0.0.1", 0))`` then close hands back a port from the ephemeral range, the very range every outgoing
connection of the other test worker (S3 requests, HTTP clients, Chromium) takes its local port from; in the seconds
before the test's server binds it, one of those connections may take it ("Address already in use"). A random port
below that range is never handed to a client; it is checked free by binding it before it is returned."""

from __future__ import annotations

import random
import socket
from pathlib import Path


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def free_port() -> int:
    """A port on 127.0.0.1 free now, from [10000, the ephemeral range's start) when that range leaves room."""
    low, high = 10000, _ephemeral_low()
    for _ in range(100) if high - low >= 1000 else ():
        port = random.randrange(low, high)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as s:  # no room below the ephemeral range: the kernel's choice
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
