"""The usage ledger: one row per finished call in a SQLite file every process shares, read
back by --usage; a locked or corrupt file costs a warning, never an answer."""

from __future__ import annotations

import json
import sqlite3
import threading

import conftest
import pytest
from conftest import PRICES, run_cli
from fake_upstream import Reply

import openai_responses_mcp as m

CALLS_EACH = 12


def start(spawn, fake, config: str = PRICES, env: dict | None = None):
    return conftest.start(spawn, fake, config=config, env=env)


def state_file(tmp_path):
    return tmp_path / "xdg-state" / "openai-responses-mcp" / "state.sqlite3"


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
    report = usage_json(tmp_path)
    assert report["total"]["calls"] == 2 * CALLS_EACH
    assert report["total"]["usd"] == pytest.approx(sum(costs), abs=1e-6)
    assert [row["tool"] for row in report["by_tool"]] == ["answer"]
    assert report["by_model"][0]["model"] == "gpt-5.2-2026-01-01"
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
    with sqlite3.connect(state_file(tmp_path)) as conn:
        conn.row_factory = sqlite3.Row
        ok, failed = conn.execute("SELECT * FROM usage ORDER BY id").fetchall()
    assert dict(ok) | {"id": 0, "at": 0, "day": "", "elapsed_ms": 0} == {
        "id": 0,
        "at": 0,
        "day": "",
        "tool": "answer",
        "model": "gpt-5.2-2026-01-01",
        "input_tokens": 2000,
        "cached_input_tokens": 1024,
        "output_tokens": 500,
        "reasoning_tokens": 200,
        "web_searches": 1,
        "usd": pytest.approx(0.001952 + 0.000512 + 0.005 + 0.025),
        "cache_hit": 0,
        "elapsed_ms": 0,
        "outcome": "ok",
    }
    assert (failed["tool"], failed["outcome"], failed["usd"]) == ("answer_quick", "auth", 0)


def test_usage_prints_tables_by_day_model_and_tool(spawn, fake, tmp_path):
    server = start(spawn, fake)
    server.call("answer", {"query": "q"})
    server.call("answer_quick", {"query": "q"})
    result = run_cli(tmp_path, "--usage", "--config", str(tmp_path / "config.yaml"))
    assert result.returncode == 0, result.stderr
    out = result.stdout
    for header in ("by day", "by model", "by tool", "total"):
        assert header in out
    assert "answer_quick" in out and "gpt-5.2-2026-01-01" in out


def test_usage_columns_say_what_they_count():
    """ "from cache" counts answers served from the answer cache, not cached input tokens."""
    row = {**m._usage_row_empty(), "calls": 3, "cache_hits": 2, "web_searches": 4, "usd": 0.5}
    report = {"since": None, "timezone": "UTC", "state_path": "/s", "total": row}
    report |= {"by_day": [{**row, "day": "2026-11-24"}], "by_model": [], "by_tool": []}
    lines = m.format_usage(report).splitlines()
    assert lines[2].split() == ["by", "day", "calls", "from", "cache", "searches", "USD"]
    assert lines[3].split() == ["2026-11-24", "3", "2", "4", "0.5000"]
    assert lines[-1].split() == ["total", "3", "2", "4", "0.5000"]


def test_since_leaves_out_earlier_days(spawn, fake, tmp_path):
    start(spawn, fake).call("answer", {"query": "q"})
    assert usage_json(tmp_path, "--since", "2000-01-01")["total"]["calls"] == 1
    assert usage_json(tmp_path, "--since", "2999-01-01")["total"]["calls"] == 0


def test_a_locked_state_file_costs_a_warning_not_the_answer(spawn, fake, tmp_path):
    server = start(spawn, fake)
    server.call("answer", {"query": "first"})  # creates the file
    holder = sqlite3.connect(state_file(tmp_path), isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        reply = server.call("answer", {"query": "second"}, timeout=60)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert "result" in reply, reply
    # The warning goes to stderr before the reply to stdout, but each pipe has its own reader.
    conftest.wait_until(lambda: "answers go on without it" in server.stderr, what="the warning")
    assert "database is locked" in server.stderr


def test_a_corrupt_state_file_costs_a_warning_not_the_answer(spawn, fake, tmp_path):
    path = state_file(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"this is not a database" * 100)
    server = start(spawn, fake, config=PRICES + "budget: {daily_usd: 5}\n")
    for query in ("one", "two"):
        reply = server.call("answer", {"query": query})
        assert "result" in reply, reply
    server.close_stdin()
    server.wait()
    warnings = [line for line in server.stderr.splitlines() if "state file" in line]
    assert len(warnings) == 1, server.stderr  # once, not once per call
    assert "not a database" in warnings[0]


def test_state_path_off_writes_nothing(spawn, fake, tmp_path):
    server = start(spawn, fake, config=PRICES + "state: {path: 'off'}\n")
    assert "result" in server.call("answer", {"query": "q"})
    assert not (tmp_path / "xdg-state").exists()


def test_state_path_names_the_file(spawn, fake, tmp_path):
    target = tmp_path / "elsewhere" / "ledger.db"
    server = start(spawn, fake, config=PRICES + f"state: {{path: '{target}'}}\n")
    server.call("answer", {"query": "q"})
    assert target.exists()
    assert not (tmp_path / "xdg-state").exists()


def test_the_state_file_is_not_opened_before_the_first_call(spawn, fake, tmp_path):
    server = start(spawn, fake)
    server.request("tools/list")
    assert not (tmp_path / "xdg-state").exists()


def test_budget_sums_count_this_month_and_not_the_last(tmp_path):
    import openai_responses_mcp as m

    state = m.StateFile(str(tmp_path / "state.sqlite3"), m.Log())
    ledger = m.Ledger(state, "UTC")
    ledger.record(m.UsageRow("answer", "gpt-5.2", "ok", {"cost": {"usd": 1.25}}))
    ledger.record(m.UsageRow("answer", "gpt-5.2", "cache", {"cost": {"usd": 0.0}}))
    today = m.today_in("UTC")
    first = today[:8] + "01"
    earlier = [(first, 2.0)] if first != today else []
    state.run(
        "seeding",
        lambda conn: conn.executemany(
            "INSERT INTO spend_by_day (day, usd) VALUES (?, ?)", [("1999-12-31", 100.0), *earlier]
        ),
        write=True,
    )
    assert ledger.spent_since(today) == pytest.approx(1.25)
    assert ledger.spent_since(first) == pytest.approx(1.25 + sum(usd for _, usd in earlier))
    state.close()
