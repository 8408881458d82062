"""Named users on the shared HTTP server (--user add/list/revoke): who is asking, and what
that person may see and spend. Real servers (--http) on a state the tests share, on SQLite
and on PostgreSQL; calls go to the fake Responses API."""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
import threading

import pytest
from conftest import MODERN, PRICES, Server, base_env, run_cli, wait_until
from fake_upstream import Reply
from http_client import open_session, post, request, rpc, wait_listening
from test_state import PostgresState, SqliteState
from test_tasks_wire import meta

import openai_responses_mcp as m

SHARED = "shared-0123456789abcdef-XYZ"


@pytest.fixture(params=["sqlite", "postgres"])
def state(request, tmp_path):
    if request.param == "sqlite":
        return SqliteState(tmp_path / "shared" / "state.sqlite3")
    cluster = request.getfixturevalue("postgres")
    return PostgresState(cluster, cluster.fresh_database())


@pytest.fixture
def sqlite_state(tmp_path):
    return SqliteState(tmp_path / "shared" / "state.sqlite3")


def add_user(tmp_path, state, name: str, *flags: str) -> str:
    result = run_cli(tmp_path, "--user", "add", name, *flags, env=state.env)
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()[-1]


def serve(spawn, fake, state, config: str = PRICES, env=None, *flags: str):
    server = spawn(
        "--http",
        "127.0.0.1:0",
        *flags,
        config=config,
        env={**state.env, **(env or {})},
        upstream=fake,
    )
    server.port = wait_listening(server)
    return server


def bearer(token: str) -> dict:
    return {"Authorization": f"Bearer {token}"}


def ask(port: int, auth: dict, session: str, arguments: dict, request_id=1) -> dict:
    params = {"name": "answer", "arguments": arguments}
    reply = post(port, rpc("tools/call", params, id=request_id), session, auth, timeout=60)
    assert reply.status == 200, reply
    return reply.json()


def failure(reply: dict) -> str:
    assert "error" in reply, reply
    return reply["error"]["message"]


def creates(fake) -> list:
    return [r for r in fake.requests if r.method == "POST" and r.path == "/v1/responses"]


# -- --user add / list / revoke ---------------------------------------------------------------


def test_user_add_prints_a_token_once_and_the_state_keeps_only_its_hash(tmp_path, state):
    result = run_cli(tmp_path, "--user", "add", "alice", "--daily-usd", "2", env=state.env)
    assert result.returncode == 0, result.stderr
    token = result.stdout.splitlines()[-1]
    assert len(token) >= 32 and " " not in token
    assert result.stdout.count(token) == 1 and token not in result.stderr
    stored = state.query("SELECT name, token_sha256, daily_usd FROM users")
    assert stored == [("alice", hashlib.sha256(token.encode()).hexdigest(), 2.0)]
    listed = run_cli(tmp_path, "--user", "list", "--json", env=state.env)
    assert listed.returncode == 0 and token not in listed.stdout
    user = json.loads(listed.stdout)["users"][0]
    assert (user["name"], user["revoked_at"], user["daily_usd"]) == ("alice", None, 2.0)
    text = run_cli(tmp_path, "--user", "list", env=state.env)
    assert "alice" in text.stdout and "active" in text.stdout and token not in text.stdout
    again = run_cli(tmp_path, "--user", "add", "alice", env=state.env)
    assert again.returncode == 2 and "exists; --user rotate alice gives it" in again.stderr


def test_rotation_and_revoke_then_add_keep_the_allowances(tmp_path, state):
    """Issue 39: the documented rotation (revoke, then add) dropped a user's own allowances."""

    def user(*args: str) -> tuple:
        done = run_cli(tmp_path, "--user", *args, env=state.env)
        assert done.returncode == 0, done.stderr
        listed = json.loads(run_cli(tmp_path, "--user", "list", "--json", env=state.env).stdout)
        (row,) = listed["users"]
        return done.stdout, (row["revoked_at"] is None, row["daily_usd"], row["monthly_usd"])

    first = add_user(tmp_path, state, "alice", "--daily-usd", "2", "--monthly-usd", "5")
    said, row = user("rotate", "alice")
    assert row == (True, 2.0, 5.0) and "daily $2.00, monthly $5.00" in said
    rotated = said.splitlines()[-1]
    assert rotated.startswith("ormcp_u_") and rotated != first
    assert state.query("SELECT token_sha256 FROM users") == [
        (hashlib.sha256(rotated.encode()).hexdigest(),)
    ]
    assert user("revoke", "alice")[1] == (False, 2.0, 5.0)
    said, row = user("add", "alice")  # no allowance given: hers are kept, and it says so
    assert row == (True, 2.0, 5.0) and "again" in said and "daily $2.00" in said
    # A name is an identity: what the old alice left is this alice's, and it says so.
    assert "conversations (response ids) and tasks are this user's" in said
    assert "for another person, pick another name" in said
    user("revoke", "alice")
    said, row = user("add", "alice", "--daily-usd", "3")  # given: that one changes
    assert row == (True, 3.0, 5.0)
    said, row = user("limit", "alice", "--monthly-usd", "none")
    assert row == (True, 3.0, None) and "monthly: the per-user default" in said
    rotated_revoked = run_cli(tmp_path, "--user", "rotate", "alice", env=state.env)
    assert rotated_revoked.returncode == 0
    user("revoke", "alice")
    refused = run_cli(tmp_path, "--user", "rotate", "alice", env=state.env)
    assert refused.returncode == 2 and "is revoked; --user add alice" in refused.stderr


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("--user", "add", "no spaces"), "is not a user name"),
        (("--user", "add", "shared"), "is reserved"),
        (("--user", "add", "Shared"), "is reserved"),
        (("--user", "add", "LOCAL"), "is reserved"),
        (("--user", "revoke", "nobody"), "no user named 'nobody'"),
        (("--user", "add"), "--user add needs a user name"),
        (("--user", "remove", "x"), "--user takes add NAME, list, revoke NAME, rotate NAME"),
        (("--user", "add", "bob", "--daily-usd", "lots"), "--daily-usd takes dollars"),
        (("--user", "add", "bob", "--daily-usd", "none"), "--daily-usd takes dollars"),
        (("--user", "list", "--monthly-usd", "3"), "--monthly-usd goes with --user add"),
        (("--user", "rotate", "nobody"), "no user named 'nobody'"),
        (("--user", "rotate"), "--user rotate needs a user name"),
        (("--user", "limit", "nobody", "--daily-usd", "1"), "no user named 'nobody'"),
        (("--user", "limit", "bob"), "--user limit NAME needs --daily-usd X and/or"),
        (
            ("--user", "limit", "oauth:https://login.example.com#3f2a", "--daily-usd", "1"),
            "an OAuth subject's and shared's allowance is budget.per_user_daily_usd",
        ),
        (("--user", "limit", "shared", "--daily-usd", "1"), "budget.per_user_daily_usd"),
    ],
)
def test_bad_user_commands_exit_2_with_a_clear_error(tmp_path, args, words):
    result = run_cli(tmp_path, *args)
    assert result.returncode == 2 and words in result.stderr, result.stderr
    assert result.stdout == ""


