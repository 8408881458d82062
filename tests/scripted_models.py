"""A scripted model API for the real agents (tests/test_agents.py): one HTTP server on
127.0.0.1 that speaks enough of the Anthropic Messages API (Claude Code) and of the OpenAI
Responses API (Codex CLI) for either agent to run a turn with our MCP server as its tool.

Standard library only. Claude Code is pointed at it with ``ANTHROPIC_BASE_URL=base_url``, Codex
with a model provider whose ``base_url`` is ``base_url + "/v1"`` (``wire_api = "responses"``).

The model decides by script, from the conversation it is sent (so one server serves any number
of agents at once, and a turn can be replayed):

1. The user's prompt names the tool and the question: ``ask(tool, question)`` writes it.
2. Until our tool is loaded it finds it: Claude Code defers MCP tools behind its ``ToolSearch``
   tool and lists only their names (``mcp__NAME__answer``) in the prompt, so the model calls
   ``ToolSearch`` with ``{"query": "select:mcp__NAME__answer"}``; Codex offers ours at once in a
   ``namespace`` tool ``mcp__NAME`` and is called with ``name`` plus ``namespace``.
3. It calls the tool with ``{"query": question}`` (and ``"files"``, when the prompt has a line
   ``Attach these files: a, b``: ``ask(tool, question, files)`` writes it).
4. A result that is a handoff (its text names ``answer_result`` and an ``"id"``) is collected
   with ``answer_result {"id": …, "wait_s": 30}``, again until the answer is there.
5. It answers with text that quotes, whole, the last result its tool gave it
   (``QUOTE_PREFIX`` + the text), so the agent's own output shows what its model was given.

Requests with no tools (Claude Code's titles and other side requests) get a short text. Every
tool result the model receives is recorded: ``received(tag)`` lists them for the runs whose
question contains ``tag``, in order, as ``Received(tool, text)``; ``seen(tag)`` gives those
runs' requests whole, as JSON text.

Anthropic shapes: ``POST /v1/messages`` (JSON, or SSE with ``"stream": true``: message_start,
content_block_start/delta/stop, message_delta, message_stop) and ``POST
/v1/messages/count_tokens``. OpenAI shapes: ``POST /v1/responses`` with ``"stream": true``
(response.created, response.in_progress, output_item.added, function_call_arguments.delta/done
or content_part/output_text events, output_item.done, response.completed). ``GET /v1/models``
lists one model for either.
"""

from __future__ import annotations

import http.server
import json
import re
import secrets
import threading
import time
from dataclasses import dataclass

PROMPT = "Use the {tool} tool to answer this question: {question}"
_PROMPT = re.compile(r"Use the (\w+) tool to answer this question: ([^\n<]+)")
FILES_LINE = "\nAttach these files: {files}"
_FILES = re.compile(r"Attach these files: ([^\n<]+)")
QUOTE_PREFIX = "Your tool said:\n"
SIDE_TEXT = "Scripted title"
# The handoff's words name answer_result and the id, maybe inside JSON text (quotes escaped).
HANDOFF_ID = re.compile(r'answer_result\b.*?\\?"id\\?":\s*\\?"([^"\\]+)', re.S)
CLAUDE_MODEL = "claude-sonnet-4-5"
CODEX_MODEL = "gpt-5.2-codex"


def ask(tool: str, question: str, files=()) -> str:
    """The prompt an agent is run with: the scripted model reads the tool, the question and
    the files to attach back."""
    prompt = PROMPT.format(tool=tool, question=question)
    return prompt + (FILES_LINE.format(files=", ".join(files)) if files else "")


@dataclass
class Received:
    """One tool result as the agent handed it to its model."""

    tool: str  # the tool's name as the model called it (mcp__NAME__answer, answer, …)
    text: str


@dataclass
class Turn:
    """What the model sees, in either API's terms reduced to what the script needs."""

    prompt: str  # every user text, joined
    everything: str  # the whole request as JSON text (tool names in reminders, instructions)
    tools: list[str]  # callable tool names: Claude's names, Codex's "namespace/name"
    calls: list[tuple[str, dict, str | None]]  # (tool, input, result text or None), in order

    def tool_named(self, tool: str) -> str | None:
        return next((name for name in self.tools if is_tool(name, tool)), None)


def is_tool(name: str, tool: str) -> bool:
    """Whether `name`, as the agent calls it (answer, mcp__NAME__answer, mcp__NAME/answer),
    is MCP tool `tool`."""
    return name == tool or name.endswith((f"__{tool}", f"/{tool}"))


def decide(turn: Turn) -> tuple[str, object]:
    """The script: ("call", (tool, input)) or ("text", str)."""
    found = _PROMPT.search(turn.prompt)
    if not found:
        return "text", SIDE_TEXT
    tool, question = found.group(1), found.group(2).strip()
    ours = [c for c in turn.calls if is_tool(c[0], tool)]
    collected = [c for c in turn.calls if is_tool(c[0], "answer_result")]
    last = (collected or ours or [None])[-1]
    if last is None:
        attached = _FILES.search(turn.prompt)
        arguments: dict = {"query": question}
        if attached:
            arguments["files"] = [name.strip() for name in attached.group(1).split(",")]
        return _find_and_call(turn, tool, arguments)
    text = last[2] or ""
    handoff = HANDOFF_ID.search(text)
    if handoff and len(collected) < 40:
        return _find_and_call(turn, "answer_result", {"id": handoff.group(1), "wait_s": 30})
    return "text", QUOTE_PREFIX + text


