"""The official MCP Python SDK (mcp 2.x) as a reference client, over stdio."""

from __future__ import annotations

import json
import sys
import time

import anyio
import pytest
from conftest import PROGRAM, base_env
from fake_upstream import SEARCHED, Reply

mcp = pytest.importorskip("mcp")
from mcp import Client, MCPError, StdioServerParameters  # noqa: E402
from mcp.client import session as mcp_session  # noqa: E402


@pytest.fixture
def params(tmp_path, fake):
    return StdioServerParameters(
        command=sys.executable,
        args=[*PROGRAM[1:], "--stdio"],
        env={**base_env(tmp_path), "OPENAI_BASE_URL": fake.base_url},
        cwd=str(tmp_path),
    )


def run(session, params, mode: str = "legacy", timeout: float = 20.0):
    """Runs `session(client)` inside a connected SDK client; returns its result."""
    outcome = {}

    async def main():
        with anyio.fail_after(timeout):
            async with Client(params, mode=mode, read_timeout_seconds=30) as client:
                outcome["value"] = await session(client)

    anyio.run(main)
    return outcome["value"]


def test_sdk_client_initializes_with_the_latest_protocol(params):
    async def session(client):
        return client.protocol_version, client.server_info, client.instructions

    version, info, instructions = run(session, params)
    assert version == "2025-11-25"
    assert info.name == "openai-responses-mcp"
    assert info.version
    assert "answer_quick" in instructions


def test_sdk_client_lists_the_three_tools_with_schemas(params):
    async def session(client):
        return (await client.list_tools()).tools

    tools = run(session, params)
    assert [tool.name for tool in tools] == ["answer", "answer_detailed", "answer_quick"]
    for tool in tools:
        assert tool.input_schema["required"] == ["query"]
        assert tool.output_schema["type"] == "object"
        assert tool.annotations.read_only_hint is True
        assert tool.annotations.open_world_hint is True


def test_sdk_client_calls_answer_and_validates_structured_content(params, fake):
    """The SDK checks structuredContent against the tool's outputSchema (RuntimeError if not)."""
    fake.enqueue(SEARCHED)

    async def session(client):
        return await client.call_tool("answer", {"query": "When was Python 3.14 released?"})

    result = run(session, params)
    assert result.is_error is False
    assert json.loads(result.content[0].text) == result.structured_content
    answer = result.structured_content
    assert answer["used_search"] is True
    assert answer["citations"][0]["url"] == "https://www.python.org/downloads/"
    assert "Sources:" in answer["answer"]
    assert result.meta["usage"]["total_tokens"] > 0


def test_sdk_client_sees_a_tool_failure_as_mcp_error_32001(params, fake):
    fake.enqueue(Reply(status=401))

    async def session(client):
        try:
            await client.call_tool("answer", {"query": "q"})
        except MCPError as exc:
            return exc
        raise AssertionError("call_tool did not raise")

    error = run(session, params)
    assert error.code == -32001
    assert error.message.startswith("answer failed: ")
    assert error.data["message"]
    assert "sk-" not in json.dumps(error.data)


def test_sdk_client_sees_invalid_arguments_as_mcp_error_32602(params):
    async def session(client):
        try:
            await client.call_tool("answer", {"query": ""})
        except MCPError as exc:
            return exc
        raise AssertionError("call_tool did not raise")

    error = run(session, params)
    assert error.code == -32602
    assert "'query'" in error.message


def test_sdk_client_progress_callback_receives_messages(params, fake):
    fake.enqueue(Reply(searches=[{"query": "q", "sources": []}], event_delay=0.04))
    seen = []

    async def on_progress(progress, total, message):
        seen.append((progress, message))

    async def session(client):
        return await client.call_tool(
            "answer", {"query": "q"}, progress_callback=on_progress, read_timeout_seconds=10
        )

    assert run(session, params).is_error is False
    assert len(seen) >= 2
    assert [p for p, _ in seen] == sorted({p for p, _ in seen})
    assert all(isinstance(message, str) and message for _, message in seen)


def test_sdk_client_default_mode_connects_quickly_and_stays_on_2026_07_28(params):
    """mode="auto" sends server/discover first; the answer keeps it on the stateless era."""

    async def session(client):
        return client.protocol_version, time.monotonic()

    started = time.monotonic()
    version, connected_at = run(session, params, mode="auto")
    assert version == "2026-07-28"
    # Below the SDK's 10 s discover timeout: the probe was answered, not waited out (starting
    # the server is inside this figure, so a busy machine needs the room).
    assert connected_at - started < mcp_session.DISCOVER_TIMEOUT_SECONDS - 2


def test_sdk_client_closes_without_waiting_for_its_kill_timeout(params):
    """On exit the SDK closes stdin and waits 2 s before SIGTERM: the server must go first."""
    marks = {}

    async def session(client):
        await client.list_tools()
        marks["closing"] = time.monotonic()
        return None

    run(session, params)
    assert time.monotonic() - marks["closing"] < 1.5
