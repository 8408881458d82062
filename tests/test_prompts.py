"""MCP prompts (issue 41): research, deep-research (only while answer_deep is on) and
ask-about-file, over prompts/list and prompts/get in both protocol eras. Each expands to one user
message that names the tool to call and its arguments; Claude Code shows them as slash commands.

What the server sends is checked against the spec's wire models of each era (mcp_types) and the
SDK's own types, in process, over a spawned server's stdio, and through the SDK's client."""

from __future__ import annotations

import json
import sys

import anyio
import pytest
from conftest import META, PROGRAM, Harness, base_env

import openai_responses_mcp as m

mcp = pytest.importorskip("mcp")
import mcp.types as sdk_types  # noqa: E402
from mcp import Client, MCPError, StdioServerParameters  # noqa: E402

wire = pytest.importorskip("mcp_types._v2026_07_28")
handshake_wire = pytest.importorskip("mcp_types._v2025_11_25")

DEEP_ON = {"MCP_ANSWER_DEEP": "1"}
BASIC = ["research", "ask-about-file"]
WITH_DEEP = ["research", "deep-research", "ask-about-file"]


def load(tmp_path, **env: str) -> m.Config:
    base = {"XDG_CONFIG_HOME": str(tmp_path / "xdg"), "XDG_STATE_HOME": str(tmp_path)}
    return m.load_config({}, {**base, "ANSWER_CACHE_TTL_S": "0", **env})


def modern(**params) -> dict:
    return {**params, "_meta": dict(META)}


def message_text(result: dict) -> str:
    (message,) = result["messages"]
    assert message["role"] == "user" and message["content"]["type"] == "text"
    return message["content"]["text"]


def tool_call_in(text: str) -> dict:
    """The arguments the message asks the model to pass: the JSON object it quotes."""
    return json.loads(text[text.index("{") : text.rindex("}") + 1])


# -- The table and its checks (pure) -----------------------------------------------------------


def test_prompts_listed_are_the_basic_two_and_deep_research_only_when_deep_is_on():
    assert [p["name"] for p in m.prompt_definitions(m.LATEST_PROTOCOL, deep=False)] == BASIC
    definitions = m.prompt_definitions(m.LATEST_PROTOCOL, deep=True)
    assert [p["name"] for p in definitions] == WITH_DEEP
    for prompt in definitions:
        sdk_types.Prompt.model_validate(prompt)
        handshake_wire.Prompt.model_validate(prompt)
        assert prompt["title"] and prompt["description"]
        assert all(argument["required"] is True for argument in prompt["arguments"])
    arguments = {p["name"]: [a["name"] for a in p["arguments"]] for p in definitions}
    assert arguments == {
        "research": ["question"],
        "deep-research": ["question"],
        "ask-about-file": ["path", "question"],
    }


@pytest.mark.parametrize("version", m.PROTOCOL_VERSIONS)
def test_prompt_titles_appear_from_2025_06_18_as_tool_titles_do(version):
    definitions = m.prompt_definitions(version, deep=False)
    assert all(("title" in p) == (version >= "2025-06-18") for p in definitions)


@pytest.mark.parametrize(
    ("name", "arguments", "tool", "call"),
    [
        ("research", {"question": "Who won?"}, "answer", {"query": "Who won?"}),
        ("deep-research", {"question": " Solar 2026 "}, "answer_deep", {"query": "Solar 2026"}),
        (
            "ask-about-file",
            {"path": "shots/err.png", "question": "What fails here?"},
            "answer",
            {"query": "What fails here?", "files": ["shots/err.png"]},
        ),
    ],
)
def test_each_prompt_asks_for_its_tool_with_the_users_arguments(name, arguments, tool, call):
    result = m.prompt_result(name, arguments, deep=True)
    sdk_types.GetPromptResult.model_validate(result)
    handshake_wire.GetPromptResult.model_validate(result)
    text = message_text(result)
    assert f"Call the `{tool}` tool" in text
    assert tool_call_in(text) == call


def test_a_question_with_quotes_and_braces_is_quoted_as_json_unchanged():
    question = 'Is "x" in {a, b}?\nÄ'
    text = message_text(m.prompt_result("research", {"question": question}, deep=False))
    assert tool_call_in(text) == {"query": question}


