#!/usr/bin/env python3
"""The built wheel, installed as a stranger would, answers through its installed command.

    python .ci/wheel_check.py [--tools DIR]

1. builds the sdist and, from it, the wheel (`python -m build`, from a copy of the tree), and
   checks both with `twine check --strict` (what PyPI will render);
2. installs the wheel into a fresh venv and, through its `openai-responses-mcp` command, runs
   `--version`, `--doctor` against the tests' fake upstream (tests/fake_upstream.py), and an
   `initialize` plus a `tools/call` over stdio answered from the fake;
3. `pipx install` of the wheel, and `uvx --from <wheel>`, each answering `initialize`, with the
   client lines `--doctor` prints and the "install the extra" command their installer's own
   (issue 33): pipx's command and `pipx inject`; `uvx --from <wheel> openai-responses-mcp`
   (never a path into uv's cache, gone after `uv cache clean`) and `uvx --from <wheel> --with`.

pipx and uv are taken from --tools (default: the directory of this interpreter, where the test
extra puts them). Prints one line per step; exit 1 on the first failure.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from fake_upstream import DEFAULT_TEXT, FakeResponsesAPI  # noqa: E402

import openai_responses_mcp as mcp  # noqa: E402

APP = "openai-responses-mcp"
KEY = "sk-wheel-check-0123456789abcdefSECRET"
BIN = "Scripts" if os.name == "nt" else "bin"
EXE = ".exe" if os.name == "nt" else ""
NOT_COPIED = shutil.ignore_patterns(
    ".git", "build", "dist", "*.egg-info", "__pycache__", ".*_cache", ".hypothesis", ".venv"
)


class CheckFailed(Exception):
    pass


def step(text: str) -> None:
    print(f"wheel-check: {text}", flush=True)


def run(cmd: list, env: dict, *, stdin: str | None = None, timeout: float = 600):
    proc = subprocess.run(
        [str(part) for part in cmd],
        input=stdin,
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=env,
        timeout=timeout,
        stdin=None if stdin is not None else subprocess.DEVNULL,
    )
    if KEY in proc.stdout + proc.stderr:
        raise CheckFailed(f"{cmd[0]} printed the API key")
    return proc


def expect(proc, what: str) -> None:
    if proc.returncode != 0:
        raise CheckFailed(
            f"{what}: exit {proc.returncode}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
        )


def environment(work: Path, fake: FakeResponsesAPI) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "MCP_"))}
    env.pop("DEBUG", None)
    env.update(
        OPENAI_API_KEY=KEY,
        OPENAI_BASE_URL=fake.base_url,
        XDG_CONFIG_HOME=str(work / "xdg"),
        # A stranger's first run: no usage ledger and no answer cache from an earlier run (the
        # cache would answer tools/call without reaching the fake).
        OPENAI_RESPONSES_MCP_STATE=str(work / "state.sqlite3"),
        NO_PROXY="127.0.0.1,localhost",
        no_proxy="127.0.0.1,localhost",
        PYTHONIOENCODING="utf-8",
        PIP_DISABLE_PIP_VERSION_CHECK="1",
    )
    return env


def build(work: Path, env: dict) -> Path:
    source = work / "src"
    shutil.copytree(ROOT, source, ignore=NOT_COPIED)
    dist = work / "dist"
    expect(run([sys.executable, "-m", "build", "--outdir", dist, source], env), "python -m build")
    (wheel,) = dist.glob("*.whl")
    (sdist,) = dist.glob("*.tar.gz")
    if f"-{mcp.__version__}-" not in wheel.name or not sdist.name.endswith(
        f"-{mcp.__version__}.tar.gz"
    ):
        raise CheckFailed(f"built {wheel.name} and {sdist.name}, not version {mcp.__version__}")
    expect(run([sys.executable, "-m", "twine", "check", "--strict", sdist, wheel], env), "twine")
    step(f"built {sdist.name} and {wheel.name}; twine check passed")
    return wheel


def messages(*tool_calls: dict) -> str:
    init = {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "wheel-check", "version": "0"},
    }
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
    ]
    lines += [
        {"jsonrpc": "2.0", "id": 2 + i, "method": "tools/call", "params": call}
        for i, call in enumerate(tool_calls)
    ]
    return "".join(json.dumps(line) + "\n" for line in lines)


def replies(proc, what: str) -> dict:
    """The replies on stdout by id; every stdout line must be a whole JSON-RPC message."""
    expect(proc, what)
    found = {}
    for line in proc.stdout.splitlines():
        message = json.loads(line)
        if "id" in message:
            found[message["id"]] = message
    return found


def check_initialize(cmd: list, env: dict, what: str) -> None:
    reply = replies(run([*cmd, "--stdio"], env, stdin=messages()), what)[1]
    info = reply["result"]["serverInfo"]
    if (info["name"], info["version"]) != (APP, mcp.__version__):
        raise CheckFailed(f"{what}: initialize answered {info}")
    step(f"{what}: initialize answered by {APP} {mcp.__version__}")


def check_installer_lines(cmd: list, env: dict, what: str, commands: tuple, extra: str) -> None:
    """--doctor's Claude Code line starts the server with one of `commands`, and a missing
    PostgreSQL driver is answered with `extra`, the installer's own way to add it."""
    proc = run([*cmd, "--doctor"], env, timeout=120)
    expect(proc, f"{what}: --doctor")
    claude = next((line for line in proc.stdout.splitlines() if "claude mcp add" in line), "")
    command = next((c for c in commands if claude.rstrip().endswith(f" -- {c} --stdio")), None)
    if command is None or "archive-v" in claude:
        raise CheckFailed(f"{what}: --doctor's line starts none of {commands}:\n{proc.stdout}")
    step(f"{what}: --doctor's client lines start {command}")
    url = {**env, "OPENAI_RESPONSES_MCP_STATE_URL": "postgresql://u@127.0.0.1:9/d"}
    proc = run([*cmd, "--show-config"], url)
    if proc.returncode != 2 or extra not in proc.stderr:
        raise CheckFailed(
            f"{what}: the missing driver was not answered with {extra}:\n{proc.stderr}"
        )
    step(f"{what}: the missing PostgreSQL driver is answered with: {extra}")


