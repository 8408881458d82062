"""State shared by several server processes, on either backend: a SQLite file (the default)
and a PostgreSQL database (state.url; a real server from Debian's packages, started for the
session by conftest's `postgres` fixture) pass the same tests: one ledger, one budget and one
cache for processes that share no file, budgets that hold under fan-out, and outages that
delay no answer and lose no spend."""

from __future__ import annotations

import datetime
import json
import os
import sqlite3
import subprocess
import sys
import threading
import time

import pytest
from conftest import (
    PG_PASSWORD,
    PRICES,
    SCRIPT,
    base_env,
    failure_of,
    run_cli,
    send_call,
    wait_until,
)
from fake_upstream import Reply

import openai_responses_mcp as m

CACHE_ON = {"ANSWER_CACHE_TTL_S": "600"}
# Four calls' reservations: each is at least one web search, $0.025 here, and its question's
# tokens (under a hundred, about $0.0001).
BUDGET = 0.1005


class SqliteState:
    """state.path: one file every process on the machine shares."""

    name = "sqlite"

    def __init__(self, path):
        self.path = path
        self.env = {"OPENAI_RESPONSES_MCP_STATE": str(path)}

    def query(self, sql: str, params=()) -> list:
        try:
            with sqlite3.connect(self.path) as conn:
                return conn.execute(sql, params).fetchall()
        except sqlite3.OperationalError:  # not made yet
            return []


class PostgresState:
    """state.url: one database every host reaches; its password only in the environment."""

    name = "postgres"

    def __init__(self, cluster, url: str):
        self.cluster, self.url = cluster, url
        self.env = {"OPENAI_RESPONSES_MCP_STATE_URL": url}

    def query(self, sql: str, params=()) -> list:
        import psycopg

        try:
            with psycopg.connect(self.url, autocommit=True) as conn:
                return conn.execute(sql.replace("?", "%s"), params).fetchall()
        except psycopg.errors.UndefinedTable:
            return []


@pytest.fixture(params=["sqlite", "postgres"])
def state(request, tmp_path):
    if request.param == "sqlite":
        return SqliteState(tmp_path / "shared" / "state.sqlite3")
    cluster = request.getfixturevalue("postgres")
    return PostgresState(cluster, cluster.fresh_database())


def count(state, table: str, where: str = "1 = 1") -> int:
    rows = state.query(f"SELECT COUNT(*) FROM {table} WHERE {where}")
    return rows[0][0] if rows else 0


def server(spawn, fake, tmp_path, state, name: str, config: str = PRICES, env=None):
    """A server process with a home of its own: it shares nothing with another but `state`."""
    home = tmp_path / name
    env = {**state.env, **CACHE_ON, "XDG_STATE_HOME": str(home), **(env or {})}
    process = spawn("--stdio", config=config, env=env, upstream=fake)
    process.initialize()
    return process


