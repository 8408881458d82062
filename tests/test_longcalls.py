"""Long calls that outlive their client or their instance (issue 24): a stdio client that
leaves, a rolling restart of --stateless instances, the task limits under --stateless, a
handshake-era client's identity across stateless requests, and /healthz's own room."""

from __future__ import annotations

import ast
import signal
import sqlite3
import time

import pytest
from conftest import SCRIPT, wait_until
from fake_upstream import Reply

SECRET = "s3cret-" + "0123456789abcdefghijklmnopqrstuvwxyz"


# -- the module itself ---------------------------------------------------------------------


def test_no_class_defines_a_method_twice():
    """A second `def` of the same name in a class silently replaces the first (issue 25:
    Dispatcher._client_name)."""
    tree = ast.parse(SCRIPT.read_text(encoding="utf-8"))
    twice = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            names = [
                item.name
                for item in node.body
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
            ]
            twice += [f"{node.name}.{name}" for name in set(names) if names.count(name) > 1]
    assert twice == []


# -- task limits under --stateless -------------------------------------------------------------


def stateless(spawn, fake, config: str = "", env: dict | None = None):
    from http_client import wait_listening

    env = {"MCP_TASK_SECRET": SECRET, **(env or {})}
    server = spawn("--http", "127.0.0.1:0", "--stateless", config=config, env=env, upstream=fake)
    server.port = wait_listening(server)
    ready(server.port)
    return server


def ready(port: int) -> None:
    """Waits until the instance has read its users: until then (another instance may still be
    making the state they share) a request without a token gets 503."""
    from http_client import post, rpc

    wait_until(lambda: post(port, rpc("ping")).status != 503, 30, "the instance to read its state")


def classic(port: int, method: str, params: dict, headers: dict | None = None, request_id=1):
    """A 2025-11-25 request under --stateless: (HTTP status, its JSON-RPC reply)."""
    from http_client import post, rpc

    sent = {"MCP-Protocol-Version": "2025-11-25", **(headers or {})}
    response = post(port, rpc(method, params, request_id), headers=sent, timeout=30)
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        return response.status, [d for _, d in response.events() if "method" not in d][-1]
    return response.status, response.json()


def task_call(port: int, query: str, headers: dict | None = None):
    params = {"name": "answer", "arguments": {"query": query}, "task": {"ttl": 600_000}}
    return classic(port, "tools/call", params, headers)


def test_a_new_user_agent_is_not_a_fresh_task_quota(spawn, fake):
    """The per-client limit keys on the credential and address, not the User-Agent, which a
    client may change at will."""
    server = stateless(spawn, fake, "server:\n  tasks:\n    max_per_client: 2\n")
    fake.default = Reply(event_delay=0.5)
    replies = [task_call(server.port, f"question {n}", {"User-Agent": f"ua-{n}"}) for n in range(3)]
    assert [status for status, _ in replies[:2]] == [200, 200], replies
    assert "task" in replies[0][1]["result"] and "task" in replies[1][1]["result"]
    status, refused = replies[2]
    assert status == 429, refused
    assert refused["error"]["data"] == {"limit": "server.tasks.max_per_client"}


def test_ended_uncollected_tasks_make_room_oldest_first(spawn, fake):
    """At server.tasks.max_open, tasks that have ended and were never collected are dropped,
    the oldest ended first, before anyone is refused; a dropped task's signed id still
    serves its answer (from OpenAI's stored response)."""
    server = stateless(spawn, fake, "server:\n  tasks:\n    max_open: 3\n")
    fake.default = Reply()
    ids = []
    for n in range(3):  # three clients (each behind its own address), none collects
        status, reply = task_call(server.port, f"question {n}", {"X-Forwarded-For": f"10.0.0.{n}"})
        assert status == 200, reply
        task_id = reply["result"]["task"]["taskId"]
        ids.append(task_id)

        def ended(task_id=task_id, n=n) -> bool:
            headers = {"X-Forwarded-For": f"10.0.0.{n}"}
            _, got = classic(server.port, "tasks/get", {"taskId": task_id}, headers)
            return got["result"]["status"] == "completed"

        wait_until(ended, 20, f"task {n} completed")
    status, reply = task_call(
        server.port, "another client's question", {"X-Forwarded-For": "10.9.9.9"}
    )
    assert status == 200, reply  # before: 429, server.tasks.max_open, until the TTL
    assert "task" in reply["result"]
    # The oldest was dropped here; its signed id still brings its answer.
    _, result = classic(
        server.port, "tasks/result", {"taskId": ids[0]}, {"X-Forwarded-For": "10.0.0.0"}
    )
    assert "result" in result, result
    assert result["result"]["structuredContent"]["answer"]


