"""The handoff for clients without tasks: a call still running after request.handoff_after_s
answers with an id, and the fourth tool answer_result collects the answer. Checked with the
official SDK client (which rejects structuredContent that does not fit the outputSchema) in
both eras, and raw over stdio; the client table decides when the key is unset."""

from __future__ import annotations

import sys
import time

import anyio
import pytest
from conftest import META, MODERN, PROGRAM, Server, base_env, cancel, send_call
from fake_upstream import Reply

mcp = pytest.importorskip("mcp")
from mcp import Client, MCPError, StdioServerParameters  # noqa: E402

HANDOFF = "openai-responses-mcp/handoff"
ANSWER_KEYS = {"answer", "used_search", "citations", "model", "response_id"}
CONFIG = "request:\n  handoff_after_s: 1\n"


SHARED_FAKE = True  # `fake` is the module's `upstream`, emptied per test (conftest)


@pytest.fixture
def params(tmp_path, fake):
    (tmp_path / "config.yaml").write_text(CONFIG)
    return StdioServerParameters(
        command=sys.executable,
        args=[*PROGRAM[1:], "--stdio", "--config", str(tmp_path / "config.yaml")],
        env={**base_env(tmp_path), "OPENAI_BASE_URL": fake.base_url},
        cwd=str(tmp_path),
    )


def run(session, params, mode: str):
    outcome = {}

    async def main():
        with anyio.fail_after(40):
            async with Client(params, mode=mode, read_timeout_seconds=30) as client:
                outcome["value"] = await session(client)

    anyio.run(main)
    return outcome["value"]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_the_sdk_client_gets_a_handoff_then_collects_the_answer(params, fake, mode):
    fake.enqueue(Reply(delay_before_headers=3))

    async def session(client):
        tools = [tool.name for tool in (await client.list_tools()).tools]
        first = await client.call_tool("answer", {"query": "a long question"})
        handoff_id = first.meta[HANDOFF]["id"]
        results = []
        for _ in range(20):
            result = await client.call_tool("answer_result", {"id": handoff_id, "wait_s": 5})
            results.append(result)
            if result.meta[HANDOFF]["status"] == "completed":
                break
        return tools, first, results

    tools, first, results = run(session, params, mode)
    assert tools == ["answer", "answer_detailed", "answer_quick", "answer_result"]
    assert first.is_error is False
    assert first.meta[HANDOFF]["status"] == "working"
    assert set(first.structured_content) == ANSWER_KEYS  # the SDK checked it against the schema
    assert "answer_result" in first.structured_content["answer"]
    assert first.meta[HANDOFF]["id"] in first.structured_content["answer"]
    final = results[-1]
    assert final.meta[HANDOFF] == {"id": first.meta[HANDOFF]["id"], "status": "completed"}
    assert final.structured_content["answer"].startswith("HTTP 404")
    assert final.meta["usage"]["total_tokens"] > 0
    assert len([r for r in fake.requests if r.path == "/v1/responses"]) == 1


def test_a_quick_call_is_never_handed_off(params, fake, tmp_path):
    # 5 s, not 1: on a loaded machine the first call, which imports openai, can outlast 1 s.
    (tmp_path / "config.yaml").write_text("request:\n  handoff_after_s: 5\n")

    async def session(client):
        return await client.call_tool("answer", {"query": "quick"})

    result = run(session, params, "legacy")
    assert HANDOFF not in (result.meta or {})
    assert result.structured_content["answer"].startswith("HTTP 404")


