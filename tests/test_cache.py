"""The answer cache (same SQLite file as the ledger) and single-flight: a repeated question
costs nothing, across processes, until it expires; identical calls in flight share a request."""

from __future__ import annotations

import json
import sqlite3
import threading
import time

import conftest
import pytest
from conftest import cancel, run_cli, send_call, wait_until
from fake_upstream import Reply

import openai_responses_mcp as m

CACHE_ON = {"ANSWER_CACHE_TTL_S": "600"}


def start(spawn, fake, config: str | None = None, env: dict | None = None):
    return conftest.start(spawn, fake, config=config, env={**CACHE_ON, **(env or {})})


def result_of(reply: dict) -> tuple[dict, dict]:
    assert "result" in reply, reply
    result = reply["result"]
    return json.loads(result["content"][0]["text"]), result["_meta"]


def test_a_repeated_question_is_answered_from_the_cache_at_no_cost(spawn, fake):
    server = start(spawn, fake)
    first, first_meta = result_of(server.call("answer", {"query": "What is HTTP 404?"}))
    again, meta = result_of(server.call("answer", {"query": "\n  What is HTTP 404?\t "}))
    assert again == first
    assert len(fake.requests) == 1
    assert first_meta["cache"] == {"hit": False}
    assert meta["cache"]["hit"] is True and meta["cache"]["age_s"] >= 0
    assert meta["cost"]["usd"] == 0
    assert meta["response_id"] == first_meta["response_id"]


@pytest.mark.parametrize(
    "other",
    [
        {"recency_days": 7},
        {"max_results": 9},
        {"domains": ["example.com"]},
        {"query": "What is HTTP 410?"},
    ],
)
def test_different_hints_or_question_miss(spawn, fake, other):
    server = start(spawn, fake)
    result_of(server.call("answer", {"query": "What is HTTP 404?"}))
    result_of(server.call("answer", {"query": "What is HTTP 404?", **other}))
    assert len(fake.requests) == 2


# Questions a coding agent asks that differ only in case or inner whitespace, which are meaning.
DIFFERENT_QUESTIONS = [
    ("What does grep -i do?", "What does grep -I do?"),
    ("Why is `x == None` false here?", "Why is `x == none` false here?"),
    ("Is this valid?\nif x:\n    y()\n  z()", "Is this valid?\nif x:\n    y()\n    z()"),
    ("What is  a  b?", "What is a b?"),
]


def test_questions_differing_in_case_or_inner_whitespace_each_get_their_own_answer(spawn, fake):
    server = start(spawn, fake)
    for number, pair in enumerate(DIFFERENT_QUESTIONS):
        for side, query in enumerate(pair):
            fake.enqueue(Reply(text=f"Answer {number}.{side}."))
            answer, meta = result_of(server.call("answer", {"query": query}))
            assert answer["answer"] == f"Answer {number}.{side}.", query
            assert meta["cache"] == {"hit": False}, query
    assert len(fake.requests) == 2 * len(DIFFERENT_QUESTIONS)
    # Each is still a hit for itself.
    for pair in DIFFERENT_QUESTIONS:
        for query in pair:
            _, meta = result_of(server.call("answer", {"query": query}))
            assert meta["cache"]["hit"] is True, query
    assert len(fake.requests) == 2 * len(DIFFERENT_QUESTIONS)


def test_another_tool_misses(spawn, fake):
    server = start(spawn, fake)
    result_of(server.call("answer", {"query": "q"}))
    result_of(server.call("answer_quick", {"query": "q"}))
    assert len(fake.requests) == 2


def test_fresh_bypasses_the_cache_and_refreshes_it(spawn, fake):
    server = start(spawn, fake)
    result_of(server.call("answer", {"query": "q"}))
    fake.enqueue(Reply(text="A newer answer."))
    newer, meta = result_of(server.call("answer", {"query": "q", "fresh": True}))
    assert len(fake.requests) == 2 and meta["cache"] == {"hit": False}
    cached, meta = result_of(server.call("answer", {"query": "q"}))
    assert meta["cache"]["hit"] is True and cached == newer


