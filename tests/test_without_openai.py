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


# An `openai` that is there but unusable: its import raising what a broken install raises
# (not an ImportError), or an old release without the names the server calls (openai 0.x).
BROKEN = {
    "raises": ('raise RuntimeError("pydantic mismatch")\n', "(RuntimeError: pydantic mismatch)"),
    "too-old": ('__version__ = "0.28.1"\n', "openai package 0.28.1 is too old (it has no openai."),
    "no-responses-api": (
        '__version__ = "1.40.0"\nclass OpenAI: pass\n'
        "DefaultHttpxClient = APIStatusError = APIConnectionError = OpenAI\n",
        "openai package 1.40.0 is too old (it has no openai.OpenAI.responses)",
    ),
}


@pytest.fixture(params=sorted(BROKEN))
def broken_openai(request, tmp_path, fake) -> tuple[dict, str]:
    source, said = BROKEN[request.param]
    stub = tmp_path / "stub" / "openai"
    stub.mkdir(parents=True)
    (stub / "__init__.py").write_text(source)
    return {"PYTHONPATH": str(stub.parent), "OPENAI_BASE_URL": fake.base_url}, said


@pytest.mark.parametrize("args", [["--ask", "q"], ["--doctor"]], ids=["ask", "doctor"])
def test_a_broken_or_too_old_openai_is_one_line_too(tmp_path, fake, broken_openai, args):
    """Issue 39: these were a traceback (RuntimeError, AttributeError) from --ask and --doctor."""
    env, said = broken_openai
    proc = run_cli(tmp_path, *args, env=env)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert said in line and INSTALL in line, line
    assert fake.requests == []


def test_a_broken_or_too_old_openai_is_a_tool_error_in_one_line(spawn, fake, broken_openai):
    """Issue 39: was "internal error (AttributeError); run with --debug and report it"."""
    env, said = broken_openai
    server = spawn(env=env)
    server.initialize()
    message = server.call("answer", {"query": "q"})["error"]["message"]
    assert said in message and INSTALL in message and "internal error" not in message, message
    assert server.request("ping")["result"] == {}
