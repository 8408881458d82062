"""MCP over HTTP (`--http`): Streamable HTTP at /mcp, legacy HTTP+SSE at /sse, /healthz.

Every test talks to the real program over real sockets on 127.0.0.1: raw HTTP through
http.client (tests/http_client.py), and the official MCP Python SDK's clients.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import threading
import time
import types
from pathlib import Path

import anyio
import pytest
from conftest import run_cli, wait_until
from fake_upstream import Reply
from http_client import (
    ACCEPT_BOTH,
    INIT_PARAMS,
    call_params,
    notification,
    open_session,
    open_sse,
    open_stream,
    post,
    proc_status,
    raw_connection,
    read_until_closed,
    request,
    rpc,
    sockets_of,
    unread_sse,
    wait_listening,
)

TOKEN = "tok-0123456789abcdef-XYZ"
# Tests that measure the server's memory and threads read /proc/<pid>/status.
NEEDS_PROC = pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux /proc")
REQUEST_CANCELLED = -32800  # what the MCP SDKs' servers answer a cancelled request's POST with
SEARCH = {"query": "http 404", "sources": [{"type": "url", "url": "https://example.com/404"}]}


@pytest.fixture
def serve(spawn, fake):
    """Starts `--http 127.0.0.1:0 [args]` against the fake upstream; `.port` is set."""

    def start(*args: str, config: str | None = None, env: dict | None = None, cold=False):
        server = spawn(
            "--http", "127.0.0.1:0", *args, config=config, env=env, upstream=fake, cold=cold
        )
        server.port = wait_listening(server)
        return server

    return start


def http_config(**settings) -> str:
    lines = "".join(f"    {key}: {json.dumps(value)}\n" for key, value in settings.items())
    return f"server:\n  http:\n{lines}"


def in_background(fn, *args, **kwargs):
    """Runs fn in a thread; returns a function that joins it and gives its result."""
    box = {}

    def run():
        try:
            box["value"] = fn(*args, **kwargs)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the test's thread
            box["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()

    def result(timeout=15.0):
        thread.join(timeout)
        assert not thread.is_alive(), "background request did not finish"
        if "error" in box:
            raise box["error"]
        return box["value"]

    return result


def cancelled_reply(message: dict, request_id) -> dict:
    """Checks that `message` is the JSON-RPC error ending a cancelled request; returns it."""
    from mcp_types.jsonrpc import JSONRPCError

    JSONRPCError.model_validate(message)  # what an SDK client parses it as
    assert message["id"] == request_id
    assert message["error"]["code"] == REQUEST_CANCELLED, message
    return message


def healthz_status(port) -> int | None:
    """GET /healthz's status, or None if the connection was refused or closed unanswered."""
    try:
        return request(port, "GET", "/healthz", timeout=5).status
    except OSError:
        return None


# -- starting up -------------------------------------------------------------------------------


def test_prints_the_listening_url_and_serves_healthz(serve):
    server = serve()
    assert (
        f"serving MCP on http://127.0.0.1:{server.port}/mcp (legacy SSE at /sse)" in server.stderr
    )
    reply = request(server.port, "GET", "/healthz")
    assert reply.status == 200
    body = reply.json()
    assert body["status"] == "ok" and body["in_flight"] == 0 and body["sessions"] == 0
    assert body["version"]


@pytest.mark.parametrize(("key", "has_key"), [("sk-test-0123456789abcdef", True), ("", False)])
def test_healthz_says_whether_an_api_key_is_set_never_what_it_is(serve, key, has_key):
    server = serve(env={"OPENAI_API_KEY": key})
    reply = request(server.port, "GET", "/healthz")
    assert reply.status == 200
    assert reply.json()["api_key"] is has_key
    assert (key or "sk-") not in reply.body.decode()


def test_stdio_and_http_together_is_a_usage_error(tmp_path):
    result = run_cli(tmp_path, "--stdio", "--http", "0")
    assert result.returncode == 2
    assert "--http cannot be combined with --stdio" in result.stderr


def test_http_flags_need_http(tmp_path):
    result = run_cli(tmp_path, "--stdio", "--stateless")
    assert result.returncode == 2
    assert "--stateless goes with --http" in result.stderr


def test_a_bad_listen_address_is_a_usage_error(tmp_path):
    result = run_cli(tmp_path, "--http", "localhost:http")
    assert result.returncode == 2
    assert "--http takes [HOST:]PORT" in result.stderr


def test_a_non_loopback_address_without_a_token_is_refused(tmp_path):
    result = run_cli(tmp_path, "--http", "0.0.0.0:0", timeout=10)
    assert result.returncode == 2
    assert "refusing to serve on 0.0.0.0 without a token" in result.stderr
    assert "MCP_HTTP_TOKEN" in result.stderr and "--http-allow-insecure" in result.stderr


def test_a_short_token_is_refused(tmp_path):
    result = run_cli(tmp_path, "--http", "0", env={"MCP_HTTP_TOKEN": "tiny-tok"}, timeout=10)
    assert result.returncode == 2
    assert "server.http.token must be at least 16" in result.stderr
    assert "tiny-tok" not in result.stderr


def test_show_config_masks_the_token(tmp_path):
    result = run_cli(tmp_path, "--show-config", env={"MCP_HTTP_TOKEN": TOKEN})
    assert result.returncode == 0
    shown = json.loads(result.stderr)
    assert shown["config"]["server"]["http"]["token"] == "***"
    assert shown["sources"]["server.http.token"] == "env MCP_HTTP_TOKEN"
    assert TOKEN not in result.stderr


# -- Streamable HTTP: messages and status codes ------------------------------------------------


def test_initialize_returns_json_and_a_random_session_id(serve):
    server = serve()
    reply = post(server.port, rpc("initialize", INIT_PARAMS))
    assert reply.status == 200
    assert reply.headers["content-type"] == "application/json"
    assert reply.json()["result"]["protocolVersion"] == "2025-06-18"
    session = reply.headers["mcp-session-id"]
    assert len(session) >= 40 and session.isascii() and session.isprintable()
    other = post(server.port, rpc("initialize", INIT_PARAMS)).headers["mcp-session-id"]
    assert other != session


def test_notifications_and_responses_get_202_without_a_body(serve):
    server = serve()
    session = open_session(server.port)
    reply = post(server.port, notification("notifications/initialized"), session)
    assert (reply.status, reply.body) == (202, b"")
    reply = post(server.port, {"jsonrpc": "2.0", "id": 7, "result": {}}, session)
    assert (reply.status, reply.body) == (202, b"")


def test_a_request_in_a_session_is_answered_with_json(serve):
    server = serve()
    session = open_session(server.port)
    reply = post(server.port, rpc("tools/list", id="a"), session)
    assert reply.status == 200
    assert reply.json()["id"] == "a"
    assert [t["name"] for t in reply.json()["result"]["tools"]] == [
        "answer",
        "answer_detailed",
        "answer_quick",
    ]


def test_json_responses_leave_in_one_write_on_a_kept_alive_connection(serve):
    server = serve()
    session = open_session(server.port)
    ping = json.dumps(rpc("ping")).encode()
    head = (
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Accept: {ACCEPT_BOTH}\r\nMcp-Session-Id: {session}\r\n"
        f"Content-Length: {len(ping)}\r\n\r\n"
    ).encode()
    sock = raw_connection(server.port)
    for _ in range(10):
        sock.sendall(head + ping)
        # Headers and body written apart would arrive apart: the body held back by Nagle's
        # algorithm until our delayed ACK, ~40 ms later.
        first = sock.recv(65536)
        assert first.startswith(b"HTTP/1.1 200 ")
        assert first.endswith(b'"result":{}}'), first
    sock.close()


def test_json_rpc_errors_for_well_formed_requests_travel_with_200(serve):
    server = serve()
    session = open_session(server.port)
    reply = post(server.port, rpc("no/such/method", id=3), session)
    assert reply.status == 200
    assert reply.json()["error"]["code"] == -32601


def test_a_request_without_a_session_id_gets_400(serve):
    server = serve()
    open_session(server.port)
    reply = post(server.port, rpc("ping", id=5))
    assert reply.status == 400
    assert reply.json()["id"] == 5
    assert "missing Mcp-Session-Id" in reply.json()["error"]["message"]


def test_an_unknown_session_id_gets_404(serve):
    server = serve()
    reply = post(server.port, rpc("ping"), session="no-such-session")
    assert reply.status == 404
    assert "start a new one with initialize" in reply.json()["error"]["message"]


def test_delete_ends_the_session(serve):
    server = serve()
    session = open_session(server.port)
    headers = {"Mcp-Session-Id": session}
    assert request(server.port, "DELETE", "/mcp", headers=headers).status == 204
    assert post(server.port, rpc("ping"), session).status == 404
    assert request(server.port, "DELETE", "/mcp", headers=headers).status == 404


def test_delete_without_a_session_id_gets_400(serve):
    server = serve()
    assert request(server.port, "DELETE", "/mcp").status == 400


def test_get_mcp_is_405_because_there_are_no_server_initiated_messages(serve):
    server = serve()
    reply = request(server.port, "GET", "/mcp", headers={"Accept": "text/event-stream"})
    assert reply.status == 405
    assert reply.headers["allow"] == "POST, DELETE"
    assert "no server-initiated messages" in reply.json()["error"]


