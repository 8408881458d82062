"""A misbehaving upstream: every call ends in bounded time with the right `answer failed: ...`
message (or succeeds where a retry recovers), the server keeps serving, and nothing is left
behind: no worker thread, no call in flight.

Most tests drive the real Dispatcher, Session and AnswerEngine in this process against the
fake Responses API, so threads and in-flight calls can be counted exactly. The last group does
the same to the spawned program and counts its threads in /proc/PID/task.
"""

from __future__ import annotations

import itertools
import os
import threading
import time

import pytest
from conftest import TEST_KEY, Server, base_env, failure_of, wait_until
from fake_upstream import Reply

import openai_responses_mcp as m

FAST_RETRY = {"retry-after-ms": "10"}
TIGHT = "request: {max_retries: 2, timeout_ms: 1000}\n"
# Concurrent calls get a longer timeout: the fake's listen backlog is the stdlib's 5, so a burst
# of connections can meet the kernel's 1 s SYN retry, which is the fake's limit, not a fault.
CONCURRENT = "request: {max_retries: 2, timeout_ms: 5000}\n"
CONCURRENT_NO_RETRY = "request: {max_retries: 0, timeout_ms: 2500}\n"


class Outbox:
    """The session's outlet: every message the server sends outside a direct reply."""

    def __init__(self) -> None:
        self.messages: list[dict] = []
        self._cond = threading.Condition()

    def send(self, *messages: dict) -> None:
        with self._cond:
            self.messages.extend(messages)
            self._cond.notify_all()

    def reply_for(self, request_id, timeout: float) -> dict:
        def found():
            return next((msg for msg in self.messages if msg.get("id") == request_id), None)

        with self._cond:
            if not self._cond.wait_for(found, timeout):
                raise TimeoutError(f"no reply for {request_id!r} within {timeout} s")
            return found()

    def replies_for(self, request_id) -> list[dict]:
        with self._cond:
            return [msg for msg in self.messages if msg.get("id") == request_id]


class InProcess:
    """The real dispatcher and engine of one server, driven without its stdio transport."""

    def __init__(self, fake, home, config: str):
        (home / "config.yaml").write_text(config, encoding="utf-8")
        env = base_env(home, OPENAI_BASE_URL=fake.base_url)
        self.config = m.load_config({"config": str(home / "config.yaml")}, env)
        self.log = m.Log()
        self.dispatcher = m.Dispatcher(self.config, self.log, m.build_engine(self.config, self.log))
        self.outbox = Outbox()
        self.session = m.Session(self.outbox.send)
        self._ids = itertools.count(1)
        reply = self.handle("initialize", {"protocolVersion": "2025-06-18", "capabilities": {}})
        assert "result" in reply, reply

    def handle(self, method: str, params=None, request_id=None):
        message = {"jsonrpc": "2.0", "id": request_id or f"r{next(self._ids)}", "method": method}
        if params is not None:
            message["params"] = params
        return self.dispatcher.handle(message, self.session)

    def start_call(self, query: str = "q") -> str:
        request_id = f"c{next(self._ids)}"
        params = {"name": "answer", "arguments": {"query": query}}
        assert self.handle("tools/call", params, request_id) is None
        return request_id

    def call(self, query: str = "q", timeout: float = 15.0) -> dict:
        return self.outbox.reply_for(self.start_call(query), timeout)

    def cancel(self, request_id) -> None:
        note = {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": request_id},
        }
        assert self.dispatcher.handle(note, self.session) is None

    def ping(self) -> dict:
        return self.handle("ping")


def server_threads(baseline: set) -> list[threading.Thread]:
    """Threads started since `baseline` that belong to the server, not to the fake upstream."""
    return [
        thread
        for thread in threading.enumerate()
        if thread not in baseline
        and thread.is_alive()
        and "process_request_thread" not in thread.name
        and thread.name != "fake-responses-api"
    ]


def assert_nothing_left(server: InProcess, baseline: set) -> None:
    assert server.session.wait_idle(10), "calls still running"
    assert server.session.in_flight() == 0
    wait_until(
        lambda: not server_threads(baseline),
        10,
        f"no server thread left (left: {[t.name for t in server_threads(baseline)]})",
    )


OUTCOMES = ("HTTP 429", "HTTP 500", "dropped", "no answer within", "malformed", "model reported")
OUTCOMES += ("quota is exhausted",)


def kind_of(reply: dict) -> str:
    """ "ok", or which of OUTCOMES the failure's message names."""
    if "result" in reply:
        return "ok"
    message = failure_of(reply)
    return next(kind for kind in OUTCOMES if kind in message)