def usage(tmp_path, state) -> dict:
    result = run_cli(tmp_path, "--usage", "--json", env=state.env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def result_of(reply: dict) -> dict:
    assert "result" in reply, reply
    return reply["result"]["_meta"]


def connected(state, processes: int) -> None:
    """Waits until each server process has its cache reads' and its writer's connections
    open. A cache read that takes longer than 0.25 s is a miss, and on a busy machine the
    first one, opening its connection to PostgreSQL, can (a SQLite file opens at once)."""
    if state.name == "postgres":
        sql = "SELECT COUNT(*) FROM pg_stat_activity WHERE application_name = ?"
        opened = lambda: state.query(sql, (m.SERVER_NAME,))[0][0]  # noqa: E731
        wait_until(lambda: opened() == 2 * processes, 20, f"{2 * processes} connections")


def test_two_processes_share_one_ledger_and_one_cache(spawn, fake, tmp_path, state):
    one = server(spawn, fake, tmp_path, state, "one")
    two = server(spawn, fake, tmp_path, state, "two")
    first = result_of(one.call("answer", {"query": "q"}))
    wait_until(lambda: count(state, "answers") == 1, 20, "the cache entry")
    result_of(two.call("answer_quick", {"query": "other"}))
    connected(state, 2)
    again = result_of(two.call("answer", {"query": "q"}))
    assert first["cache"] == {"hit": False} and again["cache"]["hit"] is True
    assert len(fake.requests) == 2
    wait_until(lambda: count(state, "usage") == 3, 20, "three ledger rows")
    report = usage(tmp_path, state)
    assert report["total"]["calls"] == 3 and report["total"]["cache_hits"] == 1
    assert [row["tool"] for row in report["by_tool"]] == ["answer", "answer_quick"]
    assert PG_PASSWORD not in json.dumps(report)


def test_ten_simultaneous_calls_from_two_processes_hold_a_small_budget(
    spawn, fake, tmp_path, state
):
    config = PRICES + f"budget: {{daily_usd: {BUDGET}}}\n"
    servers = [server(spawn, fake, tmp_path, state, name, config) for name in ("one", "two")]
    fake.enqueue(*[Reply(stall_after_events=3, stall_seconds=3) for _ in range(10)])
    replies: list = []
    lock = threading.Lock()

    def ask(process, name: str) -> None:
        for n in range(5):
            process.send(
                {
                    "jsonrpc": "2.0",
                    "id": f"{name}-{n}",
                    "method": "tools/call",
                    "params": {"name": "answer", "arguments": {"query": f"{name} {n}"}},
                }
            )
        for _ in range(5):
            message = process.recv(timeout=60)
            with lock:
                replies.append(message)

    threads = [
        threading.Thread(target=ask, args=(process, name))
        for process, name in zip(servers, ("one", "two"), strict=True)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    answered = [reply for reply in replies if "result" in reply]
    refused = [failure_of(reply) for reply in replies if "error" in reply]
    # All ten were in flight at once, so only the reservations decide: four fit in $0.10.
    assert len(answered) == 4 and len(refused) == 6, refused
    for message in refused:
        assert message.startswith(f"answer failed: daily budget of ${BUDGET:.2f} has no room")
    spent = sum(result_of(reply)["cost"]["usd"] for reply in answered)
    assert spent <= BUDGET
    wait_until(lambda: count(state, "reservations") == 0, 20, "every reservation settled")
    wait_until(lambda: count(state, "usage", "outcome = 'ok'") == 4, 20, "four rows")
    assert count(state, "usage", "outcome = 'refused'") == 6


def store_for(state) -> tuple:
    """A StateStore and its Ledger in this process, on the test's backend."""
    if state.name == "sqlite":
        backend = m._SqliteBackend(str(state.path))
    else:
        backend = m._PostgresBackend(state.url)
    store = m.StateStore(backend, m.Log(), "UTC")
    return store, m.Ledger(store, "UTC")


def a_row(usd: float) -> m.UsageRow:
    return m.UsageRow("answer", "gpt-5", "ok", {"cost": {"usd": usd}})


def hold_after_commit(store, monkeypatch, committed, release) -> None:
    """From now on the store's writer sets `committed` after each commit, then waits for
    `release` before it lets its batch go: the moment a write is in the store and in memory."""
    channel = store._writer._channel
    run = channel.run

    def commit_then_hold(*args, **kwargs):
        result = run(*args, **kwargs)
        committed.set()
        release.wait(30)
        return result

    monkeypatch.setattr(channel, "run", commit_then_hold)


def test_a_row_just_written_is_counted_once_before_it_leaves_memory(state, monkeypatch):
    """Between the writer's commit and the row leaving its unwritten list, the row is in both:
    the budget still counts it once (the writer's mark, read with the totals, says so)."""
    store, ledger = store_for(state)
    committed, release = threading.Event(), threading.Event()
    hold_after_commit(store, monkeypatch, committed, release)
    today = m.today_in("UTC")
    try:
        ledger.record(a_row(0.04))
        assert committed.wait(20)
        assert len(store.unwritten()) == 1  # committed, and still in memory
        assert state.query("SELECT usd FROM spend_by_day") == [(0.04,)]
        assert ledger.spent_since(today) == pytest.approx(0.04)
        _, _, sums = ledger.reserve("answer", [(today, 1.0)], 0.01, ttl_s=60)
        assert sums[0][0] == pytest.approx(0.04)
        release.set()
        wait_until(lambda: not store.unwritten(), 20, "the row to leave memory")
        assert ledger.spent_since(today) == pytest.approx(0.04)
    finally:
        release.set()
        store.close()


def test_a_cache_entry_just_written_pushes_an_older_one_out_once_not_twice(state, monkeypatch):
    """CI's intermittent test_max_entries_drops_the_oldest (a fifth request for four): an entry
    the writer had committed but not yet let go of was counted in the store and in memory, so
    a read took an older entry for evicted while the cache still had room for it."""
    store, _ = store_for(state)
    cache = m.AnswerCache(store, 600, 2)
    answer = {"answer": "a", "citations": [], "used_search": True, "model": "gpt-5"}
    committed, release = threading.Event(), threading.Event()
    try:
        cache.put("two", answer, None)
        wait_until(lambda: not store.unwritten(), 20, "the first entry written")
        # The first read opens the cache's connection, and misses if that takes over 0.25 s.
        wait_until(lambda: cache.get("two") is not None, 20, "a hit on the first entry")
        hold_after_commit(store, monkeypatch, committed, release)
        cache.put("three", answer, None)
        assert committed.wait(20)
        assert len(store.unwritten()) == 1 and count(state, "answers") == 2  # in both
        assert cache.get("two") is not None  # two entries of at most two: both still in
        assert cache.get("three") is not None
    finally:
        release.set()
        store.close()


def test_a_batch_whose_commit_was_not_acknowledged_is_not_written_twice(state, monkeypatch):
    """The commit went through but the connection dropped before saying so: the writer tries
    the batch again, and the rows its mark says are in are skipped."""
    store, ledger = store_for(state)
    channel = store._writer._channel
    run = channel.run
    lost = []

    def lose_the_first_acknowledgement(*args, **kwargs):
        result = run(*args, **kwargs)
        if not lost:
            lost.append(True)
            raise m.StateUnavailable("connection lost")
        return result

    monkeypatch.setattr(channel, "run", lose_the_first_acknowledgement)
    try:
        ledger.record(a_row(0.04))
        ledger.record(a_row(0.02))
        wait_until(lambda: lost and not store.unwritten(), 30, "the retried batch")
        ledger.record(a_row(0.01))  # a later row is still written
        wait_until(lambda: not store.unwritten(), 30, "the third row")
        assert sorted(row[0] for row in state.query("SELECT usd FROM usage")) == [0.01, 0.02, 0.04]
        assert ledger.spent_since(m.today_in("UTC")) == pytest.approx(0.07)
    finally:
        store.close()


def test_a_reservation_its_process_never_settled_counts_until_it_expires(state):
    """A server killed mid-call leaves its reservation: it holds its room until its expiry (the
    call's longest time), then neither counts nor stays (the writer prunes it)."""
    store, ledger = store_for(state)
    limits = [(m.today_in("UTC"), 0.05)]
    try:
        dead, estimate, _ = ledger.reserve("answer", limits, 0.03, ttl_s=3600)
        assert dead is not None and estimate == 0.03
        refused, _, sums = ledger.reserve("answer", limits, 0.03, ttl_s=3600)
        assert refused is None and sums == [(0.0, 0.03)]
        store.read(
            "an hour later",
            lambda q: q("UPDATE reservations SET expires_at = ? WHERE id = ?", (0.0, dead)),
            write=True,
        )
        live, _, sums = ledger.reserve("answer", limits, 0.03, ttl_s=3600)
        assert live is not None and sums == [(0.0, 0.0)]
        store.write_later(m._Prune(store.first_kept_day()))
        wait_until(lambda: not store.unwritten(), 20, "the prune")
        assert [row[0] for row in state.query("SELECT id FROM reservations")] == [live]
    finally:
        store.close()


def test_a_budget_refuses_when_its_state_cannot_be_reached(spawn, fake, tmp_path, state):
    if state.name == "sqlite":
        state.path.mkdir(parents=True)  # a folder where the file should be
        reason = "unable to open database file"
        where, address = "the state file", str(state.path)
    else:
        state.cluster.stop()
        reason = "connection failed"
        where, address = "the state database", f":{state.cluster.port}"
    try:
        process = server(spawn, fake, tmp_path, state, "one", PRICES + "budget: {daily_usd: 5}\n")
        message = failure_of(process.call("answer", {"query": "q"}))
    finally:
        if state.name == "postgres":
            state.cluster.start()
    assert message.startswith(f"answer failed: budget cannot be checked: {where} is unavailable (")
    assert reason in message and "budget.daily_usd" in message
    assert address not in message  # the client is told what failed, not where the store is
    assert address in process.stderr  # the server's log says where
    assert fake.requests == []
    assert PG_PASSWORD not in message and PG_PASSWORD not in process.stderr


def test_without_a_budget_an_outage_delays_no_answer_and_loses_no_spend(
    spawn, fake, tmp_path, state
):
    """SQLite: another process holds the file's write lock; PostgreSQL: the database is
    stopped and started again while the server runs."""
    process = server(spawn, fake, tmp_path, state, "one")
    result_of(process.call("answer", {"query": "first"}))
    wait_until(lambda: count(state, "usage") == 1, 20, "the first row")
    holder = None
    if state.name == "sqlite":
        code = (
            "import sqlite3, sys\n"
            f"conn = sqlite3.connect({str(state.path)!r}, isolation_level=None)\n"
            "conn.execute('BEGIN EXCLUSIVE')\nprint('locked', flush=True)\nsys.stdin.read()\n"
        )
        holder = subprocess.Popen(
            [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert holder.stdout.readline() == "locked\n"
    else:
        state.cluster.stop()
    try:
        costs = [
            result_of(process.call("answer", {"query": f"during {n}"}, timeout=30))["cost"]["usd"]
            for n in range(5)
        ]
        wait_until(lambda: "answers go on without it" in process.stderr, 20, "the warning")
    finally:
        if holder is not None:
            holder.stdin.close()
            holder.wait(10)
        else:
            state.cluster.start()
    wait_until(lambda: count(state, "usage") == 6, 30, "the rows kept in memory")
    report = usage(tmp_path, state)
    assert report["total"]["calls"] == 6
    assert report["total"]["usd"] >= sum(costs)
    assert PG_PASSWORD not in process.stderr


@pytest.mark.parametrize("body", ['{"answer": 1}', "{"])
def test_a_damaged_cache_row_is_a_miss_and_is_replaced(spawn, fake, tmp_path, state, body):
    process = server(spawn, fake, tmp_path, state, "one")
    result_of(process.call("answer", {"query": "q"}))
    wait_until(lambda: count(state, "answers") == 1, 20, "the cache entry")
    if state.name == "sqlite":
        with sqlite3.connect(state.path) as conn:
            conn.execute("UPDATE answers SET body = ?", (body,))
    else:
        import psycopg

        with psycopg.connect(state.url, autocommit=True) as conn:
            conn.execute("UPDATE answers SET body = %s", (body,))
    other = server(spawn, fake, tmp_path, state, "two")
    assert result_of(other.call("answer", {"query": "q"}))["cache"] == {"hit": False}
    assert result_of(other.call("answer", {"query": "q"}))["cache"]["hit"] is True
    assert len(fake.requests) == 2


def test_get_usage_reads_the_shared_ledger(spawn, fake, tmp_path, state):
    from http_client import open_session, post, request, rpc, wait_listening

    result_of(server(spawn, fake, tmp_path, state, "stdio").call("answer", {"query": "q"}))
    env = {**state.env, "XDG_STATE_HOME": str(tmp_path / "http")}
    http = spawn("--http", "127.0.0.1:0", config=PRICES, env=env, upstream=fake)
    port = wait_listening(http)
    params = {"name": "answer_quick", "arguments": {"query": "other"}}
    assert post(port, rpc("tools/call", params), open_session(port)).status == 200

    def day() -> dict:
        return request(port, "GET", "/usage").json()["day"]

    wait_until(lambda: day()["calls"] == 2, 20, "both processes' rows")
    assert [row["tool"] for row in day()["by_tool"]] == ["answer", "answer_quick"]
    page = request(port, "GET", "/usage", headers={"Accept": "text/html"}).body.decode()
    assert PG_PASSWORD not in page


# -- PostgreSQL only ---------------------------------------------------------------------------


def test_a_slow_cache_read_is_a_miss_not_a_stall(spawn, fake, tmp_path, postgres):
    import psycopg

    state = PostgresState(postgres, postgres.fresh_database())
    process = server(spawn, fake, tmp_path, state, "one")
    result_of(process.call("answer", {"query": "first"}))  # makes the tables
    wait_until(lambda: count(state, "answers") == 1, 20, "the cache entry")
    with psycopg.connect(state.url) as holder:  # a transaction holding the table
        holder.execute("LOCK TABLE answers IN ACCESS EXCLUSIVE MODE")
        meta = result_of(process.call("answer", {"query": "first"}, timeout=10))
        assert meta["cache"] == {"hit": False}  # the read gave up; the question went upstream
    assert len(fake.requests) == 2
    wait_until(lambda: count(state, "usage") == 2, 20, "the row written after the lock")


def test_a_database_that_never_answers_stalls_no_answer(spawn, fake, tmp_path):
    """A host that takes the connection and says nothing (a dropped route, a hung server):
    the cache read's connect goes on aside, so each call loses at most the read's 0.25 s,
    never libpq's 2 s connect timeout."""
    pytest.importorskip("psycopg")
    import socket

    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(64)  # never accepted: the kernel completes the handshake, nobody answers
        port = silent.getsockname()[1]
        url = f"postgresql://mcp:{PG_PASSWORD}@127.0.0.1:{port}/mcp"
        env = {**CACHE_ON, "OPENAI_RESPONSES_MCP_STATE_URL": url}
        process = spawn("--stdio", config=PRICES, env=env, upstream=fake)
        process.initialize()
        # The first call also pays for importing the SDK (seconds on a busy machine), so it is
        # not timed: it starts the first connect. The timed calls come once that connect has
        # given up (libpq's 2 s) and once the rest after it (_BACKOFF_S) is over, so one of them
        # starts a connect again. Sleeps here are lower bounds, not assumptions about speed.
        result_of(process.call("answer", {"query": "q0"}, timeout=30))
        elapsed = []
        for n, rest in ((1, m._CONNECT_TIMEOUT_S + 0.5), (2, m._BACKOFF_S + 0.2), (3, 0)):
            time.sleep(rest)  # sleep: the point: lower bounds (the connect's give-up, a rest)
            began = time.monotonic()
            result_of(process.call("answer", {"query": f"q{n}"}, timeout=30))
            elapsed.append(round((time.monotonic() - began) * 1000))
        wait_until(lambda: "answers go on without it" in process.stderr, 20, "the warning")
    # A connect in the answer path takes libpq's 2 s at least (its shortest connect_timeout).
    assert max(elapsed) < m._CONNECT_TIMEOUT_S * 1000, elapsed
    assert PG_PASSWORD not in process.stderr


def test_show_config_and_usage_never_print_the_password(tmp_path, postgres):
    url = postgres.fresh_database()
    env = {"OPENAI_RESPONSES_MCP_STATE_URL": url}
    shown = run_cli(tmp_path, "--show-config", env=env)
    assert shown.returncode == 0, shown.stderr
    assert PG_PASSWORD not in shown.stderr + shown.stdout
    described = json.loads(shown.stderr[shown.stderr.index("{") :])
    assert described["state"] == f"state database {url.replace(PG_PASSWORD, '***')}"
    assert described["config"]["state"]["url"] == url.replace(PG_PASSWORD, "***")
    report = run_cli(tmp_path, "--usage", env=env)
    assert report.returncode == 0, report.stderr
    assert PG_PASSWORD not in report.stdout + report.stderr
    wrong = run_cli(tmp_path, "--usage", env={"OPENAI_RESPONSES_MCP_STATE_URL": url + "x"})
    assert wrong.returncode == 1 and PG_PASSWORD not in wrong.stdout + wrong.stderr


SECRET = "b64/Pass+word="  # a base64 password: a raw "/" in it


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://mcp:p%40ss%2Fw0rd@[::1/db",  # the driver quotes the URL as written
        "postgresql://mcp@[::1/db?password=p%40ss%2Fw0rd",
        "postgresql://mcp@127.0.0.1:notaport?sslmode=bogus&password=p%40ss%2Fw0rd",
        # A raw "/" ends libpq's host early: host "mcp", port "b64", database "Pass+...".
        f"postgresql://mcp:{SECRET}@db.example:5432/mcp",
        "postgresql://mcp:p?ss%zz@db.example/mcp",  # a "?" and a bad %-escape
        f"postgresql://mcp:{SECRET}@db.example?sslpassword=p%40ss%2Fw0rd",
    ],
)
def test_a_url_libpq_would_not_take_is_refused_showing_only_its_scheme(tmp_path, url):
    pytest.importorskip("psycopg")
    env = {"OPENAI_RESPONSES_MCP_STATE_URL": url}
    for flag in ("--usage", "--show-config", "--doctor"):
        result = run_cli(tmp_path, flag, env=env)
        assert result.returncode == (1 if flag == "--doctor" else 2), (flag, result.stderr)
        said = result.stdout if flag == "--doctor" else result.stderr
        assert 'state.url = "postgresql://***" (from env ' in said
        for form in ("p%40ss%2Fw0rd", "p@ss/w0rd", "p?ss%zz", "b64", "Pass+word", "word="):
            assert form not in result.stdout + result.stderr, (flag, form)


def test_a_password_and_an_sslpassword_are_never_printed(spawn, fake, tmp_path, postgres):
    """--show-config, --doctor (its client lines too), the server's warnings and the tool
    error of a budget that cannot be checked (which does not even name the store)."""
    ssl_secret = "ssl-Secret-9876543210"
    url = postgres.fresh_database() + f"?sslpassword={ssl_secret}"
    secrets = (PG_PASSWORD, ssl_secret)
    env = {"OPENAI_RESPONSES_MCP_STATE_URL": url, "OPENAI_BASE_URL": fake.base_url}
    shown = run_cli(tmp_path, "--show-config", env=env)
    assert shown.returncode == 0, shown.stderr
    described = json.loads(shown.stderr[shown.stderr.index("{") :])
    masked = url.replace(PG_PASSWORD, "***").replace(ssl_secret, "***")
    assert described["config"]["state"]["url"] == masked
    doctor = run_cli(tmp_path, "--doctor", env=env, timeout=60)
    assert "answers" in doctor.stdout and "OPENAI_RESPONSES_MCP_STATE_URL" in doctor.stdout
    wrong = {**env, "OPENAI_RESPONSES_MCP_STATE_URL": url.replace("?", "x?")}
    process = server(
        spawn,
        fake,
        tmp_path,
        PostgresState(postgres, wrong["OPENAI_RESPONSES_MCP_STATE_URL"]),
        "one",
        PRICES + "budget: {daily_usd: 5}\n",
    )
    message = failure_of(process.call("answer", {"query": "q"}, timeout=30))
    assert "budget cannot be checked: the state database is unavailable (" in message
    assert "127.0.0.1" not in message and str(postgres.port) not in message
    wait_until(lambda: "warning: state database postgresql://" in process.stderr, 20, "warning")
    for secret in secrets:
        for text in (shown.stdout, shown.stderr, doctor.stdout, doctor.stderr, message):
            assert secret not in text
        assert secret not in process.stderr


def _methods(cls) -> set:
    """The public methods a class defines itself (not those it inherits)."""
    return {name for name, value in vars(cls).items() if callable(value) and name[0] != "_"}


def test_both_backends_implement_the_whole_contract_and_nothing_beside_it(tmp_path):
    """StateBackend states the contract once: a backend that drops a method (leaving the base's
    NotImplementedError), or has one the other lacks, fails here rather than in production."""
    contract = _methods(m.StateBackend)
    assert {"connect", "begin", "take_turns", "hold_schema", "columns", "sql"} <= contract
    env = {"XDG_CONFIG_HOME": str(tmp_path), "XDG_STATE_HOME": str(tmp_path)}
    sqlite = m.state_backend(m.load_config({}, env))
    postgres = m._PostgresBackend("postgresql://user:pw@db.invalid/ledger")
    for backend in (sqlite, postgres):
        assert isinstance(backend, m.StateBackend)
        assert _methods(type(backend)) == contract, type(backend).__name__
        for name in vars(m.StateBackend)["__annotations__"]:  # set by each, or the base's default
            getattr(backend, name)
    for name in contract:
        method = getattr(m.StateBackend(), name)
        with pytest.raises(NotImplementedError):
            method(*[None] * (method.__code__.co_argcount - 1))


def test_url_secrets_are_every_form_of_the_password():
    url = "postgresql://u:a%2Bb@h/db?sslmode=require&password=c+d"
    assert {"a%2Bb", "a+b", "c+d", "c d"} <= set(m.url_secrets(url))
    assert m.url_secrets("postgresql://u@h/db") == ()
    assert m.redact_url("postgresql://u:pw@h?password=pw") == "postgresql://u:***@h"
    shown = m.redact_url("postgresql://u:p@h1:5,h2:6/db?sslpassword=s&sslmode=require")
    assert shown == "postgresql://u:***@h1:5,h2:6/db?sslmode=require&sslpassword=***"
    assert m.redact_url(f"postgresql://u:{SECRET}@h/db") == "postgresql://***"


@pytest.mark.parametrize(
    ("url", "forms"),
    [
        # The driver reads "p@ss w+rd"; its errors may quote the URL as written, or either
        # encoding of what it read ("+" or %20 for the space).
        (
            "postgresql://u:p%40ss%20w%2Brd@h/db",
            ["p@ss w+rd", "p%40ss%20w%2Brd", "p%40ss+w%2Brd"],
        ),
        # Written in lower-case hex, quoted back by the driver in upper case.
        (
            "postgresql://u:p%2fss%20w@h/db",
            ["p/ss w", "p%2fss%20w", "p%2Fss%20w", "p%2Fss+w"],
        ),
        # "+" in a query is a "+" to libpq, but the writer may have meant a space.
        (
            "postgresql://u@h/db?password=p%40ss+w%2Brd",
            ["p@ss+w+rd", "p%40ss+w%2Brd", "p@ss w+rd", "p%40ss%2Bw%2Brd"],
        ),
        (
            "postgresql://u:ignored-one@h/db?sslmode=require&sslpassword=s%2Fx+y&password=pw-two",
            ["s/x+y", "s%2Fx+y", "s/x y", "s%2Fx%2By", "pw-two", "ignored-one"],
        ),
    ],
)
def test_every_written_form_of_a_password_is_masked_in_state_errors(url, forms):
    secrets = m._PostgresBackend(url).secrets
    for form in forms:
        error = RuntimeError(f'connection to server failed: password "{form}" refused')
        reason = m._state_reason(error, url, secrets)
        assert form not in reason, form
        assert reason == 'connection to server failed: password "***" refused'
    assert m._state_reason(RuntimeError(f"bad URL {url}"), url, secrets) == (
        f"bad URL {m.redact_url(url)}"
    )


def test_a_postgresql_session_waits_for_no_lock_longer_than_a_budget_check(postgres):
    """The server bounds our sessions itself: a lock is waited for at most as long as a budget
    check may take (lock_timeout), and a transaction left open by an instance cut off mid-check
    is ended (idle_in_transaction_session_timeout), freeing the budget's lock."""
    backend = m._PostgresBackend(postgres.fresh_database())
    conn = backend.connect()
    try:
        settings = dict(
            conn.execute(
                "SELECT name, setting FROM pg_settings WHERE name IN "
                "('lock_timeout', 'idle_in_transaction_session_timeout')"
            ).fetchall()
        )
    finally:
        conn.close()
    assert settings == {
        "lock_timeout": str(int(m._BUSY_TIMEOUT_S * 1000)),
        "idle_in_transaction_session_timeout": str(int(m._IDLE_IN_TRANSACTION_S * 1000)),
    }


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://u:p%2Fw@h:5,[::1]:6/db?sslpassword=s&sslmode=require",
        f"postgresql://u:{SECRET}@h/db",
        "postgresql://u:p?ss%zz@h/db",
        "postgresql://h/db?password=a%2",
        "postgresql:///db?host=/run/pg&user=u",
    ],
)
def test_our_url_reading_is_libpqs(url):
    """Without psycopg (the config check needs it, but redaction does not), the URL is read
    by our own rules, which must be libpq's."""
    from psycopg.conninfo import conninfo_to_dict

    try:
        theirs = {name: str(value) for name, value in conninfo_to_dict(url).items()}
    except Exception:  # noqa: BLE001
        theirs = None
    assert m._pg_url_params(url) == theirs


