"""MCP 2026-07-28 over Streamable HTTP, beside the handshake era on the same /mcp: no session,
headers that mirror the body, the spec's statuses, progress on the request's own stream, and
closing that stream as the cancel. Raw requests checked with the SDK's wire models, then the
official SDK client pinned to 2026-07-28 and in its default mode="auto"."""

from __future__ import annotations

import json

import anyio
import pytest
from conftest import META, MODERN, SUPPORTED, Server, base_env, wait_until
from fake_upstream import Reply
from http_client import (
    open_session,
    post,
    raw_connection,
    request,
    rpc,
    wait_listening,
)

wire = pytest.importorskip("mcp_types._v2026_07_28")

TOKEN = "tok-0123456789abcdef-XYZ"
SEARCH = {"query": "http 404", "sources": [{"type": "url", "url": "https://example.com/404"}]}
MODES = ["stateful", "stateless"]


@pytest.fixture(scope="module")
def servers(upstream, tmp_path_factory):
    """One stateful and one --stateless server for the whole module (they are slow to start)."""
    started = {}

    def get(mode: str) -> Server:
        if mode not in started:
            home = tmp_path_factory.mktemp(mode)
            args = ["--http", "127.0.0.1:0"] + (["--stateless"] if mode == "stateless" else [])
            env = base_env(home, OPENAI_BASE_URL=upstream.base_url)
            server = Server(args, env, home)
            server.port = wait_listening(server)
            started[mode] = server
        return started[mode]

    yield get
    for server in started.values():
        server.stop()


@pytest.fixture(params=MODES)
def port(request, servers, fake):
    return servers(request.param).port


SHARED_FAKE = True  # `fake` is the module's `upstream`, emptied per test (conftest)


def headers_for(message: dict, **overrides) -> dict:
    """The headers a 2026-07-28 client sends with `message`."""
    sent = {"MCP-Protocol-Version": MODERN, "Mcp-Method": message["method"]}
    params = message.get("params") or {}
    if message["method"] == "tools/call" and isinstance(params.get("name"), str):
        sent["Mcp-Name"] = params["name"]
    sent.update(overrides)
    return {k: v for k, v in sent.items() if v is not None}


def modern(method: str, id=1, meta=None, **params) -> dict:
    return rpc(method, {**params, "_meta": {**META, **(meta or {})}}, id)


def send(port, message: dict, **overrides):
    return post(port, message, headers=headers_for(message, **overrides))


def error_reply(response, status: int, code: int, request_id=1) -> dict:
    assert response.status == status, (response.status, response.body)
    assert response.headers["content-type"] == "application/json"
    assert b"\n" not in response.body.strip()  # one line: some clients parse line by line
    reply = response.json()
    wire.JSONRPCErrorResponse.model_validate(reply)
    assert reply["id"] == request_id and reply["error"]["code"] == code
    return reply["error"]


# -- what a 2026-07-28 request gets --------------------------------------------------------------


def test_discover_is_answered_without_a_session(port):
    response = send(port, modern("server/discover", id="d1"))
    assert response.status == 200
    assert "mcp-session-id" not in response.headers
    wire.DiscoverResultResponse.model_validate(response.json())
    result = response.json()["result"]
    assert result["supportedVersions"] == SUPPORTED
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "openai-responses-mcp"


def test_a_session_id_on_a_2026_07_28_request_is_ignored(port):
    response = send(port, modern("tools/list", 2), **{"Mcp-Session-Id": "no-such-session"})
    assert response.status == 200 and "mcp-session-id" not in response.headers
    wire.ListToolsResultResponse.model_validate(response.json())


def test_discover_without_client_info_is_answered(port):
    meta = {k: v for k, v in META.items() if not k.endswith("clientInfo")}
    message = rpc("server/discover", {"_meta": meta}, 105)
    response = send(port, message)
    assert response.status == 200
    wire.DiscoverResultResponse.model_validate(response.json())


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"_meta": {k: v for k, v in META.items() if not k.endswith("protocolVersion")}},
        {"_meta": {k: v for k, v in META.items() if not k.endswith("clientCapabilities")}},
    ],
    ids=["no-meta", "no-version", "no-caps"],
)
def test_missing_meta_is_400_invalid_params(port, params):
    response = send(port, rpc("server/discover", params, 101))
    assert "io.modelcontextprotocol/" in error_reply(response, 400, -32602, 101)["message"]


def test_an_unsupported_version_is_400_with_the_versions_we_speak(port):
    message = modern(
        "server/discover", 301, meta={"io.modelcontextprotocol/protocolVersion": "v999.0.0"}
    )
    response = send(port, message, **{"MCP-Protocol-Version": "v999.0.0"})
    error_reply(response, 400, -32022, 301)
    wire.UnsupportedProtocolVersionError.model_validate(response.json())
    assert response.json()["error"]["data"] == {"supported": SUPPORTED, "requested": "v999.0.0"}