def test_user_needs_the_state(tmp_path):
    result = run_cli(tmp_path, "--user", "list", env={"OPENAI_RESPONSES_MCP_STATE": "off"})
    assert result.returncode == 2 and "needs the state" in result.stderr


# -- who is asking -------------------------------------------------------------------------------


def test_once_a_user_exists_loopback_needs_a_token_and_each_token_is_someone(
    spawn, fake, tmp_path, state
):
    server = serve(spawn, fake, state, env={"MCP_HTTP_TOKEN": SHARED})
    open_session(server.port, bearer(SHARED))  # the shared token is one identity
    server_open = serve(spawn, fake, state)  # no token at all: open on 127.0.0.1 ...
    assert request(server_open.port, "GET", "/usage").status == 200
    alice = add_user(tmp_path, state, "alice")
    # ... until a user exists, which it sees within seconds, without a restart.
    wait_until(
        lambda: request(server_open.port, "GET", "/usage").status == 401, 20, "a token required"
    )
    refused = request(server_open.port, "POST", "/mcp", rpc("ping"), bearer("wrong" * 5))
    assert refused.status == 401 and 'error="invalid_token"' in refused.headers["www-authenticate"]
    session = open_session(server_open.port, bearer(alice))
    assert post(server_open.port, rpc("ping"), session, bearer(alice)).status == 200
    # Both kinds of token work on the server that has the shared one.
    mine = open_session(server.port, bearer(alice))
    assert post(server.port, rpc("ping"), mine, bearer(SHARED)).status == 404  # not its session
    assert post(server.port, rpc("ping"), mine, bearer(alice)).status == 200


def test_a_revoked_token_is_refused_within_seconds(spawn, fake, tmp_path, state):
    alice = add_user(tmp_path, state, "alice")
    bob = add_user(tmp_path, state, "bob")
    server = serve(spawn, fake, state)
    session = open_session(server.port, bearer(alice))
    assert post(server.port, rpc("ping"), session, bearer(alice)).status == 200
    result = run_cli(tmp_path, "--user", "revoke", "alice", env=state.env)
    assert result.returncode == 0, result.stderr
    wait_until(
        lambda: post(server.port, rpc("ping"), session, bearer(alice)).status == 401,
        10,
        "the revoked token refused",
    )
    assert open_session(server.port, bearer(bob))  # the others go on
    listed = json.loads(run_cli(tmp_path, "--user", "list", "--json", env=state.env).stdout)
    assert [u["revoked_at"] is not None for u in listed["users"]] == [True, False]


LOCKED_OUT = "no valid token: every named user is revoked"


@pytest.mark.parametrize("host", ["127.0.0.1", "0.0.0.0"])
def test_revoking_the_last_user_never_opens_the_server(spawn, fake, tmp_path, sqlite_state, host):
    """Issue 31: a server that may serve without MCP_HTTP_TOKEN because named users exist
    keeps asking for a token once the last is revoked; it refuses everything, and says so on
    stderr without waiting for a request. The documented rotation (revoke, then add) never
    opens it in between. Only 127.0.0.1 is ever sent to."""
    alice = add_user(tmp_path, sqlite_state, "alice")
    server = spawn("--http", f"{host}:0", env=sqlite_state.env, upstream=fake)
    port = wait_listening(server)
    session = open_session(port, bearer(alice))
    assert run_cli(tmp_path, "--user", "revoke", "alice", env=sqlite_state.env).returncode == 0
    wait_until(
        lambda: request(port, "GET", "/usage", headers=bearer(alice)).status != 200,
        10,
        "the revoked token refused (before issue 31 the revoke opened the server instead)",
    )
    assert request(port, "POST", "/mcp", rpc("ping")).status == 401
    wait_until(lambda: LOCKED_OUT in server.stderr, 10, "the warning")
    for headers in ({}, bearer(alice), bearer("x" * 43)):
        for method, path in (("POST", "/mcp"), ("GET", "/usage"), ("GET", "/sse")):
            body = rpc("ping") if method == "POST" else None
            refused = request(port, method, path, body, headers)
            assert refused.status == 401, (headers, path, refused)
            assert LOCKED_OUT in refused.body.decode()
    assert post(port, rpc("ping"), session, bearer(alice)).status == 401
    assert post(port, rpc("ping"), session).status == 401
    # A restart does not open it either: the state has had a user.
    again = spawn("--http", f"{host}:0", env=sqlite_state.env, upstream=fake)
    again_port = wait_listening(again)
    wait_until(lambda: LOCKED_OUT in again.stderr, 10, "the warning at start")
    assert request(again_port, "POST", "/mcp", rpc("ping")).status == 401
    assert request(again_port, "GET", "/usage").status == 401
    # The rotation's second half: the new token works, the old one and none stay refused.
    fresh = add_user(tmp_path, sqlite_state, "alice")
    assert fresh.startswith(m.NAMED_TOKEN_PREFIX) and fresh != alice
    wait_until(lambda: request(port, "GET", "/usage", headers=bearer(fresh)).status == 200, 10)
    assert request(port, "GET", "/usage", headers=bearer(alice)).status == 401
    assert request(port, "GET", "/usage").status == 401
    listed = json.loads(run_cli(tmp_path, "--user", "list", "--json", env=sqlite_state.env).stdout)
    assert [u["name"] for u in listed["users"]] == ["alice"]
    assert alice not in server.stderr + again.stderr and fresh not in server.stderr


