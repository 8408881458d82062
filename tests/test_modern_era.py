"""MCP 2026-07-28, the stateless era, beside the handshake era: Dispatcher.handle on its own
(fake engine, no pipes), then over real pipes. What we send is checked with the official
SDK's wire models for that revision."""

from __future__ import annotations

import json
import re

import pytest
from conftest import ANSWER, META, MODERN, SUPPORTED, FakeEngine, Harness
from fake_upstream import Reply
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from openai_responses_mcp import (
    PROTOCOL_VERSIONS,
    SERVER_NAME,
    Cancelled,
    ToolError,
    __version__,
    header_mismatch,
    load_config,
)

wire = pytest.importorskip("mcp_types._v2026_07_28")
handshake_wire = pytest.importorskip("mcp_types._v2025_11_25")

ENGINE_META = {"usage": {"total_tokens": 10}, "web_searches": 1, "cost": {"usd": 0.01}}
# The _meta key grammar of 2026-07-28 basic/index: an optional dotted prefix and a name.
LABEL = r"[A-Za-z](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
META_KEY = re.compile(
    rf"(?:(?:{LABEL}\.)*{LABEL}/)?(?:[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)?"
)
RESERVED = re.compile(r"^[^./]+\.(?:modelcontextprotocol|mcp)[./]")


def modern(**params) -> dict:
    return {**params, "_meta": {**META, **params.pop("_meta", {})}}


@pytest.fixture
def harness(config):
    return Harness(config, FakeEngine(meta=ENGINE_META))


def error(reply) -> dict:
    assert "result" not in reply, reply
    wire.JSONRPCErrorResponse.model_validate(reply)
    return reply["error"]


def check_meta_keys(meta: dict) -> None:
    for key in meta:
        assert META_KEY.fullmatch(key), f"{key!r} breaks the _meta key grammar"
        if RESERVED.match(key):
            assert key == "io.modelcontextprotocol/serverInfo", f"{key!r} uses a reserved prefix"


def server_info_of(result: dict) -> dict:
    info = result["_meta"]["io.modelcontextprotocol/serverInfo"]
    wire.Implementation.model_validate(info)
    return info


# -- server/discover -------------------------------------------------------------------------------


def test_discover_names_every_version_tools_identity_and_cache_hints(harness):
    reply = harness.request("server/discover", modern(), "discover-1")
    wire.DiscoverResultResponse.model_validate(reply)
    result = reply["result"]
    assert reply["id"] == "discover-1"
    assert result["resultType"] == "complete"
    assert result["supportedVersions"] == SUPPORTED
    assert set(SUPPORTED) == {MODERN, *PROTOCOL_VERSIONS}
    assert result["capabilities"] == {
        "tools": {"listChanged": False},
        "prompts": {"listChanged": False},
        "extensions": {"io.modelcontextprotocol/tasks": {}},
    }
    assert "answer_quick" in result["instructions"]
    assert result["ttlMs"] > 0 and result["cacheScope"] == "public"
    info = server_info_of(result)
    assert (info["name"], info["version"]) == (SERVER_NAME, __version__)


def test_discover_without_client_info_is_answered(harness):
    meta = {k: v for k, v in META.items() if not k.endswith("clientInfo")}
    reply = harness.request("server/discover", {"_meta": meta})
    wire.DiscoverResultResponse.model_validate(reply)


# -- the _meta every stateless request carries -----------------------------------------------------


WITHOUT_META = {
    "no-params": None,
    "no-meta": {},
    "meta-not-object": {"_meta": "2026-07-28"},
}
BROKEN_META = {
    "no-version": {k: v for k, v in META.items() if not k.endswith("protocolVersion")},
    "no-caps": {k: v for k, v in META.items() if not k.endswith("clientCapabilities")},
    "caps-list": {**META, "io.modelcontextprotocol/clientCapabilities": []},
    "version-int": {**META, "io.modelcontextprotocol/protocolVersion": 20260728},
}
INVALID = [
    *[("server/discover", params) for params in WITHOUT_META.values()],
    *[
        (method, {"_meta": meta})
        for method in ("server/discover", "tools/list", "tools/call")
        for meta in BROKEN_META.values()
    ],
]