def test_fresh_must_be_a_boolean(spawn, fake):
    reply = start(spawn, fake).call("answer", {"query": "q", "fresh": "yes"})
    assert reply["error"]["code"] == -32602
    assert "'fresh' must be true or false" in reply["error"]["message"]


def test_failures_and_cut_answers_are_not_cached(spawn, fake):
    server = start(spawn, fake, config="request: {max_retries: 0}\n")
    fake.enqueue(Reply(status=500), Reply(incomplete=True, text="Half an"))
    assert "error" in server.call("answer", {"query": "q"})
    result_of(server.call("answer", {"query": "q"}))  # incomplete, with text: answered
    result_of(server.call("answer", {"query": "q"}))
    assert len(fake.requests) == 3


def test_a_hit_works_across_processes_sharing_the_state_file(spawn, fake, tmp_path):
    first, _ = result_of(start(spawn, fake).call("answer", {"query": "q"}))
    wait_for_entry(tmp_path)
    again, meta = result_of(start(spawn, fake).call("answer", {"query": "q"}))
    assert again == first and meta["cache"]["hit"] is True
    assert len(fake.requests) == 1


def test_another_max_citations_misses(spawn, fake):
    # The stored answer was cut to the first process's citation count; another count must not
    # be served it.
    result_of(start(spawn, fake).call("answer", {"query": "q"}))
    _, meta = result_of(
        start(spawn, fake, env={"MAX_CITATIONS": "1"}).call("answer", {"query": "q"})
    )
    assert meta["cache"] == {"hit": False}
    assert len(fake.requests) == 2


def test_entries_expire_after_ttl(spawn, fake):
    server = start(spawn, fake, env={"ANSWER_CACHE_TTL_S": "1"})
    result_of(server.call("answer", {"query": "q"}))
    time.sleep(1.1)  # sleep: the point: a lower bound on age, not an assumption about speed
    _, meta = result_of(server.call("answer", {"query": "q"}))
    assert meta["cache"] == {"hit": False}
    assert len(fake.requests) == 2


def test_max_entries_drops_the_oldest(spawn, fake):
    server = start(spawn, fake, config="cache: {max_entries: 2}\n")
    for query in ("one", "two", "three", "three", "two", "one"):
        result_of(server.call("answer", {"query": query}))
    # "one" was dropped when "three" came; "two" and "three" were still there.
    assert len(fake.requests) == 4


def test_the_cache_off_means_no_fresh_argument_and_no_reuse(spawn, fake):
    server = start(spawn, fake, env={"ANSWER_CACHE_TTL_S": "0"})
    tools = server.request("tools/list")["result"]["tools"]
    assert all("fresh" not in tool["inputSchema"]["properties"] for tool in tools)
    result_of(server.call("answer", {"query": "q"}))
    _, meta = result_of(server.call("answer", {"query": "q"}))
    assert "cache" not in meta and len(fake.requests) == 2


def test_fresh_is_offered_when_the_cache_is_on(spawn, fake):
    tools = start(spawn, fake).request("tools/list")["result"]["tools"]
    for tool in tools:
        assert tool["inputSchema"]["properties"]["fresh"]["type"] == "boolean"


def test_the_state_file_never_holds_the_query(spawn, fake, tmp_path):
    query = "a very distinctive question about zebras"
    server = start(spawn, fake)
    result_of(server.call("answer", {"query": query}))
    result_of(server.call("answer", {"query": query}))
    server.close_stdin()
    server.wait()
    files = list((tmp_path / "xdg-state").rglob("state.sqlite3*"))
    assert files
    for path in files:
        assert b"zebras" not in path.read_bytes()


