#!/usr/bin/env python3
"""Live smoke test: checks an installation end to end against the real OpenAI API.

    OPENAI_API_KEY=sk-... python bench/smoke.py [--command CMD] [--query TEXT] [--timeout S]

It starts the server over stdio exactly as an MCP client does (the module next to this script,
or --command, e.g. `--command openai-responses-mcp` for a pipx install), sends initialize and
tools/list, then one tools/call each for answer, answer_detailed and answer_quick (and
answer_deep when the server lists it: tools.answer_deep or MCP_ANSWER_DEEP=1), all in flight
together, and waits for every answer. For each it prints, side by side, the
model, the number of citations, the latency, the cost (`_meta.cost.usd` when the server
reports it, else tokens), the web searches and the output tokens (reasoning included), then
how answer_quick and answer_detailed compare with answer: the three profiles differ on purpose
(quick: gpt-6-luna, effort, verbosity and search context low; answer: gpt-6.1-terra; detailed:
gpt-6.2-sol, effort high), and this shows what that is worth on your own account. A deep
research run takes minutes and can cost dollars, so it is made only when you turned answer_deep
on, and the time limit is then an hour.

It makes three (or four) real, billed requests, so it runs only when OPENAI_API_KEY is set; CI
never runs it. The server reads your usual config file, and OPENAI_BASE_URL like any other setting.

Exit status: 0 all answered; 1 something failed (the reason is printed);
2 not run (OPENAI_API_KEY is not set, or bad arguments), so that a script never mistakes a
skipped check for a passed one.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import shlex
import subprocess
import sys
import threading
import time
from pathlib import Path

MODULE = Path(__file__).resolve().parent.parent / "openai_responses_mcp.py"
TOOLS = ("answer", "answer_detailed", "answer_quick")
DEEP = "answer_deep"  # called too when the server lists it (turned on)
DEEP_TIMEOUT_S = 3600.0  # request.deep_timeout_ms's default: a run takes minutes
PROTOCOL = "2025-06-18"
QUERY = "What is the weather forecast for Tokyo today? Cite your sources."
KEY_ENV = "OPENAI_API_KEY"


class Failed(Exception):
    """The smoke test found a problem; the message says which."""


class Server:
    """The server as a child process speaking newline-delimited JSON-RPC on its stdio."""

    def __init__(self, command: list[str]):
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.messages: queue.Queue = queue.Queue()
        self.stderr: list[str] = []
        threading.Thread(target=self._read_stdout, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    def _read_stdout(self) -> None:
        for line in self.process.stdout:
            if line.strip():
                try:
                    self.messages.put(json.loads(line))
                except ValueError:
                    self.messages.put({"not_json": line[:200].decode("utf-8", "replace")})
        self.messages.put(None)  # the server closed stdout

    def _read_stderr(self) -> None:
        for line in self.process.stderr:
            self.stderr.append(line.decode("utf-8", "replace").rstrip())

    def send(self, message: dict) -> None:
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        self.process.stdin.flush()

    def receive(self, deadline: float) -> dict:
        """The next message, or Failed when the server exits or the deadline passes."""
        try:
            message = self.messages.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            raise Failed("no answer before the time limit (raise it with --timeout)") from None
        if message is None:
            raise Failed(f"the server exited (status {self.process.wait()})")
        if "not_json" in message:
            raise Failed(f"the server wrote a line that is not JSON: {message['not_json']!r}")
        return message

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.stdin.close()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def request(server: Server, request_id: int, method: str, params: dict, deadline: float):
    server.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
    while True:
        message = server.receive(deadline)
        if message.get("id") == request_id:
            if "error" in message:
                raise Failed(f"{method}: {message['error'].get('message')}")
            return message["result"]


def cost_text(meta: dict) -> str:
    """What the call cost: dollars when the server reports them, else the tokens used."""
    usd = (meta.get("cost") or {}).get("usd")
    if isinstance(usd, (int, float)):
        return f"${usd:.4f}"
    tokens = (meta.get("usage") or {}).get("total_tokens")
    return f"{tokens} tokens" if isinstance(tokens, int) else "unknown"


def answer_of(tool: str, result: dict) -> dict:
    """The answer JSON of a tools/call result, or Failed naming what was wrong."""
    text = (result.get("content") or [{}])[0].get("text", "")
    if result.get("isError"):
        raise Failed(f"{tool} failed: {text}")
    try:
        answer = result.get("structuredContent") or json.loads(text)
    except ValueError:
        raise Failed(f"{tool} returned text that is not the answer JSON: {text[:200]}") from None
    if not answer.get("answer") or not answer.get("model"):
        raise Failed(f"{tool} returned an answer without text or model: {text[:200]}")
    return answer


def call_all(server: Server, query: str, deadline: float, tools=TOOLS) -> list[dict]:
    """Sends the tools/call requests together and waits for every answer."""
    started, rows = {}, {}
    for number, tool in enumerate(tools, start=10):
        # fresh: a run soon after another must reach the API, not the answer cache (servers
        # with the cache off ignore the argument).
        params = {"name": tool, "arguments": {"query": query, "fresh": True}}
        server.send({"jsonrpc": "2.0", "id": number, "method": "tools/call", "params": params})
        started[number] = time.monotonic()
    while len(rows) < len(tools):
        message = server.receive(deadline)
        number = message.get("id")
        if number not in started or number in rows:
            continue  # progress notices and the like
        tool = tools[number - 10]
        if "error" in message:
            raise Failed(f"{tool} failed: {message['error'].get('message')}")
        answer = answer_of(tool, message["result"])
        meta = message["result"].get("_meta") or {}
        usd = (meta.get("cost") or {}).get("usd")
        rows[number] = {
            "tool": tool,
            "model": answer["model"],
            "citations": len(answer.get("citations") or ()),
            "used_search": answer.get("used_search"),
            "latency_s": time.monotonic() - started[number],
            "cost": cost_text(meta),
            "usd": usd if isinstance(usd, (int, float)) else None,
            "searches": meta.get("web_searches", 0),
            "output_tokens": (meta.get("usage") or {}).get("output_tokens", 0),
        }
    return [rows[number] for number in sorted(rows)]


def smoke(command: list[str], query: str, timeout: float | None) -> list[dict]:
    server = Server(command)
    started = time.monotonic()
    deadline = started + (timeout or 600.0)
    try:
        init = {
            "protocolVersion": PROTOCOL,
            "capabilities": {},
            "clientInfo": {"name": "openai-responses-mcp-smoke", "version": "1"},
        }
        info = request(server, 1, "initialize", init, deadline)
        server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        name = info.get("serverInfo", {})
        print(f"initialize: {name.get('name')} {name.get('version')}, {info['protocolVersion']}")
        listed = [t["name"] for t in request(server, 2, "tools/list", {}, deadline)["tools"]]
        print(f"tools/list: {', '.join(listed)}")
        missing = [tool for tool in TOOLS if tool not in listed]
        if missing:
            raise Failed(f"tools/list lacks {', '.join(missing)}")
        tools = TOOLS
        if DEEP in listed:
            tools += (DEEP,)
            deadline = started + (timeout or DEEP_TIMEOUT_S)
            print(f"{DEEP} is on: called too (minutes, and it can cost dollars)")
        return call_all(server, query, deadline, tools)
    except Failed as exc:
        if server.stderr:
            exc.args = (exc.args[0] + "\nserver stderr:\n" + "\n".join(server.stderr[-10:]),)
        raise
    finally:
        server.stop()


def print_table(rows: list[dict]) -> None:
    print(
        f"{'tool':<16} {'model':<32} {'citations':>9} {'latency':>9}  {'cost':<10} "
        f"{'searches':>8} {'out tokens':>10}"
    )
    for row in rows:
        print(
            f"{row['tool']:<16} {row['model']:<32} {row['citations']:>9} "
            f"{row['latency_s']:>8.1f}s  {row['cost']:<10} {row['searches']:>8} "
            f"{row['output_tokens']:>10}" + ("" if row["used_search"] else "  (no web search)")
        )
    for line in comparisons(rows):
        print(line)


def comparisons(rows: list[dict]) -> list[str]:
    """How each other tool's latency and cost compare with answer's, as ratios."""
    base = next((row for row in rows if row["tool"] == "answer"), None)
    if base is None:
        return []
    lines = []
    for row in rows:
        if row is base:
            continue
        parts = [f"{ratio(row['latency_s'], base['latency_s'])} the latency"]
        if row["usd"] is not None and base["usd"] is not None:
            parts.append(f"{ratio(row['usd'], base['usd'])} the cost")
        lines.append(f"{row['tool']} vs answer: {', '.join(parts)}")
    return lines


def ratio(value: float, base: float) -> str:
    return f"{value / base:.2f}x" if base > 0 else "n/a"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--command", help="the server command (default: this checkout's module)")
    parser.add_argument("--query", default=QUERY, help="the question each tool is asked")
    parser.add_argument(
        "--timeout", type=float, help="seconds for everything (600; 3600 with answer_deep)"
    )
    args = parser.parse_args(argv)
    if not os.environ.get(KEY_ENV, "").strip():
        print(f"smoke: not run: {KEY_ENV} is not set (the test makes billed calls)")
        return 2
    command = shlex.split(args.command) if args.command else [sys.executable, str(MODULE)]
    print(f"smoke: {' '.join(command)} --stdio, the calls in flight; waiting for every answer")
    try:
        rows = smoke([*command, "--stdio"], args.query, args.timeout)
    except (Failed, OSError) as exc:
        print(f"smoke: FAILED: {exc}")
        return 1
    print_table(rows)
    count = {3: "three", 4: "four"}.get(len(rows), str(len(rows)))
    print(f"smoke: OK, all {count} tools answered")
    return 0


if __name__ == "__main__":
    sys.exit(main())
