"""Inside the real agents: pinned Claude Code and Codex CLI run headless, each against the
scripted model API (tests/scripted_models.py) and with this server as its MCP server, itself
answering from the fake Responses API. What the agent's model was given is what a user's model
gets, so these tests prove our answers reach it, over each transport, however long they take.

`pytest -m agents` runs them (the README's everyday line leaves them out: see pyproject's
addopts). The agents are installed with npm, the first time, into AGENTS_CACHE (default
~/.cache/openai-responses-mcp/agents) and reused after; without npm they skip.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import SCRIPT, TEST_KEY, wait_until
from fake_upstream import Reply
from http_client import wait_listening
from scripted_models import HANDOFF_ID, QUOTE_PREFIX, Received, ScriptedModels, ask, is_tool

import openai_responses_mcp as orm

pytestmark = [
    pytest.mark.agents,
    pytest.mark.skipif(sys.platform == "win32", reason="the agent tests run on Linux and macOS"),
]

HERE = Path(__file__).resolve().parent
RECORDER = HERE / "mcp_recorder.py"
NAME = "responses"  # the MCP server's name in each agent's config
TOKEN = "agent-token-0123456789abcdef"
SLOW_S = 70  # a long answer_detailed: longer than either agent's default patience allows inline
# The cited page is named only by the citation, not in the answer's text: the URL reaches the
# model only if the citations do.
CITED = "https://www.python.org/downloads/release/python-3140/"
ANSWER = Reply(
    text="Python 3.14.0 was released on 2025-10-07.",
    searches=[{"query": "python 3.14 release date", "sources": [{"type": "url", "url": CITED}]}],
    citations=[{"url": CITED, "title": "Python Release Python 3.14.0"}],
)


# -- The pinned agents, installed on first use -----------------------------------------------------


@dataclass(frozen=True)
class Pinned:
    package: str
    version: str
    command: str  # the package's bin

    @property
    def folder(self) -> str:
        return f"{self.package.rsplit('/', 1)[-1]}-{self.version}"


CLAUDE_CODE = Pinned("@anthropic-ai/claude-code", "2.1.332", "claude")
CODEX = Pinned("@openai/codex", "0.171.0", "codex")


def agents_cache() -> Path:
    configured = os.environ.get("AGENTS_CACHE")
    if configured:
        return Path(configured)
    return Path.home() / ".cache" / "openai-responses-mcp" / "agents"


def installed(agent: Pinned) -> Path:
    """The agent's executable, npm-installed into the cache once (a lock keeps xdist workers
    from installing the same package twice at once)."""
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip("npm not found: the agent tests install Claude Code and Codex CLI with npm")
    root = agents_cache()
    root.mkdir(parents=True, exist_ok=True)
    prefix = root / agent.folder
    executable = prefix / "node_modules" / ".bin" / agent.command
    import fcntl  # POSIX only, like this module

    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if version_of(executable) != agent.version:
            shutil.rmtree(prefix, ignore_errors=True)  # absent, or an install cut short
            spec = f"{agent.package}@{agent.version}"
            command = [npm, "install", "--prefix", str(prefix), "--no-save", "--no-audit"]
            done = subprocess.run(
                [*command, "--no-fund", "--loglevel=error", spec],
                capture_output=True,
                text=True,
                timeout=900,
            )
            assert done.returncode == 0, f"npm install {spec} failed:\n{done.stderr[-2000:]}"
    assert version_of(executable) == agent.version, f"{executable} is not {agent.version}"
    return executable


def version_of(executable: Path) -> str | None:
    """What `--version` says (`2.1.332 (Claude Code)`, `codex-cli 0.171.0`), or None."""
    if not executable.exists():
        return None
    try:
        said = subprocess.run([executable, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = re.search(r"\b(\d+\.\d+\.\d+)\b", said.stdout)
    return found.group(1) if found else None


@pytest.fixture(scope="session")
def claude() -> Path:
    return installed(CLAUDE_CODE)


@pytest.fixture(scope="session")
def codex() -> Path:
    return installed(CODEX)


@pytest.fixture(scope="session")
def models():
    """The scripted model API every agent run of this worker shares."""
    with ScriptedModels() as api:
        yield api


# -- One agent run ---------------------------------------------------------------------------------


def server_env(tmp_path: Path, fake, **extra: str) -> dict:
    """What our server needs in the agent's MCP config: the fake upstream and private state."""
    return {
        "OPENAI_API_KEY": TEST_KEY,
        "OPENAI_BASE_URL": fake.base_url,
        "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
        "XDG_STATE_HOME": str(tmp_path / "xdg-state"),
        "ANSWER_CACHE_TTL_S": "0",
        "NO_PROXY": "127.0.0.1,localhost",
        "PYTHONUNBUFFERED": "1",
        "DEBUG": str(tmp_path / "server-debug.log"),  # on, and copied there (not stdout)
        **extra,
    }