def test_a_header_version_other_than_the_body_is_a_mismatch_before_anything_else(port):
    message = modern(
        "server/discover", 302, meta={"io.modelcontextprotocol/protocolVersion": "v999.0.0"}
    )
    error_reply(send(port, message), 400, -32020, 302)


@pytest.mark.parametrize(
    "method",
    [
        "initialize",
        "ping",
        "logging/setLevel",
        "resources/subscribe",
        "resources/unsubscribe",
        "subscriptions/listen",
        "completion/complete",
        "unknown/method",
    ],
)
def test_methods_2026_07_28_does_not_have_are_404_method_not_found(port, method):
    message = modern(method, 500, notifications={"toolsListChanged": True})
    error_reply(send(port, message), 404, -32601, 500)


def test_tools_list_is_cacheable_and_public(port):
    response = send(port, modern("tools/list", 202))
    assert response.status == 200 and "mcp-session-id" not in response.headers
    wire.ListToolsResultResponse.model_validate(response.json())
    result = response.json()["result"]
    assert [t["name"] for t in result["tools"]] == ["answer", "answer_detailed", "answer_quick"]
    assert result["ttlMs"] > 0 and result["cacheScope"] == "public"


def test_prompts_are_served_and_prompts_get_mirrors_its_name(port):
    listed = send(port, modern("prompts/list", 203))
    assert listed.status == 200
    wire.ListPromptsResultResponse.model_validate(listed.json())
    assert [p["name"] for p in listed.json()["result"]["prompts"]] == [
        "research",
        "ask-about-file",
    ]
    get = modern("prompts/get", 204, name="research", arguments={"question": "q"})
    response = send(port, get, **{"Mcp-Name": "research"})
    assert response.status == 200
    wire.GetPromptResultResponse.model_validate(response.json())
    assert error_reply(send(port, get, **{"Mcp-Name": "ask-about-file"}), 400, -32020, 204)
    unknown = modern("prompts/get", 205, name="nope")
    message = error_reply(send(port, unknown, **{"Mcp-Name": "nope"}), 400, -32602, 205)
    assert message["message"].startswith('Invalid params: unknown prompt "nope"')


# -- headers that mirror the body --------------------------------------------------------------


CALL = modern("tools/call", 7, name="answer", arguments={})


@pytest.mark.parametrize(
    ("message", "overrides"),
    [
        (modern("tools/list", 7), {"Mcp-Method": "prompts/list"}),
        (modern("tools/list", 7), {"Mcp-Method": None}),
        (modern("tools/list", 7), {"Mcp-Method": "TOOLS/LIST"}),
        (modern("tools/list", 7), {"MCP-Protocol-Version": None}),
        (CALL, {"Mcp-Name": "wrong_tool_name"}),
        (CALL, {"Mcp-Name": None}),
    ],
    ids=["other-method", "no-method", "method-case", "no-version", "other-name", "no-name"],
)
def test_headers_that_disagree_with_the_body_are_400_header_mismatch(port, message, overrides):
    message_text = error_reply(send(port, message, **overrides), 400, -32020, 7)["message"]
    assert message_text.startswith("Header mismatch")


def test_header_names_are_case_insensitive_and_values_trimmed(port):
    message = modern("tools/list", 8)
    headers = {"mcp-protocol-version": MODERN, "MCP-METHOD": "tools/list"}
    assert post(port, message, headers=headers).status == 200
    response = send(port, CALL, **{"Mcp-Name": "  answer  "})
    assert response.status == 200
    wire.CallToolResultResponse.model_validate(response.json())
    assert response.json()["result"]["isError"] is True  # the empty arguments, for the model


# -- calls: progress on their own stream; closing it cancels ------------------------------------


def test_a_call_with_a_progress_token_streams_progress_then_its_result(port, fake):
    fake.enqueue(Reply(searches=[SEARCH], event_delay=0.03))
    message = modern(
        "tools/call", 12, meta={"progressToken": "p1"}, name="answer", arguments={"query": "q"}
    )
    response = send(port, message)
    assert response.status == 200 and "mcp-session-id" not in response.headers
    assert response.headers["content-type"] == "text/event-stream"
    assert response.headers["x-accel-buffering"] == "no"
    *progress, (_, last) = response.events()
    assert progress
    for _, note in progress:
        wire.ProgressNotification.model_validate(note)
        assert note["params"]["progressToken"] == "p1" and note["params"]["message"]
    wire.CallToolResultResponse.model_validate(last)
    assert last["id"] == 12 and last["result"]["structuredContent"]["used_search"] is True


def raw_post(port, message: dict, headers: dict):
    """Sends a POST on a socket of our own, to hang up on it whenever the test likes."""
    body = json.dumps(message).encode()
    head = {
        "Host": f"127.0.0.1:{port}",
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "Content-Length": str(len(body)),
        **headers,
    }
    sock = raw_connection(port)
    lines = "".join(f"{name}: {value}\r\n" for name, value in head.items())
    sock.sendall(f"POST /mcp HTTP/1.1\r\n{lines}\r\n".encode() + body)
    return sock