@pytest.mark.parametrize(("method", "params"), INVALID)
def test_a_stateless_request_without_its_meta_is_invalid_params(harness, method, params):
    reply = harness.request(method, params, 7)
    assert reply["id"] == 7
    assert error(reply)["code"] == -32602
    assert "io.modelcontextprotocol/" in error(reply)["message"]


@pytest.mark.parametrize("asked", ["1900-01-01", "v999.0.0", "2025-11-25", "2024-11-05", ""])
@pytest.mark.parametrize("method", ["server/discover", "tools/list", "tools/call"])
def test_a_version_we_do_not_speak_statelessly_is_32022_with_what_we_do(harness, method, asked):
    params = modern(_meta={"io.modelcontextprotocol/protocolVersion": asked})
    reply = harness.request(method, params, "v")
    wire.UnsupportedProtocolVersionError.model_validate(reply)
    assert reply["id"] == "v"
    assert reply["error"]["code"] == -32022
    assert reply["error"]["data"] == {"supported": SUPPORTED, "requested": asked}
    discovered = harness.request("server/discover", modern())["result"]["supportedVersions"]
    assert set(reply["error"]["data"]["supported"]) <= set(discovered)
    said = reply["error"]["message"]
    if asked in discovered:  # a handshake version: the message must not list it as spoken
        assert "needs the initialize handshake" in said and f"speaks {MODERN}" in said
    else:
        assert said.endswith(", ".join(SUPPORTED))


@pytest.mark.parametrize(
    "method",
    [
        "ping",
        "initialize",
        "logging/setLevel",
        "resources/subscribe",
        "resources/unsubscribe",
        "resources/list",
        "subscriptions/listen",
        "completion/complete",
        "unknown/method",
    ],
)
def test_removed_and_unknown_methods_are_method_not_found(harness, method):
    reply = harness.request(method, modern(notifications={"toolsListChanged": True}), 9)
    assert reply["id"] == 9
    assert error(reply)["code"] == -32601
    wire.MethodNotFoundError.model_validate(reply["error"])
    assert method in reply["error"]["message"]


# -- tools -----------------------------------------------------------------------------------------


def test_tools_list_is_complete_cacheable_public_and_the_same_tools_as_2025_11_25(harness):
    first = harness.request("tools/list", modern())
    wire.ListToolsResultResponse.model_validate(first)
    result = first["result"]
    assert result["resultType"] == "complete"
    assert result["ttlMs"] > 0 and result["cacheScope"] == "public"
    server_info_of(result)
    assert harness.request("tools/list", modern())["result"]["tools"] == result["tools"]
    harness.request(
        "initialize", {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {}}
    )
    handshake = harness.request("tools/list")["result"]["tools"]
    for tool in handshake:  # 2025-11-25 adds its tasks' execution.taskSupport
        assert tool.pop("execution") == {"taskSupport": "optional"}
    assert handshake == result["tools"]


def test_a_call_answers_with_the_same_content_plus_result_type_and_server_info(harness):
    assert harness.request("tools/call", modern(name="answer", arguments={"query": "q"}), 5) is None
    reply = harness.sent_reply(5)
    wire.CallToolResultResponse.model_validate(reply)
    result = reply["result"]
    assert result["resultType"] == "complete"
    assert result["structuredContent"] == ANSWER
    assert json.loads(result["content"][0]["text"]) == ANSWER
    assert "isError" not in result
    assert {k: result["_meta"][k] for k in ENGINE_META} == ENGINE_META
    assert server_info_of(result)["name"] == SERVER_NAME
    check_meta_keys(result["_meta"])


def test_a_long_answer_is_shortened_for_the_client_each_request_names(config):
    long = {**ANSWER, "answer": "Start.\n\n" + "\n\n".join(["word " * 400] * 20)}
    harness = Harness(config, FakeEngine(lambda tool, args, call: (dict(long), dict(ENGINE_META))))
    codex = {"io.modelcontextprotocol/clientInfo": {"name": "codex-mcp-client", "version": "0"}}
    for request_id, meta, size in ((6, codex, 12_000), (7, {}, 50_000)):
        params = modern(name="answer", arguments={"query": "q"}, _meta=meta)
        assert harness.request("tools/call", params, request_id) is None
        result = harness.sent_reply(request_id)["result"]
        text = result["content"][0]["text"]
        assert len(text.encode("utf-8")) <= size
        assert ("Shortened by the server" in text) == (size == 12_000)
        assert json.loads(text) == result["structuredContent"]