@pytest.mark.parametrize(
    ("name", "arguments", "says"),
    [
        ("nope", {}, 'unknown prompt "nope"; prompts: research, ask-about-file'),
        (None, {}, "unknown prompt null"),
        ("deep-research", {"question": "q"}, "it is off: set tools.answer_deep: true"),
        ("research", {}, "prompt 'research' needs the argument 'question'"),
        ("research", None, "needs the argument 'question'"),
        ("research", {"question": " \u200b "}, "needs the argument 'question'"),
        ("ask-about-file", {"question": "q"}, "needs the argument 'path'"),
        ("research", {"question": 42}, "argument 'question' must be a string, got 42"),
        ("research", {"question": "q", "topic": "x"}, 'takes no argument "topic"'),
        ("research", ["q"], "'arguments' must be an object"),
    ],
)
def test_bad_prompt_requests_say_what_is_wrong(name, arguments, says):
    with pytest.raises(m.InvalidParams) as caught:
        m.prompt_result(name, arguments, deep=False)
    assert says in str(caught.value)


# -- Both eras in process ----------------------------------------------------------------------


@pytest.fixture
def harness(config):
    return Harness(config)


def test_handshake_era_lists_and_gets_prompts_as_2025_11_25_says(harness):
    assert harness.initialize()["result"]["capabilities"]["prompts"] == {"listChanged": False}
    listed = harness.request("prompts/list")["result"]
    handshake_wire.ListPromptsResult.model_validate(listed)
    assert [p["name"] for p in listed["prompts"]] == BASIC
    assert set(listed) == {"prompts"}  # one page: no nextCursor, and no stateless-era fields
    got = harness.request("prompts/get", {"name": "research", "arguments": {"question": "q"}})
    handshake_wire.GetPromptResult.model_validate(got["result"])
    assert tool_call_in(message_text(got["result"])) == {"query": "q"}


def test_stateless_era_lists_and_gets_prompts_as_2026_07_28_says(harness):
    listed = harness.request("prompts/list", modern(), "l")
    wire.ListPromptsResultResponse.model_validate(listed)
    assert [p["name"] for p in listed["result"]["prompts"]] == BASIC
    assert "nextCursor" not in listed["result"]
    assert listed["result"]["ttlMs"] > 0 and listed["result"]["cacheScope"] == "public"
    got = harness.request(
        "prompts/get", modern(name="ask-about-file", arguments={"path": "a.log", "question": "q"})
    )
    wire.GetPromptResultResponse.model_validate(got)
    assert got["result"]["resultType"] == "complete"
    assert tool_call_in(message_text(got["result"])) == {"query": "q", "files": ["a.log"]}


@pytest.mark.parametrize("era", ["handshake", "modern"])
def test_prompt_errors_are_invalid_params_in_both_eras(harness, era):
    def ask(method, **params):
        reply = harness.request(method, modern(**params) if era == "modern" else params)
        wire.JSONRPCErrorResponse.model_validate(reply)
        assert reply["error"]["code"] == -32602
        return reply["error"]["message"]

    assert 'unknown prompt "research-x"' in ask("prompts/get", name="research-x")
    assert "needs the argument 'question'" in ask("prompts/get", name="research", arguments={})
    assert 'unknown cursor "abc"' in ask("prompts/list", cursor="abc")
    # the server keeps serving
    assert harness.request("prompts/list", modern() if era == "modern" else {})["result"]


def test_a_null_cursor_is_no_cursor(harness):
    assert harness.request("prompts/list", {"cursor": None})["result"]["prompts"]


def test_deep_research_is_listed_and_served_when_answer_deep_is_on(tmp_path):
    harness = Harness(load(tmp_path, **DEEP_ON))
    harness.initialize()
    listed = harness.request("prompts/list")["result"]["prompts"]
    assert [p["name"] for p in listed] == WITH_DEEP
    got = harness.request("prompts/get", {"name": "deep-research", "arguments": {"question": "q"}})
    assert "Call the `answer_deep` tool" in message_text(got["result"])


# -- A spawned server, both eras on one pipe ---------------------------------------------------


@pytest.mark.parametrize(("env", "names"), [({}, BASIC), (DEEP_ON, WITH_DEEP)])
def test_stdio_serves_prompts_in_both_eras(spawn, env, names):
    server = spawn(env=env)
    discovered = server.request("server/discover", modern())
    assert discovered["result"]["capabilities"]["prompts"] == {"listChanged": False}
    listed = server.request("prompts/list", modern())
    wire.ListPromptsResultResponse.model_validate(listed)
    assert [p["name"] for p in listed["result"]["prompts"]] == names
    deep = server.request("prompts/get", modern(name="deep-research", arguments={"question": "q"}))
    if "deep-research" in names:
        wire.GetPromptResultResponse.model_validate(deep)
        assert "`answer_deep`" in message_text(deep["result"])
    else:
        assert deep["error"]["code"] == -32602 and "it is off" in deep["error"]["message"]
    initialized = server.initialize("2025-11-25")["result"]
    assert initialized["capabilities"]["prompts"] == {"listChanged": False}
    listed = server.request("prompts/list")["result"]
    handshake_wire.ListPromptsResult.model_validate(listed)
    assert [p["name"] for p in listed["prompts"]] == names
    missing = server.request("prompts/get", {"name": "ask-about-file", "arguments": {"path": "x"}})
    assert missing["error"]["code"] == -32602
    assert "needs the argument 'question'" in missing["error"]["message"]
    got = server.request(
        "prompts/get", {"name": "ask-about-file", "arguments": {"path": "x", "question": "q"}}
    )
    handshake_wire.GetPromptResult.model_validate(got["result"])
    assert tool_call_in(message_text(got["result"])) == {"query": "q", "files": ["x"]}