def test_an_unknown_path_is_404(serve):
    server = serve()
    reply = request(server.port, "GET", "/nope")
    assert reply.status == 404
    assert "/mcp" in reply.json()["error"]


def test_an_unsupported_protocol_version_header_gets_400(serve):
    server = serve()
    session = open_session(server.port)
    headers = {"MCP-Protocol-Version": "1999-01-01"}
    reply = post(server.port, rpc("ping", id=9), session, headers)
    assert reply.status == 400
    assert reply.json()["id"] == 9
    assert "unsupported MCP-Protocol-Version" in reply.json()["error"]["message"]
    for version in ("2025-03-26", "2025-11-25"):
        headers = {"MCP-Protocol-Version": version}
        assert post(server.port, rpc("ping"), session, headers).status == 200


def test_with_protocol_eras_handshake_the_discover_probe_gets_400_so_clients_fall_back(serve):
    server = serve(env={"MCP_PROTOCOL_ERAS": "handshake"})
    headers = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "server/discover"}
    reply = post(server.port, rpc("server/discover", {}), headers=headers)
    assert reply.status == 400
    assert reply.json()["error"]["code"] == -32000


def test_a_non_json_content_type_gets_415(serve):
    server = serve()
    reply = post(server.port, b"ping", headers={"Content-Type": "text/plain"})
    assert reply.status == 415
    assert "application/json" in reply.json()["error"]


@pytest.mark.parametrize("accept", ["*/*", None, "application/json"])
def test_accept_any_missing_or_json_only_is_answered_with_json(serve, accept):
    server = serve()
    reply = post(server.port, rpc("initialize", INIT_PARAMS), headers={"Accept": accept})
    assert reply.status == 200
    assert reply.headers["content-type"] == "application/json"


def test_an_accept_without_json_or_sse_gets_406(serve):
    server = serve()
    reply = post(server.port, rpc("initialize", INIT_PARAMS), headers={"Accept": "text/html"})
    assert reply.status == 406
    assert reply.json()["error"]["message"].startswith("Accept must include application/json")


def test_malformed_json_gets_400_with_a_parse_error(serve):
    server = serve()
    reply = post(server.port, b'{"jsonrpc": "2.0", "id": 1,')
    assert reply.status == 400
    assert reply.json()["id"] is None
    assert reply.json()["error"]["code"] == -32700


def test_a_batch_gets_400(serve):
    server = serve()
    reply = post(server.port, [rpc("ping", id=1), rpc("ping", id=2)])
    assert reply.status == 400
    assert "batches" in reply.json()["error"]["message"]


def test_a_body_over_the_limit_gets_413(serve):
    server = serve(config=http_config(max_body_bytes=1024))
    big = rpc("ping", {"pad": "x" * 2000})
    reply = post(server.port, big)
    assert reply.status == 413
    assert reply.headers["connection"] == "close"
    assert "exceeds the 1024-byte limit (server.http.max_body_bytes)" in reply.json()["error"]


