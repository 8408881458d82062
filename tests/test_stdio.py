"""End to end over real pipes: framing, bad input, concurrency, cancellation, EOF and signals."""

from __future__ import annotations

import contextlib
import itertools
import json
import re
import signal
import sqlite3
import time

import pytest
from conftest import bare_stdio, wait_until
from fake_upstream import Reply
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

SMALL_LIMIT = "server:\n  max_message_bytes: 2048\n"


def rpc(method: str, request_id=None, params=None) -> dict:
    message = {"jsonrpc": "2.0", "method": method}
    if request_id is not None:
        message["id"] = request_id
    if params is not None:
        message["params"] = params
    return message


def as_line(message: dict) -> bytes:
    return json.dumps(message).encode() + b"\n"


def as_frame(message: dict) -> bytes:
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def call_message(request_id, query: str = "What is HTTP 404?", **params) -> dict:
    arguments = {"query": query}
    return rpc("tools/call", request_id, {"name": "answer", "arguments": arguments, **params})


def parse_stdout(raw: bytes) -> list[dict]:
    """Every byte of stdout as whole JSON-RPC messages, in either framing; nothing left over."""
    messages, pos = [], 0
    while pos < len(raw):
        if raw.startswith(b"Content-Length: ", pos):
            head_end = raw.index(b"\r\n\r\n", pos)
            length = int(raw[pos + 16 : head_end])
            body = raw[head_end + 4 : head_end + 4 + length]
            assert len(body) == length, "truncated frame on stdout"
            pos = head_end + 4 + length
        else:
            newline = raw.index(b"\n", pos)
            body, pos = raw[pos:newline], newline + 1
        message = json.loads(body)
        assert message["jsonrpc"] == "2.0"
        messages.append(message)
    return messages


def finish(server) -> list[dict]:
    """Closes stdin, waits for exit 0, and returns every message stdout carried."""
    server.close_stdin()
    assert server.wait() == 0, server.stderr
    server.reader.join(5)
    return parse_stdout(bytes(server.reader.raw))


def error_code(reply: dict) -> int:
    assert "error" in reply, reply
    return reply["error"]["code"]


# -- Framing follows the client --------------------------------------------------------------------


def test_framed_requests_get_framed_replies(spawn):
    server = spawn()
    assert server.initialize(framing="framed")["result"]["protocolVersion"]
    assert server.request("ping", framing="framed")["result"] == {}
    assert server.reader.framings == ["framed", "framed"]


def test_line_requests_get_line_replies(spawn):
    server = spawn()
    server.initialize(framing="line")
    server.request("ping", framing="line")
    assert server.reader.framings == ["line", "line"]


def test_replies_switch_to_line_mode_once_a_line_message_arrives(spawn):
    server = spawn()
    server.request("ping", framing="framed")
    server.request("ping", framing="line")
    server.request("ping", framing="framed")
    assert server.reader.framings == ["framed", "line", "line"]


def test_mcp_line_mode_forces_line_replies_to_framed_requests(spawn):
    server = spawn(env={"MCP_LINE_MODE": "1"})
    server.initialize(framing="framed")
    server.request("ping", framing="framed")
    assert server.reader.framings == ["line", "line"]


def test_several_messages_in_one_write_are_all_answered(spawn):
    server = spawn()
    server.write(
        as_frame(rpc("ping", 1)) + as_frame(rpc("tools/list", 2)) + as_frame(rpc("ping", 3))
    )
    ids = [server.recv()["id"] for _ in range(3)]
    assert ids == [1, 2, 3]


def test_message_written_one_byte_at_a_time_is_answered(spawn):
    server = spawn()
    data = as_frame(rpc("ping", "bytewise"))
    for i in range(len(data)):
        server.write(data[i : i + 1])
    assert server.recv() == {"jsonrpc": "2.0", "id": "bytewise", "result": {}}


def test_utf8_body_framed_by_its_byte_length_is_answered(spawn):
    server = spawn()
    body = json.dumps(rpc("ping", "日本語-😀"), ensure_ascii=False).encode()
    server.write(b"Content-Length: %d\r\n\r\n" % len(body) + body + as_frame(rpc("ping", 2)))
    assert server.recv()["id"] == "日本語-😀"
    assert server.recv()["id"] == 2