def test_several_instances_starting_at_once_make_the_tables_once(tmp_path, postgres):
    url = postgres.fresh_database()
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); import openai_responses_mcp as m\n"
        "s = m.StateStore(m._PostgresBackend(sys.argv[2]), m.Log())\n"
        "s.read('x', lambda q: q('SELECT 1').fetchone()); s.close()\n"
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(SCRIPT.parent), url], stderr=subprocess.PIPE
        )
        for _ in range(6)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0 and b"warning" not in err, err
    state = PostgresState(postgres, url)
    assert state.query("SELECT version FROM schema_version") == [(m.STATE_SCHEMA_VERSION,)]


def test_a_connection_that_waited_for_the_schema_lock_sees_the_tables_made_meanwhile(postgres):
    """CI's flaky test_ten_simultaneous_calls_from_two_processes_hold_a_small_budget[postgres]:
    a connection that looked for the tables while another made them, then waited for the
    schema lock, still saw no schema_version (PostgreSQL's cached "no such table", kept while
    the transaction waited), took the database for version 1 and summed the ledger into
    usage_daily again: a duplicate key, and budgeted calls refused."""
    import psycopg

    state = PostgresState(postgres, postgres.fresh_database())
    backend = m._PostgresBackend(state.url)
    maker, late = backend.connect(), backend.connect()
    try:
        assert not backend.has_table(late, "schema_version")  # it looks before they exist
        maker.execute("BEGIN")
        backend.take_turns(maker, m._LOCK_SCHEMA)
        for statement in m._schema(postgres=True):
            maker.execute(statement)
        maker.execute("INSERT INTO schema_version (version) VALUES (%s)", (m.STATE_SCHEMA_VERSION,))
        m._UsageWrite({**a_row(0.04).values, "day": "2026-01-01"}, None).apply(
            lambda text, params=(): maker.execute(backend.sql(text), params)
        )
        outcome: dict = {}

        def ensure() -> None:
            try:
                m._ensure_schema(backend, late)
            except psycopg.Error as exc:
                outcome["error"] = exc

        thread = threading.Thread(target=ensure)
        thread.start()
        pid = late.info.backend_pid
        waiting = "SELECT wait_event_type FROM pg_stat_activity WHERE pid = ?"
        wait_until(lambda: state.query(waiting, (pid,)) == [("Lock",)], 20, "the lock wait")
        maker.execute("COMMIT")
        thread.join(30)
        assert outcome == {}
        assert state.query("SELECT calls, usd FROM usage_daily") == [(1, 0.04)]
        assert state.query("SELECT version FROM schema_version") == [(m.STATE_SCHEMA_VERSION,)]
    finally:
        maker.close()
        late.close()