# -- a stdio client that leaves --------------------------------------------------------------

HANDOFF_CONFIG = "request:\n  handoff_after_s: 1\n"
TASK_INIT = {
    "protocolVersion": "2025-11-25",
    "capabilities": {"tasks": {}},
    "clientInfo": {"name": "pytest", "version": "0"},
}


def ledger_rows(tmp_path, outcome: str) -> int:
    path = tmp_path / "xdg-state" / "openai-responses-mcp" / "state.sqlite3"
    try:
        with sqlite3.connect(path) as conn:
            query = "SELECT COUNT(*) FROM usage WHERE outcome = ?"
            return conn.execute(query, (outcome,)).fetchone()[0]
    except sqlite3.OperationalError:  # no file or no table yet
        return 0


def long_call_left_running(spawn, fake, kind: str):
    """A stdio server with one answer_detailed call (background mode: a cancel is a POST
    upstream) that became a handoff or a 2025-11-25 task and is still running."""
    fake.default = Reply(event_delay=1.0)  # about 20 s of events
    server = spawn("--stdio", config=HANDOFF_CONFIG, upstream=fake)
    if kind == "handoff":
        server.initialize()
        reply = server.call("answer_detailed", {"query": "a long question"})
        assert reply["result"]["_meta"]["openai-responses-mcp/handoff"]["status"] == "working"
    else:
        server.request("initialize", TASK_INIT)
        server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        reply = server.call("answer_detailed", {"query": "a long question"}, task={"ttl": 60_000})
        assert reply["result"]["task"]["status"] == "working", reply
    fake.wait_until(lambda: fake.requests and fake.requests[0].events_sent >= 2, 30)
    return server


def assert_cancelled_and_recorded(fake, tmp_path) -> None:
    wait_until(lambda: fake.cancels, 10, "POST /responses/{id}/cancel")
    (cancel,) = fake.cancels
    assert fake.background_status(cancel.path.split("/")[-2]) == "cancelled"
    assert ledger_rows(tmp_path, "cancelled") == 1  # written before the process left
    assert ledger_rows(tmp_path, "ok") == 0


@pytest.mark.parametrize("kind", ["handoff", "task"])
@pytest.mark.parametrize("how", ["pipes closed", "stdin closed, then SIGTERM"])
def test_a_client_that_leaves_cancels_and_records_its_tasks_and_handoffs(
    spawn, fake, tmp_path, kind, how
):
    server = long_call_left_running(spawn, fake, kind)
    server.close_stdin()
    if how == "pipes closed":
        server.proc.stdout.close()
    else:
        server.proc.send_signal(signal.SIGTERM)
    assert server.wait(15) == 0, server.stderr
    assert_cancelled_and_recorded(fake, tmp_path)


@pytest.mark.parametrize("kind", ["handoff", "task"])
def test_at_end_of_input_tasks_and_handoffs_are_cancelled_not_awaited(spawn, fake, tmp_path, kind):
    """Nobody can collect them once stdin has closed: the server does not wait the 20 s the
    answer takes, and leaves once they are cancelled and recorded."""
    server = long_call_left_running(spawn, fake, kind)
    began = time.monotonic()
    server.close_stdin()
    assert server.wait(15) == 0, server.stderr
    assert time.monotonic() - began < 10
    assert_cancelled_and_recorded(fake, tmp_path)