def recorded_command(tmp_path: Path) -> list[str]:
    """Our server over stdio, behind the recorder (tests/mcp_recorder.py)."""
    return [sys.executable, str(RECORDER), str(tmp_path / "wire"), "--", sys.executable]


def agent_env(tmp_path: Path, **extra: str) -> dict:
    """A private HOME and nothing of the user's agents', keys or proxies."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    keep = ("PATH", "LANG", "LC_ALL", "TMPDIR", "SYSTEMROOT")
    env = {key: os.environ[key] for key in keep if key in os.environ}
    env.update(HOME=str(home), NO_PROXY="127.0.0.1,localhost", TERM="dumb", **extra)
    return env


@dataclass
class Run:
    output: str  # what the agent printed on stdout
    stderr: str
    code: int
    seconds: float
    wire: Path  # the recorder's folder

    def sent(self) -> list[dict]:
        """Every message the agent wrote to our server."""
        return _messages((self.wire / "stdin").read_bytes())

    def replies(self) -> list[dict]:
        """Every message our server wrote, each one whole JSON-RPC (else the test fails here)."""
        return _messages((self.wire / "stdout").read_bytes())


def _messages(data: bytes) -> list[dict]:
    lines = data.split(b"\n")
    assert lines[-1] == b"", f"a partial line at the end: {lines[-1][:200]!r}"
    messages = [json.loads(line) for line in lines[:-1]]
    assert all(m.get("jsonrpc") == "2.0" for m in messages)
    return messages


def run_agent(command: list, tmp_path: Path, env: dict, timeout: float) -> Run:
    started = time.monotonic()
    done = subprocess.run(
        command,
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    run = Run(
        done.stdout, done.stderr, done.returncode, time.monotonic() - started, tmp_path / "wire"
    )
    assert run.code == 0, f"agent exited {run.code}\nstdout:\n{run.output}\nstderr:\n{run.stderr}"
    return run


def run_claude(claude, models, tmp_path, prompt, server: dict, timeout=120.0, extra=()) -> Run:
    """`claude -p PROMPT` with only our server (stdio or http) and its tools allowed; `extra`:
    more of its flags."""
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {NAME: server}}))
    command = [claude, "-p", prompt, "--mcp-config", str(config), "--strict-mcp-config"]
    command += ["--output-format", "text", "--allowedTools", f"mcp__{NAME}", *extra]
    env = agent_env(
        tmp_path,
        ANTHROPIC_BASE_URL=models.base_url,
        ANTHROPIC_API_KEY="sk-ant-scripted",
        DISABLE_AUTOUPDATER="1",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
    )
    return run_agent(command, tmp_path, env, timeout)


def claude_stdio(tmp_path, fake, **env) -> dict:
    command = recorded_command(tmp_path)
    args = [*command[1:], str(SCRIPT), "--stdio"]
    return {"command": command[0], "args": args, "env": server_env(tmp_path, fake, **env)}


def codex_stdio(tmp_path, fake, **env) -> dict:
    command = recorded_command(tmp_path)
    args = [*command[1:], str(SCRIPT), "--stdio"]
    # Without `required`, `codex exec` starts the turn without the tools of a server that is
    # still starting (seen here under load: the model found no tool).
    server = {"command": command[0], "args": args, "required": True}
    return {**server, "env": server_env(tmp_path, fake, **env)}


def run_codex(codex, models, tmp_path, prompt, server: dict, timeout=120.0, **env) -> Run:
    """`codex exec PROMPT` with CODEX_HOME's config.toml naming the scripted API and, as
    [mcp_servers.NAME], `server` (its "env" becomes the [mcp_servers.NAME.env] table)."""
    codex_home = tmp_path / "codex-home"
    codex_home.mkdir()
    settings = {k: v for k, v in server.items() if k != "env"}
    lines = [
        'model = "gpt-5.2-codex"',
        'model_provider = "scripted"',
        'approval_policy = "never"',
        'sandbox_mode = "read-only"',
        "[model_providers.scripted]",
        'name = "scripted"',
        f'base_url = "{models.base_url}/v1"',
        'wire_api = "responses"',
        'env_key = "SCRIPTED_KEY"',
        f"[mcp_servers.{NAME}]",
        *(f"{key} = {json.dumps(value)}" for key, value in settings.items()),  # TOML-compatible
    ]
    if "env" in server:  # stdio only: Codex refuses an env table for a URL
        lines.append(f"[mcp_servers.{NAME}.env]")
        lines += [f"{key} = {json.dumps(value)}" for key, value in server["env"].items()]
    (codex_home / "config.toml").write_text("\n".join(lines) + "\n")
    environment = agent_env(tmp_path, CODEX_HOME=str(codex_home), SCRIPTED_KEY="sk-scripted", **env)
    command = [codex, "exec", "--skip-git-repo-check", prompt]
    return run_agent(command, tmp_path, environment, timeout)


# -- What every stdio run must show ----------------------------------------------------------------


def server_exited(run: Run, within: float = 10.0) -> bool:
    """Whether our server (not the recorder) is gone soon after the agent."""
    pid = int((run.wire / "pid").read_text())
    try:
        wait_until(lambda: not alive(pid), within, "our server's exit")
    except AssertionError:
        return False
    return True


def alive(pid: int) -> bool:
    """A zombie is not alive: it has exited, and waits only for a parent to reap it."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        if Path("/proc/self").exists():
            return False
    try:  # no /proc (macOS): the recorder, its parent, reaps it
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def stdio_was_clean(run: Run) -> None:
    """The server exited with the agent, and wrote nothing but whole JSON-RPC to stdout."""
    assert server_exited(run), "our server outlived the agent"
    assert any("result" in message for message in run.replies())