def test_a_handed_off_call_that_fails_fails_answer_result_with_32001(params, fake):
    fake.enqueue(Reply(status=401, delay_before_headers=2))

    async def session(client):
        first = await client.call_tool("answer", {"query": "will fail"})
        try:
            for _ in range(10):
                await client.call_tool(
                    "answer_result", {"id": first.meta[HANDOFF]["id"], "wait_s": 5}
                )
        except MCPError as exc:
            return exc
        raise AssertionError("answer_result never failed")

    error = run(session, params, "legacy")
    assert error.code == -32001 and error.message.startswith("answer failed: ")


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_an_unknown_handoff_id_is_a_clear_error(params, mode):
    async def session(client):
        try:
            return await client.call_tool("answer_result", {"id": "h-nope"})
        except MCPError as exc:
            return exc

    outcome = run(session, params, mode)
    if mode == "legacy":
        assert outcome.code == -32602 and "unknown id" in outcome.message
    else:  # 2026-07-28: a tool execution error the model can act on
        assert outcome.is_error is True
        assert "unknown id" in outcome.content[0].text


# -- when the handoff applies: the client table ---------------------------------------------------


@pytest.mark.parametrize(
    "name, listed",
    [("codex-mcp-client", True), ("claude-ai", True), ("claude-code", False), ("pytest", False)],
)
def test_answer_result_is_listed_only_for_clients_that_need_the_handoff(tmp_path, name, listed):
    server = Server(["--stdio"], base_env(tmp_path), tmp_path)
    try:
        init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": name}}
        server.request("initialize", init)
        tools = [tool["name"] for tool in server.request("tools/list")["result"]["tools"]]
        assert ("answer_result" in tools) is listed
        assert tools[:3] == ["answer", "answer_detailed", "answer_quick"]
    finally:
        server.stop()


def test_zero_turns_the_handoff_off_for_every_client(tmp_path):
    (tmp_path / "c.yaml").write_text("request:\n  handoff_after_s: 0\n")
    server = Server(["--stdio", "--config", str(tmp_path / "c.yaml")], base_env(tmp_path), tmp_path)
    try:
        init = {"protocolVersion": "2025-06-18", "clientInfo": {"name": "codex-mcp-client"}}
        server.request("initialize", init)
        assert len(server.request("tools/list")["result"]["tools"]) == 3
        reply = server.request("tools/call", {"name": "answer_result", "arguments": {"id": "x"}})
        assert reply["error"]["code"] == -32601  # no such tool for this client
    finally:
        server.stop()


def test_the_environment_sets_the_handoff_for_every_client(tmp_path):
    """MCP_HANDOFF_AFTER_S: how an agent's MCP config (e.g. Codex's [mcp_servers.NAME.env])
    pairs the handoff with a lowered tool timeout."""
    server = Server(["--stdio"], base_env(tmp_path, MCP_HANDOFF_AFTER_S="5"), tmp_path)
    try:
        init = {"protocolVersion": "2025-06-18", "clientInfo": {"name": "pytest"}}
        server.request("initialize", init)
        tools = [tool["name"] for tool in server.request("tools/list")["result"]["tools"]]
        assert "answer_result" in tools
    finally:
        server.stop()


# -- no lockout: a handoff counts only once handed off, and can be cancelled ----------------------


def replies_to(server: Server, ids: set, timeout: float = 20.0) -> dict:
    """The replies to these request ids, by id (other messages are skipped)."""
    got: dict = {}
    deadline = time.monotonic() + timeout
    while set(got) != ids:
        message = server.recv(max(0.01, deadline - time.monotonic()))
        if message.get("id") in ids and "method" not in message:
            got[message["id"]] = message
    return got


def handoff_id(reply: dict) -> str | None:
    meta = reply["result"].get("_meta") or {}
    return meta.get(HANDOFF, {}).get("id")