def test_a_task_answered_from_the_cache_is_served_by_another_instance(spawn, fake):
    """Its id is signed like any other: before, it was this instance's own, and another
    instance said "unknown task id"."""
    env = {"ANSWER_CACHE_TTL_S": "600"}  # both instances share the state file, and its cache
    a, b = stateless(spawn, fake, env=env), stateless(spawn, fake, env=env)
    fake.default = Reply()
    ids = []
    for _ in range(2):  # the second is answered from the cache
        status, created = task_call(a.port, "one cached question")
        assert status == 200, created
        ids.append(created["result"]["task"]["taskId"])
        _, done = classic(a.port, "tasks/result", {"taskId": ids[-1]})
        assert done["result"]["structuredContent"]["answer"], done
    assert len(fake.creates) == 1
    assert done["result"]["_meta"]["cache"]["hit"] is True
    assert ids[1].startswith("t1."), ids[1]
    _, elsewhere = classic(b.port, "tasks/result", {"taskId": ids[1]})
    assert "result" in elsewhere, elsewhere
    assert (
        elsewhere["result"]["structuredContent"]["answer"]
        == (done["result"]["structuredContent"]["answer"])
    )


# -- /healthz past the connection cap ------------------------------------------------------------


def test_healthz_answers_while_every_connection_is_busy(spawn, fake):
    """server.http.max_connections all busy with long calls: /healthz still answers (a load
    balancer would take the instance for dead); anything else past the cap is closed."""
    from http_client import proc_status, raw_connection, read_until_closed, request, wait_listening

    config = "server:\n  http:\n    max_connections: 2\n    header_timeout_s: 30\n"
    server = spawn("--http", "127.0.0.1:0", config=config, upstream=fake, cold=True)
    server.port = wait_listening(server)
    threads = proc_status(server.pid)["Threads"]  # cold: its pid, for its worker threads
    held = [raw_connection(server.port) for _ in range(2)]
    for sock in held:  # a request under way (its body awaited): busy, not idle
        sock.sendall(
            b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: 50\r\n\r\n"
        )
    wait_until(lambda: proc_status(server.pid)["Threads"] >= threads + 2, 10, "a worker each")
    try:
        health = request(server.port, "GET", "/healthz", timeout=10)
        assert health.status == 200 and health.json()["status"] == "ok"
        other = raw_connection(server.port)
        other.sendall(b"GET /usage HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert read_until_closed(other, timeout=10) == b""
        rebinding = raw_connection(server.port)
        rebinding.sendall(b"GET /healthz HTTP/1.1\r\nHost: evil.example\r\n\r\n")
        assert read_until_closed(rebinding, timeout=10) == b""
    finally:
        for sock in held:
            sock.close()


# -- a handshake-era client's identity under --stateless ----------------------------------------


def test_codex_keeps_its_result_size_and_handoff_under_stateless(spawn, fake):
    """clientInfo comes only with initialize, which later stateless requests (perhaps on
    another instance) do not see: initialize's signed Mcp-Session-Id carries it to them."""
    from http_client import post, rpc

    a, b = stateless(spawn, fake), stateless(spawn, fake)
    init = {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "codex-mcp-client", "version": "0.171.0"},
    }
    initialized = post(a.port, rpc("initialize", init))
    assert initialized.status == 200, initialized.body
    session_id = initialized.headers.get("mcp-session-id")
    assert session_id, initialized.headers
    headers = {"Mcp-Session-Id": session_id}  # as the client sends it from now on
    listed = post(b.port, rpc("tools/list", {}, 2), headers=headers).json()
    assert "answer_result" in [tool["name"] for tool in listed["result"]["tools"]]
    fake.default = Reply(text="All about HTTP 404. " * 1500)  # 30,000 bytes
    params = {"name": "answer", "arguments": {"query": "a long answer"}}
    reply = post(b.port, rpc("tools/call", params, 3), headers=headers, timeout=30)
    body = reply.json() if reply.body.startswith(b"{") else reply.events()[-1][1]
    text = body["result"]["content"][0]["text"]
    assert len(text.encode()) <= 12_000 and body["result"]["_meta"]["shortened"], len(text)
    forged = post(b.port, rpc("tools/list", {}, 4), headers={"Mcp-Session-Id": session_id + "x"})
    assert "answer_result" not in [t["name"] for t in forged.json()["result"]["tools"]]