def debug_log(tmp_path: Path) -> str:
    return (tmp_path / "server-debug.log").read_text()


def answer_reached_the_model(models, run: Run, tag: str, tool: str) -> list[Received]:
    """What the model was given: the last result carries our answer and its citation, the
    agent's output quotes it (the scripted model's reply), and the model called `tool`."""
    got = models.received(tag)
    assert got, f"the model got no tool result\n{run.output}\n{run.stderr[-3000:]}"
    assert ANSWER.text in got[-1].text, got[-1].text
    assert CITED in got[-1].text, got[-1].text
    assert QUOTE_PREFIX.strip() in run.output and ANSWER.text in run.output, run.output
    assert is_tool(got[0].tool, tool) or got[0].tool == "ToolSearch", got
    assert any(is_tool(g.tool, tool) for g in got), got
    return got


def saw_our_instructions(models, tag: str) -> bool:
    """Whether the server's instructions reached the model (Claude Code: a system reminder;
    Codex: the description of our tools' namespace)."""
    needle = json.dumps(orm.SERVER_INSTRUCTIONS[:100])[1:-1]  # as JSON text escapes it
    return any(needle in request for request in models.seen(tag))


def upstream_requests(fake) -> int:
    return len([r for r in fake.requests if r.path == "/v1/responses"])


def tag_for(name: str) -> str:
    """A mark in the question that picks this run's results out of the shared scripted API."""
    return f"[{name}-{os.getpid()}-{time.monotonic_ns()}]"


def slow(seconds: float) -> Reply:
    """ANSWER after `seconds` of work (answer_detailed runs in background mode by default)."""
    return dataclasses.replace(ANSWER, work_seconds=seconds)


