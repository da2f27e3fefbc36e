"""A TCP relay between the services and PostgreSQL that the checker can break: `cut` closes every
connection through it at once (a network that drops them), `stall` holds every byte for a while
(a network that goes silent), `heal` lets them flow again. Threads, standard library only."""

from __future__ import annotations

import contextlib
import socket
import threading
from dataclasses import dataclass, field


@dataclass
class Relay:
    """One connection through the proxy: the client's side and the server's."""

    client: socket.socket
    server: socket.socket

    def close(self) -> None:
        for side in (self.client, self.server):
            with contextlib.suppress(OSError):
                side.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                side.close()


@dataclass
class Proxy:
    """Listens on a free loopback port and relays each connection to `target_port`."""

    target_port: int
    port: int = 0
    _listener: socket.socket = field(init=False)
    _relays: list[Relay] = field(default_factory=list, init=False)
    _flowing: threading.Event = field(default_factory=threading.Event, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)
    _closed: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        self._flowing.set()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self, real_url: str) -> str:
        """`real_url` (a postgresql:// URL of the target) pointed at the proxy instead."""
        return real_url.replace(f":{self.target_port}/", f":{self.port}/")

    def cut(self) -> int:
        """Close every connection through the proxy now; how many there were."""
        with self._lock:
            relays, self._relays = self._relays, []
        for relay in relays:
            relay.close()
        return len(relays)

    def stall(self) -> None:
        """Hold every byte, both ways, until `heal`."""
        self._flowing.clear()

    def heal(self) -> None:
        self._flowing.set()

    def close(self) -> None:
        self._closed = True
        self.heal()
        with contextlib.suppress(OSError):
            self._listener.close()
        self.cut()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(("127.0.0.1", self.target_port), timeout=5)
            except OSError:
                client.close()  # the database is down: the client sees its connection refused
                continue
            server.settimeout(None)
            relay = Relay(client, server)
            with self._lock:
                self._relays.append(relay)
            for source, sink in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(relay, source, sink), daemon=True).start()

    def _pump(self, relay: Relay, source: socket.socket, sink: socket.socket) -> None:
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                self._flowing.wait()
                sink.sendall(data)
        except OSError:
            pass
        relay.close()
        with self._lock:
            if relay in self._relays:
                self._relays.remove(relay)