def test_state_url_without_the_driver_exits_2_naming_the_extra(tmp_path):
    # -S: no site-packages, so no psycopg (the config is read before `openai` is needed).
    result = subprocess.run(
        [sys.executable, "-S", str(SCRIPT), "--show-config"],
        capture_output=True,
        text=True,
        env=base_env(tmp_path, OPENAI_RESPONSES_MCP_STATE_URL=f"postgresql://u:{PG_PASSWORD}@h/d"),
        timeout=30,
    )
    assert result.returncode == 2
    # A file run by Python: the driver goes into that Python (issue 33).
    assert f"{sys.executable} -m pip install 'psycopg[binary]'" in result.stderr
    assert "state.url" in result.stderr and PG_PASSWORD not in result.stderr


def test_doctor_says_whether_the_database_answers(tmp_path, fake, postgres):
    url = postgres.fresh_database()
    env = {"OPENAI_RESPONSES_MCP_STATE_URL": url, "OPENAI_BASE_URL": fake.base_url}
    result = run_cli(tmp_path, "--doctor", env=env, timeout=60)
    host = url.rpartition("@")[2]
    assert f"✓ state.url: state database postgresql://***@{host} answers" in result.stdout
    assert PG_PASSWORD not in result.stdout + result.stderr
    down = run_cli(tmp_path, "--doctor", env={**env, "OPENAI_RESPONSES_MCP_STATE_URL": url + "x"})
    assert f"✗ state.url: state database postgresql://***@{host}x is unavailable (" in down.stdout
    assert down.returncode == 1 and PG_PASSWORD not in down.stdout + down.stderr