def test_garbage_is_skipped_with_a_warning_and_stdout_stays_pure(spawn):
    server = spawn()
    server.write(b"npm WARN something odd\nTraceback: not json\n" + as_line(rpc("ping", 1)))
    assert server.recv() == {"jsonrpc": "2.0", "id": 1, "result": {}}
    wait_until(lambda: "skipped" in server.stderr, what="a warning on stderr")
    assert finish(server) == [{"jsonrpc": "2.0", "id": 1, "result": {}}]


# -- After each bad message the server still answers ping ------------------------------------------

OVERSIZED = b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"' + b"x" * 5000 + b'"}}'

BAD_MESSAGES = {
    "parse-error-line": (b"{not json}\n", -32700),
    "parse-error-framed": (b"Content-Length: 10\r\n\r\n{not json}", -32700),
    "invalid-utf8": (b'{"jsonrpc":"2.0","id":1,"method":"\xff\xfe"}\n', -32700),
    "oversized-line": (OVERSIZED + b"\n", -32600),
    "oversized-framed": (b"Content-Length: %d\r\n\r\n" % len(OVERSIZED) + OVERSIZED, -32600),
    "batch": (as_line([rpc("ping", 1), rpc("ping", 2)]), -32600),
    "not-an-object": (b'Content-Length: 6\r\n\r\n"ping"', -32600),
    "unknown-method": (as_line(rpc("resources/list", 1)), -32601),
    "unknown-tool": (as_line(rpc("tools/call", 1, {"name": "nope", "arguments": {}})), -32601),
    "invalid-params": (as_line(call_message(1, query=5)), -32602),
    "params-not-object": (as_line(rpc("ping", 1, [1])), -32602),
}


@pytest.mark.parametrize(("data", "code"), BAD_MESSAGES.values(), ids=BAD_MESSAGES.keys())
def test_bad_message_gets_an_error_and_ping_still_works(spawn, data, code):
    server = spawn(config=SMALL_LIMIT)
    server.write(data)
    assert error_code(server.recv()) == code
    assert server.request("ping")["result"] == {}


def test_oversized_message_error_names_the_limit_setting(spawn):
    server = spawn(config=SMALL_LIMIT)
    server.write(OVERSIZED + b"\n")
    reply = server.recv()
    assert reply["id"] is None
    assert "server.max_message_bytes" in reply["error"]["message"]
    assert "2048" in reply["error"]["message"]


# -- Concurrency -----------------------------------------------------------------------------------


def test_200_concurrent_large_answers_never_interleave(spawn, fake):
    text = ("The quick brown fox jumps over the lazy dog. " * 500)[:20_000]
    fake.default = Reply(text=text)
    server = spawn(upstream=fake, config="server:\n  max_calls: 200\n")
    server.initialize()
    server.write(b"".join(as_line(call_message(i)) for i in range(200)))
    replies = [server.recv(timeout=60) for _ in range(200)]
    assert sorted(r["id"] for r in replies) == list(range(200))
    for reply in replies:
        assert reply["result"]["structuredContent"]["answer"] == text.strip()
    calls = [m for m in finish(server) if "content" in m.get("result", {})]
    assert sorted(m["id"] for m in calls) == list(range(200))


def test_ping_is_answered_while_a_call_is_in_flight(spawn, fake):
    fake.enqueue(Reply(stall_after_events=2))
    server = spawn(upstream=fake)
    server.initialize()
    server.send(call_message("slow"))
    fake.wait_for_requests(1)
    assert server.request("ping", timeout=2)["result"] == {}
    assert server.nothing_within(0.05)


# -- Cancellation ----------------------------------------------------------------------------------


def test_cancelled_call_is_never_answered_and_upstream_is_hung_up(spawn, fake):
    fake.enqueue(Reply(stall_after_events=2))
    server = spawn(upstream=fake)
    server.initialize()
    server.send(call_message("doomed"))
    fake.wait_for_requests(1)
    server.send(rpc("notifications/cancelled", params={"requestId": "doomed", "reason": "stop"}))
    fake.wait_for_disconnect(0, timeout=2)
    assert server.nothing_within(1.0)
    assert server.request("ping")["result"] == {}
    after = server.call("answer", {"query": "still serving?"})
    assert "result" in after
    assert all(m.get("id") != "doomed" for m in finish(server))