@pytest.mark.parametrize("streamed", [True, False], ids=["events", "json"])
def test_closing_the_response_cancels_the_call_and_hangs_up_upstream(port, fake, streamed):
    fake.enqueue(Reply(searches=[SEARCH], stall_after_events=3))
    meta = {"progressToken": "p"} if streamed else {}
    message = modern("tools/call", 13, meta=meta, name="answer", arguments={"query": "q"})
    sock = raw_post(port, message, headers_for(message))
    fake.wait_for_requests(1)
    if streamed:
        received = b""
        while b"notifications/progress" not in received:
            received += sock.recv(65536)
        assert b"X-Accel-Buffering: no" in received
    sock.close()
    fake.wait_for_disconnect(0, timeout=10)  # a closed JSON reply is seen by a 0.25 s poll
    wait_until(lambda: request(port, "GET", "/healthz").json()["in_flight"] == 0, 10, "no call")


# -- both eras on one endpoint, and the rules every request meets --------------------------------


def test_the_handshake_era_is_unchanged_beside_it(servers):
    port = servers("stateful").port
    session = open_session(port)
    listed = post(port, rpc("tools/list", id=3), session)
    assert listed.status == 200 and set(listed.json()["result"]) == {"tools"}
    missing = post(port, rpc("tools/list", id=4), headers={"MCP-Protocol-Version": "2025-06-18"})
    assert missing.status == 400  # the handshake era still needs its session
    refused = post(port, rpc("ping", id=5), headers={"MCP-Protocol-Version": "2030-01-01"})
    assert refused.status == 400


def test_origin_and_host_rules_apply_to_2026_07_28_requests(port):
    message = modern("server/discover")
    foreign = send(port, message, Origin="http://evil.example.com")
    assert foreign.status == 403
    rebound = send(port, message, Host="evil.example.com")
    assert rebound.status == 421  # DNS rebinding: not a name of this server
    local = send(port, message, Origin=f"http://127.0.0.1:{port}", Host=f"127.0.0.1:{port}")
    assert local.status == 200


def test_a_preflight_allows_the_2026_07_28_headers(port):
    response = request(port, "OPTIONS", "/mcp", headers={"Origin": "http://localhost:3000"})
    allowed = response.headers["access-control-allow-headers"]
    assert "Mcp-Method" in allowed and "Mcp-Name" in allowed


def test_a_token_is_needed_in_both_eras(upstream, tmp_path):
    env = base_env(tmp_path, OPENAI_BASE_URL=upstream.base_url, MCP_HTTP_TOKEN=TOKEN)
    server = Server(["--http", "127.0.0.1:0"], env, tmp_path)
    try:
        port = wait_listening(server)
        message = modern("server/discover")
        refused = send(port, message)
        assert refused.status == 401
        assert send(port, message, Authorization=f"Bearer {TOKEN}").status == 200
    finally:
        server.stop()


# -- the official SDK client ----------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["2026-07-28", "auto"])
def test_sdk_client_over_http_lists_calls_follows_progress_and_cancels(port, fake, mode):
    from mcp import Client

    fake.enqueue(Reply(searches=[SEARCH], event_delay=0.03), Reply(stall_after_events=2))
    seen = {}

    async def main():
        with anyio.fail_after(30):
            async with Client(f"http://127.0.0.1:{port}/mcp", mode=mode) as client:
                seen["version"] = client.protocol_version
                seen["tools"] = [tool.name for tool in (await client.list_tools()).tools]
                progress = []

                async def on_progress(done, total, message):
                    progress.append((done, message))

                seen["result"] = await client.call_tool(
                    "answer", {"query": "What is HTTP 404?"}, progress_callback=on_progress
                )
                seen["progress"] = progress
                async with anyio.create_task_group() as group:
                    group.start_soon(client.call_tool, "answer", {"query": "a slow one"})
                    await anyio.to_thread.run_sync(fake.wait_for_requests, 2)
                    group.cancel_scope.cancel()  # the SDK closes that request's stream
                seen["hung_up"] = await anyio.to_thread.run_sync(
                    lambda: fake.wait_for_disconnect(1, 3)
                )
                seen["after"] = len((await client.list_tools()).tools)

    anyio.run(main)
    assert seen["version"] == MODERN
    assert seen["tools"] == ["answer", "answer_detailed", "answer_quick"]
    result = seen["result"]
    assert result.is_error is False
    assert json.loads(result.content[0].text) == result.structured_content
    assert result.meta["io.modelcontextprotocol/serverInfo"]["name"] == "openai-responses-mcp"
    assert len(seen["progress"]) >= 2 and all(message for _, message in seen["progress"])
    assert seen["hung_up"] and seen["after"] == 3