def test_a_restart_while_the_state_file_cannot_be_read_does_not_open_the_server(
    spawn, fake, tmp_path, sqlite_state
):
    """Fail closed: a local state file that cannot be read may hold users (it had alice)."""
    alice = add_user(tmp_path, sqlite_state, "alice")
    sqlite_state.path.rename(tmp_path / "elsewhere")
    sqlite_state.path.mkdir()  # a folder where the file should be
    server = serve(spawn, fake, sqlite_state)
    assert request(server.port, "GET", "/usage").status == 503  # 200 before issue 31
    assert request(server.port, "POST", "/mcp", rpc("ping")).status == 503  # not 401: a guess
    refused = request(server.port, "POST", "/mcp", rpc("ping"), bearer(alice))
    assert refused.status == 503 and refused.headers["retry-after"]
    assert request(server.port, "GET", "/healthz").status == 200


def test_tokens_never_appear_in_the_logs_or_usage(spawn, fake, tmp_path, sqlite_state):
    alice = add_user(tmp_path, sqlite_state, "alice")
    server = serve(spawn, fake, sqlite_state, PRICES + "server: {debug: true}\n")
    session = open_session(server.port, bearer(alice))
    ask(server.port, bearer(alice), session, {"query": "q"})
    post(server.port, rpc("ping"), session, bearer(alice + "x"))
    post(server.port, rpc("ping"), session, {"Authorization": alice})  # no scheme
    page = request(server.port, "GET", "/usage", headers={**bearer(alice), "Accept": "text/html"})
    assert page.status == 200 and alice not in page.body.decode()
    report = run_cli(tmp_path, "--usage", env=sqlite_state.env)
    server.stop()
    assert "[debug]" in server.stderr or "http" in server.stderr
    assert alice not in server.stderr and alice not in report.stdout + report.stderr


# -- per person: ledger, usage, budgets ------------------------------------------------------------


def test_each_row_records_its_user_and_usage_shows_each_their_own(spawn, fake, tmp_path, state):
    alice, bob = add_user(tmp_path, state, "alice"), add_user(tmp_path, state, "boss")
    config = PRICES + "server: {auth: {admins: [boss]}}\n"
    server = serve(spawn, fake, state, config, {"MCP_HTTP_TOKEN": SHARED})
    for token, queries in ((alice, ("a1", "a2")), (bob, ("b1",)), (SHARED, ("s1",))):
        session = open_session(server.port, bearer(token))
        for n, query in enumerate(queries):
            assert "result" in ask(server.port, bearer(token), session, {"query": query}, n)
    wait_until(lambda: len(state.query("SELECT id FROM usage")) == 4, 20, "four rows")
    rows = state.query("SELECT user_name, COUNT(*) FROM usage GROUP BY user_name ORDER BY 1")
    assert rows == [("alice", 2), ("boss", 1), ("shared", 1)]
    report = json.loads(run_cli(tmp_path, "--usage", "--json", env=state.env).stdout)
    assert [(r["user"], r["calls"]) for r in report["by_user"]] == rows
    assert sum(r["usd"] for r in report["by_user"]) == pytest.approx(report["total"]["usd"])
    text = run_cli(tmp_path, "--usage", env=state.env).stdout
    assert "by user" in text and "alice" in text and "boss" in text

    def users_seen(token: str) -> list:
        day = request(server.port, "GET", "/usage", headers=bearer(token)).json()["day"]
        return [row["user"] for row in day["by_user"]]

    assert users_seen(alice) == ["alice"]  # each sees their own row ...
    assert users_seen(SHARED) == ["shared"]
    assert users_seen(bob) == ["alice", "boss", "shared"]  # ... an admin everyone's
    page = request(server.port, "GET", "/usage", headers={**bearer(alice), "Accept": "text/html"})
    assert "by user" in page.body.decode() and "boss" not in page.body.decode()


