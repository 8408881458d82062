"""answer_deep, the opt-in deep research tool: listed only when turned on, sent only what deep
research models accept, always in background mode, priced, and handed off like any long call.

The server is spawned for real against the fake Responses API, which refuses what the real
API refuses for these models (tests/fake_upstream.py: deep_research_refusal)."""

from __future__ import annotations

import json
import re

import openai
import pytest
from conftest import ANSWER, TEST_KEY, FakeEngine, Harness, failure_of, run_cli, send_call
from fake_upstream import Reply, deep_research_reply

import openai_responses_mcp as m

DEEP_ON = {"MCP_ANSWER_DEEP": "1"}
HANDOFF = "openai-responses-mcp/handoff"


def load(tmp_path, yaml_text: str | None = None, **env: str) -> m.Config:
    cli = {}
    if yaml_text is not None:
        (tmp_path / "config.yaml").write_text(yaml_text, encoding="utf-8")
        cli["config"] = str(tmp_path / "config.yaml")
    base = {"XDG_CONFIG_HOME": str(tmp_path / "xdg"), "XDG_STATE_HOME": str(tmp_path)}
    return m.load_config(cli, {**base, **env})


def listed(config: m.Config) -> list[str]:
    harness = Harness(config)
    harness.initialize()
    return [tool["name"] for tool in harness.request("tools/list")["result"]["tools"]]


# -- Opt-in ------------------------------------------------------------------------------------


def test_answer_deep_is_off_by_default_neither_listed_nor_callable(tmp_path):
    config = load(tmp_path)
    assert listed(config) == ["answer", "answer_detailed", "answer_quick"]
    harness = Harness(config)
    harness.initialize()
    reply = harness.start_call({"query": "q"}, tool="answer_deep")
    assert reply["error"]["code"] == -32601
    assert "set tools.answer_deep: true or MCP_ANSWER_DEEP=1" in reply["error"]["message"]
    assert harness.engine.calls == []


@pytest.mark.parametrize(
    ("yaml_text", "env"),
    [("tools: {answer_deep: true}\n", {}), (None, DEEP_ON)],
    ids=["config", "env"],
)
def test_answer_deep_is_listed_when_turned_on(tmp_path, yaml_text, env):
    config = load(tmp_path, yaml_text, **env)
    assert listed(config) == ["answer", "answer_detailed", "answer_quick", "answer_deep"]
    assert config.profile("answer_deep") == {
        "model": "o4-mini-deep-research",
        "reasoning_effort": "medium",
        "verbosity": None,
        "max_tool_calls": 50,
    }


def test_the_instructions_say_when_to_use_it_and_how_to_ask_about_its_report(tmp_path):
    harness = Harness(load(tmp_path, **DEEP_ON))
    instructions = harness.initialize()["result"]["instructions"]
    assert "Use `answer_deep` only when the user asks for thorough research" in instructions
    assert "with `answer` and the report's response_id" in instructions
    assert len(instructions) < 1200


def test_its_profile_stands_alone_and_o3_deep_research_is_a_model_away(tmp_path):
    config = load(
        tmp_path,
        "model_profiles:\n  answer: {service_tier: flex, max_tool_calls: 3}\n"
        "  answer_deep: {model: o3-deep-research, max_tool_calls: 200}\n",
        **DEEP_ON,
    )
    profile = config.profile("answer_deep")
    assert profile["model"] == "o3-deep-research" and profile["max_tool_calls"] == 200
    assert "service_tier" not in profile  # nothing inherited from answer
    assert config.background("answer_deep") is True


def test_max_tool_calls_null_means_no_cap_as_documented_and_reserves_the_default_cap(tmp_path):
    config = load(tmp_path, "model_profiles:\n  answer_deep: {max_tool_calls: null}\n", **DEEP_ON)
    assert "max_tool_calls" not in config.profile("answer_deep")
    assert "max_tool_calls" not in m.build_request("answer_deep", {"query": "q"}, config, "x")
    search = config.get("pricing", "web_search_per_1k") / 1000
    # uncapped, a run searches at least as much as the default cap allows: never a cent
    assert m.reservation_floor(config, "answer_deep") == pytest.approx(50 * search)
    capped = load(tmp_path, "model_profiles:\n  answer_deep: {max_tool_calls: 7}\n", **DEEP_ON)
    assert m.reservation_floor(capped, "answer_deep") == pytest.approx(7 * search)