@pytest.fixture
def in_process(fake, tmp_path, monkeypatch):
    """in_process(config=YAML) -> a fresh InProcess server; on teardown, it must have left no
    call and no thread behind, and still answer ping and a clean call."""
    monkeypatch.setenv("OPENAI_API_KEY", TEST_KEY)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    for name in ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "https_proxy", "http_proxy"):
        monkeypatch.delenv(name, raising=False)
    # The ledger's writer thread ends once idle: after 1 s in production, after 50 ms here, so
    # that "no thread left" holds within the teardown rather than a second or two after it.
    monkeypatch.setattr(m, "_WRITER_IDLE_S", 0.05)
    baseline = set(threading.enumerate())
    made: list[InProcess] = []

    def make(config: str = TIGHT) -> InProcess:
        made.append(InProcess(fake, tmp_path, config))
        return made[-1]

    yield make
    for server in made:
        assert_nothing_left(server, baseline)
        assert server.ping()["result"] == {}
        fake.clear()
        fake.default = Reply()
        assert "result" in server.call(), "a clean call after the faults failed"
        assert_nothing_left(server, baseline)


# ============================================================================================
# Each fault, in process: bounded time, the right message, nothing left behind
# ============================================================================================

DROPPED = "the connection to {base} dropped after 2 retries: try again"
FAULTS = {
    "429-storm": (
        Reply(status=429, headers=FAST_RETRY),
        "rate limited by the API (HTTP 429) after 2 retries: wait a minute and try again",
    ),
    "500s": (
        Reply(status=500, headers=FAST_RETRY),
        "the API failed with HTTP 500 after 2 retries: try again later",
    ),
    "reset-mid-stream-fin": (Reply(drop_after_events=5), DROPPED),
    "reset-mid-stream-rst": (Reply(drop_after_events=5, drop_with_rst=True), DROPPED),
    "reset-before-any-event": (Reply(drop_after_events=0, drop_with_rst=True), DROPPED),
    "stalled-stream": (
        Reply(stall_after_events=3),
        "no answer within 1000 ms (request.timeout_ms): raise request.timeout_ms or use "
        "answer_quick",
    ),
    "no-headers": (
        Reply(delay_before_headers=30),
        "no answer within 1000 ms (request.timeout_ms): raise request.timeout_ms or use "
        "answer_quick",
    ),
    "trickle-outlasting-the-timeout": (
        Reply(event_delay=0.15),
        "no answer within 1000 ms (request.timeout_ms): raise request.timeout_ms or use "
        "answer_quick",
    ),
    "malformed-event": (Reply(malformed_after_events=4), "malformed response from {base}: "),
    "truncated-event": (
        Reply(
            body='event: response.created\ndata: {"type":"response.created","respon',
            content_type="text/event-stream",
        ),
        "malformed response from {base}: ",
    ),
    "stream-error-event": (
        Reply(stream_error={"code": "server_error"}),
        "the model reported an error after 2 retries: server_error: ",
    ),
    "404-model-not-found": (
        Reply(status=404),
        "model 'gpt-6.1-terra' is not available to this API key (HTTP 404; it may have shut "
        "down: https://developers.openai.com/api/docs/deprecations): ",
    ),
    "404-from-a-web-server": (
        Reply(status=404, body="<html><h1>Not Found</h1></html>", content_type="text/html"),
        "{base} returned 404 with no API error in the body: check openai.base_url "
        "(from env OPENAI_BASE_URL); is it an OpenAI-compatible Responses API?",
    ),
}


@pytest.mark.parametrize("reply, expected", FAULTS.values(), ids=FAULTS.keys())
def test_every_attempt_failing_ends_the_call_with_its_message(in_process, fake, reply, expected):
    fake.default = reply
    server = in_process()
    started = time.monotonic()
    message = failure_of(server.call())
    elapsed = time.monotonic() - started
    assert message.startswith("answer failed: " + expected.format(base=fake.base_url)), message
    assert elapsed < 5, f"the call took {elapsed:.1f} s"


def test_fault_that_clears_is_recovered_by_a_retry(in_process, fake):
    fake.enqueue(
        Reply(status=429, headers=FAST_RETRY),
        Reply(drop_after_events=4, drop_with_rst=True),
        Reply(stream_error={"code": "server_error"}),
    )
    server = in_process("request: {max_retries: 3, timeout_ms: 1000}\n")
    reply = server.call()
    assert "result" in reply, reply
    assert reply["result"]["_meta"]["attempts"] == 4


def test_slow_trickle_within_the_timeout_is_answered(in_process, fake):
    fake.default = Reply(event_delay=0.03)
    server = in_process()
    reply = server.call()
    assert "result" in reply, reply
    assert fake.requests[0].events_sent > 10


