"""A TCP port free on this machine: one the system hands out on bind, closed again at once, so
the server started next (PostgreSQL, a chat endpoint, an S3-compatible server) can listen there,
or a test can point a client at a port nothing answers on."""

from __future__ import annotations

import socket


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])