def test_with_a_model_that_is_not_deep_research_it_sends_no_null_verbosity(tmp_path):
    config = load(tmp_path, "model_profiles:\n  answer_deep: {model: gpt-5.2}\n", **DEEP_ON)
    request = m.build_request("answer_deep", {"query": "q"}, config, "2026-01-01")
    assert request["tools"] == [{"type": "web_search"}] and "text" not in request
    assert request["reasoning"] == {"effort": "medium"} and request["max_tool_calls"] == 50


def test_an_effort_deep_research_refuses_is_refused_at_start_up_naming_the_key(tmp_path):
    yaml_text = "model_profiles:\n  answer_deep: {reasoning_effort: high}\n"
    with pytest.raises(m.ConfigError) as caught:
        load(tmp_path, yaml_text, **DEEP_ON)
    assert str(caught.value).startswith("model_profiles.answer_deep.reasoning_effort = high (")
    assert "o4-mini-deep-research accepts only medium" in str(caught.value)
    load(tmp_path, yaml_text)  # off: not checked


# -- The request, the answer and its cost -------------------------------------------------------


def test_a_deep_research_run_sends_what_the_model_accepts_and_reports_its_cost(spawn, fake):
    fake.enqueue(deep_research_reply(searches=8))
    server = spawn(env=DEEP_ON, upstream=fake)
    server.initialize()
    send_call(server, 1, "state of X", tool="answer_deep", _meta={"progressToken": "p"})
    reply, before = server.recv_until(lambda msg: msg.get("id") == 1, 30)
    (create,) = fake.creates
    sent = create.body
    assert sent["model"] == "o4-mini-deep-research" and sent["background"] is True
    assert sent["tools"] == [{"type": "web_search_preview"}]
    assert sent["reasoning"] == {"effort": "medium"} and sent["max_tool_calls"] == 50
    assert "text" not in sent and "include" not in sent
    result = reply["result"]
    answer = json.loads(result["content"][0]["text"])
    assert answer["answer"].startswith("# Research report\n\nSummary: the short answer.")
    assert answer["used_search"] is True and answer["response_id"] in fake.stored
    meta = result["_meta"]
    # 8 web_search_calls, 2 of them page opens: OpenAI bills only the 6 search actions
    assert meta["background"] is True and meta["web_searches"] == 6
    usage = meta["usage"]
    fresh = usage["input_tokens"] - usage["cached_input_tokens"]
    expected = (fresh * 2 + usage["cached_input_tokens"] * 0.5 + usage["output_tokens"] * 8) / 1e6
    assert meta["cost"]["usd"] == pytest.approx(expected + 6 * 10 / 1000)
    assert meta["cost"]["prices"].startswith("builtin")
    notices = [msg["params"]["message"] for msg in before if msg.get("method")]
    counts = [int(n.split("(")[1].split()[0]) for n in notices if "searches so far" in n]
    assert counts and counts == sorted(counts) and counts[-1] <= 6, notices  # page opens not


def test_an_uncapped_run_sends_no_max_tool_calls(spawn, fake):
    fake.enqueue(deep_research_reply(searches=2, sections=1))
    config = "tools: {answer_deep: true}\nmodel_profiles:\n  answer_deep: {max_tool_calls: null}\n"
    server = spawn(config=config, upstream=fake)
    server.initialize()
    assert "result" in server.call("answer_deep", {"query": "q"}, timeout=30)
    assert "max_tool_calls" not in fake.creates[0].body


def test_deep_progress_says_what_each_web_action_did():
    done = "response.output_item.done"

    def item(action_type):
        return {"item": {"type": "web_search_call", "action": {"type": action_type}}}

    assert m._deep_progress(done, item("search"), None) == "search done"
    assert m._deep_progress(done, item("open_page"), None) == "read a page"
    assert m._deep_progress(done, item("find_in_page"), None) == "looked within a page"
    assert m._deep_progress("response.web_search_call.completed", {}, "search done") is None
    assert m._deep_progress("response.in_progress", {}, "thinking") == "thinking"


def test_domains_are_a_hint_in_the_input_not_a_filter(spawn, fake):
    fake.enqueue(deep_research_reply(searches=1, sections=1))
    server = spawn(env=DEEP_ON, upstream=fake)
    server.initialize()
    arguments = {"query": "q", "domains": ["docs.python.org"]}
    assert "result" in server.call("answer_deep", arguments, timeout=30)
    sent = fake.creates[0].body
    assert sent["tools"] == [{"type": "web_search_preview"}]
    assert "domains=docs.python.org" in sent["input"]


