"""The scripted model API the agent tests run the agents against (tests/scripted_models.py):
its script, checked without the agents, and its Responses stream read by the real `openai` SDK.
Also the fake upstream's long answer (Reply.work_seconds) that the agent tests rely on."""

from __future__ import annotations

import json

import openai
from conftest import TEST_KEY
from fake_upstream import SEARCHED, FakeResponsesAPI, Reply
from scripted_models import (
    QUOTE_PREFIX,
    SIDE_TEXT,
    ScriptedModels,
    anthropic_turn,
    ask,
    decide,
    openai_events,
    openai_turn,
)

PROMPT = ask("answer", "When was 3.14 released?")
HANDOFF_TEXT = (
    '{"answer": "Still researching (50 s so far); the answer is not ready yet. Call the '
    'answer_result tool with {\\"id\\": \\"h-abc\\", \\"wait_s\\": 30} to collect it."}'
)


def claude_request(*messages: dict, tools=("ToolSearch",), reminder: str = "") -> dict:
    first = {"role": "user", "content": [{"type": "text", "text": reminder + PROMPT}]}
    return {"messages": [first, *messages], "tools": [{"name": name} for name in tools]}


def tool_use(name: str, arguments: dict, use_id: str) -> dict:
    block = {"type": "tool_use", "id": use_id, "name": name, "input": arguments}
    return {"role": "assistant", "content": [block]}


def tool_result(use_id: str, text: str) -> dict:
    block = {
        "type": "tool_result",
        "tool_use_id": use_id,
        "content": [{"type": "text", "text": text}],
    }
    return {"role": "user", "content": [block]}


def test_claude_code_deferred_tool_is_loaded_through_tool_search_then_called():
    reminder = "<system-reminder>Deferred tools: mcp__responses__answer</system-reminder>\n"
    first = decide(anthropic_turn(claude_request(reminder=reminder)))
    assert first == ("call", ("ToolSearch", {"query": "select:mcp__responses__answer"}))
    loaded = claude_request(
        tool_use("ToolSearch", first[1][1], "t1"),
        tool_result("t1", "loaded"),
        tools=("ToolSearch", "mcp__responses__answer"),
    )
    assert decide(anthropic_turn(loaded)) == (
        "call",
        ("mcp__responses__answer", {"query": "When was 3.14 released?"}),
    )


def test_the_model_quotes_the_result_it_was_given():
    answered = claude_request(
        tool_use("mcp__responses__answer", {"query": "q"}, "t2"),
        tool_result("t2", '{"answer": "On 2025-10-07."}'),
        tools=("mcp__responses__answer",),
    )
    assert decide(anthropic_turn(answered)) == (
        "text",
        QUOTE_PREFIX + '{"answer": "On 2025-10-07."}',
    )


def test_a_request_without_the_prompt_gets_a_short_text():
    title = {"messages": [{"role": "user", "content": "Write a title for this chat"}]}
    assert decide(anthropic_turn(title)) == ("text", SIDE_TEXT)


def codex_request(*items: dict) -> dict:
    namespace = {
        "type": "namespace",
        "name": "mcp__responses",
        "tools": [
            {"type": "function", "name": "answer"},
            {"type": "function", "name": "answer_result"},
        ],
    }
    prompt = {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_text", "text": PROMPT}],
    }
    return {"input": [prompt, *items], "tools": [namespace]}


def call(name: str, arguments: dict, call_id: str) -> dict:
    item = {"type": "function_call", "namespace": "mcp__responses", "name": name}
    return {**item, "arguments": json.dumps(arguments), "call_id": call_id}


def output(call_id: str, text: str) -> dict:
    return {"type": "function_call_output", "call_id": call_id, "output": text}


def test_codex_namespaced_tool_is_called_and_a_handoff_collected():
    first = decide(openai_turn(codex_request()))
    assert first == ("call", ("mcp__responses/answer", {"query": "When was 3.14 released?"}))
    item = openai_events(first, "m")[-1][1]["response"]["output"][0]
    assert (item["namespace"], item["name"]) == ("mcp__responses", "answer")
    handed_off = codex_request(
        call("answer", {"query": "q"}, "c1"),
        output("c1", "Wall time: 50 s\nOutput:\n" + HANDOFF_TEXT),
    )
    collect = ("call", ("mcp__responses/answer_result", {"id": "h-abc", "wait_s": 30}))
    assert decide(openai_turn(handed_off)) == collect
    done = codex_request(
        call("answer", {"query": "q"}, "c1"),
        output("c1", HANDOFF_TEXT),
        call("answer_result", {"id": "h-abc"}, "c2"),
        output("c2", '{"answer": "On 2025-10-07."}'),
    )
    assert decide(openai_turn(done)) == ("text", QUOTE_PREFIX + '{"answer": "On 2025-10-07."}')


def test_the_openai_sdk_reads_the_scripted_stream():
    with ScriptedModels() as models:
        client = openai.OpenAI(api_key="k", base_url=models.base_url + "/v1", max_retries=0)
        body = codex_request()
        stream = client.responses.create(
            model="m", input=body["input"], tools=body["tools"], stream=True
        )
        events = list(stream)
    assert events[0].type == "response.created"
    final = events[-1].response
    assert final.status == "completed"
    assert final.output[0].type == "function_call"
    assert json.loads(final.output[0].arguments) == {"query": "When was 3.14 released?"}


def test_a_long_background_answer_stays_in_progress_while_it_works():
    with FakeResponsesAPI() as fake:
        fake.enqueue(Reply(text=SEARCHED.text, work_seconds=60))
        client = openai.OpenAI(api_key=TEST_KEY, base_url=fake.base_url, max_retries=0)
        created = client.responses.create(model="gpt-5.2", input="q", background=True)
        assert client.responses.retrieve(created.id).status in ("queued", "in_progress")
        client.responses.cancel(created.id)