# -- Long answers ----------------------------------------------------------------------------------
# First in the file: `-n 4 --dist loadgroup` hands each worker one test in file order before
# any worker gets a second, so these start at once, on workers of their own.


def test_claude_code_waits_70_s_for_answer_detailed_with_progress(claude, models, fake, tmp_path):
    fake.enqueue(slow(SLOW_S))
    tag = tag_for("claude-slow")
    prompt = ask("answer_detailed", f"Compare 3.13 and 3.14 {tag}")
    run = run_claude(claude, models, tmp_path, prompt, claude_stdio(tmp_path, fake), timeout=300)
    got = answer_reached_the_model(models, run, tag, "answer_detailed")
    assert [g.tool for g in got if g.tool != "ToolSearch"] == [f"mcp__{NAME}__answer_detailed"]
    (call,) = [m for m in run.sent() if m.get("method") == "tools/call"]
    assert "progressToken" in call["params"]["_meta"]
    progress = [m for m in run.replies() if m.get("method") == "notifications/progress"]
    assert len(progress) >= 3, progress  # it was told, while it waited, that work goes on
    assert run.seconds >= SLOW_S
    assert upstream_requests(fake) == 1
    stdio_was_clean(run)


def test_codex_collects_a_70_s_answer_detailed_through_the_handoff(codex, models, fake, tmp_path):
    fake.enqueue(slow(SLOW_S))
    tag = tag_for("codex-slow")
    prompt = ask("answer_detailed", f"Compare {tag}")
    run = run_codex(codex, models, tmp_path, prompt, codex_stdio(tmp_path, fake), timeout=300)
    got = answer_reached_the_model(models, run, tag, "answer_detailed")
    # Default tool_timeout_sec (60 s): handed off at 50 s, then collected with answer_result.
    assert HANDOFF_ID.search(got[0].text), got[0].text
    assert len(got) >= 2 and all(is_tool(g.tool, "answer_result") for g in got[1:]), got
    assert upstream_requests(fake) == 1
    stdio_was_clean(run)


def test_codex_with_a_lowered_tool_timeout_and_the_paired_handoff(codex, models, fake, tmp_path):
    """tool_timeout_sec = 8 with MCP_HANDOFF_AFTER_S = 5 (docs/clients.md's pairing): a 20 s
    answer is handed off before Codex gives up, and each answer_result returns in time too."""
    fake.enqueue(slow(20))
    tag = tag_for("codex-lowered")
    prompt = ask("answer", f"When was 3.14? {tag}")
    server = codex_stdio(tmp_path, fake, MCP_HANDOFF_AFTER_S="5")
    run = run_codex(codex, models, tmp_path, prompt, {**server, "tool_timeout_sec": 8})
    got = answer_reached_the_model(models, run, tag, "answer")
    assert HANDOFF_ID.search(got[0].text), got[0].text
    assert all(is_tool(g.tool, "answer_result") for g in got[1:]), got
    assert not any("timed out" in g.text for g in got), got
    assert upstream_requests(fake) == 1
    assert "client name=codex-mcp-client handoff_after_s=5" in debug_log(tmp_path)
    stdio_was_clean(run)


def test_codex_with_a_lowered_tool_timeout_alone_loses_the_answer(codex, models, fake, tmp_path):
    """Why docs/clients.md pairs them: without the handoff setting, the model hears only that the
    call timed out."""
    fake.enqueue(slow(20))
    tag = tag_for("codex-unpaired")
    prompt = ask("answer", f"When was 3.14? {tag}")
    server = codex_stdio(tmp_path, fake)
    run = run_codex(codex, models, tmp_path, prompt, {**server, "tool_timeout_sec": 8})
    got = models.received(tag)
    assert len(got) == 1 and "timed out awaiting tools/call" in got[0].text, got
    assert ANSWER.text not in run.output
    stdio_was_clean(run)


# -- A plain call over each transport --------------------------------------------------------------