def check_venv(wheel: Path, work: Path, env: dict, fake: FakeResponsesAPI) -> None:
    venv = work / "venv"
    expect(run([sys.executable, "-m", "venv", venv], env), "python -m venv")
    python = venv / BIN / f"python{EXE}"
    expect(run([python, "-m", "pip", "install", "-q", wheel], env), "pip install <wheel>")
    command = venv / BIN / f"{APP}{EXE}"
    step(f"installed the wheel into a fresh venv: {command}")

    proc = run([command, "--version"], env)
    expect(proc, "--version")
    if proc.stdout.strip() != f"{APP} {mcp.__version__}":
        raise CheckFailed(f"--version printed {proc.stdout!r}")
    step(f"--version: {proc.stdout.strip()}")

    proc = run([command, "--doctor"], env, timeout=120)
    expect(proc, "--doctor")
    if "All checks passed." not in proc.stdout or str(command) not in proc.stdout:
        raise CheckFailed(f"--doctor did not pass naming {command}:\n{proc.stdout}")
    step("--doctor: all checks passed against the fake, naming the installed command")

    call = {"name": "answer", "arguments": {"query": "What does HTTP 404 mean?"}}
    answers = replies(run([command, "--stdio"], env, stdin=messages(call)), "tools/call")
    result = answers[2].get("result") or {}
    if (
        result.get("isError")
        or result.get("structuredContent", {}).get("answer", "")[: len(DEFAULT_TEXT)]
        != DEFAULT_TEXT
    ):
        raise CheckFailed(f"tools/call answered {answers[2]}")
    if not any(r.path == "/v1/responses" and r.authorized_with(KEY) for r in fake.requests):
        raise CheckFailed("tools/call did not reach the fake upstream with the key")
    step("tools/call: answered from the fake upstream through the installed command")
    check_initialize([command], env, "venv")
    pip = f"{python} -m pip install 'openai-responses-mcp[postgres]'"
    check_installer_lines([command], env, "venv", (str(command),), pip)


def check_pipx(wheel: Path, work: Path, env: dict, tools: Path) -> None:
    pipx = shutil.which("pipx", path=str(tools)) or shutil.which("pipx")
    if pipx is None:
        raise CheckFailed("pipx is not installed (it is in the dev extra: pip install -e '.[dev]')")
    home = work / "pipx"
    env = {
        **env,
        "PIPX_HOME": str(home / "home"),
        "PIPX_BIN_DIR": str(home / "bin"),
        "PIPX_MAN_DIR": str(home / "man"),
    }
    expect(run([pipx, "install", wheel], env), "pipx install <wheel>")
    command = home / "bin" / f"{APP}{EXE}"
    check_initialize([command], env, "pipx install")
    inject = f"pipx inject {APP} 'psycopg[binary]'"
    # The command on PATH (PIPX_BIN_DIR), or, when that is not on PATH, pipx's own venv's.
    venv = home / "home" / "venvs" / APP / BIN / f"{APP}{EXE}"
    check_installer_lines([command], env, "pipx install", (str(command), str(venv)), inject)


def check_uvx(wheel: Path, work: Path, env: dict, tools: Path) -> None:
    uv = shutil.which("uv", path=str(tools)) or shutil.which("uv")
    if uv is None:
        raise CheckFailed("uv is not installed (it is in the dev extra: pip install -e '.[dev]')")
    env = {**env, "UV_TOOL_DIR": str(work / "uv-tools"), "UV_NO_PROGRESS": "1"}
    cmd = [uv, "tool", "run", "--from", wheel, APP]
    check_initialize(cmd, env, "uvx --from <wheel>")
    uvx = shutil.which("uvx", path=env.get("PATH")) or "uvx"
    # The lines name the wheel too: without `--from` they would run the index's release (issue 39)
    source = shlex.quote(str(Path(wheel).resolve()))
    with_driver = f"uvx --from {source} --with 'psycopg[binary]' {APP}"
    lines = (f"{uvx} --from {source} {APP}",)
    check_installer_lines(cmd, env, "uvx --from <wheel>", lines, with_driver)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tools", default=str(Path(sys.executable).parent))
    options = parser.parse_args(argv)
    tools = Path(options.tools)
    with tempfile.TemporaryDirectory(prefix="wheel-check-") as tmp, FakeResponsesAPI() as fake:
        work = Path(tmp)
        env = environment(work, fake)
        try:
            wheel = build(work, env)
            check_venv(wheel, work, env, fake)
            check_pipx(wheel, work, env, tools)
            check_uvx(wheel, work, env, tools)
        except (CheckFailed, subprocess.TimeoutExpired, KeyError, ValueError) as exc:
            print(f"wheel-check: FAILED: {exc}", file=sys.stderr)
            return 1
    step("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
