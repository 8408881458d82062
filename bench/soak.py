#!/usr/bin/env python3
"""Soak: thousands of calls against a faulty upstream, with random cancellations.

    python bench/soak.py [--quick] [--calls N] [--seconds S] [--concurrency K] [--seed N]
                          [--no-abuse]

--quick is the size CI runs: 600 calls within 40 s (--calls and --seconds still win).

Runs the server's real Dispatcher, Session and AnswerEngine in this process (the stdio
transport is left out, so that calls in flight and threads can be counted exactly), against
the tests' fake Responses API on 127.0.0.1, which answers each request with a fault drawn at
random: 429 with retry-after-ms, 500, a reset before or in the stream (FIN or RST), a stall
past the 1 s timeout, a malformed event, an error event, a slow trickle, or a good answer.
About one call in eight is cancelled at a random moment. One call in four asks for an MCP
2025-11-25 task (`params.task`): its CreateTaskResult comes at once, `tasks/result` collects
it, and its cancel is `tasks/cancel`.

It stops after N calls or S seconds, whichever comes first, then checks and prints:
every call that was not cancelled got exactly one reply (a task's: from tasks/result), a
result or one of the known `answer failed: ...` messages; a cancelled call got none (or its
one reply, when the answer won the race); no call is left in flight; no thread of the server
is left; and the process's resident memory stayed flat over the second half of the run
(within 4 MiB or 5 %). Memory is that of this whole process, the fake included, so it can
only over-report.

Then clients that leave tasks and handoffs uncollected (issue 18), against a Dispatcher of
their own (handoff after 1 s, the answer cache on, 20 KB answers): one starts max_per_client + 8
long calls and collects none, then a quick call must answer; 150 sessions each leave 16 tasks
uncollected (half end, half are abandoned), and the task table must stay within
server.tasks.max_open and max_reply_bytes and memory within the bound in docs/long-calls.md; 1,500
tasks/result for one long task are abandoned by their clients, and must leave no thread and
nothing waiting. About 15 s more; --no-abuse skips it. Exit status 1 if any check fails.
"""

from __future__ import annotations

import argparse
import collections
import heapq
import itertools
import os
import random
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import openai_responses_mcp as m  # noqa: E402

sys.path.insert(0, str(ROOT / "tests"))  # the tests' fake Responses API is the upstream here
import fake_upstream  # noqa: E402

Reply = fake_upstream.Reply

CONFIG = "request: {max_retries: 2, timeout_ms: 1000}\nserver: {tasks: {max_per_client: 64}}\n"
FAST = {"retry-after-ms": "5"}
# (weight, reply): what the fake does for one request.
FAULTS = [
    (50, lambda rng: Reply(text_chunks=rng.randint(1, 8))),
    (8, lambda rng: Reply(status=429, headers=FAST)),
    (6, lambda rng: Reply(status=500, headers=FAST)),
    (6, lambda rng: Reply(drop_after_events=rng.randint(0, 12), drop_with_rst=rng.random() < 0.5)),
    (3, lambda rng: Reply(stall_after_events=rng.randint(0, 10))),
    (5, lambda rng: Reply(malformed_after_events=rng.randint(1, 10))),
    (
        5,
        lambda rng: Reply(stream_error={"code": "server_error", "after_events": rng.randint(0, 6)}),
    ),
    (3, lambda rng: Reply(stream_error={"code": "invalid_prompt", "message": "flagged"})),
    (4, lambda rng: Reply(event_delay=rng.choice([0.005, 0.02]))),
    (2, lambda rng: Reply(status=429, error_code="insufficient_quota")),
]
KNOWN_FAILURES = (
    "rate limited by the API (HTTP 429)",
    "the API failed with HTTP 500",
    "the connection to ",
    "no answer within 1000 ms",
    "malformed response from ",
    "the model reported an error",
    "the API key's quota is exhausted",
)


class Outbox:
    """The session's outlet. Keeps only each reply's kind, so that its own memory stays flat."""

    def __init__(self) -> None:
        self.replies: dict = collections.defaultdict(list)  # id -> kinds of its replies
        self.cond = threading.Condition()
        self.other = 0

    def send(self, *messages: dict) -> None:
        with self.cond:
            for message in messages:
                if "id" in message:
                    self.replies[message["id"]].append(classify(message))
                else:
                    self.other += 1
            self.cond.notify_all()


