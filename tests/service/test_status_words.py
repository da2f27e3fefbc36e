"""`evertalk service status` in words a user reads: one other client is one client."""

from __future__ import annotations

from pathlib import Path

from evertalk.client.connection import connect
from service.test_service_socket import fake, home, run, service

__all__ = ["fake", "home", "service"]  # the fixtures, used by name


def test_status_counts_other_clients_in_words(home: Path, service: int) -> None:
    assert " 0 other clients; " in run(home, "service", "status").stdout
    with connect(home, "window"):
        said = run(home, "service", "status").stdout
    assert " 1 other client; " in said
