"""The usage ledger: one row per finished call in a SQLite file every process shares, read
back by --usage; a locked or corrupt file costs a warning, never an answer."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import subprocess
import sys
import threading
import time

import conftest
import pytest
from conftest import PRICES, run_cli, wait_until
from fake_upstream import Reply

import openai_responses_mcp as m

CALLS_EACH = 12


def start(spawn, fake, config: str = PRICES, env: dict | None = None):
    return conftest.start(spawn, fake, config=config, env=env)


def state_file(tmp_path):
    return tmp_path / "xdg-state" / "openai-responses-mcp" / "state.sqlite3"


def rows_in(tmp_path, where: str = "1 = 1") -> int:
    """Ledger rows in the state file so far (the writer thread adds them a moment after the
    reply)."""
    try:
        with sqlite3.connect(state_file(tmp_path)) as conn:
            return conn.execute(f"SELECT COUNT(*) FROM usage WHERE {where}").fetchone()[0]
    except sqlite3.OperationalError:  # no file or no table yet
        return 0


def wait_for_rows(tmp_path, count: int, where: str = "1 = 1", timeout: float = 20) -> None:
    conftest.wait_until(lambda: rows_in(tmp_path, where) >= count, timeout, f"{count} rows")
    assert rows_in(tmp_path, where) == count


def usage_json(tmp_path, *args: str) -> dict:
    config = tmp_path / "config.yaml"
    result = run_cli(tmp_path, "--usage", "--json", "--config", str(config), *args)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_two_processes_at_once_give_exact_totals_and_usage_agrees(spawn, fake, tmp_path):
    servers = [start(spawn, fake), start(spawn, fake)]
    costs: list[float] = []
    lock = threading.Lock()

    def ask(server, name: str) -> None:
        for n in range(CALLS_EACH):
            reply = server.call("answer", {"query": f"{name} {n}"}, timeout=60)
            with lock:
                costs.append(reply["result"]["_meta"]["cost"]["usd"])

    threads = [threading.Thread(target=ask, args=(s, str(i))) for i, s in enumerate(servers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert len(costs) == 2 * CALLS_EACH
    wait_for_rows(tmp_path, 2 * CALLS_EACH)
    report = usage_json(tmp_path)
    assert report["total"]["calls"] == 2 * CALLS_EACH
    assert report["total"]["usd"] == pytest.approx(sum(costs), abs=1e-6)
    assert [row["tool"] for row in report["by_tool"]] == ["answer"]
    assert report["by_model"][0]["model"] == "gpt-6.1-terra-2026-01-01"
    with sqlite3.connect(state_file(tmp_path)) as conn:
        (rows,) = conn.execute("SELECT COUNT(*) FROM usage WHERE outcome = 'ok'").fetchone()
        assert rows == 2 * CALLS_EACH
        (mode,) = conn.execute("PRAGMA journal_mode").fetchone()
        assert mode == "wal"


def test_each_row_has_the_calls_counts_and_outcome(spawn, fake, tmp_path):
    usage = {"input_tokens": 2000, "input_tokens_details": {"cached_tokens": 1024}}
    usage |= {"output_tokens": 500, "output_tokens_details": {"reasoning_tokens": 200}}
    fake.enqueue(Reply(usage=usage, searches=[{"query": "a", "sources": []}]))
    fake.enqueue(Reply(status=401))
    server = start(spawn, fake)
    server.call("answer", {"query": "q"})
    assert "error" in server.call("answer_quick", {"query": "q"})
    wait_for_rows(tmp_path, 2)
    with sqlite3.connect(state_file(tmp_path)) as conn:
        conn.row_factory = sqlite3.Row
        ok, failed = conn.execute("SELECT * FROM usage ORDER BY id").fetchall()
    assert dict(ok) | {"id": 0, "at": 0, "day": "", "elapsed_ms": 0} == {
        "id": 0,
        "at": 0,
        "day": "",
        "tool": "answer",
        "model": "gpt-6.1-terra-2026-01-01",
        "input_tokens": 2000,
        "cached_input_tokens": 1024,
        "output_tokens": 500,
        "reasoning_tokens": 200,
        "web_searches": 1,
        "usd": pytest.approx(0.001952 + 0.000512 + 0.005 + 0.025),
        "cache_hit": 0,
        "elapsed_ms": 0,
        "outcome": "ok",
        "writer_schema": m.STATE_SCHEMA_VERSION,
        "user_name": "local",  # stdio: the local user
        "files": 0,  # none attached (issue 32): counts only, never names
        "file_bytes": 0,
    }
    assert (failed["tool"], failed["outcome"], failed["usd"]) == ("answer_quick", "auth", 0)


def test_usage_prints_tables_by_day_model_and_tool(spawn, fake, tmp_path):
    server = start(spawn, fake)
    server.call("answer", {"query": "q"})
    server.call("answer_quick", {"query": "q"})
    wait_for_rows(tmp_path, 2)  # written after each reply, off the answer path
    result = run_cli(tmp_path, "--usage", "--config", str(tmp_path / "config.yaml"))
    assert result.returncode == 0, result.stderr
    out = result.stdout
    for header in ("by day", "by model", "by tool", "total"):
        assert header in out
    assert "answer_quick" in out and "gpt-6-luna-2026-01-01" in out


def test_usage_columns_say_what_they_count():
    """ "from cache" counts answers served from the answer cache, not cached input tokens."""
    row = {**m._usage_row_empty(), "calls": 3, "cache_hits": 2, "web_searches": 4, "usd": 0.5}
    report = {"since": None, "timezone": "UTC", "state_path": "/s", "total": row}
    report |= {"by_day": [{**row, "day": "2026-11-24"}], "by_model": [], "by_tool": []}
    lines = m.format_usage(report).splitlines()
    assert lines[2].split() == ["by", "day", "calls", "from", "cache", "searches", "USD"]
    assert lines[3].split() == ["2026-11-24", "3", "2", "4", "0.5000"]
    assert lines[-1].split() == ["total", "3", "2", "4", "0.5000"]


def test_usage_by_user_keeps_its_columns_for_a_long_oauth_name():
    row = {**m._usage_row_empty(), "calls": 2, "usd": 0.25}
    subject = {"user": "oauth:https://login.example.com/realms/team#" + "s" * 40, "kind": "oauth"}
    report = {"since": None, "timezone": "UTC", "state_path": "/s", "total": row}
    report |= {"by_day": [{**row, "day": "2026-11-24"}], "by_model": [], "by_tool": []}
    report["by_user"] = [{**subject, "calls": 2, "usd": 0.25}]
    lines = m.format_usage(report).splitlines()
    user_line = next(line for line in lines if "login.example.com" in line)
    day_line = next(line for line in lines if line.startswith("2026-11-24"))
    assert user_line.endswith("0.2500") and day_line.endswith("0.2500")
    assert len(user_line) == len(day_line)  # the USD column lines up in every table


def test_since_leaves_out_earlier_days(spawn, fake, tmp_path):
    start(spawn, fake).call("answer", {"query": "q"})
    wait_for_rows(tmp_path, 1)
    assert usage_json(tmp_path, "--since", "2000-01-01")["total"]["calls"] == 1
    assert usage_json(tmp_path, "--since", "2999-01-01")["total"]["calls"] == 0


def hold_lock(path, mode: str = "EXCLUSIVE") -> subprocess.Popen:
    """Another process holding a write lock on the state file (as the sqlite3 shell does in
    an open transaction) until its stdin is closed."""
    code = (
        "import sqlite3, sys\n"
        f"conn = sqlite3.connect({str(path)!r}, isolation_level=None)\n"
        f"conn.execute('BEGIN {mode}')\n"
        "print('locked', flush=True)\n"
        "sys.stdin.read()\n"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout.readline() == "locked\n"
    return holder


def test_a_lock_held_elsewhere_delays_no_call_and_loses_no_spend(spawn, fake, tmp_path):
    server = start(spawn, fake)
    server.call("answer", {"query": "first"})  # creates the file
    wait_for_rows(tmp_path, 1)
    holder = hold_lock(state_file(tmp_path))
    try:
        began = time.monotonic()
        for n in range(20):
            conftest.send_call(server, f"call-{n}", f"question {n}")
        replies = {}
        while len(replies) < 20:
            message = server.recv(timeout=60)
            replies[message["id"]] = message
        took = time.monotonic() - began
        # Before, each call waited for the lock in turn (2 s each, 40 s for 20): now none does.
        assert took < 10, took
        conftest.wait_until(lambda: "database is locked" in server.stderr, 20, "the warning")
        assert rows_in(tmp_path) == 1  # the 20 rows wait in memory, not lost
    finally:
        holder.stdin.close()
        holder.wait(10)
    costs = [reply["result"]["_meta"]["cost"]["usd"] for reply in replies.values()]
    wait_for_rows(tmp_path, 21)
    assert "answers go on without it" in server.stderr
    report = usage_json(tmp_path)
    first = report["total"]["usd"] - sum(costs)
    assert report["total"]["calls"] == 21 and 0 < first < 0.1


def test_a_lock_held_elsewhere_refuses_budgeted_calls_at_once_not_one_by_one(spawn, fake, tmp_path):
    """With a budget, a locked file fails closed: the first check waits out the 2 s busy
    timeout, the calls queued behind it are refused at once (before, each waited twice)."""
    server = start(spawn, fake, config=PRICES + "budget: {daily_usd: 5}\n")
    server.call("answer", {"query": "first"})
    wait_for_rows(tmp_path, 1)
    holder = hold_lock(state_file(tmp_path))
    try:
        began = time.monotonic()
        for n in range(10):
            conftest.send_call(server, f"call-{n}", f"question {n}")
        failures = [conftest.failure_of(server.recv(timeout=60)) for _ in range(10)]
        took = time.monotonic() - began
    finally:
        holder.stdin.close()
        holder.wait(10)
    for message in failures:
        assert message.startswith(
            "answer failed: budget cannot be checked: the state file is unavailable "
            "(database is locked)"
        ), message
    assert len(fake.requests) == 1
    assert took < 15, took  # one-by-one, the ten would take 20 s at least


@pytest.mark.skipif(os.name != "posix", reason="POSIX signals")
@pytest.mark.parametrize(("signame", "released"), [("SIGTERM", True), ("SIGINT", False)])
def test_a_stop_signal_writes_the_queued_rows_or_says_how_many_are_lost(
    spawn, fake, tmp_path, signame, released
):
    import signal

    server = start(spawn, fake)
    server.call("answer", {"query": "first"})
    wait_for_rows(tmp_path, 1)
    holder = hold_lock(state_file(tmp_path))
    try:
        for query in ("two", "three"):
            assert "result" in server.call("answer", {"query": query})
        conftest.wait_until(lambda: "database is locked" in server.stderr, 20, "the warning")
        if released:  # the writer is resting after its failure: the stop must not wait it out
            holder.stdin.close()
            holder.wait(10)
        server.proc.send_signal(getattr(signal, signame))
        server.wait(30)
    finally:
        holder.stdin.close()
        holder.wait(10)
    lost = "2 usage row(s) could not be written before exit"
    if released:
        assert rows_in(tmp_path) == 3 and lost not in server.stderr
    else:
        assert rows_in(tmp_path) == 1 and lost in server.stderr


@pytest.mark.parametrize("damage", ["corrupt", "directory"])
def test_a_damaged_state_file_costs_a_warning_not_the_answer(spawn, fake, tmp_path, damage):
    path = state_file(tmp_path)
    path.parent.mkdir(parents=True)
    if damage == "corrupt":
        path.write_bytes(b"this is not a database" * 100)
    else:
        path.mkdir()  # a folder where the file should be
    server = start(spawn, fake, config=PRICES)
    for query in ("one", "two"):
        reply = server.call("answer", {"query": query})
        assert "result" in reply, reply
    server.close_stdin()
    server.wait()
    lines = server.stderr.splitlines()
    warnings = [line for line in lines if "state file" in line and "failed (" in line]
    assert len(warnings) == 1, server.stderr  # once, not once per call
    reason = "file is not a database" if damage == "corrupt" else "unable to open database file"
    assert f"({reason})" in warnings[0] and "answers go on without it" in warnings[0]
    assert any("2 usage row(s) could not be written before exit" in line for line in lines)


@pytest.mark.parametrize("damage", ["corrupt", "directory"])
def test_a_budget_that_cannot_be_checked_refuses_the_call(spawn, fake, tmp_path, damage):
    path = state_file(tmp_path)
    path.parent.mkdir(parents=True)
    if damage == "corrupt":
        path.write_bytes(b"this is not a database" * 100)
    else:
        path.mkdir()
    server = start(spawn, fake, config=PRICES + "budget: {daily_usd: 5}\n")
    message = conftest.failure_of(server.call("answer", {"query": "q"}))
    reason = "file is not a database" if damage == "corrupt" else "unable to open database file"
    assert message.startswith(
        f"answer failed: budget cannot be checked: the state file is unavailable ({reason}): "
    )
    assert str(path) not in message  # the server's log names the file; the client is not told
    assert "budget.daily_usd" in message
    assert fake.requests == []


@pytest.mark.skipif(os.name != "posix", reason="RLIMIT_FSIZE is POSIX")
@pytest.mark.parametrize("budget", [True, False])
def test_a_full_disk_refuses_with_a_budget_and_warns_without_one(fake, tmp_path, budget):
    import resource

    path = state_file(tmp_path)
    path.parent.mkdir(parents=True)
    made = m.StateStore(m._SqliteBackend(str(path)), m.Log())
    made.read("making the tables", lambda q: None)
    made.close()
    config = tmp_path / "config.yaml"
    config.write_text(PRICES + ("budget: {daily_usd: 5}\n" if budget else ""), encoding="utf-8")

    def full_disk() -> None:  # no file of the process grows past 4 KiB: every state write fails
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))

    result = run_cli(
        tmp_path,
        *("--ask", "q", "--config", str(config)),
        env={"OPENAI_BASE_URL": fake.base_url},
        preexec_fn=full_disk,
    )
    assert "Traceback" not in result.stderr
    if budget:
        assert result.returncode != 0
        assert "budget cannot be checked: the state file is unavailable (" in result.stderr
        assert f"state file {path}: checking the budget failed (" in result.stderr
        assert fake.requests == []
    else:
        assert result.returncode == 0, result.stderr
        assert "failed (" in result.stderr and "answers go on without it" in result.stderr
        assert "1 usage row(s) could not be written before exit" in result.stderr


def test_state_path_off_writes_nothing(spawn, fake, tmp_path):
    server = start(spawn, fake, config=PRICES + "state: {path: 'off'}\n")
    assert "result" in server.call("answer", {"query": "q"})
    assert not (tmp_path / "xdg-state").exists()


def test_state_path_names_the_file(spawn, fake, tmp_path):
    target = tmp_path / "elsewhere" / "ledger.db"
    server = start(spawn, fake, config=PRICES + f"state: {{path: '{target}'}}\n")
    server.call("answer", {"query": "q"})
    conftest.wait_until(target.exists, 10, "the state file")
    assert not (tmp_path / "xdg-state").exists()


def test_the_state_file_is_not_opened_before_the_first_call(spawn, fake, tmp_path):
    server = start(spawn, fake)
    server.request("tools/list")
    assert not (tmp_path / "xdg-state").exists()


def test_budget_sums_count_this_month_and_not_the_last(tmp_path):
    state = m.StateStore(m._SqliteBackend(str(tmp_path / "state.sqlite3")), m.Log())
    ledger = m.Ledger(state, "UTC")
    ledger.record(m.UsageRow("answer", "gpt-5.2", "ok", {"cost": {"usd": 1.25}}))
    ledger.record(m.UsageRow("answer", "gpt-5.2", "cache", {"cost": {"usd": 0.0}}))
    today = m.today_in("UTC")
    first = today[:8] + "01"
    earlier = [(first, 2.0)] if first != today else []
    state.read(
        "seeding",
        lambda q: [
            q("INSERT INTO spend_by_day (day, usd) VALUES (?, ?)", row)
            for row in [("1999-12-31", 100.0), *earlier]
        ],
        write=True,
    )
    # Counted whether or not the writer has stored the rows yet.
    assert ledger.spent_since(today) == pytest.approx(1.25)
    assert ledger.spent_since(first) == pytest.approx(1.25 + sum(usd for _, usd in earlier))
    state.close()
    assert ledger.spent_since(today) == pytest.approx(1.25)


@pytest.mark.parametrize(
    ("tool", "ttl_s", "floor"),
    # answer: an hour (its 4 attempts of 300 s are less); answer_deep: its 2 h run and a minute,
    # and 50 searches at $10 per 1,000.
    [("answer", 3600, 0.01), ("answer_deep", 7260, 0.5)],
)
def test_a_reservation_outlasts_its_call_and_a_deep_run_reserves_its_searches(
    tmp_path, tool, ttl_s, floor
):
    """A reservation counts until its call can no longer be running (an answer_deep run may
    take request.deep_timeout_ms), and a first deep run, with no history to take a mean of,
    reserves the searches its max_tool_calls allows rather than one."""
    path = tmp_path / "config.yaml"
    path.write_text(
        "budget: {daily_usd: 5}\nrequest: {deep_timeout_ms: 7200000}\n", encoding="utf-8"
    )
    config = m.load_config({"config": str(path)}, {"XDG_STATE_HOME": str(tmp_path)})
    engine = m.build_engine(config, m.Log())
    try:
        reservation = engine.spending._reserve(tool, m.today_in(config.get("policy", "timezone")))
        at, expires_at, usd = engine.state.read(
            "test",
            lambda q: q(
                "SELECT at, expires_at, usd FROM reservations WHERE id = ?", (reservation,)
            ).fetchone(),
        )
    finally:
        engine.close()
    assert expires_at - at == pytest.approx(ttl_s)
    assert usd == pytest.approx(floor)


def test_the_input_a_tools_calls_carry_counts_for_the_long_context_line(tmp_path):
    """Issue 39: the long-context line counts what a call carries besides what it brings (its
    question, files): at least what each of its tool's recent calls carried (instructions,
    search results). A question of 100K tokens, on a tool whose calls carried 180K and more,
    is over the 272K line, so its reservation is at the long-context rate, and its tool's
    typical cost too (the mean of those calls)."""
    path = tmp_path / "config.yaml"
    path.write_text("budget: {daily_usd: 50}\n", encoding="utf-8")
    config = m.load_config({"config": str(path)}, {"XDG_STATE_HOME": str(tmp_path)})
    engine = m.build_engine(config, m.Log())
    today = m.today_in(config.get("policy", "timezone"))
    try:
        for tokens, usd in ((180_000, 0.30), (250_000, 0.40)):
            meta = {"usage": {"input_tokens": tokens}, "cost": {"usd": usd}}
            engine.ledger.record(m.UsageRow("answer", "gpt-6.1-terra", "ok", meta))
        wait_until(lambda: not engine.state.unwritten(), 20, "the rows written")
        request = m.build_request("answer", {"query": "x" * 300_000}, config, today)
        hold = m._Hold()
        engine.spending.admit("answer", request, today, hold, m.LOCAL_USER, {})
        reservation = hold.take()
        (usd,) = engine.state.read(
            "test",
            lambda q: q("SELECT usd FROM reservations WHERE id = ?", (reservation,)).fetchone(),
        )
    finally:
        engine.close()
    brought = m.text_tokens(m.request_text(request))  # 100K, and the hints
    assert brought < m.LONG_CONTEXT_TOKENS < brought + 180_000
    # gpt-6.1-terra's $1 input, as a cache write (x1.25), at the long-context rate (x2).
    assert usd == pytest.approx(brought * 1.25 * 2 / 1e6 + 0.35 * 2)


def test_a_call_admitted_then_joining_an_identical_call_gives_its_reservation_back(
    tmp_path, monkeypatch
):
    """Agents send identical calls together: a call can be admitted (its cost reserved) and
    then find an identical call's request in flight, and join it. It made no request, so its
    reservation is given back at once; kept, it would refuse later calls for an hour."""
    path = tmp_path / "config.yaml"
    path.write_text("budget: {daily_usd: 5}\n", encoding="utf-8")
    config = m.load_config({"config": str(path)}, {"XDG_STATE_HOME": str(tmp_path)})
    monkeypatch.setenv("OPENAI_API_KEY", conftest.TEST_KEY)
    engine = m.build_engine(config, m.Log())
    go_on, settled, results = threading.Event(), [], {}

    def fetch(tool, request, call, today, key, reservation=None, user=m.LOCAL_USER, files=None):
        go_on.wait(10)  # the request in flight, until the joiner has joined it
        meta = {"cost": {**m.ZERO_COST, "prices": None}, "elapsed_ms": 1}
        engine.spending.record(
            call, m.UsageRow(tool, request["model"], "ok", meta, user), reservation
        )
        settled.append(reservation)
        return {"answer": "a", "model": request["model"]}, meta

    def ask(name):
        results[name] = engine.answer("answer", QUERY, m.Call(name, "answer"))

    flier = threading.Thread(target=ask, args=("flier",))
    admit = engine.spending.admit

    def admitted_while_an_identical_call_starts(*args):
        admit(*args)  # the joiner's cost is reserved; then the identical call takes off
        if not flier.is_alive() and "flier" not in results:
            flier.start()
            conftest.wait_until(lambda: engine.flights.in_flight() == 1, 10, "the flight")

    def callers() -> int:
        flights = list(engine.flights._flights.values())
        return len(flights[0]._callers) if flights else 0

    monkeypatch.setattr(engine, "_fetch", fetch)
    monkeypatch.setattr(engine.spending, "admit", admitted_while_an_identical_call_starts)
    joiner = threading.Thread(target=ask, args=("joiner",))
    try:
        joiner.start()
        conftest.wait_until(lambda: callers() == 2, 10, "the joiner to join the flight")
        go_on.set()
        joiner.join(10)
        flier.join(10)
        assert results["joiner"][1]["shared"] is True  # no request of its own
        assert len(settled) == 1 and settled[0] is not None  # the flier's, settled by its row
    finally:
        go_on.set()
        engine.close()
    live = sqlite3.connect(state_file_in(tmp_path)).execute(
        "SELECT COUNT(*) FROM reservations WHERE expires_at > ?", (time.time(),)
    )
    assert live.fetchone()[0] == 0


QUERY = {"query": "the same question, asked twice at once"}


def state_file_in(state_home) -> str:
    return str(state_home / "openai-responses-mcp" / "state.sqlite3")


# -- The files: private, where the config says ---------------------------------------------------


@pytest.mark.skipif(os.name != "posix", reason="file modes are POSIX")
def test_every_state_file_is_private_from_its_creation(spawn, fake, tmp_path):
    server = start(spawn, fake)
    server.call("answer", {"query": "q"})
    wait_for_rows(tmp_path, 1)
    files = sorted(state_file(tmp_path).parent.iterdir())
    assert [path.name for path in files] == [
        "state.sqlite3",
        "state.sqlite3-shm",
        "state.sqlite3-wal",
    ]
    for path in files:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    assert stat.S_IMODE(state_file(tmp_path).parent.stat().st_mode) == 0o700


def test_a_relative_state_path_is_taken_from_the_config_files_folder(spawn, fake, tmp_path):
    folder = tmp_path / "conf"
    folder.mkdir()
    config = folder / "config.yaml"
    config.write_text(PRICES + "state: {path: 'ledger/state.db'}\n", encoding="utf-8")
    expected = folder / "ledger" / "state.db"
    shown = conftest.show_config(run_cli(tmp_path, "--show-config", "--config", str(config)))
    assert shown["config"]["state"]["path"] == str(expected)
    assert shown["state"] == f"state file {expected}"
    server = spawn("--stdio", "--config", str(config), upstream=fake)  # started in tmp_path
    server.initialize()
    server.call("answer", {"query": "q"})
    conftest.wait_until(expected.exists, 10, "the state file")
    assert not (tmp_path / "ledger").exists()


def test_a_relative_state_path_from_the_environment_is_refused(tmp_path):
    result = run_cli(tmp_path, "--show-config", env={"OPENAI_RESPONSES_MCP_STATE": "rel.db"})
    assert result.returncode == 2
    assert "state.path" in result.stderr and "env OPENAI_RESPONSES_MCP_STATE" in result.stderr
    assert "absolute" in result.stderr


# -- Reports, retention, upgrades --------------------------------------------------------------


def test_reports_read_per_day_totals_and_old_raw_rows_are_pruned(tmp_path):
    state = m.StateStore(m._SqliteBackend(str(tmp_path / "s.db")), m.Log(), "UTC", 30)
    ledger = m.Ledger(state, "UTC")
    old = m.UsageRow("answer", "gpt-5.2", "ok", {"cost": {"usd": 2.0}}).values
    state.read("seeding", lambda q: m._UsageWrite({**old, "day": "2001-01-01"}, None).apply(q))
    ledger.record(m.UsageRow("answer", "gpt-5.2", "ok", {"cost": {"usd": 1.0}}))
    state.close()  # the writer's first batch also prunes
    raw = state.read("count", lambda q: q("SELECT day FROM usage").fetchall())
    assert [day for (day,) in raw] == [m.today_in("UTC")]
    report = ledger.report(None)
    assert report["total"]["calls"] == 2 and report["total"]["usd"] == pytest.approx(3.0)
    assert [row["day"] for row in report["by_day"]] == ["2001-01-01", m.today_in("UTC")]
    state.close()


def test_a_report_does_not_wait_for_the_answer_paths_connection(tmp_path):
    state = m.StateStore(m._SqliteBackend(str(tmp_path / "s.db")), m.Log(), "UTC")
    ledger = m.Ledger(state, "UTC")
    ledger.record(m.UsageRow("answer", "gpt-5.2", "ok", {"cost": {"usd": 1.0}}))
    state.close()
    state._reads._lock.acquire()  # a call holding the answer path's connection
    try:
        assert ledger.report(None)["total"]["calls"] == 1
    finally:
        state._reads._lock.release()
    state.close()


def test_a_file_of_the_previous_version_is_upgraded_with_its_totals(tmp_path, fake):
    path = tmp_path / "old.sqlite3"
    with sqlite3.connect(path) as conn:  # version 1: raw rows, no totals, no version table
        conn.executescript(V1_SCHEMA)
        conn.execute(
            "INSERT INTO usage (at, day, tool, model, usd, outcome) VALUES "
            "(0, '2026-01-02', 'answer', 'gpt-5.2', 0.5, 'ok')"
        )
    config = tmp_path / "config.yaml"
    config.write_text(f"state: {{path: '{path}'}}\n", encoding="utf-8")
    report = json.loads(run_cli(tmp_path, "--usage", "--json", "--config", str(config)).stdout)
    assert report["total"]["calls"] == 1 and report["total"]["usd"] == 0.5
    assert report["by_day"][0]["day"] == "2026-01-02"
    with sqlite3.connect(path) as conn:
        version = conn.execute("SELECT version FROM schema_version").fetchall()
        assert version == [(m.STATE_SCHEMA_VERSION,)]


V1_SCHEMA = """
CREATE TABLE usage (id INTEGER PRIMARY KEY, at REAL NOT NULL, day TEXT NOT NULL,
    tool TEXT NOT NULL, model TEXT NOT NULL, input_tokens INTEGER NOT NULL DEFAULT 0,
    cached_input_tokens INTEGER NOT NULL DEFAULT 0, output_tokens INTEGER NOT NULL DEFAULT 0,
    reasoning_tokens INTEGER NOT NULL DEFAULT 0, web_searches INTEGER NOT NULL DEFAULT 0,
    usd REAL, cache_hit INTEGER NOT NULL DEFAULT 0, elapsed_ms INTEGER NOT NULL DEFAULT 0,
    outcome TEXT NOT NULL);
