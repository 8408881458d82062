"""Discounted background runs (model_profiles.<tool>.completion_window, issue 41): the request
goes with background and background_options, unstreamed, and is polled to its end; it is priced
at the window's discount everywhere; a refusal falls back to soonest at full price, once.

The server is spawned for real against the fake Responses API, which refuses windows as the
API does (tests/test_fake_upstream.py) and keeps a windowed run queued for a few polls.
"""

from __future__ import annotations

import json
import signal
import sqlite3

import pytest
from conftest import META, PRICES, TEST_KEY, base_env, cancel, failure_of, run_cli, send_call, start
from fake_upstream import Reply
from waiting import wait_until

import openai_responses_mcp as orm

USAGE = {
    "input_tokens": 10_000,
    "output_tokens": 2_000,
    "input_tokens_details": {"cached_tokens": 0},
}
WINDOWED = (
    PRICES
    + """\
model_profiles:
  answer:
    model: gpt-6.1-terra
  answer_detailed:
    model: gpt-6.1-terra
    completion_window: 8h
"""
)
KEY = "model_profiles.answer_detailed.completion_window"
HANDOFF = "openai-responses-mcp/handoff"


def modern_meta(tasks: bool = True) -> dict:
    caps = {"extensions": {"io.modelcontextprotocol/tasks": {}}} if tasks else {}
    return {**META, "io.modelcontextprotocol/clientCapabilities": caps}


def result_of(reply: dict) -> tuple[dict, dict]:
    assert "result" in reply, reply
    result = reply["result"]
    assert not result.get("isError"), result
    return json.loads(result["content"][0]["text"]), result["_meta"]


def polls(fake) -> list:
    return [r for r in fake.requests_to("GET", "/v1/responses/") if "stream=" not in r.path]


def test_an_8h_call_is_created_unstreamed_and_polled_to_its_discounted_answer(spawn, fake):
    fake.window_polls = 2
    fake.default = Reply(usage=USAGE)
    server = start(spawn, fake, config=WINDOWED)
    send_call(server, 9, tool="answer_detailed", _meta={"progressToken": "p"})
    reply, before = server.recv_until(lambda m: m.get("id") == 9, timeout=20)
    answer, meta = result_of(reply)
    said = [m["params"]["message"] for m in before if m.get("method") == "notifications/progress"]
    assert said[:2] == ["queued for the 8h window, 0 min so far"] * 2, said
    assert "running in the 8h window, 0 min so far" in said
    (create,) = fake.creates
    assert create.body["background"] is True
    assert create.body["background_options"] == {"completion_window": "8h"}
    assert create.body.get("stream") is not True
    assert len(polls(fake)) == 3  # queued, in progress, completed
    assert answer["answer"] and meta["window"] == "8h" and meta["background"] is True
    # The same usage at soonest, on the tool without a window: 40% less on every token part.
    soonest = result_of(server.call("answer", {"query": "q"}))[1]["cost"]
    cost = meta["cost"]
    for part in ("input_usd", "output_usd"):
        assert cost[part] == pytest.approx(soonest[part] * 0.6)
    assert cost["usd"] == pytest.approx(soonest["usd"] * 0.6)
    assert cost["prices"].endswith("x0.6 (8h window)")


