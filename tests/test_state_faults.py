"""A PostgreSQL that misbehaves on an open connection, through a fault proxy of our own
(tests/pg_fault_proxy.py) between the server and a real database: one that stops answering
(a partition, a frozen VM) bounds every wait on our side, and one that loses an instance mid
budget check does not lock every other instance out."""

from __future__ import annotations

import signal
import time

import pytest
from conftest import PG_PASSWORD, PRICES, failure_of, wait_until
from pg_fault_proxy import FaultProxy
from test_state import CACHE_ON, PostgresState, count, result_of, server

import openai_responses_mcp as m

BUDGET = PRICES + "budget: {daily_usd: 5}\n"


@pytest.fixture
def proxied(postgres):
    """(the database, direct; the same through a fault proxy)."""
    url = postgres.fresh_database()
    proxy = FaultProxy(postgres.port)
    try:
        yield PostgresState(postgres, url), PostgresState(postgres, proxy.url(url)), proxy
    finally:
        proxy.close()


def held_and_refused(process, direct, proxy) -> float:
    """Holds the link once the process has written its first row; the seconds the next
    budgeted call took to be refused."""
    result_of(process.call("answer", {"query": "first"}, timeout=30))
    wait_until(lambda: count(direct, "usage") == 1, 20, "the first row")
    proxy.hold()
    began = time.monotonic()
    message = failure_of(process.call("answer", {"query": "second"}, timeout=60))
    elapsed = time.monotonic() - began
    assert message.startswith("answer failed: budget cannot be checked: the state database is "), (
        message
    )
    assert "127.0.0.1" not in message and str(proxy.port) not in message
    assert PG_PASSWORD not in message + process.stderr
    return elapsed


def test_a_database_that_stops_answering_refuses_promptly_and_stdio_still_exits(
    spawn, fake, tmp_path, proxied
):
    direct, through, proxy = proxied
    process = server(spawn, fake, tmp_path, through, "one", BUDGET)
    elapsed = held_and_refused(process, direct, proxy)
    # The bound is ours: twice the budget check's 2 s statement timeout and a second's grace,
    # then the connection is abandoned (without it the call never came back).
    assert elapsed < 4 * m._BUSY_TIMEOUT_S + 5, elapsed
    # Another call while the link is still held is refused too, and then EOF ends the process
    # although its writer has a row to write to a database that does not answer.
    failure_of(process.call("answer", {"query": "third"}, timeout=60))
    process.close_stdin()
    assert process.wait(60) == 0
    assert "could not be written before exit" in process.stderr


def test_a_database_that_stops_answering_lets_the_http_server_exit_on_sigterm(
    spawn, fake, tmp_path, proxied
):
    from http_client import open_session, post, rpc, wait_listening

    direct, through, proxy = proxied
    env = {**through.env, **CACHE_ON, "XDG_STATE_HOME": str(tmp_path / "http")}
    http = spawn("--http", "127.0.0.1:0", config=BUDGET, env=env, upstream=fake)
    port = wait_listening(http)
    session = open_session(port)
    params = {"name": "answer", "arguments": {"query": "first"}}
    assert post(port, rpc("tools/call", params), session).status == 200
    wait_until(lambda: count(direct, "usage") == 1, 20, "the first row")
    proxy.hold()
    params = {"name": "answer", "arguments": {"query": "second"}}
    reply = post(port, rpc("tools/call", params), session, timeout=60).json()
    assert "budget cannot be checked" in reply["error"]["message"], reply
    http.proc.send_signal(signal.SIGTERM)
    assert http.wait(60) == 0


def test_an_instance_cut_off_inside_a_budget_check_does_not_lock_out_the_others(
    spawn, fake, tmp_path, proxied
):
    direct, through, proxy = proxied
    cut = server(spawn, fake, tmp_path, through, "cut", BUDGET)
    result_of(cut.call("answer", {"query": "first"}, timeout=30))
    # The next budget check is forwarded as far as the lock, then its link is cut: the
    # database keeps that session, inside its transaction, holding the lock.
    proxy.cut_after(b"pg_advisory_xact_lock($")  # the budget's, not the schema's shared hold
    failure_of(cut.call("answer", {"query": "second"}, timeout=60))
    assert proxy.cuts == 1
    # (the budget's lock; every transaction also holds the schema's shared: ShareLock)
    holding = (
        "SELECT COUNT(*) FROM pg_locks WHERE locktype = 'advisory' AND granted "
        "AND mode = 'ExclusiveLock'"
    )
    other = server(spawn, fake, tmp_path, direct, "other", BUDGET)
    answered = []

    def another_call_answers() -> bool:
        reply = other.call("answer", {"query": f"other {len(answered)}"}, timeout=60)
        answered.append(reply)
        return "result" in reply

    # The database ends the idle session within idle_in_transaction_session_timeout, which
    # frees the lock (without it: after TCP's own timeouts, hours). The other instance's
    # checks meanwhile give up after their lock_timeout and rest a few seconds.
    wait_until(another_call_answers, 30, "a call on the other instance")
    assert direct.query(holding)[0][0] == 0


def test_spending_calls_go_on_at_once_after_the_database_restarts(spawn, fake, tmp_path, postgres):
    """The connection that broke while idle fails its next use; that use is tried again on a
    new connection at once, not refused for the rest after a failure."""
    direct = PostgresState(postgres, postgres.fresh_database())
    process = server(spawn, fake, tmp_path, direct, "one", BUDGET)
    result_of(process.call("answer", {"query": "first"}, timeout=30))
    wait_until(lambda: count(direct, "usage") == 1, 20, "the first row")
    postgres.stop()
    postgres.start()
    result_of(process.call("answer", {"query": "after the restart"}, timeout=30))
    wait_until(lambda: count(direct, "usage") == 2, 20, "the second row")
    assert "budget" not in process.stderr, process.stderr
