"""Retirements seen before they break anyone: --doctor lists every profile's model with its
shutdown date from GET /v1/models, a running server warns once a day (across processes,
through the state), and a call to a model that has shut down fails once, naming the key."""

from __future__ import annotations

import datetime
import time
from pathlib import Path

import conftest
import pytest
from conftest import run_cli, wait_until
from fake_upstream import Reply
from http_client import proc_status

import openai_responses_mcp as m


def day(offset: int) -> str:
    """A date `offset` days from today, where today is what the server counts from: the same
    clock and time zone (policy.timezone, Asia/Tokyo by default), never the machine's date,
    which differs from Tokyo's from 15:00 to 24:00 UTC."""
    today = datetime.date.fromisoformat(m.today_in(m.SETTINGS[("policy", "timezone")].default))
    return (today + datetime.timedelta(offset)).isoformat()


def line_with(text: str, needle: str) -> str:
    found = [line for line in text.splitlines() if needle in line]
    assert found, f"no line with {needle!r} in:\n{text}"
    return found[0]


def doctor(tmp_path, fake, config: str):
    path = tmp_path / "config.yaml"
    path.write_text(config, encoding="utf-8")
    env = {"OPENAI_BASE_URL": fake.base_url}
    return run_cli(tmp_path, "--doctor", "--config", str(path), env=env)


def test_doctor_lists_every_profiles_model_with_its_shutdown_date(tmp_path, fake):
    fake.shutdown_dates["gpt-6.2-sol"] = day(200)  # announced, far off
    # Within 90 days (the deprecations page says 2026-12-11; a date relative to today keeps
    # the test's meaning on any day).
    fake.shutdown_dates["gpt-5-mini"] = day(14)
    config = (
        "model_profiles:\n  answer: {model: gpt-5-mini}\n"
        "  answer_quick: {model: gpt-6-luna}\n  answer_detailed: {model: gpt-6.2-sol}\n"
    )
    proc = doctor(tmp_path, fake, config)
    out = proc.stdout
    # answer: a date within 90 days: a warning that names the key and the replacement the
    # deprecations page gives.
    soon = line_with(out, f"answer: gpt-5-mini shuts down on {day(14)}, in 14 days")
    assert soon.startswith("!")
    fix = out.splitlines()[out.splitlines().index(soon) + 1]
    assert "fix: set model_profiles.answer.model to gpt-6.1-terra" in fix
    assert line_with(out, "answer_quick: gpt-6-luna has no shutdown date announced").startswith("✓")
    far = line_with(out, f"answer_detailed: gpt-6.2-sol shuts down on {day(200)}, in 200 days")
    assert far.startswith("✓")
    # answer_deep is listed even though it is off.
    assert "answer_deep: o4-mini-deep-research has no shutdown date announced" in out
    assert proc.returncode == 0, out


def test_doctor_fails_a_model_whose_shutdown_date_has_come(tmp_path, fake):
    fake.models.append("gpt-5.2-going")
    fake.shutdown_dates["gpt-5.2-going"] = day(-1)
    fake.retired = lambda model: False  # the API still lists it (a gateway's stale list, say)
    config = "model_profiles:\n  answer_quick: {model: gpt-5.2-going}\n"
    proc = doctor(tmp_path, fake, config)
    failed = line_with(proc.stdout, f"answer_quick: gpt-5.2-going shut down on {day(-1)}")
    assert failed.startswith("✗") and "calls to it fail" in failed
    assert "fix: set model_profiles.answer_quick.model to a current model" in proc.stdout
    assert proc.returncode == 1


def test_doctor_names_the_key_of_a_model_no_longer_listed(tmp_path, fake):
    config = "model_profiles:\n  answer: {model: o4-mini}\n"  # shut down 2026-10-23
    proc = doctor(tmp_path, fake, config)
    assert "answer: o4-mini is not listed by GET /v1/models" in proc.stdout
    assert "set model_profiles.answer.model to gpt-5.6-terra" in proc.stdout
    assert proc.returncode == 1  # the model check fails it: calls to it cannot work