def test_uncollected_handoffs_never_lock_a_client_out(spawn, fake):
    """The review's script: a Codex-like client leaves 16 handoffs (server.tasks.max_per_client)
    uncollected. A quick call still answers; a 17th long call answers inline; once handoffs
    have ended uncollected, a new long call is handed off in place of the oldest."""
    server = spawn("--stdio", config=CONFIG, upstream=fake)
    server.initialize()
    fake.default = Reply(delay_before_headers=2)
    for n in range(17):
        send_call(server, f"long-{n}", query=f"long question {n}")
    first = replies_to(server, {f"long-{n}" for n in range(17)})
    handed = [r for r in first.values() if handoff_id(r)]
    inline = [r for r in first.values() if not handoff_id(r)]
    assert len(handed) == 16  # the cap counts handoffs only
    assert len(inline) == 1 and inline[0]["result"]["structuredContent"]["answer"]

    fake.default = Reply()
    quick = server.call("answer_quick", {"query": "a one-second question"})
    assert "result" in quick, quick  # before: -32000 too many open tasks
    assert handoff_id(quick) is None

    # Every handoff has ended by now, none collected: the fake has sent each reply in full,
    # and the server has had a lower bound of 1.5 s to read their ends.
    fake.wait_until(lambda: all(r.finished_at is not None for r in fake.requests), 30)
    time.sleep(1.5)  # sleep: unreported (issue 40): the server reads each handoff's end
    fake.default = Reply(delay_before_headers=3)
    late = server.call("answer", {"query": "one more long question"})
    assert handoff_id(late) is not None  # the oldest uncollected handoff made room
    # All ended: each is collected now, except the one dropped to make room.
    gone = [server.call("answer_result", {"id": handoff_id(r), "wait_s": 0}) for r in handed]
    unknown = [r for r in gone if "error" in r]
    assert len(unknown) == 1 and "unknown id" in unknown[0]["error"]["message"]


def test_answer_result_with_cancel_stops_a_handoff(spawn, fake):
    server = spawn("--stdio", config=CONFIG, upstream=fake)
    server.initialize()
    fake.enqueue(Reply(delay_before_headers=30))
    first = server.call("answer", {"query": "a question to give up on"})
    the_id = handoff_id(first)
    assert the_id is not None
    fake.wait_for_requests(1)
    cancelled = server.call("answer_result", {"id": the_id, "cancel": True})
    assert cancelled["result"]["_meta"][HANDOFF] == {"id": the_id, "status": "cancelled"}
    assert set(cancelled["result"]["structuredContent"]) == ANSWER_KEYS
    assert cancelled["result"]["structuredContent"]["answer"].startswith("Cancelled")
    after = server.call("answer_result", {"id": the_id, "wait_s": 5})
    assert after["error"]["code"] == -32001 and "cancelled" in after["error"]["message"]
    fake.wait_for_disconnect(0, timeout=10)  # the upstream request too


def test_answer_result_with_cancel_drops_a_handoff_that_has_ended(spawn, fake):
    server = spawn("--stdio", config=CONFIG, upstream=fake)
    server.initialize()
    fake.enqueue(Reply(delay_before_headers=2))
    the_id = handoff_id(server.call("answer", {"query": "a question answered meanwhile"}))
    assert the_id is not None
    for _ in range(30):  # collected once it has ended (each waits up to handoff_after_s)
        answer = server.call("answer_result", {"id": the_id, "wait_s": 30})
        if answer["result"]["_meta"][HANDOFF]["status"] == "completed":
            break
    assert answer["result"]["_meta"][HANDOFF]["status"] == "completed", answer
    dropped = server.call("answer_result", {"id": the_id, "cancel": True})
    assert dropped["result"]["structuredContent"]["answer"].startswith("Dropped")
    gone = server.call("answer_result", {"id": the_id, "wait_s": 0})
    assert "unknown id" in gone["error"]["message"]  # as the result said: not kept


def test_the_protocols_cancel_of_a_handed_off_call_stops_its_handoff(spawn, fake):
    server = spawn("--stdio", config=CONFIG, upstream=fake)
    server.initialize()
    fake.enqueue(Reply(delay_before_headers=30))
    send_call(server, "started", query="a question the user interrupts")
    first = replies_to(server, {"started"})["started"]
    the_id = handoff_id(first)
    assert the_id is not None
    cancel(server, "started")  # notifications/cancelled for the call that started it
    after = server.call("answer_result", {"id": the_id, "wait_s": 5})
    assert after["error"]["code"] == -32001 and "cancelled" in after["error"]["message"]