def test_a_non_admin_sees_only_their_own_spend_in_every_figure(spawn, fake, tmp_path, sqlite_state):
    """Issue 31: from the team's totals, by_model and by_tool alice could work out what bob
    spent. Each figure of her /usage (JSON and page) is hers; the admin sees the team."""
    state = sqlite_state
    alice, bob = add_user(tmp_path, state, "alice"), add_user(tmp_path, state, "bob")
    boss = add_user(tmp_path, state, "boss")
    server = serve(spawn, fake, state, PRICES + "server: {auth: {admins: [boss]}}\n")
    for token, tool, n in ((alice, "answer", 2), (bob, "answer_quick", 1)):
        session = open_session(server.port, bearer(token))
        for i in range(n):
            params = {"name": tool, "arguments": {"query": f"q{i}"}}
            reply = post(server.port, rpc("tools/call", params, id=i), session, bearer(token))
            assert "result" in reply.json(), reply
    wait_until(lambda: len(state.query("SELECT id FROM usage")) == 3, 20, "three rows")
    (mine,) = state.query("SELECT SUM(usd) FROM usage WHERE user_name = 'alice'")
    (team,) = state.query("SELECT SUM(usd) FROM usage")
    # bob's call in flight: alice does not see it, the admin does
    fake.enqueue(Reply(delay_before_headers=30))
    bob_session = open_session(server.port, bearer(bob))
    params = {"name": "answer", "arguments": {"query": "slow"}}

    def slow_call() -> None:
        try:
            post(server.port, rpc("tools/call", params, id=9), bob_session, bearer(bob), timeout=60)
        except OSError:  # the server stops at the test's end, the call unanswered
            pass

    held = threading.Thread(target=slow_call, daemon=True)
    held.start()
    wait_until(lambda: len(creates(fake)) == 4, 20, "bob's call upstream")

    def usage(token: str) -> dict:
        return request(server.port, "GET", "/usage", headers=bearer(token)).json()

    seen = usage(alice)
    assert seen["in_flight"] == 0
    for period in ("day", "month"):
        data = seen[period]
        assert data["usd"] == pytest.approx(mine[0], abs=1e-5) and data["calls"] == 2
        assert [row["tool"] for row in data["by_tool"]] == ["answer"]
        assert sum(row["calls"] for row in data["by_model"]) == 2
        assert sum(row["usd"] for row in data["by_model"]) == pytest.approx(mine[0], abs=1e-5)
        assert [row["user"] for row in data["by_user"]] == ["alice"]
    page = request(server.port, "GET", "/usage", headers={**bearer(alice), "Accept": "text/html"})
    text = page.body.decode()
    assert "answer_quick" not in text and "bob" not in text
    assert f"${mine[0]:.4f}" in text and f"${team[0]:.4f}" not in text
    everyone = usage(boss)
    assert everyone["in_flight"] == 1
    assert (
        everyone["day"]["usd"] == pytest.approx(team[0], abs=1e-5) and everyone["day"]["calls"] == 3
    )
    assert {row["tool"] for row in everyone["day"]["by_tool"]} == {"answer", "answer_quick"}
    assert usage(bob)["in_flight"] == 1 and usage(bob)["day"]["calls"] == 1