def test_usage_counts_cache_hits(spawn, fake, tmp_path):
    server = start(spawn, fake)
    for _ in range(3):
        result_of(server.call("answer", {"query": "q"}))
    # Each row is written after its reply, off the answer path.
    wait_until(lambda: rows(state_file(tmp_path), "usage") == 3, 20, "three rows")
    report = json.loads(run_cli(tmp_path, "--usage", "--json").stdout)
    assert report["total"]["calls"] == 3 and report["total"]["cache_hits"] == 2


# -- Single flight ------------------------------------------------------------------------------


def two_callers(spawn, fake, reply: Reply):
    """A server with calls "a" and "b" for the same question, "b" joined to "a"'s request."""
    server = spawn("--stdio", "--debug", env={"ANSWER_CACHE_TTL_S": "0"}, upstream=fake)
    server.initialize()
    fake.enqueue(reply)
    send_call(server, "a")
    fake.wait_for_requests(1, timeout=20)
    send_call(server, "b")
    wait_until(lambda: "joined an identical call" in server.stderr, 20, "b to join")
    return server


def test_identical_concurrent_calls_make_one_request(spawn, fake):
    server = two_callers(spawn, fake, Reply(stall_after_events=3, stall_seconds=4))
    replies = {}
    while len(replies) < 2:
        message = server.recv(timeout=30)
        if message.get("id") in ("a", "b"):
            replies[message["id"]] = message
    first, meta_a = result_of(replies["a"])
    second, meta_b = result_of(replies["b"])
    assert first == second
    assert len(fake.requests) == 1
    assert meta_b["shared"] is True and meta_b["cost"]["usd"] == 0
    assert meta_a["cost"]["usd"] > 0


def test_cancelling_one_caller_leaves_the_other_its_answer(spawn, fake):
    server = two_callers(spawn, fake, Reply(stall_after_events=3, stall_seconds=4))
    cancel(server, "a")
    reply, before = server.recv_until(lambda msg: msg.get("id") == "b", timeout=30)
    result_of(reply)
    assert all(msg.get("id") != "a" for msg in before)
    assert server.nothing_within(0.5)  # nothing ever comes for the cancelled "a"
    assert len(fake.requests) == 1
    assert fake.requests[0].client_disconnected_at is None


def test_the_request_is_cancelled_when_every_caller_has_gone(spawn, fake):
    server = two_callers(spawn, fake, Reply(stall_after_events=3))
    cancel(server, "a")
    cancel(server, "b")
    fake.wait_for_disconnect(0, timeout=20)
    assert server.nothing_within(0.5)


def test_a_call_does_not_join_a_request_whose_every_caller_has_gone(tmp_path):
    """The request of a cancelled call winds down for a moment after its last caller left; an
    identical call that came then joined it and failed with "the identical call this one
    joined was cancelled; retry" (seen when a test asked the question a cancelled one had)."""
    flights = m.SingleFlight(m.Log())
    upstreams, wound_down = [], threading.Event()

    def cancelled_slowly(upstream):
        upstreams.append(upstream)
        upstream.cancelled.wait(30)
        wound_down.wait(30)
        raise m.Cancelled()

    first = m.Call("a", "answer")
    ended = []

    def ask_first() -> None:
        with pytest.raises(m.Cancelled):
            flights.run("k", first, cancelled_slowly)
        ended.append(True)

    old = threading.Thread(target=ask_first)
    old.start()
    wait_until(lambda: upstreams, 10, "the first request")
    first.cancel()  # its only caller: the request is cancelled, and is still winding down
    assert upstreams[0].cancelled.is_set()
    threading.Timer(2, wound_down.set).start()  # before the fix, "b" waited for this, then failed
    in_flight, go = threading.Event(), threading.Event()

    def answered(upstream):
        in_flight.set()
        go.wait(30)
        return "an answer"

    second = m.Call("b", "answer")
    got = []
    new = threading.Thread(target=lambda: got.append(flights.run("k", second, answered)))
    new.start()
    assert in_flight.wait(10)  # a request of its own (before: none, and Cancelled at 2 s)
    wound_down.set()
    old.join(10)
    assert ended and flights.in_flight() == 1  # the old one's end left the new one listed
    go.set()
    new.join(10)
    assert got == [("an answer", False)]