# -- End of input, signals, closed stdout ----------------------------------------------------------


def test_end_of_input_lets_the_call_in_flight_finish_then_exits_0(spawn, fake):
    fake.enqueue(Reply(event_delay=0.03))
    server = spawn(upstream=fake)
    server.initialize()
    server.send(call_message(7))
    fake.wait_for_requests(1)
    server.close_stdin()
    reply, _ = server.recv_until(lambda m: m.get("id") == 7)
    assert "result" in reply
    assert server.wait() == 0


def test_one_shot_pipeline_answers_everything_then_exits_0(spawn):
    """Like `printf '...' | openai-responses-mcp --stdio`."""
    server = spawn()
    init = rpc("initialize", 1, {"protocolVersion": "2025-06-18", "capabilities": {}})
    server.write(
        as_line(init) + as_line(rpc("notifications/initialized")) + as_line(rpc("tools/list", 2))
    )
    messages = finish(server)
    assert [m["id"] for m in messages] == [1, 2]
    assert len(messages[1]["result"]["tools"]) == 3


def test_a_last_line_without_a_newline_is_still_answered_at_end_of_input(spawn):
    """Like `printf '{...}' | openai-responses-mcp --stdio`, with no trailing newline."""
    server = spawn()
    server.write(as_line(rpc("ping", 1)) + as_line(rpc("ping", 2)).rstrip(b"\n"))
    messages = finish(server)
    assert [m["id"] for m in messages] == [1, 2]


def state_is_made(tmp_path) -> bool:
    """Whether the server's state file has its tables and its schema version."""
    path = tmp_path / "xdg-state" / "openai-responses-mcp" / "state.sqlite3"
    if not path.exists():
        return False
    with contextlib.closing(sqlite3.connect(path, timeout=0.1)) as conn:
        try:
            return conn.execute("SELECT COUNT(*) FROM schema_version").fetchone()[0] == 1
        except sqlite3.OperationalError:  # not made yet, or being made
            return False


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_with_a_call_in_flight_exits_within_1s_and_hangs_up(spawn, fake, signum, tmp_path):
    fake.enqueue(Reply(stall_after_events=2))
    server = spawn(upstream=fake)
    server.initialize()
    server.send(call_message("stalled"))
    fake.wait_for_requests(1)
    # The state is opened while the call is in flight (the tests' cache is off and no budget
    # is set, so nothing else opens it): the second after the signal is left only the call's
    # row to write, not the driver's import and the tables' making (over a second under load).
    wait_until(lambda: state_is_made(tmp_path), 10, "the state opened during the call")
    started = time.monotonic()
    server.proc.send_signal(signum)
    server.proc.wait(timeout=1)
    assert time.monotonic() - started < 1.0
    fake.wait_for_disconnect(0, timeout=1)
    assert "Traceback" not in server.stderr


def test_closed_stdout_ends_the_process_quietly(tmp_path):
    with bare_stdio(tmp_path) as proc:
        proc.stdout.close()
        proc.stdin.write(as_line(rpc("ping", 1)))
        proc.stdin.flush()
        assert proc.wait(timeout=5) == 0
        assert b"Traceback" not in proc.stderr.read()


def test_initialize_tools_list_and_ping_do_not_import_openai(spawn):
    server = spawn(env={"PYTHONPROFILEIMPORTTIME": "1"})
    server.write(
        as_line(rpc("initialize", 1, {"protocolVersion": "2025-06-18", "capabilities": {}}))
        + as_line(rpc("notifications/initialized"))
        + as_line(rpc("tools/list", 2))
        + as_line(rpc("ping", 3))
    )
    messages = finish(server)
    assert [m["id"] for m in messages] == [1, 2, 3]
    trace = [line for line in server.stderr.splitlines() if line.startswith("import time:")]
    assert any(line.rstrip().endswith("| threading") for line in trace), "no import trace"
    imported = [line.rsplit("|", 1)[1].strip() for line in trace]
    assert [name for name in imported if re.match(r"openai(\.|$)", name)] == []


# -- One bad frame never wedges the session (issue 11.2) -------------------------------------------