def test_claude_code_over_stdio_gives_its_model_our_cited_answer(claude, models, fake, tmp_path):
    fake.enqueue(ANSWER)
    tag = tag_for("claude-stdio")
    server = claude_stdio(tmp_path, fake)
    run = run_claude(claude, models, tmp_path, ask("answer", f"When was 3.14? {tag}"), server)
    answer_reached_the_model(models, run, tag, "answer")
    assert saw_our_instructions(models, tag)
    assert upstream_requests(fake) == 1
    stdio_was_clean(run)
    # It speaks 2026-07-28 from its first message, and waits for long calls itself: the
    # client table gives it no handoff.
    log = debug_log(tmp_path)
    assert "server/discover era=2026-07-28" in log
    assert "client name=claude-code handoff_after_s=0 result_chars=50000" in log


def test_codex_over_stdio_gives_its_model_our_cited_answer(codex, models, fake, tmp_path):
    fake.enqueue(ANSWER)
    tag = tag_for("codex-stdio")
    server = codex_stdio(tmp_path, fake)
    run = run_codex(codex, models, tmp_path, ask("answer", f"When was 3.14? {tag}"), server)
    answer_reached_the_model(models, run, tag, "answer")
    assert saw_our_instructions(models, tag)
    assert upstream_requests(fake) == 1
    stdio_was_clean(run)
    # The name Codex sends is the one the client table hands off after 50 s.
    log = debug_log(tmp_path)
    assert "initialize asked=2025-06-18 answered=2025-06-18" in log
    assert "client name=codex-mcp-client handoff_after_s=50 result_chars=12000" in log
    assert orm.HANDOFF_CLIENTS["codex-mcp-client"] == {"handoff_s": 50, "result_chars": 12_000}


# -- A screenshot in the launch directory (issue 32) ----------------------------------------------

SHOT = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x02\x80\x00\x00\x01\xe0\x08\x02\x00\x00\x00"


def screenshot_went_upstream(fake) -> None:
    """The request carried the question, then the screenshot as a data: URL input_image."""
    import base64

    (request,) = [r for r in fake.requests if r.path == "/v1/responses"]
    question, image = request.body["input"][0]["content"]
    assert question["type"] == "input_text"
    assert image == {
        "type": "input_image",
        "image_url": "data:image/png;base64," + base64.b64encode(SHOT).decode(),
        "detail": "auto",
    }


def test_claude_code_sends_a_screenshot_in_its_launch_directory(claude, models, fake, tmp_path):
    (tmp_path / "error-dialog.png").write_bytes(SHOT)
    fake.enqueue(ANSWER)
    tag = tag_for("claude-files")
    prompt = ask("answer", f"What does the dialog say? {tag}", ["error-dialog.png"])
    run = run_claude(claude, models, tmp_path, prompt, claude_stdio(tmp_path, fake))
    answer_reached_the_model(models, run, tag, "answer")
    screenshot_went_upstream(fake)
    stdio_was_clean(run)


def test_codex_sends_a_screenshot_in_its_launch_directory(codex, models, fake, tmp_path):
    (tmp_path / "error-dialog.png").write_bytes(SHOT)
    fake.enqueue(ANSWER)
    tag = tag_for("codex-files")
    prompt = ask("answer", f"What does the dialog say? {tag}", ["error-dialog.png"])
    run = run_codex(codex, models, tmp_path, prompt, codex_stdio(tmp_path, fake))
    answer_reached_the_model(models, run, tag, "answer")
    screenshot_went_upstream(fake)
    stdio_was_clean(run)


def test_claude_code_over_http_with_a_bearer_token(claude, models, fake, spawn, tmp_path):
    fake.enqueue(ANSWER)
    env = {"MCP_HTTP_TOKEN": TOKEN, "DEBUG": "1"}
    server = spawn("--http", "127.0.0.1:0", env=env, upstream=fake)
    remote = {
        "type": "http",
        "url": f"http://127.0.0.1:{wait_listening(server)}/mcp",
        "headers": {"Authorization": f"Bearer {TOKEN}"},
    }
    tag = tag_for("claude-http")
    run = run_claude(claude, models, tmp_path, ask("answer", f"When was 3.14? {tag}"), remote)
    answer_reached_the_model(models, run, tag, "answer")
    assert upstream_requests(fake) == 1
    assert "server/discover era=2026-07-28" in server.stderr
    assert "client name=claude-code handoff_after_s=0" in server.stderr
    assert "-> 401" not in server.stderr  # every request carried the token