CREATE INDEX usage_by_day ON usage (day);
CREATE TABLE spend_by_day (day TEXT PRIMARY KEY, usd REAL NOT NULL);
CREATE TABLE answers (key TEXT PRIMARY KEY, stored_at REAL NOT NULL, body TEXT NOT NULL);
"""


def test_rows_kept_through_an_outage_are_written_at_close(tmp_path):
    path = tmp_path / "s.db"
    state = m.StateStore(m._SqliteBackend(str(path)), m.Log(), "UTC")
    ledger = m.Ledger(state, "UTC")
    ledger.record(m.UsageRow("answer", "gpt-5.2", "ok", {"cost": {"usd": 1.0}}))
    conftest.wait_until(lambda: not state.unwritten(), 10, "the first row")
    holder = hold_lock(path)
    try:
        ledger.record(m.UsageRow("answer", "gpt-5.2", "ok", {"cost": {"usd": 2.0}}))
        conftest.wait_until(lambda: state._writer._channel._resting_until > 0, 20, "a failure")
        assert len(state.unwritten()) == 1  # kept, not lost
    finally:
        holder.stdin.close()
        holder.wait(10)
    state.close(wait_s=10)  # tries at once, without waiting out the rest
    assert ledger.spent_since("2000-01-01") == pytest.approx(3.0)
    assert state.unwritten() == []


def test_today_the_ledgers_day_and_the_budgets_day_follow_policy_timezone(tmp_path, monkeypatch):
    """Issue 35's rule on a pinned clock: at 16:30 UTC on 2026-11-27 it is already 2026-11-28
    in Tokyo, so with the default policy.timezone every "today" (the date a request carries,
    the day a ledger row is booked under, the day a daily budget counts) is the 28th; the host's
    clock and zone play no part."""
    import datetime

    instant = datetime.datetime(2026, 11, 27, 16, 30, tzinfo=datetime.timezone.utc)
    monkeypatch.setattr(m, "clock", instant.timestamp)
    zone = m.SETTINGS[("policy", "timezone")].default
    assert zone == "Asia/Tokyo"
    assert m.today_in(zone) == "2026-11-28"
    assert m.today_in("UTC") == "2026-11-27"
    config = m.load_config({}, {"XDG_CONFIG_HOME": str(tmp_path), "XDG_STATE_HOME": str(tmp_path)})
    today = m.today_in(config.get("policy", "timezone"))
    request = m.build_request("answer", {"query": "q"}, config, today)
    assert request["input"].endswith(f"[today] 2026-11-28 ({zone})")
    config.values["budget"]["daily_usd"] = 1.0
    assert [period.since for period in m.budgets(config, today)] == ["2026-11-28"]
    path = str(tmp_path / "state.sqlite3")
    state = m.StateStore(m._SqliteBackend(path), m.Log())
    tokyo, utc = m.Ledger(state, zone), m.Ledger(state, "UTC")
    tokyo.record(m.UsageRow("answer", "gpt-6.1-terra", "ok", {"cost": {"usd": 0.5}}))
    utc.record(m.UsageRow("answer", "gpt-6.1-terra", "ok", {"cost": {"usd": 0.25}}))
    assert tokyo.spent_since("2026-11-28") == pytest.approx(0.5)
    # Written before the file is read again: under load the writer's first try can meet the
    # other connection making the tables past SQLite's busy timeout; it tries again later.
    conftest.wait_until(lambda: not state.unwritten(), 30, "the two rows written")
    state.close()
    again = m.StateStore(m._SqliteBackend(path), m.Log())
    report = m.Ledger(again, zone).report("2026-11-01")
    by_day = {row["day"]: row["usd"] for row in report["by_day"]}
    assert by_day == {"2026-11-27": pytest.approx(0.25), "2026-11-28": pytest.approx(0.5)}
    again.close()


def test_a_response_complete_when_its_call_was_cancelled_is_booked(tmp_path, monkeypatch):
    """Issue 39: the cancel came once the response was complete, so it is billed: the call's
    row (outcome `cancelled`) books its cost, which settles its reservation, instead of $0."""
    path = tmp_path / "config.yaml"
    path.write_text("budget: {daily_usd: 5}\n", encoding="utf-8")
    config = m.load_config({"config": str(path)}, {"XDG_STATE_HOME": str(tmp_path)})
    monkeypatch.setenv("OPENAI_API_KEY", conftest.TEST_KEY)
    engine = m.build_engine(config, m.Log())
    usage = {"input_tokens": 10_000, "output_tokens": 100_000}
    message = {"type": "message", "content": [{"type": "output_text", "text": "Yes."}]}

    def attempt(client, request, call, run=None):
        call.cancelled.set()  # the client's cancel, as the last event is read
        return {"id": "resp_1", "status": "completed", "usage": usage, "output": [message]}

    monkeypatch.setattr(engine.upstream, "_attempt", attempt)
    try:
        with pytest.raises(m.Cancelled):
            engine.answer("answer", {"query": "q"}, m.Call(1, "answer"))
        wait_until(lambda: not engine.state.unwritten(), 20, "the row written")
        row, held = engine.state.read(
            "test",
            lambda q: (
                q("SELECT outcome, usd, output_tokens FROM usage").fetchall(),
                q("SELECT COUNT(*) FROM reservations").fetchone()[0],
            ),
        )
    finally:
        engine.close()
    # gpt-6.1-terra: 10K input at $1, 100K output at $5.
    assert row == [("cancelled", pytest.approx(0.51), 100_000)]
    assert held == 0