# -- the handoff's cancel over HTTP, in every era -----------------------------------------------

HTTP_ERAS = {
    "session": ([], {"MCP-Protocol-Version": "2025-06-18"}),
    "stateless": (["--stateless"], {"MCP-Protocol-Version": "2025-06-18"}),
    "2026-07-28": ([], {"MCP-Protocol-Version": MODERN}),
}


def http_era(spawn, fake, era: str):
    """A server over HTTP and a function posting a message in `era` (its session, if any)."""
    from http_client import open_session, post, wait_listening

    flags, headers = HTTP_ERAS[era]
    env = {"MCP_TASK_SECRET": "s3cret-" + "0123456789abcdefghijklmnopqrstuvwxyz"}
    server = spawn("--http", "127.0.0.1:0", *flags, config=CONFIG, env=env, upstream=fake)
    server.port = wait_listening(server)
    session = open_session(server.port) if era == "session" else None

    def send(message: dict):
        sent = dict(headers)
        if era == "2026-07-28":
            sent["Mcp-Method"] = message["method"]
            if "id" in message:
                message["params"]["_meta"] = META
            if message["method"] == "tools/call":
                sent["Mcp-Name"] = message["params"]["name"]
        return post(server.port, message, session, sent, timeout=30)

    send.server = server
    return send


def slow(era: str) -> Reply:
    """A long call: under --stateless one OpenAI names at once (a handoff's id is signed with
    its response's), else one whose stream closing the fake sees at once."""
    return Reply(event_delay=1.0) if era == "stateless" else Reply(delay_before_headers=30)


def stopped_upstream(fake, era: str) -> None:
    """The call stopped upstream: its stream closed, or (--stateless runs it in background
    mode, for any instance to follow) POST /responses/{id}/cancel."""
    if era != "stateless":
        return fake.wait_for_disconnect(0, timeout=10)
    fake.wait_until(lambda: any(r.path.endswith("/cancel") for r in fake.requests), 10)


def http_call(send, request_id, tool: str, arguments: dict) -> dict:
    reply = send(
        {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": "tools/call",
            "params": {"name": tool, "arguments": arguments},
        }
    )
    assert reply.status == 200, send.server.stderr
    return reply.json() if reply.body.startswith(b"{") else reply.events()[-1][1]


@pytest.mark.parametrize("era", list(HTTP_ERAS))
def test_over_http_the_protocols_cancel_of_a_handed_off_call_stops_its_handoff(spawn, fake, era):
    """notifications/cancelled for the tools/call that was handed off: with its session, tied
    to its client under --stateless, and in 2026-07-28, whose POSTs carry no session."""
    send = http_era(spawn, fake, era)
    fake.enqueue(slow(era))
    first = http_call(send, "started", "answer", {"query": "a question the user interrupts"})
    the_id = handoff_id(first)
    assert the_id is not None, first
    fake.wait_for_requests(1, timeout=30)  # a loaded machine's first call may hand off sooner
    cancelled = {"jsonrpc": "2.0", "method": "notifications/cancelled"}
    assert send({**cancelled, "params": {"requestId": "started"}}).status == 202
    stopped_upstream(fake, era)
    after = http_call(send, "after", "answer_result", {"id": the_id, "wait_s": 5})
    assert after["error"]["code"] == -32001 and "cancelled" in after["error"]["message"]


@pytest.mark.parametrize("era", list(HTTP_ERAS))
def test_over_http_answer_result_with_cancel_stops_a_handoff(spawn, fake, era):
    send = http_era(spawn, fake, era)
    fake.enqueue(slow(era))
    first = http_call(send, 1, "answer", {"query": "a question to give up on"})
    the_id = handoff_id(first)
    assert the_id is not None, first
    fake.wait_for_requests(1, timeout=30)
    cancelled = http_call(send, 2, "answer_result", {"id": the_id, "cancel": True})
    assert cancelled["result"]["_meta"][HANDOFF] == {"id": the_id, "status": "cancelled"}
    stopped_upstream(fake, era)