def test_concurrent_429_storm_fails_every_call_once_and_nothing_more(in_process, fake):
    fake.default = Reply(status=429, headers=FAST_RETRY)
    server = in_process(CONCURRENT)
    ids = [server.start_call(f"q{i}") for i in range(12)]
    for request_id in ids:
        assert "HTTP 429" in failure_of(server.outbox.reply_for(request_id, 15))
    assert all(len(server.outbox.replies_for(request_id)) == 1 for request_id in ids)
    assert len(fake.requests) == 12 * 3


def test_concurrent_mixed_faults_each_get_one_outcome(in_process, fake):
    """Without retries every reply is used by exactly one call: the outcomes, as a multiset,
    are known even though which call meets which fault is not."""
    replies = [
        Reply(),
        Reply(status=500),
        Reply(drop_after_events=3, drop_with_rst=True),
        Reply(stall_after_events=2),
        Reply(malformed_after_events=2),
        Reply(stream_error={"code": "invalid_prompt", "message": "flagged"}),
        Reply(event_delay=0.01),
        Reply(status=429, error_code="insufficient_quota"),
    ]
    fake.enqueue(*replies)
    server = in_process(CONCURRENT_NO_RETRY)
    ids = [server.start_call(f"q{i}") for i in range(len(replies))]
    outcomes = [kind_of(server.outbox.reply_for(request_id, 10)) for request_id in ids]
    assert sorted(outcomes) == sorted(
        [
            "ok",
            "ok",
            "HTTP 500",
            "dropped",
            "no answer within",
            "malformed",
            "model reported",
            "quota is exhausted",
        ]
    )


# ============================================================================================
# Cancelling calls caught in faults
# ============================================================================================


@pytest.mark.parametrize(
    "reply",
    [
        Reply(stall_after_events=3, stall_seconds=30),
        Reply(delay_before_headers=30),
        Reply(status=429, headers={"retry-after-ms": "30000"}),
        Reply(event_delay=0.2),
    ],
    ids=["stalled", "no-headers", "retry-wait", "trickle"],
)
def test_cancelled_call_in_a_fault_ends_at_once_without_a_reply(in_process, fake, reply):
    fake.default = reply
    server = in_process("request: {max_retries: 2, timeout_ms: 60000}\n")
    request_id = server.start_call()
    fake.wait_for_requests(1)
    time.sleep(0.05)  # sleep: unreported (issue 40): the worker blocks in the fault now
    started = time.monotonic()
    server.cancel(request_id)
    assert server.session.wait_idle(2), "the cancelled call did not end"
    print(f"cancelled call ended {(time.monotonic() - started) * 1000:.1f} ms after the cancel")
    assert server.outbox.replies_for(request_id) == []
    assert len(fake.requests) == 1


def test_many_cancellations_under_faults_leave_nothing_behind(in_process, fake):
    fake.default = Reply(stall_after_events=2, stall_seconds=30)
    server = in_process("request: {max_retries: 2, timeout_ms: 60000}\n")
    ids = [server.start_call(f"q{i}") for i in range(15)]
    fake.wait_for_requests(15)
    for request_id in ids:
        server.cancel(request_id)
    assert server.session.wait_idle(5)
    assert all(server.outbox.replies_for(request_id) == [] for request_id in ids)


# ============================================================================================
# The spawned program
# ============================================================================================


def task_count(server: Server) -> int:
    return len(os.listdir(f"/proc/{server.pid}/task"))


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="needs Linux /proc")
def test_spawned_server_returns_to_its_idle_threads_after_every_kind_of_fault(spawn, fake):
    server = spawn(config=TIGHT, upstream=fake, cold=True)
    server.initialize()
    assert "result" in server.call("answer", {"query": "warm"})
    wait_until(lambda: task_count(server) == 1, 10, "the idle server down to its main thread")
    idle = task_count(server)

    faults = [reply for reply, _ in FAULTS.values()] + [Reply()]
    fake.enqueue(*[reply for reply in faults for _ in range(3)])
    ids = []
    for n in range(len(faults)):
        ids.append(f"f{n}")
        server.send(
            {
                "jsonrpc": "2.0",
                "id": f"f{n}",
                "method": "tools/call",
                "params": {"name": "answer", "arguments": {"query": f"q{n}"}},
            }
        )
    answered = set()
    while answered != set(ids):
        reply = server.recv(timeout=20)
        assert reply.get("id") in ids, reply
        answered.add(reply["id"])
        assert "result" in reply or reply["error"]["message"].startswith("answer failed: ")
    assert server.request("ping")["result"] == {}
    wait_until(lambda: task_count(server) == idle, 10, f"back to {idle} thread(s)")
    fake.clear()
    assert "result" in server.call("answer", {"query": "after"})