PING_BODY = json.dumps(rpc("ping", "bad-body")).encode()
BAD_FRAMES = {
    "negative-length": b"Content-Length: -2\r\n\r\n" + PING_BODY,
    "plus-sign": b"Content-Length: +2\r\n\r\n" + PING_BODY,
    "space-before-colon": b"Content-Length : 2\r\n\r\n" + PING_BODY,
    "no-content-length": b"Content-Type: application/json\r\n\r\n" + PING_BODY,
    "too-small": b"Content-Length: 5\r\n\r\n" + PING_BODY,
    "too-large": b"Content-Length: %d\r\n\r\n" % (len(PING_BODY) + 8) + PING_BODY,
    "too-large-by-far": b"Content-Length: %d\r\n\r\n" % (len(PING_BODY) + 5000) + PING_BODY,
}


@pytest.mark.parametrize("bad", BAD_FRAMES.values(), ids=BAD_FRAMES.keys())
def test_bad_frame_gets_one_error_and_later_frames_are_answered_framed(spawn, bad):
    server = spawn()
    server.initialize(framing="framed")
    server.write(bad + as_frame(rpc("ping", "after-1")) + as_frame(rpc("ping", "after-2")))
    error = server.recv()
    assert error["id"] is None
    assert error_code(error) == -32700
    assert "Content-Length" in error["error"]["message"] or "header" in error["error"]["message"]
    assert server.recv() == {"jsonrpc": "2.0", "id": "after-1", "result": {}}
    assert server.recv() == {"jsonrpc": "2.0", "id": "after-2", "result": {}}
    assert server.request("ping", framing="framed")["result"] == {}
    assert set(server.reader.framings) == {"framed"}
    assert all(m.get("id") != "bad-body" for m in finish(server))


def test_a_length_too_large_by_far_is_refused_when_the_next_frame_arrives(spawn):
    """A client that waits for each answer: its next frame must not fill the missing bytes."""
    server = spawn("--stdio", "--debug")  # --debug: it logs each read of stdin
    server.initialize(framing="framed")
    reads = server.stderr.count("stdin bytes=")
    server.write(BAD_FRAMES["too-large-by-far"])
    # read apart: the server cannot know yet that the length is wrong
    wait_until(lambda: server.stderr.count("stdin bytes=") > reads, 10, "the bad frame read")
    server.send(rpc("ping", "after"), "framed")
    reply, before = server.recv_until(lambda m: m.get("id") == "after", timeout=10)
    assert reply["result"] == {}
    assert [error_code(m) for m in before] == [-32700]
    assert f"Content-Length {len(PING_BODY) + 5000} is longer" in before[0]["error"]["message"]
    assert server.reader.framings == ["framed"] * 3


def test_bad_frame_then_a_frame_sent_after_the_error_is_answered(spawn):
    """A client that waits for the error before it writes again."""
    server = spawn()
    server.write(BAD_FRAMES["negative-length"])
    assert error_code(server.recv()) == -32700
    assert server.request("ping", framing="framed")["result"] == {}
    assert server.reader.framings == ["framed", "framed"]


BAD_INPUTS = st.lists(
    st.sampled_from(list(BAD_FRAMES.values()))
    # Garbage never holds a whole header name: bytes that make a valid header ARE a frame.
    | st.binary(max_size=80).filter(lambda b: b"ength" not in b.lower()).map(lambda b: b + b"\n")
    | st.sampled_from([b"42\n", b"null\n", b'"hi"\n', b"{not json}\n"]),
    min_size=1,
    max_size=3,
)


def test_after_any_bad_input_the_next_valid_message_is_answered(spawn):
    """One server, many examples: each writes bad input then a ping it must see answered."""
    server = spawn()
    markers = itertools.count()

    @settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(bad=BAD_INPUTS, framing=st.sampled_from(["line", "framed"]))
    def next_message_is_answered(bad, framing):
        marker = f"next-{next(markers)}"
        # A line client ends what it writes with a newline; a framed client does not.
        ending = b"\n" if framing == "line" else b""
        encode = as_line if framing == "line" else as_frame
        server.write(b"".join(item + ending for item in bad) + encode(rpc("ping", marker)))
        reply, _ = server.recv_until(lambda m: m.get("id") == marker, timeout=10)
        assert reply["result"] == {}

    next_message_is_answered()
    assert "Traceback" not in server.stderr


# -- Odd stdio inputs (issue 11.19) ----------------------------------------------------------------