# -- Odd values and bursts -----------------------------------------------------------------------

ROOMY = PRICES + "budget: {daily_usd: 100000}\n"


def test_odd_values_from_the_api_are_bounded_and_lose_no_row(spawn, fake, tmp_path, state):
    """A NUL or a lone surrogate in the model's name, a count past 2^63: each row is written
    (cleaned and bounded), no batch is lost, and no reservation is left holding budget."""
    odd = [
        Reply(model="gpt-5\x00nul"),
        Reply(model="gpt-5-\ud800"),
        Reply(usage={"input_tokens": 2**63, "output_tokens": 2**64}),
        Reply(usage={"output_tokens_details": {"reasoning_tokens": 10**30}}),
    ]
    fake.enqueue(*odd, *[Reply() for _ in range(6)])
    process = server(spawn, fake, tmp_path, state, "one", ROOMY)
    for n in range(10):
        send_call(process, f"c{n}", f"question {n}")
    replies = [process.recv(timeout=60) for _ in range(10)]
    assert all("result" in reply for reply in replies), replies
    wait_until(lambda: count(state, "usage") == 10, 30, "ten ledger rows")
    wait_until(lambda: count(state, "reservations") == 0, 30, "every reservation settled")
    report = usage(tmp_path, state)
    assert report["total"]["calls"] == 10
    models = {row["model"] for row in report["by_model"]}
    assert "gpt-5nul" in models and "gpt-5-?" in models
    assert max(row[0] for row in state.query("SELECT input_tokens FROM usage")) == m._MAX_COUNT
    assert "set aside" not in process.stderr and "Traceback" not in process.stderr