def test_doctor_asks_get_v1_models_once(tmp_path, fake):
    """Issue 33: the key check and the shutdown dates both read GET /v1/models: one request."""
    proc = doctor(tmp_path, fake, "model_profiles:\n  answer: {model: gpt-5-mini}\n")
    assert "answer: gpt-5-mini" in proc.stdout
    listed = [
        r for r in fake.requests_to("GET", "/v1/models") if r.path.rstrip("/") == "/v1/models"
    ]
    assert len(listed) == 1


# gpt-5-mini's date in the odd list: the deprecations page says 2026-12-11; a date relative to
# today keeps "shuts down on" (not "shut down on") true on any day, and the fake serving it.
SOON = day(14)
ODD_LISTS = [
    # Entries that are no model object, or whose shutdown_date is no YYYY-MM-DD date.
    {
        "object": "list",
        "data": [
            "gpt-5-mini",
            None,
            {"object": "model"},
            {"id": "gpt-6-luna", "shutdown_date": "soon"},
            {"id": "gpt-6.2-sol", "shutdown_date": 20271231},
            {"id": "gpt-6.1-sol", "shutdown_date": "2027-02-30"},
            {"id": "gpt-5-mini", "shutdown_date": SOON},
        ],
    },
    {"object": "list", "data": None},
    {"object": "list", "data": {"id": "gpt-5-mini"}},
    ["gpt-5-mini"],
    "<html>a gateway's page</html>",
]


@pytest.mark.parametrize("listing", ODD_LISTS)
def test_any_shape_of_the_model_list_is_read_without_a_traceback(tmp_path, fake, listing):
    """Review 4, m3: a shutdown_date not YYYY-MM-DD, or a non-object in /v1/models, crashed
    --doctor with a traceback (and the server's check thread)."""
    fake.models_answers.append((200, listing))
    proc = doctor(tmp_path, fake, "model_profiles:\n  answer: {model: gpt-5-mini}\n")
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout
    assert "All checks passed" in proc.stdout or "check(s) failed" in proc.stdout


def test_odd_entries_are_skipped_with_a_debug_line_each():
    lines: list = []
    dates = m.shutdown_dates(ODD_LISTS[0], lines.append)
    assert dates == {"gpt-5-mini": SOON}
    assert len(lines) == 6
    assert any("'gpt-6-luna': shutdown_date is no YYYY-MM-DD" in line for line in lines)
    assert m.shutdown_dates("<html>", lines.append) == {}


def test_doctor_under_debug_says_what_it_skipped(tmp_path, fake):
    fake.models_answers.append((200, ODD_LISTS[0]))
    path = tmp_path / "config.yaml"
    path.write_text("model_profiles:\n  answer: {model: gpt-5-mini}\n", encoding="utf-8")
    env = {"OPENAI_BASE_URL": fake.base_url}
    proc = run_cli(tmp_path, "--doctor", "--debug", "--config", str(path), env=env)
    assert "entry 0 skipped: not a model object with an id" in proc.stderr
    assert f"answer: gpt-5-mini shuts down on {SOON}" in proc.stdout


def test_a_running_server_survives_an_odd_model_list(spawn, fake):
    fake.models_answers.append((200, ODD_LISTS[0]))
    fake.shutdown_dates["gpt-5-mini"] = SOON  # the fake serves it, as the list says
    env = {"OPENAI_CHECK_RETIREMENTS": "true"}
    config = "model_profiles:\n  answer: {model: gpt-5-mini}\n"
    server = conftest.start(spawn, fake, "--stdio", "--debug", config=config, env=env)
    assert "result" in server.call("answer", {"query": "q"})
    wait_until(lambda: "answer: gpt-5-mini shuts down" in server.stderr, 30, "the warning")
    assert "retirements: GET /v1/models: entry 0 skipped" in server.stderr
    assert "Traceback" not in server.stderr
    assert "result" in server.call("answer", {"query": "q"})