def test_an_unknown_tool_is_invalid_params(harness):
    reply = harness.request("tools/call", modern(name="nope", arguments={"query": "q"}), 3)
    assert error(reply)["code"] == -32602
    assert "Unknown tool" in reply["error"]["message"]


@pytest.mark.parametrize("arguments", [{}, {"query": ""}, {"query": "q", "max_results": 0}, "q"])
def test_bad_arguments_are_a_tool_error_the_model_can_fix(harness, arguments):
    reply = harness.request("tools/call", modern(name="answer", arguments=arguments), 4)
    wire.CallToolResultResponse.model_validate(reply)
    result = reply["result"]
    assert result["isError"] is True and result["resultType"] == "complete"
    assert result["content"][0]["text"].startswith("Invalid arguments: ")
    assert "structuredContent" not in result


def test_a_failed_call_is_error_32001_as_in_the_handshake_era(config):
    def fail(tool, args, call):
        raise ToolError("authentication", "OpenAI refused the API key (401)")

    harness = Harness(config, FakeEngine(fail))
    harness.request("tools/call", modern(name="answer", arguments={"query": "q"}), "f")
    reply = harness.sent_reply("f")
    wire.JSONRPCErrorResponse.model_validate(reply)
    assert reply["error"]["code"] == -32001
    assert reply["error"]["message"].startswith("answer failed: ")
    assert "401" in reply["error"]["data"]["message"]


def test_the_same_failure_in_the_handshake_era_is_still_error_32001(config):
    def fail(tool, args, call):
        raise ToolError("authentication", "OpenAI refused the API key (401)")

    harness = Harness(config, FakeEngine(fail))
    harness.request("tools/call", {"name": "answer", "arguments": {"query": "q"}}, "f")
    assert harness.sent_reply("f")["error"]["code"] == -32001


def test_progress_for_a_stateless_call_carries_messages(config):
    def report(tool, args, call):
        call.report("searching the web", min_interval=0)
        call.report("writing the answer", min_interval=0)
        return dict(ANSWER), dict(ENGINE_META)

    harness = Harness(config, FakeEngine(report))
    params = modern(name="answer", arguments={"query": "q"}, _meta={"progressToken": "p"})
    harness.request("tools/call", params, 6)
    harness.sent_reply(6)
    progress = [m for m in harness.outbox.messages if m.get("method") == "notifications/progress"]
    assert len(progress) >= 2
    for note in progress:
        wire.ProgressNotification.model_validate(note)
        assert note["params"]["progressToken"] == "p" and note["params"]["message"]


def test_a_cancelled_stateless_call_is_never_answered(config):
    def wait(tool, args, call):
        call.cancelled.wait(5)
        raise Cancelled()

    engine = FakeEngine(wait)
    harness = Harness(config, engine)
    harness.request("tools/call", modern(name="answer", arguments={"query": "q"}), "c")
    assert engine.started.wait(5)
    note = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "c"}}
    assert harness.dispatcher.handle(note, harness.session) is None
    assert harness.session.wait_idle(5)
    assert not [m for m in harness.outbox.messages if m.get("id") == "c"]


# -- the two eras side by side ---------------------------------------------------------------------


def test_stateless_requests_leave_the_handshake_session_alone(harness):
    harness.request(
        "initialize", {"protocolVersion": "2024-11-05", "capabilities": {}, "clientInfo": {}}
    )
    harness.request("tools/list", modern())
    legacy = harness.request("tools/list")["result"]
    assert set(legacy) == {"tools"}
    assert "outputSchema" not in legacy["tools"][0]  # still 2024-11-05's shape
    harness.request("tools/call", {"name": "answer", "arguments": {"query": "q"}}, "old")
    old = harness.sent_reply("old")["result"]
    assert set(old) == {"content", "_meta"}
    harness.request("tools/call", modern(name="answer", arguments={"query": "q"}), "new")
    new = harness.sent_reply("new")["result"]
    assert new["structuredContent"] == ANSWER and new["resultType"] == "complete"