def test_calls_differing_only_in_case_in_flight_at_once_make_their_own_requests(spawn, fake):
    server = spawn("--stdio", "--debug", env={"ANSWER_CACHE_TTL_S": "0"}, upstream=fake)
    server.initialize()
    fake.enqueue(
        Reply(text="About -i.", stall_after_events=3, stall_seconds=2), Reply(text="About -I.")
    )
    send_call(server, "a", query="What does grep -i do?")
    fake.wait_for_requests(1, timeout=20)
    send_call(server, "b", query="What does grep -I do?")
    fake.wait_for_requests(2, timeout=20)  # "a" is still stalled: "b" did not join it
    replies = {}
    while len(replies) < 2:
        message = server.recv(timeout=30)
        if message.get("id") in ("a", "b"):
            replies[message["id"]] = result_of(message)
    assert replies["a"][0]["answer"] == "About -i."
    assert replies["b"][0]["answer"] == "About -I."
    assert "shared" not in replies["b"][1]
    assert "joined an identical call" not in server.stderr


def test_a_follow_up_is_never_answered_from_the_cache_of_the_same_question_asked_alone(spawn, fake):
    server = start(spawn, fake)
    alone, _ = result_of(server.call("answer", {"query": "And 410?"}))
    follow = {"query": "And 410?", "previous_response_id": alone["response_id"]}
    continued, meta = result_of(server.call("answer", follow))
    assert meta["cache"] == {"hit": False} and len(fake.creates) == 2
    assert fake.creates[1].body["previous_response_id"] == alone["response_id"]
    again, meta = result_of(server.call("answer", follow))  # the same follow-up: that one's
    assert meta["cache"]["hit"] is True and again == continued


# -- Whose answer: endpoint and account ---------------------------------------------------------


def test_another_api_key_misses(spawn, fake, tmp_path):
    result_of(start(spawn, fake).call("answer", {"query": "q"}))
    wait_for_entry(tmp_path)
    other = start(spawn, fake, env={"OPENAI_API_KEY": "sk-another-account-0123456789"})
    _, meta = result_of(other.call("answer", {"query": "q"}))
    assert meta["cache"] == {"hit": False}
    assert len(fake.requests) == 2


def test_another_endpoint_misses(spawn, fake, tmp_path):
    result_of(start(spawn, fake).call("answer", {"query": "q"}))
    wait_for_entry(tmp_path)
    # The same fake by another name: another endpoint as far as the cache can tell.
    elsewhere = fake.base_url.replace("127.0.0.1", "localhost")
    _, meta = result_of(
        start(spawn, fake, env={"OPENAI_BASE_URL": elsewhere}).call("answer", {"query": "q"})
    )
    assert meta["cache"] == {"hit": False}
    assert len(fake.requests) == 2


def test_the_key_itself_is_never_in_the_state_file(spawn, fake, tmp_path):
    server = start(spawn, fake)
    result_of(server.call("answer", {"query": "q"}))
    server.close_stdin()
    server.wait()
    for path in (tmp_path / "xdg-state").rglob("state.sqlite3*"):
        assert conftest.TEST_KEY.encode() not in path.read_bytes()


# -- Damaged or foreign rows ------------------------------------------------------------------


def state_file(tmp_path):
    return tmp_path / "xdg-state" / "openai-responses-mcp" / "state.sqlite3"


def wait_for_entry(tmp_path) -> None:
    """The writer thread stores an answer a moment after its reply."""
    wait_until(lambda: rows(state_file(tmp_path), "answers") > 0, 10, "the cache entry")


def damage_rows(tmp_path, body: str) -> None:
    wait_for_entry(tmp_path)
    with sqlite3.connect(state_file(tmp_path)) as conn:
        conn.execute("UPDATE answers SET body = ?", (body,))


def rows(path, table: str) -> int:
    try:
        with sqlite3.connect(path) as conn:
            return conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
    except sqlite3.OperationalError:
        return 0