def usage_report(tmp_path) -> dict:
    result = run_cli(tmp_path, "--usage", "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_the_ledger_and_usage_book_the_discounted_spend(spawn, fake, tmp_path):
    fake.window_polls = 0
    fake.default = Reply(usage=USAGE)
    server = start(spawn, fake, config=WINDOWED)
    cost = result_of(server.call("answer_detailed", {"query": "q"}))[1]["cost"]
    # gpt-6.1-terra at $2 / $10 per million (PRICES): 40% off both
    assert cost["usd"] == pytest.approx((10_000 * 2 + 2_000 * 10) / 1e6 * 0.6)

    def booked():  # the row is written after the reply; one --usage run per look
        report = usage_report(tmp_path)
        return report["total"]["calls"] and report

    report = wait_until(booked, 20, "the call's row")
    assert report["total"]["usd"] == pytest.approx(cost["usd"], abs=1e-6)


def test_cancelling_while_it_waits_in_its_window_cancels_it_upstream_and_books_nothing(
    spawn, fake, tmp_path
):
    fake.window_polls = 1000
    server = start(spawn, fake, config=WINDOWED)
    send_call(server, 5, tool="answer_detailed")
    fake.wait_until(lambda: polls(fake), timeout=15)
    cancel(server, 5)
    fake.wait_until(lambda: fake.cancels, timeout=10)
    (response_id,) = fake.background_ids
    assert fake.cancels[0].path == f"/v1/responses/{response_id}/cancel"
    assert fake.background_status(response_id) == "cancelled"
    wait_until(lambda: usage_report(tmp_path)["total"]["calls"], 10, "the cancelled call's row")
    assert usage_report(tmp_path)["total"]["usd"] == 0
    assert len(fake.creates) == 1


def polling_run_ending_before_its_cancel(spawn, fake):
    """A server whose call 5 (answer_detailed, 8h) is being polled; its run will have ended,
    billed USAGE, by the time a cancel reaches the fake."""
    fake.window_polls = 1000
    fake.windows_end_before_cancel = True
    fake.default = Reply(usage=USAGE)
    server = start(spawn, fake, config=WINDOWED)
    send_call(server, 5, tool="answer_detailed")
    fake.wait_until(lambda: polls(fake), timeout=15)
    return server


def test_a_run_that_ended_in_its_window_as_it_was_cancelled_is_booked(spawn, fake, tmp_path):
    """Polls come up to a minute apart: a run may end (and be billed) after the last poll and
    before the cancel reaches it. Its row books what it was billed, at the discount."""
    server = polling_run_ending_before_its_cancel(spawn, fake)
    cancel(server, 5)
    fake.wait_until(lambda: fake.cancels, timeout=10)
    wait_until(lambda: usage_report(tmp_path)["total"]["calls"], 10, "the cancelled call's row")
    billed = (10_000 * 2 + 2_000 * 10) / 1e6 * 0.6
    assert usage_report(tmp_path)["total"]["usd"] == pytest.approx(billed, abs=1e-6)


def test_a_stop_signal_mid_poll_cancels_the_run_upstream_and_books_what_it_was_billed(
    spawn, fake, tmp_path
):
    """(At the end of stdin alone, a call answering inline is awaited, as any: long-calls.md.)"""
    server = polling_run_ending_before_its_cancel(spawn, fake)
    server.proc.send_signal(signal.SIGTERM)
    assert server.wait(15) == 0
    assert len(fake.cancels) == 1
    billed = (10_000 * 2 + 2_000 * 10) / 1e6 * 0.6
    assert usage_report(tmp_path)["total"]["usd"] == pytest.approx(billed, abs=1e-6)


def test_an_http_server_stopped_mid_window_books_what_its_cancelled_run_was_billed(
    spawn, fake, tmp_path
):
    """(issue 41) SIGTERM on an HTTP server past drain_s cancels its windowed handoff upstream;
    the run had ended (billed) before the cancel reached it. The row of such a call waits for
    the cancel's last look, and the HTTP server closed its ledger before then: no row, the
    spend unbooked and the call's reservation held for its window. Now it is booked, at the
    discount, and the reservation settled, as a stdio server does."""
    from http_client import open_session, post, rpc, wait_listening

    fake.window_polls = 1000
    fake.windows_end_before_cancel = True
    fake.default = Reply(usage=USAGE)
    config = WINDOWED + "budget:\n  daily_usd: 50\nrequest:\n  handoff_after_s: 1\n"
    config += "server:\n  http:\n    lameduck_s: 0\n    drain_s: 1\n"
    server = spawn("--http", "127.0.0.1:0", config=config, upstream=fake)
    port = wait_listening(server)
    session = open_session(port)
    handed = post(port, rpc("tools/call", windowed_call(), id=7), session=session, timeout=30)
    assert handed.status == 200 and b"answer_result" in handed.body, handed.body
    fake.wait_until(lambda: polls(fake), timeout=15)
    server.proc.send_signal(signal.SIGTERM)
    assert server.wait(30) == 0, server.stderr
    assert len(fake.cancels) == 1
    billed = (10_000 * 2 + 2_000 * 10) / 1e6 * 0.6
    assert usage_report(tmp_path)["total"]["usd"] == pytest.approx(billed, abs=1e-6)
    path = tmp_path / "xdg-state" / "openai-responses-mcp" / "state.sqlite3"
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT COUNT(*) FROM reservations").fetchone() == (0,)


def test_a_refused_window_falls_back_to_soonest_at_full_price_with_one_warning(spawn, fake):
    fake.refuse_windows = True
    fake.default = Reply(usage=USAGE)
    server = start(spawn, fake, config=WINDOWED)
    first = result_of(server.call("answer_detailed", {"query": "q"}))[1]
    second = result_of(server.call("answer_detailed", {"query": "again"}))[1]
    refused, fallback, later = fake.creates
    assert refused.body["background_options"] == {"completion_window": "8h"}
    for create in (fallback, later):  # today's path: background, streamed, no window
        assert "background_options" not in create.body and create.body["stream"] is True
    assert "window" not in first and "window" not in second
    full = first["cost"]
    assert "window" not in full["prices"] and full["usd"] == second["cost"]["usd"]
    wait_until(lambda: KEY in server.stderr, 5, lambda: server.stderr)
    assert server.stderr.count("refused a completion window") == 1, server.stderr
    assert server.stderr.count(KEY) == 1


def test_a_zdr_refusal_of_background_itself_turns_background_off_for_a_windowed_call(spawn, fake):
    fake.refuse_background = True
    server = start(spawn, fake, config=WINDOWED)
    result_of(server.call("answer_detailed", {"query": "q"}))
    refused, plain = fake.creates
    assert refused.body["background"] is True and "background_options" in refused.body
    assert "background" not in plain.body and plain.body["stream"] is True
    assert "refused background mode" in server.stderr


DEEP_WINDOWED = """\
tools:
  answer_deep: true
model_profiles:
  answer_deep:
    completion_window: 8h
"""


def test_a_zdr_refusal_of_a_windowed_deep_research_run_says_it_needs_background(spawn, fake):
    fake.refuse_background = True
    server = start(spawn, fake, config=DEEP_WINDOWED)
    reply = server.call("answer_deep", {"query": "q"})
    assert "answer_deep runs only in background mode" in failure_of(reply)
    assert len(fake.creates) == 1


# -- the engine: the call's own window, the budget's estimate --------------------------------


@pytest.fixture
def engine(tmp_path, fake, monkeypatch):
    return make_engine(tmp_path, fake, monkeypatch)


def make_engine(tmp_path, fake, monkeypatch, profiles: str = ""):
    monkeypatch.setenv("OPENAI_API_KEY", TEST_KEY)
    (tmp_path / "c.yaml").write_text(
        PRICES + "model_profiles:\n  answer:\n    model: gpt-6.1-terra\n" + profiles
    )
    env = base_env(tmp_path, OPENAI_BASE_URL=fake.base_url)
    config = orm.load_config({"config": str(tmp_path / "c.yaml")}, env)
    config.instructions = orm.build_instructions(config)
    return orm.build_engine(config, orm.Log())


def test_a_calls_own_window_is_sent_over_its_profiles_soonest(engine, fake):
    fake.window_polls = 0
    call = orm.Call(1, "answer")
    call.window = "2h"  # the cost question's run_discounted
    _, meta = engine.answer("answer", {"query": "q"}, call)
    (create,) = fake.creates
    assert create.body["background_options"] == {"completion_window": "2h"}
    assert meta["window"] == "2h" and meta["cost"]["prices"].endswith("x0.7 (2h window)")
    plain = engine.answer("answer", {"query": "again"}, orm.Call(2, "answer"))
    assert "background_options" not in fake.creates[1].body and "window" not in plain[1]


def test_no_window_is_asked_for_a_request_off_standard_processing(engine, fake):
    chosen = "8h"  # the person's (Call.window)
    request = {"model": "gpt-6.1-terra", "service_tier": "flex"}
    assert engine.background.window("answer", chosen, request) is None
    assert engine.background.window("answer", chosen, {**request, "service_tier": "auto"}) == "8h"
    assert not engine.background.windows_open(request)
    engine.background.windows_off = True  # refused once: no window for the rest of the process
    assert engine.background.window("answer", chosen, {**request, "service_tier": "auto"}) is None


def test_the_estimate_takes_the_discount_once_the_api_has_taken_a_window(engine, fake):
    background = engine.background
    assert background.estimate_window("8h", "m") is None  # a refusal would bill it in full
    background.windows_seen.add(("m", "8h"))
    assert background.estimate_window("8h", "m") == "8h"
    background.windows_off = True
    assert background.estimate_window("8h", "m") is None


def test_the_budget_estimate_of_a_windowed_call_is_at_its_discount(engine):
    request = {"model": "gpt-6.1-terra", "input": "x" * 30_000, "instructions": ""}
    full = orm.CallEstimator(engine.pricing, request, {})(0.0, 0)
    two = orm.CallEstimator(engine.pricing, request, {}, window="2h")(0.0, 0)
    eight = orm.CallEstimator(engine.pricing, request, {}, window="8h")(0.0, 0)
    assert two == pytest.approx(full * 0.7) and eight == pytest.approx(full * 0.6)
    # The typical cost is the ledger's, booked at what each call was billed: kept as it is.
    assert orm.CallEstimator(engine.pricing, request, {}, window="8h")(0.5, 0) == pytest.approx(
        eight + 0.5
    )


def test_the_discount_is_on_tokens_only_and_only_on_standard_processing(engine):
    usage = {"input_tokens": 1_000_000, "output_tokens": 1_000_000}
    cost = engine.pricing.cost("gpt-6.1-terra", usage, 1000, "default", "8h")
    full = engine.pricing.cost("gpt-6.1-terra", usage, 1000, "default")
    assert cost["web_search_usd"] == full["web_search_usd"] == 25.0
    assert cost["input_usd"] == pytest.approx(full["input_usd"] * 0.6)
    assert cost["output_usd"] == pytest.approx(full["output_usd"] * 0.6)
    flex = engine.pricing.cost("gpt-6.1-terra", usage, 0, "flex", "8h")
    assert flex["usd"] == engine.pricing.cost("gpt-6.1-terra", usage, 0, "flex")["usd"]


def test_a_window_and_a_tier_other_than_standard_are_refused_at_start_up(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(
        "model_profiles:\n  answer:\n    service_tier: flex\n"
        "  answer_detailed:\n    completion_window: 2h\n"
    )
    with pytest.raises(orm.ConfigError) as caught:
        orm.load_config({"config": str(path)}, base_env(tmp_path))
    message = str(caught.value)
    assert "model_profiles.answer_detailed.completion_window = 2h" in message
    assert "model_profiles.answer.service_tier = flex" in message and "\n" not in message
    result = run_cli(tmp_path, "--show-config", "--config", str(path))
    assert result.returncode == 2 and "completion_window" in result.stderr


# -- long calls: a task or a handoff, collected by polling ------------------------------------

TASKS = (
    WINDOWED
    + """\
server:
  tasks:
    immediate_ms: 300
    poll_interval_ms: 100
request:
  handoff_after_s: 1
"""
)
WINDOW_TTL_MS = (8 * 3600 + orm.WINDOW_MARGIN_S) * 1000  # the task outlives the window


def windowed_call(**params) -> dict:
    return {"name": "answer_detailed", "arguments": {"query": "a long question"}, **params}


def test_a_windowed_call_becomes_a_2025_task_collected_when_polled_to_its_end(spawn, fake):
    fake.window_polls = 2
    server = spawn(config=TASKS, upstream=fake)
    server.initialize("2025-11-25")
    created = server.request("tools/call", windowed_call(task={}))["result"]["task"]
    assert created["status"] == "working" and created["ttl"] == WINDOW_TTL_MS
    reply = server.request("tasks/result", {"taskId": created["taskId"]}, timeout=20)
    assert reply["result"]["structuredContent"]["answer"]
    assert reply["result"]["_meta"]["window"] == "8h"
    assert len(fake.creates) == 1 and len(polls(fake)) == 3


def test_a_windowed_call_becomes_an_extension_task(spawn, fake):
    fake.window_polls = 2
    server = spawn(config=TASKS, upstream=fake)
    server.initialize("2025-11-25")
    created = server.request("tools/call", windowed_call(_meta=modern_meta()))["result"]
    assert created["resultType"] == "task" and created["ttlMs"] == WINDOW_TTL_MS

    def ended() -> dict | None:
        got = server.request("tasks/get", {"taskId": created["taskId"], "_meta": modern_meta()})
        return got["result"] if got["result"]["status"] != "working" else None

    done = wait_until(ended, 20, "the task to end")
    assert done["status"] == "completed" and done["result"]["_meta"]["window"] == "8h"


def test_a_windowed_call_is_handed_off_to_a_client_without_tasks(spawn, fake):
    fake.window_polls = 2
    server = spawn(config=TASKS, upstream=fake)
    server.initialize("2025-11-25")
    first = server.request("tools/call", windowed_call(_meta=modern_meta(tasks=False)))
    handoff = first["result"]["_meta"][HANDOFF]
    assert handoff["status"] == "working"

    def collected() -> dict | None:
        arguments = {"id": handoff["id"], "wait_s": 5}
        params = {"name": "answer_result", "arguments": arguments, "_meta": modern_meta(False)}
        reply = server.request("tools/call", params, timeout=20)["result"]
        return reply if reply["_meta"][HANDOFF]["status"] == "completed" else None

    reply = wait_until(collected, 30, "the handed-off answer")
    assert reply["structuredContent"]["answer"] and reply["_meta"]["window"] == "8h"


def test_a_windowed_calls_reservation_outlives_its_window(engine):
    spending = engine.spending
    assert spending._reservation_ttl("answer") == 3600  # soonest: at least an hour, as always
    for window, hours in (("2h", 2), ("8h", 8)):
        assert spending._reservation_ttl("answer", window) > hours * 3600 + orm.WINDOW_MARGIN_S


def test_polls_that_fail_now_and_then_over_a_long_wait_do_not_end_the_run(spawn, fake):
    """Each failed poll is retried; only failures in a row count against request.max_retries
    (0 here), so two failures hours apart do not end a run that answered in between."""
    fake.window_polls = 4
    fake.failing_polls = {2, 4}  # every other poll, none twice in a row
    server = start(spawn, fake, config=WINDOWED + "request:\n  max_retries: 0\n")
    _, meta = result_of(server.call("answer_detailed", {"query": "q"}, timeout=30))
    assert meta["window"] == "8h" and len(fake.creates) == 1
    assert len(polls(fake)) == 7  # five answered (queued, in progress x3, completed), two failed


def test_polls_failing_in_a_row_are_retried_until_the_window_ends(spawn, fake):
    """A run waits hours upstream: three polls failing in a row (past request.max_retries, 0
    here) are retried further apart each time, and the run is collected, not cancelled."""
    fake.window_polls = 2
    fake.failing_polls = {2, 3, 4}
    server = start(spawn, fake, config=WINDOWED + "request:\n  max_retries: 0\n")
    _, meta = result_of(server.call("answer_detailed", {"query": "q"}, timeout=30))
    assert meta["window"] == "8h" and len(fake.creates) == 1
    assert not [r for r in fake.requests if r.path.endswith("/cancel")]


def spy_admissions(engine, monkeypatch) -> list:
    """The (window, priced) each admission of the engine was given."""
    admitted = []
    admit = engine.spending.admit

    def spy(tool, request, today, hold, user, args, window=None, priced=None, billed=None):
        admitted.append((window, priced))
        return admit(tool, request, today, hold, user, args, window, priced, billed)

    monkeypatch.setattr(engine.spending, "admit", spy)
    return admitted


def test_a_call_is_admitted_at_full_price_until_a_window_was_taken_then_at_its_discount(
    engine, fake, monkeypatch
):
    admitted = spy_admissions(engine, monkeypatch)
    fake.window_polls = 0
    for query in ("first", "second"):
        call = orm.Call(query, "answer")
        call.window = "8h"
        engine.answer("answer", {"query": query}, call)
    # Its reservation outlives the window both times; the estimate is discounted only once
    # the API has taken a window (before, a refusal would bill the fallback in full).
    assert admitted == [("8h", None), ("8h", "8h")]


# -- what was billed: a window taken is one the API said it took (issue 41 review) -----------


def test_a_gateway_that_drops_the_window_unsaid_is_booked_at_full_price(spawn, fake):
    """A gateway that drops background and background_options answers a plain response, billed
    in full: neither the answer nor the ledger may book the discount it never got."""
    fake.ignore_windows = True
    fake.default = Reply(usage=USAGE)
    server = start(spawn, fake, config=WINDOWED)
    _, meta = result_of(server.call("answer_detailed", {"query": "q"}))
    (create,) = fake.creates
    assert create.body["background_options"] == {"completion_window": "8h"}  # it was asked
    assert "window" not in meta and "window" not in meta["cost"]["prices"]
    assert meta["cost"]["usd"] == pytest.approx((10_000 * 2 + 2_000 * 10) / 1e6)


def test_a_window_dropped_unsaid_never_discounts_an_estimate(engine, fake, monkeypatch):
    admitted = spy_admissions(engine, monkeypatch)
    fake.ignore_windows = True
    for query in ("first", "second"):
        call = orm.Call(query, "answer")
        call.window = "8h"
        _, meta = engine.answer("answer", {"query": query}, call)
        assert "window" not in meta
    assert admitted == [("8h", None), ("8h", None)]


def test_a_window_taken_for_one_model_does_not_discount_another_models_estimate(
    tmp_path, fake, monkeypatch
):
    """The API takes windows model by model: one refused after another model's was taken runs
    at soonest, billed in full, so its estimate must have been in full too."""
    other = "  answer_detailed:\n    model: gpt-6.2-sol\n    completion_window: 8h\n"
    engine = make_engine(tmp_path, fake, monkeypatch, other)
    admitted = spy_admissions(engine, monkeypatch)
    fake.window_polls = 0
    first = orm.Call(1, "answer")  # gpt-6.1-terra
    first.window = "8h"
    assert engine.answer("answer", {"query": "q"}, first)[1]["window"] == "8h"
    fake.refuse_windows = True  # gpt-6.2-sol's is refused
    second = orm.Call(2, "answer_detailed")  # its profile's window (a person's is not run)
    assert "window" not in engine.answer("answer_detailed", {"query": "q"}, second)[1]
    assert admitted == [("8h", None), ("8h", None)]


def test_an_8h_window_taken_does_not_discount_a_2h_estimate(engine, fake, monkeypatch):
    admitted = spy_admissions(engine, monkeypatch)
    fake.window_polls = 0
    for number, window in enumerate(("8h", "2h", "2h")):
        call = orm.Call(number, "answer")
        call.window = window
        engine.answer("answer", {"query": f"q{number}"}, call)
    assert admitted == [("8h", None), ("2h", None), ("2h", "2h")]


def test_a_run_past_its_window_says_so_and_is_cancelled(tmp_path, fake, monkeypatch):
    """Past its window (and the margin) a run ends as any call out of time, cancelled upstream,
    but the person is told of the window, not of request.timeout_ms, which bounds only each
    poll: raising it would change nothing. (A window of a second here, for the test's sake.)"""
    monkeypatch.setattr(orm, "WINDOW_SECONDS", {"2h": 1, "8h": 1})
    monkeypatch.setattr(orm, "WINDOW_MARGIN_S", 0)
    engine = make_engine(tmp_path, fake, monkeypatch, "request:\n  timeout_ms: 1000\n")
    fake.window_polls = 1000
    call = orm.Call(1, "answer")
    call.window = "8h"
    with pytest.raises(orm.ToolError) as caught:
        engine.answer("answer", {"query": "q"}, call)
    message = str(caught.value)
    assert "8h completion window" in message and "request.timeout_ms" not in message, message
    assert "model_profiles.answer.completion_window" in message
    fake.wait_until(lambda: fake.cancels, timeout=10)


def test_a_windowed_profiles_calls_are_reserved_as_billed_not_discounted_again(
    tmp_path, fake, monkeypatch
):
    """The ledger books a windowed profile's calls at its discount already: admission takes
    them as billed, and discounts only what a call brings (issue 41: where the cost question's
    discounted runs meet the budget)."""
    profile = "    completion_window: 8h\nbudget:\n  daily_usd: 100\n"
    engine = make_engine(tmp_path, fake, monkeypatch, profile)
    estimates = []
    reserve = engine.spending.ledger.reserve

    def spy(*args, **kwargs):
        found = reserve(*args, **kwargs)
        estimates.append(found[1])
        return found

    monkeypatch.setattr(engine.spending.ledger, "reserve", spy)
    fake.window_polls = 0
    fake.default = Reply(usage={**USAGE, "input_tokens": 100_000, "output_tokens": 20_000})
    first = engine.answer("answer", {"query": "first"}, orm.Call(1, "answer"))[1]
    assert first["window"] == "8h" and first["cost"]["usd"] == pytest.approx(0.24)
    wait_until(lambda: engine.spending.ledger.recent("answer", "gpt-6.1-terra"), 10, "the row")
    engine.answer("answer", {"query": "second"}, orm.Call(2, "answer"))
    assert estimates[1] >= 0.24, estimates  # the $0.24 it was billed, not $0.15