def test_handshake_results_carry_nothing_from_the_stateless_era(harness):
    harness.request(
        "initialize", {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {}}
    )
    listed = harness.request("tools/list", {"_meta": {"progressToken": 1}})
    handshake_wire.ListToolsResult.model_validate(listed["result"])
    assert set(listed["result"]) == {"tools"}
    assert harness.request("ping")["result"] == {}


# -- over real pipes: both eras on one stdio connection --------------------------------------------


def line(message: dict) -> bytes:
    return json.dumps(message).encode() + b"\n"


def test_stdio_serves_both_eras_on_one_pipe(spawn, fake):
    fake.enqueue(Reply(text="Modern answer."))
    server = spawn(upstream=fake)
    discovered = server.request("server/discover", modern())
    wire.DiscoverResultResponse.model_validate(discovered)
    listed = server.request("tools/list", modern())
    wire.ListToolsResultResponse.model_validate(listed)
    assert error(server.request("ping", modern()))["code"] == -32601
    assert error(server.request("server/discover", {}))["code"] == -32602
    unsupported = server.request(
        "tools/list", modern(_meta={"io.modelcontextprotocol/protocolVersion": "1900-01-01"})
    )
    wire.UnsupportedProtocolVersionError.model_validate(unsupported)
    assert unsupported["error"]["data"]["requested"] == "1900-01-01"
    reply = server.call("answer", {"query": "q"}, _meta=META)
    wire.CallToolResultResponse.model_validate(reply)
    assert reply["result"]["structuredContent"]["answer"].startswith("Modern answer.")
    assert server.initialize("2025-11-25")["result"]["protocolVersion"] == "2025-11-25"
    assert set(server.request("tools/list")["result"]) == {"tools"}
    assert server.request("ping")["result"] == {}
    listed_again = server.request("tools/list", modern())
    assert listed_again["result"]["resultType"] == "complete"


def test_stdio_stateless_call_streams_progress_then_cancels_and_hangs_up(spawn, fake):
    fake.enqueue(Reply(searches=[{"query": "q", "sources": []}], stall_after_events=4))
    server = spawn(upstream=fake)
    params = modern(name="answer", arguments={"query": "q"}, _meta={"progressToken": "tok"})
    server.send({"jsonrpc": "2.0", "id": "doomed", "method": "tools/call", "params": params})
    note, _ = server.recv_until(lambda m: m.get("method") == "notifications/progress")
    wire.ProgressNotification.model_validate(note)
    assert note["params"]["progressToken"] == "tok"
    server.send(
        {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": "doomed", "reason": "user", "_meta": META},
        }
    )
    fake.wait_for_disconnect(0, timeout=2)
    assert server.request("tools/list", modern())["result"]["resultType"] == "complete"
    assert server.nothing_within(0.2)
    server.close_stdin()
    assert server.wait() == 0
    assert not [m for m in list(server.reader.messages.queue) if m and m.get("id") == "doomed"]


# -- Streamable HTTP's mirrored headers, on their own ----------------------------------------------


def headers(**given):
    table = {name.lower().replace("_", "-"): value for name, value in given.items()}
    return lambda name: table.get(name.lower())


CALL = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "tools/call",
    "params": modern(name="answer", arguments={"query": "q"}),
}
GOOD = {"mcp_protocol_version": MODERN, "mcp_method": "tools/call", "mcp_name": "answer"}


@pytest.mark.parametrize(
    "given",
    [
        GOOD,
        {**GOOD, "mcp_name": "  answer\t"},  # optional whitespace is not part of the value
        {**GOOD, "mcp_name": "=?base64?YW5zd2Vy?="},  # "answer", Base64-encoded
    ],
)
def test_headers_that_mirror_the_body_pass(given):
    assert header_mismatch(CALL, headers(**given)) is None