def test_a_failed_look_is_said_once_and_leaves_the_day_unchecked(spawn, fake):
    """Review 4, m4: the day was marked checked before /v1/models answered, so one 500
    skipped the check for every process that day, silently."""
    fake.models_answers.append((500, {"error": {"message": "boom", "type": "server_error"}}))
    fake.shutdown_dates["gpt-5"] = day(14)  # announced, not come, on any day this runs
    env = {"OPENAI_CHECK_RETIREMENTS": "true"}
    config = "model_profiles:\n  answer: {model: gpt-5}\n"
    first = conftest.start(spawn, fake, config=config, env=env)
    first.call("answer", {"query": "q"})
    wait_until(lambda: "shutdown dates could not be read" in first.stderr, 30, "the failure")
    said = line_with(first.stderr, "shutdown dates could not be read")
    assert "trying again in 60 s" in said and "openai.check_retirements" in said
    # Another process the same day looks again, and warns.
    second = conftest.start(spawn, fake, config=config, env=env)
    second.call("answer", {"query": "q"})
    wait_until(lambda: "answer: gpt-5 shuts down" in second.stderr, 30, "the second look")
    assert len(fake.requests_to("GET", "/v1/models")) == 2


def test_a_failed_look_is_tried_again_a_bounded_number_of_times(tmp_path, fake, monkeypatch):
    monkeypatch.setattr(m, "RETIREMENT_RETRY_S", (0.05, 0.05))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-" + "x" * 40)
    env = conftest.base_env(tmp_path, OPENAI_BASE_URL=fake.base_url)
    env["OPENAI_CHECK_RETIREMENTS"] = "true"
    config = m.load_config({}, env)
    said: list = []
    log = m.Log()
    monkeypatch.setattr(log, "say", said.append)
    engine = m.build_engine(config, log)
    fake.models_answers += [(500, {"error": {"message": "boom"}})] * 5
    engine.check_retirements()
    wait_until(lambda: len(fake.requests_to("GET", "/v1/models")) == 3, 10, "two tries again")
    import time

    time.sleep(0.5)  # sleep: the point: a window in which a fourth try would come
    assert len(fake.requests_to("GET", "/v1/models")) == 3  # bounded: the first and two more
    assert len([line for line in said if "could not be read" in line]) == 1
    engine.close()


def test_a_running_server_warns_once_a_day_across_processes(spawn, fake):
    # The deprecations page says 2026-12-11; a date relative to today keeps the warning (not
    # the "shut down" failure) on any day this runs.
    soon = fake.shutdown_dates["gpt-5"] = day(14)
    env = {"OPENAI_CHECK_RETIREMENTS": "true"}
    config = "model_profiles:\n  answer: {model: gpt-5}\n"
    first = conftest.start(spawn, fake, config=config, env=env)
    first.call("answer", {"query": "q"})
    wait_until(
        lambda: f"answer: gpt-5 shuts down on {soon}" in first.stderr,
        30,
        "the retirement warning",
    )
    warning = line_with(first.stderr, "answer: gpt-5 shuts down")
    assert warning.startswith(
        f"openai-responses-mcp: warning: answer: gpt-5 shuts down on {soon}, in "
    )
    assert warning.endswith(
        "set model_profiles.answer.model to gpt-6.1-sol (the replacement "
        "OpenAI's deprecations page gives)"
    )
    assert len(fake.requests_to("GET", "/v1/models")) == 1
    # A second process on the same state, the same day: no second look.
    second = conftest.start(spawn, fake, "--stdio", "--debug", config=config, env=env)
    second.call("answer", {"query": "q"})
    wait_until(lambda: "retirements: " in second.stderr, 30, "the second process's decision")
    assert "retirements: not checked: checked today already" in second.stderr
    assert "shuts down" not in second.stderr
    assert len(fake.requests_to("GET", "/v1/models")) == 1


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="reads /proc/PID/maps")
def test_an_idle_server_looks_only_after_its_first_call_so_sqlite3_stays_unloaded(spawn, fake):
    """Issue 34: the look at initialize claimed the day in the state file, loading sqlite3
    (~1.6 MiB resident) into a server that may never be called. Now it waits for a call,
    which opens the state for its ledger row anyway."""
    env = {"OPENAI_CHECK_RETIREMENTS": "true"}
    config = "model_profiles:\n  answer: {model: gpt-5}\n"
    server = spawn("--stdio", "--debug", config=config, env=env, upstream=fake, cold=True)
    threads = proc_status(server.pid)["Threads"]  # before initialize: no warm-up thread yet
    server.initialize()
    maps = Path(f"/proc/{server.pid}/maps")
    wait_until(lambda: "pydantic_core" in maps.read_text(), 60, "the warm-up's openai import")
    # the warm-up's end, where the look used to start: its thread has gone
    wait_until(lambda: proc_status(server.pid)["Threads"] <= threads, 30, "the warm-up's end")
    assert "sqlite3" not in maps.read_text()
    assert fake.requests_to("GET", "/v1/models") == []
    assert "result" in server.call("answer", {"query": "q"})
    wait_until(lambda: "answer: gpt-5 shuts down" in server.stderr, 30, "the look after it")
    assert len(fake.requests_to("GET", "/v1/models")) == 1
    server.call("answer", {"query": "q"})  # once per start, not once per call
    time.sleep(0.5)  # sleep: the point: a window in which a second look would come
    assert len(fake.requests_to("GET", "/v1/models")) == 1