@pytest.mark.parametrize("text", [b"42", b'"hello"', b"null", b"true", b"-1.5"])
def test_a_json_line_that_is_not_an_object_gets_invalid_request(spawn, text):
    server = spawn()
    server.write(text + b"\n")
    reply = server.recv()
    assert reply["id"] is None
    assert error_code(reply) == -32600
    assert "JSON object" in reply["error"]["message"]
    assert server.request("ping")["result"] == {}
    assert "skipped" not in server.stderr


def test_an_oversized_first_line_is_answered_in_ndjson(spawn):
    server = spawn(config=SMALL_LIMIT)
    server.write(OVERSIZED + b"\n")
    assert error_code(server.recv()) == -32600
    assert server.reader.framings == ["line"]


def test_a_framed_client_stays_framed_after_a_garbled_line(spawn):
    server = spawn()
    server.initialize(framing="framed")
    server.write(b"{not json}\n")
    assert error_code(server.recv()) == -32700
    server.request("ping", framing="framed")
    assert set(server.reader.framings) == {"framed"}


def test_a_huge_integer_id_is_echoed_exactly(spawn):
    server = spawn()
    huge = 123456789012345678901234567890
    server.write(b'{"jsonrpc":"2.0","id":%d,"method":"ping"}\n' % huge)
    assert server.recv() == {"jsonrpc": "2.0", "id": huge, "result": {}}
    assert b'"id":123456789012345678901234567890,' in bytes(server.reader.raw)


def test_an_id_of_thousands_of_digits_is_refused_as_such(spawn):
    server = spawn()
    server.write(b'{"jsonrpc":"2.0","id":' + b"9" * 5000 + b',"method":"ping"}\n')
    reply = server.recv()
    assert error_code(reply) == -32700
    assert reply["error"]["message"] == "Parse error: a number in the message has too many digits"


@pytest.mark.parametrize(("raw", "shown"), [(b"1e400", "Infinity"), (b"1.5", "1.5")])
def test_a_non_integer_numeric_id_is_refused_naming_it(spawn, raw, shown):
    server = spawn()
    server.write(b'{"jsonrpc":"2.0","id":' + raw + b',"method":"ping"}\n')
    reply = server.recv()
    assert error_code(reply) == -32600
    assert reply["error"]["message"].endswith(f"must be a string or an integer, got {shown}")


@pytest.mark.parametrize("token", [7, 0, 123456789012345678901234567890])
def test_an_integer_progress_token_gets_progress(spawn, fake, token):
    """MCP: "Progress tokens MUST be a string or integer value"."""
    fake.enqueue(Reply(event_delay=0.05))
    server = spawn(upstream=fake)
    server.initialize()
    server.send(call_message("numeric", _meta={"progressToken": token}))
    reply, before = server.recv_until(lambda m: m.get("id") == "numeric", timeout=20)
    assert "result" in reply
    notices = [m for m in before if m.get("method") == "notifications/progress"]
    assert notices
    assert all(n["params"]["progressToken"] == token for n in notices)


@pytest.mark.parametrize(("name", "value"), [("recency_days", 1.5), ("max_results", 2.7)])
def test_fractional_counts_are_refused_before_any_request(spawn, fake, name, value):
    server = spawn(upstream=fake)
    server.initialize()
    reply = server.call("answer", {"query": "q", name: value})
    assert error_code(reply) == -32602
    assert f"'{name}' must be a whole number" in reply["error"]["message"]
    assert fake.requests == []


# -- Lone surrogates (issue 11.10) and logging that never changes a reply (11.20) ------------------


def test_a_lone_surrogate_in_the_query_is_invalid_params_before_any_request(spawn, fake):
    server = spawn(upstream=fake)
    server.initialize()
    server.write(
        b'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"answer",'
        b'"arguments":{"query":"what is \\ud800?"}}}\n'
    )
    reply = server.recv()
    assert reply["id"] == 3
    assert error_code(reply) == -32602
    assert "lone surrogate" in reply["error"]["message"]
    assert fake.requests == []


