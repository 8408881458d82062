"""Raw HTTP helpers for tests/test_http.py: start `--http` servers, send requests, read SSE."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import re
import socket
import time
from dataclasses import dataclass, field

from waiting import wait_until

LISTENING = re.compile(r"serving MCP on http://(?:127\.0\.0\.1|0\.0\.0\.0|\[::\]):(\d+)/mcp")
ACCEPT_BOTH = "application/json, text/event-stream"
INIT_PARAMS = {
    "protocolVersion": "2025-06-18",
    "capabilities": {},
    "clientInfo": {"name": "pytest", "version": "0"},
}


def wait_listening(server, timeout: float = 10.0) -> int:
    """The port a spawned `--http 127.0.0.1:0` (or 0.0.0.0:0) server printed on stderr."""

    def port() -> int | None:
        match = LISTENING.search(server.stderr)
        if match:
            return int(match.group(1))
        if server.proc.poll() is not None:
            raise AssertionError(f"server exited {server.proc.returncode}:\n{server.stderr}")
        return None

    return wait_until(port, timeout, lambda: f"the server to listen:\n{server.stderr}")


@dataclass
class Response:
    status: int
    headers: dict  # lower-case names
    body: bytes

    def json(self):
        return json.loads(self.body)

    def events(self) -> list[tuple[str, dict]]:
        """(event name, JSON data) of each SSE event in a complete text/event-stream body."""
        return [(name, json.loads(data)) for name, data in parse_events(self.body)]


def parse_events(data: bytes) -> list[tuple[str, str]]:
    events = []
    for block in data.decode().replace("\r\n", "\n").split("\n\n"):
        name, lines = "message", []
        for line in block.split("\n"):
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                lines.append(line[5:].lstrip())
        if lines:
            events.append((name, "\n".join(lines)))
    return events


def request(port, method, path, body=None, headers=None, timeout=10.0) -> Response:
    """One request on a fresh connection; `body` may be a dict (sent as JSON) or bytes."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        data = json.dumps(body).encode() if isinstance(body, (dict, list)) else body
        conn.request(method, path, body=data, headers=headers or {})
        response = conn.getresponse()
        payload = response.read()
        return Response(response.status, {k.lower(): v for k, v in response.getheaders()}, payload)
    finally:
        conn.close()


def post(port, message, session=None, headers=None, path="/mcp", **kw) -> Response:
    """POST a JSON-RPC message to /mcp the way MCP clients do."""
    sent = {"Content-Type": "application/json", "Accept": ACCEPT_BOTH}
    if session:
        sent["Mcp-Session-Id"] = session
        sent["MCP-Protocol-Version"] = "2025-06-18"
    sent.update(headers or {})
    sent = {k: v for k, v in sent.items() if v is not None}
    return request(port, "POST", path, message, sent, **kw)


def rpc(method, params=None, id=1) -> dict:
    message = {"jsonrpc": "2.0", "id": id, "method": method}
    if params is not None:
        message["params"] = params
    return message


def notification(method, params=None) -> dict:
    message = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    return message


def open_session(port, headers=None) -> str:
    """initialize + notifications/initialized; returns the Mcp-Session-Id."""
    reply = post(port, rpc("initialize", INIT_PARAMS), headers=headers)
    assert reply.status == 200, reply
    session = reply.headers["mcp-session-id"]
    assert post(port, notification("notifications/initialized"), session, headers).status == 202
    return session


def call_params(query="What is HTTP 404?", token=None) -> dict:
    params = {"name": "answer", "arguments": {"query": query}}
    if token is not None:
        params["_meta"] = {"progressToken": token}
    return params


@dataclass
class Stream:
    """A response read incrementally: an SSE stream (GET /sse, or a POST answered with SSE)."""

    conn: http.client.HTTPConnection
    response: http.client.HTTPResponse
    comments: list = field(default_factory=list)

    @property
    def status(self) -> int:
        return self.response.status

    def header(self, name: str) -> str | None:
        return self.response.getheader(name)

    def next_event(self, timeout: float = 10.0) -> tuple[str, str] | None:
        """The next (event, data), or None at the end of the stream."""
        self.conn.sock.settimeout(timeout)
        name, data = "message", []
        while True:
            line = self.response.readline()
            if not line:
                return None
            line = line.decode().rstrip("\r\n")
            if line.startswith(":"):
                self.comments.append(line)
            elif line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].lstrip())
            elif not line and data:
                return name, "\n".join(data)

    def next_message(self, timeout: float = 10.0) -> dict:
        event = self.next_event(timeout)
        assert event is not None, "stream ended"
        assert event[0] == "message", event
        return json.loads(event[1])

    def close(self) -> None:
        self.conn.close()


def open_stream(port, method, path, body=None, headers=None, timeout=10.0) -> Stream:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    data = json.dumps(body).encode() if isinstance(body, dict) else body
    conn.request(method, path, body=data, headers=headers or {})
    return Stream(conn, conn.getresponse())


def open_sse(port, headers=None) -> tuple[Stream, str]:
    """GET /sse; returns the stream and the endpoint it announced."""
    stream = open_stream(
        port, "GET", "/sse", headers={"Accept": "text/event-stream", **(headers or {})}
    )
    assert stream.status == 200, stream.response.read()
    event = stream.next_event()
    assert event is not None and event[0] == "endpoint", event
    return stream, event[1]


def raw_connection(port, timeout=10.0) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=timeout)


def read_until_closed(sock: socket.socket, timeout: float) -> bytes:
    """Everything the server sends until it closes the connection (bounded by `timeout`)."""
    sock.settimeout(timeout)
    data = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            chunk = sock.recv(65536)
        except (ConnectionResetError, TimeoutError):
            break
        if not chunk:
            break
        data += chunk
    return data


def proc_status(pid: int) -> dict:
    """Figures of a running process from /proc/<pid>/status: VmRSS (kB) and Threads."""
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        fields = dict(line.split(":", 1) for line in status if ":" in line)
    return {"VmRSS": int(fields["VmRSS"].split()[0]), "Threads": int(fields["Threads"])}


def sockets_of(pid: int) -> int:
    """How many sockets a running process holds open (from /proc/<pid>/fd): a connection
    counts once the process has accepted it."""
    count = 0
    for fd in os.scandir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):  # closed between the listing and the look
            count += os.readlink(fd.path).startswith("socket:")
    return count


def unread_sse(port) -> tuple[socket.socket, str]:
    """GET /sse on a socket with a small receive buffer that reads only up to the endpoint
    event, then nothing: a client that never reads its stream. Returns it and the endpoint."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connect: the window
    sock.settimeout(10)
    sock.connect(("127.0.0.1", port))
    sock.sendall(b"GET /sse HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n")
    data = b""
    while not re.search(rb"sessionId=[\w-]+\r?\n", data):
        chunk = sock.recv(4096)
        assert chunk, data
        data += chunk
    return sock, "/messages?sessionId=" + re.search(rb"sessionId=([\w-]+)", data)[1].decode()