def test_twenty_simultaneous_calls_hold_a_per_user_allowance_of_five(spawn, fake, tmp_path, state):
    """Fan-out cannot beat a per-user allowance: each call reserves its cost first (one web
    search, $0.025 here, and its question's tokens, about $0.0001), so of twenty in flight at
    once only five fit in $0.1255."""
    alice, bob = add_user(tmp_path, state, "alice"), add_user(tmp_path, state, "bob")
    config = PRICES + "budget: {per_user_daily_usd: 0.1255}\n"
    config += "server: {http: {max_calls_per_session: 32}}\n"
    server = serve(spawn, fake, state, config)
    fake.enqueue(*[Reply(stall_after_events=3, stall_seconds=3) for _ in range(20)])
    session = open_session(server.port, bearer(alice))
    replies: list = []

    def one(n: int) -> None:
        replies.append(ask(server.port, bearer(alice), session, {"query": f"q{n}"}, n))

    threads = [threading.Thread(target=one, args=(n,)) for n in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    answered = [r for r in replies if "result" in r]
    refused = [failure(r) for r in replies if "error" in r]
    assert len(answered) == 5 and len(refused) == 15, refused
    for message in refused:
        assert message.startswith("answer failed: alice's daily allowance of $0.13")
        assert "budget.per_user_daily_usd" in message
    # The allowance is alice's, not the team's: bob still gets answers.
    bob_session = open_session(server.port, bearer(bob))
    assert "result" in ask(server.port, bearer(bob), bob_session, {"query": "bob"})
    wait_until(lambda: not state.query("SELECT id FROM reservations"), 20, "settled")


def test_a_users_own_allowance_overrides_the_default(spawn, fake, tmp_path, sqlite_state):
    carol = add_user(tmp_path, sqlite_state, "carol", "--monthly-usd", "0.03")
    dave = add_user(tmp_path, sqlite_state, "dave")
    server = serve(spawn, fake, sqlite_state, PRICES + "budget: {per_user_monthly_usd: 1}\n")
    session = open_session(server.port, bearer(carol))
    fake.enqueue(Reply(searches=[{"query": "a", "sources": []}]))  # $0.025 and its tokens
    assert "result" in ask(server.port, bearer(carol), session, {"query": "one"}, 1)
    message = failure(ask(server.port, bearer(carol), session, {"query": "two"}, 2))
    assert "carol's monthly allowance of $0.03 has no room" in message
    others = open_session(server.port, bearer(dave))
    for n in range(2):  # dave has the default dollar
        assert "result" in ask(server.port, bearer(dave), others, {"query": f"d{n}"}, n)
    assert len(creates(fake)) == 3


def test_a_rotated_token_is_refused_and_the_new_one_keeps_the_allowance_and_its_spend(
    spawn, fake, tmp_path, sqlite_state
):
    old = add_user(tmp_path, sqlite_state, "alice", "--daily-usd", "0.03")
    server = serve(spawn, fake, sqlite_state)
    session = open_session(server.port, bearer(old))
    fake.enqueue(Reply(searches=[{"query": "a", "sources": []}]))  # $0.025 and its tokens
    assert "result" in ask(server.port, bearer(old), session, {"query": "one"}, 1)
    rotated = run_cli(tmp_path, "--user", "rotate", "alice", env=sqlite_state.env)
    assert rotated.returncode == 0, rotated.stderr
    new = rotated.stdout.splitlines()[-1]
    wait_until(
        lambda: post(server.port, rpc("ping"), session, bearer(old)).status == 401,
        10,
        "the old token refused",
    )
    session = open_session(server.port, bearer(new))
    message = failure(ask(server.port, bearer(new), session, {"query": "two"}, 2))
    assert "alice's daily allowance of $0.03 has no room" in message  # hers, with her spend
    suggested = re.search(r"--user limit alice --daily-usd X", message)
    assert suggested, message
    command = suggested.group(0).replace("X", "1").split()
    assert run_cli(tmp_path, *command, env=sqlite_state.env).returncode == 0
    wait_until(
        lambda: "result" in ask(server.port, bearer(new), session, {"query": "two"}, 3),
        10,
        "the raised allowance",
    )


# -- per person: follow-ups, tasks, the cache --------------------------------------------------


def test_another_users_response_id_is_not_found_and_nothing_is_sent(spawn, fake, tmp_path, state):
    alice, bob = add_user(tmp_path, state, "alice"), add_user(tmp_path, state, "bob")
    server = serve(spawn, fake, state)
    mine, theirs = open_session(server.port, bearer(alice)), open_session(server.port, bearer(bob))
    first = ask(server.port, bearer(alice), mine, {"query": "q"})
    response_id = first["result"]["structuredContent"]["response_id"]
    assert response_id and len(creates(fake)) == 1
    follow = {"query": "and then?", "previous_response_id": response_id}
    message = failure(ask(server.port, bearer(bob), theirs, follow, 2))
    assert "previous_response_id not found" in message
    assert len(creates(fake)) == 1  # nothing went upstream for bob
    assert "result" in ask(server.port, bearer(alice), mine, follow, 3)
    assert creates(fake)[-1].body["previous_response_id"] == response_id


def test_another_users_task_is_not_found(spawn, fake, tmp_path, sqlite_state):
    alice, bob = add_user(tmp_path, sqlite_state, "alice"), add_user(tmp_path, sqlite_state, "bob")
    server = serve(spawn, fake, sqlite_state)
    fake.enqueue(Reply(event_delay=0.2))
    headers = {"MCP-Protocol-Version": "2025-11-25"}
    init = {"protocolVersion": "2025-11-25", "capabilities": {}}
    init["clientInfo"] = {"name": "pytest", "version": "0"}

    def session_of(token: str) -> str:
        reply = post(server.port, rpc("initialize", init), headers={**bearer(token), **headers})
        assert reply.status == 200, reply
        return reply.headers["mcp-session-id"]

    def send(token, session, method, params, request_id=1) -> dict:
        hdrs = {**bearer(token), **headers}
        reply = post(server.port, rpc(method, params, request_id), session, hdrs, timeout=30)
        if reply.headers.get("content-type", "").startswith("text/event-stream"):
            return [d for _, d in reply.events() if "method" not in d][-1]
        return reply.json()

    mine, theirs = session_of(alice), session_of(bob)
    call = {"name": "answer", "arguments": {"query": "q"}, "task": {"ttl": 60000}}
    task_id = send(alice, mine, "tools/call", call)["result"]["task"]["taskId"]
    got = send(bob, theirs, "tasks/get", {"taskId": task_id}, 2)
    assert got["error"]["code"] == -32602 and "unknown task id" in got["error"]["message"]
    cancel = send(bob, theirs, "tasks/cancel", {"taskId": task_id}, 3)
    assert "error" in cancel
    assert send(alice, mine, "tasks/get", {"taskId": task_id}, 4)["result"]["taskId"] == task_id
    assert "result" in send(alice, mine, "tasks/result", {"taskId": task_id}, 5)


def test_signed_task_and_handoff_ids_of_another_user_are_not_found_on_another_instance(
    spawn, fake, tmp_path, sqlite_state
):
    secret = "s3cret-" + "0123456789abcdefghijklmnopqrstuvwxyz"
    alice, bob = add_user(tmp_path, sqlite_state, "alice"), add_user(tmp_path, sqlite_state, "bob")
    config = "server:\n  tasks:\n    immediate_ms: 500\nrequest:\n  handoff_after_s: 1\n"
    env = {**sqlite_state.env, "MCP_TASK_SECRET": secret, "OPENAI_BASE_URL": fake.base_url}
    servers = []
    for name in ("a", "b"):
        home = tmp_path / name
        home.mkdir()
        (home / "config.yaml").write_text(config)
        args = ["--config", str(home / "config.yaml"), "--http", "127.0.0.1:0", "--stateless"]
        servers.append(Server(args, base_env(home, **env), home))
    try:
        a, b = (wait_listening(server) for server in servers)
        fake.enqueue(Reply(event_delay=0.25))

        def modern(port, token, method, params, tasks=True) -> dict:
            headers = {**bearer(token), "MCP-Protocol-Version": MODERN, "Mcp-Method": method}
            name = params.get("taskId") or params.get("name")
            headers["Mcp-Name"] = name
            params = {**params, "_meta": meta(tasks)}
            reply = post(port, rpc(method, params), headers=headers, timeout=30)
            if reply.headers.get("content-type", "").startswith("text/event-stream"):
                return [d for _, d in reply.events() if "method" not in d][-1]
            return reply.json()

        created = modern(a, alice, "tools/call", {"name": "answer", "arguments": {"query": "q"}})
        task_id = created["result"]["taskId"]
        refused = modern(b, bob, "tasks/get", {"taskId": task_id})
        assert "error" in refused and "unknown task id" in refused["error"]["message"], refused
        gets = [r for r in fake.requests if r.method == "GET"]
        assert not gets  # nothing was read upstream for bob
        wait_until(
            lambda: (
                modern(b, alice, "tasks/get", {"taskId": task_id})["result"]["status"]
                == "completed"
            ),
            30,
            "alice's task, on the other instance",
        )
        # A handoff (a client without tasks, still waiting after handoff_after_s) likewise.
        fake.enqueue(Reply(event_delay=0.25))
        first = modern(
            a, alice, "tools/call", {"name": "answer", "arguments": {"query": "h"}}, False
        )
        handoff = first["result"]["_meta"]["openai-responses-mcp/handoff"]["id"]
        collect = {"name": "answer_result", "arguments": {"id": handoff, "wait_s": 5}}
        theirs = modern(b, bob, "tools/call", collect, False)["result"]
        assert theirs["isError"] is True and "unknown id" in theirs["content"][0]["text"]
        for _ in range(30):
            mine = modern(b, alice, "tools/call", collect, False)["result"]
            if mine["_meta"]["openai-responses-mcp/handoff"]["status"] == "completed":
                break
        assert mine["structuredContent"]["answer"]
    finally:
        for server in servers:
            server.stop()


@pytest.mark.parametrize("share", [False, True])
def test_the_cache_is_per_user_unless_shared(spawn, fake, tmp_path, sqlite_state, share):
    alice, bob = add_user(tmp_path, sqlite_state, "alice"), add_user(tmp_path, sqlite_state, "bob")
    config = PRICES + f"cache: {{share_across_users: {str(share).lower()}}}\n"
    server = serve(spawn, fake, sqlite_state, config, {"ANSWER_CACHE_TTL_S": "600"})
    mine, theirs = open_session(server.port, bearer(alice)), open_session(server.port, bearer(bob))
    first = ask(server.port, bearer(alice), mine, {"query": "same"})
    again = ask(server.port, bearer(alice), mine, {"query": "same"}, 2)
    assert again["result"]["_meta"]["cache"]["hit"] is True
    other = ask(server.port, bearer(bob), theirs, {"query": "same"}, 3)
    assert other["result"]["_meta"]["cache"]["hit"] is share
    assert len(creates(fake)) == (1 if share else 2)
    if share:  # given from the cache, the response is bob's to follow up too
        response_id = first["result"]["structuredContent"]["response_id"]
        follow = {"query": "more", "previous_response_id": response_id}
        assert "result" in ask(server.port, bearer(bob), theirs, follow, 4)


# -- the state's schema --------------------------------------------------------------------------

V2_USAGE = (
    "CREATE TABLE usage (id INTEGER PRIMARY KEY, at REAL NOT NULL, day TEXT NOT NULL, "
    "tool TEXT NOT NULL, model TEXT NOT NULL, input_tokens INTEGER NOT NULL DEFAULT 0, "
    "cached_input_tokens INTEGER NOT NULL DEFAULT 0, output_tokens INTEGER NOT NULL DEFAULT 0, "
    "reasoning_tokens INTEGER NOT NULL DEFAULT 0, web_searches INTEGER NOT NULL DEFAULT 0, "
    "usd REAL, cache_hit INTEGER NOT NULL DEFAULT 0, elapsed_ms INTEGER NOT NULL DEFAULT 0, "
    "outcome TEXT NOT NULL)"
)


def execute(state, *statements: str) -> None:
    """Runs statements that return no rows, on either backend."""
    if state.name == "sqlite":
        state.path.parent.mkdir(parents=True, exist_ok=True)
        with sqlite3.connect(state.path) as conn:
            for statement in statements:
                conn.execute(statement)
        return
    import psycopg

    with psycopg.connect(state.url, autocommit=True) as conn:
        for statement in statements:
            conn.execute(statement)


def test_a_version_2_state_gets_users_and_a_user_on_each_row(tmp_path, state):
    execute(
        state,
        V2_USAGE.replace("INTEGER PRIMARY KEY", "SERIAL PRIMARY KEY")
        if state.name == "postgres"
        else V2_USAGE,
        "CREATE TABLE reservations (id TEXT PRIMARY KEY, at REAL NOT NULL, "
        "expires_at REAL NOT NULL, usd REAL NOT NULL)",
        "CREATE TABLE schema_version (version INTEGER NOT NULL)",
        "INSERT INTO schema_version VALUES (2)",
        "INSERT INTO usage (at, day, tool, model, usd, outcome) VALUES (0, 'd', 'a', 'm', 1, 'ok')",
    )
    assert run_cli(tmp_path, "--user", "add", "alice", env=state.env).returncode == 0
    assert state.query("SELECT version FROM schema_version") == [(m.STATE_SCHEMA_VERSION,)]
    assert state.query("SELECT user_name FROM usage") == [("",)]
    assert state.query("SELECT COUNT(user_name) FROM reservations") == [(0,)]
    report = json.loads(run_cli(tmp_path, "--usage", "--json", env=state.env).stdout)
    assert report["by_user"] == []  # no spend was by anyone known


def test_doctor_takes_named_users_as_the_token_an_open_address_needs(tmp_path, sqlite_state):
    before = run_cli(tmp_path, "--doctor", "--http", "0.0.0.0:0", env=sqlite_state.env)
    assert "refusing to serve" in before.stdout
    add_user(tmp_path, sqlite_state, "alice")
    after = run_cli(tmp_path, "--doctor", "--http", "0.0.0.0:0", env=sqlite_state.env)
    assert "refusing to serve" not in after.stdout
    assert "open to the network, every request needs a token" in after.stdout


def test_a_team_database_never_read_asks_for_a_token_even_on_loopback(spawn, fake):
    """Fail closed: users may be in a database that cannot be reached yet."""
    pytest.importorskip("psycopg")
    url = "postgresql://mcp:pw@127.0.0.1:1/mcp"  # nothing listens on port 1
    server = spawn(
        "--http", "127.0.0.1:0", env={"OPENAI_RESPONSES_MCP_STATE_URL": url}, upstream=fake
    )
    port = wait_listening(server)
    refused = request(port, "POST", "/mcp", rpc("ping"))  # 503: it cannot tell yet
    assert refused.status == 503 and refused.headers["retry-after"]
    assert request(port, "GET", "/healthz").status == 200


# -- one person, one identity (issue 31) --------------------------------------------------------


def with_config(tmp_path, text: str) -> list:
    path = tmp_path / "extra.yaml"
    path.write_text(text, encoding="utf-8")
    return ["--config", str(path)]


def oauth_server(spawn, fake, state, issuer, admins: list, env=None, extra: str = ""):
    """A server with named users, MCP_HTTP_TOKEN and OAuth from `issuer`, all at once."""
    auth = {"issuer": issuer.url, "admins": admins}
    config = PRICES + f"server:\n  auth: {json.dumps(auth)}\n" + extra
    server = serve(spawn, fake, state, config, {"MCP_HTTP_TOKEN": SHARED, **(env or {})})
    server.resource = f"http://127.0.0.1:{server.port}/mcp"
    wait_until(
        lambda: (
            post(server.port, rpc("ping", {}), headers=bearer(issuer.token(server.resource))).status
            != 503
        ),
        20,
        "the issuer's keys",
    )
    return server


def test_an_oauth_subject_never_acts_as_the_named_user_or_the_shared_token_it_spells(
    spawn, fake, tmp_path, state
):
    """sub=alice is not named alice (her conversation is not found), sub=boss is not the admin
    `boss` (its /usage is its own), sub=shared is not MCP_HTTP_TOKEN's holder."""
    from test_oauth import Issuer

    issuer = Issuer().start()
    try:
        alice, boss = add_user(tmp_path, state, "alice"), add_user(tmp_path, state, "boss")
        server = oauth_server(spawn, fake, state, issuer, ["boss"])

        def as_subject(sub: str) -> dict:
            return bearer(issuer.token(server.resource, sub=sub))

        for owner, impostor in ((bearer(alice), "alice"), (bearer(SHARED), "shared")):
            mine = open_session(server.port, owner)
            first = ask(server.port, owner, mine, {"query": "q"})
            response_id = first["result"]["structuredContent"]["response_id"]
            sent = len(creates(fake))
            follow = {"query": "and then?", "previous_response_id": response_id}
            theirs = open_session(server.port, as_subject(impostor))
            message = failure(ask(server.port, as_subject(impostor), theirs, follow, 2))
            assert "previous_response_id not found" in message, impostor
            assert len(creates(fake)) == sent  # nothing went upstream for the impostor
        ok = "SELECT id FROM usage WHERE outcome = 'ok'"
        wait_until(lambda: len(state.query(ok)) == 2, 20, "two answers")
        admin = request(server.port, "GET", "/usage", headers=bearer(boss)).json()
        kinds = {row["user"]: row["kind"] for row in admin["day"]["by_user"]}
        assert kinds["alice"] == "user" and kinds["shared"] == "shared", kinds
        assert {kinds[name] for name in kinds.keys() - {"alice", "shared"}} <= {"oauth"}
        seen = request(server.port, "GET", "/usage", headers=as_subject("boss")).json()
        assert not {"alice", "shared"} & {row["user"] for row in seen["day"]["by_user"]}
    finally:
        issuer.stop()


def test_admins_name_an_oauth_subject_by_its_issuer(spawn, fake, tmp_path, sqlite_state):
    from test_oauth import Issuer

    issuer = Issuer().start()
    try:
        add_user(tmp_path, sqlite_state, "alice")
        admins = [f"oauth:{issuer.url}/#boss", "user:alice"]  # a trailing / is the same issuer
        server = oauth_server(spawn, fake, sqlite_state, issuer, admins)
        carol = bearer(issuer.token(server.resource, sub="carol"))
        assert "result" in ask(server.port, carol, open_session(server.port, carol), {"query": "q"})
        wait_until(lambda: len(sqlite_state.query("SELECT id FROM usage")) == 1, 20, "the row")
        carol_id = f"oauth:{issuer.url}#carol"
        assert sqlite_state.query("SELECT user_name FROM usage") == [(carol_id,)]
        boss = bearer(issuer.token(server.resource, sub="boss"))
        rows = request(server.port, "GET", "/usage", headers=boss).json()["day"]["by_user"]
        assert [(row["user"], row["kind"]) for row in rows] == [(carol_id, "oauth")]
        text = run_cli(tmp_path, "--usage", env=sqlite_state.env).stdout
        assert carol_id in text
        other = issuer.token(server.resource, sub="boss", iss=issuer.url + "/other")
        assert post(server.port, rpc("ping", {}), headers=bearer(other)).status == 401
    finally:
        issuer.stop()


@pytest.mark.parametrize(
    "entry",
    ["oauth:https://login.example.com", "oauth:login.example.com#a", "user:bad name",
     "user:shared", "local", "x:y", "user:"],
)  # fmt: skip
def test_an_admin_entry_of_no_namespace_exits_2_saying_the_syntax(tmp_path, entry):
    config = with_config(tmp_path, f"server:\n  auth:\n    admins: [{json.dumps(entry)}]\n")
    done = run_cli(tmp_path, "--show-config", *config)
    assert done.returncode == 2, done.stderr
    assert "server.auth.admins" in done.stderr and "oauth:ISSUER#SUBJECT" in done.stderr


def test_admin_entries_and_labels_name_each_namespace():
    issuer = "https://login.example.com:8443/realms/t%C3%A9am"
    admin, parse = m.Identity.admin_entry, m.Identity.parse
    assert admin("alice").key == admin("user:alice").key == "alice"  # as before
    assert admin("shared").key == "shared"
    # A subject may hold '#' and ':' (the issuer cannot): the first '#' ends the issuer.
    assert admin(f"oauth:{issuer}/#a#b:c").key == f"oauth:{issuer}#a#b:c"
    assert m.Identity.oauth(issuer + "/", "a#b:c").key == f"oauth:{issuer}#a#b:c"
    assert admin("Alice") != admin("alice")  # as the tokens differ
    assert parse("alice").label == "user:alice"
    assert parse("shared").label == "shared (MCP_HTTP_TOKEN)"
    assert parse("oauth:#carol").label == "oauth:(issuer unknown)#carol"
    assert parse("oauth:https://x#shared").kind == "oauth"


def test_a_version_5_state_moves_oauth_subjects_into_their_namespace(tmp_path, state):
    """Up to version 5 a subject was stored as its bare `sub`: every name that is no named
    user, `shared` or `local` was one, and becomes oauth:<issuer>#<sub> on upgrade, in every
    table; cached answers (keyed by the old names) are dropped."""
    add_user(tmp_path, state, "alice")
    run_cli(tmp_path, "--user", "revoke", "alice", env=state.env)  # revoked: still named
    issuer = "https://login.example.com/realms/team"
    carol = f"oauth:{issuer}#carol"
    rows = [("alice", 1.0), ("carol", 2.0), ("shared", 4.0), ("", 8.0), (carol, 16.0)]
    execute(
        state,
        "UPDATE schema_version SET version = 5",
        *(
            "INSERT INTO usage (at, day, tool, model, usd, outcome, user_name) VALUES "
            f"(0, '2026-11-26', 'answer', 'm', {usd}, 'ok', '{name}')"
            for name, usd in rows[:4]
        ),
        *(
            f"INSERT INTO usage_by_user (day, user_name, calls, usd) VALUES "
            f"('2026-11-26', '{name}', 1, {usd})"
            for name, usd in rows
        ),
        "INSERT INTO response_owners (response_id, user_name, at) VALUES ('resp_1', 'carol', 0)",
        "INSERT INTO response_owners (response_id, user_name, at) VALUES ('resp_1', 'alice', 0)",
        "INSERT INTO reservations (id, at, expires_at, usd, user_name) VALUES "
        "('r1', 0, 9e18, 1, 'carol')",
        "INSERT INTO answers (key, stored_at, body) VALUES ('k', 0, '{}')",
    )
    config = with_config(tmp_path, f"server:\n  auth:\n    issuer: {json.dumps(issuer + '/')}\n")
    done = run_cli(tmp_path, *config, "--usage", "--json", "--since", "2000-01-01", env=state.env)
    assert done.returncode == 0, done.stderr
    assert state.query("SELECT version FROM schema_version") == [(m.STATE_SCHEMA_VERSION,)]
    names = state.query("SELECT user_name FROM usage ORDER BY usd")
    assert names == [("alice",), (carol,), ("shared",), ("",)]
    by_user = state.query("SELECT user_name, calls, usd FROM usage_by_user ORDER BY user_name")
    assert by_user == [("",1,8.0), ("alice",1,1.0), (carol,2,18.0), ("shared",1,4.0)]  # fmt: skip
    owners = state.query("SELECT user_name FROM response_owners ORDER BY user_name")
    assert owners == [("alice",), (carol,)]
    assert state.query("SELECT user_name FROM reservations") == [(carol,)]
    assert state.query("SELECT COUNT(*) FROM answers") == [(0,)]
    report = json.loads(done.stdout)
    assert {(r["user"], r["kind"]) for r in report["by_user"]} == {
        ("(before users)", "none"), ("alice", "user"), (carol, "oauth"), ("shared", "shared")
    }  # fmt: skip
    text = run_cli(tmp_path, "--usage", "--since", "2000-01-01", env=state.env).stdout
    for label in ("user:alice", carol, "shared (MCP_HTTP_TOKEN)", "(before users)"):
        assert label in text, text


def test_a_long_subject_is_held_to_its_allowance(spawn, fake, tmp_path, sqlite_state):
    """A subject's rows keep its whole identity (the ledger cut text at 200 characters, and
    the allowance, summed by the whole identity, then never saw them)."""
    from test_oauth import Issuer

    issuer = Issuer().start()
    try:
        extra = "budget: {per_user_daily_usd: 0.03}\n"
        server = oauth_server(spawn, fake, sqlite_state, issuer, [], extra=extra)
        long = bearer(issuer.token(server.resource, sub="x" * m.OAUTH_SUBJECT_MAX))
        session = open_session(server.port, long)
        fake.enqueue(Reply(searches=[{"query": "a", "sources": []}]))  # $0.025 and its tokens
        assert "result" in ask(server.port, long, session, {"query": "one"}, 1)
        message = failure(ask(server.port, long, session, {"query": "two"}, 2))
        assert "daily allowance of $0.03 has no room" in message
        distinct = "SELECT DISTINCT user_name FROM usage_by_user"
        (stored,) = wait_until(lambda: sqlite_state.query(distinct), 20, "the row")
        assert stored[0] == f"oauth:{issuer.url}#" + "x" * m.OAUTH_SUBJECT_MAX
        too_long = issuer.token(server.resource, sub="x" * (m.OAUTH_SUBJECT_MAX + 1))
        assert post(server.port, rpc("ping", {}), headers=bearer(too_long)).status == 401
        # Issue 39: what it suggests works for a subject (no --user command does)
        assert "raise budget.per_user_daily_usd or wait" in message and "--user" not in message
        shared = open_session(server.port, bearer(SHARED))
        fake.enqueue(Reply(searches=[{"query": "a", "sources": []}]))
        assert "result" in ask(server.port, bearer(SHARED), shared, {"query": "s1"}, 1)
        message = failure(ask(server.port, bearer(SHARED), shared, {"query": "s2"}, 2))
        assert "shared's daily allowance" in message and "--user" not in message
        raised = "budget: {per_user_daily_usd: 1}\n"  # the suggestion, done
        again = oauth_server(spawn, fake, sqlite_state, issuer, [], extra=raised)
        long = bearer(issuer.token(again.resource, sub="x" * m.OAUTH_SUBJECT_MAX))
        session = open_session(again.port, long)
        assert "result" in ask(again.port, long, session, {"query": "two"}, 2)
    finally:
        issuer.stop()


def test_a_name_that_differs_only_in_case_is_refused(tmp_path, sqlite_state):
    add_user(tmp_path, sqlite_state, "alice")
    again = run_cli(tmp_path, "--user", "add", "Alice", env=sqlite_state.env)
    assert again.returncode == 2 and "differs from it only in case" in again.stderr
    run_cli(tmp_path, "--user", "revoke", "alice", env=sqlite_state.env)
    assert run_cli(tmp_path, "--user", "add", "ALICE", env=sqlite_state.env).returncode == 2
    assert run_cli(tmp_path, "--user", "add", "alice", env=sqlite_state.env).returncode == 0