def test_without_a_secret_each_client_keeps_its_result_size_under_stateless(spawn, fake):
    """Issue 31: no MCP_TASK_SECRET, two instances: initialize's Mcp-Session-Id still carries
    the client's name (unsigned), so Codex gets its 12,000 characters from the other instance
    and Claude Code its 50,000; an id that is not such a record is served as no client."""
    from http_client import post, rpc, wait_listening

    a, b = (spawn("--http", "127.0.0.1:0", "--stateless", upstream=fake) for _ in range(2))
    a.port, b.port = wait_listening(a), wait_listening(b)
    ready(a.port)
    ready(b.port)
    assert "tasks and handoffs are off with --stateless" in a.stderr  # no secret indeed
    fake.default = Reply(text="All about HTTP 404. " * 1500)  # 30,000 bytes
    params = {"name": "answer", "arguments": {"query": "a long answer"}}

    def answered(session_id: str | None, request_id: int) -> int:
        headers = {"Mcp-Session-Id": session_id} if session_id is not None else {}
        reply = post(b.port, rpc("tools/call", params, request_id), headers=headers, timeout=30)
        body = reply.json() if reply.body.startswith(b"{") else reply.events()[-1][1]
        return len(body["result"]["content"][0]["text"].encode())

    ids = {}
    for name in ("codex-mcp-client", "claude-code"):
        init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": name}}
        initialized = post(a.port, rpc("initialize", init))
        assert initialized.status == 200, initialized.body
        ids[name] = initialized.headers.get("mcp-session-id")
        assert ids[name] and ids[name].isascii() and ids[name].isprintable(), ids[name]
    assert answered(ids["codex-mcp-client"], 2) <= 12_000
    assert answered(ids["claude-code"], 3) > 20_000
    for junk in (
        "c1.!!!",
        "c1." + "A" * 5000,
        "c1.bnVsbA",
        "whatever",
        ids["codex-mcp-client"][:-3],
    ):
        assert answered(junk, 4) > 20_000, junk  # no client: the default size, no error
    assert "Traceback" not in a.stderr + b.stderr


# -- a rolling restart of --stateless instances ---------------------------------------------------


def test_a_rolling_restart_leaves_a_task_running_for_the_other_instance(spawn, fake, tmp_path):
    """SIGTERM on the instance that created a task: past drain_s it is not cancelled upstream
    (the other instance serves it from its signed id), and its usage is recorded once, with
    its cost, by the instance that read it to the end."""
    from conftest import PRICES

    config = PRICES + "server:\n  http:\n    lameduck_s: 0\n    drain_s: 1\n"
    a, b = stateless(spawn, fake, config), stateless(spawn, fake, config)
    fake.default = Reply(event_delay=0.4)  # about 8 s of events
    status, created = task_call(a.port, "a long question")
    assert status == 200, created
    task_id = created["result"]["task"]["taskId"]
    assert task_id.startswith("t1.")
    a.proc.send_signal(signal.SIGTERM)
    assert a.wait(30) == 0, a.stderr
    _, result = classic(b.port, "tasks/result", {"taskId": task_id})
    assert "result" in result, result
    assert result["result"]["structuredContent"]["answer"]
    assert fake.cancels == []
    wait_until(lambda: ledger_rows(tmp_path, "ok") == 1, 20, "the row")
    time.sleep(1)  # sleep: the point: a window in which a second row would come
    assert ledger_rows(tmp_path, "ok") == 1 and ledger_rows(tmp_path, "cancelled") == 0
    path = tmp_path / "xdg-state" / "openai-responses-mcp" / "state.sqlite3"
    with sqlite3.connect(path) as conn:
        (usd,) = conn.execute("SELECT usd FROM usage").fetchone()
        (held,) = conn.execute("SELECT COUNT(*) FROM reservations").fetchone()
    assert usd > 0 and held == 0
    assert "left 1 task(s) running upstream" in a.stderr


