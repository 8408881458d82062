"""A TCP proxy between the server and a real PostgreSQL that can misbehave on demand, for the
state layer's fault tests:

- hold(): stops forwarding bytes either way, connections left open: what a network partition
  or a frozen VM looks like from both ends (the kernel still takes the bytes; nobody answers).
- cut_after(marker): forwards the first client statement that holds `marker`, then drops the
  client's side of that connection and stops forwarding, leaving the database's side open and
  silent: an instance cut off just after it sent that statement (the database sees no close).

Each forwarding direction is one thread; a held direction reads nothing, so unread bytes stay
in the kernel's buffers, as on a dead link."""

from __future__ import annotations

import select
import socket
import threading
import time
from urllib.parse import urlsplit, urlunsplit


class FaultProxy:
    def __init__(self, target_port: int, target_host: str = "127.0.0.1"):
        self._target = (target_host, target_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._held = threading.Event()
        self._cut_marker: bytes | None = None
        self._closed = False
        self._sockets: list = []
        self.cuts = 0  # connections cut by cut_after()
        threading.Thread(target=self._accept, name="fault-proxy", daemon=True).start()

    def url(self, url: str) -> str:
        """`url` with its host and port replaced by the proxy's."""
        parts = urlsplit(url)
        userinfo = parts.netloc.rpartition("@")[0]
        netloc = f"{userinfo}@127.0.0.1:{self.port}" if userinfo else f"127.0.0.1:{self.port}"
        return urlunsplit(parts._replace(netloc=netloc))

    def hold(self) -> None:
        self._held.set()

    def release(self) -> None:
        self._held.clear()

    def cut_after(self, marker: bytes) -> None:
        """The next client statement holding `marker` is forwarded, then its connection cut."""
        with self._lock:
            self._cut_marker = marker

    def close(self) -> None:
        self._closed = True
        with self._lock:
            sockets, self._sockets = self._sockets, []
        for sock in [self._listener, *sockets]:
            try:
                sock.close()
            except OSError:
                pass

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self._target, timeout=5)
            except OSError:
                client.close()
                continue
            server.settimeout(None)
            with self._lock:
                self._sockets += [client, server]
            link = {"cut": False}
            for source, sink, upstream in ((client, server, True), (server, client, False)):
                threading.Thread(
                    target=self._pump, args=(source, sink, upstream, link), daemon=True
                ).start()

    def _pump(self, source, sink, upstream: bool, link: dict) -> None:
        while not self._closed and not link["cut"]:
            if self._held.is_set():
                time.sleep(0.05)  # sleep: the proxy's own pause while the link is held
                continue
            try:
                ready, _, _ = select.select([source], [], [], 0.05)
                if not ready or self._held.is_set() or link["cut"]:
                    continue
                data = source.recv(65536)
                if not data:
                    break
                sink.sendall(data)
            except OSError:
                break
            if upstream and self._cut_marker is not None and self._cut_marker in data:
                with self._lock:
                    self._cut_marker = None
                    self.cuts += 1
                link["cut"] = True
                try:  # the client sees its link go; the database sees nothing at all
                    source.shutdown(socket.SHUT_RDWR)
                    source.close()
                except OSError:
                    pass
                return
        if not link["cut"]:  # an ordinary close: pass it on
            for sock in (source, sink):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