def test_a_write_the_database_refuses_is_set_aside_without_its_batch(state):
    """What cleaning cannot catch (here an answer the driver cannot encode) is set aside,
    said once; the rest of its batch is written and its reservations settled."""
    store, ledger = store_for(state)
    try:
        cache = m.AnswerCache(store, 600, 100)
        reservation = ledger.reserve("answer", [("2000-01-01", 1000.0)], 0.5, 3600)[0]
        store.write_later(m._CacheWrite("k", '{"answer": "\ud800"}', 600, 100))
        ledger.record(a_row(0.25), reservation)
        store.write_later(m._CacheWrite("k2", '{"answer": "\ud801"}', 600, 100))
        ledger.record(a_row(0.5))
        wait_until(lambda: count(state, "usage") == 2, 20, "both rows")
        assert count(state, "reservations") == 0
        assert ledger.spent_since("2000-01-01") == pytest.approx(0.75)
        assert cache.get("k") is None
    finally:
        store.close()


def test_a_burst_over_three_processes_on_one_file_refuses_nothing(spawn, fake, tmp_path):
    """60 calls at once over 3 processes sharing one SQLite file, with a budget: every call
    is answered, and no warning says calls are refused."""
    state = SqliteState(tmp_path / "shared" / "state.sqlite3")
    fake.enqueue(*[Reply(event_delay=0.01) for _ in range(60)])
    processes = [server(spawn, fake, tmp_path, state, f"p{n}", ROOMY) for n in range(3)]
    for process in processes:
        for n in range(20):
            send_call(process, f"c{n}", f"question {id(process)} {n}")
    for process in processes:
        replies = [process.recv(timeout=120) for _ in range(20)]
        assert all("result" in reply for reply in replies), [
            failure_of(r) for r in replies if "error" in r
        ]
    wait_until(lambda: count(state, "usage") == 60, 60, "sixty ledger rows")
    for process in processes:
        assert "refused" not in process.stderr, process.stderr