def test_a_refused_background_mode_fails_answer_deep_instead_of_streaming_for_minutes(spawn, fake):
    fake.refuse_background = True
    server = spawn(env=DEEP_ON, upstream=fake)
    server.initialize()
    message = failure_of(server.call("answer_deep", {"query": "q"}))
    assert "answer_deep runs only in background mode" in message
    assert "use answer_detailed instead" in message
    (warning,) = [line for line in server.stderr.splitlines() if "refused background" in line]
    named = re.findall(r"(?:model_profiles|tools)\.[\w.]+\b", warning)
    assert named == ["model_profiles.answer_detailed.background", "tools.answer_deep"], warning
    assert all(tuple(key.split(".")) in m.SETTINGS for key in named)  # every key it names exists


def test_a_long_run_is_handed_off_and_collected_with_answer_result(spawn, fake):
    fake.enqueue(deep_research_reply(searches=6, event_delay=0.03))
    config = "request: {handoff_after_s: 1}\ntools: {answer_deep: true}\n"
    server = spawn(config=config, upstream=fake)
    server.initialize()
    first = server.call("answer_deep", {"query": "q"}, timeout=30)["result"]
    assert first["_meta"][HANDOFF]["status"] == "working"
    collected = None
    for _ in range(10):
        arguments = {"id": first["_meta"][HANDOFF]["id"], "wait_s": 10}
        collected = server.call("answer_result", arguments, timeout=30)["result"]
        if collected["_meta"][HANDOFF]["status"] == "completed":
            break
    answer = json.loads(collected["content"][0]["text"])
    assert answer["answer"].startswith("# Research report")
    assert collected["_meta"]["cost"]["usd"] > 0 and len(fake.creates) == 1


# -- The fake refuses what the real API refuses ---------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "said"),
    [
        ({"tools": [{"type": "web_search"}]}, "only support the 'web_search_preview'"),
        ({"tools": []}, "require at least one of 'web_search_preview' or 'mcp' tools"),
        (
            {"tools": [{"type": "web_search_preview"}], "reasoning": {"effort": "high"}},
            "'reasoning.effort' does not support 'high' with this model",
        ),
    ],
    ids=["web_search", "no-tool", "effort"],
)
def test_the_fake_answers_the_400s_of_deep_research_models(fake, fields, said):
    client = openai.OpenAI(api_key=TEST_KEY, base_url=fake.base_url, max_retries=0)
    fake.enqueue(Reply())
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model="o3-deep-research-2025-06-26", input="q", **fields)
    assert said in caught.value.body["message"]
    assert len(fake._queue) == 1  # nothing consumed: the request was refused as it came


def test_tasks_that_would_expire_before_a_run_ends_are_refused_while_it_is_on(tmp_path):
    yaml_text = "server: {tasks: {ttl_ms: 600000}}\ntools: {answer_deep: true}\n"
    with pytest.raises(m.ConfigError, match=r"at least request\.deep_timeout_ms \(3600000\)"):
        load(tmp_path, yaml_text)
    load(tmp_path, yaml_text + "request: {deep_timeout_ms: 600000}\n")


def test_a_shortened_report_points_at_answer_for_the_rest_not_at_another_run(tmp_path):
    long = "Start.\n\n" + "## Part\n\nwords\n\n" * 4000
    report = {**ANSWER, "answer": long, "response_id": "r_1"}
    engine = FakeEngine(lambda tool, args, call: (dict(report), {}))
    harness = Harness(load(tmp_path, **DEEP_ON), engine)
    harness.request(
        "initialize",
        {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "codex"}},
    )
    text = harness.call({"query": "q"}, tool="answer_deep")["result"]["content"][0]["text"]
    assert 'call answer with previous_response_id "r_1"' in json.loads(text)["answer"]


def test_ask_with_answer_deep_needs_it_turned_on(tmp_path, fake):
    env = {"OPENAI_BASE_URL": fake.base_url}
    proc = run_cli(tmp_path, "--ask", "q", "--tool", "answer_deep", env=env)
    assert (
        proc.returncode == 2 and "set tools.answer_deep: true or MCP_ANSWER_DEEP=1" in proc.stderr
    )
    assert fake.creates == []
    fake.enqueue(deep_research_reply(searches=1, sections=1))
    proc = run_cli(tmp_path, "--ask", "q", "--tool", "answer_deep", env={**env, **DEEP_ON})
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["answer"].startswith("# Research report")