def test_a_server_with_the_check_off_never_lists_models(spawn, fake):
    config = "model_profiles:\n  answer: {model: gpt-5}\n"
    server = conftest.start(spawn, fake, "--stdio", "--debug", config=config)
    server.call("answer", {"query": "q"})
    wait_until(lambda: "retirements: " in server.stderr, 30, "the check's decision")
    assert "retirements: not checked: openai.check_retirements is false" in server.stderr
    assert fake.requests_to("GET", "/v1/models") == []
    assert "shuts down" not in server.stderr


def test_a_call_to_a_retired_model_fails_once_naming_the_key(spawn, fake):
    fake.enqueue(Reply(text="never served"))
    server = conftest.start(spawn, fake, config="model_profiles:\n  answer: {model: o4-mini}\n")
    message = conftest.failure_of(server.call("answer", {"query": "q"}))
    assert message == (
        "answer failed: model 'o4-mini' is not available to this API key (HTTP 404; it may "
        "have shut down: https://developers.openai.com/api/docs/deprecations): set "
        "model_profiles.answer.model to gpt-5.6-terra"
    )
    assert len(fake.creates) == 1  # no retries
    assert fake.queued == 1


def test_a_version_3_state_file_gains_the_checks_table_and_claims_once_a_day(tmp_path):
    import sqlite3

    import openai_responses_mcp as m

    path = tmp_path / "state.sqlite3"
    with sqlite3.connect(path) as conn:  # the file as version 3 made it: no checks table
        for statement in m._schema(postgres=False):
            if "checks" not in statement:
                conn.execute(statement)
        conn.execute("INSERT INTO schema_version (version) VALUES (3)")
    state = m.StateStore(m._SqliteBackend(str(path)), m.Log())
    try:
        assert m.claim_daily(state, "retirements", "2026-11-26") is True
        assert m.claim_daily(state, "retirements", "2026-11-26") is False  # same day
        assert m.claim_daily(state, "retirements", "2026-11-27") is True  # the next day
    finally:
        state.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT version FROM schema_version").fetchall() == [
            (m.STATE_SCHEMA_VERSION,)
        ]
        assert conn.execute("SELECT name, day FROM checks").fetchall() == [
            ("retirements", "2026-11-27")
        ]
    # With the state off, every process checks (once per start).
    assert m.claim_daily(m.StateStore(None, m.Log()), "retirements", "2026-11-26") is True
