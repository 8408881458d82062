"""The official MCP Python SDK client on the stateless era (2026-07-28): pinned to it, and in its
default mode="auto", which probes server/discover and must stay there."""

from __future__ import annotations

import json
import sys
from dataclasses import replace

import anyio
import fake_upstream
import pytest
from conftest import PROGRAM, base_env
from fake_upstream import Reply

mcp = pytest.importorskip("mcp")
from mcp import Client, StdioServerParameters  # noqa: E402

MODES = ["2026-07-28", "auto"]
SEARCHED = replace(fake_upstream.SEARCHED, event_delay=0.03)


def stdio_params(tmp_path, fake) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=[*PROGRAM[1:], "--stdio"],
        env={**base_env(tmp_path), "OPENAI_BASE_URL": fake.base_url},
        cwd=str(tmp_path),
    )


async def exercise(client, fake) -> dict:
    """Everything a modern client does with us, in one connection: what it saw."""
    seen: dict = {"version": client.protocol_version, "info": client.server_info}
    seen["tools"] = (await client.list_tools()).tools
    progress = []

    async def on_progress(done, total, message):
        progress.append((done, message))

    seen["result"] = await client.call_tool(
        "answer",
        {"query": "When was Python 3.14 released?"},
        progress_callback=on_progress,
        read_timeout_seconds=10,
    )
    seen["progress"] = progress
    async with anyio.create_task_group() as group:
        group.start_soon(client.call_tool, "answer", {"query": "a slow one"})
        await anyio.to_thread.run_sync(fake.wait_for_requests, 2)
        group.cancel_scope.cancel()  # the SDK says notifications/cancelled on the pipe
    seen["hung_up"] = await anyio.to_thread.run_sync(lambda: fake.wait_for_disconnect(1, 3))
    seen["after"] = len((await client.list_tools()).tools)
    return seen


def check(seen: dict, mode: str) -> None:
    assert seen["version"] == "2026-07-28"
    if mode == "auto":  # only the probe asks server/discover, which says who we are
        assert seen["info"].name == "openai-responses-mcp"
    assert [tool.name for tool in seen["tools"]] == ["answer", "answer_detailed", "answer_quick"]
    result = seen["result"]
    assert result.is_error is False
    answer = result.structured_content
    assert json.loads(result.content[0].text) == answer
    assert answer["used_search"] is True
    assert answer["citations"][0]["url"] == "https://www.python.org/downloads/"
    assert result.meta["usage"]["total_tokens"] > 0
    assert result.meta["io.modelcontextprotocol/serverInfo"]["name"] == "openai-responses-mcp"
    assert len(seen["progress"]) >= 2
    assert [p for p, _ in seen["progress"]] == sorted({p for p, _ in seen["progress"]})
    assert all(message for _, message in seen["progress"])
    assert seen["hung_up"] and seen["after"] == 3


@pytest.mark.parametrize("mode", MODES)
def test_sdk_client_over_stdio_lists_calls_follows_progress_and_cancels(tmp_path, fake, mode):
    fake.enqueue(SEARCHED, Reply(stall_after_events=2))
    seen = {}

    async def main():
        with anyio.fail_after(30):
            async with Client(stdio_params(tmp_path, fake), mode=mode) as client:
                seen.update(await exercise(client, fake))

    anyio.run(main)
    check(seen, mode)