@pytest.mark.parametrize("to_file", [False, True], ids=["stderr", "debug-file"])
def test_debug_logging_of_a_lone_surrogate_never_changes_the_reply(spawn, tmp_path, to_file):
    args = ["--stdio", "--debug"] + ([str(tmp_path / "debug.log")] if to_file else [])
    server = spawn(*args)
    server.write(b'{"jsonrpc":"2.0","id":5,"method":"\\ud800"}\n')
    reply = server.recv()
    assert reply["id"] == 5
    assert error_code(reply) == -32601
    assert server.request("ping")["result"] == {}
    wait_until(lambda: "recv method=\\ud800" in server.stderr, what="the escaped debug line")
    if to_file:
        assert "recv method=\\ud800" in (tmp_path / "debug.log").read_text(encoding="utf-8")


# -- A cap on calls in flight (issue 11.14) --------------------------------------------------------


def test_a_call_over_server_max_calls_is_refused_at_once_naming_the_key(spawn, fake):
    fake.enqueue(Reply(stall_after_events=2), Reply(stall_after_events=2))
    server = spawn(upstream=fake, config="server:\n  max_calls: 2\n")
    server.initialize()
    server.write(as_line(call_message("a", "first")) + as_line(call_message("b", "second")))
    fake.wait_for_requests(2)
    reply = server.call("answer", {"query": "one too many"}, timeout=5)
    assert error_code(reply) == -32000
    assert reply["error"]["message"] == (
        "too many calls in flight (2, server.max_calls); wait for one to finish or raise the limit"
    )
    assert len(fake.requests) == 2
    for request_id in ("a", "b"):
        server.send(rpc("notifications/cancelled", params={"requestId": request_id}))
    fake.wait_for_disconnect(0, timeout=10)
    fake.wait_for_disconnect(1, timeout=10)
    wait_until(lambda: "result" in server.call("answer", {"query": "room now"}), timeout=20)


# -- A vanished client (issue 11.15) ---------------------------------------------------------------


def test_end_of_input_with_stdout_closed_cancels_the_call_and_exits_at_once(tmp_path, fake):
    fake.enqueue(Reply(stall_after_events=2))
    with bare_stdio(tmp_path, OPENAI_BASE_URL=fake.base_url) as proc:
        proc.stdin.write(as_line(call_message("stalled")))
        proc.stdin.flush()
        fake.wait_for_requests(1, timeout=20)
        proc.stdout.close()
        proc.stdin.close()
        assert proc.wait(timeout=10) == 0  # not request.timeout_ms (300 s)
        fake.wait_for_disconnect(0, timeout=5)
        assert b"Traceback" not in proc.stderr.read()


def test_a_failed_write_to_stdout_cancels_the_call_in_flight_and_exits_at_once(tmp_path, fake):
    fake.enqueue(Reply(stall_after_events=2))
    with bare_stdio(tmp_path, OPENAI_BASE_URL=fake.base_url) as proc:
        proc.stdin.write(as_line(call_message("stalled")))
        proc.stdin.flush()
        fake.wait_for_requests(1, timeout=20)
        proc.stdout.close()
        proc.stdin.write(as_line(rpc("ping", 2)))  # its reply cannot be written: the client left
        proc.stdin.flush()
        assert proc.wait(timeout=10) == 0  # stdin still open, the call still stalled
        fake.wait_for_disconnect(0, timeout=5)
        assert b"Traceback" not in proc.stderr.read()


# -- Transport debug lines (issue 13.4) ------------------------------------------------------------


def test_debug_shows_transport_sizes_and_never_the_query(spawn, fake):
    server = spawn("--stdio", "--debug", upstream=fake)
    server.initialize(framing="framed")
    secret = "my very private question about zebras"
    body = json.dumps(call_message("dbg", query=secret)).encode()
    server.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    server.recv_until(lambda m: m.get("id") == "dbg", timeout=20)
    finish(server)
    log = server.stderr
    assert re.search(r"stdio: stdin bytes=\d+", log)
    assert f"stdio: frame header length={len(body)}" in log
    assert re.search(r"stdio: send framing=content-length bytes=\d+", log)
    assert secret not in log
    assert "zebras" not in log


def test_debug_names_line_framing_for_line_clients(spawn):
    server = spawn("--stdio", "--debug")
    server.request("ping")
    finish(server)
    assert "stdio: send framing=line bytes=" in server.stderr
    assert "frame header length=" not in server.stderr


def test_no_transport_lines_without_debug(spawn):
    server = spawn()
    server.request("ping", framing="framed")
    finish(server)
    assert "stdin bytes=" not in server.stderr
    assert "send framing=" not in server.stderr