@pytest.mark.parametrize(
    "body",
    [
        '{"answer": 1}',
        "not json",
        # what the previous version stored: no format
        '{"answer": {"answer": "a", "citations": [], "used_search": true, "model": "m"}}',
        '{"format": 2, "answer": {"answer": "a", "citations": [7], "used_search": true, '
        '"model": "m"}, "response_id": null}',
    ],
)
def test_a_row_of_another_shape_is_a_miss_and_is_replaced(spawn, fake, tmp_path, body):
    result_of(start(spawn, fake).call("answer", {"query": "q"}))
    damage_rows(tmp_path, body)
    server = start(spawn, fake)
    _, meta = result_of(server.call("answer", {"query": "q"}))
    assert meta["cache"] == {"hit": False}
    _, meta = result_of(server.call("answer", {"query": "q"}))
    assert meta["cache"]["hit"] is True  # the good answer took the damaged row's place
    assert len(fake.requests) == 2


def test_ask_with_a_damaged_row_answers_without_a_traceback(spawn, fake, tmp_path):
    result_of(start(spawn, fake).call("answer", {"query": "q"}))
    damage_rows(tmp_path, '{"answer": 1}')
    env = {**CACHE_ON, "OPENAI_BASE_URL": fake.base_url}
    result = run_cli(tmp_path, "--ask", "q", env=env)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert json.loads(result.stdout)["_meta"]["cache"] == {"hit": False}


def test_cached_body_accepts_only_this_versions_shape():
    import openai_responses_mcp as m

    answer = {"answer": "a", "citations": [{"url": "https://x.org"}], "used_search": True}
    good = {"format": m.ANSWER_FORMAT, "answer": {**answer, "model": "m"}, "response_id": "r"}
    assert m.cached_body(json.dumps(good)) == good
    assert m.cached_body(json.dumps({**good, "format": m.ANSWER_FORMAT + 1})) is None
    assert m.cached_body(json.dumps({**good, "response_id": 5})) is None
    assert m.cached_body(json.dumps({**good, "answer": answer})) is None  # no model
    assert m.cached_body(json.dumps([good])) is None
    assert m.cached_body(None) is None


def test_entries_not_written_yet_are_hit_and_evicted_as_stored_ones(tmp_path):
    import openai_responses_mcp as m

    state = m.StateStore(m._SqliteBackend(str(tmp_path / "s.db")), m.Log())
    cache = m.AnswerCache(state, 600, 2)
    answer = {"answer": "a", "citations": [], "used_search": False, "model": "m"}
    state._writer._channel._lock.acquire()  # the writer is stuck: nothing is stored yet
    try:
        for key in ("one", "two", "three"):
            cache.put(key, answer, None)
            time.sleep(0.002)  # sleep: the point: distinct store times
        assert cache.get("one") is None  # two newer entries push it out, as stored ones would
        assert cache.get("three")[0]["answer"] == answer
    finally:
        state._writer._channel._lock.release()
    state.close()
    assert cache.get("one") is None and cache.get("two")[0]["answer"] == answer


def test_a_stored_entry_is_evicted_by_newer_ones_stored_or_not(tmp_path):
    import openai_responses_mcp as m

    state = m.StateStore(m._SqliteBackend(str(tmp_path / "s.db")), m.Log())
    cache = m.AnswerCache(state, 600, 2)
    answer = {"answer": "a", "citations": [], "used_search": False, "model": "m"}
    for key in ("one", "two"):
        cache.put(key, answer, None)
        time.sleep(0.002)  # sleep: the point: distinct store times
    wait_until(lambda: not state.unwritten(), 10, "the writer")
    state._writer._channel._lock.acquire()  # "three" waits in memory
    try:
        cache.put("three", answer, None)
        assert cache.get("one") is None  # "two" (stored) and "three" (not yet) push it out
        assert cache.get("two")[0]["answer"] == answer
    finally:
        state._writer._channel._lock.release()
    state.close()