def test_codex_over_http_with_a_bearer_token(codex, models, fake, spawn, tmp_path):
    fake.enqueue(ANSWER)
    env = {"MCP_HTTP_TOKEN": TOKEN, "DEBUG": "1"}
    server = spawn("--http", "127.0.0.1:0", env=env, upstream=fake)
    remote = {
        "url": f"http://127.0.0.1:{wait_listening(server)}/mcp",
        "bearer_token_env_var": "MCP_HTTP_TOKEN",  # docs/http.md's setup
        "required": True,
    }
    tag = tag_for("codex-http")
    prompt = ask("answer", f"When was 3.14? {tag}")
    run = run_codex(codex, models, tmp_path, prompt, remote, MCP_HTTP_TOKEN=TOKEN)
    answer_reached_the_model(models, run, tag, "answer")
    assert upstream_requests(fake) == 1
    assert "initialize asked=2025-06-18 answered=2025-06-18" in server.stderr
    assert "client name=codex-mcp-client handoff_after_s=50" in server.stderr
    assert "-> 401" not in server.stderr


# -- What of a tool result reaches the model ----------------------------------------------------
# A stand-in MCP server whose result says one thing in content[0].text and another in
# structuredContent: which one the agent hands its model decides where an answer must be whole.

STANDIN = """
import json, sys
TOOL = {"name": "answer", "description": "d", "annotations": {"readOnlyHint": True},
        "inputSchema": {"type": "object", "properties": {"query": {"type": "string"}}},
        "outputSchema": {"type": "object", "properties": {"x": {"type": "string"}}}}
RESULT = {"content": [{"type": "text", "text": "FROM-CONTENT-TEXT"}],
          "structuredContent": {"x": "FROM-STRUCTURED-CONTENT"}}
for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message:
        continue
    method, result = message.get("method"), None
    if method == "initialize":
        result = {"protocolVersion": message["params"]["protocolVersion"],
                  "capabilities": {"tools": {}}, "serverInfo": {"name": "s", "version": "1"}}
    result = {"tools/list": {"tools": [TOOL]}, "tools/call": RESULT}.get(method, result)
    reply = {"result": result} if result else {"error": {"code": -32601, "message": method}}
    print(json.dumps({"jsonrpc": "2.0", "id": message["id"], **reply}), flush=True)
"""


def test_claude_code_gives_its_model_structured_content_not_the_text(claude, models, tmp_path):
    tag = tag_for("claude-structured")
    server = {"command": sys.executable, "args": ["-c", STANDIN]}
    run_claude(claude, models, tmp_path, ask("answer", f"Q {tag}"), server)
    got = models.received(tag)[-1]
    assert json.loads(got.text) == {"x": "FROM-STRUCTURED-CONTENT"}, got
    assert "FROM-CONTENT-TEXT" not in got.text


def test_codex_gives_its_model_structured_content_not_the_text(codex, models, tmp_path):
    tag = tag_for("codex-structured")
    server = {"command": sys.executable, "args": ["-c", STANDIN], "required": True}
    run_codex(codex, models, tmp_path, ask("answer", f"Q {tag}"), server)
    got = models.received(tag)[-1]
    assert got.text.startswith("Wall time: "), got  # Codex's own line first
    assert json.loads(got.text.split("Output:", 1)[1]) == {"x": "FROM-STRUCTURED-CONTENT"}, got
    assert "FROM-CONTENT-TEXT" not in got.text


# -- The cost question (issue 41) ------------------------------------------------------------------
# Both agents declare form elicitation. Headless, nobody can answer: Claude Code answers cancel
# and Codex decline, within milliseconds, so the call is not run and costs nothing. Claude Code's
# Elicitation hook (its hooks reference, "Elicitation") answers for the person: what a user
# scripting it can rely on.

ASK_ALWAYS = "budget:\n  confirm_over_usd: 0\n"  # every call's worst case is over $0


