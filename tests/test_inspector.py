"""The MCP Inspector CLI (npm @modelcontextprotocol/inspector) as a client, over stdio and HTTP.

Its default era (the initialize handshake) and `--protocol-era modern` (2026-07-28: server/discover,
then per-request _meta) each list the tools and call `answer` against the fake upstream. The
Inspector needs Node >= 22: `.ci/node-tools.sh` installs both under .venv/ and exports MCP_NODE
and MCP_NODE_TOOLS (`.ci/run` sources it before the tests).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, SCRIPT, base_env
from fake_upstream import SEARCHED, Reply
from http_client import wait_listening

LAUNCHER = "@modelcontextprotocol/inspector/clients/launcher/build/index.js"
ERAS = [
    pytest.param([], id="default-era"),
    pytest.param(["--protocol-era", "modern"], id="modern-era"),
]


def _node_major(node: str) -> int:
    try:
        out = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return 0
    return int(out.stdout.strip().lstrip("v").split(".")[0] or 0) if out.returncode == 0 else 0


def find_inspector() -> list[str] | None:
    """[node, launcher] from MCP_NODE/MCP_NODE_TOOLS or .ci/node-tools.sh's .venv paths."""
    nodes = [os.environ.get("MCP_NODE", "")]
    nodes += [str(p) for p in sorted(ROOT.glob(".venv/node22/node_modules/node-linux-*/bin/node"))]
    tools = Path(os.environ.get("MCP_NODE_TOOLS") or ROOT / ".venv/mcp-tools/node_modules")
    launcher = tools / LAUNCHER
    node = next((n for n in nodes if n and _node_major(n) >= 22), None)
    return [node, str(launcher)] if node and launcher.is_file() else None


INSPECTOR = find_inspector()
pytestmark = pytest.mark.skipif(
    INSPECTOR is None,
    reason="needs Node >= 22 and @modelcontextprotocol/inspector: source .ci/node-tools.sh "
    "(as .ci/run does) or set MCP_NODE and MCP_NODE_TOOLS",
)


def inspect(tmp_path: Path, target: list[str], *args: str) -> dict:
    """Runs `inspector --cli --format json ARGS TARGET`; returns its one JSON object on stdout."""
    home = tmp_path / "inspector-home"  # its catalog and storage stay out of the user's home
    home.mkdir(exist_ok=True)
    env = {**base_env(tmp_path), "HOME": str(home)}
    proc = subprocess.run(
        [*INSPECTOR, "--cli", "--format", "json", *args, *target],
        capture_output=True,
        text=True,
        env=env,
        cwd=str(tmp_path),
        timeout=90,
    )
    assert proc.returncode == 0, (
        f"inspector exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    )
    return json.loads(proc.stdout)


def stdio_target(tmp_path: Path, fake) -> list[str]:
    """The server as the Inspector launches it; it passes the environment on only through -e."""
    env = base_env(tmp_path, OPENAI_BASE_URL=fake.base_url)
    wanted = ("OPENAI_", "ANSWER_CACHE_TTL_S", "NO_PROXY", "XDG_")  # OPENAI_CHECK_RETIREMENTS too
    flags = [f"{k}={v}" for k, v in env.items() if k.startswith(wanted)]
    return [*(x for flag in flags for x in ("-e", flag)), sys.executable, str(SCRIPT), "--stdio"]


@pytest.fixture(params=["stdio", "http"])
def target(request, tmp_path, fake, spawn):
    """The Inspector's target: our server over stdio or over Streamable HTTP (stateful)."""
    if request.param == "stdio":
        return stdio_target(tmp_path, fake)
    server = spawn("--http", "127.0.0.1:0", upstream=fake)
    return [f"http://127.0.0.1:{wait_listening(server)}/mcp"]


@pytest.mark.parametrize("era", ERAS)
def test_inspector_lists_the_tools(tmp_path, target, era):
    listed = inspect(tmp_path, target, *era, "--method", "tools/list")
    tools = {tool["name"]: tool for tool in listed["result"]["tools"]}
    assert set(tools) == {"answer", "answer_detailed", "answer_quick"}
    assert tools["answer"]["inputSchema"]["required"] == ["query"]
    assert tools["answer"]["outputSchema"]["properties"]["citations"]


@pytest.mark.parametrize("era", ERAS)
def test_inspector_calls_answer(tmp_path, target, fake, era):
    fake.enqueue(SEARCHED)
    question = json.dumps({"query": "When was Python 3.14 released?"})
    called = inspect(
        tmp_path,
        target,
        *era,
        "--method",
        "tools/call",
        "--tool-name",
        "answer",
        "--tool-args-json",
        question,
    )["result"]
    assert not called.get("isError")
    assert json.loads(called["content"][0]["text"]) == called["structuredContent"]
    assert called["structuredContent"]["used_search"] is True
    assert called["structuredContent"]["citations"][0]["url"] == "https://www.python.org/downloads/"
    (request,) = fake.requests
    assert "When was Python 3.14 released?" in request.body["input"]


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_inspector_modern_era_completes_a_slow_call_as_a_task(tmp_path, fake, spawn, transport):
    """The Inspector declares the tasks extension in the modern era: a call slower than
    server.tasks.immediate_ms (2 s) comes back as a task, which it polls to the answer (the
    server's debug log, written to a file, shows the task)."""
    log = tmp_path / "debug.log"
    if transport == "stdio":
        target = [*stdio_target(tmp_path, fake), "--debug", str(log)]
    else:
        server = spawn("--http", "127.0.0.1:0", "--debug", str(log), upstream=fake)
        target = [f"http://127.0.0.1:{wait_listening(server)}/mcp"]
    fake.enqueue(Reply(text=SEARCHED.text, delay_before_headers=4))
    called = inspect(
        tmp_path,
        target,
        "--protocol-era",
        "modern",
        "--method",
        "tools/call",
        "--tool-name",
        "answer",
        "--tool-args-json",
        json.dumps({"query": "a slow question"}),
    )["result"]
    assert not called.get("isError")
    assert json.loads(called["content"][0]["text"]) == called["structuredContent"]
    assert called["structuredContent"]["answer"].startswith("Python 3.14.0")
    assert len(fake.requests) == 1
    assert "task created (extension) tool=answer" in log.read_text()


@pytest.mark.parametrize("era", ERAS)
def test_inspector_lists_and_gets_the_prompts(tmp_path, target, era):
    listed = inspect(tmp_path, target, *era, "--method", "prompts/list")["result"]
    assert [prompt["name"] for prompt in listed["prompts"]] == ["research", "ask-about-file"]
    got = inspect(
        tmp_path,
        target,
        *era,
        "--prompt-args",  # variadic: the next option, not the target, must end it
        "path=logs/build.log",
        "question=Why does it fail?",
        "--prompt-name",
        "ask-about-file",
        "--method",
        "prompts/get",
    )["result"]
    (message,) = got["messages"]
    assert message["role"] == "user"
    assert "Call the `answer` tool" in message["content"]["text"]
    assert '"files": [\n    "logs/build.log"\n  ]' in message["content"]["text"]