def test_a_handed_over_call_is_booked_with_its_tier_and_to_its_user(spawn, fake, tmp_path):
    """Review 4, m5: the instance that read a handed-over call to its end booked it without
    its service tier and under user `local` ($0.30 booked as $0.15, outside the user's
    allowance). Its row is the user's, at the tier's price, and what the client was shown."""
    from conftest import PRICES, run_cli

    added = run_cli(tmp_path, "--user", "add", "ada")
    assert added.returncode == 0, added.stderr
    auth = {"Authorization": f"Bearer {added.stdout.splitlines()[-1]}"}
    config = PRICES + "model_profiles: {answer: {service_tier: priority}}\n"
    config += "server:\n  http:\n    lameduck_s: 0\n    drain_s: 1\n"
    a, b = stateless(spawn, fake, config), stateless(spawn, fake, config)
    fake.default = Reply(event_delay=0.3)
    status, created = task_call(a.port, "a long question", auth)
    assert status == 200, created
    a.proc.send_signal(signal.SIGTERM)
    assert a.wait(30) == 0, a.stderr
    _, result = classic(
        b.port, "tasks/result", {"taskId": created["result"]["task"]["taskId"]}, auth
    )
    cost = result["result"]["_meta"]["cost"]
    assert cost["prices"] == "config x2 (priority)"
    wait_until(lambda: ledger_rows(tmp_path, "ok") == 1, 20, "the row")
    path = tmp_path / "xdg-state" / "openai-responses-mcp" / "state.sqlite3"
    with sqlite3.connect(path) as conn:
        user, usd = conn.execute("SELECT user_name, usd FROM usage").fetchone()
    assert user == "ada"
    assert usd == pytest.approx(cost["usd"])


WINDOW_USAGE = {
    "input_tokens": 10_000,
    "output_tokens": 2_000,
    "input_tokens_details": {"cached_tokens": 0},
}


def handed_over_windowed_task(spawn, fake, tmp_path):
    """A discounted run (answer, 8h) whose creator stopped (a rolling restart) and handed it
    over: (the other instance, the task id, the state's path); the handover is held."""
    from conftest import PRICES

    config = PRICES + "model_profiles:\n  answer:\n    model: gpt-6.1-terra\n"
    config += "    completion_window: 8h\nbudget:\n  daily_usd: 50\n"
    config += "server:\n  http:\n    lameduck_s: 0\n    drain_s: 1\n"
    a, b = stateless(spawn, fake, config), stateless(spawn, fake, config)
    status, created = task_call(a.port, "a long question")
    assert status == 200, created
    a.proc.send_signal(signal.SIGTERM)
    assert a.wait(30) == 0, a.stderr
    path = tmp_path / "xdg-state" / "openai-responses-mcp" / "state.sqlite3"
    with sqlite3.connect(path) as conn:
        (held,) = conn.execute("SELECT id FROM reservations").fetchone()
    assert held.startswith("handover:")
    return b, created["result"]["task"]["taskId"], path


def booked_and_held(path) -> tuple[float, int]:
    """The ledger's one row's dollars, and how many reservations are held."""
    with sqlite3.connect(path) as conn:
        (usd,) = conn.execute("SELECT usd FROM usage").fetchone()
        (left,) = conn.execute("SELECT COUNT(*) FROM reservations").fetchone()
    return usd, left


# gpt-6.1-terra at $2 / $10 per million (PRICES), 40% off in the 8h window
WINDOW_BILLED = (10_000 * 2 + 2_000 * 10) / 1e6 * 0.6


@pytest.mark.parametrize("billed", [False, True], ids=["waiting", "ended-before-the-cancel"])
def test_a_handed_over_windowed_task_cancelled_on_another_instance_settles_its_handover(
    spawn, fake, tmp_path, billed
):
    """(issue 41) A discounted run handed over at a rolling restart, then cancelled through
    the other instance: that instance settled nothing, so the handover kept holding the
    estimate against the budgets for the window (8 h 15 min), and a run that had ended (and
    been billed) just before the cancel reached it was never booked. Now its row is written
    there: `cancelled`, with what it was billed, at the discount, and nothing stays held."""
    fake.window_polls = 1000
    fake.windows_end_before_cancel = billed
    fake.default = Reply(usage=WINDOW_USAGE)
    b, task_id, path = handed_over_windowed_task(spawn, fake, tmp_path)
    _, cancelled = classic(b.port, "tasks/cancel", {"taskId": task_id})
    assert cancelled["result"]["status"] == "cancelled", cancelled
    wait_until(lambda: ledger_rows(tmp_path, "cancelled") == 1, 20, "the cancelled row")
    assert len(fake.cancels) == 1 and ledger_rows(tmp_path, "ok") == 0
    assert booked_and_held(path) == (pytest.approx(WINDOW_BILLED if billed else 0.0), 0)


