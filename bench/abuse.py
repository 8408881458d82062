#!/usr/bin/env python3
"""Abuse: the HTTP server under the careless and hostile clients of issue 18, with figures.

    python bench/abuse.py [--posts N] [--idle N] [--requests N]

Spawns the real server (`--http 127.0.0.1:0` with a token, no upstream needed) and runs:

- sse: a client opens /sse and never reads it, then POSTs N (8,000) tools/list to its
  endpoint. The server's resident memory (/proc/<pid>/status VmRSS) may grow by at most the
  stream's limit (server.http.sse_outbox_bytes) plus 8 MiB of allocator slack, the posts past
  the limit get 429, and the stream, left full, is closed after server.http.sse_stall_s.
- idle: N (300) connections are opened and send nothing, past server.http.max_connections
  (256); then M (40) authenticated requests come from four clients at once while the attacker
  keeps opening more idle connections (up to 1,000). Every request must be served, and the idle
  connections must hold no thread (Threads within 2 of the baseline).

Prints one line of figures per scenario; exit status 1 if a bound is passed. About 10 s.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "abuse-token-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
OUTBOX = 262144  # server.http.sse_outbox_bytes for this run
INIT = {
    "protocolVersion": "2024-11-05",
    "capabilities": {},
    "clientInfo": {"name": "abuse", "version": "0"},
}


def status_of(pid: int) -> dict:
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        fields = dict(line.split(":", 1) for line in status if ":" in line)
    return {"rss_kib": int(fields["VmRSS"].split()[0]), "threads": int(fields["Threads"])}


def settled(pid: int) -> dict:
    """The figures once openai's background import is over: pydantic is mapped and VmRSS has
    stopped moving."""
    deadline = time.monotonic() + 60
    while "pydantic_core" not in Path(f"/proc/{pid}/maps").read_text():
        if time.monotonic() > deadline:
            raise SystemExit("abuse: openai was not imported within 60 s")
        time.sleep(0.1)
    last = status_of(pid)
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now = status_of(pid)
        if abs(now["rss_kib"] - last["rss_kib"]) < 256:
            return now
        last = now
    raise SystemExit(f"abuse: VmRSS never settled: {last}")


def start(workdir: str) -> tuple[subprocess.Popen, int]:
    config = Path(workdir, "config.yaml")
    config.write_text(
        "server:\n  http:\n"
        f"    sse_outbox_bytes: {OUTBOX}\n    sse_stall_s: 2\n    request_line_timeout_s: 60\n"
        f"state:\n  path: {workdir}/state.db\n",
        encoding="utf-8",
    )
    env = {
        **os.environ,
        "MCP_HTTP_TOKEN": TOKEN,
        "OPENAI_API_KEY": "sk-abuse-not-used",
        "HOME": workdir,
    }
    args = [sys.executable, str(ROOT / "openai_responses_mcp.py"), "--http", "127.0.0.1:0"]
    proc = subprocess.Popen(
        [*args, "--config", str(config)], stderr=subprocess.PIPE, env=env, cwd=workdir
    )
    line = proc.stderr.readline().decode()
    match = re.search(r"serving MCP on http://127\.0\.0\.1:(\d+)/mcp", line)
    if match is None:
        proc.kill()
        raise SystemExit(f"abuse: the server did not start: {line}{proc.stderr.read().decode()}")
    threading.Thread(target=proc.stderr.read, daemon=True).start()  # keep its pipe drained
    return proc, int(match[1])


def unread_sse(port: int) -> tuple[socket.socket, str]:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.settimeout(10)
    sock.connect(("127.0.0.1", port))
    sock.sendall(
        b"GET /sse HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n"
        b"Authorization: Bearer " + TOKEN.encode() + b"\r\n\r\n"
    )
    data = b""
    while not re.search(rb"sessionId=[\w-]+\r?\n", data):
        chunk = sock.recv(4096)
        if not chunk:
            raise SystemExit(f"abuse: /sse closed: {data!r}")
        data += chunk
    return sock, "/messages?sessionId=" + re.search(rb"sessionId=([\w-]+)", data)[1].decode()


def sse(proc: subprocess.Popen, port: int, posts: int) -> list[str]:
    sock, endpoint = unread_sse(port)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    headers = {"Content-Type": "application/json", **AUTH}

    def send(message: dict) -> int:
        conn.request("POST", endpoint, json.dumps(message), headers)
        reply = conn.getresponse()
        reply.read()
        return reply.status

    send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": INIT})
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    before = settled(proc.pid)  # initialize imports openai in the background: not measured
    started = time.monotonic()
    statuses = [send({"jsonrpc": "2.0", "id": n, "method": "tools/list"}) for n in range(posts)]
    after = status_of(proc.pid)
    grown = after["rss_kib"] - before["rss_kib"]
    deadline = time.monotonic() + 20
    while (
        time.monotonic() < deadline and send({"jsonrpc": "2.0", "id": -1, "method": "ping"}) != 404
    ):
        time.sleep(0.2)
    ended = send({"jsonrpc": "2.0", "id": -1, "method": "ping"}) == 404
    conn.close()
    sock.close()
    print(
        f"sse: {posts} posts in {time.monotonic() - started:.1f} s: "
        f"{statuses.count(202)} accepted, {statuses.count(429)} refused (429), "
        f"{statuses.count(404)} after the stall; VmRSS {before['rss_kib']} -> "
        f"{after['rss_kib']} KiB (+{grown}); stalled stream ended: {ended}"
    )
    bound = OUTBOX // 1024 + 8192
    failures = []
    if grown > bound:
        failures.append(f"sse: memory grew {grown} KiB, past the bound of {bound} KiB")
    # Refused past the limit (429), or, on a machine slow enough that the posts outlast
    # sse_stall_s, refused because the stalled session has ended (404): never queued.
    if not statuses.count(429) or statuses.count(429) + statuses.count(404) < posts // 2:
        failures.append("sse: fewer than half the posts were refused past the outbox limit")
    if not ended:
        failures.append("sse: the full, unread stream was not ended after sse_stall_s")
    return failures


def idle(proc: subprocess.Popen, port: int, connections: int, requests: int) -> list[str]:
    def ask(_) -> int:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
        try:
            conn.request("GET", "/usage", headers=AUTH)
            return conn.getresponse().status
        except OSError:
            return 0
        finally:
            conn.close()

    ask(0)
    before = status_of(proc.pid)
    held = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(connections)]
    time.sleep(0.5)
    during = status_of(proc.pid)
    done = threading.Event()

    def churn() -> None:  # the attacker goes on opening connections that send nothing
        for _ in range(1000):
            if done.is_set():
                return
            try:
                held.append(socket.create_connection(("127.0.0.1", port), timeout=10))
            except OSError:
                time.sleep(0.01)

    attacker = threading.Thread(target=churn, daemon=True)
    started = time.monotonic()
    attacker.start()
    with ThreadPoolExecutor(4) as pool:
        statuses = list(pool.map(ask, range(requests)))
    took = time.monotonic() - started
    done.set()
    attacker.join(10)
    for sock in held:
        sock.close()
    served = sum(status == 200 for status in statuses)
    print(
        f"idle: {connections} idle connections held, {len(held) - connections} more opened "
        f"meanwhile; {served}/{requests} authenticated "
        f"requests served in {took:.1f} s; threads {before['threads']} -> {during['threads']}"
    )
    failures = []
    if served < requests:
        failures.append(f"idle: only {served} of {requests} authenticated requests were served")
    if during["threads"] > before["threads"] + 2:
        failures.append(f"idle: {during['threads'] - before['threads']} threads for idle sockets")
    return failures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--posts", type=int, default=8000)
    parser.add_argument("--idle", type=int, default=300)
    parser.add_argument("--requests", type=int, default=40)
    args = parser.parse_args(argv)
    if not os.path.isdir("/proc/self"):
        print("abuse: skipped: it reads /proc/<pid>/status (Linux)")
        return 0
    with tempfile.TemporaryDirectory(prefix="abuse-") as workdir:
        proc, port = start(workdir)
        try:
            failures = sse(proc, port, args.posts) + idle(proc, port, args.idle, args.requests)
        finally:
            proc.kill()
            proc.wait(10)
    for failure in failures:
        print(f"FAIL {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