def test_only_a_failed_budget_check_says_calls_are_refused(tmp_path, capsys):
    """With a budget set, a writer that fails retries and a cache read that fails is a miss:
    their warnings must not say calls are refused (a burst over processes sharing a file can
    make the writer wait past its busy timeout while every call is answered)."""
    store = m.StateStore(m._SqliteBackend(str(tmp_path / "s.sqlite3")), m.Log(), "UTC")
    for what in ("writing the ledger", "reading the cache", "checking the budget"):
        store.failed(what, f"{what}: database is locked")
    warnings = capsys.readouterr().err.splitlines()
    assert len(warnings) == 3, warnings
    assert ["refused" in line for line in warnings] == [False, False, True], warnings
    assert all("answers go on without it" in line for line in warnings[:2]), warnings


# -- Upgrades from every earlier schema ----------------------------------------------------------

# The old rows' day: not today (outside the daily budget), within the raw rows' retention.
OLD_DAY = (
    datetime.date.fromisoformat(m.today_in(m.SETTINGS[("policy", "timezone")].default))
    - datetime.timedelta(days=10)
).isoformat()


def old_store(state, version: str) -> None:
    """A store as an earlier main commit left it, with one priced call in it: "1" (no version
    table, no per-day totals), "2-without-writers" (version 2 as first released) and
    "2-with-writers" (the writers table added later under the same version)."""
    tables = m._tables(state.name == "postgres")
    tables["usage"] = [c for c in tables["usage"] if c[0] != "writer_schema"]
    if version == "1":
        tables = {name: tables[name] for name in ("usage", "spend_by_day", "answers")}
    elif version == "2-without-writers":
        del tables["writers"]
    statements = [
        f"CREATE TABLE {table} ({', '.join(f'{n} {k}'.strip() for n, k in columns)})"
        for table, columns in tables.items()
    ]
    columns = [c for c in m._USAGE_COLUMNS if c != "writer_schema"]
    values = {"at": 946684800.0, "day": OLD_DAY, "tool": "answer", "model": "gpt-5", "usd": 0.5}
    values.update({"outcome": "ok", "web_searches": 1, "user_name": ""})  # no user before 4
    row = [values.get(name, 0) for name in columns]
    statements.append(
        (
            f"INSERT INTO usage ({', '.join(columns)}) VALUES ({', '.join('?' for _ in columns)})",
            row,
        )
    )
    statements.append(("INSERT INTO spend_by_day (day, usd) VALUES (?, ?)", (OLD_DAY, 0.5)))
    if version != "1":
        statements.append(
            "INSERT INTO usage_daily (day, tool, model, usd, calls, web_searches) "
            f"VALUES ('{OLD_DAY}', 'answer', 'gpt-5', 0.5, 1, 1)"
        )
        statements.append("INSERT INTO schema_version (version) VALUES (2)")
    execute(state, statements)


def execute(state, statements: list) -> None:
    items = [s if isinstance(s, tuple) else (s, ()) for s in statements]
    if state.name == "sqlite":
        state.path.parent.mkdir(parents=True, exist_ok=True)
        with sqlite3.connect(state.path) as conn:
            for sql, params in items:
                conn.execute(sql, params)
    else:
        import psycopg

        with psycopg.connect(state.url, autocommit=True) as conn:
            for sql, params in items:
                conn.execute(sql.replace("?", "%s"), params)