def rss_mib() -> float:
    """Resident memory from /proc; 0 where there is none (macOS, Windows: not measured)."""
    try:
        with open("/proc/self/status") as handle:
            for line in handle:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def server_threads(baseline: set) -> list[str]:
    return [
        thread.name
        for thread in threading.enumerate()
        if thread not in baseline
        and thread.is_alive()
        and "process_request_thread" not in thread.name
        and thread.name != "fake-responses-api"
        and thread.name != "deadlines"  # the dispatcher's one timer thread, for its lifetime
    ]


def classify(reply: dict) -> str:
    if "result" in reply:
        return "answered"
    message = reply.get("error", {}).get("message", "")
    if not message.startswith("answer failed: "):
        return f"UNEXPECTED: {message[:80]}"
    text = message[len("answer failed: ") :]
    return next((known.strip() for known in KNOWN_FAILURES if text.startswith(known)), text[:60])


KINDS = {"answered"} | {known.strip() for known in KNOWN_FAILURES}


def cancel(dispatcher, session, request_id: int, task_id: str | None) -> None:
    """notifications/cancelled for a call, tasks/cancel for a task (a task that has ended
    already gets -32602, which is fine: its answer won the race)."""
    if task_id is None:
        note = {"requestId": request_id, "reason": "soak"}
        message = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": note}
    else:
        message = {"jsonrpc": "2.0", "id": "c", "method": "tasks/cancel"}
        message["params"] = {"taskId": task_id}
    dispatcher.handle(message, session)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, help="calls to make (default 3000, quick 600)")
    parser.add_argument("--seconds", type=float, help="time bound (default 120, quick 40)")
    parser.add_argument("--concurrency", type=int, default=16, help="calls in flight (16)")
    parser.add_argument("--seed", type=int, default=4, help="random seed (4)")
    parser.add_argument("--quick", action="store_true", help="the CI size: 600 calls, 40 s")
    parser.add_argument(
        "--no-abuse", action="store_true", help="skip the uncollected tasks and handoffs"
    )
    options = parser.parse_args(argv)
    if options.calls is None:
        options.calls = 600 if options.quick else 3000
    if options.seconds is None:
        options.seconds = 40 if options.quick else 120
    rng = random.Random(options.seed)
    weights = [weight for weight, _ in FAULTS]
    makers = [maker for _, maker in FAULTS]
    lock = threading.Lock()

    def next_reply() -> Reply:
        with lock:
            return rng.choices(makers, weights)[0](rng)

    os.environ["OPENAI_API_KEY"] = "sk-test-0123456789abcdefSOAK"
    os.environ["NO_PROXY"] = "127.0.0.1,localhost"
    for name in ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "https_proxy", "http_proxy"):
        os.environ.pop(name, None)
    fake_upstream._HTTPServer.request_queue_size = 128
    fake_upstream._Handler.disable_nagle_algorithm = True
    baseline = set(threading.enumerate())
    problems: list[str] = []
    with tempfile.TemporaryDirectory() as home, fake_upstream.FakeResponsesAPI() as fake:
        fake._next_reply = next_reply  # a fault drawn at random for every request
        path = Path(home) / "config.yaml"
        path.write_text(CONFIG, encoding="utf-8")
        env = {
            "XDG_CONFIG_HOME": home,
            "OPENAI_BASE_URL": fake.base_url,
            "OPENAI_RESPONSES_MCP_STATE": str(Path(home) / "state.sqlite3"),  # not the real home
        }
        config = m.load_config({"config": str(path)}, env)
        log = m.Log()
        dispatcher = m.Dispatcher(config, log, m.build_engine(config, log))
        outbox = Outbox()
        session = m.Session(outbox.send)
        init = {"protocolVersion": "2025-11-25", "capabilities": {"tasks": {}}}
        reply = dispatcher.handle(
            {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init}, session
        )
        assert "result" in reply, reply

        ids = itertools.count(1)
        upstream_requests = 0
        started: list[int] = []
        cancelled: set[int] = set()
        tasks: dict[int, str] = {}  # request id -> its task's id
        cancels: list[tuple[float, int]] = []
        samples: list[tuple[int, float, int]] = []
        begin = time.monotonic()
        deadline = begin + options.seconds
        while len(started) < options.calls and time.monotonic() < deadline:
            now = time.monotonic()
            while cancels and cancels[0][0] <= now:
                _, request_id = heapq.heappop(cancels)
                cancel(dispatcher, session, request_id, tasks.get(request_id))
                cancelled.add(request_id)
            while session.in_flight() < options.concurrency and len(started) < options.calls:
                request_id = next(ids)
                started.append(request_id)
                params = {"name": "answer", "arguments": {"query": f"soak question {request_id}"}}
                if rng.random() < 0.25:
                    params["task"] = {"ttl": 60_000}
                message = {
                    "jsonrpc": "2.0",
                    "id": request_id,
                    "method": "tools/call",
                    "params": params,
                }
                answer = dispatcher.handle(message, session)
                if "task" in params and answer is not None and "task" in answer.get("result", {}):
                    tasks[request_id] = answer["result"]["task"]["taskId"]
                    wait = {"taskId": tasks[request_id]}
                    collect = {"jsonrpc": "2.0", "id": f"r{request_id}", "method": "tasks/result"}
                    if dispatcher.handle({**collect, "params": wait}, session) is not None:
                        problems.append(f"tasks/result {request_id} answered at once")
                elif answer is not None:
                    problems.append(f"tools/call {request_id} answered at once: {answer}")
                if rng.random() < 0.125:
                    heapq.heappush(cancels, (now + rng.uniform(0, 0.06), request_id))
                if len(started) % 250 == 0:
                    upstream_requests += len(fake.requests)
                    fake.clear()
                    samples.append((len(started), rss_mib(), len(server_threads(baseline))))
            with outbox.cond:
                outbox.cond.wait(0.005)
        for _, request_id in cancels:  # cancels still pending when the run ended
            cancel(dispatcher, session, request_id, tasks.get(request_id))
            cancelled.add(request_id)
        if not session.wait_idle(30):
            problems.append(f"{session.in_flight()} call(s) still running 30 s after the end")
        elapsed = time.monotonic() - begin
        ping = dispatcher.handle({"jsonrpc": "2.0", "id": "ping", "method": "ping"}, session)
        if ping != {"jsonrpc": "2.0", "id": "ping", "result": {}}:
            problems.append(f"ping after the soak: {ping}")
        leftover_deadline = time.monotonic() + 10
        while server_threads(baseline) and time.monotonic() < leftover_deadline:
            time.sleep(0.05)
        leftover = server_threads(baseline)
        in_flight = session.in_flight()
        upstream_requests += len(fake.requests)
        samples.append((len(started), rss_mib(), len(leftover)))
        abuse_lines, abuse_problems = ([], []) if options.no_abuse else abuse(home)

    outcomes: collections.Counter = collections.Counter()
    for request_id in started:
        replies = outbox.replies.get(f"r{request_id}" if request_id in tasks else request_id, [])
        if request_id in cancelled:
            if len(replies) > 1:
                problems.append(f"cancelled call {request_id} got {len(replies)} replies")
            if request_id in tasks:  # tasks/result says "task was cancelled", or the answer
                outcomes["task cancelled (tasks/cancel)"] += 1
            else:
                outcomes["cancelled: no reply" if not replies else "cancelled: answered first"] += 1
            continue
        if len(replies) != 1:
            problems.append(f"call {request_id} got {len(replies)} replies")
            continue
        kind = replies[0]
        if kind not in KINDS:
            problems.append(f"call {request_id}: {kind}")
        outcomes[kind] += 1
    if in_flight:
        problems.append(f"{in_flight} call(s) in flight at the end")
    if leftover:
        problems.append(f"server threads left: {leftover}")
    half = [rss for count, rss, _ in samples if count >= len(started) / 2]
    growth = half[-1] - half[0] if len(half) > 1 else 0.0
    if growth > max(4.0, 0.05 * half[0] if half else 0):
        problems.append(f"memory grew {growth:+.1f} MiB over the second half of the run")

    print(
        f"soak: {len(started):,} calls in {elapsed:.1f} s ({len(started) / elapsed:.0f}/s), "
        f"{options.concurrency} in flight, seed {options.seed}; "
        f"{upstream_requests:,} upstream requests (retries included)"
    )
    for kind, count in outcomes.most_common():
        print(f"  {count:6,}  {kind}")
    print(f"  cancellations sent: {len(cancelled):,}; progress/other notifications: {outbox.other}")
    print(
        "  memory (MiB, whole process incl. the fake) by calls started: "
        + ", ".join(
            f"{count:,}: {rss:.1f}" for count, rss, _ in samples[:-1][:: max(1, len(samples) // 8)]
        )
        + f"; end: {samples[-1][1]:.1f}"
    )
    print(
        f"  second-half memory growth: {growth:+.1f} MiB; calls in flight at the end: {in_flight}; "
        f"server threads left: {len(leftover)}"
    )
    if abuse_lines:
        print("clients that leave tasks and handoffs uncollected:")
    for line in abuse_lines:
        print(line)
    problems += abuse_problems
    for problem in problems[:20]:
        print(f"  PROBLEM: {problem}")
    print("soak: OK" if not problems else f"soak: FAILED ({len(problems)} problem(s))")
    return 0 if not problems else 1


# -- Clients that leave tasks and handoffs uncollected (issue 18) ---------------------------------

ABUSE_CONFIG = (
    "request: {handoff_after_s: 1, max_retries: 0}\ncache: {ttl_s: 600}\nserver: {max_calls: 256}\n"
)
LONG = 20_000  # characters in the abuse phase's answers: the size that made memory grow


def threads_now() -> int:
    return threading.active_count()


def settle(predicate, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def abuse(home: str) -> tuple[list[str], list[str]]:
    """The review's three scripts against one Dispatcher: 16+ uncollected handoffs then a
    quick call; 150 sessions x 16 uncollected tasks; 1,500 abandoned tasks/result. Returns
    (lines to print, problems)."""
    lines: list[str] = []
    problems: list[str] = []
    with fake_upstream.FakeResponsesAPI() as fake:
        fake.default = Reply(text="All about HTTP 404. " * (LONG // 20))
        path = Path(home) / "abuse.yaml"
        path.write_text(ABUSE_CONFIG, encoding="utf-8")
        env = {
            "XDG_CONFIG_HOME": home,
            "OPENAI_BASE_URL": fake.base_url,
            "OPENAI_RESPONSES_MCP_STATE": str(Path(home) / "abuse.sqlite3"),
        }
        config = m.load_config({"config": str(path)}, env)
        log = m.Log()
        dispatcher = m.Dispatcher(config, log, m.build_engine(config, log))
        limits = config.get("server", "tasks")
        begin = time.monotonic()
        handoffs(dispatcher, fake, lines, problems)
        sessions(dispatcher, limits, lines, problems)
        waiters(dispatcher, fake, lines, problems)
        lines.append(f"  ({time.monotonic() - begin:.1f} s)")
    return lines, problems


def client(dispatcher, key: str, version: str, name: str = "soak") -> tuple:
    outbox = Outbox()
    session = m.Session(outbox.send)
    session.client_key = key
    init = {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": name}}
    reply = dispatcher.handle(
        {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init}, session
    )
    assert "result" in reply, reply
    return session, outbox


def tools_call(request_id, query: str, **params) -> dict:
    arguments = {"name": "answer", "arguments": {"query": query}, **params}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": arguments}


def handoffs(dispatcher, fake, lines: list, problems: list) -> None:
    """A Codex-like client starts more long calls than max_per_client and collects none: a
    quick call still answers, and a long one is handed off in place of an ended one."""
    session, outbox = client(dispatcher, "codex", "2025-06-18", "codex-mcp-client")
    cap = dispatcher.long_calls.settings["max_per_client"]
    fake.default = Reply(text="All about HTTP 404. " * (LONG // 20), delay_before_headers=1.5)
    for n in range(cap + 8):
        dispatcher.handle(tools_call(f"long-{n}", f"long question {n}"), session)
    if not session.wait_idle(30):
        problems.append("handoffs: long calls still running after 30 s")
    fake.default = Reply(text="All about HTTP 404. " * (LONG // 20))
    dispatcher.handle(tools_call("quick", "a one-second question"), session)
    session.wait_idle(10)
    if outbox.replies.get("quick") != ["answered"]:
        got = outbox.replies.get("quick")
        problems.append(f"handoffs: a quick call after {cap} uncollected handoffs got {got}")
    held = len(dispatcher.long_calls.tasks.of_client("codex", "h"))
    lines.append(
        f"  handoffs: {cap + 8} long calls left uncollected ({held} handed off, at most "
        f"{cap}), then a quick call: {outbox.replies.get('quick')}"
    )
    if held > cap:
        problems.append(f"handoffs: {held} held for one client, past {cap}")


def sessions(dispatcher, limits: dict, lines: list, problems: list) -> None:
    """150 sessions each leave 16 tasks (one cached question) uncollected; half end (DELETE),
    half are abandoned. The table stays within max_open and max_reply_bytes, memory within
    the bound in docs/long-calls.md, and ending the rest empties it."""
    first, _ = client(dispatcher, "warm", "2025-11-25")
    dispatcher.handle(tools_call(1, "one cached question"), first)
    first.wait_idle(10)
    before = rss_mib()
    refused: collections.Counter = collections.Counter()
    open_sessions = []
    for n in range(150):
        session, _ = client(dispatcher, f"session-{n}", "2025-11-25")
        for k in range(16):
            reply = dispatcher.handle(
                tools_call(k + 1, "one cached question", task={"ttl": 3_600_000}), session
            )
            if reply is not None and "error" in reply:
                refused[reply["error"].get("data", {}).get("limit", reply["error"]["message"])] += 1
        session.wait_idle(10)
        if n % 2:
            session.close()  # DELETE, idle expiry or pushed out
        else:
            open_sessions.append(session)
    grown = rss_mib() - before
    held, stored = len(dispatcher.long_calls.tasks), dispatcher.long_calls.tasks.stored_bytes()
    bound = limits["max_reply_bytes"] / 2**20 + limits["max_open"] * 8 / 1024
    lines.append(
        f"  sessions: 150 x 16 uncollected tasks: {held} held (max_open {limits['max_open']}), "
        f"{stored / 2**20:.1f} MiB of replies; refused {dict(refused)}; memory {grown:+.1f} MiB "
        f"(bound {bound:.0f} MiB)"
    )
    if held > limits["max_open"] or stored > limits["max_reply_bytes"] + 2 * LONG:
        problems.append(f"sessions: {held} tasks / {stored} bytes past the limits")
    if grown > bound:
        problems.append(f"sessions: memory grew {grown:.1f} MiB, past the bound {bound:.0f}")
    if set(refused) - {"server.tasks.max_open", "server.tasks.max_reply_bytes"}:
        problems.append(f"sessions: unexpected refusals {dict(refused)}")
    for session in open_sessions:
        session.close()
    first.close()
    left = len(dispatcher.long_calls.tasks) - len(
        dispatcher.long_calls.tasks.of_client("codex", "h")
    )
    if left:
        problems.append(f"sessions: {left} tasks left after every session ended")


def waiters(dispatcher, fake, lines: list, problems: list) -> None:
    """1,500 tasks/result for one long task, from 100 sessions, each abandoned by its client
    (HttpApp.hung_up): no thread each, and nothing left waiting."""
    owner, _ = client(dispatcher, "owner", "2025-11-25")
    fake.default = Reply(text="All about HTTP 404. " * (LONG // 20), delay_before_headers=5)
    reply = dispatcher.handle(tools_call(1, "a long question", task={"ttl": 3_600_000}), owner)
    task_id = reply["result"]["task"]["taskId"]
    task = dispatcher.long_calls.tasks.get(task_id)
    before = threads_now()
    peak = 0
    clients = [client(dispatcher, f"waiter-{n}", "2025-11-25")[0] for n in range(100)]
    for n in range(1500):
        session = clients[n % 100]
        wait = {"jsonrpc": "2.0", "id": f"w{n}", "method": "tasks/result"}
        dispatcher.handle({**wait, "params": {"taskId": task_id}}, session)
        peak = max(peak, threads_now() - before)
        dispatcher.abandoned(session, f"w{n}")
    left = len(task._waiters or {})
    deadlines = len(dispatcher.long_calls.deadlines)
    lines.append(
        f"  waiters: 1,500 abandoned tasks/result: {peak} more threads at most, "
        f"{left} left waiting, {deadlines} deadlines pending"
    )
    if peak > 10 or left or deadlines:
        problems.append(f"waiters: {peak} threads, {left} waiting, {deadlines} deadlines")
    owner.close()
    owner.wait_idle(10)


if __name__ == "__main__":
    sys.exit(main())