def asking(tmp_path: Path, server: dict) -> dict:
    """`server` started with a config that asks before every call."""
    config = tmp_path / "ask.yaml"
    config.write_text(ASK_ALWAYS)
    return {**server, "args": [*server["args"], "--config", str(config)]}


def the_question(run: Run) -> dict:
    """Our one question: the 2026-07-28 input_required result's, or elicitation/create's."""
    asked = [m["result"] for m in run.replies() if m.get("result", {}).get("inputRequests")]
    asked += [m for m in run.replies() if m.get("method") == "elicitation/create"]
    assert len(asked) == 1, asked
    return asked[0]


def not_run(models, tag: str, said: str) -> None:
    """The model heard that the call was not run, and why, and that nothing was spent."""
    got = [g for g in models.received(tag) if g.tool != "ToolSearch"]
    assert got and all("not run:" in g.text for g in got), got
    assert said in got[-1].text and "nothing was spent" in got[-1].text, got[-1].text


def test_claude_code_headless_cancels_the_cost_question_and_nothing_is_spent(
    claude, models, fake, tmp_path
):
    tag = tag_for("claude-asked")
    server = asking(tmp_path, claude_stdio(tmp_path, fake))
    run = run_claude(claude, models, tmp_path, ask("answer", f"When was 3.14? {tag}"), server)
    question = the_question(run)
    form = question["inputRequests"]["confirm"]
    assert form["method"] == "elicitation/create" and form["params"]["mode"] == "form"
    first, retry = [m for m in run.sent() if m.get("method") == "tools/call"]
    assert retry["params"]["arguments"] == first["params"]["arguments"]
    assert retry["params"]["requestState"] == question["requestState"]  # echoed, untouched
    assert retry["params"]["inputResponses"] == {"confirm": {"action": "cancel"}}
    not_run(models, tag, "the person dismissed the question")
    assert upstream_requests(fake) == 0
    stdio_was_clean(run)


def test_claude_codes_elicitation_hook_answers_run_and_the_call_runs(
    claude, models, fake, tmp_path
):
    hook = tmp_path / "answer-run.sh"
    hook.write_text(
        "#!/bin/sh\ncat > /dev/null\nprintf '%s\\n' '{\"hookSpecificOutput\": "
        '{"hookEventName": "Elicitation", "action": "accept", "content": {"choice": "run"}}}\'\n'
    )
    hook.chmod(0o755)
    settings = tmp_path / "settings.json"
    matcher = {"matcher": NAME, "hooks": [{"type": "command", "command": str(hook)}]}
    settings.write_text(json.dumps({"hooks": {"Elicitation": [matcher]}}))
    fake.enqueue(ANSWER)
    tag = tag_for("claude-hook")
    server = asking(tmp_path, claude_stdio(tmp_path, fake))
    prompt = ask("answer", f"When was 3.14? {tag}")
    run = run_claude(claude, models, tmp_path, prompt, server, extra=["--settings", str(settings)])
    answer_reached_the_model(models, run, tag, "answer")
    retry = [m for m in run.sent() if m.get("method") == "tools/call"][-1]
    chosen = {"action": "accept", "content": {"choice": "run"}}
    assert retry["params"]["inputResponses"] == {"confirm": chosen}
    assert upstream_requests(fake) == 1
    stdio_was_clean(run)


def test_codex_headless_declines_the_cost_question_and_nothing_is_spent(
    codex, models, fake, tmp_path
):
    tag = tag_for("codex-asked")
    server = asking(tmp_path, codex_stdio(tmp_path, fake))
    run = run_codex(codex, models, tmp_path, ask("answer", f"When was 3.14? {tag}"), server)
    (hello,) = [m for m in run.sent() if m.get("method") == "initialize"]
    assert "form" in hello["params"]["capabilities"]["elicitation"]
    question = the_question(run)
    assert "answer" in question["params"]["message"]
    (reply,) = [m for m in run.sent() if m.get("id") == question["id"] and "method" not in m]
    assert reply["result"] == {"action": "decline"}
    not_run(models, tag, "the person declined")
    assert upstream_requests(fake) == 0
    stdio_was_clean(run)
