"""Without `openai` (issue 39): every entry point says so in one line naming the install
command, never a traceback. The real program runs with a stub package first on its path that
raises ModuleNotFoundError as a missing package does (PYTHONPATH starts it cold)."""

from __future__ import annotations

import pytest
from conftest import run_cli
from http_client import call_params, open_session, post, rpc, wait_listening

INSTALL = '-m pip install "openai>=3.54,<4"'
SAID = "the openai package cannot be imported (No module named 'openai'); install it: "


@pytest.fixture
def no_openai(tmp_path, fake) -> dict:
    """The environment of a Python where `import openai` fails."""
    stub = tmp_path / "stub" / "openai"
    stub.mkdir(parents=True)
    (stub / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'openai'\", name='openai')\n"
    )
    return {"PYTHONPATH": str(stub.parent), "OPENAI_BASE_URL": fake.base_url}


def one_line(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr
    (line,) = stderr.strip().splitlines()
    assert SAID in line and INSTALL in line, line
    return line


@pytest.mark.parametrize("args", [["--ask", "q"], ["--doctor", "--live"]], ids=["ask", "doctor"])
def test_the_command_line_says_it_in_one_line_on_stderr(tmp_path, fake, no_openai, args):
    proc = run_cli(tmp_path, *args, env=no_openai)
    assert proc.returncode != 0
    one_line(proc.stderr)
    assert fake.requests == []


def tool_error(reply: dict) -> str:
    assert "error" in reply, reply
    message = reply["error"]["message"]
    assert message.startswith("answer failed: " + SAID), message
    assert INSTALL in message and "\n" not in message
    return message


def message_of(reply) -> dict:
    """A POST's one JSON-RPC reply, sent as JSON or as an SSE event."""
    assert reply.status == 200, reply
    return reply.json() if reply.body.lstrip().startswith(b"{") else reply.events()[-1][1]


def test_a_tools_call_over_stdio_is_a_tool_error_in_one_line(spawn, fake, no_openai):
    server = spawn(env=no_openai)
    server.initialize()
    tool_error(server.call("answer", {"query": "q"}))
    assert server.request("ping")["result"] == {}  # and it keeps serving
    assert "Traceback" not in server.stderr


def test_a_tools_call_over_http_is_a_tool_error_in_one_line(spawn, fake, no_openai):
    server = spawn("--http", "127.0.0.1:0", env=no_openai)
    port = wait_listening(server)
    session = open_session(port)
    tool_error(message_of(post(port, rpc("tools/call", call_params(), id=2), session)))
    assert "Traceback" not in server.stderr
    assert message_of(post(port, rpc("ping", id=3), session))["result"] == {}