def test_a_handed_over_windowed_run_cut_short_is_booked_by_the_instance_that_read_it(
    spawn, fake, tmp_path
):
    """(issue 41) The same for a run that ended cut short before any text (billed all the
    same): the instance that read it to its end books it, and the handover is settled."""
    fake.window_polls = 3
    fake.default = Reply(usage=WINDOW_USAGE, incomplete=True, text="")
    b, task_id, path = handed_over_windowed_task(spawn, fake, tmp_path)
    _, result = classic(b.port, "tasks/result", {"taskId": task_id})
    assert "answer cut short" in result["error"]["message"], result
    wait_until(lambda: ledger_rows(tmp_path, "failed") == 1, 20, "the row")
    assert booked_and_held(path) == (pytest.approx(WINDOW_BILLED), 0)


def test_without_a_restart_the_creator_alone_records_a_task_another_instance_served(
    spawn, fake, tmp_path
):
    from conftest import PRICES

    a, b = stateless(spawn, fake, PRICES), stateless(spawn, fake, PRICES)
    fake.default = Reply(event_delay=0.2)
    _, created = task_call(a.port, "a question")
    task_id = created["result"]["task"]["taskId"]
    _, result = classic(b.port, "tasks/result", {"taskId": task_id})
    assert "result" in result, result
    wait_until(lambda: ledger_rows(tmp_path, "ok") >= 1, 20, "the row")
    time.sleep(2)  # sleep: the point: B's read ended too, and a row of B's would come now
    assert ledger_rows(tmp_path, "ok") == 1


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_handed_over_row_is_written_once_and_only_when_handed_over(tmp_path, request, backend):
    """The ledger side of a rolling restart, on the store itself: the handover keeps the
    call's reserved estimate; the first settle writes the row and frees it, a second writes
    nothing; a response never handed over gets no row from a follower."""
    import openai_responses_mcp as m

    path = tmp_path / "state.sqlite3"
    if backend == "postgres":
        url = request.getfixturevalue("postgres").fresh_database()
        state = m.StateStore(m._PostgresBackend(url), m.Log())
    else:
        state = m.StateStore(m._SqliteBackend(str(path)), m.Log())
    ledger = m.Ledger(state, "UTC")
    reservation, _, _ = ledger.reserve("answer", [("2020-01-01", 100.0)], 0.5, 3600)
    ledger.hand_over(reservation, "resp_1", time.time() + 600)
    row = m.UsageRow("answer", "gpt-5.2", "ok", {"cost": {"usd": 0.25}})
    for response_id in ("resp_1", "resp_1", "resp_2"):
        ledger.settle_handover(row, response_id)
    state.close(10)
    reopened = m.StateStore(m._PostgresBackend(url), m.Log()) if backend == "postgres" else None

    def read(q):
        rows = [float(usd) for (usd,) in q("SELECT usd FROM usage").fetchall()]
        return rows, q("SELECT COUNT(*) FROM reservations").fetchone()[0]

    if reopened is not None:
        rows, held = reopened.read("checking", read)
        reopened.close(5)
    else:
        with sqlite3.connect(path) as conn:
            rows, held = read(conn.execute)
    assert rows == [0.25] and held == 0


def test_a_handover_keeps_the_estimate_held_until_settled(tmp_path):
    import openai_responses_mcp as m

    path = tmp_path / "state.sqlite3"
    state = m.StateStore(m._SqliteBackend(str(path)), m.Log())
    ledger = m.Ledger(state, "UTC")
    reservation, estimate, _ = ledger.reserve("answer", [("2020-01-01", 100.0)], 0.5, 3600)
    ledger.hand_over(reservation, "resp_1", time.time() + 600)
    state.close(10)
    with sqlite3.connect(path) as conn:
        held = conn.execute("SELECT id, usd FROM reservations").fetchall()
    assert held == [("handover:resp_1", estimate)]