def test_an_oversized_body_is_refused_before_it_is_read(serve):
    server = serve(config=http_config(header_timeout_s=30))
    sock = raw_connection(server.port)
    sock.sendall(  # 2 MB announced, none sent: the answer must not wait for it
        b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Content-Length: 2000000\r\n\r\n{"
    )
    data = read_until_closed(sock, 10)
    assert data.startswith(b"HTTP/1.1 413 ")
    assert b"exceeds the 1048576-byte limit (server.http.max_body_bytes)" in data


def test_a_body_costly_to_parse_is_refused_unparsed(serve):
    server = serve()
    session = open_session(server.port)
    padded = rpc("ping", {"pad": [{}] * 60_000}, id=4)  # 360 KB, ~4 MB once parsed
    reply = post(server.port, padded, session)
    assert reply.status == 400
    assert reply.json()["error"]["code"] == -32600
    assert "more than the 50000 any MCP message needs" in reply.json()["error"]["message"]
    assert post(server.port, rpc("ping"), session).json()["result"] == {}


@pytest.mark.parametrize(
    "framing",
    [
        b"Content-Length: 2\r\nContent-Length: 2\r\n",
        b"Content-Length: 2\r\nContent-Length: 40\r\n",
        b"Content-Length: \xb2\r\n",  # "²" in ISO-8859-1, as http.server decodes headers
        b"Content-Length: 2\r\nTransfer-Encoding: chunked\r\n",
    ],
    ids=["duplicate", "differing", "superscript-two", "with-transfer-encoding"],
)
def test_an_ambiguous_body_length_gets_400_and_the_connection_closes(serve, framing):
    server = serve()
    sock = raw_connection(server.port)
    # After the first body, a second request hides in what a lenient server would read as
    # the rest of the body, or as the next request (request smuggling).
    sock.sendall(
        b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        + framing
        + b"\r\n{}GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    )
    data = read_until_closed(sock, 5)
    assert data.startswith(b"HTTP/1.1 400 "), data[:200]
    assert data.count(b"HTTP/1.1 ") == 1, "the connection must close after the 400"
    assert b"Content-Length" in data.partition(b"\r\n\r\n")[2]


def test_a_chunked_body_gets_411(serve):
    server = serve()
    sock = raw_connection(server.port)
    sock.sendall(
        b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n"
    )
    data = read_until_closed(sock, 5)
    assert data.startswith(b"HTTP/1.1 411 ")
    assert b"send Content-Length" in data


# -- Streamable HTTP: tool calls ---------------------------------------------------------------


def test_a_call_without_progress_token_is_answered_with_json(serve, fake):
    server = serve()
    session = open_session(server.port)
    reply = post(server.port, rpc("tools/call", call_params(), id=11), session)
    assert reply.status == 200
    assert reply.headers["content-type"] == "application/json"
    result = reply.json()["result"]
    assert result["structuredContent"]["answer"].startswith("HTTP 404 means")
    assert len(fake.requests) == 1


def test_a_call_with_progress_token_streams_progress_then_the_result(serve, fake):
    server = serve()
    fake.enqueue(Reply(searches=[SEARCH], event_delay=0.03))
    session = open_session(server.port)
    reply = post(server.port, rpc("tools/call", call_params(token="p1"), id=12), session)
    assert reply.status == 200
    assert reply.headers["content-type"] == "text/event-stream"
    assert reply.headers["x-accel-buffering"] == "no"  # nginx passes each event on at once
    events = reply.events()
    *progress, (name, last) = events
    assert name == "message" and last["id"] == 12 and "result" in last
    assert progress, "expected progress before the result"
    for _, message in progress:
        assert message["method"] == "notifications/progress"
        assert message["params"]["progressToken"] == "p1"


def test_a_call_with_progress_token_but_json_only_accept_gets_json(serve, fake):
    server = serve()
    session = open_session(server.port)
    headers = {"Accept": "application/json"}
    reply = post(server.port, rpc("tools/call", call_params(token=5), id=13), session, headers)
    assert reply.status == 200
    assert reply.headers["content-type"] == "application/json"
    assert reply.json()["id"] == 13


def test_a_client_hanging_up_on_its_post_does_not_cancel_the_call(serve, fake):
    server = serve()
    fake.enqueue(Reply(event_delay=0.05))
    session = open_session(server.port)
    headers = {"Content-Type": "application/json", "Accept": ACCEPT_BOTH, "Mcp-Session-Id": session}
    stream = open_stream(server.port, "POST", "/mcp", rpc("tools/call", call_params()), headers)
    fake.wait_for_requests(1)
    stream.close()
    finished = fake.wait_for_finished(0, timeout=10)
    assert finished.client_disconnected_at is None
    assert finished.status_sent == 200
    assert post(server.port, rpc("ping"), session).status == 200
    wait_until(lambda: request(server.port, "GET", "/healthz").json()["in_flight"] == 0)


def test_notifications_cancelled_cancels_the_call_and_ends_its_post(serve, fake):
    server = serve()
    fake.enqueue(Reply(stall_after_events=2))
    session = open_session(server.port)
    pending = in_background(post, server.port, rpc("tools/call", call_params(), id=21), session)
    fake.wait_for_requests(1)
    odd = notification("notifications/cancelled", [21])  # not an object: ignored
    assert post(server.port, odd, session).status == 202
    cancel = notification("notifications/cancelled", {"requestId": 21, "reason": "user"})
    assert post(server.port, cancel, session).status == 202
    fake.wait_for_disconnect(0)
    reply = pending()
    assert reply.status == 200 and reply.headers["content-type"] == "application/json"
    cancelled_reply(reply.json(), 21)


def test_a_cancelled_call_answered_with_events_ends_with_an_error_event(serve, fake):
    server = serve()
    fake.enqueue(Reply(stall_after_events=2))
    session = open_session(server.port)
    message = rpc("tools/call", call_params(token="c"), id=23)
    pending = in_background(post, server.port, message, session)
    fake.wait_for_requests(1)
    cancel = notification("notifications/cancelled", {"requestId": 23})
    assert post(server.port, cancel, session).status == 202
    streamed = pending()
    assert streamed.headers["content-type"] == "text/event-stream"
    name, last = streamed.events()[-1]
    assert name == "message"
    cancelled_reply(last, 23)


def test_stateless_cancel_reaches_the_call_running_in_another_post(serve, fake):
    server = serve("--stateless")
    fake.enqueue(Reply(stall_after_events=2))
    pending = in_background(post, server.port, rpc("tools/call", call_params(), id=31))
    fake.wait_for_requests(1)
    cancel = notification("notifications/cancelled", {"requestId": 31, "reason": "user"})
    assert post(server.port, cancel).status == 202
    fake.wait_for_disconnect(0)
    cancelled_reply(pending().json(), 31)


def test_stateless_cancel_reaches_only_the_call_of_the_client_that_sent_it(serve, fake):
    server = serve("--stateless")
    fake.enqueue(Reply(stall_after_events=2), Reply(stall_after_events=2))
    alice, bob = {"User-Agent": "alice/1"}, {"User-Agent": "bob/1"}
    # SDK clients number their requests alike; the questions differ, so that the two calls do
    # not share one upstream request (single-flight).
    alices_call = rpc("tools/call", call_params("Alice asks"), id=2)
    bobs_call = rpc("tools/call", call_params("Bob asks"), id=2)
    alices = in_background(post, server.port, alices_call, headers=alice)
    fake.wait_for_requests(1)
    bobs = in_background(post, server.port, bobs_call, headers=bob)
    fake.wait_for_requests(2)
    cancel = notification("notifications/cancelled", {"requestId": 2})
    assert post(server.port, cancel, headers=bob).status == 202
    fake.wait_for_disconnect(1)
    cancelled_reply(bobs().json(), 2)
    wait_until(lambda: request(server.port, "GET", "/healthz").json()["in_flight"] == 1)
    assert fake.requests[0].client_disconnected_at is None
    assert post(server.port, cancel, headers=alice).status == 202
    cancelled_reply(alices().json(), 2)


def test_stateless_cancel_that_matches_two_alike_clients_cancels_neither(serve, fake):
    server = serve("--stateless")
    fake.enqueue(Reply(stall_after_events=2), Reply(stall_after_events=2))
    in_background(post, server.port, rpc("tools/call", call_params("first"), id=2))
    fake.wait_for_requests(1)
    in_background(post, server.port, rpc("tools/call", call_params("second"), id=2))
    fake.wait_for_requests(2)
    cancel = notification("notifications/cancelled", {"requestId": 2})
    assert post(server.port, cancel).status == 202
    wait_until(lambda: "none cancelled" in server.stderr, what="the log line")
    assert "matches 2 calls from clients that look alike" in server.stderr
    assert request(server.port, "GET", "/healthz").json()["in_flight"] == 2
    assert all(r.client_disconnected_at is None for r in fake.requests)


@pytest.mark.parametrize(
    "message",
    [
        {"jsonrpc": "2.0", "id": 1, "method": None, "result": {}},
        {"jsonrpc": "2.0", "method": 5, "result": 1},
    ],
    ids=["null-method-response", "numeric-method-response"],
)
def test_odd_responses_posted_are_accepted_without_an_answer(serve, message):
    server = serve()
    session = open_session(server.port)
    reply = post(server.port, message, session, timeout=5.0)
    assert (reply.status, reply.body) == (202, b"")
    assert post(server.port, rpc("ping"), session).json()["result"] == {}


@pytest.mark.parametrize("sent", [b"", b"GE"], ids=["nothing", "part-of-a-request-line"])
def test_at_max_connections_a_new_connection_closes_the_longest_idle_one(serve, sent):
    # cold: its pid, whose accepted sockets say when each is parked (the accepting thread
    # parks one before it accepts the next), the oldest first
    server = serve(config=http_config(max_connections=2, request_line_timeout_s=30), cold=True)
    sockets = sockets_of(server.pid)
    oldest = raw_connection(server.port)
    oldest.sendall(sent)
    wait_until(lambda: sockets_of(server.pid) > sockets, 10, "the oldest accepted")
    newer = raw_connection(server.port)
    newer.sendall(sent)
    wait_until(lambda: sockets_of(server.pid) > sockets + 1, 10, "the newer accepted")
    assert request(server.port, "GET", "/healthz").status == 200
    assert read_until_closed(oldest, timeout=5.0) == b""
    rest = b"T /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    newer.sendall(rest if sent else b"GE" + rest)
    assert read_until_closed(newer, timeout=5.0).startswith(b"HTTP/1.1 200 ")


def test_a_connection_sending_its_headers_a_byte_at_a_time_makes_room_like_an_idle_one(serve):
    # Issue 18 audit: a slow client (or an attacker without the token, which is in the headers)
    # that trickles its request line and headers held its slot and a thread for
    # header_timeout_s, and at max_connections every new connection was closed meanwhile.
    server = serve(config=http_config(max_connections=2, header_timeout_s=60), cold=True)
    threads = proc_status(server.pid)["Threads"]  # cold: its pid, for its worker threads
    slow = [raw_connection(server.port), raw_connection(server.port)]
    for sock in slow:
        for byte in b"POST /mcp HTTP/1.1\r\nHost: 1":
            sock.sendall(bytes([byte]))
    wait_until(lambda: proc_status(server.pid)["Threads"] >= threads + 2, 10, "both read")
    try:
        assert request(server.port, "GET", "/healthz").status == 200
        assert request(server.port, "GET", "/healthz").status == 200
        for sock in slow:  # closed to make room, without a 408: it was not late
            assert read_until_closed(sock, timeout=5.0) == b""
    finally:
        for sock in slow:
            sock.close()


def test_making_room_passes_over_a_parked_connection_whose_request_has_arrived():
    # Issue 18 audit: an attacker opening connections fast keeps the lobby's thread busy, and a
    # token holder's connection, its request sent but not yet seen, was closed as the oldest.
    from openai_responses_mcp import Lobby, Log

    lobby = Lobby(on_ready=None, on_closed=None, log=Log())  # its thread never runs here
    pairs = [socket.socketpair() for _ in range(3)]
    try:
        sent, idle, newer = (server_end for server_end, _ in pairs)
        pairs[0][1].sendall(b"GET /usage HTTP/1.1\r\n")  # the oldest: a request on its way
        for conn in (sent, idle, newer):
            lobby.wait(conn, ("127.0.0.1", 0), None, time.monotonic() + 60)
        assert lobby.evict_oldest() and lobby._doomed == [(idle, None)]
        assert lobby.evict_oldest() and lobby._doomed[-1] == (newer, None)
        assert not lobby.evict_oldest()  # only a connection with a request left: no room
    finally:
        for pair in pairs:
            for sock in pair:
                sock.close()
        lobby._wake_in.close()
        lobby._wake_out.close()


def test_a_connection_parked_as_the_lobby_closes_is_closed_once():
    # Parked under the lock, then the lobby closed before the second look at `closed`: the
    # lobby's close closes it, and wait closed it too (its slot given back twice).
    from openai_responses_mcp import Lobby, Log

    closes = []
    lobby = Lobby(on_ready=None, on_closed=lambda conn, handler: closes.append(conn), log=Log())
    real = lobby._lock

    class ClosingAfter:  # the lobby's close lands as wait leaves its lock
        def __enter__(self):
            return real.__enter__()

        def __exit__(self, *exc):
            real.__exit__(*exc)
            lobby.closed = True

    lobby._lock = ClosingAfter()
    conn = object()
    try:
        lobby.wait(conn, ("127.0.0.1", 0), None, time.monotonic() + 60)
        assert closes == [] and conn in lobby._waiting  # the lobby's to close, once
    finally:
        lobby._wake_in.close()
        lobby._wake_out.close()


def test_a_closed_connections_slot_is_free_before_its_client_sees_it_close():
    # A client that saw its connection close and opened another at max_connections was, for a
    # moment, closed unanswered: the slot was freed after the close.
    from openai_responses_mcp import HttpServer

    server = types.SimpleNamespace(open=1, _count=threading.Lock(), seen=[])
    server.shutdown_request = lambda conn: server.seen.append(server.open)
    HttpServer._close(server, conn=None, handler=None)
    assert server.seen == [0]


def test_connections_past_max_connections_are_closed_at_once_while_all_are_busy(serve):
    server = serve(config=http_config(max_connections=2, header_timeout_s=30), cold=True)
    threads = proc_status(server.pid)["Threads"]  # cold: its pid, for its worker threads
    held = [raw_connection(server.port), raw_connection(server.port)]
    for sock in held:  # a request under way (its headers in, its body awaited): not idle
        sock.sendall(
            b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: 50\r\n\r\n"
        )
    wait_until(lambda: proc_status(server.pid)["Threads"] >= threads + 2, 10, "a worker each")
    try:
        extra = raw_connection(server.port)
        started = time.monotonic()
        assert read_until_closed(extra, timeout=5.0) == b""
        assert time.monotonic() - started < 10  # far below header_timeout_s: not a speed figure
    finally:
        for sock in held:
            sock.close()
    wait_until(lambda: healthz_status(server.port) == 200, what="a free slot")


def test_refused_requests_trickling_their_bodies_never_fill_max_connections(serve):
    # Issue 39 audit: a request refused for its token had its body (up to 64 KiB) read for the
    # refusal's id, for up to header_timeout_s: a stranger holding max_connections such
    # requests, their bodies never sent, had every new connection closed meanwhile.
    config = http_config(max_connections=2, header_timeout_s=30)
    server = serve(config=config, env={"MCP_HTTP_TOKEN": TOKEN})
    held = [raw_connection(server.port), raw_connection(server.port)]
    for sock in held:
        sock.sendall(
            b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Authorization: Bearer not-the-token\r\nContent-Length: 50\r\n\r\n{"
        )
    try:
        for sock in held:  # refused at once, and closed: its body is not waited for
            assert read_until_closed(sock, timeout=5.0).startswith(b"HTTP/1.1 401 ")
        auth = {"Authorization": f"Bearer {TOKEN}"}
        assert post(server.port, rpc("initialize", INIT_PARAMS), headers=auth).status == 200
    finally:
        for sock in held:
            sock.close()
    # A refused request whose body came with it still gets its id back. One write, so the body
    # has arrived with the headers (http.client sends them in two, and may be refused between).
    # Two slots only: under load the server may still count a connection above (or the last
    # try) and close a new one unanswered, so an unanswered try is tried again.
    body = json.dumps(rpc("ping", id=7)).encode()

    def refused_with_its_body() -> bytes:
        sock = raw_connection(server.port)
        try:
            sock.sendall(
                b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                b"Authorization: Bearer nope\r\nConnection: close\r\n"
                b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
            )
            return read_until_closed(sock, timeout=5.0)
        except OSError:  # closed unanswered before the request was all written
            return b""
        finally:
            sock.close()

    reply = wait_until(refused_with_its_body, timeout=20, what="an answer once a slot is free")
    assert reply.startswith(b"HTTP/1.1 401 ")
    assert json.loads(reply.partition(b"\r\n\r\n")[2])["id"] == 7


@NEEDS_PROC
def test_idle_connections_hold_no_thread_and_never_lock_token_holders_out(serve):
    # Issue 18: with 300 connections held open sending nothing, 94% of authenticated requests
    # failed. Idle connections now wait in one selector thread, and at max_connections (256)
    # each new one closes the longest idle one.
    server = serve(
        config=http_config(request_line_timeout_s=60), env={"MCP_HTTP_TOKEN": TOKEN}, cold=True
    )
    auth = {"Authorization": f"Bearer {TOKEN}"}
    sockets = sockets_of(server.pid)  # its own: the listener's and the lobby's
    assert request(server.port, "GET", "/usage", headers=auth).status in (200, 404)
    wait_until(lambda: sockets_of(server.pid) == sockets, 10, "the /usage connection's close")
    before = proc_status(server.pid)
    idle = [raw_connection(server.port) for _ in range(300)]
    closed = select.poll()  # the ones the server closed (past max_connections) read their end
    for sock in idle:
        closed.register(sock, select.POLLIN)

    def taken() -> bool:  # each held by the server, or closed by it to make room
        return sockets_of(server.pid) - sockets + len(closed.poll(0)) >= 300

    try:
        wait_until(taken, 30, "all 300 taken")
        held = proc_status(server.pid)
        assert held["Threads"] <= before["Threads"] + 2, (before, held)  # none per connection
        served = [
            post(server.port, rpc("initialize", INIT_PARAMS), headers=auth) for _ in range(40)
        ]
        assert [reply.status for reply in served] == [200] * 40
    finally:
        for sock in idle:
            sock.close()


def test_a_connection_that_sends_nothing_is_closed_after_request_line_timeout_s(serve):
    server = serve(config=http_config(request_line_timeout_s=1))
    sock = raw_connection(server.port)
    started = time.monotonic()
    assert read_until_closed(sock, 10) == b""
    assert 0.5 < time.monotonic() - started < 8


def test_a_kept_alive_connection_waits_idle_timeout_s_not_the_request_line_time(serve):
    server = serve(config=http_config(request_line_timeout_s=1, idle_timeout_s=60))
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    conn.request("GET", "/healthz")
    assert conn.getresponse().read()
    time.sleep(2.5)  # sleep: the point: past request_line_timeout_s, only a new one is closed
    conn.request("GET", "/healthz")
    assert conn.getresponse().status == 200
    conn.close()


def test_an_idle_kept_alive_connection_is_closed_quietly_after_idle_timeout_s(serve):
    server = serve(config=http_config(idle_timeout_s=1))
    sock = raw_connection(server.port)
    sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    sock.settimeout(5)
    assert sock.recv(65536).startswith(b"HTTP/1.1 200 ")
    started = time.monotonic()
    assert read_until_closed(sock, 10) == b""
    assert 0.5 < time.monotonic() - started < 8


def test_pipelined_requests_are_all_answered(serve):
    server = serve()
    sock = raw_connection(server.port)
    ask = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    sock.sendall(ask * 2 + ask.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n"))
    assert read_until_closed(sock, 10).count(b"HTTP/1.1 200 ") == 3


def test_delete_cancels_the_sessions_calls(serve, fake):
    server = serve()
    fake.enqueue(Reply(stall_after_events=2))
    session = open_session(server.port)
    message = rpc("tools/call", call_params(token="t"), id=22)
    pending = in_background(post, server.port, message, session)
    fake.wait_for_requests(1)
    reply = request(server.port, "DELETE", "/mcp", headers={"Mcp-Session-Id": session})
    assert reply.status == 204
    fake.wait_for_disconnect(0)
    streamed = pending()
    assert streamed.headers["content-type"] == "text/event-stream"
    assert all("result" not in message for _, message in streamed.events())
    cancelled_reply(streamed.events()[-1][1], 22)


def test_an_id_is_free_for_the_next_request_once_its_reply_is_taken():
    """CI's intermittent 500 (AttributeError) in test_handoff's HTTP tests: the client read
    initialize's reply (id 1) and sent tools/call with id 1 before the POST that wrote the
    reply had closed its box, so the call found its id taken and had no box to wait in."""
    from openai_responses_mcp import Log, Router

    router = Router(Log())
    first = router.open(1, "t")
    assert router.open(1, None) is None  # waited for: not free
    router.send({"jsonrpc": "2.0", "id": 1, "result": {"n": 1}})
    assert first.get(0)["result"] == {"n": 1}  # taken by its POST, being written
    again = router.open(1, None)
    assert again is not None and again is not first
    router.close(1, first)  # the first POST's late close leaves the new box alone
    router.send(
        {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": "t"}}
    )
    router.send({"jsonrpc": "2.0", "id": 1, "result": {"n": 2}})
    assert again.get(0)["result"] == {"n": 2}  # the old token no longer routes here
    assert first.get(0) is None


def test_a_reused_id_of_a_running_call_is_refused(serve, fake):
    server = serve()
    fake.enqueue(Reply(stall_after_events=2))
    session = open_session(server.port)
    pending = in_background(post, server.port, rpc("tools/call", call_params(), id=30), session)
    fake.wait_for_requests(1)
    reply = post(server.port, rpc("tools/call", call_params(), id=30), session)
    assert reply.status == 200
    assert "already used by a call in progress" in reply.json()["error"]["message"]
    request(server.port, "DELETE", "/mcp", headers={"Mcp-Session-Id": session})
    ended = cancelled_reply(pending().json(), 30)
    assert ended["error"]["message"] == "Request cancelled: the session was ended"


# -- limits ------------------------------------------------------------------------------------


def test_too_many_calls_in_one_session_gets_429(serve, fake):
    server = serve(config=http_config(max_calls_per_session=1))
    fake.enqueue(Reply(stall_after_events=2))
    session = open_session(server.port)
    pending = in_background(post, server.port, rpc("tools/call", call_params(), id=1), session)
    fake.wait_for_requests(1)
    reply = post(server.port, rpc("tools/call", call_params(), id=2), session)
    assert reply.status == 429
    assert reply.json()["id"] == 2
    assert "server.http.max_calls_per_session" in reply.json()["error"]["message"]
    request(server.port, "DELETE", "/mcp", headers={"Mcp-Session-Id": session})
    pending()


def test_too_many_calls_on_the_server_gets_429(serve, fake):
    server = serve(config=http_config(max_calls=1))
    fake.enqueue(Reply(stall_after_events=2))
    first, second = open_session(server.port), open_session(server.port)
    pending = in_background(post, server.port, rpc("tools/call", call_params()), first)
    fake.wait_for_requests(1)
    reply = post(server.port, rpc("tools/call", call_params()), second)
    assert reply.status == 429
    assert "(1, server.http.max_calls)" in reply.json()["error"]["message"]
    request(server.port, "DELETE", "/mcp", headers={"Mcp-Session-Id": first})
    pending()


def test_server_max_calls_applies_over_http_too_when_it_is_the_lower_limit(serve, fake):
    server = serve(config="server:\n  max_calls: 1\n")  # server.http.max_calls stays 64
    fake.enqueue(Reply(stall_after_events=2))
    first, second = open_session(server.port), open_session(server.port)
    pending = in_background(post, server.port, rpc("tools/call", call_params()), first)
    fake.wait_for_requests(1)
    reply = post(server.port, rpc("tools/call", call_params(), id=8), second)
    assert reply.status == 200 and reply.json()["id"] == 8
    assert reply.json()["error"]["code"] == -32000
    assert "(1, server.max_calls)" in reply.json()["error"]["message"]
    assert len(fake.requests) == 1
    request(server.port, "DELETE", "/mcp", headers={"Mcp-Session-Id": first})
    pending()


def test_at_max_sessions_the_least_recently_used_idle_session_makes_room(serve):
    server = serve("--debug", config=http_config(max_sessions=2))
    first, second = open_session(server.port), open_session(server.port)
    assert post(server.port, rpc("ping"), first).status == 200  # second is now the oldest
    for _ in range(5):  # health checks that never send DELETE
        third = open_session(server.port)
    assert post(server.port, rpc("ping"), second).status == 404
    assert post(server.port, rpc("ping"), third).status == 200
    assert request(server.port, "GET", "/healthz").json()["sessions"] == 2
    assert "ended to make room (server.http.max_sessions 2 reached)" in server.stderr


def test_too_many_sessions_gets_429_only_while_every_session_is_busy(serve, fake):
    server = serve(config=http_config(max_sessions=2))
    fake.enqueue(Reply(stall_after_events=2))
    busy = open_session(server.port)
    pending = in_background(post, server.port, rpc("tools/call", call_params()), busy)
    fake.wait_for_requests(1)
    stream, _ = open_sse(server.port)  # an open SSE stream is busy too
    reply = post(server.port, rpc("initialize", INIT_PARAMS, id=3))
    assert reply.status == 429
    assert (
        "server.http.max_sessions), each with a call or stream" in reply.json()["error"]["message"]
    )
    stream.close()
    wait_until(lambda: post(server.port, rpc("initialize", INIT_PARAMS)).status == 200)
    assert post(server.port, rpc("ping"), busy).status == 200
    request(server.port, "DELETE", "/mcp", headers={"Mcp-Session-Id": busy})
    pending()


def test_a_session_is_not_pushed_out_while_a_request_is_using_it():
    import openai_responses_mcp as orm

    table = orm.SessionTable(1, 600, orm.Log())
    first = table.create()  # held: its initialize is still being answered
    with pytest.raises(orm.HttpError) as refused:
        table.create()
    assert refused.value.status == 429
    table.release(first)
    assert table.get(first.id) is first  # held again by this request
    with pytest.raises(orm.HttpError):
        table.create()
    table.release(first)
    second = table.create()
    assert table.all() == [second]
    with pytest.raises(orm.HttpError) as gone:
        table.get(first.id)
    assert gone.value.status == 404


def test_idle_sessions_expire(serve):
    server = serve(config=http_config(session_idle_s=1))
    session = open_session(server.port)
    assert post(server.port, rpc("ping"), session).status == 200
    health = lambda: request(server.port, "GET", "/healthz").json()  # noqa: E731 - no touch
    assert health()["sessions"] == 1
    wait_until(lambda: health()["sessions"] == 0, 5, "expiry")
    assert post(server.port, rpc("ping"), session).status == 404


def test_a_slow_client_is_cut_off_with_408(serve):
    server = serve(config=http_config(header_timeout_s=1))
    sock = raw_connection(server.port)
    sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n")
    started = time.monotonic()
    assert request(server.port, "GET", "/healthz").status == 200  # others are still served
    data = read_until_closed(sock, 10)
    assert 0.5 < time.monotonic() - started < 8
    assert data.startswith(b"HTTP/1.1 408 ")
    assert b"server.http.header_timeout_s" in data


def test_a_slow_body_is_cut_off_too(serve):
    server = serve(config=http_config(header_timeout_s=1))
    sock = raw_connection(server.port)
    sock.sendall(
        b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Content-Length: 100\r\n\r\n{"
    )
    data = read_until_closed(sock, 5)
    assert data.startswith(b"HTTP/1.1 408 ")


# -- security ----------------------------------------------------------------------------------


def test_a_foreign_origin_gets_403(serve):
    server = serve()
    reply = post(
        server.port,
        rpc("initialize", INIT_PARAMS, id=4),
        headers={"Origin": "https://evil.example"},
    )
    assert reply.status == 403
    assert reply.json()["id"] == 4
    assert "server.http.allowed_origins" in reply.json()["error"]["message"]
    assert request(server.port, "GET", "/healthz", headers={"Origin": "null"}).status == 403


@pytest.mark.parametrize(
    "origin", ["http://localhost:5173", "http://127.0.0.1", "https://[::1]:8443"]
)
def test_localhost_origins_are_allowed_with_cors_headers(serve, origin):
    server = serve()
    reply = post(server.port, rpc("initialize", INIT_PARAMS), headers={"Origin": origin})
    assert reply.status == 200
    assert reply.headers["access-control-allow-origin"] == origin
    assert "Mcp-Session-Id" in reply.headers["access-control-expose-headers"]


def test_configured_origins_are_allowed(serve):
    server = serve(config=http_config(allowed_origins=["https://agent.example.com"]))
    headers = {"Origin": "https://agent.example.com"}
    assert post(server.port, rpc("initialize", INIT_PARAMS), headers=headers).status == 200
    headers = {"Origin": "https://other.example.com"}
    assert post(server.port, rpc("initialize", INIT_PARAMS), headers=headers).status == 403


def test_cors_preflight_is_answered_for_allowed_origins(serve):
    server = serve(env={"MCP_HTTP_TOKEN": TOKEN})
    headers = {"Origin": "http://localhost:3000", "Access-Control-Request-Method": "POST"}
    reply = request(server.port, "OPTIONS", "/mcp", headers=headers)
    assert reply.status == 204
    assert reply.headers["access-control-allow-origin"] == "http://localhost:3000"
    assert "Mcp-Session-Id" in reply.headers["access-control-allow-headers"]
    headers["Origin"] = "https://evil.example"
    assert request(server.port, "OPTIONS", "/mcp", headers=headers).status == 403


def test_a_foreign_host_header_gets_421(serve):
    server = serve()
    reply = request(server.port, "GET", "/healthz", headers={"Host": "attacker.example:80"})
    assert reply.status == 421
    assert "DNS rebinding" in reply.json()["error"]
    headers = {"Host": f"localhost:{server.port}"}
    assert request(server.port, "GET", "/healthz", headers=headers).status == 200


def test_configured_host_names_are_served(serve):
    server = serve(config=http_config(allowed_hosts=["mcp.internal:8443"]))
    headers = {"Host": "mcp.internal"}  # ports are not compared
    assert request(server.port, "GET", "/healthz", headers=headers).status == 200


# -- the gates, exactly (issue 35): each a guard a refactor could loosen with the suite green ----


def gates(tmp_path, host: str = "127.0.0.1", token: str | None = None, **http):
    """The HTTP server's gates for `--http HOST` with server.http settings, nothing bound."""
    import openai_responses_mcp as orm

    path = tmp_path / "config.yaml"
    path.write_text(http_config(**http) if http else "", encoding="utf-8")
    env = {"XDG_CONFIG_HOME": str(tmp_path / "xdg"), "XDG_STATE_HOME": str(tmp_path)}
    if token:
        env["MCP_HTTP_TOKEN"] = token
    config = orm.load_config({"config": str(path)}, env)
    return orm.HttpApp(object(), config, orm.Log(), orm.HostPolicy(config, host))


@pytest.mark.parametrize(
    "origin",
    [
        "http://localhost",
        "http://localhost:5173",
        "https://localhost:8443",
        "http://127.0.0.1",
        "http://127.0.0.1:9",
        "http://[::1]",
        "https://[::1]:8443",
        "HTTP://LOCALHOST:3000",
    ],
)
def test_gates_a_loopback_origin_is_allowed(tmp_path, origin):
    assert gates(tmp_path).policy.origin_allowed(origin)


@pytest.mark.parametrize(
    "origin",
    [
        "http://localhost.evil.com",  # a prefix look-alike: the attacker's own domain
        "http://localhost.",
        "http://evil-localhost",
        "http://evillocalhost",
        "http://127.0.0.1.evil.com",
        "http://127.0.0.10",
        "http://127.0.0.1.nip.io:8080",
        "http://localhost@evil.com",
        "http://evil.com#localhost",
        "http://[::1].evil.com",
        "http://[::1]evil.com:80",
        "http://[::2]",
        "http://localhost:evil",
        "http://localhost:80:80",
        "http://xn--localhost-9za.com",  # IDNA: punycode of a look-alike
        "http://ｌｏｃａｌｈｏｓｔ",  # fullwidth letters, which IDNA would map to "localhost"
        "http://locaⅼhost",  # U+217C SMALL ROMAN NUMERAL FIFTY
        "ftp://localhost",
        "localhost",
        "null",
        "",
    ],
)
def test_gates_an_origin_that_only_looks_like_loopback_is_refused(tmp_path, origin):
    assert not gates(tmp_path).policy.origin_allowed(origin)


def test_gates_configured_origins_are_matched_whole(tmp_path):
    app = gates(tmp_path, allowed_origins=["https://agent.example.com"])
    assert app.policy.origin_allowed("https://agent.example.com")
    assert app.policy.origin_allowed("HTTPS://AGENT.EXAMPLE.COM")
    for origin in (
        "https://agent.example.com.evil.com",
        "https://evil-agent.example.com",
        "http://agent.example.com",
        "https://agent.example.com:8443",
        "https://agent.example.co",
    ):
        assert not app.policy.origin_allowed(origin), origin


@pytest.mark.parametrize(
    "host", ["localhost", "localhost:8080", "127.0.0.1:9", "[::1]:9", "[::1]", "LOCALHOST"]
)
def test_gates_the_loopback_names_are_hosts_of_a_loopback_server(tmp_path, host):
    gates(tmp_path).policy.check_host(host)


@pytest.mark.parametrize(
    "host",
    [
        "localhost.evil.com",
        "evil.com",
        "127.0.0.1.evil.com",
        "[::1].evil.com",
        "localhost:evil",
        "xn--localhost-9za.com",
        "ｌｏｃａｌｈｏｓｔ",
    ],
)
def test_gates_a_look_alike_host_gets_421(tmp_path, host):
    with pytest.raises(Exception) as refused:
        gates(tmp_path).policy.check_host(host)
    assert refused.value.status == 421


def test_gates_every_address_with_allowed_hosts_still_checks_the_host(tmp_path):
    """On 0.0.0.0 with server.http.allowed_hosts set, a Host not listed is refused: DNS
    rebinding protection is not switched off by listening on every address."""
    app = gates(tmp_path, "0.0.0.0", TOKEN, allowed_hosts=["mcp.internal"])
    app.policy.check_host("mcp.internal")
    app.policy.check_host("mcp.internal:8443")  # ports are not compared
    app.policy.check_host("localhost:9")
    for host in ("evil.example", "mcp.internal.evil.example", "evil-mcp.internal", "0.0.0.0"):
        with pytest.raises(Exception) as refused:
            app.policy.check_host(host)
        assert refused.value.status == 421, host
    # Without allowed_hosts, every name reaches a server on every address (it has a token).
    gates(tmp_path, "0.0.0.0", TOKEN).policy.check_host("evil.example")
    # "*" turns the check off, on purpose.
    gates(tmp_path, "0.0.0.0", TOKEN, allowed_hosts=["*"]).policy.check_host("evil.example")


@pytest.mark.parametrize(
    "host", ["10.1.2.3", "192.168.1.20", "172.16.0.5", "169.254.1.1", "100.64.0.1", "fd00::1"]
)
def test_gates_a_private_address_is_not_loopback_so_a_token_is_required(tmp_path, host):
    import openai_responses_mcp as orm

    with pytest.raises(orm.ConfigError, match="without a token"):
        gates(tmp_path, host)
    app = gates(tmp_path, host, TOKEN)
    assert app.policy.loopback is False and app.auth.required()


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1", "127.0.0.2"])
def test_gates_a_loopback_address_needs_no_token(tmp_path, host):
    app = gates(tmp_path, host)
    assert app.policy.loopback is True and not app.auth.required()


def test_gates_only_the_exact_token_is_accepted(tmp_path):
    import openai_responses_mcp as orm

    auth = gates(tmp_path, token=TOKEN).auth
    assert auth.authenticate(f"Bearer {TOKEN}") == orm.SHARED_USER
    assert auth.authenticate(f"bearer {TOKEN}") == orm.SHARED_USER
    for wrong in (TOKEN[:-1], TOKEN + "x", TOKEN.upper(), TOKEN[1:], "", " ", TOKEN[:16]):
        with pytest.raises(orm.HttpError) as refused:
            auth.authenticate(f"Bearer {wrong}")
        assert refused.value.status == 401, wrong
    for header in (TOKEN, f"Basic {TOKEN}", f"Token {TOKEN}", ""):
        with pytest.raises(orm.HttpError):
            auth.authenticate(header)


def test_a_token_is_required_when_set(serve):
    server = serve(env={"MCP_HTTP_TOKEN": TOKEN})
    reply = post(server.port, rpc("initialize", INIT_PARAMS, id=6))
    assert reply.status == 401
    assert reply.headers["www-authenticate"] == 'Bearer realm="openai-responses-mcp"'
    assert reply.json()["id"] == 6
    assert "Authorization: Bearer" in reply.json()["error"]["message"]
    wrong = {"Authorization": "Bearer " + TOKEN[:-1] + "?"}
    reply = post(server.port, rpc("initialize", INIT_PARAMS), headers=wrong)
    assert reply.status == 401
    assert 'error="invalid_token"' in reply.headers["www-authenticate"]
    right = {"Authorization": f"Bearer {TOKEN}"}
    assert post(server.port, rpc("initialize", INIT_PARAMS), headers=right).status == 200
    assert request(server.port, "GET", "/sse").status == 401


def test_healthz_needs_no_token(serve):
    server = serve("--http-token", TOKEN)
    assert request(server.port, "GET", "/healthz").status == 200


def test_the_token_is_never_logged(serve):
    server = serve("--debug", env={"MCP_HTTP_TOKEN": TOKEN})
    headers = {"Authorization": f"Bearer {TOKEN}"}
    session = open_session(server.port, headers)
    post(server.port, rpc("ping"), session, {**headers, "X-Echo": TOKEN})
    post(server.port, rpc("ping"), headers={"Authorization": f"Bearer {TOKEN}x"})
    assert "POST /mcp -> 200" in server.stderr
    assert TOKEN not in server.stderr


# -- legacy HTTP+SSE ---------------------------------------------------------------------------


def test_sse_announces_a_relative_messages_endpoint_and_answers_on_the_stream(serve):
    server = serve()
    stream, endpoint = open_sse(server.port)
    assert stream.header("Content-Type") == "text/event-stream"
    assert stream.header("X-Accel-Buffering") == "no"
    assert endpoint.startswith("/messages?sessionId=")
    reply = post(
        server.port, rpc("initialize", INIT_PARAMS, id=1), path=endpoint, headers={"Accept": "*/*"}
    )
    assert (reply.status, reply.body) == (202, b"")
    assert stream.next_message()["result"]["protocolVersion"] == "2025-06-18"
    assert post(server.port, rpc("tools/list", id=2), path=endpoint).status == 202
    assert len(stream.next_message()["result"]["tools"]) == 3
    stream.close()


def test_sse_errors_also_come_down_the_stream_with_202(serve):
    server = serve()
    stream, endpoint = open_sse(server.port)
    assert post(server.port, rpc("no/such", id=3), path=endpoint).status == 202
    assert stream.next_message()["error"]["code"] == -32601
    stream.close()


def test_post_to_sse_is_405_so_clients_fall_back_correctly(serve):
    server = serve()
    reply = post(server.port, rpc("initialize", INIT_PARAMS), path="/sse")
    assert reply.status == 405
    assert reply.headers["allow"] == "GET"


def test_messages_without_or_with_an_unknown_session_id_is_refused(serve):
    server = serve()
    assert post(server.port, rpc("ping"), path="/messages").status == 400
    assert post(server.port, rpc("ping"), path="/messages?sessionId=nope").status == 404


def test_streamable_and_legacy_session_ids_do_not_mix(serve):
    server = serve()
    stream, endpoint = open_sse(server.port)
    legacy_id = endpoint.split("=", 1)[1]
    assert post(server.port, rpc("ping"), legacy_id).status == 404
    session = open_session(server.port)
    assert post(server.port, rpc("ping"), path=f"/messages?sessionId={session}").status == 404
    stream.close()


def test_an_idle_sse_stream_gets_keep_alive_comments(serve):
    server = serve(config=http_config(keepalive_s=1))
    stream, _ = open_sse(server.port)
    stream.conn.sock.settimeout(5)
    assert stream.response.readline().startswith(b": keep-alive")
    stream.close()


def test_closing_the_sse_stream_ends_the_session_and_cancels_its_calls(serve, fake):
    server = serve()
    fake.enqueue(Reply(stall_after_events=2))
    stream, endpoint = open_sse(server.port)
    assert post(server.port, rpc("tools/call", call_params(), id=1), path=endpoint).status == 202
    fake.wait_for_requests(1)
    stream.close()
    fake.wait_for_disconnect(0)
    assert post(server.port, rpc("ping"), path=endpoint).status == 404


def test_sse_progress_and_results_arrive_as_message_events(serve, fake):
    server = serve()
    fake.enqueue(Reply(searches=[SEARCH], event_delay=0.03))
    stream, endpoint = open_sse(server.port)
    assert (
        post(server.port, rpc("tools/call", call_params(token="s"), id=8), path=endpoint).status
        == 202
    )
    first = stream.next_message()
    assert first["method"] == "notifications/progress"
    while "id" not in (message := stream.next_message()):
        assert message["params"]["progressToken"] == "s"
    assert message["id"] == 8 and message["result"]["structuredContent"]["used_search"] is True
    stream.close()


def test_sse_over_the_call_limit_answers_with_an_error_event(serve, fake):
    server = serve(config=http_config(max_calls_per_session=1))
    fake.enqueue(Reply(stall_after_events=2))
    stream, endpoint = open_sse(server.port)
    assert post(server.port, rpc("tools/call", call_params(), id=1), path=endpoint).status == 202
    fake.wait_for_requests(1)
    assert post(server.port, rpc("tools/call", call_params(), id=2), path=endpoint).status == 202
    refused = stream.next_message()
    assert refused["id"] == 2 and "max_calls_per_session" in refused["error"]["message"]
    stream.close()


def test_an_sse_outbox_counts_its_bytes_drops_progress_when_full_but_never_a_reply():
    import openai_responses_mcp as orm

    box = orm.StreamOutbox(100)
    reply = {"jsonrpc": "2.0", "id": 1, "result": {"text": "x" * 120}}
    progress = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {}}
    box.send(progress)
    size = box.bytes
    assert size == len(orm.encode_message(progress)) and not box.full()
    box.send(reply)
    assert box.full() and box.bytes > 100
    box.send(progress)  # dropped: the stream is not being read
    box.send({**reply, "id": 2})  # kept: a reply is owed
    assert not box.stalled(60)  # full, but only just
    assert box.stalled(-1)
    taken = [box.get(0) for _ in range(3)]
    assert [orm.decode_message(item)[0].get("id") for item in taken] == [None, 1, 2]
    assert box.bytes == 0 and box.get(0) is None and not box.full()


def settled(pid: int) -> dict:
    """The server's figures once openai's background import is over: pydantic (which openai
    imports) is mapped and VmRSS has stopped moving."""
    maps = Path(f"/proc/{pid}/maps")
    wait_until(lambda: "pydantic_core" in maps.read_text(), 60, "openai loaded")
    last = proc_status(pid)
    for _ in range(60):
        time.sleep(0.5)  # sleep: the point: the window VmRSS must hold still over
        now = proc_status(pid)
        if abs(now["VmRSS"] - last["VmRSS"]) < 256:
            return now
        last = now
    raise AssertionError(f"VmRSS never settled: {last}")


@NEEDS_PROC
def test_an_unread_sse_stream_holds_at_most_sse_outbox_bytes_then_its_posts_get_429(serve):
    # Issue 18: 8,000 posts to a stream nobody reads queued every reply (~7 MB/s) and the
    # session never expired. 6,000 tools/list replies are ~12 MB when queued without a limit.
    limit = 65536
    server = serve(config=http_config(sse_outbox_bytes=limit, sse_stall_s=2), cold=True)
    sock, endpoint = unread_sse(server.port)
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)

    def send(message) -> tuple[int, bytes]:
        conn.request("POST", endpoint, json.dumps(message), {"Content-Type": "application/json"})
        reply = conn.getresponse()
        return reply.status, reply.read()

    assert send(rpc("initialize", INIT_PARAMS, id=0))[0] == 202
    assert send(notification("notifications/initialized"))[0] == 202
    before = settled(server.pid)  # initialize imports openai in the background (~30 MB)
    replies = [send(rpc("tools/list", id=n)) for n in range(1, 6001)]
    after = proc_status(server.pid)
    statuses = [status for status, _ in replies]
    refused = [body for status, body in replies if status == 429]
    # Accepted while the outbox has room (the kernel's socket buffers take some replies too),
    # else refused; on a slow machine the stall may end the session before the last (404).
    assert set(statuses) <= {202, 429, 404} and len(refused) >= 1000
    assert statuses.index(429) < statuses.index(404) if 404 in statuses else True
    error = json.loads(refused[0])["error"]["message"]
    assert "not being read" in error and "server.http.sse_outbox_bytes (65536)" in error
    # The outbox's limit plus allocator slack: nothing grows with the number of posts.
    assert after["VmRSS"] - before["VmRSS"] < 4096 + 4 * limit // 1024, (before, after)
    assert after["Threads"] <= before["Threads"] + 1  # no thread per post
    # Full and unread for sse_stall_s: the stream is closed and the session ended.
    wait_until(lambda: send(rpc("ping", id=9))[0] == 404, 15, "the stalled session's end")
    assert "a /sse stream went unread for 2 s" in server.stderr
    read_until_closed(sock, 10)
    wait_until(lambda: proc_status(server.pid)["Threads"] < before["Threads"], 10, "exit")
    conn.close()
    sock.close()


# -- stateless mode ----------------------------------------------------------------------------


def test_stateless_mode_answers_without_sessions(serve, fake):
    server = serve("--stateless")
    assert "(stateless)" in server.stderr
    reply = post(server.port, rpc("initialize", INIT_PARAMS))
    # No session: the id is only the client's own record of itself (issue 31), no secret here
    assert reply.status == 200 and reply.headers["mcp-session-id"].startswith("c1.")
    assert request(server.port, "GET", "/healthz").json()["sessions"] == 0
    assert post(server.port, notification("notifications/initialized")).status == 202
    reply = post(server.port, rpc("tools/list"), headers={"MCP-Protocol-Version": "2025-06-18"})
    assert reply.status == 200 and "outputSchema" in reply.json()["result"]["tools"][0]
    reply = post(
        server.port,
        rpc("tools/call", call_params()),
        headers={"MCP-Protocol-Version": "2025-06-18"},
    )
    assert reply.json()["result"]["structuredContent"]["answer"]
    assert request(server.port, "GET", "/healthz").json()["sessions"] == 0


def test_stateless_mode_without_a_version_header_speaks_2025_03_26(serve):
    server = serve("--stateless")
    reply = post(server.port, rpc("tools/list"))
    assert "outputSchema" not in reply.json()["result"]["tools"][0]


def test_stateless_mode_has_no_delete_and_no_legacy_sse(serve):
    server = serve("--stateless")
    reply = request(server.port, "DELETE", "/mcp", headers={"Mcp-Session-Id": "x"})
    assert reply.status == 405 and reply.headers["allow"] == "POST"
    reply = request(server.port, "GET", "/sse")
    assert reply.status == 404 and "--stateless" in reply.json()["error"]


# -- shutdown ----------------------------------------------------------------------------------


def test_sigterm_lame_ducks_then_lets_the_call_finish_and_exits_0(serve, fake):
    server = serve(config=http_config(lameduck_s=1, drain_s=10))
    fake.enqueue(Reply(event_delay=0.1))
    session = open_session(server.port)
    pending = in_background(post, server.port, rpc("tools/call", call_params(), id=5), session)
    fake.wait_for_requests(1)
    server.proc.send_signal(signal.SIGTERM)
    health = wait_until(
        lambda: (r := request(server.port, "GET", "/healthz")).status == 503 and r, 3, "503"
    )
    assert health.json()["status"] == "draining" and health.json()["in_flight"] == 1
    reply = pending()
    assert reply.status == 200 and reply.json()["result"]["structuredContent"]["answer"]
    assert server.wait(10) == 0
    assert "stopping: /healthz answers 503 for 1 s" in server.stderr
    with pytest.raises(OSError):
        request(server.port, "GET", "/healthz", timeout=2)


def test_sigterm_cancels_calls_still_running_after_drain_s(serve, fake):
    server = serve(config=http_config(lameduck_s=0, drain_s=1))
    fake.enqueue(Reply(stall_after_events=2))
    session = open_session(server.port)
    pending = in_background(post, server.port, rpc("tools/call", call_params(), id=5), session)
    fake.wait_for_requests(1)
    server.proc.send_signal(signal.SIGTERM)
    fake.wait_for_disconnect(0, timeout=5)
    assert server.wait(5) == 0
    assert "cancelled 1 call(s) still running after 1 s" in server.stderr
    reply = pending()
    assert reply.status == 200
    assert reply.json()["id"] == 5
    assert "the server is shutting down" in reply.json()["error"]["message"]


def test_sigterm_ends_cut_calls_on_event_streams_with_an_error_event(serve, fake):
    server = serve(config=http_config(lameduck_s=0, drain_s=1))
    fake.enqueue(Reply(stall_after_events=2), Reply(stall_after_events=2))
    session = open_session(server.port)
    message = rpc("tools/call", call_params(token="t"), id=6)
    pending = in_background(post, server.port, message, session)
    stream, endpoint = open_sse(server.port)
    legacy_call = rpc("tools/call", call_params("another question"), id=7)
    assert post(server.port, legacy_call, path=endpoint).status == 202
    fake.wait_for_requests(2)
    server.proc.send_signal(signal.SIGTERM)
    legacy = stream.next_message()
    assert legacy["id"] == 7 and "the server is shutting down" in legacy["error"]["message"]
    assert stream.next_event() is None
    _, last = pending().events()[-1]
    assert last["id"] == 6 and "(server.http.drain_s)" in last["error"]["message"]
    assert server.wait(5) == 0


def test_sigint_with_nothing_in_flight_stops_at_once_and_frees_the_port(serve, spawn, fake):
    server = serve(config=http_config(lameduck_s=60, drain_s=60))
    session = open_session(server.port)
    assert post(server.port, rpc("ping"), session).status == 200
    kept = raw_connection(server.port)  # the server closes it first: TIME_WAIT on its port
    kept.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    assert kept.recv(65536).startswith(b"HTTP/1.1 200 ")
    server.proc.send_signal(signal.SIGINT)
    assert server.wait(10) == 0  # not lameduck_s
    assert "/healthz answers 503" not in server.stderr
    assert read_until_closed(kept, 5) == b""
    again = spawn("--http", f"127.0.0.1:{server.port}", upstream=fake)
    assert wait_listening(again) == server.port, again.stderr
    kept.close()


def test_sigint_drains_calls_in_flight_and_a_second_one_stops_now(serve, fake):
    server = serve(config=http_config(lameduck_s=60, drain_s=60))
    fake.enqueue(Reply(stall_after_events=2))
    session = open_session(server.port)
    pending = in_background(post, server.port, rpc("tools/call", call_params(), id=9), session)
    fake.wait_for_requests(1)
    server.proc.send_signal(signal.SIGINT)
    wait_until(lambda: "calls in flight get 60 s (Ctrl-C again" in server.stderr, what="drain")
    with pytest.raises(OSError):  # no longer accepting: the port is free already
        request(server.port, "GET", "/healthz", timeout=2)
    assert server.proc.poll() is None and fake.requests[0].client_disconnected_at is None
    server.proc.send_signal(signal.SIGINT)
    assert server.wait(10) == 0
    message = pending().json()["error"]["message"]
    assert message.startswith("the server is shutting down and cancelled this call at a second")


# -- the official MCP Python SDK -----------------------------------------------------------------


def sdk_streamable(url, headers=None):
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    class Connection:
        async def __aenter__(self):
            self.http = await create_mcp_http_client(headers=headers).__aenter__()
            transport = streamable_http_client(url, http_client=self.http, terminate_on_close=True)
            self.client = Client(transport, mode="legacy")
            return await self.client.__aenter__()

        async def __aexit__(self, *exc):
            try:
                await self.client.__aexit__(*exc)
            finally:
                await self.http.__aexit__(None, None, None)

    return Connection()


def sdk_sse(url, headers=None):
    from mcp import Client
    from mcp.client.sse import sse_client

    return Client(sse_client(url, headers=headers, timeout=5, sse_read_timeout=300), mode="legacy")


def answer_of(result) -> dict:
    return json.loads(result.content[0].text)


@pytest.mark.parametrize("kind", ["streamable", "sse"])
def test_sdk_client_lists_tools_and_calls_answer_with_progress(serve, fake, kind):
    server = serve()
    fake.enqueue(Reply(searches=[SEARCH], event_delay=0.03))
    progress = []

    async def on_progress(value, total, message):
        progress.append((value, message))

    async def main():
        base = f"http://127.0.0.1:{server.port}"
        connect = sdk_streamable(f"{base}/mcp") if kind == "streamable" else sdk_sse(f"{base}/sse")
        async with connect as client:
            tools = await client.list_tools()
            result = await client.call_tool(
                "answer", {"query": "What is HTTP 404?"}, progress_callback=on_progress
            )
            return tools, result

    tools, result = anyio.run(main)
    assert [tool.name for tool in tools.tools] == ["answer", "answer_detailed", "answer_quick"]
    assert answer_of(result)["used_search"] is True
    assert progress and progress[0][0] == 1
    if kind == "streamable":  # the client said goodbye with DELETE
        wait_until(lambda: request(server.port, "GET", "/healthz").json()["sessions"] == 0)


@pytest.mark.parametrize("kind", ["streamable", "sse"])
def test_sdk_client_timeout_cancels_the_upstream_request(serve, fake, kind):
    from mcp.shared.exceptions import MCPError

    server = serve()
    fake.enqueue(Reply(), Reply(stall_after_events=2), Reply())

    async def main():
        base = f"http://127.0.0.1:{server.port}"
        connect = sdk_streamable(f"{base}/mcp") if kind == "streamable" else sdk_sse(f"{base}/sse")
        async with connect as client:
            # A first call loads `openai`, so the second reaches upstream before it times out.
            await client.call_tool("answer", {"query": "warm up"})
            try:
                await client.call_tool("answer", {"query": "q"}, read_timeout_seconds=0.5)
            except MCPError as exc:
                error = exc
            # The cancelled call's POST ends with a "Request cancelled" error, which the
            # client takes in its stride. (Closing the client while such a late reply is
            # still on its way makes the SDK client raise BrokenResourceError, with any server.)
            await anyio.to_thread.run_sync(fake.wait_for_disconnect, 1)
            after = await client.call_tool("answer", {"query": "after"})
            return error, after

    error, after = anyio.run(main)
    assert error is not None and "timed out" in str(error).lower()
    assert answer_of(after)["answer"]


def test_sdk_client_with_a_token(serve, fake):
    server = serve(env={"MCP_HTTP_TOKEN": TOKEN})

    async def main(headers):
        async with sdk_streamable(f"http://127.0.0.1:{server.port}/mcp", headers) as client:
            return await client.call_tool("answer", {"query": "q"})

    assert answer_of(anyio.run(main, {"Authorization": f"Bearer {TOKEN}"}))["answer"]


@pytest.mark.parametrize(
    ("eras", "expected"), [("both", "2026-07-28"), ("handshake", "2025-11-25")]
)
def test_sdk_client_in_auto_mode_connects_at_once_in_the_era_the_server_offers(
    serve, eras, expected
):
    from mcp import Client

    server = serve(env={"MCP_PROTOCOL_ERAS": eras})

    async def main():
        started = time.monotonic()
        async with Client(f"http://127.0.0.1:{server.port}/mcp") as client:
            await client.list_tools()
            return time.monotonic() - started, client.protocol_version

    elapsed, version = anyio.run(main)
    assert version == expected
    assert elapsed < 10, elapsed  # no probe left to time out first (a bound, not a speed figure)


# -- behind nginx: two stateless instances -----------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


NGINX_CONF = """\
worker_processes 1;
master_process off;
daemon off;
pid {dir}/nginx.pid;
error_log {dir}/error.log warn;
events {{ worker_connections 64; }}
http {{
    access_log off;
    client_body_temp_path {dir}/body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;
    upstream mcp {{
        server 127.0.0.1:{a};
        server 127.0.0.1:{b};
    }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://mcp;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host localhost;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
            proxy_buffering off;
            proxy_read_timeout 600s;
        }}
    }}
}}
"""


@pytest.mark.skipif(
    shutil.which("nginx") is None, reason="nginx is not installed (apt-get install nginx)"
)
def test_two_stateless_instances_behind_nginx_serve_one_sdk_session(serve, fake, tmp_path):
    first, second = serve("--stateless", "--debug"), serve("--stateless", "--debug")
    fake.enqueue(Reply(searches=[SEARCH], event_delay=0.02))
    with behind_nginx(tmp_path, first.port, second.port) as port:
        progress = []

        async def on_progress(value, total, message):
            progress.append(value)

        async def main():
            async with sdk_streamable(f"http://127.0.0.1:{port}/mcp") as client:
                tools = await client.list_tools()
                result = await client.call_tool(
                    "answer", {"query": "q"}, progress_callback=on_progress
                )
                return tools, result

        tools, result = anyio.run(main)
        assert len(tools.tools) == 3
        assert answer_of(result)["used_search"] is True and progress
        for instance in (first, second):  # round robin: both answered part of the session
            assert "POST /mcp -> 200" in instance.stderr


def _connectable(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
        return True
    except OSError:
        return False


@contextlib.contextmanager
def behind_nginx(tmp_path, a_port: int, b_port: int):
    """nginx spreading requests over two instances (NGINX_CONF); yields the port it listens on."""
    port = free_port()
    conf = tmp_path / "nginx.conf"
    conf.write_text(NGINX_CONF.format(dir=tmp_path, a=a_port, b=b_port, port=port))
    nginx = subprocess.Popen(
        ["nginx", "-c", str(conf), "-p", str(tmp_path), "-e", str(tmp_path / "error.log")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        wait_until(lambda: _connectable(port), 5, "nginx listening")
        yield port
    finally:
        nginx.terminate()
        nginx.wait(5)


# -- the dispatcher is shared: the same behaviour over stdio and HTTP ----------------------------


@pytest.fixture(params=["stdio", "http"])
def ask(request, spawn, serve):
    """ask(method, params) -> the JSON-RPC reply, over the transport in the param."""
    if request.param == "stdio":
        server = spawn()
        server.initialize()
        return server.request
    server = serve()
    session = open_session(server.port)

    def over_http(method, params=None):
        reply = post(server.port, rpc(method, params, id=77), session)
        assert reply.status == 200
        return reply.json()

    return over_http


def test_shared_ping(ask):
    assert ask("ping")["result"] == {}


def test_shared_tools_list(ask):
    tools = ask("tools/list")["result"]["tools"]
    assert [tool["name"] for tool in tools] == ["answer", "answer_detailed", "answer_quick"]


def test_shared_invalid_params(ask):
    error = ask("tools/call", {"name": "answer", "arguments": {}})["error"]
    assert error["code"] == -32602 and "query" in error["message"]


def test_shared_unknown_tool(ask):
    error = ask("tools/call", {"name": "nope", "arguments": {"query": "q"}})["error"]
    assert error["code"] == -32601 and "available tools: answer" in error["message"]


def test_shared_params_must_be_an_object(ask):
    error = ask("tools/call", ["answer", {"query": "q"}])["error"]
    assert error["code"] == -32602 and "'params' must be an object" in error["message"]


def test_a_request_without_a_token_while_the_users_cannot_be_read_gets_503_not_401(serve, tmp_path):
    """A server on 127.0.0.1 with no token asks for one only once its state has had a named
    user; while the users cannot be read (a store another instance is still making, an
    outage) that is a guess, and a 401 would send the client to sign in for nothing (seen as
    a flake of two --stateless instances starting at once): 503 with Retry-After instead."""
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    server = serve(config=f"state:\n  path: {json.dumps(str(blocker / 'state.sqlite3'))}\n")
    reply = post(server.port, rpc("initialize", INIT_PARAMS))
    assert reply.status == 503, reply.body
    assert reply.headers.get("retry-after") == "2"
    assert b"cannot tell now whether this server needs a token" in reply.body