@pytest.mark.parametrize("version", ["1", "2-without-writers", "2-with-writers"])
def test_a_store_made_by_an_earlier_schema_is_upgraded(spawn, fake, tmp_path, state, version):
    old_store(state, version)
    process = server(spawn, fake, tmp_path, state, "one", PRICES + "budget: {daily_usd: 5}\n")
    result_of(process.call("answer", {"query": "q"}, timeout=30))
    wait_until(lambda: count(state, "usage") == 2, 20, "the new row")
    assert state.query("SELECT version FROM schema_version") == [(m.STATE_SCHEMA_VERSION,)]
    assert count(state, "writers") == 1
    report = usage(tmp_path, state)
    assert report["total"]["calls"] == 2
    assert report["by_day"][0]["day"] == OLD_DAY
    assert report["by_day"][0]["usd"] == 0.5 and report["by_day"][0]["calls"] == 1
    assert "warning" not in process.stderr, process.stderr
    if version == "1" and state.name == "sqlite":
        # A version 1 server still running on the file writes as it always did: its row is
        # folded into the totals the reports read.
        columns = [c for c in m._USAGE_COLUMNS if c != "writer_schema"]
        values = {"at": 946684900.0, "day": OLD_DAY, "tool": "answer", "model": "gpt-5"}
        values.update({"usd": 0.25, "outcome": "ok", "user_name": ""})
        marks = ", ".join("?" for _ in columns)
        execute(
            state,
            [
                (
                    f"INSERT INTO usage ({', '.join(columns)}) VALUES ({marks})",
                    [values.get(name, 0) for name in columns],
                ),
                (
                    "INSERT INTO spend_by_day (day, usd) VALUES (?, ?) ON CONFLICT (day) "
                    "DO UPDATE SET usd = usd + excluded.usd",
                    (OLD_DAY, 0.25),
                ),
            ],
        )
        old_day = usage(tmp_path, state)["by_day"][0]
        assert (old_day["calls"], old_day["usd"]) == (2, 0.75)


def test_a_version_5_store_gains_the_file_counts(spawn, fake, tmp_path, state):
    """Schema 6 (issue 32): usage.files and usage.file_bytes are added where missing; the rows
    already there count no files."""
    tables = m._tables(state.name == "postgres")
    tables["usage"] = [c for c in tables["usage"] if c[0] not in ("files", "file_bytes")]
    statements = [
        f"CREATE TABLE {table} ({', '.join(f'{n} {k}'.strip() for n, k in columns)})"
        for table, columns in tables.items()
    ]
    statements.append("INSERT INTO schema_version (version) VALUES (5)")
    statements.append(
        "INSERT INTO usage (at, day, tool, model, outcome) "
        f"VALUES (946684800.0, '{OLD_DAY}', 'answer', 'gpt-5', 'ok')"
    )
    execute(state, statements)
    process = server(spawn, fake, tmp_path, state, "one")
    result_of(process.call("answer", {"query": "q"}, timeout=30))
    wait_until(lambda: count(state, "usage") == 2, 20, "the new row")
    assert state.query("SELECT version FROM schema_version") == [(m.STATE_SCHEMA_VERSION,)]
    assert state.query("SELECT files, file_bytes FROM usage") == [(0, 0), (0, 0)]


def test_a_missing_table_or_column_is_made_whatever_the_version_says(state):
    """A store that says it is this version but lacks a table and a column (made by hand, or
    by a commit that forgot to raise the version) is repaired on connect."""
    store, ledger = store_for(state)
    store.close()
    store, ledger = store_for(state)
    try:
        ledger.record(a_row(0.1))
        wait_until(lambda: count(state, "usage") == 1, 20, "the first row")
    finally:
        store.close()
    execute(state, ["DROP TABLE writers", "ALTER TABLE usage DROP COLUMN writer_schema"])
    store, ledger = store_for(state)
    try:
        ledger.record(a_row(0.2))
        wait_until(lambda: count(state, "usage") == 2, 20, "the row after the repair")
        assert count(state, "writers") == 1
        assert ledger.spent_since("2000-01-01") == pytest.approx(0.3)
    finally:
        store.close()


def test_a_budget_refusal_names_no_path_even_when_the_folder_cannot_be_made(spawn, fake, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    state = SqliteState(blocker / "state" / "state.sqlite3")
    process = server(spawn, fake, tmp_path, state, "one", PRICES + "budget: {daily_usd: 5}\n")
    message = failure_of(process.call("answer", {"query": "q"}))
    assert message.startswith("answer failed: budget cannot be checked: the state file is "), (
        message
    )
    assert "Not a directory" in message and str(blocker) not in message
    assert str(blocker) in process.stderr


@pytest.mark.skipif(getattr(os, "geteuid", lambda: 1)() != 0, reason="a device node needs root")
def test_a_state_path_naming_a_device_never_changes_its_mode(tmp_path):
    """state.path: /dev/null once made the device 0600 for every other user of the machine (the
    chmod of files an older version left); a node of the same device stands in for it here."""
    import stat

    node = tmp_path / "null"
    os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    os.chmod(node, 0o666)  # past the umask
    env = {"OPENAI_RESPONSES_MCP_STATE": str(node)}
    for args in (("--usage",), ("--user", "list"), ("--upgrade-state",)):
        run_cli(tmp_path, *args, env=env)
        assert stat.S_IMODE(os.stat(node).st_mode) == 0o666, args


def test_a_read_only_state_file_is_never_made_writable(tmp_path):
    """The chmod of state files an older version left (0644) made them 0600, so a state file
    its owner had made read-only (0444: kept as it was) became writable. Group and others
    lose their access; the owner gains none."""
    import stat

    path = tmp_path / "state.sqlite3"
    env = {"OPENAI_RESPONSES_MCP_STATE": str(path)}
    assert run_cli(tmp_path, "--upgrade-state", env=env).returncode == 0
    for mode, kept in ((0o444, 0o400), (0o640, 0o600)):
        os.chmod(path, mode)
        run_cli(tmp_path, "--usage", env=env)
        assert stat.S_IMODE(os.stat(path).st_mode) == kept, oct(mode)