@pytest.mark.parametrize(
    ("given", "named"),
    [
        ({**GOOD, "mcp_name": "wrong_tool_name"}, "Mcp-Name"),
        ({**GOOD, "mcp_name": None}, "Mcp-Name"),
        ({**GOOD, "mcp_method": "TOOLS/CALL"}, "Mcp-Method"),  # values are case-sensitive
        ({**GOOD, "mcp_method": "tools/list"}, "Mcp-Method"),
        ({**GOOD, "mcp_method": None}, "Mcp-Method"),
        ({**GOOD, "mcp_protocol_version": "2025-11-25"}, "MCP-Protocol-Version"),
        ({**GOOD, "mcp_protocol_version": None}, "MCP-Protocol-Version"),
        ({**GOOD, "mcp_name": "=?base64?!!!?="}, "Mcp-Name"),
        ({**GOOD, "mcp_name": "answ\x01er"}, "Mcp-Name"),
    ],
)
def test_headers_that_disagree_with_the_body_are_named(given, named):
    given = {k: v for k, v in given.items() if v is not None}
    why = header_mismatch(CALL, headers(**given))
    assert why is not None and why.startswith("Header mismatch") and named in why


def test_a_body_without_a_version_is_left_to_the_meta_check():
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    assert header_mismatch(message, headers(mcp_method="tools/list")) is None


# -- server.protocol_eras: handshake switches the stateless era off --------------------------------


def test_with_protocol_eras_handshake_discover_is_unknown_and_meta_is_ignored(tmp_path):
    config = load_config(
        {},
        {
            "XDG_CONFIG_HOME": str(tmp_path),
            "XDG_STATE_HOME": str(tmp_path),
            "MCP_PROTOCOL_ERAS": "handshake",
        },
    )
    harness = Harness(config, FakeEngine(meta=ENGINE_META))
    assert error(harness.request("server/discover", modern()))["code"] == -32601
    listed = harness.request("tools/list", modern())["result"]
    assert set(listed) == {"tools"}  # served as the handshake era always was
    assert harness.request("ping", modern())["result"] == {}


# -- whatever a stateless request says, the reply is a well-formed 2026-07-28 response -------------

junk = st.none() | st.booleans() | st.integers() | st.text(max_size=6) | st.lists(st.integers())
meta_values = st.fixed_dictionaries(
    {},
    optional={
        "io.modelcontextprotocol/protocolVersion": st.sampled_from([*SUPPORTED, "v9"]) | junk,
        "io.modelcontextprotocol/clientCapabilities": st.just({}) | junk,
        "io.modelcontextprotocol/clientInfo": st.just({"name": "x", "version": "1"}) | junk,
        "progressToken": st.integers() | st.text(max_size=4) | junk,
    },
)
stateless_params = st.fixed_dictionaries(
    {"_meta": meta_values},
    optional={
        "name": st.sampled_from(["answer", "answer_quick", "research", "nope"]) | junk,
        "arguments": st.fixed_dictionaries(
            {}, optional={"query": st.text(max_size=5) | junk, "question": st.text(max_size=5)}
        )
        | junk,
        "cursor": junk,
    },
)
methods = st.sampled_from(
    [
        "server/discover",
        "tools/list",
        "tools/call",
        "prompts/list",
        "prompts/get",
        "ping",
        "initialize",
        "subscriptions/listen",
    ]
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(method=methods, params=stateless_params)
def test_every_stateless_reply_fits_the_2026_07_28_schema(config, method, params):
    keys = {"io.modelcontextprotocol/protocolVersion", "io.modelcontextprotocol/clientCapabilities"}
    # Without either key, only a method the handshake era lacks makes a request stateless.
    assume(keys & set(params["_meta"]) or method in ("server/discover", "subscriptions/listen"))
    harness = Harness(config, FakeEngine(meta=ENGINE_META))
    reply = harness.request(method, params, "r")
    if reply is None:  # a call started: its reply comes from the worker
        reply = harness.sent_reply("r")
    if "error" in reply:
        wire.JSONRPCErrorResponse.model_validate(reply)
        assert reply["id"] == "r" and reply["error"]["code"] in (-32601, -32602, -32022)
    else:
        wire.JSONRPCResultResponse.model_validate(reply)
        assert reply["result"]["resultType"] == "complete"
        server_info_of(reply["result"])
        check_meta_keys(reply["result"]["_meta"])