def _find_and_call(turn: Turn, tool: str, arguments: dict) -> tuple[str, object]:
    name = turn.tool_named(tool)
    if name:
        return "call", (name, arguments)
    deferred = re.search(rf"mcp__[A-Za-z0-9_-]+?__{tool}\b", turn.everything)
    searched = sum(1 for c in turn.calls if c[0] == "ToolSearch")
    if deferred and "ToolSearch" in turn.tools and searched < 3:
        return "call", ("ToolSearch", {"query": f"select:{deferred.group(0)}"})
    return "text", f"I cannot find the {tool} tool."


def _text_of(content) -> str:
    """Text of an Anthropic content value or an OpenAI output value (str or list of parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part.get("text", "") if isinstance(part, dict) else str(part) for part in content
        )
    return ""


# -- Anthropic Messages API ------------------------------------------------------------------------


def anthropic_turn(body: dict) -> Turn:
    prompt, calls, by_id = [], [], {}
    for message in body.get("messages", []):
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        for block in blocks or []:
            kind = block.get("type")
            if kind == "text" and message.get("role") == "user":
                prompt.append(block.get("text", ""))
            elif kind == "tool_use":
                by_id[block.get("id")] = len(calls)
                calls.append((block.get("name", ""), block.get("input") or {}, None))
            elif kind == "tool_result" and block.get("tool_use_id") in by_id:
                index = by_id[block["tool_use_id"]]
                name, arguments, _ = calls[index]
                calls[index] = (name, arguments, _text_of(block.get("content")))
    tools = [t.get("name", "") for t in body.get("tools") or [] if isinstance(t, dict)]
    return Turn("\n".join(prompt), json.dumps(body), tools, calls)


def anthropic_message(decision: tuple[str, object], model: str) -> dict:
    kind, value = decision
    if kind == "call":
        name, arguments = value
        block = {"type": "tool_use", "id": f"toolu_{secrets.token_hex(12)}", "name": name}
        content, stop = [{**block, "input": arguments}], "tool_use"
    else:
        content, stop = [{"type": "text", "text": value}], "end_turn"
    return {
        "id": f"msg_{secrets.token_hex(12)}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": 100, "output_tokens": 20},
    }


def anthropic_events(message: dict) -> list[tuple[str, dict]]:
    head = {**message, "content": [], "stop_reason": None}
    head["usage"] = {"input_tokens": 100, "output_tokens": 1}
    events = [("message_start", {"message": head})]
    for index, block in enumerate(message["content"]):
        if block["type"] == "tool_use":
            start = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        else:
            start = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        events += [
            ("content_block_start", {"index": index, "content_block": start}),
            ("content_block_delta", {"index": index, "delta": delta}),
            ("content_block_stop", {"index": index}),
        ]
    end = {"stop_reason": message["stop_reason"], "stop_sequence": None}
    events += [
        ("message_delta", {"delta": end, "usage": {"output_tokens": 20}}),
        ("message_stop", {}),
    ]
    return [(kind, {"type": kind, **event}) for kind, event in events]


# -- OpenAI Responses API --------------------------------------------------------------------------


def openai_turn(body: dict) -> Turn:
    prompt, calls, by_id = [], [], {}
    items = body.get("input")
    items = (
        [{"type": "message", "role": "user", "content": items}] if isinstance(items, str) else items
    )
    for item in items or []:
        kind = item.get("type", "message")
        if kind == "message" and item.get("role") == "user":
            prompt.append(_text_of(item.get("content")))
        elif kind == "function_call":
            name = "/".join(filter(None, (item.get("namespace"), item.get("name"))))
            try:
                arguments = json.loads(item.get("arguments") or "{}")
            except ValueError:
                arguments = {}
            by_id[item.get("call_id")] = len(calls)
            calls.append((name, arguments, None))
        elif kind == "function_call_output" and item.get("call_id") in by_id:
            index = by_id[item["call_id"]]
            output = item.get("output")
            calls[index] = (*calls[index][:2], _text_of(output))
    tools = []
    for tool in body.get("tools") or []:
        if tool.get("type") == "namespace":
            tools += [f"{tool.get('name')}/{t.get('name')}" for t in tool.get("tools") or []]
        elif tool.get("name"):
            tools.append(tool["name"])
    return Turn("\n".join(prompt), json.dumps(body), tools, calls)


def openai_events(decision: tuple[str, object], model: str) -> list[tuple[str, dict]]:
    kind, value = decision
    response = {
        "id": f"resp_{secrets.token_hex(12)}",
        "object": "response",
        "created_at": int(time.time()),
        "status": "in_progress",
        "model": model,
        "output": [],
        "usage": None,
    }
    if kind == "call":
        name, arguments = value
        namespace, _, short = name.rpartition("/")
        item = {
            "type": "function_call",
            "id": f"fc_{secrets.token_hex(12)}",
            "call_id": f"call_{secrets.token_hex(12)}",
            "name": short,
            "arguments": json.dumps(arguments),
            "status": "completed",
        }
        if namespace:
            item["namespace"] = namespace
        middle = [
            ("response.function_call_arguments.delta", {"delta": item["arguments"]}),
            ("response.function_call_arguments.done", {"arguments": item["arguments"]}),
        ]
        middle = [(t, {**e, "item_id": item["id"], "output_index": 0}) for t, e in middle]
    else:
        part = {"type": "output_text", "text": value, "annotations": []}
        item = {
            "type": "message",
            "id": f"msg_{secrets.token_hex(12)}",
            "role": "assistant",
            "status": "completed",
            "content": [part],
        }
        where = {"item_id": item["id"], "output_index": 0, "content_index": 0}
        middle = [
            ("response.content_part.added", {**where, "part": {**part, "text": ""}}),
            ("response.output_text.delta", {**where, "delta": value}),
            ("response.output_text.done", {**where, "text": value}),
            ("response.content_part.done", {**where, "part": part}),
        ]
    added = {**item, "status": "in_progress"}
    if kind == "call":
        added["arguments"] = ""
    else:
        added["content"] = []
    usage = {
        "input_tokens": 100,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 20,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 120,
    }
    done = {**response, "status": "completed", "output": [item], "usage": usage}
    events = [
        ("response.created", {"response": response}),
        ("response.in_progress", {"response": response}),
        ("response.output_item.added", {"output_index": 0, "item": added}),
        *middle,
        ("response.output_item.done", {"output_index": 0, "item": item}),
        ("response.completed", {"response": done}),
    ]
    return [(t, {"type": t, "sequence_number": n, **e}) for n, (t, e) in enumerate(events)]


# -- The server ------------------------------------------------------------------------------------


class ScriptedModels:
    """The scripted API on 127.0.0.1; a context manager. ``base_url`` has no ``/v1``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._received: list[tuple[str, Received]] = []  # (the run's prompt, what it got)
        self._seen: list[tuple[str, str]] = []  # (the run's prompt, a request as JSON text)
        self.requests: list[tuple[str, dict]] = []  # (path, body) of every POST
        models = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # quiet: pytest shows failures
                pass

            def do_GET(self) -> None:
                if self.path.split("?")[0].rstrip("/") in ("/v1/models", "/models"):
                    model = {"id": CODEX_MODEL, "object": "model", "created": 0, "owned_by": "t"}
                    self._json(200, {"object": "list", "data": [model], "models": []})
                else:
                    self._json(404, {"error": {"type": "not_found", "message": self.path}})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                except ValueError:
                    body = {}
                path = self.path.split("?")[0]
                with models._lock:
                    models.requests.append((path, body))
                if path.endswith("/messages/count_tokens"):
                    self._json(200, {"input_tokens": 100})
                elif path.endswith("/messages"):
                    self._anthropic(body)
                elif path.endswith("/responses"):
                    self._openai(body)
                else:
                    self._json(404, {"error": {"type": "not_found", "message": path}})

            def _anthropic(self, body: dict) -> None:
                turn = anthropic_turn(body)
                models._record(turn)
                message = anthropic_message(decide(turn), body.get("model") or CLAUDE_MODEL)
                if body.get("stream"):
                    self._sse(anthropic_events(message))
                else:
                    self._json(200, message)

            def _openai(self, body: dict) -> None:
                turn = openai_turn(body)
                models._record(turn)
                self._sse(openai_events(decide(turn), body.get("model") or CODEX_MODEL))

            def _json(self, status: int, payload: dict) -> None:
                self._send(status, "application/json", json.dumps(payload).encode())

            def _sse(self, events: list[tuple[str, dict]]) -> None:
                text = "".join(f"event: {t}\ndata: {json.dumps(e)}\n\n" for t, e in events)
                self._send(200, "text/event-stream", text.encode())

            def _send(self, status: int, content_type: str, data: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.send_header("request-id", f"req_{secrets.token_hex(8)}")
                self.end_headers()
                self.wfile.write(data)

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> ScriptedModels:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _record(self, turn: Turn) -> None:
        """Notes the request, and the newest tool result of this turn (once per result)."""
        with self._lock:
            self._seen.append((turn.prompt, turn.everything))
        if not turn.calls or turn.calls[-1][2] is None:
            return
        name, _, text = turn.calls[-1]
        entry = (turn.prompt, Received(name, text))
        with self._lock:
            if entry not in self._received:
                self._received.append(entry)

    def seen(self, tag: str) -> list[str]:
        """Every request (JSON text) the model got in the runs whose prompt contains `tag`."""
        with self._lock:
            return [everything for prompt, everything in self._seen if tag in prompt]

    def received(self, tag: str) -> list[Received]:
        """The tool results the model was given in the runs whose prompt contains `tag`."""
        with self._lock:
            return [got for prompt, got in self._received if tag in prompt]