def test_a_prompt_never_expands_to_a_call_the_tool_would_refuse(spawn):
    """A question over the tool's query maxLength, or holding a lone surrogate, was expanded
    into a message whose tool call then failed: refused at prompts/get, in both eras, saying
    why; the server keeps serving."""
    server = spawn()
    limit = m.INPUT_PROPERTIES["query"]["maxLength"]
    over = {"name": "research", "arguments": {"question": "x" * (limit + 1)}}
    for params in (modern(**over), None):
        if params is None:  # the handshake era, on the same pipe
            server.initialize("2025-11-25")
            params = over
        reply = server.request("prompts/get", params)
        assert reply["error"]["code"] == -32602, str(reply)[:300]
        said = reply["error"]["message"]
        assert f"'question' is {limit + 1} characters (trimmed); the answer tool takes" in said
    # A lone surrogate, as JSON escapes it (json.dumps would not write one).
    arguments = b'{"path": "a\\ud800.png", "question": "q"}'
    server.write(
        b'{"jsonrpc": "2.0", "id": 5, "method": "prompts/get", "params": {"name": '
        b'"ask-about-file", "arguments": ' + arguments + b"}}\n"
    )
    reply, _ = server.recv_until(lambda message: message.get("id") == 5)
    assert reply["error"]["code"] == -32602 and "'path' holds a lone surrogate" in str(reply)
    fits = {"name": "research", "arguments": {"question": "x" * limit}}
    assert tool_call_in(message_text(server.request("prompts/get", fits)["result"]))


def test_a_pasted_question_that_fits_once_trimmed_is_expanded_and_the_tool_takes_it(spawn, fake):
    """A question pasted with a trailing newline (or indented) is trimmed in the message: a
    question of exactly the tool's limit plus that whitespace was refused by prompts/get,
    though the call it expands to is one the tool takes."""
    from fake_upstream import SEARCHED

    server = spawn(upstream=fake)
    server.initialize("2025-11-25")
    limit = m.INPUT_PROPERTIES["query"]["maxLength"]
    pasted = {"name": "research", "arguments": {"question": "  " + "x" * limit + "\n"}}
    got = server.request("prompts/get", pasted)
    assert "result" in got, str(got)[:300]
    call = tool_call_in(message_text(got["result"]))
    assert call == {"query": "x" * limit}
    fake.enqueue(SEARCHED)
    done = server.call("answer", call)
    assert "result" in done and not done["result"].get("isError"), str(done)[:300]


# -- The SDK's client, in each era -------------------------------------------------------------


def sdk_session(tmp_path, mode: str, env: dict, session):
    params = StdioServerParameters(
        command=sys.executable,
        args=[*PROGRAM[1:], "--stdio"],
        env=base_env(tmp_path, **env),
        cwd=str(tmp_path),
    )
    outcome = {}

    async def main():
        with anyio.fail_after(30):
            async with Client(params, mode=mode, read_timeout_seconds=30) as client:
                outcome["value"] = await session(client)

    anyio.run(main)
    return outcome["value"]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
@pytest.mark.parametrize(("env", "names"), [({}, BASIC), (DEEP_ON, WITH_DEEP)])
def test_sdk_client_lists_and_gets_prompts(tmp_path, mode, env, names):
    async def session(client):
        listed = await client.list_prompts()
        got = await client.get_prompt("research", {"question": "What is new in 3.14?"})
        try:
            await client.get_prompt("research", {})
        except MCPError as exc:
            return client.protocol_version, listed, got, exc
        raise AssertionError("get_prompt without its argument did not raise")

    version, listed, got, error = sdk_session(tmp_path, mode, env, session)
    assert version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
    assert [prompt.name for prompt in listed.prompts] == names
    assert listed.next_cursor is None
    research = listed.prompts[0]
    assert [(a.name, a.required) for a in research.arguments] == [("question", True)]
    (message,) = got.messages
    assert message.role == "user" and "Call the `answer` tool" in message.content.text
    assert tool_call_in(message.content.text) == {"query": "What is new in 3.14?"}
    assert error.code == -32602 and "needs the argument 'question'" in error.message
