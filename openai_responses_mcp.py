#!/usr/bin/env python3
# /// script
# requires-python = ">=3.10"
# dependencies = ["openai>=3.54,<4"]
# ///
"""openai-responses-mcp: an MCP server that answers questions with the OpenAI Responses API.

Every ``tools/call`` becomes one Responses API request with the built-in ``web_search`` tool
allowed, and comes back as ``{answer, used_search, citations[{url, title, published_at}], model,
response_id}``.

The module reads top to bottom in the order data flows through it, each idea before its use.
Each section opens with a ``# ====`` banner that names it; inside one, a ``# -- Topic ----``
line starts each concern. The map lists each section's topics, in order, under its line:
search for ``# -- Topic`` to jump to one. TOOL_TABLE, above the first banner, lists the tools
(CONTRIBUTING.md: where new code goes).

1. Configuration   defaults < YAML < environment < command line, validated once at start-up
    The YAML subset · Settings · SETTINGS · Layers · Loading · Validation · State settings ·
    This installation · A copied file's start · The API key · Shipped examples · Logging
2. Models          what is known of each OpenAI model: efforts, prices, shutdown dates
    Names · Reasoning efforts and verbosities · Prices · Retirements
3. Policy          the model's instructions and the text sent as the request's input
4. Files           what a call attaches: read inside the allowed directories, never a secret
    Secrets and kinds · A call's files · Images and PDFs · Reading
5. State           the usage ledger, budgets, identities and the answer cache (SQLite or PostgreSQL)
    Schema · Which store · Backends · Channels · Rows · The writer · The store · The ledger ·
    Identities · The answer cache
6. Answer engine   the request, the answer's shape and cost, the OpenAI call, AnswerEngine
    The request · Shaping the answer · Links · The Sources section · Sizing · Usage · Prices ·
    Retirements · A call · Single flight · Failures and retries · Refusals · Streaming ·
    Around a call · ResponsesClient · Spending · The engine · Background mode ·
    Composition root
7. Tools           protocol versions, the tools' instructions, schemas, argument checks, prompts
    Versions and instructions · Schemas · Argument checks · Prompts
8. Dispatch        MCP methods by era; sessions; the cost question; tasks, handoffs; Dispatcher
    JSON-RPC · Task ids · Task wire shapes · Eras · Session · Waiting · The cost question ·
    Calls in flight · Handshake · Tasks · The task table · Long calls ·
    Task requests and handoffs · The dispatcher
9. Transports      stdio framing; HTTP with --http (Streamable HTTP at /mcp, legacy SSE at /sse)
    The contract · Framing · Writers · stdio · HTTP · Client addresses · OAuth ·
    Introspection · OAuthVerifier · Identity · Gates and sessions · Endpoints ·
    The HTTP app · The request handler · The server
10. CLI            flags, --show-config, --ask, --usage, --user, --doctor, main()
    Flags · Parsing · Commands · --doctor · --doctor's checks · --doctor --live · main()

Only the standard library is imported at start-up; ``openai`` is imported when the first call
needs it (or in the background once ``initialize``, or any 2026-07-28 request, has been
answered).
"""

from __future__ import annotations

import os
import sys
import threading
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NoReturn


class _Lazy:
    """A module imported where it is first used.

    `json` and `re` take several milliseconds to import (re compiles its own patterns), which
    a server that should answer `initialize` at once need not spend: the transport's JSON
    needs neither of them (see encode_message).
    """

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attribute: str):
        module = __import__(self._name)
        globals()[self._name] = module
        return getattr(module, attribute)


json = _Lazy("json")
re = _Lazy("re")

__version__ = "0.1.0"
SERVER_NAME = "openai-responses-mcp"
# The name a client knows the server by (`claude mcp add NAME`, Codex's [mcp_servers.NAME]): one
# name in the README, the docs and --doctor's lines, the one users' configs already have.
CLIENT_NAME = "openai-responses"
# Who is asking when no named user is (see Identity, in Transports):
LOCAL_USER = "local"  # stdio, and HTTP when nothing asks for a token (loopback, no users)
SHARED_USER = "shared"  # whoever holds MCP_HTTP_TOKEN (server.http.token)
# A named user (--user add) is their name (no ':' can be in one); an OAuth subject is
# OAUTH_PREFIX + issuer + "#" + subject (an issuer has no '#'), so no token names another kind.
OAUTH_PREFIX, USER_PREFIX = "oauth:", "user:"
# The tools, one row each. TOOL_NAMES, each tool's model_profiles settings and their env vars
# (Configuration), tools/list's definitions and argument validation (Tools) all derive from it.
# `model_env` is the env var of its model; `tuning_env` the prefix of <prefix>_EFFORT and
# <prefix>_VERBOSITY (None: none); `model`, `effort`, `verbosity` and `search_context_size`
# (absent: None) are the profile's defaults, None meaning "inherit from `answer`" (or, for the
# search context, the API's default, medium). The three differ on purpose: an agent that picks
# the quick tool must get a quicker, cheaper answer, and the detailed one more thinking. Each
# has a model of its own from OpenAI's current lineup (the cheapest, the balanced one, the
# strongest everyday one: developers.openai.com/api/docs/guides/latest-model). They apply
# only while the user sets no `answer` model: once one is set, a tool the user's configuration
# leaves unset inherits `answer`'s profile (seed 001's rule; see _inherit_answer).
# The arguments of the tools that take search hints (answer_quick takes none).
_SEARCH_PROPERTIES = (
    "query",
    "recency_days",
    "max_results",
    "domains",
    "previous_response_id",
    "files",
)
TOOL_TABLE = (
    {
        "name": "answer",
        "title": "Answer with web search",
        "description": (
            "Search the web when needed and provide balanced, well-sourced answers. "
            "This is the standard general-purpose tool. Default: gpt-6.1-terra, OpenAI's "
            "balanced model, with reasoning effort medium and verbosity medium, the balance of "
            "depth, speed and cost that suits most questions."
        ),
        "properties": _SEARCH_PROPERTIES,
        "model": "gpt-6.1-terra",
        "model_env": "MODEL_ANSWER",
        "tuning_env": "ANSWER",
        "effort": "medium",
        "verbosity": "medium",
        "background": False,
        "background_env": "BACKGROUND_ANSWER",
    },
    {
        "name": "answer_detailed",
        "title": "Detailed research answer",
        "description": (
            "Perform comprehensive analysis with thorough research and detailed explanations. "
            "Best for complex questions requiring deep investigation. Default: gpt-6.2-sol, "
            "OpenAI's strongest everyday model, with reasoning effort high (more thinking than "
            "answer, so slower and dearer), run in background mode so a call of several minutes "
            "survives client timeouts."
        ),
        "properties": _SEARCH_PROPERTIES,
        "model": "gpt-6.2-sol",
        "model_env": "MODEL_DETAILED",
        "tuning_env": None,
        "effort": "high",
        "verbosity": None,
        # Only the slow tool runs in background by default: its calls are the ones that outlive
        # client and proxy timeouts.
        "background": True,
        "background_env": "BACKGROUND_DETAILED",
    },
    {
        "name": "answer_quick",
        "title": "Quick answer",
        "description": (
            "Provide fast, concise answers optimized for speed. "
            "Best for simple lookups or urgent questions. Default: gpt-6-luna, OpenAI's "
            "cheapest current model, with reasoning effort low, verbosity low and a low search "
            "context size: quicker and cheaper than answer, for a question one search settles."
        ),
        "properties": ("query", "previous_response_id", "files"),
        "model": "gpt-6-luna",
        "model_env": "MODEL_QUICK",
        "tuning_env": None,
        "effort": "low",  # not minimal: the API refuses web_search with reasoning effort minimal
        "verbosity": "low",
        "search_context_size": "low",
        "background": None,  # inherits `answer`'s false
        "background_env": "BACKGROUND_QUICK",
    },
    {
        # Opt-in (tools.answer_deep): one call can cost dollars. Its profile stands alone (it
        # inherits nothing from `answer`: a deep research model takes other settings), and it
        # always runs in background mode: a run takes minutes, often 5-30.
        "name": "answer_deep",
        "title": "Deep research report",
        "description": (
            "Deep research: an OpenAI deep research model plans, runs many web searches and "
            "writes a long, cited report. Takes minutes (often 5-30) and can cost dollars per "
            "call: use it only when the user asks for thorough research, and answer or "
            "answer_detailed otherwise. The report comes back when done (as a task, or as an "
            "id to pass to answer_result where the client would give up sooner); ask about it "
            "with answer and its response_id."
        ),
        "properties": _SEARCH_PROPERTIES,
        "model": "o4-mini-deep-research",
        "model_env": "MODEL_DEEP",
        "tuning_env": None,
        "effort": "medium",  # the only effort deep research models accept
        "verbosity": None,  # never sent to them
        "background": True,
        "background_env": None,
        "max_tool_calls": 50,  # at $10 per 1,000 searches, at most $0.50 of searches a run
        "opt_in": True,
    },
)
TOOL_NAMES = tuple(tool["name"] for tool in TOOL_TABLE)
DEEP_TOOL = "answer_deep"


# ============================================================================================
# Configuration
# ============================================================================================


class ConfigError(Exception):
    """A configuration problem, worded as one line a person can act on."""


# -- The YAML subset ---------------------------------------------------------------------------
# Config files use a small, strict subset of YAML (YAML 1.2 core schema): block and flow
# collections, comments, quoted and plain scalars. Anything outside it is refused with
# file:line, never guessed at.

_WS = " \t"
_MAX_DEPTH = 100
# YAML 1.2 core schema words; anything else that is not a number stays a string ("yes", "on").
_WORDS: dict[str, object] = {
    **dict.fromkeys(["", "~", "null", "Null", "NULL"]),
    **dict.fromkeys(["true", "True", "TRUE"], True),
    **dict.fromkeys(["false", "False", "FALSE"], False),
    **{
        f"{sign}.{inf}": float(sign + "inf")
        for sign in ("", "+", "-")
        for inf in ("inf", "Inf", "INF")
    },
    **dict.fromkeys([".nan", ".NaN", ".NAN"], float("nan")),
}
_INT_RE = r"[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+"
_FLOAT_RE = r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?"
_ESCAPES = {
    "0": "\0", "a": "\a", "b": "\b", "t": "\t", "\t": "\t", "n": "\n", "v": "\v", "f": "\f",
    "r": "\r", "e": "\x1b", " ": " ", '"': '"', "/": "/", "\\": "\\", "N": "\x85", "_": "\xa0",
    "L": "\u2028", "P": "\u2029",
}  # fmt: skip
_HEX_ESCAPES = {"x": 2, "u": 4, "U": 8}
_HEX_DIGITS = set("0123456789abcdefABCDEF")
_BAD_START = {
    "&": "anchors ('&') are not supported",
    "*": "aliases ('*') are not supported",
    "!": "tags ('!') are not supported",
    "|": "block scalars ('|') are not supported; use a quoted string with \\n",
    ">": "block scalars ('>') are not supported; use a quoted string with \\n",
    **{c: f"{c!r} cannot start an unquoted value; quote it" for c in "%@`#,]}"},
}


def _is_item(body: str) -> bool:
    return body[0] == "-" and body[1:2] in ("", " ", "\t")


def _no_colon(body: str) -> str:
    if ":" in body and "#" not in body:
        return "expected 'key: value' but found no space after ':'; add one"
    return "expected 'key: value' but found no ':' after the key"


def _skip_ws(s: str, j: int) -> int:
    while j < len(s) and s[j] in _WS:
        j += 1
    return j


class _Parser:
    """One-shot parser over pre-split lines; `where` collects key path -> line number."""

    def __init__(self, text: str, source: str) -> None:
        self.source = source
        self.where: dict[tuple[str | int, ...], int] = {}
        self.lines: list[tuple[int, int, str]] = []  # (line number, indent, text after indent)
        started = False
        text = text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
        # Split only on \n: str.splitlines() would also break on \x0b, \x85, \u2028 etc.
        for n, raw in enumerate(text.split("\n"), 1):
            line = raw.rstrip(_WS)
            body = line.lstrip(_WS)
            if not body or body[0] == "#":
                continue
            if line[0] == "%":
                self.fail(n, "directives ('%') are not supported; remove the line")
            if line.startswith(("---", "...")) and line[3:4] in ("", " ", "\t"):
                if line[:3] == "...":
                    self.fail(n, "document end marker '...' is not supported; remove it")
                if started:
                    self.fail(n, "multiple documents ('---') are not supported; use one per file")
                rest = line[3:].lstrip(_WS)
                if rest and rest[0] != "#":
                    self.fail(n, "content after '---' is not supported; start it on the next line")
                started = True
                continue
            indent = len(line) - len(body)
            if "\t" in line[:indent]:
                self.fail(n, "tabs are not allowed in indentation; use spaces")
            self.lines.append((n, indent, body))
            started = True

    def fail(self, n: int, what: str) -> NoReturn:
        raise ConfigError(f"{self.source}:{n}: {what}")

    def parse(self) -> object:
        if not self.lines:
            return {}
        n, _, body = self.lines[0]
        if not _is_item(body) and self.split_key(n, body) is None:
            value = self.inline(n, body, (), 0)
            if len(self.lines) > 1:
                self.fail(n, _no_colon(body))
            return value
        value, i = self.block(0, (), 0, -1)
        if i < len(self.lines):
            bad = self.lines[i][0]
            self.fail(bad, "inconsistent indentation; less indented than the first line")
        return value

    def block(self, i: int, path: tuple, depth: int, owner: int) -> tuple[object, int]:
        """Parse the node starting at line i (indented deeper than `owner`)."""
        n, indent, body = self.lines[i]
        if depth > _MAX_DEPTH:
            self.fail(n, f"nesting is deeper than {_MAX_DEPTH} levels")
        if _is_item(body):
            return self.sequence(i, indent, path, depth, under_key=False)
        if self.split_key(n, body) is not None:
            return self.mapping(i, indent, path, depth)
        value = self.inline(n, body, path, depth)
        return value, self.end_value(i + 1, owner)

    def end_value(self, i: int, owner: int) -> int:
        # YAML would fold deeper lines into the value or misread them; refuse instead.
        if i < len(self.lines) and self.lines[i][1] > owner:
            n, _, body = self.lines[i]
            if _is_item(body) or self.split_key(n, body) is not None:
                self.fail(n, "unexpected indentation; the line above already has a value")
            self.fail(n, "multi-line values are not supported; put the value on one line "
                      "(quote it and use \\n for line breaks)")  # fmt: skip
        return i

    def mapping(self, i: int, indent: int, path: tuple, depth: int) -> tuple[dict, int]:
        result: dict[str, object] = {}
        while i < len(self.lines):
            n, ind, body = self.lines[i]
            if ind < indent:
                break
            if ind > indent:
                self.fail(n, "inconsistent indentation; align this line with its block")
            if _is_item(body):
                self.fail(n, "expected 'key: value' but found a sequence item '- '")
            kv = self.split_key(n, body)
            if kv is None:
                self.fail(n, _no_colon(body))
            key, rest = kv
            if key in result:
                first = self.where[(*path, key)]
                self.fail(n, f"duplicate key {key!r} (first defined on line {first})")
            self.where[(*path, key)] = n
            rest = rest.lstrip(_WS)
            i += 1
            nxt = self.lines[i] if i < len(self.lines) else None
            if rest and rest[0] != "#":
                value = self.inline(n, rest, (*path, key), depth)
                i = self.end_value(i, indent)
            elif nxt and nxt[1] > indent:
                value, i = self.block(i, (*path, key), depth + 1, indent)
            elif nxt and nxt[1] == indent and _is_item(nxt[2]):
                # YAML lets a sequence sit at the same indentation as its key.
                value, i = self.sequence(i, indent, (*path, key), depth + 1, under_key=True)
            else:
                value = None
            result[key] = value
        return result, i

    def sequence(
        self, i: int, indent: int, path: tuple, depth: int, under_key: bool
    ) -> tuple[list, int]:
        result: list[object] = []
        while i < len(self.lines):
            n, ind, body = self.lines[i]
            if ind < indent:
                break
            if ind > indent:
                self.fail(n, "inconsistent indentation; align this line with its block")
            if not _is_item(body):
                if under_key:
                    break  # the enclosing mapping continues
                self.fail(n, "expected a sequence item '- ' but found a mapping or value line")
            item_path = (*path, len(result))
            self.where[item_path] = n
            content = body[1:].lstrip(_WS)
            gap = len(body) - len(content)
            if content and content[0] != "#":
                if "\t" in body[:gap]:
                    self.fail(n, "tabs are not allowed in indentation; use spaces")
                # Re-read the text after '- ' as its own line at its column, so `- a: 1`
                # followed by `  b: 2` forms one mapping.
                self.lines[i] = (n, ind + gap, content)
                value, i = self.block(i, item_path, depth + 1, indent)
            elif i + 1 < len(self.lines) and self.lines[i + 1][1] > indent:
                value, i = self.block(i + 1, item_path, depth + 1, indent)
            else:
                value, i = None, i + 1
            result.append(value)
        return result, i

    def split_key(self, n: int, body: str) -> tuple[str, str] | None:
        """Return (key, text after ':') if this block line is a mapping entry."""
        if body[0] == "?" and body[1:2] in ("", " ", "\t"):
            self.fail(n, "complex keys ('? ') are not supported")
        if body[0] in "\"'":
            key, j = self.quoted(n, body, 0)
            rest = body[j:].lstrip(_WS)
            ok = rest[:1] == ":" and rest[1:2] in ("", " ", "\t")
            return (key, rest[1:]) if ok else None
        if body[0] in "[{":
            return None
        for j, c in enumerate(body):
            if c == "#" and j and body[j - 1] in _WS:
                return None
            if c == ":" and body[j + 1 : j + 2] in ("", " ", "\t"):
                key = body[:j].rstrip(_WS)
                if not key:
                    self.fail(n, "missing key before ':'")
                self.check_plain(n, key)
                return key, body[j + 1 :]
        return None

    def inline(self, n: int, text: str, path: tuple, depth: int) -> object:
        """Parse a value written on the rest of a line (scalar or flow collection)."""
        if text[0] in "[{":
            value, j = self.flow(n, text, 0, path, depth + 1)
            self.check_tail(n, text[j:], "the closing bracket")
            return value
        if text[0] in "\"'":
            value, j = self.quoted(n, text, 0)
            self.check_tail(n, text[j:], "the closing quote")
            return value
        # '#' starts a comment only after whitespace, so 'a#b' stays one value.
        m = re.search(r"[ \t]#", text)
        text = (text[: m.start()] if m else text).rstrip(_WS)
        self.check_plain(n, text)
        if ": " in text or ":\t" in text or text.endswith(":"):
            self.fail(n, "unexpected ': ' inside an unquoted value; quote the value, "
                      "or put a nested mapping on its own lines")  # fmt: skip
        return self.resolve(n, text)

    def check_tail(self, n: int, tail: str, after: str) -> None:
        rest = tail.lstrip(_WS)
        if rest and (rest[0] != "#" or rest == tail):
            self.fail(n, f"unexpected text {rest[:20]!r} after {after}; only a comment may follow")

    def check_plain(self, n: int, text: str) -> None:
        if not text:
            return
        if text[0] in _BAD_START:
            self.fail(n, _BAD_START[text[0]])
        if text[0] in "-?:" and text[1:2] in ("", " ", "\t"):
            what = {"-": "a sequence item '- '", "?": "a complex key '? '", ":": "':'"}[text[0]]
            self.fail(n, f"{what} is not allowed here; quote the value or start a new line")

    def resolve(self, n: int, s: str) -> object:
        if s in _WORDS:
            return _WORDS[s]
        try:
            if re.fullmatch(_INT_RE, s):
                return int(s, 8 if s[:2] == "0o" else 16 if s[:2] == "0x" else 10)
        except ValueError:  # Python refuses to convert more than ~4300 decimal digits
            self.fail(n, "integer is too long; quote it if it is meant as text")
        return float(s) if re.fullmatch(_FLOAT_RE, s) else s

    def quoted(self, n: int, s: str, j: int) -> tuple[str, int]:
        """Parse the quoted string starting at s[j]; return (value, index after closing quote)."""
        q, out, k = s[j], [], j + 1
        while k < len(s):
            c = s[k]
            if c == q and q == "'" and s[k + 1 : k + 2] == "'":
                out.append("'")
                k += 2
            elif c == q:
                try:  # joins \uD83D\uDE00-style surrogate pairs, as JSON does
                    text = "".join(out).encode("utf-16-le", "surrogatepass").decode("utf-16-le")
                except UnicodeDecodeError:
                    self.fail(n, "unpaired surrogate (\\uD800-\\uDFFF) in quoted string")
                return text, k + 1
            elif c == "\\" and q == '"' and k + 1 < len(s):
                e = s[k + 1]
                width = _HEX_ESCAPES.get(e, 0)
                digits = s[k + 2 : k + 2 + width]
                bad = "\\" + e + digits
                if e in _ESCAPES:
                    out.append(_ESCAPES[e])
                elif width and len(digits) == width and set(digits) <= _HEX_DIGITS:
                    if int(digits, 16) > 0x10FFFF:
                        self.fail(n, f"escape {bad!r} is beyond U+10FFFF")
                    out.append(chr(int(digits, 16)))
                else:
                    self.fail(n, f"invalid escape {bad!r} in double-quoted string")
                k += 2 + width
            else:
                out.append(c)
                k += 1
        kind = "single" if q == "'" else "double"
        self.fail(n, f"unclosed {kind} quote; quoted strings must end on the same line")

    def flow(self, n: int, s: str, j: int, path: tuple, depth: int) -> tuple[object, int]:
        """Parse the one-line flow collection starting at s[j]; return (value, index after it)."""
        if depth > _MAX_DEPTH:
            self.fail(n, f"nesting is deeper than {_MAX_DEPTH} levels")
        close = "]" if s[j] == "[" else "}"
        result: list | dict = [] if close == "]" else {}
        j += 1
        while True:
            j = _skip_ws(s, j)
            if j >= len(s) or (s[j] == "#" and s[j - 1] in _WS):
                opener = "{" if close == "}" else "["
                self.fail(n, f"unclosed '{opener}'; a flow collection must end on the same line")
            if s[j] == close:
                return result, j + 1
            if isinstance(result, list):
                item_path = (*path, len(result))
                self.where[item_path] = n
                value, j = self.flow_value(n, s, j, item_path, depth)
                result.append(value)
            else:
                if s[j] in "[{":
                    self.fail(n, "complex keys (a flow collection as a key) are not supported")
                key, j = self.flow_scalar(n, s, j, as_key=True)
                j = _skip_ws(s, j)
                if s[j : j + 1] != ":":
                    self.fail(n, f"expected ':' after key {key!r} in flow mapping")
                if key in result:
                    first = self.where[(*path, key)]
                    self.fail(n, f"duplicate key {key!r} (first defined on line {first})")
                self.where[(*path, key)] = n
                j = _skip_ws(s, j + 1)
                value = None
                if j < len(s) and s[j] not in ",}":
                    value, j = self.flow_value(n, s, j, (*path, key), depth)
                result[key] = value
            j = _skip_ws(s, j)
            if j < len(s) and s[j] == ",":
                j += 1
            elif j < len(s) and s[j] != close and not (s[j] == "#" and s[j - 1] in _WS):
                self.fail(n, f"expected ',' or '{close}' in flow collection, found {s[j]!r}")

    def flow_value(self, n: int, s: str, j: int, path: tuple, depth: int) -> tuple[object, int]:
        if s[j] in "[{":
            return self.flow(n, s, j, path, depth + 1)
        return self.flow_scalar(n, s, j, as_key=False)

    def flow_scalar(self, n: int, s: str, j: int, as_key: bool) -> tuple[object, int]:
        if s[j] in "\"'":
            return self.quoted(n, s, j)
        k = self.plain_end(s, j)
        if k == j:
            self.fail(n, f"unexpected {s[j]!r} in flow collection")
        text = s[j:k].rstrip(_WS)
        self.check_plain(n, text)
        return (text if as_key else self.resolve(n, text)), k

    @staticmethod
    def plain_end(s: str, j: int) -> int:
        """Index where a plain scalar inside a flow collection ends."""
        k = j
        while k < len(s):
            c = s[k]
            if c in ",[]{}" or (c == "#" and k > j and s[k - 1] in _WS):
                break
            if c == ":" and (k + 1 == len(s) or s[k + 1] in " \t,[]{}"):
                break
            k += 1
        return k


def parse_yaml(
    text: str, source: str = "<string>"
) -> tuple[object, dict[tuple[str | int, ...], int]]:
    """Parse the YAML subset. Returns (value, lines): `lines` maps each key path (mapping keys
    from the root; sequence items contribute their int index) to the 1-based line where that key
    or item was written. An empty document (only comments/blank lines) returns ({}, {})."""
    parser = _Parser(text, source)
    return parser.parse(), parser.where


# -- Settings: a key's row (Setting), the model profiles' keys ---------------------------------

EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh", "max")
VERBOSITIES = ("low", "medium", "high")
POLICY_MERGES = ("replace", "prepend", "append")
SERVICE_TIERS = ("auto", "default", "flex", "priority", "fast")
# background_options.completion_window: soonest is background mode as it always was; 2h and 8h
# are discounted background runs (WINDOW_FACTORS, in Models), sent unstreamed and polled.
COMPLETION_WINDOWS = ("soonest", "2h", "8h")
BASICS = ("model", "reasoning_effort", "verbosity")
PROFILE_KEYS = (
    "model",
    "reasoning_effort",
    "verbosity",
    "service_tier",
    "max_output_tokens",
    "max_tool_calls",
    "search_context_size",
)
MIB = 1024 * 1024


class Setting:
    """One configurable key: its default, what values it accepts, and its environment variable."""

    __slots__ = ("choices", "default", "doc", "env", "high", "kind", "low", "nullable")

    def __init__(
        self, default, kind, *, low=None, high=None, choices=(), env=None, doc="", nullable=False
    ):
        self.default, self.kind, self.env, self.doc = default, kind, env, doc
        self.low, self.high, self.choices = low, high, choices
        self.nullable = nullable  # null accepted whatever the default (a profile's "inherit")

    def allowed(self) -> str:
        """What values this key accepts, as words for an error message or the README."""
        if self.kind == "int":
            return f"an integer from {self.low} to {self.high}"
        if self.kind == "choice":
            return "one of " + ", ".join(self.choices) + (" or null" if self.nullable else "")
        if self.kind == "bool":
            return "true or false"
        if self.kind == "strings":
            return "a list of strings"
        if self.kind == "domains":
            return "a list of domain names like example.com"
        if self.kind == "path":
            return "a file path or null"
        if self.kind == "number":
            none = " or null" if self.default is None else ""
            return f"a number from {self.low} to {self.high}{none}"
        if self.kind == "prices":
            return "a mapping of model ids to {input, cached_input, output} (USD per 1M tokens)"
        if self.kind == "sizes":
            return f"a mapping of clientInfo names to integers from {self.low} to {self.high}"
        return "a non-empty string"

    def check(self, value):
        """Returns the value if acceptable, else raises ValueError."""
        if value is None and (self.default is None or self.kind == "path" or self.nullable):
            return None
        kind = self.kind
        ok = (
            (kind == "int" and type(value) is int and self.low <= value <= self.high)
            or (kind == "bool" and type(value) is bool)
            or (kind == "choice" and value in self.choices)
            or (kind in ("str", "path") and isinstance(value, str) and value.strip() != "")
            or (kind in ("strings", "domains") and isinstance(value, list))
            or (kind == "number" and _is_number(value) and self.low <= value <= self.high)
            or (kind == "prices" and isinstance(value, dict) and price_table_problem(value) is None)
            or (kind == "sizes" and isinstance(value, dict) and self._sizes_ok(value))
        )
        if kind == "strings" and ok:
            ok = all(isinstance(item, str) and item.strip() for item in value)
        if kind == "domains" and ok:  # each one is checked by normalize_domain
            ok = all(isinstance(item, str) for item in value)
        if not ok:
            raise ValueError(self.allowed())
        return value

    def _sizes_ok(self, table: dict) -> bool:
        return all(
            isinstance(name, str) and type(size) is int and self.low <= size <= self.high
            for name, size in table.items()
        )


def _is_number(value) -> bool:
    return type(value) in (int, float) and value == value and value not in (float("inf"), -1e999)


PRICE_FIELDS = ("input", "cached_input", "output")


def price_table_problem(table: dict) -> tuple[str, str] | None:
    """(model key, what is wrong) for the first bad pricing.models entry, or None."""
    for model, entry in table.items():
        if not isinstance(entry, dict):
            return str(model), "must be a mapping of input, cached_input and output"
        for name in entry:
            if name not in PRICE_FIELDS:
                return str(model), f"has unknown key {name!r} (use input, cached_input, output)"
        for name in PRICE_FIELDS:
            value = entry.get(name)
            if not _is_number(value) or value < 0:
                return str(model), f"needs {name}: a number >= 0 (USD per million tokens)"
    return None


def _profile_settings(row: dict) -> dict:
    """A TOOL_TABLE row's model_profiles settings."""
    tool, env_prefix = row["name"], row["tuning_env"]
    inherits = tool != "answer" and not row.get("opt_in")  # null: take `answer`'s value
    settings = {
        ("model_profiles", tool, "model"): Setting(
            row["model"], "str", env=row["model_env"], doc=f"model used by the `{tool}` tool"
        ),
        ("model_profiles", tool, "reasoning_effort"): Setting(
            row["effort"],
            "choice",
            choices=EFFORTS,
            env=f"{env_prefix}_EFFORT" if env_prefix else None,
            doc="reasoning effort (sent to every model but those known to take none)",
            nullable=inherits,
        ),
        ("model_profiles", tool, "verbosity"): Setting(
            row["verbosity"],
            "choice",
            choices=VERBOSITIES,
            env=f"{env_prefix}_VERBOSITY" if env_prefix else None,
            doc="answer length (sent to every model but those known to take none)",
            nullable=inherits,
        ),
        # Cost controls: each is sent only when set (null = the API's default).
        ("model_profiles", tool, "service_tier"): Setting(
            None,
            "choice",
            choices=SERVICE_TIERS,
            doc="processing tier; flex costs less (retried once on default when unavailable)",
        ),
        ("model_profiles", tool, "max_output_tokens"): Setting(
            None,
            "int",
            low=16,
            high=1_000_000,
            doc="cap on output tokens, reasoning included (null = the model's limit)",
        ),
        ("model_profiles", tool, "max_tool_calls"): Setting(
            row.get("max_tool_calls"),
            "int",
            low=1,
            high=1000,
            doc="cap on web searches in one answer (null = none)",
            nullable=True,  # answer_deep's default is 50; null there means no cap
        ),
        ("model_profiles", tool, "search_context_size"): Setting(
            row.get("search_context_size"),
            "choice",
            choices=VERBOSITIES,
            doc="web_search context size: low, medium or high (null = the API's default)",
            nullable=True,
        ),
        ("model_profiles", tool, "background"): Setting(
            row["background"],
            "bool",
            env=row["background_env"],
            doc="run the request in OpenAI background mode: a dropped stream resumes instead of "
            "being paid for twice, and a cancel stops it server-side (not ZDR-compatible)",
            nullable=inherits,  # null: `answer`'s, as docs/configuration.md says (issue 39)
        ),
        # Each tool's own (nothing inherits it): a discount that makes the answer wait hours
        # is chosen tool by tool.
        ("model_profiles", tool, "completion_window"): Setting(
            "soonest",
            "choice",
            choices=COMPLETION_WINDOWS,
            doc="soonest, or a discounted background run that may take up to 2h (30% off "
            "Standard token prices) or 8h (40% off); the call becomes a task or handoff",
        ),
    }
    if row.get("opt_in"):
        # answer_deep always runs in background mode, and what its model never takes
        # (verbosity, web_search's context size) is no setting of its own.
        for key in ("background", "verbosity", "search_context_size"):
            del settings[("model_profiles", tool, key)]
    return settings


# -- SETTINGS: one row per key (default, range, env var, flag) ---------------------------------


SETTINGS: dict[tuple[str, ...], Setting] = {
    ("openai", "api_key_env"): Setting(
        "OPENAI_API_KEY", "str", doc="name of the environment variable holding the API key"
    ),
    ("openai", "base_url"): Setting(
        "https://api.openai.com/v1",
        "str",
        env="OPENAI_BASE_URL",
        doc="Responses API base URL (an OpenAI-compatible gateway works too)",
    ),
    ("openai", "check_retirements"): Setting(
        True,
        "bool",
        env="OPENAI_CHECK_RETIREMENTS",
        doc="once a day, look up the shutdown date of each tool's model (GET /v1/models) "
        "and warn on stderr about an announced one",
    ),
    ("request", "timeout_ms"): Setting(
        300_000,
        "int",
        low=1_000,
        high=3_600_000,
        env="OPENAI_API_TIMEOUT",
        doc="time allowed for each attempt, and for any silence in its stream",
    ),
    ("request", "max_retries"): Setting(
        3, "int", low=0, high=10, env="OPENAI_MAX_RETRIES", doc="retries after 429, 5xx, drops"
    ),
    ("request", "deep_timeout_ms"): Setting(
        3_600_000,
        "int",
        low=60_000,
        high=86_400_000,
        doc="time allowed for an answer_deep run, from its start across resumes",
    ),
    ("request", "handoff_after_s"): Setting(
        None,
        "int",
        low=0,
        high=3600,
        env="MCP_HANDOFF_AFTER_S",
        doc="a call without a task still running this long answers with an answer_result id "
        "(null = by client, see HANDOFF_CLIENTS; 0 = never)",
    ),
    **{key: setting for row in TOOL_TABLE for key, setting in _profile_settings(row).items()},
    ("tools", "answer_deep"): Setting(
        False,
        "bool",
        env="MCP_ANSWER_DEEP",
        doc="list the answer_deep tool (deep research: minutes and dollars per call)",
    ),
    ("policy", "max_citations"): Setting(
        3, "int", low=1, high=10, env="MAX_CITATIONS", doc="most citations in one answer"
    ),
    ("policy", "timezone"): Setting(
        "Asia/Tokyo",
        "str",
        env="POLICY_TIMEZONE",
        doc="IANA time zone for 'today' and access dates",
    ),
    ("policy", "system", "source"): Setting(
        "builtin", "choice", choices=("builtin", "file"), doc="where the instructions come from"
    ),
    ("policy", "system", "path"): Setting(
        None, "path", doc="instructions file, read at start-up when source is file"
    ),
    ("policy", "system", "merge"): Setting(
        "replace",
        "choice",
        choices=POLICY_MERGES,
        doc="how the file combines with the built-in policy",
    ),
    ("search", "defaults", "recency_days"): Setting(
        60, "int", low=1, high=36_500, env="SEARCH_RECENCY_DAYS", doc="recency hint when absent"
    ),
    ("search", "defaults", "max_results"): Setting(
        5, "int", low=1, high=50, env="SEARCH_MAX_RESULTS", doc="result-count hint when absent"
    ),
    ("search", "defaults", "domains"): Setting(
        [], "domains", doc="domains to prefer when a call names none"
    ),
    ("search", "domain_filter"): Setting(
        True,
        "bool",
        env="SEARCH_DOMAIN_FILTER",
        doc="also send domains as web_search filters.allowed_domains",
    ),
    ("search", "user_location", "country"): Setting(
        None, "str", doc="two-letter ISO country the web search assumes, e.g. JP (null = none)"
    ),
    ("search", "user_location", "region"): Setting(
        None, "str", doc="region the web search assumes, e.g. Tokyo (null = none)"
    ),
    ("search", "user_location", "city"): Setting(
        None, "str", doc="city the web search assumes, e.g. Minato (null = none)"
    ),
    ("search", "user_location", "timezone"): Setting(
        None, "str", doc="IANA zone sent with a user_location (null = policy.timezone)"
    ),
    # -- Cost: prices, budgets, the state file and the answer cache ---------------------------
    ("pricing", "models"): Setting(
        {},
        "prices",
        doc="USD per million tokens by model id or prefix: {input, cached_input, output}; "
        "over the built-in table",
    ),
    ("pricing", "web_search_per_1k"): Setting(
        10.0, "number", low=0, high=1000, doc="USD per thousand web searches"
    ),
    ("budget", "daily_usd"): Setting(
        None, "number", low=0, high=1e9, doc="refuse calls once today's spend reaches this"
    ),
    ("budget", "monthly_usd"): Setting(
        None, "number", low=0, high=1e9, doc="refuse calls once this month's spend reaches this"
    ),
    ("budget", "per_user_daily_usd"): Setting(
        None,
        "number",
        low=0,
        high=1e9,
        doc="each user's daily allowance: refuse a user's calls once their spend today reaches "
        "this (--user add or --user limit NAME --daily-usd X sets a named user's own)",
    ),
    ("budget", "per_user_monthly_usd"): Setting(
        None,
        "number",
        low=0,
        high=1e9,
        doc="each user's monthly allowance (--user limit NAME --monthly-usd Y: a named user's own)",
    ),
    ("budget", "confirm_over_usd"): Setting(
        None,
        "number",
        low=0,
        high=1e9,
        doc="ask the person (MCP elicitation) before a call whose worst-case estimate is over "
        "this: run, run discounted, or cancel (null = never ask)",
    ),
    ("budget", "confirm_required"): Setting(
        False,
        "bool",
        doc="refuse, instead of running unasked, a call over budget.confirm_over_usd when the "
        "client cannot be asked",
    ),
    ("budget", "confirm_timeout_s"): Setting(
        300, "number", low=1, high=3600, doc="how long the cost question waits for an answer"
    ),
    ("state", "path"): Setting(
        None,
        "path",
        env="OPENAI_RESPONSES_MCP_STATE",
        doc="SQLite file for the usage ledger and answer cache; off disables both "
        "(null = $XDG_STATE_HOME/openai-responses-mcp/state.sqlite3)",
    ),
    ("state", "url"): Setting(
        None,
        "str",
        env="OPENAI_RESPONSES_MCP_STATE_URL",
        doc="postgresql://user:password@host/db: keep the state in PostgreSQL, shared by every "
        'host (needs pip install "openai-responses-mcp[postgres]"); state.path is then unused',
    ),
    ("state", "retention_days"): Setting(
        90,
        "int",
        low=1,
        high=36_500,
        doc="days the ledger's raw rows are kept; the per-day totals that --usage, GET /usage "
        "and the budgets read are kept for good",
    ),
    ("cache", "ttl_s"): Setting(
        600,
        "int",
        low=0,
        high=604_800,
        env="ANSWER_CACHE_TTL_S",
        doc="seconds an answer is reused; 0 turns the cache off",
    ),
    ("cache", "max_entries"): Setting(
        1000, "int", low=1, high=1_000_000, doc="most answers kept (oldest dropped first)"
    ),
    ("cache", "share_across_users"): Setting(
        False,
        "bool",
        doc="with named users or OAuth on --http, one user's cached answer also serves another "
        "(false: each user has their own cache entries)",
    ),
    ("files", "local_paths"): Setting(
        False,
        "bool",
        doc="over --http, also take local paths in `files` (they name the server's disk, inside "
        "files.allowed_dirs only); stdio always takes them",
    ),
    ("files", "allowed_dirs"): Setting(
        [], "strings", doc="directories local paths may also name, beside the client's roots"
    ),
    ("files", "deny"): Setting(
        [], "strings", doc="glob patterns of file names never sent, beside the built-in secrets"
    ),
    ("files", "max_files"): Setting(
        10, "int", low=0, high=100, doc="most files a call attaches (0: `files` is refused)"
    ),
    ("files", "max_file_bytes"): Setting(
        10 * MIB, "int", low=1024, high=50 * MIB, doc="largest file a call attaches"
    ),
    ("files", "max_total_bytes"): Setting(
        20 * MIB, "int", low=1024, high=50 * MIB, doc="most bytes of files in one call"
    ),
    ("files", "image_detail"): Setting(
        "auto",
        "choice",
        choices=("low", "high", "auto", "original"),
        doc="the detail images are sent with (low: 85 tokens each)",
    ),
    ("server", "debug"): Setting(False, "bool", doc="debug lines on stderr"),
    ("server", "debug_file"): Setting(None, "path", doc="also append debug lines to this file"),
    ("server", "show_config_on_start"): Setting(
        False, "bool", doc="print the effective config to stderr when serving starts"
    ),
    ("server", "line_mode"): Setting(
        False, "bool", env="MCP_LINE_MODE", doc="always answer in newline-delimited JSON"
    ),
    ("server", "max_message_bytes"): Setting(
        16 * MIB, "int", low=1024, high=1024 * MIB, doc="largest message accepted"
    ),
    ("server", "max_calls"): Setting(
        64,
        "int",
        low=1,
        high=100_000,
        doc="most tool calls in flight on the server, on any transport; more are refused at once",
    ),
    ("server", "result_max_chars"): Setting(
        50_000,
        "int",
        low=2_000,
        high=10_000_000,
        env="MCP_RESULT_MAX_CHARS",
        doc="longest tool result text, in UTF-8 bytes (a Japanese character counts 3); a longer "
        "answer is shortened at a section boundary. Caps every client; a client known to show "
        "less gets less (see HANDOFF_CLIENTS)",
    ),
    ("server", "result_max_chars_by_client"): Setting(
        {},
        "sizes",
        low=2_000,
        high=10_000_000,
        doc="result_max_chars for clients by clientInfo.name, e.g. {codex-mcp-client: 12000}; "
        "over the built-in sizes and server.result_max_chars",
    ),
    ("server", "progress_interval_s"): Setting(
        10, "int", low=1, high=600, doc="heartbeat progress during a long call, in seconds"
    ),
    ("server", "protocol_eras"): Setting(
        "both",
        "choice",
        choices=("both", "handshake"),
        env="MCP_PROTOCOL_ERAS",
        doc="both: MCP 2026-07-28 (stateless) beside the handshake era; handshake: that era only",
    ),
    # -- HTTP transport (--http) -------------------------------------------------------------------
    ("server", "http", "token"): Setting(
        None, "str", env="MCP_HTTP_TOKEN", doc="bearer token every HTTP request must carry"
    ),
    ("server", "auth", "admins"): Setting(
        [],
        "strings",
        doc="who see every user's spend on /usage (others see their own row): user:NAME, "
        "oauth:ISSUER#SUB or shared",
    ),
    ("server", "http", "allow_insecure"): Setting(
        False, "bool", doc="allow a non-loopback address without a token (behind an auth proxy)"
    ),
    ("server", "http", "stateless"): Setting(
        False,
        "bool",
        env="MCP_HTTP_STATELESS",
        doc="no sessions: any instance answers any request (load balancing)",
    ),
    ("server", "http", "allowed_origins"): Setting(
        [], "strings", doc="browser Origins allowed besides localhost ones, or '*'"
    ),
    ("server", "http", "allowed_hosts"): Setting(
        [], "strings", doc="Host names served besides localhost and the bound address, or '*'"
    ),
    ("server", "http", "trusted_proxies"): Setting(
        [],
        "strings",
        doc="addresses (or CIDR ranges) of proxies whose X-Forwarded-For names the client, "
        "whose own allowance (introspection) it then spends",
    ),
    ("server", "http", "max_sessions"): Setting(
        100, "int", low=1, high=100_000, doc="most open sessions (initialize or GET /sse)"
    ),
    ("server", "http", "max_body_bytes"): Setting(
        MIB, "int", low=1024, high=64 * MIB, doc="largest HTTP request body accepted"
    ),
    ("server", "http", "max_connections"): Setting(
        256,
        "int",
        low=1,
        high=10_000,
        doc="most open connections; at the cap a new one closes the longest idle one",
    ),
    ("server", "http", "max_calls"): Setting(
        64, "int", low=1, high=100_000, doc="most tool calls in flight on the server"
    ),
    ("server", "http", "max_calls_per_session"): Setting(
        8, "int", low=1, high=10_000, doc="most tool calls in flight in one session"
    ),
    ("server", "http", "session_idle_s"): Setting(
        600, "int", low=1, high=604_800, doc="an idle session ends after this many seconds"
    ),
    ("server", "http", "header_timeout_s"): Setting(
        10,
        "int",
        low=1,
        high=600,
        doc="seconds to send a request's headers and body, from its first byte",
    ),
    ("server", "http", "request_line_timeout_s"): Setting(
        2,
        "int",
        low=1,
        high=60,
        doc="seconds a new connection has to send its request line (a kept-alive one: from its "
        "first byte)",
    ),
    ("server", "http", "idle_timeout_s"): Setting(
        60,
        "int",
        low=1,
        high=3600,
        doc="a kept-alive connection waiting for its next request closes after this long",
    ),
    ("server", "http", "keepalive_s"): Setting(
        15, "int", low=1, high=600, doc="SSE keep-alive comment after this many quiet seconds"
    ),
    ("server", "http", "sse_outbox_bytes"): Setting(
        MIB,
        "int",
        low=64 * 1024,
        high=256 * MIB,
        doc="bytes an unread /sse stream may hold; past them its POSTs get 429",
    ),
    ("server", "http", "sse_stall_s"): Setting(
        30,
        "int",
        low=1,
        high=3600,
        doc="an /sse stream full and unread this long is closed and its session ended",
    ),
    ("server", "http", "lameduck_s"): Setting(
        5, "int", low=0, high=600, doc="after SIGTERM, /healthz answers 503 this long first"
    ),
    ("server", "http", "drain_s"): Setting(
        30, "int", low=0, high=3600, doc="then in-flight calls get this long to finish"
    ),
    ("server", "public_url"): Setting(
        None,
        "str",
        doc="the URL clients reach this server by, without /mcp (behind a proxy: its URL); "
        "default: http://HOST:PORT of --http. OAuth's resource is <public_url>/mcp",
    ),
    # -- OAuth 2.1 resource server (--http) --------------------------------------------------------
    ("server", "auth", "issuer"): Setting(
        None,
        "str",
        doc="OAuth authorization server (issuer URL) whose JWT access tokens --http accepts; "
        "turns OAuth on (needs the [oauth] extra)",
    ),
    ("server", "auth", "audience"): Setting(
        None,
        "str",
        doc="the audience tokens must carry; default: the resource URL <public_url>/mcp "
        "(with or without a trailing slash)",
    ),
    ("server", "auth", "scopes"): Setting(
        [], "strings", doc="scopes every token must carry (missing: 403 insufficient_scope)"
    ),
    ("server", "auth", "user_claim"): Setting(
        "sub", "str", doc="the token claim that names the user"
    ),
    ("server", "auth", "introspection_url"): Setting(
        None,
        "str",
        doc="RFC 7662 introspection endpoint for opaque (non-JWT) access tokens; off if unset",
    ),
    ("server", "auth", "client_id"): Setting(
        None,
        "str",
        env="MCP_AUTH_CLIENT_ID",
        doc="this server's client id at the issuer, for introspection",
    ),
    ("server", "auth", "client_secret"): Setting(
        None,
        "str",
        env="MCP_AUTH_CLIENT_SECRET",
        doc="its client secret (better in the environment; never printed or logged)",
    ),
    # -- Tasks (MCP tasks, both shapes) and handoffs ------------------------------------------
    ("server", "tasks", "immediate_ms"): Setting(
        2000,
        "int",
        low=0,
        high=600_000,
        doc="a call done within this answers inline, not as a task",
    ),
    ("server", "tasks", "ttl_ms"): Setting(
        3_600_000,
        "int",
        low=60_000,
        high=86_400_000,
        doc="a task or handoff can be collected this long after it began (>= request.timeout_ms)",
    ),
    ("server", "tasks", "poll_interval_ms"): Setting(
        5000, "int", low=100, high=600_000, doc="how often clients are asked to poll a task"
    ),
    ("server", "tasks", "max_per_client"): Setting(
        16,
        "int",
        low=1,
        high=10_000,
        doc="most open tasks and handoffs one client holds (running, or done and not collected)",
    ),
    ("server", "tasks", "max_open"): Setting(
        1000,
        "int",
        low=1,
        high=1_000_000,
        doc="most tasks and handoffs held on the server, every client together",
    ),
    ("server", "tasks", "max_reply_bytes"): Setting(
        64 * MIB,
        "int",
        low=MIB,
        high=4096 * MIB,
        doc="most bytes of finished tasks' replies held on the server, every client together",
    ),
    ("server", "tasks", "secret"): Setting(
        None,
        "str",
        env="MCP_TASK_SECRET",
        doc="signs task ids so any instance can serve them; needed for tasks with --stateless",
    ),
}


# -- Layers: the defaults, the config file, the environment ------------------------------------


def _nested_defaults() -> dict:
    tree: dict = {}
    for path, setting in SETTINGS.items():
        if setting.default is None and path[0] == "model_profiles":
            continue  # absent profile keys inherit from `answer`, or are not sent at all
        node = tree
        for key in path[:-1]:
            node = node.setdefault(key, {})
        node[path[-1]] = (
            list(setting.default) if isinstance(setting.default, list) else (setting.default)
        )
    return tree


def deep_merge(base: dict, override: dict) -> dict:
    """Dicts merge key by key; anything else (lists included) replaces."""
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def user_file(env: dict, windows: str, xdg: str, fallback: tuple, name: str) -> str:
    """<$xdg or ~/fallback>/openai-responses-mcp/<name>, or under %<windows>% on Windows."""
    if os.name == "nt" and env.get(windows):
        return os.path.join(env[windows], SERVER_NAME, name)
    home = env.get("HOME") or os.path.expanduser("~")
    base = _xdg_base(env, xdg) or os.path.join(home, *fallback)
    return os.path.join(base, SERVER_NAME, name)


def default_config_path(env: dict) -> str:
    """$XDG_CONFIG_HOME/openai-responses-mcp/config.yaml, or the platform's equivalent."""
    return user_file(env, "APPDATA", "XDG_CONFIG_HOME", (".config",), "config.yaml")


def default_state_path(env: dict) -> str:
    """$XDG_STATE_HOME/openai-responses-mcp/state.sqlite3, or the platform's equivalent."""
    return user_file(env, "LOCALAPPDATA", "XDG_STATE_HOME", (".local", "state"), "state.sqlite3")


def _xdg_base(env: dict, name: str) -> str | None:
    """An XDG base directory, ignored unless absolute, as the XDG spec says: a relative one
    put the state (the ledger budgets count) in whatever folder a client started the server
    in, one ledger per folder (issue 39), as a relative state.path from the environment would
    (refused)."""
    value = env.get(name) or ""
    return value if os.path.isabs(value) else None


def _env_value(text: str):
    """An environment variable's text as the YAML scalar it would be."""
    lowered = text.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered in ("null", "~"):
        return None
    try:
        return int(text.strip())
    except ValueError:
        return text.strip()


def _flatten(tree: dict, prefix: tuple = ()) -> dict:
    flat = {}
    for key, value in tree.items():
        path = (*prefix, str(key))
        if isinstance(value, dict) and (path not in SETTINGS):
            flat.update(_flatten(value, path))
        else:
            flat[path] = value
    return flat


def _set_path(tree: dict, path: tuple, value) -> None:
    for key in path[:-1]:
        node = tree.get(key)
        if not isinstance(node, dict):
            node = tree[key] = {}
        tree = node
    tree[path[-1]] = value


def _is_truthy_word(text: str) -> bool | None:
    lowered = text.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("", "0", "false", "no", "off"):
        return False
    return None


# -- Loading: Config, and load_config that layers and checks it --------------------------------


class Config:
    """The effective configuration, where each value came from, and the start-up decisions."""

    def __init__(self, values: dict, sources: dict, path: str | None, warnings: list[str]):
        self.values = values
        self.sources = sources
        self.path = path
        self.warnings = warnings
        self.instructions = ""
        self.default_state_path = ""  # where state lives when state.path is null

    def get(self, *path: str):
        node = self.values
        for key in path:
            node = node[key]
        return node

    def profile(self, tool: str) -> dict:
        """The tool's profile, each key without a value (null, or a default of null) taken
        from `answer`; the cost controls only when set."""
        profiles = self.values["model_profiles"]
        own = profiles.get(tool) or {}
        base = {} if _row(tool).get("opt_in") else profiles["answer"]
        merged = {
            key: own.get(key) if own.get(key) is not None else base.get(key) for key in PROFILE_KEYS
        }
        return {key: value for key, value in merged.items() if value is not None or key in BASICS}

    def profile_sources(self, tool: str) -> dict:
        """Where each of profile(tool)'s values (and background) came from: default, a file's
        line, env X, flag --x, or `inherited from answer (<where answer's came from>)`."""
        own = self.values["model_profiles"].get(tool) or {}
        shown = {}
        for key in (*self.profile(tool), "background"):
            path = ("model_profiles", tool, key)
            if own.get(key) is None and not _row(tool).get("opt_in") and tool != "answer":
                answer = self.sources.get(("model_profiles", "answer", key), "default")
                shown[key] = f"{INHERITED} ({answer})"
            else:
                shown[key] = self.sources.get(path, "default")
        return shown

    def background(self, tool: str) -> bool:
        """model_profiles.<tool>.background, inherited from `answer` when absent. Not part of
        profile(): it shapes how the request is sent, not the request (nor its cache key)."""
        if _row(tool).get("opt_in"):
            return True
        profiles = self.values["model_profiles"]
        own = (profiles.get(tool) or {}).get("background")
        return bool(profiles["answer"].get("background") if own is None else own)

    def completion_window(self, tool: str) -> str:
        """model_profiles.<tool>.completion_window: soonest, 2h or 8h (each tool its own). Not
        part of profile(): a discount changes when the answer comes, not the answer."""
        own = self.values["model_profiles"].get(tool) or {}
        return own.get("completion_window") or "soonest"

    def describe(self) -> dict:
        """What --show-config prints (the HTTP token masked)."""
        import copy

        values = copy.deepcopy(self.values)
        if values["server"]["http"]["token"]:
            values["server"]["http"]["token"] = "***"
        if values["server"]["tasks"]["secret"]:
            values["server"]["tasks"]["secret"] = "***"
        if values["server"]["auth"]["client_secret"]:
            values["server"]["auth"]["client_secret"] = "***"
        if values["state"]["url"]:
            values["state"]["url"] = redact_url(values["state"]["url"])
        # A gateway's or an issuer's URL may carry user:password@ (issue 39): never shown.
        values["openai"]["base_url"] = redact_url(values["openai"]["base_url"])
        for key in ("issuer", "introspection_url"):
            if values["server"]["auth"][key]:
                values["server"]["auth"][key] = redact_url(values["server"]["auth"][key])
        key_env = self.get("openai", "api_key_env")
        return {
            "version": __version__,
            "system_policy_rev": SYSTEM_POLICY_REV,
            "api_key": f"{'set' if api_key(self) else 'not set'} ({key_env})",
            "config_file": self.path,
            "state": state_label(self),
            "config": values,
            "profiles": {tool: self.profile(tool) for tool in enabled_tools(self)},
            "profile_sources": {tool: self.profile_sources(tool) for tool in enabled_tools(self)},
            "sources": {".".join(path): where for path, where in sorted(self.sources.items())},
        }


def _row(tool: str) -> dict:
    """The tool's TOOL_TABLE row ({} for a name that is not a tool)."""
    return next((row for row in TOOL_TABLE if row["name"] == tool), {})


def enabled_tools(config: Config) -> tuple[str, ...]:
    """The answering tools this configuration lists: answer_deep only when turned on."""
    return tuple(
        row["name"]
        for row in TOOL_TABLE
        if not row.get("opt_in") or config.get("tools", row["name"])
    )


CONFIG_FIFO_WAIT_S = 3.0  # a config "file" that is a FIFO: how long to wait for its writer


def _read_config_text(path: str) -> str:
    """The config file's text. A directory is refused in words; a FIFO (`--config <(…)`) is
    read once a writer has written, and refused after CONFIG_FIFO_WAIT_S rather than waiting
    forever for a writer that never comes."""
    import errno
    import stat

    mode = os.stat(path).st_mode
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, "Is a directory", path)
    if not stat.S_ISFIFO(mode) or os.name == "nt":
        with open(path, encoding="utf-8-sig") as handle:
            return handle.read()
    import select

    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # opening does not wait for a writer
    with open(fd, "rb") as handle:
        if not select.select([fd], [], [], CONFIG_FIFO_WAIT_S)[0]:
            raise ConfigError(
                f"config file {path} is a FIFO that nothing wrote to in {CONFIG_FIFO_WAIT_S:g} s:"
                " point --config at a YAML file"
            )
        os.set_blocking(fd, True)
        return handle.read().decode("utf-8-sig")


def os_error_words(exc: OSError) -> str:
    """An OS error said in words, for a person (not `[Errno 21] Is a directory: '/tmp'`)."""
    import errno

    words = {
        errno.ENOENT: "it does not exist",
        errno.EISDIR: "it is a directory, not a file",
        errno.ENOTDIR: "a part of its path is a file, not a directory",
        errno.EACCES: "permission denied (check its mode and owner)",
        errno.EPERM: "permission denied (check its mode and owner)",
        errno.ELOOP: "its symbolic links loop",
        errno.ENAMETOOLONG: "its name is too long",
        errno.ENOSPC: "the disk is full",
        errno.EROFS: "it is on a read-only file system",
    }
    return words.get(exc.errno) or (exc.strerror or type(exc).__name__).lower()


def _yaml_layer(path: str, explicit: bool) -> tuple[dict, dict, list[str]]:
    """Reads the YAML file: (values, sources, warnings). A missing default file is no error."""
    try:
        text = _read_config_text(path)
    except FileNotFoundError:
        if explicit:
            raise ConfigError(f"config file not found: {path} (check --config)") from None
        return {}, {}, []
    except UnicodeDecodeError:
        raise ConfigError(f"config file {path} is not UTF-8 text: save it as UTF-8") from None
    except OSError as exc:
        fix = "point --config at a YAML file" if explicit else "remove it or make it a YAML file"
        raise ConfigError(f"cannot read config file {path}: {os_error_words(exc)}; {fix}") from None
    tree, lines = parse_yaml(text, path)
    if tree is None:
        tree = {}
    if not isinstance(tree, dict):
        raise ConfigError(f"{path}:1: the file must be a mapping of keys (like `openai:`)")
    tree = _check_sections(tree, lines, path)
    _check_price_table(tree, lines, path)
    warnings = []
    for flat_path, value in _flatten(tree).items():
        where = f"{path}:{lines.get(flat_path, 1)}"
        if flat_path[-1] == "api_key" or (flat_path[-1].endswith("api_key") and value):
            raise ConfigError(
                f"{where}: an API key must not be written in the config file; "
                "set it in the environment (openai.api_key_env names the variable)"
            )
        if flat_path not in SETTINGS:
            warnings.append(f"{where}: unknown key {'.'.join(flat_path)}{_suggest(flat_path)}")
    sources = {p: f"{path}:{lines.get(p, 1)}" for p in _flatten(tree) if p in SETTINGS}
    return tree, sources, warnings


_SECTIONS = {path[:i] for path in SETTINGS for i in range(1, len(path))}


def _check_sections(tree: dict, lines: dict, source: str, prefix: tuple = ()) -> dict:
    """Drops empty (null) sections; refuses a section written as anything but a mapping.

    The value itself is not echoed: it might be a secret written in the wrong place.
    """
    clean = {}
    for key, value in tree.items():
        path = (*prefix, str(key))
        if path in _SECTIONS:
            if value is None:
                continue  # every key under it is commented out: nothing is set
            if not isinstance(value, dict):
                where = f"{source}:{lines.get(path, 1)}"
                child = next(p[len(path)] for p in SETTINGS if p[: len(path)] == path)
                kinds = {bool: "true/false", int: "a number", float: "a number", list: "a list"}
                kind = kinds.get(type(value), "a single value")
                raise ConfigError(
                    f"{where}: {'.'.join(path)} must be a mapping of keys "
                    f"(such as `{child}:` on the next line, indented), not {kind}"
                )
            value = _check_sections(value, lines, source, path)
        clean[key] = value
    return clean


def _check_price_table(tree: dict, lines: dict, source: str) -> None:
    """pricing.models is a free-form mapping, so its entries are checked here, with file:line."""
    table = (tree.get("pricing") or {}).get("models")
    if table is None:
        return
    where = f"{source}:{lines.get(('pricing', 'models'), 1)}"
    if not isinstance(table, dict):
        raise ConfigError(
            f"{where}: pricing.models must be a mapping of model ids, like "
            "`gpt-5.2: {input: 1.75, cached_input: 0.175, output: 14}`"
        )
    problem = price_table_problem(table)
    if problem:
        model, what = problem
        key = next(k for k in table if str(k) == model)
        where = f"{source}:{lines.get(('pricing', 'models', key), 1)}"
        raise ConfigError(f"{where}: pricing.models.{model} {what}")


def _suggest(path: tuple) -> str:
    import difflib

    dropped = (("background",), ("verbosity",), ("search_context_size",))
    if path[:1] == ("model_profiles",) and path[2:] in dropped and _row(path[1]).get("opt_in"):
        # Not `answer`'s key, the nearest by spelling, which would change every other tool.
        return (
            f" ({path[1]} has none: it always runs in background mode, and its models take "
            "no verbosity or search context size)"
        )
    names = [".".join(p) for p in SETTINGS]
    close = difflib.get_close_matches(".".join(path), names, n=1, cutoff=0.75)
    return f" (did you mean {close[0]}?)" if close else " (ignored)"


def _env_layer(env: dict) -> tuple[dict, dict]:
    tree: dict = {}
    sources = {}
    for path, setting in SETTINGS.items():
        text = env.get(setting.env) if setting.env else None
        if text is None or text.strip() == "":
            continue
        value = _env_value(text)
        if setting.kind == "bool":
            word = _is_truthy_word(text)
            value = value if word is None else word
        elif setting.kind == "str":
            value = text.strip()
        _set_path(tree, path, value)
        sources[path] = f"env {setting.env}"
    return tree, sources


def load_config(cli: dict, env: dict | None = None) -> Config:
    """Builds the effective configuration: defaults < YAML < environment < command line.

    ``cli`` holds the command line's settings: ``config`` (path), ``model``, ``debug``
    (True, a path, or None). Raises ConfigError for anything invalid.
    """
    env = dict(os.environ) if env is None else env
    explicit = cli.get("config")
    path = os.path.expanduser(explicit) if explicit else default_config_path(env)
    yaml_tree, yaml_sources, warnings = _yaml_layer(path, bool(explicit))
    env_tree, env_sources = _env_layer(env)
    cli_tree: dict = {}
    cli_sources = {}
    if cli.get("model"):
        _set_path(cli_tree, ("model_profiles", "answer", "model"), cli["model"])
        cli_sources[("model_profiles", "answer", "model")] = "flag --model"
    for key_path, (value, flag) in cli.get("settings", {}).items():
        _set_path(cli_tree, key_path, value)
        cli_sources[key_path] = f"flag {flag}"

    values = deep_merge(deep_merge(deep_merge(_nested_defaults(), yaml_tree), env_tree), cli_tree)
    sources = {path: "default" for path in _flatten(_nested_defaults())}
    sources.update(yaml_sources)
    sources.update(env_sources)
    sources.update(cli_sources)
    _decide_debug(values, sources, cli, env)
    _validate(values, sources)
    _resolve_state_path(values, sources, path)
    _inherit_answer(values, sources)
    config = Config(values, sources, path if os.path.exists(path) else None, warnings)
    _fit_defaults_to_models(config)
    _check_deep_research(config)
    _check_windows(config)
    config.instructions = build_instructions(config)
    # Resolved from the same environment as every other value, so a caller's env (a test's,
    # say) decides it, not whatever this process happens to run under.
    config.default_state_path = default_state_path(env)
    return config


INHERITED = "inherited from answer"


def _inherit_answer(values: dict, sources: dict) -> None:
    """Seed 001's profile rule: once the user sets `answer`'s model (file, environment or
    --model), every profile key of answer_detailed and answer_quick they did not set themselves
    is `answer`'s (model, effort, verbosity, search context, cost controls), so a config of
    `answer` alone runs every tool on the model the user chose. The per-tool built-in defaults
    (gpt-6.2-sol, gpt-6-luna, effort high or low ...) apply only when the user set no `answer`
    model either. answer_deep stands alone: a deep research model takes other settings.

    `background` is no part of the answer's shape but of how a long call survives: each tool
    keeps its own default (answer_detailed's true) unless the user sets `background`, for
    `answer` (then every tool that does not set its own takes it) or for that tool (issue 39:
    the seed's example config, with every model set, had lost answer_detailed's resumes)."""
    chosen = {
        key: sources.get(("model_profiles", "answer", key), "default") != "default"
        for key in ("model", "background")
    }
    for row in TOOL_TABLE:
        tool = row["name"]
        if tool == "answer" or row.get("opt_in"):
            continue
        for key in (*PROFILE_KEYS, "background"):
            path = ("model_profiles", tool, key)
            if not chosen["background" if key == "background" else "model"]:
                continue
            if path in SETTINGS and sources.get(path, "default") == "default":
                values["model_profiles"][tool][key] = None  # null: answer's, as profile() reads
                sources[path] = INHERITED


def _decide_debug(values: dict, sources: dict, cli: dict, env: dict) -> None:
    """The one debug decision: CLI > DEBUG env > YAML, made once at start-up."""
    server = values["server"]
    flag = cli.get("debug")
    if flag is not None:
        server["debug"] = True
        sources[("server", "debug")] = "flag --debug"
        if isinstance(flag, str):
            server["debug_file"] = flag
            sources[("server", "debug_file")] = "flag --debug"
        return
    text = env.get("DEBUG")
    if text is None or text.strip() == "":
        return
    word = _is_truthy_word(text)
    # Any other word was taken for a file name, so DEBUG=maybe wrote debug lines to ./maybe: a
    # path must look like one (issue 33).
    if word is None and not any(mark in text for mark in ("/", os.sep, ".", "~")):
        word = text.strip()  # shown only when short and no key (a key pasted in the wrong place)
        shown = json.dumps(word) if len(word) <= 16 and not word.startswith("sk-") else "(hidden)"
        raise ConfigError(
            f"DEBUG = {shown} must be 1, true, yes or on; 0, false, no or off;"
            " or a file path for the debug lines, like ./debug.log or /tmp/debug.log"
        )
    server["debug"] = True if word is None else word
    sources[("server", "debug")] = "env DEBUG"
    if word is None:
        server["debug_file"] = text.strip()
        sources[("server", "debug_file")] = "env DEBUG"


# -- Validation: each value checked once, at start-up ------------------------------------------


def _not_utf8(value) -> bool:
    """Whether a value holds what Python makes of bytes that are no UTF-8 (an environment
    variable or argument in another encoding): every request with it would fail to encode."""
    texts = value if isinstance(value, list) else [value]
    return any(isinstance(text, str) and not text.isascii() and _lone_surrogate(text)
               for text in texts)  # fmt: skip


def _lone_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _validate(values: dict, sources: dict) -> None:
    flat = _flatten(values)
    for path, setting in SETTINGS.items():
        value = flat.get(path, setting.default)
        if _not_utf8(value):  # a traceback at the first request otherwise (issue 39)
            raise ConfigError(
                f"{'.'.join(path)} (from {sources.get(path, 'default')}) holds bytes that are "
                "not UTF-8: write it in UTF-8"
            )
        try:
            setting.check(value)
        except ValueError:
            where = sources.get(path, "default")
            secret = path[-1] in ("token", "secret", "client_secret")
            shown = '"***"' if secret else json.dumps(value, ensure_ascii=False)
            if path == ("state", "url") and isinstance(value, str):
                shown = json.dumps(redact_url(value), ensure_ascii=False)
            raise ConfigError(
                f"{'.'.join(path)} = {shown} (from {where}) must be {setting.allowed()}"
            ) from None
    _check_timezone(values["policy"]["timezone"], sources[("policy", "timezone")])
    _check_base_url(values["openai"]["base_url"], sources[("openai", "base_url")])
    defaults = values["search"]["defaults"]
    try:
        defaults["domains"] = normalize_domains(defaults["domains"])
    except ValueError as exc:
        where = sources.get(("search", "defaults", "domains"), "default")
        raise ConfigError(f"search.defaults.domains (from {where}): item {exc}") from None
    _check_state_url(values, sources)
    _check_budget_has_ledger(values, sources)
    _check_user_location(values["search"]["user_location"], sources)
    _check_tasks(values, sources)
    _check_auth(values, sources)
    trusted_networks(values["server"]["http"]["trusted_proxies"])  # ConfigError naming it


def _check_url(key: str, url: str, where: str, loopback_http: bool = False) -> None:
    """An http(s) URL with a host and no query or fragment (https only, unless
    `loopback_http` lets http through for 127.0.0.1, ::1 and localhost)."""
    _check_base_url(url, where, key, "https://login.example.com/realms/team")
    scheme, _, rest = url.partition("://")
    host = _host_name(rest.split("/", 1)[0].rpartition("@")[2])
    if "?" in url or "#" in url:
        raise ConfigError(
            f"{key} = {json.dumps(url)} (from {where}) must have no query (?) or fragment (#)"
        )
    if loopback_http and scheme.lower() == "http" and host not in LOOPBACK_NAMES:
        raise ConfigError(
            f"{key} = {json.dumps(url)} (from {where}) must be https:// (OAuth sends tokens "
            "only over TLS; http:// is accepted for 127.0.0.1 and localhost alone)"
        )


def _check_auth(values: dict, sources: dict) -> None:
    """server.auth.* and server.public_url: URLs that are URLs, scopes without spaces, and the
    [oauth] extra installed (found, not imported) when OAuth is on."""
    public = values["server"]["public_url"]
    if public is not None:
        _check_url("server.public_url", public, sources.get(("server", "public_url"), "default"))
        values["server"]["public_url"] = public.rstrip("/")
    auth = values["server"]["auth"]
    for entry in auth["admins"]:
        try:
            Identity.admin_entry(entry)
        except ValueError as exc:
            where = sources.get(("server", "auth", "admins"), "default")
            raise ConfigError(f"server.auth.admins (from {where}): {exc}") from None
    for scope in auth["scopes"]:
        if any(char.isspace() or char in '"\\' for char in scope):
            where = sources.get(("server", "auth", "scopes"), "default")
            raise ConfigError(
                f"server.auth.scopes (from {where}): {json.dumps(scope)} is not a scope (no "
                "spaces, quotes or backslashes)"
            )
    issuer = auth["issuer"]
    if issuer is None:
        return
    where = sources.get(("server", "auth", "issuer"), "default")
    _check_url("server.auth.issuer", issuer, where, loopback_http=True)
    introspection = auth["introspection_url"]
    if introspection is not None:
        key = ("server", "auth", "introspection_url")
        _check_url(".".join(key), introspection, sources.get(key, "default"), loopback_http=True)
        if not (auth["client_id"] and auth["client_secret"]):
            raise ConfigError(
                f"server.auth.introspection_url (from {sources.get(key, 'default')}) needs "
                "this server's client credentials at the issuer: set MCP_AUTH_CLIENT_ID and "
                "MCP_AUTH_CLIENT_SECRET (server.auth.client_id, server.auth.client_secret)"
            )
    import importlib.util

    if importlib.util.find_spec("jwt") is None or importlib.util.find_spec("cryptography") is None:
        raise ConfigError(
            f"server.auth.issuer (from {where}) needs PyJWT and cryptography, which are not "
            f"installed: {extra_command('oauth')}"
        )


def _check_tasks(values: dict, sources: dict) -> None:
    """A secret too weak to sign task ids, or tasks that would expire before their calls end."""
    secret = values["server"]["tasks"]["secret"]
    if secret is not None and not (len(secret) >= 32 and all("!" <= c <= "~" for c in secret)):
        where = sources.get(("server", "tasks", "secret"), "default")
        raise ConfigError(
            f"server.tasks.secret (from {where}) must be at least 32 printable ASCII "
            "characters, no spaces; make one with: "
            "python3 -c 'import secrets; print(secrets.token_urlsafe(32))'"
        )
    ttl, timeout = values["server"]["tasks"]["ttl_ms"], values["request"]["timeout_ms"]
    if ttl < timeout:
        where = sources.get(("server", "tasks", "ttl_ms"), "default")
        raise ConfigError(
            f"server.tasks.ttl_ms = {ttl} (from {where}) must be at least request.timeout_ms "
            f"({timeout}): a task must outlive its call"
        )


def _fit_defaults_to_models(config: Config) -> None:
    """A profile's built-in effort or verbosity that its model is known to refuse becomes the
    nearest value it accepts, with a warning: answer_quick's low and answer_detailed's high must
    not break those tools for a user who only set answer's model to, say, gpt-5.2-chat-latest
    (which takes only medium). A value the user set is left for the API's 400 and --doctor,
    which name its key."""
    for row in TOOL_TABLE:
        if row.get("opt_in"):
            continue
        tool = row["name"]
        profile = config.profile(tool)
        model = profile["model"]
        for key, accepted in _known_values(model):
            value = profile[key]
            own = config.values["model_profiles"][tool].get(key)
            source = ("model_profiles", tool if own is not None else "answer", key)
            if accepted is None or value in accepted or config.sources.get(source) != "default":
                continue
            choices = [a for a in accepted if a != "minimal"] or list(accepted)  # web search
            best = nearest_value(key, value, choices)
            path = ("model_profiles", tool, key)
            config.values["model_profiles"][tool][key] = best
            config.sources[path] = f"default {value}, adapted to {model}"
            only = "only " if len(accepted) == 1 else ""
            config.warnings.append(
                f"{'.'.join(path)}: {model} does not take the default {value}, so {best} is "
                f"used (it accepts {only}{', '.join(accepted)}); set the key to silence this"
            )


def _known_values(model: str) -> tuple:
    """(profile key, the values `model` accepts, or None when unknown or not sent to it)."""
    return (
        ("reasoning_effort", model_efforts(model) if supports_reasoning(model) else None),
        ("verbosity", model_verbosities(model) if supports_verbosity(model) else None),
    )


def _check_deep_research(config: Config) -> None:
    """What a deep research model would refuse with a 400 on every call, refused at start-up:
    a reasoning effort but medium; and an answer_deep run that would outlive its task."""
    for tool in enabled_tools(config):
        profile = config.profile(tool)
        effort = profile["reasoning_effort"]
        if is_deep_research(profile["model"]) and effort != "medium":
            key = ("model_profiles", tool, "reasoning_effort")
            where = config.sources.get(key) or "inherited from answer"
            raise ConfigError(
                f"model_profiles.{tool}.reasoning_effort = {effort} (from {where}) must be "
                f"medium: {profile['model']} accepts only medium"
            )
    ttl, deep = config.get("server", "tasks", "ttl_ms"), config.get("request", "deep_timeout_ms")
    if DEEP_TOOL in enabled_tools(config) and ttl < deep:
        where = config.sources.get(("server", "tasks", "ttl_ms"), "default")
        raise ConfigError(
            f"server.tasks.ttl_ms = {ttl} (from {where}) must be at least "
            f"request.deep_timeout_ms ({deep}) while answer_deep is on: a task must outlive "
            "its call"
        )


def _check_windows(config: Config) -> None:
    """A completion window runs on Standard processing only (the API refuses it with another
    tier, and its discount is off Standard prices): a profile asking for both is refused here
    rather than on every call."""
    for tool in enabled_tools(config):
        window, tier = config.completion_window(tool), config.profile(tool).get("service_tier")
        if window == "soonest" or tier in (None, "auto", "default"):
            continue
        where = config.profile_sources(tool).get("service_tier", "")
        holder = "answer" if where.startswith(INHERITED) else tool
        raise ConfigError(
            f"model_profiles.{tool}.completion_window = {window} needs Standard processing, "
            f"but model_profiles.{holder}.service_tier = {tier}: set service_tier to default "
            f"(or auto) for {tool}, or completion_window to soonest"
        )


def _check_user_location(location: dict, sources: dict) -> None:
    """What the web search tool would refuse with a 400 on every call, refused at start-up."""
    country = location["country"]
    if country is not None and not (len(country) == 2 and country.isascii() and country.isalpha()):
        where = sources.get(("search", "user_location", "country"), "default")
        raise ConfigError(
            f"search.user_location.country = {json.dumps(country, ensure_ascii=False)} (from "
            f"{where}) must be a two-letter ISO country code, like JP or US"
        )
    if location["timezone"] is not None:
        where = sources.get(("search", "user_location", "timezone"), "default")
        _check_timezone(location["timezone"], where, "search.user_location.timezone")


def _check_base_url(
    url: str, where: str, key: str = "openai.base_url", like: str = "https://api.openai.com/v1"
) -> None:
    """An http(s) URL with a host (and a numeric port if any), checked without urllib.parse,
    which would cost start-up the import of `re` and `ipaddress`."""
    scheme, sep, rest = url.partition("://")
    authority = rest.split("/", 1)[0].split("?", 1)[0].split("#", 1)[0].rpartition("@")[2]
    host, port = authority, ""
    if ":" in authority and not authority.endswith("]"):
        host, _, port = authority.rpartition(":")
    ok = (
        sep
        and scheme.lower() in ("http", "https")
        and host
        and (port == "" or (port.isascii() and port.isdigit() and int(port) < 65536))
        and not any(char.isspace() for char in url)
    )
    if not ok:
        raise ConfigError(
            f"{key} = {json.dumps(_url_shown(url), ensure_ascii=False)} (from {where}) must be "
            f"an http:// or https:// URL with a host, like {like}"
        )


def _url_shown(url: str) -> str:
    """A URL for an error message: a user:password@ masked, with a scheme or without one."""
    if "://" in url:
        return redact_url(url)
    head, slash, tail = url.partition("/")
    return f"***@{head.rpartition('@')[2]}{slash}{tail}" if "@" in head else url


_PG_SCHEMES = ("postgresql://", "postgres://")
_PG_SECRETS = ("password", "sslpassword")  # libpq's parameters that hold a secret


# -- State settings: state.url (never its password), state.path, the zone ----------------------


def pg_params(url: str) -> dict | None:
    """A PostgreSQL URL's parameters as libpq reads them (psycopg's conninfo_to_dict, or our
    reading of the same rules without psycopg), or None when libpq would not take it: it
    cannot be parsed, or it parses into something no one meant, a raw "@" in the database or
    host (a password with a raw "/" ends the host early: "u:ab/cd@h" is host "u", port "ab").
    Anything else (an empty value, a proxy's URL) is None before the driver is imported: the
    log's secret masker asks about every start's state.url, and psycopg costs 100 ms."""
    if not url.startswith(_PG_SCHEMES):
        return None
    try:
        from psycopg.conninfo import conninfo_to_dict
    except ImportError:
        params = _pg_url_params(url)
    else:
        try:
            params = {name: str(value) for name, value in conninfo_to_dict(url).items()}
        except Exception:  # noqa: BLE001 - psycopg.ProgrammingError, and whatever else
            params = None
    if params is None or "@" in params.get("host", "") + params.get("dbname", ""):
        return None
    if not all(port.isascii() and port.isdigit() for port in _pg_ports(params)):
        return None
    return params


def _pg_ports(params: dict) -> list:
    return [port for port in params.get("port", "").split(",") if port]


def _pg_url_params(url: str) -> dict | None:
    """libpq's URI rules (postgresql://[user[:password]@][host[:port],...][/dbname][?k=v&...]),
    for when psycopg is not installed: the user part ends at the first "@" before any "/"."""
    from urllib.parse import unquote

    def decoded(text: str) -> str:
        if re.search(r"%(?![0-9A-Fa-f]{2})", text):
            raise ValueError("bad percent-escape")
        return unquote(text, errors="strict")

    if not url.startswith(_PG_SCHEMES):
        return None
    rest = url.partition("://")[2]
    try:
        rest, _, query = rest.partition("?")
        authority, slash, dbname = rest.partition("/")
        userinfo, at, hosts = authority.rpartition("@")
        if not at:
            userinfo, hosts = "", authority
        params = {}
        if userinfo:
            user, colon, password = userinfo.partition(":")
            params["user"] = decoded(user)
            if colon:
                params["password"] = decoded(password)
        host_list, port_list = [], []
        for item in hosts.split(",") if hosts else []:
            if item.startswith("["):
                host, close, port = item[1:].partition("]")
                if not close or (port and not port.startswith(":")):
                    return None
                port = port[1:]
            else:
                host, _, port = item.partition(":")
            host_list.append(decoded(host))
            port_list.append(decoded(port))
        if any(host_list):
            params["host"] = ",".join(host_list)
        if any(port_list):
            params["port"] = ",".join(port_list)
        if slash and dbname:
            params["dbname"] = decoded(dbname)
        for pair in query.split("&") if query else []:
            name, equals, value = pair.partition("=")
            if not equals:
                return None
            params[decoded(name)] = decoded(value)
    except ValueError:  # UnicodeDecodeError included
        return None
    return params


def redact_url(url: str) -> str:
    """A URL without its secrets, for every output. A PostgreSQL URL is shown as libpq reads
    it (user, host, port, database and parameters kept, password and sslpassword masked),
    or as just its scheme when libpq would not take it; any other URL (a proxy's) without
    what comes before an "@"."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    if not url.startswith(_PG_SCHEMES):
        if "@" not in rest.partition("?")[0]:
            return url
        return f"{scheme}://***@{rest.partition('?')[0].rpartition('@')[2]}"
    params = pg_params(url)
    if params is None:
        return f"{scheme}://***"
    return _pg_url_shown(scheme, params)


def _pg_url_shown(scheme: str, params: dict) -> str:
    from urllib.parse import quote

    params = dict(params)
    user = quote(params.pop("user", ""), safe="")
    userinfo = (f"{user}:***@" if params.pop("password", None) is not None else f"{user}@") * bool(
        user or "password" in params
    )
    hosts = params.get("host", "").split(",") if params.get("host") else []
    ports = params.get("port", "").split(",") if params.get("port") else []
    netloc = ""
    if hosts and not any(h.startswith("/") for h in hosts) and len(ports) in (0, len(hosts)):
        params.pop("host"), params.pop("port", None)
        ports = ports or [""] * len(hosts)
        netloc = ",".join(
            (f"[{h}]" if ":" in h else quote(h, safe="")) + (f":{p}" if p else "")
            for h, p in zip(hosts, ports, strict=True)
        )
    dbname = params.pop("dbname", None)
    path = f"/{quote(dbname, safe='')}" if dbname else ""
    query = "&".join(
        f"{quote(k, safe='')}={'***' if k in _PG_SECRETS else quote(v, safe='/,:')}"
        for k, v in sorted(params.items())
    )
    return f"{scheme}://{userinfo}{netloc}{path}{'?' + query if query else ''}"


def url_has_secret(url: str) -> bool:
    """Whether a value shown in full would show a secret (an unreadable PostgreSQL URL counts)."""
    if url.startswith(_PG_SCHEMES):
        params = pg_params(url)
        return params is None or any(name in params for name in _PG_SECRETS)
    return redact_url(url) != url


def url_secrets(url: str) -> tuple:
    """Every form of a database URL's secrets (password, sslpassword), to hide wherever they
    appear: as libpq read them, and as written (percent-encoded, "+" for a space or not);
    longest first, so a secret that holds another is hidden whole. The driver's errors quote
    the URL as written."""
    from urllib.parse import quote, quote_plus, unquote, unquote_plus

    params = pg_params(url) or {}
    found = [params[name] for name in _PG_SECRETS if params.get(name)]
    # As written too: a password in the user part that a ?password= overrides, say.
    userinfo = url.partition("://")[2].partition("/")[0].rpartition("@")[0]
    written = [userinfo.partition(":")[2]] if ":" in userinfo else []
    written += re.findall(r"(?i)[?&](?:ssl)?password=([^&]*)", url)
    forms = {form for raw in found for form in (raw, quote(raw, safe=""), quote_plus(raw))}
    forms |= {form for raw in written for form in (raw, unquote(raw), unquote_plus(raw))}
    return tuple(sorted((form for form in forms if form), key=len, reverse=True))


def _check_state_url(values: dict, sources: dict) -> None:
    """state.url is a PostgreSQL URL, and the driver for it is installed (not imported)."""
    url = values["state"]["url"]
    if url is None:
        return
    where = sources.get(("state", "url"), "default")
    if not url.startswith(_PG_SCHEMES):
        # Without a scheme (user:password@host/db, a password pasted alone) nothing in it can
        # be told from a secret: only a scheme://… is shown, masked (issue 39).
        shown = json.dumps(redact_url(url)) if "://" in url else "(not shown: no scheme://)"
        raise ConfigError(
            f"state.url = {shown} (from {where}) must be a PostgreSQL URL "
            "like postgresql://user@host/db"
        )
    import importlib.util

    if importlib.util.find_spec("psycopg") is None:
        raise ConfigError(
            f"state.url (from {where}) needs the PostgreSQL driver, which is not installed: "
            f"{extra_command('postgres')}"
        )
    if pg_params(url) is None:  # the driver's own message would quote the password
        raise ConfigError(
            f"state.url = {json.dumps(redact_url(url))} (from {where}) cannot be read as a "
            "PostgreSQL URL: percent-encode the characters / ? @ # % : [ ] in the user and "
            "password (like %2F for /), and give the port as a number"
        )


def _resolve_state_path(values: dict, sources: dict, config_path: str) -> None:
    """A relative state.path from the config file is taken from the file's folder, not from
    wherever a client happened to start the server; from anywhere else it is refused."""
    path = values["state"]["path"]
    if not path or path.strip().lower() == "off":
        return
    path = os.path.expanduser(path)
    if not os.path.isabs(path):
        where = sources.get(("state", "path"), "default")
        if where.startswith(("env ", "flag ")):
            raise ConfigError(
                f"state.path = {json.dumps(path)} (from {where}) is relative: give an absolute "
                "path, since a client may start the server in any folder"
            )
        path = os.path.join(os.path.dirname(os.path.abspath(config_path)), path)
    values["state"]["path"] = os.path.normpath(path)


def _check_budget_has_ledger(values: dict, sources: dict) -> None:
    """Budgets are sums over the usage ledger: without it they could not be kept. The cost
    question's estimate reads it too (without it, every call over it failed, saying to retry)."""
    path = values["state"]["path"]
    if values["state"]["url"] or not (path and path.strip().lower() == "off"):
        return
    for key in ("daily", "monthly", "per_user_daily", "per_user_monthly", "confirm_over"):
        if values["budget"][f"{key}_usd"] is not None:
            where = sources.get(("budget", f"{key}_usd"), "default")
            off = sources.get(("state", "path"), "default")  # the environment's, often
            raise ConfigError(
                f"budget.{key}_usd (from {where}) needs the usage ledger, but state.path is "
                f"off (from {off}): set state.path to a file (or leave it unset), or remove "
                + ("budget.confirm_over_usd" if key == "confirm_over" else "the budget")
            )


_TZ_DIRS = ("/usr/share/zoneinfo", "/usr/lib/zoneinfo", "/usr/share/lib/zoneinfo", "/etc/zoneinfo")
_TZ_NAME_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_+-"


def _is_system_zone(name: str) -> bool:
    """True if `name` is a zone file in zoneinfo's default search path, found without
    importing zoneinfo (a few ms at start-up); False means "ask zoneinfo"."""
    parts = name.split("/")
    if os.environ.get("PYTHONTZPATH") or not all(
        part and part[0] != "." and not part.strip(_TZ_NAME_CHARS) for part in parts
    ):
        return False
    for directory in _TZ_DIRS:
        try:
            with open(os.path.join(directory, *parts), "rb") as handle:
                if handle.read(4) == b"TZif":
                    return True
        except OSError:
            continue
    return False


def _check_timezone(name: str, where: str, key: str = "policy.timezone") -> None:
    if _is_system_zone(name):
        return
    try:
        import zoneinfo

        zoneinfo.ZoneInfo(name)
    except (ValueError, KeyError, OSError, ImportError):
        hint = " (on Windows, `pip install tzdata`)" if os.name == "nt" else ""
        raise ConfigError(
            f"{key} = {name!r} (from {where}) is not a known IANA time zone "
            f"such as Asia/Tokyo or UTC{hint}"
        ) from None


# -- This installation: what installed it, and what starts it ----------------------------------
# uvx runs from uv's cache (gone after `uv cache clean`), pipx and `uv tool install` keep a venv
# of their own, pip a venv or the system's Python, and a copied file runs under any Python: the
# lines --doctor prints and every "install the extra" command must fit the installer in use,
# since `pip install` does nothing for a pipx or uv installation (issue 33).

_UV_CACHE_BUCKET = r"(archive|builds|environments)-v\d+"  # uv's cache: <cache>/archive-v0/<id>
EXTRA_PACKAGES = {"postgres": ("psycopg[binary]",), "oauth": ("PyJWT", "cryptography")}


def install_kind(
    executable: str,
    prefix: str,
    base_prefix: str,
    script: str,
    argv0: str,
    exists=None,
    site_dirs: tuple = (),
) -> str:
    """How this copy was installed, from its interpreter's paths: "uvx" (an environment in
    uv's cache), "uv-run" (a file `uv run` runs, also from the cache), "file" (a file run by
    Python, as `python file` or `python -m`), "uv-tool" (`uv tool install`), "pipx", "venv" or
    "pip" (the system's Python). An installed module run with `python -m` (in `site_dirs`) is
    its installation's, not a copied file."""
    exists = os.path.exists if exists is None else exists
    parts = {part for path in (executable, prefix) for part in re.split(r"[\\/]", path)}
    in_uv_cache = any(re.fullmatch(_UV_CACHE_BUCKET, part) for part in parts)
    ran_as_file = bool(argv0) and os.path.realpath(argv0) == os.path.realpath(script)
    folder = os.path.realpath(os.path.dirname(script))
    if any(folder == os.path.realpath(site) for site in site_dirs):
        ran_as_file = False
    if in_uv_cache:
        return "uv-run" if ran_as_file else "uvx"
    if ran_as_file:
        return "file"
    if exists(os.path.join(prefix, "uv-receipt.toml")):
        return "uv-tool"
    if exists(os.path.join(prefix, "pipx_metadata.json")):
        return "pipx"
    return "venv" if prefix != base_prefix else "pip"


def this_installation() -> str:
    import site
    import sysconfig

    argv0 = sys.argv[0] if sys.argv else ""
    paths = sysconfig.get_paths()
    sites = (paths["purelib"], paths["platlib"], site.getusersitepackages())
    return install_kind(
        sys.executable, sys.prefix, sys.base_prefix, __file__, argv0, site_dirs=sites
    )


def install_source() -> str | None:
    """What `uvx --from` took this copy from when it was not the package index: a local folder
    or archive, or `git+URL[@revision]`, as PEP 610's direct_url.json records it (uv and pip
    write it); None for a copy from the index. A line without it would run the index's release,
    or fail where the index has none (issue 39)."""
    try:
        from importlib.metadata import PackageNotFoundError, distribution

        text = distribution(SERVER_NAME).read_text("direct_url.json")
    except (PackageNotFoundError, OSError):
        return None
    try:
        record = json.loads(text or "null")
    except ValueError:
        return None
    return direct_url_source(record) if isinstance(record, dict) else None


def direct_url_source(record: dict) -> str | None:
    """A PEP 610 record as the words `uvx --from` takes: a path for a file:// URL, the VCS URL
    with the revision asked for, any other URL as it is."""
    from urllib.parse import urlsplit

    url = record.get("url")
    if not isinstance(url, str) or not url:
        return None
    url = _without_credentials(url)
    vcs = record.get("vcs_info")
    if isinstance(vcs, dict):
        revision = vcs.get("requested_revision")
        url = f"{vcs.get('vcs', 'git')}+{url}" + (f"@{revision}" if revision else "")
    elif url.startswith("file:"):
        from urllib.request import url2pathname

        url = url2pathname(urlsplit(url).path)  # it decodes %XX itself: once, not twice
    subdirectory = record.get("subdirectory")
    if subdirectory:  # a URL says it as a fragment; a folder is the subdirectory's own path
        url = (
            f"{url}#subdirectory={subdirectory}"
            if "://" in url
            else os.path.join(url, subdirectory)
        )
    return url


def _without_credentials(url: str) -> str:
    """`url` without a user and password (a token in `https://user:token@host/…`, or alone
    as the user, would go into every client's config the line is pasted into), but for what
    holds no secret: PEP 610's `git` user and `${VARIABLE}` references, and an ssh user without
    a password (ssh's keys authenticate). uv and git then take the credentials from where they
    keep them (a credential helper, .netrc)."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    user, _at, host = parts.netloc.rpartition("@")
    if re.fullmatch(r"git|\$\{\w+\}(:\$\{\w+\})?", user):
        return url
    if parts.scheme == "ssh" and ":" not in user:
        return url
    return parts._replace(netloc=host).geturl()


def uvx_words() -> list[str]:
    """`--from SOURCE` when uvx took this copy from anywhere but the index, else nothing."""
    source = install_source()
    return ["--from", source] if source else []


# -- A copied file's start: bytecode cached as an installation's is ---------------------------
# `python openai_responses_mcp.py` compiles the whole file at every start (0.1 to 0.2 s and
# some 40 MiB at the peak): Python never caches a script's bytecode. Loaded by the import
# system's file loader instead (DROPIN_LOADER), its bytecode is cached in __pycache__ beside
# it, or under PYTHONPYCACHEPREFIX where that folder cannot be written (issue 39).
#
# The loader is given the file's path: its folder is never put on sys.path, where its
# neighbours (a project's json.py, types.py, enum.py, http/, openai/, sitecustomize.py) would
# be found before the standard library's and the SDK's modules, as a PYTHONPATH at the folder
# (or `python FILE`) puts them; a folder named with os.pathsep (`a:b`) starts too, and the
# user's own PYTHONPATH is left as it is. Its first statement drops the client's working
# folder ('' at sys.path[0] for `-c`, which -P would drop on 3.11+ only). No double quote, so
# every client's line quotes it as one word; run as __main__, as `python FILE` runs it.
DROPIN_LOADER = (
    "import sys;sys.path[:]=[e for e in sys.path if e];import importlib.util as u;"
    "p=sys.argv[0]=sys.argv.pop(1);s=u.spec_from_file_location(__name__,p);"
    "m=sys.modules[__name__]=u.module_from_spec(s);s.loader.exec_module(m)"
)


def default_pycache_prefix(env: dict) -> str:
    """$XDG_CACHE_HOME/openai-responses-mcp/pycache, or the platform's equivalent."""
    return user_file(env, "LOCALAPPDATA", "XDG_CACHE_HOME", (".cache",), "pycache")


def write_bytecode(script: str, prefix: str | None) -> str | None:
    """Compiles `script` into the .pyc its loader reads (under `prefix` as PYTHONPYCACHEPREFIX
    puts it, else in __pycache__ beside it); that file's path, or None when it cannot be
    written there. Written now, it is read even by a server that may not write one
    (PYTHONDONTWRITEBYTECODE)."""
    import importlib.util
    import py_compile

    saved = sys.pycache_prefix
    sys.pycache_prefix = prefix
    try:
        target = importlib.util.cache_from_source(script)
    finally:
        sys.pycache_prefix = saved
    if _bytecode_fresh(script, target):
        return target
    # Checked against the source's hash at every start, not its mtime and size: a newer file
    # copied over with the same size and mtime (`cp -p`, an archive's fixed timestamps) would
    # otherwise run the old bytecode. Hashing the file costs well under a millisecond.
    try:
        mode = py_compile.PycInvalidationMode.CHECKED_HASH
        py_compile.compile(script, cfile=target, doraise=True, invalidation_mode=mode)
    except (OSError, py_compile.PyCompileError):
        return None
    return target


def _bytecode_fresh(script: str, target: str) -> bool:
    """`target` is the bytecode an import of `script` takes as it is (the header's magic
    number, checked-hash flags and the source's hash): nothing to compile again."""
    import importlib.util

    try:
        with open(target, "rb") as handle:
            head = handle.read(16)
        with open(script, "rb") as handle:
            source = handle.read()
    except OSError:
        return False
    checked_hash = (0b11).to_bytes(4, "little")
    valid = importlib.util.MAGIC_NUMBER + checked_hash + importlib.util.source_hash(source)
    return head == valid


def dropin_launch(
    script: str, python: str, env: dict
) -> tuple[list[str], list[tuple[str, str]], str | None]:
    """How a client starts a copied file at an installation's speed: (command, variables,
    the .pyc it reads): `python -c DROPIN_LOADER FILE`, and where the file's folder cannot be
    written PYTHONPYCACHEPREFIX at the user's cache. Where no bytecode can be written at all,
    or the file's name does not end in .py (no loader takes it), the file itself (compiled at
    every start)."""
    script = os.path.abspath(script)
    if not script.endswith(".py"):
        return [python, script], [], None
    variables = []
    cached = write_bytecode(script, None)
    if cached is None:
        prefix = default_pycache_prefix(env)
        cached = write_bytecode(script, prefix)
        variables.append(("PYTHONPYCACHEPREFIX", prefix))
    if cached is None:
        return [python, script], [], None
    return [python, "-c", DROPIN_LOADER, script], variables, cached


def shell_quote(text: str, windows: bool | None = None) -> str:
    """`text` as one word for the user's shell (POSIX sh, or Windows' double quotes)."""
    if os.name == "nt" if windows is None else windows:
        return text if re.fullmatch(r"[\w.:\\/-]+", text) else f'"{text}"'
    import shlex

    return shlex.quote(text)


def extra_command(extra: str, kind: str | None = None, python: str | None = None) -> str:
    """The command that adds an extra ("postgres", "oauth") to this installation, made by the
    installer that made it."""
    kind = this_installation() if kind is None else kind
    python = shell_quote(sys.executable if python is None else python)
    packages = EXTRA_PACKAGES[extra]
    words = " ".join(shell_quote(package) for package in packages)
    withs = " ".join(f"--with {shell_quote(package)}" for package in packages)
    if kind == "pipx":
        return f"pipx inject {SERVER_NAME} {words}"
    if kind == "uvx":
        source = " ".join(shell_quote(word) for word in uvx_words())
        return f"uvx {source + ' ' if source else ''}{withs} {SERVER_NAME}"
    if kind == "uv-tool":
        return f"uv tool install {withs} {SERVER_NAME}"
    if kind == "uv-run":
        return f"uv run {withs} {shell_quote(os.path.abspath(__file__))}"
    if kind == "file":
        return f"{python} -m pip install {words}"
    return f"{python} -m pip install {shell_quote(f'{SERVER_NAME}[{extra}]')}"


# -- The API key -------------------------------------------------------------------------------
# Read from the environment only, when needed; never shown, logged or stored.


def api_key(config: Config) -> str:
    """The key in the variable openai.api_key_env names, stripped; "" when unset."""
    return os.environ.get(config.get("openai", "api_key_env"), "").strip()


def api_key_problem(config: Config) -> str | None:
    """Why no request can be made with the key, as one line that never shows it; else None."""
    key_env = config.get("openai", "api_key_env")
    key = api_key(config)
    if not key:
        return (
            f"no API key: set {key_env} in the environment this server is started with "
            "(the MCP client's env setting)"
        )
    for position, char in enumerate(key, 1):
        # A smart quote or non-breaking space from a copy-paste: HTTP headers are ASCII, and
        # a key has no spaces or control characters.
        if not char.isascii() or not char.isprintable() or char == " ":
            kind = "a non-ASCII character" if not char.isascii() else "a space or control character"
            return (
                f"{key_env} contains {kind} (position {position}, U+{ord(char):04X}); "
                "re-copy the key"
            )
    return None


def ca_bundle_problem(env: dict | None = None) -> tuple[str, str] | None:
    """Why the HTTP client cannot be made from SSL_CERT_FILE / SSL_CERT_DIR (it reads them to
    build its TLS context, for http:// too): (what, its fix) for a missing or unreadable CA
    bundle (issue 39: it was a traceback at the first call); else None."""
    import ssl

    env = dict(os.environ) if env is None else env
    for name, option in (("SSL_CERT_FILE", "cafile"), ("SSL_CERT_DIR", "capath")):
        if env.get(name):  # as the client reads them: the first one set, alone
            try:
                ssl.create_default_context(**{option: env[name]})
            except (OSError, ValueError, ssl.SSLError) as exc:
                said = " ".join(str(exc).split())[:160] or type(exc).__name__
                return (
                    f"{name}={env[name]} cannot be used as a CA bundle ({said})",
                    "point it at a PEM file holding your proxy's or gateway's CA, or unset it",
                )
            return None
    return None


# -- Shipped examples ----------------------------------------------------------------------------

# config.yaml.example, kept here so an installed copy can print it (--print-example config);
# tests/test_docs.py checks the two stay identical.
CONFIG_EXAMPLE = """\
# openai-responses-mcp configuration (every key is optional; these are the defaults).
# Copy to ~/.config/openai-responses-mcp/config.yaml, or pass --config PATH
# (`openai-responses-mcp --print-example config` prints this file).
# Precedence: defaults < this file < environment variables < command-line flags.
# The API key never goes here: it is read from the environment variable named below.

openai:
  api_key_env: OPENAI_API_KEY          # the variable that holds the key
  base_url: https://api.openai.com/v1  # http(s), usually ending in /v1 (or Azure v1, LiteLLM)
  check_retirements: true  # once a day, warn on stderr about a tool's model with an announced
                           #   shutdown date (GET /v1/models); false for gateways without it

request:
  timeout_ms: 300000       # per attempt, and per silence in its stream
  max_retries: 3           # retries after 429, 5xx, drops
  deep_timeout_ms: 3600000 # an answer_deep run, in all (at most server.tasks.ttl_ms)
  handoff_after_s: null    # a call without a task still running this long answers with an id
                           #   for the answer_result tool; null = by client (on for Codex CLI,
                           #   Claude Desktop and Cursor, which give up sooner), 0 = never

model_profiles:
  # The three tools differ by default, so that picking one means something: answer_quick is
  # quicker and cheaper than answer, answer_detailed thinks more. Each has a model of its own
  # from OpenAI's GPT-6 lineup (setting answer's model changes only answer). In the other two
  # profiles null means "take answer's value" (an absent key takes the default shown here).
  # Effort and verbosity are sent to every model but gpt-4.1/gpt-4o (no reasoning) and the
  # o-series and deep research models (no verbosity); a model that refuses a built-in value
  # gets one it takes, with a warning naming the key; a value you set is never changed.
  answer:                  # balanced: most questions
    model: gpt-6.1-terra       # $1 / $5 per million tokens in / out
    reasoning_effort: medium   # none | minimal | low | medium | high | xhigh | max (GPT-6:
                               #   low to max, none only on gpt-6-luna, gpt-6-sol and
                               #   gpt-6.1-terra; never minimal: web search refuses it)
    verbosity: medium          # low | medium | high
    # Cost controls, each sent only when set (null = the API's default):
    service_tier: null         # auto | default | flex (half price, slower) | priority | fast
                               #   (fast mode, the new name of priority: twice the price)
    max_output_tokens: null    # cap on output tokens, reasoning included
    max_tool_calls: null       # cap on web searches per answer
    search_context_size: null  # low | medium | high: text each search brings back (API: medium)
    # Background mode (see docs/long-calls.md): a dropped stream resumes without
    # paying twice and a cancel stops the response server-side. Not ZDR-compatible.
    background: false
    # soonest | 2h | 8h: a discounted background run (30% / 40% off token prices) that
    #   may take that long; the call becomes a task or handoff (docs/costly-runs.md);
    #   it runs in background mode whatever `background` says: not ZDR-compatible
    completion_window: soonest
  answer_detailed:         # thorough: more reasoning, slower and dearer than answer
    model: gpt-6.2-sol         # the strongest everyday model ($2 / $10); or gpt-6-astra
    reasoning_effort: high     # more thinking than answer's medium
    verbosity: null            # answer's (medium): a longer answer may not fit a client whole
    service_tier: null
    max_output_tokens: null
    max_tool_calls: null
    search_context_size: null
    background: true           # long calls outlive client timeouts; false for ZDR organizations
    completion_window: soonest # each tool its own: none inherits answer's
  answer_quick:            # fast and short: a simple lookup
    model: gpt-6-luna          # the cheapest current model ($0.10 / $0.50)
    reasoning_effort: low      # less thinking than answer (the -chat-latest models take only
                               #   medium; minimal is refused with web search)
    verbosity: low             # a short answer
    service_tier: null
    max_output_tokens: null
    max_tool_calls: null
    search_context_size: low   # each search brings back less text: fewer input tokens
    background: null           # inherits `answer` (false)
    completion_window: soonest
  answer_deep:             # deep research (when tools.answer_deep is on); inherits nothing
    model: o4-mini-deep-research  # or o3-deep-research: deeper, five times the price
    reasoning_effort: medium   # the only effort deep research models accept
    service_tier: null
    max_output_tokens: null
    max_tool_calls: 50         # searches per run, at $10 per thousand; null = no cap
    completion_window: soonest # 8h: a run within 8 hours at 40% off its token prices

tools:
  answer_deep: false       # list answer_deep: minutes and dollars per call (MCP_ANSWER_DEEP=1)

policy:
  max_citations: 3         # 1-10
  timezone: Asia/Tokyo     # "today" and access dates are in this zone
  system:
    source: builtin        # builtin | file
    path: null             # e.g. ~/.config/openai-responses-mcp/policy.md (when source: file;
                           #   `openai-responses-mcp --print-example policy` prints an example)
    merge: replace         # replace | prepend | append (the file relative to the built-in policy)

search:
  defaults: { recency_days: 60, max_results: 5, domains: [] }
  domain_filter: true      # also send domains as web_search filters.allowed_domains
  user_location:           # where the web search assumes the user is (sent when any is set)
    country: null          # two-letter ISO code, e.g. JP
    region: null           # e.g. Tokyo
    city: null
    timezone: null         # null = policy.timezone

# -- Cost (see docs/cost.md) ----------------------------------------------------------------
pricing:
  models: {}               # USD per million tokens, over the built-in table, e.g.
                           #   gpt-6.1-terra: {input: 1, cached_input: 0.05, output: 5}
  web_search_per_1k: 10    # USD per thousand web searches

budget:                    # refuse calls once spent (all processes on this machine); null = none
                           #   (under a budget, a model with no known price is refused)
  daily_usd: null
  monthly_usd: null
  per_user_daily_usd: null    # each user's allowance (--http with users); --user add NAME
  per_user_monthly_usd: null  #   --daily-usd X --monthly-usd Y sets one user's own
  confirm_over_usd: null   # ask the person first (run / run discounted / cancel) when a call
                           #   may cost more than this; null = never ask
  confirm_required: false  # true: refuse such a call when the client cannot be asked
  confirm_timeout_s: 300   # no answer within this: the call is not run (nothing spent)

state:
  path: null  # ledger + cache; null = ~/.local/state/openai-responses-mcp/state.sqlite3; off = none
              # a relative path is taken from this file's folder
  url: null   # postgresql://user@host/db: one state for several hosts (password: use the env
              # var OPENAI_RESPONSES_MCP_STATE_URL); needs the [postgres] extra
  retention_days: 90  # raw ledger rows kept this long; per-day totals are kept for good

cache:
  ttl_s: 600               # seconds an answer is reused; 0 = off
  max_entries: 1000
  share_across_users: false  # true: one user's cached answer serves another (--http, users)

files:                     # what `files` may attach (docs/files.md)
  local_paths: false       # over --http, take local paths too (stdio always does)
  allowed_dirs: []         # directories paths may name, beside the client's roots / cwd
  deny: []                 # more file-name globs never sent (secrets are refused built in)
  max_files: 10            # 0: `files` is refused
  max_file_bytes: 10485760 # 10 MiB (OpenAI: 50 MB a request)
  max_total_bytes: 20971520
  image_detail: auto       # low (85 tokens an image), high, auto or original

server:
  debug: false
  debug_file: null
  show_config_on_start: false
  line_mode: false         # always answer in newline-delimited JSON (MCP_LINE_MODE=1)
  max_message_bytes: 16777216
  max_calls: 64            # tool calls in flight on any transport; one more is refused at once
  progress_interval_s: 10  # heartbeat progress notice while a call is quiet this long
  result_max_chars: 50000  # longest result text in UTF-8 bytes (a Japanese character is 3); a
                           #   longer answer is shortened at a section boundary (Claude Code's size)
  result_max_chars_by_client: {}  # by clientInfo.name, e.g. {codex-mcp-client: 20000};
                           #   built in: codex-mcp-client 12000 (what Codex shows whole)
  protocol_eras: both      # handshake: no MCP 2026-07-28, for a client whose modern mode misbehaves
  http:                    # only with --http
    token: null            # better: MCP_HTTP_TOKEN in the environment (never printed or logged)
    allow_insecure: false  # true: a non-loopback address without a token (auth proxy in front)
    stateless: false       # true: no sessions, for several instances behind a load balancer
    allowed_origins: []    # browser origins besides http(s)://localhost, 127.0.0.1, [::1]
    allowed_hosts: []      # Host names besides the localhost names and the bound address
    trusted_proxies: []    # proxies whose X-Forwarded-For names the client (e.g. [127.0.0.1])
    max_connections: 256   # open connections; at the cap a new one closes the longest idle
    max_sessions: 100      # at the cap, a new session ends the least recently used idle one
    max_body_bytes: 1048576  # largest request body (413 past it, before reading)
    max_calls: 64          # tool calls in flight on the server
    max_calls_per_session: 8
    session_idle_s: 600    # an idle session ends after 10 minutes
    header_timeout_s: 10   # to send a request's headers and body
    request_line_timeout_s: 2  # for a new connection to send its request line
    idle_timeout_s: 60     # a kept-alive connection waiting for its next request (no thread)
    keepalive_s: 15        # SSE keep-alive comment when quiet
    sse_outbox_bytes: 1048576  # what an unread /sse stream may hold (then POSTs get 429)
    sse_stall_s: 30        # a full /sse stream unread this long is closed, its session ended
    lameduck_s: 5          # after SIGTERM (not Ctrl-C): /healthz says 503 this long
    drain_s: 30            # then calls in flight get this long to finish
  public_url: null         # the URL clients use, without /mcp (behind a proxy: its URL); default
                           #   http://HOST:PORT of --http. OAuth's resource is <public_url>/mcp
  auth:                    # OAuth 2.1 sign-in on --http (docs/teams.md, "Team sign-in")
    issuer: null           # the identity provider's issuer URL; set = on (pip install
                           #   'openai-responses-mcp[oauth]')
    audience: null         # the token audience accepted; default <public_url>/mcp
    scopes: []             # scopes every token must carry (else 403 insufficient_scope)
    user_claim: sub        # the claim that names the user (Entra ID: oid; Okta: uid)
    introspection_url: null  # RFC 7662 endpoint, for opaque (non-JWT) access tokens
    client_id: null        # for introspection; better: MCP_AUTH_CLIENT_ID
    client_secret: null    # better: MCP_AUTH_CLIENT_SECRET (never printed or logged)
    admins: []             # who see everyone's spend on GET /usage: user:NAME (--user add),
                           #   oauth:ISSUER#SUB (an OAuth subject), shared (MCP_HTTP_TOKEN)
  tasks:                   # MCP tasks (2025-11-25 and the 2026 extension) and handoffs
    immediate_ms: 2000     # a call done within this answers inline, not as a task
    ttl_ms: 3600000        # a task or handoff can be collected this long (>= request.timeout_ms)
    poll_interval_ms: 5000 # how often clients are asked to poll
    max_per_client: 16     # open tasks and handoffs per client (running, or done and not
                           #   yet collected); one more task is refused, a handoff answers inline
    max_open: 1000         # tasks and handoffs on the server, every client together
    max_reply_bytes: 67108864  # bytes of their stored replies (64 MiB), every client together
    secret: null           # better: MCP_TASK_SECRET; 32+ characters, the same on every instance;
                           #   signs task ids so any instance serves them (needed with --stateless)
"""


# -- Logging -----------------------------------------------------------------------------------

# What a terminal acts on instead of showing: C0 controls (ESC starts the sequences that clear
# the screen or retitle the window), DEL, C1 controls (U+009B is a one-character CSI to some
# terminals), the line and paragraph separators, and the bidirectional overrides and isolates
# that make text read other than it is stored.
_CONTROLS = "[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]"
_JSON_CONTROLS = "[\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]"  # C0: json's


def inert(text: str, json_text: bool = False) -> str:
    """`text` safe to show a person: control characters written as escapes (ESC as \\x1b,
    U+202E as \\u202e), everything else as it is. For every human-facing output that may hold
    text from upstream, a client or a config file: log lines, --usage, --doctor. With
    `json_text`, for JSON printed to a terminal: every escape is \\uXXXX, so the JSON stays
    valid and decodes to the same strings (json.dumps has escaped C0 in strings already; those
    outside, its indentation, stay)."""
    if text.isprintable():  # the usual case, checked in C
        return text
    if json_text:
        return re.sub(_JSON_CONTROLS, _json_escaped, text)
    return re.sub(_CONTROLS, _escaped, text)


def _escaped(match) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _json_escaped(match) -> str:
    return f"\\u{ord(match.group()):04x}"


def open_for_append(path: str):
    """`path` opened to append text, never waiting: a FIFO nobody reads is an OSError (ENXIO,
    said as such) rather than an open() that blocks the server, or --doctor, forever (issue
    39); a FIFO that is read, a terminal or a file opens as with open(path, "a")."""
    import errno

    nonblock = getattr(os, "O_NONBLOCK", 0)  # none on Windows, nor FIFOs of this kind there
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | nonblock
    try:
        fd = os.open(path, flags, 0o666)
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # what O_NONBLOCK gives for a FIFO without a reader
            raise OSError(errno.ENXIO, "it is a FIFO that nothing reads", path) from None
        raise
    if nonblock:
        os.set_blocking(fd, True)  # writes then wait as they would on any file
    return open(fd, "a", encoding="utf-8")


class Log:
    """stderr lines for people. Debug lines only when debug was decided on at start-up.

    Whatever is written passes through redact(), so the API key cannot leak even by mistake.
    """

    def __init__(self, debug: bool = False, path: str | None = None, secrets: tuple = ()):
        self.debug_enabled = debug
        self._lock = threading.Lock()
        self._file = None
        self._secrets = tuple(s for s in secrets if s and len(s) >= 8)
        if debug and path:
            try:
                self._file = open_for_append(os.path.expanduser(path))
            except OSError as exc:
                self.say(
                    f"cannot open debug file {path}: {os_error_words(exc)}; debug goes to "
                    "stderr only"
                )

    def redact(self, text: str) -> str:
        """Removes the API key, and anything shaped like an OpenAI key (even masked ones)."""
        for secret in self._secrets:
            text = text.replace(secret, "[redacted]")
        if "sk-" in text:
            text = re.sub(r"sk-[A-Za-z0-9_*.-]{3,}", "[redacted]", text)
        return text

    def _write(self, line: str) -> None:
        # A log line never raises: a failure here must not change or drop a reply.
        try:
            line = inert(self.redact(line)) + "\n"  # one line, whatever it quotes
            if not line.isascii():  # a lone surrogate (from a client's text) is escaped
                line = line.encode("utf-8", "backslashreplace").decode("utf-8")
        except Exception:  # noqa: BLE001
            return
        with self._lock:
            for stream in (sys.stderr, self._file):
                if stream is None:
                    continue
                try:
                    stream.write(line)
                    stream.flush()
                except Exception:  # noqa: BLE001 - a full disk or closed stderr loses the line
                    pass

    def say(self, text: str) -> None:
        """One line for the person running the server: warnings, `serving on …`, progress."""
        self._write(f"{SERVER_NAME}: {text}")

    def debug(self, component: str, text: str) -> None:
        if self.debug_enabled:
            stamp = time.strftime("%H:%M:%S")
            self._write(f"[debug {stamp}] {component}: {text}")


# ============================================================================================
# Models: what the server knows of each OpenAI model
# ============================================================================================
# Everything known about a model, in one place: the reasoning efforts and verbosities it
# takes, its prices (tiers, long context), its shutdown date and replacement, and whether it
# is a deep research model. Configuration, the engine and --doctor read it from here.


# -- Names: a dated snapshot's alias, deep research --------------------------------------------


def is_deep_research(model: str) -> bool:
    """o3-deep-research, o4-mini-deep-research and their dated snapshots."""
    return "deep-research" in model


def _undated(model: str) -> str:
    """gpt-5.2-2025-12-11 -> gpt-5.2"""
    parts = model.split("-")
    date = parts[-3:]
    if len(parts) > 3 and [len(p) for p in date] == [4, 2, 2] and all(p.isdigit() for p in date):
        return "-".join(parts[:-3])
    return model


# -- Reasoning efforts and verbosities: what each model takes ----------------------------------

# Model families known to take no reasoning effort or no verbosity: the setting is not sent to
# them. Any other model, above all one newer than this table, gets every setting of its profile;
# a refusal is handled where it comes back (Refusals.adapt), never guessed from the name.
TAKES_NO_REASONING = ("gpt-4.1", "gpt-4o")
TAKES_NO_VERBOSITY = ("gpt-4.1", "gpt-4o", "o1", "o3", "o4")


def supports_verbosity(model: str) -> bool:
    """False only for a model known to take no verbosity (deep research models take none)."""
    return not is_deep_research(model) and not _in_family(TAKES_NO_VERBOSITY, model)


def supports_reasoning(model: str) -> bool:
    """False only for a model known to take no reasoning effort (gpt-4.1, gpt-4o)."""
    return not _in_family(TAKES_NO_REASONING, model)


def _in_family(families, model: str) -> bool:
    """Whether `model` is one of `families` or a member of one (family-…: gpt-4o-mini)."""
    return any(model == family or model.startswith(family + "-") for family in families)


# Reasoning efforts each model family accepts (the API refuses the others with 400
# unsupported_value). Longest matching prefix wins; a family not listed is not checked.
GPT6_EFFORTS = ("low", "medium", "high", "xhigh", "max")
GPT6_EFFORTS_WITH_NONE = ("none", *GPT6_EFFORTS)
MODEL_EFFORTS = {
    "gpt-5": ("minimal", "low", "medium", "high"),
    "gpt-5-pro": ("high",),
    "gpt-5-codex": ("low", "medium", "high"),
    "gpt-5.1": ("none", "low", "medium", "high"),
    "gpt-5.1-codex": ("low", "medium", "high"),
    "gpt-5.1-codex-max": ("none", "low", "medium", "high", "xhigh"),
    "gpt-5.1-chat-latest": ("medium",),
    "gpt-5.2": ("none", "low", "medium", "high", "xhigh"),
    "gpt-5.2-pro": ("medium", "high", "xhigh"),
    "gpt-5.2-chat-latest": ("medium",),
    "gpt-5.4": ("none", "low", "medium", "high", "xhigh"),
    "gpt-5.4-pro": ("medium", "high", "xhigh"),
    "gpt-5.5": ("none", "low", "medium", "high", "xhigh"),
    "gpt-5.5-pro": ("medium", "high", "xhigh"),
    # GPT-5.6 and GPT-6 (their model pages): low to max for all; none only for the models
    # below that list it; minimal for none of them.
    "gpt-5.6-sol": GPT6_EFFORTS_WITH_NONE,
    "gpt-5.6-terra": GPT6_EFFORTS_WITH_NONE,
    "gpt-5.6-luna": GPT6_EFFORTS_WITH_NONE,
    "gpt-6-sol": GPT6_EFFORTS_WITH_NONE,
    "gpt-6-luna": GPT6_EFFORTS_WITH_NONE,
    "gpt-6.1-terra": GPT6_EFFORTS_WITH_NONE,
    "gpt-6-astra": GPT6_EFFORTS,
    "gpt-6.1-sol": GPT6_EFFORTS,
    "gpt-6.2-sol": GPT6_EFFORTS,
    "gpt-6.2-astra": GPT6_EFFORTS,
    "o1": ("low", "medium", "high"),
    "o3": ("low", "medium", "high"),
    "o4": ("low", "medium", "high"),
    "o3-deep-research": ("medium",),
    "o4-mini-deep-research": ("medium",),
}


# Verbosities for the gpt-5 models that do not take all three (400 unsupported_value otherwise).
MODEL_VERBOSITIES = {"gpt-5-chat-latest": ("medium",)}


def model_efforts(model: str) -> tuple[str, ...] | None:
    """The reasoning efforts `model` accepts, or None when its family is not known here."""
    return _by_family(MODEL_EFFORTS, model)


def model_verbosities(model: str) -> tuple[str, ...]:
    """The verbosities a gpt-5 `model` accepts."""
    return _by_family(MODEL_VERBOSITIES, model) or VERBOSITIES


def nearest_value(key: str, value, accepted) -> str:
    """The accepted effort or verbosity nearest `value` (the higher of two as near)."""
    order = EFFORTS if key == "reasoning_effort" else VERBOSITIES
    rank = {name: i for i, name in enumerate(order)}
    here = rank.get(value, len(order) // 2)
    return min(accepted, key=lambda a: (abs(rank.get(a, here) - here), -rank.get(a, 0)))


def _by_family(table: dict, model: str):
    """table's entry for the longest family `model` belongs to (itself, or family-…), or None."""
    best = None
    for family in table:
        if (model == family or model.startswith(family + "-")) and (
            best is None or len(family) > len(best)
        ):
            best = family
    return table[best] if best else None


# -- Prices: a model's per-token prices and what multiplies them -------------------------------

# USD per million tokens (input, cached input, output) at Standard prices for requests of up to
# 272K input tokens, as each model's page on developers.openai.com/api/docs/models/<model> gives
# them on PRICES_DATE (GPT-6, GPT-5.6 and the GPT-5 models; the older ones from the pricing page,
# developers.openai.com/api/docs/pricing). pricing.models in the config adds to and overrides it.
# A model without a cached-input discount (the -pro models) has its input price there. Models
# that have shut down keep their price: the ledger may still name them.
PRICES_DATE = "2026-11-26"
BUILTIN_PRICES = {
    "gpt-6.2-sol": (2.00, 0.10, 10.00),
    "gpt-6.1-sol": (2.00, 0.10, 10.00),
    "gpt-6.1-terra": (1.00, 0.05, 5.00),
    "gpt-6-astra": (10.00, 1.00, 50.00),
    "gpt-6-sol": (2.00, 0.20, 10.00),
    "gpt-6-luna": (0.10, 0.01, 0.50),
    "gpt-5.6-sol": (5.00, 0.50, 30.00),
    "gpt-5.6-terra": (2.00, 0.20, 12.00),  # lowered on 2026-07-30 (was 2.50 / 15)
    "gpt-5.6-luna": (0.20, 0.02, 1.20),  # lowered on 2026-07-30 (was 1.00 / 6)
    "gpt-5.5": (5.00, 0.50, 30.00),
    "gpt-5.5-pro": (30.00, 30.00, 180.00),
    "gpt-5.4": (2.50, 0.25, 15.00),
    "gpt-5.4-pro": (30.00, 30.00, 180.00),
    "gpt-5.4-mini": (0.75, 0.075, 4.50),
    "gpt-5.4-nano": (0.20, 0.02, 1.25),
    "gpt-5.2": (1.75, 0.175, 14.00),
    "gpt-5.2-pro": (21.00, 21.00, 168.00),
    "gpt-5.2-chat-latest": (1.75, 0.175, 14.00),  # shut down 2026-08-10
    "gpt-5.1-chat-latest": (1.25, 0.125, 10.00),
    "gpt-5-chat-latest": (1.25, 0.125, 10.00),
    "gpt-5.1": (1.25, 0.125, 10.00),
    "gpt-5": (1.25, 0.125, 10.00),
    "gpt-5-mini": (0.25, 0.025, 2.00),
    "gpt-5-nano": (0.05, 0.005, 0.40),
    "gpt-5-pro": (15.00, 15.00, 120.00),
    "gpt-4.1": (2.00, 0.50, 8.00),
    "gpt-4.1-mini": (0.40, 0.10, 1.60),
    "gpt-4.1-nano": (0.10, 0.025, 0.40),  # shut down 2026-10-23
    "gpt-4o": (2.50, 1.25, 10.00),
    "gpt-4o-mini": (0.15, 0.075, 0.60),
    "o3": (2.00, 0.50, 8.00),
    "o4-mini": (1.10, 0.275, 4.40),  # shut down 2026-10-23
    # Deep research (answer_deep); their web searches cost pricing.web_search_per_1k on top.
    "o3-deep-research": (10.00, 2.50, 40.00),
    "o4-mini-deep-research": (2.00, 0.50, 8.00),
}
# Prompt-cache writes, as multiples of the model's (uncached) input price: "cache writes are
# billed at 1.25x the uncached input token rate" for the default 30-minute retention, and a
# 12-hour write at twice that (gpt-6.2-sol: $2.50 and $5 for $2 input; gpt-6.1-terra: $1.25
# and $2.50 for $1).
CACHE_WRITE_FACTORS = {"30m": 1.25, "12h": 2.5}
# Long context: a request of more than 272K input tokens is billed, in full, at twice the input
# rates (cached input and cache writes included) and 1.5 times the output rate, on the models
# whose pages say so (GPT-5.4 and later; the older ones take no such prompt).
LONG_CONTEXT_TOKENS = 272_000
LONG_CONTEXT_FACTORS = (2.0, 1.5)  # input, output
LONG_CONTEXT_FAMILIES = ("gpt-5.4", "gpt-5.5", "gpt-5.6", "gpt-6")
# Processing tiers (the response's service_tier): Flex (and Batch) at half the Standard rate;
# Fast mode, which the API still reports as priority, at twice the Standard rate, or more for
# some models (PRIORITY_FACTORS, looked up like BUILTIN_PRICES); Ultrafast at three times
# (until 2027-02-28; six from 2027-03-01).
TIER_FACTORS = {"flex": 0.5, "priority": 2.0, "fast": 2.0, "ultrafast": 3.0}
PRIORITY_FACTORS = {"gpt-5.5": 2.5}
# Discounted background runs (background_options.completion_window, Standard processing only):
# the 2-hour window 30% and the 8-hour window 40% below Standard token prices, follow-ups
# included; web searches are not tokens and keep their price
# (developers.openai.com/api/docs/guides/flex-processing).
WINDOW_FACTORS = {"2h": 0.7, "8h": 0.6}
# The service tiers a response on Standard processing reports (or a request asks for): the
# only ones a completion window runs on, so the only ones its discount applies to.
STANDARD_TIERS = (None, "auto", "default")
# How long each window lets OpenAI take (a run is not late before it ends).
WINDOW_SECONDS = {"2h": 2 * 3600, "8h": 8 * 3600}


def window_factor(window) -> float:
    """What a completion window multiplies the Standard token prices by (WINDOW_FACTORS)."""
    return WINDOW_FACTORS.get(window, 1.0) if isinstance(window, str) else 1.0


def window_taken(response, window) -> str | None:
    """The completion window a response ran in, as far as it says: `window` (the one asked
    for) when it is a background response whose background_options, if it echoes them, name
    that window; else None. A gateway that drops both without a word answers a plain
    response, billed in full, which must not be booked at a discount it never got."""
    if window not in WINDOW_FACTORS or not isinstance(response, dict):
        return None
    if response.get("background") is not True:
        return None
    options = response.get("background_options")
    echoed = options.get("completion_window", window) if isinstance(options, dict) else window
    return window if echoed == window else None


def tier_factor(model: str, tier) -> float:
    """What the processing tier multiplies the model's Standard prices by (TIER_FACTORS)."""
    factor = TIER_FACTORS.get(tier or "", 1.0) if isinstance(tier, str) else 1.0
    if tier in ("priority", "fast"):
        factor = PRIORITY_FACTORS.get(_undated(model), factor)
    return factor


def _long_context(model: str, input_tokens: int) -> tuple[float, float]:
    """(input factor, output factor) of a request's rates: the long-context ones over
    LONG_CONTEXT_TOKENS input tokens on the models billed so, else (1, 1)."""
    base = _undated(model)
    families = LONG_CONTEXT_FAMILIES
    if input_tokens > LONG_CONTEXT_TOKENS and any(base.startswith(f) for f in families):
        return LONG_CONTEXT_FACTORS
    return 1.0, 1.0


# -- Retirements: shutdown dates and the replacements OpenAI gives -----------------------------

DEPRECATIONS_URL = "https://developers.openai.com/api/docs/deprecations"
RETIREMENT_WARN_DAYS = 90
# The replacement OpenAI's deprecations page recommends for each model it retires.
REPLACEMENTS = {
    "gpt-5": "gpt-6.1-sol",
    "gpt-5-pro": "gpt-6.1-sol",
    "o3": "gpt-6.1-sol",
    "gpt-5-mini": "gpt-6.1-terra",
    "gpt-5-nano": "gpt-6-luna",
    "gpt-4o": "gpt-6-luna",
    "gpt-4o-mini": "gpt-6-luna",
    "gpt-4.1": "gpt-6-luna",
    "gpt-4.1-mini": "gpt-6-luna",
    "o4-mini": "gpt-5.6-terra",
}


def shutdown_dates(listing, debug=lambda text: None) -> dict:
    """model id -> its shutdown_date (None: none announced), from GET /v1/models's JSON. An
    entry that is not an object with an id, or whose shutdown_date is no YYYY-MM-DD date, is
    skipped (a debug line each): a gateway's odd list never stops the check."""
    import datetime

    data = listing.get("data") if isinstance(listing, dict) else None
    if not isinstance(data, list):
        debug(f"GET /v1/models: no list of models ({type(data).__name__} for data); none read")
        return {}
    dates: dict = {}
    for n, entry in enumerate(data):
        model = entry.get("id") if isinstance(entry, dict) else None
        if not isinstance(model, str) or not model:
            debug(f"GET /v1/models: entry {n} skipped: not a model object with an id")
            continue
        date = entry.get("shutdown_date")
        if date is not None:
            try:
                date = datetime.date.fromisoformat(date).isoformat()
            except (TypeError, ValueError):
                debug(f"GET /v1/models: {model[:80]!r}: shutdown_date is no YYYY-MM-DD; skipped")
                continue
        dates[model] = date
    return dates


def shutdown_date_of(dates: dict, model: str):
    """The model's date in `dates`, a dated snapshot taking its alias's when not listed."""
    return dates.get(model) or dates.get(_undated(model))


def retirement_words(model: str, date: str, today: str, key: str) -> tuple[str, str, str]:
    """(level, what, fix) for a model with a shutdown date: level is "retired" once the date
    has come, "soon" within RETIREMENT_WARN_DAYS, else "announced"."""
    import datetime

    days = (datetime.date.fromisoformat(date) - datetime.date.fromisoformat(today)).days
    replacement = REPLACEMENTS.get(_undated(model))
    fix = (
        f"set {key} to {replacement} (the replacement OpenAI's deprecations page gives)"
        if replacement
        else f"set {key} to a current model (see {DEPRECATIONS_URL})"
    )
    if days <= 0:
        return "retired", f"{model} shut down on {date}", fix
    level = "soon" if days <= RETIREMENT_WARN_DAYS else "announced"
    return level, f"{model} shuts down on {date}, in {days} day{'s' if days != 1 else ''}", fix


# ============================================================================================
# Policy
# ============================================================================================

SYSTEM_POLICY_REV = "2026-11-22 v0.1.0"

SYSTEM_POLICY = """\
You answer questions for a software developer who is working inside a coding agent. The agent \
relays your answer, so be accurate, direct and easy to quote.

When to search
- You have the web_search tool. Search when the answer depends on facts that change or that \
you may not know: anything about today, recent or upcoming events, releases and versions, \
prices, security advisories, end-of-life dates, weather, exchange rates, news, or a named \
library, product or person you are not sure about.
- Do not search for stable knowledge (definitions, well-established standards, language \
semantics, arithmetic). If you are unsure whether something has changed, search.
- The input may carry a line of hints (recency_days, max_results, domains). Prefer sources \
published within recency_days, use about max_results results, and prefer the listed domains.

Dates
- The input states today's date and time zone. Turn relative dates (today, yesterday, \
tomorrow, this week, last month) into absolute dates written YYYY-MM-DD.
- When a source gives a publication or update date, say it; never invent one.

Sources
- When you used web search, end the answer with a section whose header is exactly \
"Sources:" on its own line (in English, whatever the answer's language), then one line per \
source: "- <url> (YYYY-MM-DD)", using the source's publication date or, when it has none, \
today's date as the access date.
- A source that has no URL (for example a data feed named like oai-weather) is listed by its \
identifier in place of the URL.
- Cite only sources you actually used. When you did not search, write no Sources section.

Conflicts and uncertainty
- When sources disagree, say so, give each side with its source and date, and say which \
looks more reliable and why.
- When you cannot find or verify something, say so plainly instead of guessing. Separate \
what the sources say from your own inference.

Language and form
- Answer in the language of the question (Japanese for Japanese, English for English, and so \
on); keep code, identifiers, commands and URLs as they are.
- Lead with the answer, then supporting detail; use short bullet lists where they help. No \
filler, no restating the question.
"""


# A worked policy.system file (--print-example policy): rules appended to the built-in policy.
POLICY_EXAMPLE = """\
<!--
openai-responses-mcp policy example: `openai-responses-mcp --print-example policy > policy.md`.
Turn it on in config.yaml:

  policy:
    system:
      source: file
      path: ~/.config/openai-responses-mcp/policy.md
      merge: append      # this file follows the built-in policy (prepend: goes before it)

With merge: replace this file is all the model is told: then also say when to search, how to
write dates, and how to list sources (the built-in policy covers these; start from it).
The whole file is sent as the request's instructions, this comment too; it is harmless there.
The server recognises a sources section under Sources:, 出典:, 参考:, 参考文献, 参考資料,
参考リンク, 情報源, References and the like (bold or as a heading too); if you ask for another
header, name it on a line of its own like the one below, so the server completes that section
instead of adding a second one.
-->
<!-- sources-header: 参考資料 -->

Team rules (they come after the built-in policy and win where they differ)

Who asks
- The questions come from a team that runs Python 3.12, PostgreSQL 16 and Ubuntu 24.04 LTS.
  When versions matter, answer for these first, then say what differs in newer releases.

Which sources
- Prefer primary sources: official documentation, release notes, changelogs, security
  advisories (CVE, GitHub Security Advisories) and the vendor's own site. Use blogs and Q&A
  sites only when no primary source covers the point, and say so.
- For versions and end-of-life dates, give the exact version number and date, and cite the
  page that states them.

How to answer
- For a Japanese question, answer in Japanese and end with the header 参考資料: in place of
  Sources:, one line per source: "- <url> (YYYY-MM-DD)".
- When a command or configuration is the answer, give it in a code block first and explain
  after it.
"""


# A policy.system file for merge: replace (--print-example policy-replace): the built-in policy
# itself, to edit, since with replace the file is all the model is told.
POLICY_REPLACE_EXAMPLE = (
    """\
<!--
openai-responses-mcp policy example for merge: replace:
`openai-responses-mcp --print-example policy-replace > policy.md`, then in config.yaml:

  policy:
    system: { source: file, path: ~/.config/openai-responses-mcp/policy.md, merge: replace }

This is the built-in policy: edit it. The model is told only this file, so keep what it says
about when to search, dates and listing sources. If you change the sources header (Sources:),
name the new one in a sources-header line as `--print-example policy` shows.
-->
"""
    + SYSTEM_POLICY
)


def build_instructions(config: Config) -> str:
    """The request's `instructions`: the built-in policy, or a file replacing or joining it."""
    if config.get("policy", "system", "source") != "file":
        return SYSTEM_POLICY
    path = config.get("policy", "system", "path")
    where = config.sources.get(("policy", "system", "path"), "default")
    if not path:
        raise ConfigError(
            "policy.system.source is file but policy.system.path is not set; "
            "name the instructions file or use source: builtin"
        )
    try:
        with open(os.path.expanduser(path), encoding="utf-8-sig") as handle:
            text = handle.read().strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(
            f"policy.system.path {path!r} (from {where}) cannot be read: {exc.strerror or exc}"
        ) from None
    merge = config.get("policy", "system", "merge")
    if merge == "prepend":
        return text + "\n\n" + SYSTEM_POLICY
    if merge == "append":
        return SYSTEM_POLICY + "\n" + text + "\n"
    return text


def sources_headers(instructions: str) -> tuple[str, ...]:
    """Extra sources-section headers a policy names, one `<!-- sources-header: NAME -->` each.

    An answer's section under such a header is completed rather than followed by a second one.
    """
    found = re.findall(r"(?i)<!--\s*sources-header:\s*(.*?)\s*-->", instructions)
    return tuple(name.rstrip(":：").strip().lower() for name in found if name.rstrip(":："))


# The one clock every "today" is read from (the request's date, the ledger's and the budgets'
# day, the retirement check): a seam a unit test pins to an instant, never the host's local date.
clock = time.time


def today_in(timezone: str) -> str:
    """Today's date, YYYY-MM-DD, in the configured time zone (policy.timezone), by `clock`."""
    import datetime
    import zoneinfo

    return datetime.datetime.fromtimestamp(clock(), zoneinfo.ZoneInfo(timezone)).date().isoformat()


def build_input(query: str, hints: dict, today: str, timezone: str) -> str:
    """The request's `input`: the question, a hints line, and today's date for relative dates."""
    parts = [f"recency_days={hints['recency_days']}", f"max_results={hints['max_results']}"]
    if hints.get("domains"):
        parts.append("domains=" + ",".join(hints["domains"]))
    return f"{query}\n\n[hints] {' '.join(parts)}\n[today] {today} ({timezone})"


# ============================================================================================
# Files: screenshots, PDFs, logs and source a call attaches, read safely
# ============================================================================================
# A call's `files` are local paths, https:// URLs or data: URLs. What leaves is only what the
# caller named, and never a secret: a local path is read only inside the allowed directories
# (the client's MCP roots, else the working directory, plus files.allowed_dirs), never under a
# secret's name, only as a regular file, and within a size bound; its kind comes from its bytes.
# The server never fetches a URL: OpenAI does. If any file is refused, nothing is sent.

# -- Secrets and kinds: what is never read, a kind from the bytes ------------------------------


# What no file is read under, whatever the directory (files.deny adds more): (pattern, what it
# holds), one table that docs/files.md lists whole (tests/test_files.py checks). Matched case
# folded, as a case-insensitive disk would read it, against the path as given and as resolved.
# A pattern is a file name glob (`*.pem`); a directory nothing is read from, wherever it is
# (`.ssh/`); or a file in a directory (`.codex/auth.json`), matched at the path's end.
SECRET_PATHS = (
    # Keys and key stores.
    ("*.pem", "PEM keys and certificates"),
    ("*.key", "private keys"),
    ("*.p12", "PKCS#12 key stores"),
    ("*.pfx", "PKCS#12 key stores"),
    ("*.ppk", "PuTTY private keys"),
    ("id_*", "SSH keys (id_rsa, id_ed25519 ...), not source code (id_map.py)"),
    ("*.kdbx", "KeePass databases"),
    (".ssh/", "SSH keys and configuration"),
    (".gnupg/", "GnuPG keys"),
    (".password-store/", "pass"),
    (".local/share/keyrings/", "GNOME Keyring"),
    # Credential files.
    (".env*", "environment files: API keys, passwords"),
    ("credentials*", "credentials files (AWS, Cargo, gem ...), not source code (credentials.py)"),
    (".netrc", "logins for curl, git, ftp"),
    ("_netrc", "logins for curl, git (Windows)"),
    (".git-credentials", "git's stored passwords"),
    (".npmrc", "npm tokens"),
    (".pypirc", "PyPI tokens"),
    (".pgpass", "PostgreSQL passwords"),
    ("pgpass.conf", "PostgreSQL passwords (Windows)"),
    (".my.cnf", "MySQL passwords"),
    (".htpasswd", "web passwords"),
    (".vault-token", "HashiCorp Vault token"),
    ("credentials.tfrc.json", "Terraform Cloud token"),
    (".boto", "gsutil and boto credentials"),
    (".s3cfg", "s3cmd keys"),
    (".dockercfg", "Docker registry logins (old form)"),
    ("kubeconfig", "Kubernetes cluster credentials"),
    ("*.kubeconfig", "Kubernetes cluster credentials"),
    (".aws/", "AWS credentials and SSO token cache"),
    (".azure/", "Azure CLI tokens (msal_token_cache, accessTokens.json ...)"),
    (".config/gcloud/", "gcloud credentials (credentials.db, access_tokens.db ...)"),
    ("appdata/roaming/gcloud/", "gcloud credentials (Windows)"),
    (".kube/", "Kubernetes cluster credentials"),
    (".docker/", "Docker registry logins (config.json)"),
    (".config/gh/", "GitHub CLI token (hosts.yml)"),
    (".config/github-copilot/", "GitHub Copilot tokens"),
    (".terraform.d/", "Terraform tokens"),
    # Coding agents' logins.
    (".claude/.credentials.json", "Claude Code's login"),
    (".claude.json", "Claude Code's state: MCP servers' environment (API keys), account"),
    ("claude_desktop_config.json", "Claude Desktop's MCP servers' environment (API keys)"),
    (".codex/auth.json", "Codex CLI's login"),
    (".codex/config.toml", "Codex CLI's MCP servers' environment (API keys)"),
    (".gemini/oauth_creds.json", "Gemini CLI's login"),
    # Shell and REPL histories: what was typed, passwords and tokens included.
    (".*_history*", "bash, zsh, ksh, sh, python, node, psql, mysql, sqlite, irb, pry, redis-cli"),
    (".zhistory", "zsh"),
    (".histfile", "zsh"),
    (".zsh_sessions/", "zsh (macOS, a history each session)"),
    (".history", "tcsh"),
    ("fish_history", "fish"),
    ("consolehost_history.txt", "PowerShell (PSReadLine)"),
    (".codex/history.jsonl", "Codex CLI"),
    (".lesshst", "less"),
    (".viminfo", "vim: command history and registers"),
    (".rhistory", "R"),
    (".dbshell", "mongo shell"),
    ("mongosh_repl_history", "mongosh"),
    ("repl_history.jl", "Julia"),
)
# What the two broad globs are not after: source code and docs (id_generator.py, botocore's
# credentials.py, docs/credentials.md) are read; a key pasted in one is refused by content.
BROAD_SECRET_GLOBS = ("id_*", "credentials*")
SOURCE_EXTENSIONS = (
    *(".py", ".go", ".rs", ".ts", ".tsx", ".js", ".jsx", ".mjs", ".java", ".kt", ".scala"),
    *(".rb", ".php", ".cs", ".c", ".h", ".cc", ".cpp", ".hpp", ".swift", ".dart", ".ex"),
    *(".md", ".rst", ".adoc"),
)
# Pseudo-file systems: never files, whatever files.allowed_dirs says.
SYSTEM_DIRS = ("/proc", "/sys", "/dev")
# The kinds a file may be, from its first bytes: (magic, offset, kind, MIME type).
MAGIC = (
    (b"\x89PNG\r\n\x1a\n", 0, "png", "image/png"),
    (b"\xff\xd8\xff", 0, "jpeg", "image/jpeg"),
    (b"GIF87a", 0, "gif", "image/gif"),
    (b"GIF89a", 0, "gif", "image/gif"),
    (b"WEBP", 8, "webp", "image/webp"),  # after RIFF and the size
    (b"%PDF-", 0, "pdf", "application/pdf"),
)
# What a refused binary is, for the message (never sent): first bytes -> its kind.
OTHER_KINDS = (
    (b"PK\x03\x04", "a ZIP archive"),
    (b"\x7fELF", "an ELF executable"),
    (b"\x1f\x8b", "gzip data"),
    (b"SQLite format 3\x00", "an SQLite database"),
)
# C0 controls no text file holds (tab, newlines, form feed and ESC, for colored logs, it may).
_TEXT_CONTROLS = bytes(c for c in range(32) if c not in b"\t\n\r\f\x1b") + b"\x7f"
IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".gif", ".webp")
ROOTS_TIMEOUT_S = 5.0  # how long a call waits for the client's roots/list answer
PATH_MAX_CHARS = 4096  # Linux's PATH_MAX: no longer path opens, so none is resolved
# Budget estimates (docs/files.md): images by OpenAI's tile formula, PDFs by pages (each page
# is sent as text and as an image), text by bytes; a URL's size is unknown, so it counts as
# its worst case.
PDF_PAGE_TOKENS = 1_500  # a page image (765 at high detail) plus its extracted text
TEXT_BYTES_PER_TOKEN = 3  # code and logs run 3-4 bytes a token; the lower is the safer guess
URL_IMAGE_TOKENS = 1_445  # the tile formula's most for a high-detail image (768 x 2048)
URL_FILE_PAGES = 50  # a URL's document counts as 50 pages


# -- A call's files: paths, URLs, data: URLs, the allowed directories --------------------------


class FileInput:
    """One file as it is sent: `part` is its input_image, input_file or input_text part."""

    __slots__ = ("bytes", "given", "kind", "part", "sha256", "tokens")

    def __init__(self, given: str, kind: str, data: bytes | None, part: dict, tokens: int):
        import hashlib

        self.given, self.kind, self.part, self.tokens = given, kind, part, tokens
        self.bytes = len(data or b"")
        # A URL's content is OpenAI's to fetch: its key is the URL itself.
        self.sha256 = hashlib.sha256(data if data is not None else given.encode()).hexdigest()

    def summary(self) -> dict:
        """What `_meta.files` says of it: never its content."""
        name = _data_label(self.given) if _is_data_url(self.given) else self.given
        return {"name": name, "kind": self.kind, "bytes": self.bytes, "sha256": self.sha256[:12]}


class FileRefused(Exception):
    """A file that cannot be sent; the message names it, says why and which key changes it."""


# A data: URL's declared type, as its label shows it: anything else there may be its payload.
_DATA_TYPE = re.compile(r"[A-Za-z0-9!#$&^_.+-]{1,40}/[A-Za-z0-9!#$&^_.+-]{1,60}")


def _data_label(given: str) -> str:
    """A data: URL as shown: its scheme, declared type and ;base64, never its payload (one
    without its comma, or with a space or a `;` for it, is all payload)."""
    params = given[5:].partition(",")[0].split(";")
    shown = params[0] if _DATA_TYPE.fullmatch(params[0]) else ""
    if len(params) > 1 and params[-1].lower() == "base64":
        shown += ";" + params[-1]
    return given[:5] + shown + ",…"


# The schemes that make a file a URL even without `//` (`file:/etc/passwd` is one). Anything
# else is a URL only as `scheme://...`: `run:42.log` and `C:\\logs\\x.log` are paths.
URL_SCHEMES = ("data", "http", "https", "file", "ftp")
_URL_FORM = re.compile(r"([A-Za-z][A-Za-z0-9+.-]+):(//)?")


def url_scheme(given: str) -> str:
    """The URL scheme of a `files` item, lower-cased (schemes are case-insensitive: DATA: is
    data:), or "" for a path."""
    found = _URL_FORM.match(given)
    if found is None or not (found.group(2) or found.group(1).lower() in URL_SCHEMES):
        return ""
    return found.group(1).lower()


def _is_data_url(given: str) -> bool:
    return url_scheme(given) == "data"


def _named(given: str) -> str:
    """The file as the caller gave it, fit for one line of an error; a data: URL (anywhere in
    it) by its type only, never its payload."""
    if _is_data_url(given):
        return _data_label(given)
    at = given.lower().find("data:")  # pasted with a quote before it: a path
    if at >= 0:
        return _named(given[:at]) + _data_label(given[at:])
    shown = "".join(c if c.isprintable() else "?" for c in given[:160])  # not all of a long one
    return shown if len(given) <= 160 else shown[:159] + "…"


def files_denied(path: str, patterns=()) -> bool:
    """Whether `path` names a secret: a row of SECRET_PATHS, or a files.deny pattern (one
    without a / matches the file name, one with a / the whole path); case folded, as a
    case-insensitive disk would read it."""
    import fnmatch

    folded = path.replace("\\", "/").casefold()
    parts = [p for p in folded.split("/") if p not in ("", ".")]
    if any(_secret_path(parts, pattern) for pattern, _ in SECRET_PATHS):
        return True
    name = parts[-1] if parts else ""
    for pattern in patterns:
        pattern = pattern.casefold()
        if fnmatch.fnmatchcase(folded if "/" in pattern else name, pattern):
            return True
    return False


def _secret_path(parts: list, pattern: str) -> bool:
    """Whether a path's components match a SECRET_PATHS pattern: a file name glob, a directory
    (`dir/`) as consecutive components anywhere above the file, or `dir/name` at its end."""
    import fnmatch

    if not parts:
        return False
    if pattern.endswith("/"):
        names, directories = pattern[:-1].split("/"), parts[:-1]
        return any(
            directories[at : at + len(names)] == names
            for at in range(len(directories) - len(names) + 1)
        )
    if pattern in BROAD_SECRET_GLOBS and parts[-1].endswith(SOURCE_EXTENSIONS):
        return False
    names = pattern.split("/")
    ends = parts[-len(names) :]
    return len(ends) == len(names) and all(map(fnmatch.fnmatchcase, ends, names))


def _inside(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip(os.sep) + os.sep)


def _kind_of(data: bytes) -> tuple[str, str] | None:
    """(kind, MIME type) from the first bytes: an image, a PDF, or UTF-8 text; else None."""
    for magic, offset, kind, mime in MAGIC:
        if data[offset : offset + len(magic)] == magic and (kind != "webp" or data[:4] == b"RIFF"):
            return kind, mime
    if any(data.startswith(magic) for magic, _ in OTHER_KINDS):
        return None
    if data.translate(None, _TEXT_CONTROLS) != data:  # NUL and the like: binary, not text
        return None
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return "text", "text/plain"


def _other_kind(data: bytes) -> str:
    named = next((name for magic, name in OTHER_KINDS if data.startswith(magic)), None)
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):  # PowerShell's `>` writes UTF-16 logs
        named = "UTF-16 text (save it as UTF-8 to send it)"
    return named or ("empty" if not data else "binary data that is not UTF-8 text")


# A private key block, whatever its form: PEM of any type (RSA, EC, PKCS#8, encrypted,
# OpenSSH), PGP armour (PRIVATE KEY BLOCK), SSH2 (`---- BEGIN SSH2 ENCRYPTED PRIVATE KEY ----`)
# and PuTTY's .ppk. The tools that write them write them so, upper case; the bounded run keeps
# the search linear whatever the file.
_PRIVATE_KEY = re.compile(
    rb"-{4,5} ?(?:BEGIN|END) [A-Z0-9 ]{0,40}(?:PRIVATE|SECRET) KEY|PuTTY-User-Key-File-\d+:"
)
_PRIVATE_KEY_WORDS = (b"PRIVATE KEY", b"SECRET KEY", b"PuTTY-User-Key-File-")
# The same base64-encoded whole (a kubeconfig's client-key-data, a Kubernetes Secret's tls.key,
# a CI variable): "PRIVATE KEY" at each of base64's three alignments (a certificate may come
# first), and an OpenSSH key's body ("openssh-key-v1") without its armour.
_PRIVATE_KEY_BASE64 = (
    *(b"UFJJVkFURSBLRV", b"BSSVZBVEUgS0VZ", b"QUklWQVRFIEtFW"),
    *(b"b3BlbnNzaC1rZXktdj", b"9wZW5zc2gta2V5LXYx", b"vcGVuc3NoLWtleS12M"),
)


def _looks_secret(data: bytes, key: str) -> bool:
    """Text that holds a private key block (as it is, or base64-encoded whole) or the server's
    own API key is a secret whatever its name (a key copied to notes.txt, a hard link to
    ~/.ssh/id_rsa, a kubeconfig's client-key-data)."""
    # The plain search first: a file with none of the words costs a memchr of it, no regex.
    if any(word in data for word in _PRIVATE_KEY_WORDS) and _PRIVATE_KEY.search(data):
        return True
    if any(form in data for form in _PRIVATE_KEY_BASE64):
        return True
    return bool(key) and key.encode() in data


# -- Images and PDFs: sizes, tokens and pages --------------------------------------------------


def image_size(data: bytes, kind: str) -> tuple[int, int] | None:
    """(width, height) from an image's header, or None when it cannot be told."""
    import struct

    try:
        if kind == "png":
            return struct.unpack(">II", data[16:24])
        if kind == "gif":
            return struct.unpack("<HH", data[6:10])
        if kind == "webp":
            chunk = data[12:16]
            if chunk == b"VP8X":
                return 1 + int.from_bytes(data[24:27], "little"), 1 + int.from_bytes(
                    data[27:30], "little"
                )
            if chunk == b"VP8L":
                bits = int.from_bytes(data[21:25], "little")
                return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
            if chunk == b"VP8 ":
                w, h = struct.unpack("<HH", data[26:30])
                return w & 0x3FFF, h & 0x3FFF
        if kind == "jpeg":
            at, segments = 2, 0
            while at + 9 <= len(data) and segments < 1024:  # a crafted file cannot spin
                segments += 1
                marker, length = data[at + 1], struct.unpack(">H", data[at + 2 : at + 4])[0]
                if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
                    h, w = struct.unpack(">HH", data[at + 5 : at + 9])
                    return w, h
                at += 2 + length
    except struct.error:
        return None
    return None


def image_tokens(size: tuple[int, int] | None, detail: str) -> int:
    """OpenAI's tile formula: low is 85 tokens; otherwise the image is fit in 2048 x 2048, its
    short side scaled to 768, and each 512-px tile costs 170 on top of 85. Unknown sizes (and
    `original`) count as the formula's most."""
    import math

    if detail == "low":
        return 85
    if size is None or detail == "original" or min(size) <= 0:
        return URL_IMAGE_TOKENS
    width, height = size
    scale = min(1.0, 2048 / max(width, height))
    width, height = width * scale, height * scale
    scale = min(1.0, 768 / min(width, height))
    width, height = width * scale, height * scale
    return 85 + 170 * math.ceil(width / 512) * math.ceil(height / 512)


# A PDF may spell a name with #xx escapes (/P#61ge is /Page), and put NUL (whitespace to PDF)
# between a key and its value: readers (pdfium, pypdf) take every spelling, so the count does
# too, or a crafted file shows no pages and is priced as one. A comment there is legal too, but
# no producer writes one: a file with one counts as its worst case (_PDF_ODD).
_PDF_GAP = rb"[\x00\t\n\x0c\r ]*"


def _pdf_name(name: str) -> bytes:
    """A pattern of /name as a PDF may spell it: each character itself or #xx, then a
    delimiter (so /Page is not /Pages)."""
    spelt = b"".join(b"(?:%s|#(?i:%02x))" % (c.encode(), ord(c)) for c in name)
    return b"/" + spelt + rb"(?![^\x00\t\n\x0c\r ()<>\[\]{}/%])"


_PDF_PAGE = re.compile(_pdf_name("Type") + _PDF_GAP + _pdf_name("Page"))
# An object stream's dictionary (PDF 1.5): its page objects are compressed inside it.
_PDF_OBJSTM = re.compile(_pdf_name("Type") + _PDF_GAP + _pdf_name("ObjStm"))
# An object stream's /N: a number, or a reference to one (its value unknown here).
_PDF_HELD = re.compile(
    _pdf_name("N")
    + _PDF_GAP
    + rb"([+-]?[0-9]*\.?[0-9]+)("
    + _PDF_GAP
    + rb"[0-9]+"
    + _PDF_GAP
    + rb"R)?"
)
# The stream keyword (not endstream's): its data begins after the end of its line, whatever
# else is on it (pdfium reads `stream X` so).
_PDF_STREAM = re.compile(rb"(?<![A-Za-z])stream")
_PDF_EOL = re.compile(rb"\r\n|\r|\n")
# A stream zlib alone decodes: every /Filter is /FlateDecode (or /Fl), no /DecodeParms.
_PDF_FILTER = re.compile(_pdf_name("Filter"))
_PDF_FLATE_NAME = b"(?:" + _pdf_name("FlateDecode") + b"|" + _pdf_name("Fl") + b")"
_PDF_FLATE = re.compile(
    _pdf_name("Filter")
    + _PDF_GAP
    + b"(?:"
    + _PDF_FLATE_NAME
    + rb"|\["
    + _PDF_GAP
    + _PDF_FLATE_NAME
    + _PDF_GAP
    + rb"\])"
)
_PDF_PARMS = re.compile(_pdf_name("DecodeParms") + b"|" + _pdf_name("DP"))
# A comment between a key and its value (or its reference's numbers): legal, never written,
# and the searches above would not see past it. /N's is looked for near an object stream only:
# three bytes such as `/N%` turn up by chance in a large file's compressed data.
_PDF_AFTER_KEY = rb"[\x00\t\n\x0c\r ]*(?:[+-]?[0-9.]+[\x00\t\n\x0c\r ]*){0,2}%"
_PDF_ODD = re.compile(
    b"(?:"
    + b"|".join(_pdf_name(n) for n in ("Type", "Filter", "DecodeParms"))
    + b")"
    + _PDF_AFTER_KEY
)
_PDF_ODD_HELD = re.compile(_pdf_name("N") + _PDF_AFTER_KEY)
PDF_HELD_KEYS = 64  # the /N looked at near one object stream; more is a crafted file
PDF_DICT_BEFORE = 1024  # how far before /Type /ObjStm its dictionary's other keys are looked for


# Counting pages costs at most a small multiple of reading the file, whatever its structure:
# each stream is inflated from its own bytes only (they never overlap, so zlib reads the file at
# most once), its output within a total bound, the whole within a time bound; a stream left
# unread counts each object it holds as a page (high, never low).
PDF_INFLATE_BYTES = 64 << 20  # the most of a PDF's object streams inflated to count pages
PDF_INFLATE_RATIO = 32  # and at most this many times the file's size (real streams: 3 to 20)
PDF_OBJECT_STREAMS = 1_000  # how many are looked into; a file with more counts as its worst case
PDF_COUNT_S = 1.0  # how long one PDF's streams are inflated for; the rest count by their /N


def pdf_pages(data: bytes) -> int:
    """A PDF's page count, as its page objects tell it (at least 1), those compressed in
    object streams too: pdfTeX and most producers since PDF 1.5 put every page object there,
    where the plain bytes show none. Names are read in any spelling (/P#61ge is /Page). A
    stream's bytes end where the next object stream's dictionary begins; one that zlib alone
    cannot decode (another filter, a predictor) or that cannot be inflated within the bounds
    counts each object it holds (/N) as a page, and a file with more streams than are looked
    into, or with a comment where no producer writes one, counts a page a byte: the estimate
    may be high, never low, and costs about what reading the file does."""
    import time

    worst = max(1, len(data))
    if _PDF_ODD.search(data):
        return worst
    pages = len(_PDF_PAGE.findall(data))
    budget = min(PDF_INFLATE_BYTES, PDF_INFLATE_RATIO * len(data))
    deadline, view = time.monotonic() + PDF_COUNT_S, memoryview(data)
    found = _PDF_OBJSTM.finditer(data)
    current, number, before = next(found, None), 0, 0
    while current is not None:
        if number >= PDF_OBJECT_STREAMS:
            return worst
        following = next(found, None)
        end = following.start() if following is not None else len(data)
        at = _PDF_STREAM.search(data, current.end(), end)
        line = at and _PDF_EOL.search(data, at.end(), end)  # one search each: linear
        # Its dictionary's other keys: from a little before /Type to the stream's first byte.
        keys = data[max(before, current.start() - PDF_DICT_BEFORE) : at.start() if at else end]
        most, plain = _pdf_held(keys, worst), None
        if line and _pdf_flate_only(keys) and budget > 0 and time.monotonic() < deadline:
            plain, spent = _inflated(view[line.end() : end], budget)
            budget -= spent
        if plain is None or _PDF_ODD.search(plain):
            pages += most
        else:
            pages += min(most, len(_PDF_PAGE.findall(plain)))
        current, number, before = following, number + 1, current.end()
    return max(1, pages)


def _pdf_held(keys: bytes, worst: int) -> int:
    """The objects an object stream holds, as its /N says (the largest, if more than one is in
    reach); `worst` when none is, or one is a reference (its value is elsewhere) or has a
    comment before it."""
    import math

    if _PDF_ODD_HELD.search(keys):
        return worst
    held = []
    for found in _PDF_HELD.finditer(keys):
        if found.group(2) or len(held) >= PDF_HELD_KEYS:
            return worst
        held.append(float(found.group(1)))
    return max(0, math.ceil(min(max(held), 1e15))) if held else worst  # 1e999 is no int


def _pdf_flate_only(keys: bytes) -> bool:
    """Whether a stream's dictionary asks zlib alone to decode it: every /Filter FlateDecode,
    no /DecodeParms (a predictor leaves zlib's output in other bytes than the reader's)."""
    if _PDF_PARMS.search(keys):
        return False
    return len(_PDF_FILTER.findall(keys)) == len(_PDF_FLATE.findall(keys))


def _inflated(stream, budget: int) -> tuple[bytes | None, int]:
    """A zlib stream's bytes, fed 64 KB at a time (garbage fails at its first bytes, whatever
    follows), or None when it is not one, is cut short, or inflates past `budget`; with how
    many bytes were inflated either way (they count against the budget)."""
    import zlib

    inflater, out, size = zlib.decompressobj(), [], 0
    try:
        for at in range(0, len(stream), 1 << 16):
            out.append(inflater.decompress(stream[at : at + (1 << 16)], budget - size + 1))
            size += len(out[-1])
            if size > budget or inflater.unconsumed_tail:
                return None, size
            if inflater.eof:
                return b"".join(out), size
    except zlib.error:
        return None, size
    return None, size


def request_text(request: dict) -> str:
    """The text of a request's `input`: the string itself, or its first part with files."""
    given = request["input"]
    return given if isinstance(given, str) else given[0]["content"][0]["text"]


def files_text(query_input: str, files) -> list:
    """The request's `input` with files: one user message, the question then each file."""
    content = [{"type": "input_text", "text": query_input}, *(f.part for f in files)]
    return [{"role": "user", "content": content}]


# -- Reading: FileReader, each file opened beneath its directory -------------------------------


class FileReader:
    """Turns a call's `files` into FileInputs, or FileRefused naming the first that cannot go."""

    def __init__(self, config: Config):
        self._config = config
        get = lambda key: config.get("files", key)  # noqa: E731
        self.max_files, self.max_file = get("max_files"), get("max_file_bytes")
        self.max_total, self.detail = get("max_total_bytes"), get("image_detail")
        self.patterns = tuple(get("deny"))  # on top of SECRET_PATHS
        # The server's own config and state files: they may hold tokens.
        own = (config.path, state_path(config))
        self._own = {os.path.realpath(p) for p in own if p}
        self._own_inodes = set()  # and under any other name: a hard link to them
        for path in self._own:
            try:
                info = os.stat(path)
                self._own_inodes.add((info.st_dev, info.st_ino))
            except OSError:
                pass

    def read(self, given: list, allowed: list | None) -> list:
        """`allowed`: the directories local paths may name (resolved), None: no local paths."""
        if len(given) > self.max_files:
            raise FileRefused(
                f"{len(given)} files: at most {self.max_files} a call (files.max_files)"
            )
        files, total = [], 0
        for item in given:
            found = self._one(item, allowed)
            total += found.bytes
            if total > self.max_total:
                raise FileRefused(
                    f"{_named(item)}: refused, the files come to more than {self.max_total} "
                    "bytes in all (files.max_total_bytes)"
                )
            files.append(found)
        return files

    def _one(self, given: str, allowed: list | None) -> FileInput:
        scheme = url_scheme(given)
        if scheme == "https":
            return self._url(given)
        if scheme == "data":
            return self._data_url(given)
        if scheme:
            raise FileRefused(
                f"{_named(given)}: refused, only https:// and data: URLs are sent ({scheme}: "
                "is not; the server never fetches a URL itself)"
            )
        if allowed is None:
            raise FileRefused(
                f"{_named(given)}: refused, local paths name the server's disk and are off over "
                "HTTP (files.local_paths); send a data: or https:// URL"
            )
        return self._local(given, allowed)

    def _url(self, given: str) -> FileInput:
        from urllib.parse import urlsplit

        given = "https" + given[len("https") :]  # HTTPS:// as https://, as OpenAI expects it
        try:
            parts = urlsplit(given)
            parts.port  # noqa: B018 - raises ValueError for a bad port
        except ValueError:
            parts = None
        bad = any(c.isspace() or not c.isprintable() for c in given) or len(given) > 8192
        if parts is None or not parts.hostname or bad or "@" in parts.netloc:
            raise FileRefused(
                f"{_named(given)}: refused, not a valid https:// URL (a host, no user:password@, "
                "no spaces, at most 8192 characters)"
            )
        if parts.path.lower().endswith(IMAGE_EXTENSIONS):
            part = {"type": "input_image", "image_url": given, "detail": self.detail}
            return FileInput(given, "image_url", None, part, image_tokens(None, self.detail))
        part = {"type": "input_file", "file_url": given}
        return FileInput(given, "file_url", None, part, URL_FILE_PAGES * PDF_PAGE_TOKENS)

    def _data_url(self, given: str) -> FileInput:
        import base64
        import binascii

        head, comma, body = given.partition(",")
        if not comma or not head.lower().endswith(";base64"):
            raise FileRefused(
                f"{_named(given)}: refused, a data: URL must be base64 (data:<type>;base64,...)"
            )
        if len(body) > (self.max_file + 2) // 3 * 4 + 4:
            raise FileRefused(self._too_big(given, len(body) * 3 // 4))
        try:
            data = base64.b64decode(body, validate=True)
        except (binascii.Error, ValueError):
            raise FileRefused(f"{_named(given)}: refused, its base64 is not valid") from None
        return self._input(given, data)

    def _too_big(self, given: str, size: int) -> str:
        return (
            f"{_named(given)}: refused, {size} bytes is over the {self.max_file}-byte limit "
            "(files.max_file_bytes)"
        )

    def _local(self, given: str, allowed: list) -> FileInput:
        if "\x00" in given:
            raise FileRefused(f"{_named(given)}: refused, a path cannot hold a NUL character")
        if len(given) > PATH_MAX_CHARS:  # resolving and matching it would cost per component
            raise FileRefused(
                f"{_named(given)}: refused, a path of more than {PATH_MAX_CHARS} characters"
            )
        path = os.path.expanduser(given)
        if not os.path.isabs(path):
            if not allowed:
                raise FileRefused(self._outside(given))
            path = os.path.join(allowed[0], path)
        real = os.path.realpath(path)  # as the OS resolves it: symlinks and .. (need not exist)
        if files_denied(given, self.patterns) or files_denied(real, self.patterns):
            raise FileRefused(f"{_named(given)}: refused, a secret by name (files.deny)")
        root = next((d for d in allowed if _inside(real, d)), None)
        if root is None or any(_inside(real, d) for d in SYSTEM_DIRS) or real in self._own:
            raise FileRefused(self._outside(given))
        data = self._read_inside(given, root, real)
        return self._input(given, data)

    def _outside(self, given: str) -> str:
        return (
            f"{_named(given)}: refused, outside the allowed directories (the client's roots or "
            "the working directory, and files.allowed_dirs)"
        )

    def _read_inside(self, given: str, root: str, real: str) -> bytes:
        """The file's bytes, opened one component at a time from `root` without following a
        symlink (a directory swapped for one since `real` was resolved fails here), as a
        regular file only, and read within files.max_file_bytes: nothing can hang it."""
        parts = [p for p in os.path.relpath(real, root).split(os.sep) if p != "."]
        try:
            fd = _open_beneath(root, parts)
        except FileNotFoundError:
            raise FileRefused(f"{_named(given)}: refused, no such file") from None
        except IsADirectoryError:
            raise FileRefused(f"{_named(given)}: refused, a directory, not a file") from None
        except OSError as exc:
            raise FileRefused(
                f"{_named(given)}: refused, it cannot be opened as a file inside the allowed "
                f"directories ({exc.strerror or type(exc).__name__}; a symlink that changed?)"
            ) from None
        try:
            return self._read_fd(given, fd, root)
        finally:
            os.close(fd)

    def _read_fd(self, given: str, fd: int, root: str) -> bytes:
        import stat

        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            what = "a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file"
            raise FileRefused(f"{_named(given)}: refused, {what} (a FIFO, device or socket?)")
        if (info.st_dev, info.st_ino) in self._own_inodes:
            raise FileRefused(
                f"{_named(given)}: refused, it is the server's own config or state file "
                "(a hard link to it); it may hold tokens"
            )
        where = _fd_path(fd)
        if where is not None and (not _inside(where, root) or files_denied(where, self.patterns)):
            raise FileRefused(self._outside(given))
        if info.st_size > self.max_file:
            raise FileRefused(self._too_big(given, info.st_size))
        chunks, size = [], 0
        while size <= self.max_file:
            chunk = os.read(fd, min(1 << 20, self.max_file + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > self.max_file:
            raise FileRefused(self._too_big(given, size))
        return b"".join(chunks)

    def _input(self, given: str, data: bytes) -> FileInput:
        import base64

        if len(data) > self.max_file:
            raise FileRefused(self._too_big(given, len(data)))
        found = _kind_of(data)
        if found is None or not data:
            raise FileRefused(
                f"{_named(given)}: refused, {_other_kind(data)}: only PNG, JPEG, WebP, GIF, PDF "
                "and UTF-8 text are sent"
            )
        if _looks_secret(data, api_key(self._config)):
            raise FileRefused(f"{_named(given)}: refused, it holds a private key or API key")
        kind, mime = found
        encoded = f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"
        name = "file" if _is_data_url(given) else os.path.basename(given) or "file"
        if kind == "pdf":
            part = {"type": "input_file", "filename": name, "file_data": encoded}
            return FileInput(given, kind, data, part, pdf_pages(data) * PDF_PAGE_TOKENS)
        if kind == "text":
            text = data.decode("utf-8").removeprefix("\ufeff")
            part = {"type": "input_text", "text": f"[file] {name}\n{text}"}
            # The part is billed as sent: its name line too (a long name, a short file).
            tokens = len(part["text"].encode()) // TEXT_BYTES_PER_TOKEN + 1
            return FileInput(given, kind, data, part, tokens)
        part = {"type": "input_image", "image_url": encoded, "detail": self.detail}
        return FileInput(given, kind, data, part, image_tokens(image_size(data, kind), self.detail))


_OPENS_BENEATH = os.open in os.supports_dir_fd  # openat(2): every POSIX system


def _open_beneath(root: str, parts: list) -> int:
    """An fd of root/parts..., each component opened from its parent's fd with O_NOFOLLOW; the
    last with O_NONBLOCK too (a FIFO opens without waiting for a writer, and is refused)."""
    flags = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0)
    last = flags | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    if not parts:
        raise IsADirectoryError(root)
    if not _OPENS_BENEATH:  # Windows: by path, then checked by _fd_path
        return os.open(os.path.join(root, *parts), last | getattr(os, "O_BINARY", 0))
    directory = getattr(os, "O_DIRECTORY", 0)
    fd = os.open(root, flags | directory)
    try:
        for part in parts[:-1]:
            step = os.open(part, flags | directory, dir_fd=fd)
            os.close(fd)
            fd = step
        return os.open(parts[-1], last, dir_fd=fd)
    finally:
        os.close(fd)


def _fd_path(fd: int) -> str | None:
    """Where an open file is, as the kernel says (Linux: /proc/self/fd; macOS: F_GETPATH)."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        pass
    try:
        import fcntl

        if hasattr(fcntl, "F_GETPATH"):
            return fcntl.fcntl(fd, fcntl.F_GETPATH, b"\0" * 1024).rstrip(b"\0").decode()
    except OSError:
        pass
    return None


def allowed_dirs(config: Config, roots: list | None) -> list:
    """The directories local paths may name, resolved: the client's roots (None: it lists
    none, so the working directory), then files.allowed_dirs. The file system's root is never
    one: a client started in / would otherwise open the whole disk."""
    base = roots if roots is not None else [os.getcwd()]
    dirs = [*base, *(os.path.expanduser(d) for d in config.get("files", "allowed_dirs"))]
    found = []
    for directory in dirs:
        if "\x00" in directory:
            continue
        real = os.path.realpath(directory)
        if os.path.dirname(real) != real and os.path.isdir(real) and real not in found:
            found.append(real)
    return found


def roots_from(result) -> list:
    """The local directories of a roots/list result (file:// URIs only)."""
    from urllib.parse import unquote, urlsplit

    found = []
    roots = result.get("roots") if isinstance(result, dict) else None
    for root in roots if isinstance(roots, list) else ():
        uri = root.get("uri") if isinstance(root, dict) else None
        if not isinstance(uri, str):
            continue
        parts = urlsplit(uri)
        if parts.scheme == "file" and parts.netloc in ("", "localhost"):
            path = unquote(parts.path)
            if os.name == "nt" and re.match(r"/[A-Za-z]:", path):
                path = path[1:]
            # A root is a whole absolute path: a relative one would be the server's working
            # directory's, and a NUL is no path at all (realpath raises on it).
            if os.path.isabs(path) and "\x00" not in path:
                found.append(path)
    return found


# ============================================================================================
# State: the usage ledger, budgets and the answer cache (SQLite, or PostgreSQL for a team)
# ============================================================================================
# One store shared by every server process of the user (a SQLite file in WAL mode, the
# default) or of a team (a PostgreSQL database, state.url). Each finished call adds a row to
# `usage` (never the query text) and to the per-day totals that budgets and reports read;
# complete answers are kept in `answers` under a hash of everything that shapes them.
#
# The answer path never waits on the store for long: ledger rows and cache entries go to one
# writer thread through a bounded queue (rows it cannot write yet wait in memory and are
# written when the store is back, so an outage loses no spend); a cache read gives up after
# a fraction of a second; after a failure a connection rests a few seconds; every wait on
# PostgreSQL also has a bound of our own (see _Watchdog), as a silent link never times out
# on the server's side. The one wait a call may make is its budget: with a budget set, a
# call reserves its expected cost in one transaction before it starts (a lock in the
# database, so it holds across processes and hosts), and settles at its real cost when it
# ends; when the store cannot be reached, calls that would spend are refused. sqlite3
# (psycopg for state.url) is imported on first use.

# -- Schema: timings, the tables, their versions and migrations --------------------------------


# The schema's version; every change to a table or a column raises it, with one step in
# _MIGRATIONS. 1: usage, spend_by_day and answers, without a version table (SQLite only).
# 2: usage_daily, reservations and schema_version (a later commit added writers, without a
# new version: a version 2 store may lack it). 3: writers; usage.writer_schema. 4: users,
# ledger rows and reservations by user (usage.user_name), usage_by_user, response_owners.
# 5: checks (the day each once-a-day check last ran: the model retirements); no rows move.
# 6: usage.files and usage.file_bytes (what a call attached: counts only); no rows move.
# 7: OAuth subjects as oauth:<issuer>#<sub> (issue 31: they had shared named users' names).
STATE_SCHEMA_VERSION = 7
ANSWER_FORMAT = 2  # the shape of a cached body; a row of another shape is a miss, and dropped
_BUSY_TIMEOUT_S = 2.0  # how long a write (or a budget check) waits for another's lock
# How long an upgrade of the schema may take (a team's ledger of a few million rows is read
# once per step); meanwhile budget checks of other processes cannot be made, and refuse.
_MIGRATION_S = 300.0
_CACHE_READ_S = 0.25  # a cache read that takes longer is a miss
_BUDGET_WAIT_S = 10.0  # how long a budget check waits for this process's other checks
_BACKOFF_S = 3.0  # after a failure, a connection is not tried again for this long
_CONNECT_TIMEOUT_S = 2  # PostgreSQL: how long a connection may take (libpq's least is 2)
# PostgreSQL bounds of our own: a transaction that has not come back within twice its statement
# timeout plus this grace is abandoned (see _Watchdog); a session of ours left idle inside a
# transaction (its instance cut off mid-check) is ended by the server after
# _IDLE_IN_TRANSACTION_S, which frees the budget's lock for every other instance.
_WATCHDOG_GRACE_S = 1.0
_IDLE_IN_TRANSACTION_S = 5
_KEEPALIVE = {
    "keepalives": 1,
    "keepalives_idle": 10,
    "keepalives_interval": 5,
    "keepalives_count": 3,
}
_WARN_EVERY_S = 60.0
_MAX_PENDING_ROWS = 10_000  # ledger rows kept in memory while the store cannot be written
_MAX_PENDING_CACHE = 200  # cache entries waiting to be written; older ones are dropped
_BATCH = 500  # writes per transaction of the writer
_RECENT_CALLS = 20  # a call's expected cost: the mean of its tool's last N priced calls
_RECENT_SCAN = 200  # ... of its model, among the tool's last N (several models share a state)
_PRUNE_EVERY_S = 3600.0
_WRITER_IDLE_S = 1.0  # the writer thread ends after this long with nothing to write
_WRITER_MARK_KEEP_S = 7 * 86400.0  # a writer's mark (see StateWriter) outlives its process
_LOCK_BUDGET, _LOCK_SCHEMA = 0x6F726D01, 0x6F726D02  # PostgreSQL advisory lock keys
_UMASK_LOCK = threading.Lock()
_USERS_CACHE_S = 2.0  # named tokens are read again after this long: a revoked one is refused
_USERS_HASHES_KEPT = 100_000  # named tokens' hashes remembered (never sent to introspection)
# What --user add's tokens start with, so a server knows one of its own even when it cannot
# read the state (issue 31): such a token is never sent to an OAuth issuer.
NAMED_TOKEN_PREFIX = "ormcp_u_"
ALLOWANCE_DEFAULT = "none"  # --user limit NAME --daily-usd none: back to the per-user default

_USAGE_COLUMNS = (
    "at",
    "day",
    "tool",
    "model",
    "input_tokens",
    "cached_input_tokens",
    "output_tokens",
    "reasoning_tokens",
    "web_searches",
    "usd",
    "cache_hit",
    "elapsed_ms",
    "outcome",
    "writer_schema",  # the schema version of the server that wrote the row (NULL: before 3)
    "user_name",  # who asked ('' before version 4)
    "files",  # how many files the call sent (0 before version 6)
    "file_bytes",  # their bytes in all
)
_DAILY_SUMS = (
    "calls",
    "usd",
    "cache_hits",
    "input_tokens",
    "cached_input_tokens",
    "output_tokens",
    "web_searches",
    "unpriced",
)


def _tables(postgres: bool) -> dict:
    """Every table, with its columns as (name, type) in this version's schema; a column named
    "" is a table constraint."""
    real = "DOUBLE PRECISION" if postgres else "REAL"
    count = "BIGINT NOT NULL DEFAULT 0" if postgres else "INTEGER NOT NULL DEFAULT 0"
    tokens = ("input_tokens", "cached_input_tokens", "output_tokens", "reasoning_tokens")
    return {
        "usage": [
            ("id", "BIGSERIAL PRIMARY KEY" if postgres else "INTEGER PRIMARY KEY"),
            ("at", f"{real} NOT NULL"),
            ("day", "TEXT NOT NULL"),
            ("tool", "TEXT NOT NULL"),
            ("model", "TEXT NOT NULL"),
            *((name, count) for name in tokens),
            ("web_searches", count),
            ("usd", real),
            ("cache_hit", count),
            ("elapsed_ms", count),
            ("outcome", "TEXT NOT NULL"),
            ("writer_schema", "INTEGER"),
            ("user_name", "TEXT NOT NULL DEFAULT ''"),
            ("files", count),
            ("file_bytes", count),
        ],
        "spend_by_day": [("day", "TEXT PRIMARY KEY"), ("usd", f"{real} NOT NULL")],
        "usage_daily": [
            ("day", "TEXT NOT NULL"),
            ("tool", "TEXT NOT NULL"),
            ("model", "TEXT NOT NULL"),
            ("usd", f"{real} NOT NULL DEFAULT 0"),
            *((name, count) for name in _DAILY_SUMS if name != "usd"),
            ("", "PRIMARY KEY (day, tool, model)"),
        ],
        "answers": [
            ("key", "TEXT PRIMARY KEY"),
            ("stored_at", f"{real} NOT NULL"),
            ("body", "TEXT NOT NULL"),
        ],
        "reservations": [
            ("id", "TEXT PRIMARY KEY"),
            ("at", f"{real} NOT NULL"),
            ("expires_at", f"{real} NOT NULL"),
            ("usd", f"{real} NOT NULL"),
            ("user_name", "TEXT NOT NULL DEFAULT ''"),
        ],
        # Named users (--user): only a hash of each token, never the token.
        "users": [
            ("name", "TEXT PRIMARY KEY"),
            ("token_sha256", "TEXT NOT NULL"),
            ("created_at", f"{real} NOT NULL"),
            ("revoked_at", real),
            ("daily_usd", real),
            ("monthly_usd", real),
        ],
        # Calls and dollars per user and day: --usage's by_user and the per-user budgets.
        "usage_by_user": [
            ("day", "TEXT NOT NULL"),
            ("user_name", "TEXT NOT NULL"),
            ("calls", count),
            ("usd", f"{real} NOT NULL DEFAULT 0"),
            ("", "PRIMARY KEY (day, user_name)"),
        ],
        # Who may follow up a response (previous_response_id): its creator, and whoever was
        # given it from the cache or an identical call in flight.
        "response_owners": [
            ("response_id", "TEXT NOT NULL"),
            ("user_name", "TEXT NOT NULL"),
            ("at", f"{real} NOT NULL"),
            ("", "PRIMARY KEY (response_id, user_name)"),
        ],
        # Each process's writer's mark: the last ledger row it has written (see StateWriter).
        "writers": [("id", "TEXT PRIMARY KEY"), ("seq", count), ("at", f"{real} NOT NULL")],
        "schema_version": [("version", "INTEGER NOT NULL")],
        # Version 5: the day each once-a-day check last ran, whichever process ran it.
        "checks": [("name", "TEXT PRIMARY KEY"), ("day", "TEXT NOT NULL")],
    }


_INDEXES = (
    "CREATE INDEX IF NOT EXISTS usage_by_day ON usage (day)",
    "CREATE INDEX IF NOT EXISTS usage_by_tool ON usage (tool, outcome, id)",
    "CREATE INDEX IF NOT EXISTS answers_by_age ON answers (stored_at)",
)


def _schema(postgres: bool) -> list[str]:
    """The tables, for either database (CREATE ... IF NOT EXISTS: a no-op where they are)."""
    statements = []
    for table, columns in _tables(postgres).items():
        listed = ", ".join(f"{name} {kind}".strip() for name, kind in columns)
        statements.append(f"CREATE TABLE IF NOT EXISTS {table} ({listed})")
    return [*statements, *_INDEXES]


def _added_column(kind: str) -> str:
    """A column's type as ALTER TABLE ... ADD COLUMN takes it: a NOT NULL one needs a default
    for the rows already there."""
    kind = kind.replace(" PRIMARY KEY", "")
    if "NOT NULL" in kind and "DEFAULT" not in kind:
        kind += " DEFAULT ''" if kind.startswith("TEXT") else " DEFAULT 0"
    return kind


# Version 1 files had raw rows only: their per-day totals are summed once, on upgrade.
_BACKFILL_DAILY = (
    "INSERT INTO usage_daily (day, tool, model, usd, calls, cache_hits, input_tokens, "
    "cached_input_tokens, output_tokens, web_searches, unpriced) "
    "SELECT day, tool, model, COALESCE(SUM(usd), 0), COUNT(*), SUM(cache_hit), "
    "SUM(input_tokens), SUM(cached_input_tokens), SUM(output_tokens), SUM(web_searches), "
    "SUM(CASE WHEN usd IS NULL THEN 1 ELSE 0 END) FROM usage GROUP BY day, tool, model"
)
# A version 1 server still running on an upgraded file writes usage and spend_by_day, never
# the per-day totals reports read: its rows (no writer_schema) are folded into them here.
_FOLD_OLD_ROWS = (
    "CREATE TRIGGER IF NOT EXISTS usage_from_version_1 AFTER INSERT ON usage "
    "WHEN NEW.writer_schema IS NULL BEGIN "
    "INSERT INTO usage_daily (day, tool, model, usd, calls, cache_hits, input_tokens, "
    "cached_input_tokens, output_tokens, web_searches, unpriced) VALUES (NEW.day, NEW.tool, "
    "NEW.model, COALESCE(NEW.usd, 0), 1, NEW.cache_hit, NEW.input_tokens, "
    "NEW.cached_input_tokens, NEW.output_tokens, NEW.web_searches, NEW.usd IS NULL) "
    "ON CONFLICT (day, tool, model) DO UPDATE SET usd = usage_daily.usd + excluded.usd, "
    "calls = usage_daily.calls + 1, cache_hits = usage_daily.cache_hits + excluded.cache_hits, "
    "input_tokens = usage_daily.input_tokens + excluded.input_tokens, "
    "cached_input_tokens = usage_daily.cached_input_tokens + excluded.cached_input_tokens, "
    "output_tokens = usage_daily.output_tokens + excluded.output_tokens, "
    "web_searches = usage_daily.web_searches + excluded.web_searches, "
    "unpriced = usage_daily.unpriced + excluded.unpriced; END"
)


def _from_version_1(backend, conn) -> None:
    """1 -> 2: the per-day totals, from the raw rows; and (SQLite: version 1 knew no other)
    the rows an old server may still add, folded in as they come."""
    conn.execute(_BACKFILL_DAILY)
    if not backend.postgres:
        conn.execute(_FOLD_OLD_ROWS)


def _from_version_2(backend, conn) -> None:
    """2 -> 3: the writers table and usage.writer_schema, which the check of every table and
    column has added; nothing to move."""


# Tables whose user_name column holds an identity (see Identity, in Transports).
_IDENTITY_COLUMNS = ("usage", "reservations", "usage_by_user", "response_owners")


def _from_version_6(backend, conn) -> None:
    """6 -> 7: OAuth subjects get a namespace of their own (issue 31). Up to 6 a token's
    `sub` was stored as it came, in the namespace of named users and `shared`: every name
    that is no named user (revoked ones included), `local`, `shared` or '' was a subject, and
    becomes oauth:<issuer>#<sub> (the issuer server.auth.issuer names as the store is
    upgraded: _needs_issuer refuses the step without one while there are subjects, issue 39).
    A name both a named user and a subject had used stays the named user's: the rows cannot
    be told apart. Cached answers are dropped (their keys hash the old names): each question
    is asked again once."""
    issuer = (backend.oauth_issuer or "").rstrip("/")
    _refile_bare(backend, conn.execute, issuer)
    conn.execute("DELETE FROM answers")


def _bare_subjects(run) -> list:
    """(table, name) for each OAuth subject a store before version 7 holds under its bare
    `sub` (see _from_version_6); run(sql) runs a statement."""
    named = {row[0] for row in run("SELECT name FROM users").fetchall()}
    found = []
    for table in _IDENTITY_COLUMNS:
        names = {row[0] for row in run(f"SELECT DISTINCT user_name FROM {table}").fetchall()}
        # oauth:... was written by a version 7 server already (a rolling upgrade)
        found += [(table, n) for n in sorted(names - named) if Identity.parse(n).kind == "user"]
    return found


def _needs_issuer(backend, conn) -> str | None:
    """Why the step to 7 cannot run here: the store holds OAuth subjects, and only the issuer
    they came from (server.auth.issuer of the --http server) can file them. Run without it,
    every subject became oauth:#<sub> for good (issue 39)."""
    if (backend.oauth_issuer or "").strip():
        return None
    subjects = {name for _, name in _bare_subjects(conn.execute)}
    if not subjects:
        return None
    return (
        f"its upgrade to schema 7 files its {len(subjects)} OAuth subject(s) under the OAuth "
        "issuer, and this config names none (server.auth.issuer): run "
        f"`{SERVER_NAME} --config FILE --upgrade-state` with FILE the --http server's config "
        "(or start that server); nothing was changed"
    )


# Steps that need configuration: by the version they reach, why they cannot run now (None:
# they can). Such a step never runs without it: the whole upgrade is refused, saying what to
# run, and the store stays as it was (never half-upgraded).
_MIGRATION_NEEDS = {7: _needs_issuer}


def _refile(backend, run, where: str, params: tuple, new: str, new_params: tuple) -> None:
    """Gives every row whose user_name matches `where` (SQL, with `params`) the identity the
    SQL expression `new` makes of it (with `new_params`), in every identity table, folding the
    rows of a table keyed by identity into any the new identity has. One statement per table
    whatever the number of identities: a statement per identity scanned the ledger once for
    each, and a team's store never finished its upgrade (issue 39). `new` must map distinct
    names to distinct identities that `where` does not match. run(sql, params) runs one."""
    sql = backend.sql
    both = (*new_params, *params)
    for table in _IDENTITY_COLUMNS:
        if table == "usage_by_user":  # (day, user_name) is its key: fold into any row
            run(
                sql(
                    f"INSERT INTO usage_by_user (day, user_name, calls, usd) SELECT day, {new}, "
                    f"calls, usd FROM usage_by_user WHERE {where} ON CONFLICT (day, user_name) "
                    "DO UPDATE SET calls = usage_by_user.calls + excluded.calls, "
                    "usd = usage_by_user.usd + excluded.usd"
                ),
                both,
            )
        elif table == "response_owners":  # (response_id, user_name) likewise
            run(
                sql(
                    f"INSERT INTO response_owners (response_id, user_name, at) SELECT "
                    f"response_id, {new}, at FROM response_owners WHERE {where} "
                    "ON CONFLICT DO NOTHING"
                ),
                both,
            )
        else:
            run(sql(f"UPDATE {table} SET user_name = {new} WHERE {where}"), both)
            continue
        run(sql(f"DELETE FROM {table} WHERE {where}"), params)


def _refile_bare(backend, run, issuer: str) -> None:
    """Files every subject a store holds under its bare `sub` (see _bare_subjects) as
    oauth:<issuer>#<sub>."""
    where = (
        f"user_name NOT IN (SELECT name FROM users) AND user_name NOT IN (?, ?, ?) "
        f"AND substr(user_name, 1, {len(Identity.OAUTH_KEYS)}) <> ?"
    )
    params = ("", LOCAL_USER, SHARED_USER, Identity.OAUTH_KEYS)
    prefix = Identity.oauth(issuer, "").key
    _refile(backend, run, where, params, "CAST(? AS TEXT) || user_name", (prefix,))


def _refile_prefix(backend, run, old: str, new: str) -> None:
    """Every identity that starts with `old` starts with `new` instead (the rest kept)."""
    where = f"substr(user_name, 1, {len(old)}) = ?"
    expression = f"CAST(? AS TEXT) || substr(user_name, {len(old) + 1})"
    _refile(backend, run, where, (old,), expression, (new,))


# The steps, by the version each one reaches; each runs once, in order, after the tables
# and columns this version expects have been made. A new schema version adds one step.
_MIGRATIONS = {2: _from_version_1, 3: _from_version_2, 7: _from_version_6}


def _schema_turn(backend, conn, take) -> None:
    """take() waits for the lock another process changing the schema holds (an upgrade of
    a large store may hold it for minutes); when that wait runs out, StateUnavailable says
    so, not "database is locked" or "canceling statement due to statement timeout"."""
    try:
        take()
    except backend.errors() as exc:
        if backend.postgres:
            import psycopg

            waited = isinstance(
                exc, (psycopg.errors.QueryCanceled, psycopg.errors.LockNotAvailable)
            )
        else:
            waited = "locked" in str(exc)
        if not waited or backend.lost(conn):
            raise
        raise StateUnavailable(
            f"another process holds its schema lock (an upgrade running?) past "
            f"{_BUSY_TIMEOUT_S:g} s: it is tried again; --upgrade-state: run it again once that "
            "is done"
        ) from None


def _upgrade(backend, conn, version: int | None) -> None:
    """Within _ensure_schema's transaction: what this version expects and the store lacks,
    then each step past `version`, and the new version."""
    for statement in _missing(backend, conn):
        conn.execute(statement)
    steps = [s for s in range(STATE_SCHEMA_VERSION + 1) if version is not None and s > version]
    for step in steps:  # every step's needs first: the store is upgraded whole, or not
        problem = _MIGRATION_NEEDS[step](backend, conn) if step in _MIGRATION_NEEDS else None
        if problem:
            backend.refused = StateRefused(problem)
            raise backend.refused
    for step in steps:
        if step in _MIGRATIONS:
            _MIGRATIONS[step](backend, conn)
    conn.execute("DELETE FROM schema_version")
    conn.execute(
        backend.sql("INSERT INTO schema_version (version) VALUES (?)"), (STATE_SCHEMA_VERSION,)
    )


# -- Which store: its path, its errors, the watchdog -------------------------------------------


def state_path(config: Config) -> str | None:
    """The SQLite file's absolute path, or None when state.path is off or state.url is set."""
    if config.get("state", "url"):
        return None
    path = config.get("state", "path")
    if path and path.strip().lower() == "off":
        return None
    return os.path.expanduser(path) if path else config.default_state_path


def state_enabled(config: Config) -> bool:
    return bool(config.get("state", "url")) or state_path(config) is not None


def state_label(config: Config) -> str:
    """Where the state is, for people: never with the database password."""
    url = config.get("state", "url")
    if url:
        return f"state database {redact_url(url)}"
    path = state_path(config)
    return f"state file {path}" if path else "off (state.path: off)"


def cache_enabled(config: Config) -> bool:
    return config.get("cache", "ttl_s") > 0 and state_enabled(config)


class StateUnavailable(Exception):
    """The store could not be reached or used; `reason` says why, in a few words (for the
    server's log: it may name the store), `public` the same without the store's address (for
    MCP clients)."""

    def __init__(self, reason: str, public: str | None = None):
        super().__init__(reason)
        self.reason = reason
        self.public = public or reason


class StateRefused(StateUnavailable):
    """The store can be reached, but this process must not use it as it is: it was upgraded
    past this version's schema, or its upgrade needs configuration this process lacks. The
    reason says what to do; nothing was written."""


def _newer_store(version: int) -> StateRefused:
    text = (
        f"it was upgraded to schema {version} by a newer {SERVER_NAME}, and this one (schema "
        f"{STATE_SCHEMA_VERSION}) writes nothing to it: upgrade this host (docs/upgrade.md)"
    )
    return StateRefused(text)


class _Armed:
    """One guarded piece of work the watchdog watches: when it is due (monotonic), its
    connection, and whether the watchdog has fired (shut the connection down)."""

    __slots__ = ("conn", "deadline", "fired")

    def __init__(self, deadline: float, conn):
        self.deadline, self.conn, self.fired = deadline, conn, False


class _Watchdog:
    """Abandons a PostgreSQL connection whose work has not come back by its deadline. The
    server enforces statement_timeout and lock_timeout only on statements it received: on a
    link gone silent (a partition, a frozen VM) the driver would wait for ever, holding the
    channel, the budget checks queued behind it, and the process's exit. Shutting the socket
    down wakes the waiting driver at once with an error. One thread, started on first use."""

    def __init__(self):
        self._cond = threading.Condition()
        self._armed: dict = {}  # id -> _Armed
        self._thread: threading.Thread | None = None

    def guard(self, conn, seconds: float):
        import contextlib

        @contextlib.contextmanager
        def guarded():
            entry = _Armed(time.monotonic() + seconds, conn)
            with self._cond:
                self._armed[id(entry)] = entry
                if self._thread is None:
                    self._thread = threading.Thread(
                        target=self._loop, name="state-watchdog", daemon=True
                    )
                    self._thread.start()
                self._cond.notify()
            try:
                yield
            except BaseException:
                if entry.fired:
                    raise _Abandoned(seconds) from None
                raise
            finally:
                with self._cond:
                    self._armed.pop(id(entry), None)
            if entry.fired:  # fired as the work ended: the connection is gone all the same
                raise _Abandoned(seconds)

        return guarded()

    def _loop(self) -> None:
        with self._cond:
            while True:
                now = time.monotonic()
                for entry in self._armed.values():
                    if not entry.fired and entry.deadline <= now:
                        entry.fired = True
                        _shut_down(entry.conn)
                waiting = [entry.deadline for entry in self._armed.values() if not entry.fired]
                self._cond.wait(max(0.0, min(waiting) - now) if waiting else None)


class _Abandoned(Exception):
    """The watchdog shut a connection down: it did not answer in time."""

    def __init__(self, seconds: float):
        super().__init__(f"no answer within {seconds:g} s")


def _shut_down(conn) -> None:
    """Ends a connection's link from any thread, without its lock: whoever waits on the socket
    wakes to an error."""
    import socket

    try:
        sock = socket.socket(fileno=os.dup(conn.fileno()))
    except (OSError, ValueError, Exception):  # noqa: BLE001 - closed, or never opened
        return
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    finally:
        sock.close()


_WATCHDOG = _Watchdog()


# -- Backends: SQLite and PostgreSQL behind one interface --------------------------------------


class StateBackend:
    """The contract of a state backend, written once: what the store above it (StateStore,
    the schema and its migrations, the writer's channel) asks of one. `_SqliteBackend` and
    `_PostgresBackend` each implement every method here (tests/test_state.py checks it); the
    ledger, budgets and cache above do not change with the backend."""

    postgres: bool  # which SQL dialect: _tables() and _schema() write each
    label: str  # the store for the server's log and --doctor ("state file PATH", ...)
    hint: str  # what to do when it fails, for an operator
    url = ""  # state.url ("" for a file): replaced by its redacted form in reasons
    secrets: tuple = ()  # texts never shown: the URL's password
    oauth_issuer = None  # server.auth.issuer, for _from_version_6
    refused = None  # StateRefused, while the store refuses this process (see _refuse_newer)

    def errors(self) -> tuple:
        """The exception classes a failure of the store raises (the driver's and OSError)."""
        raise NotImplementedError

    def connect(self):
        """A new connection, in autocommit (transactions are explicit BEGIN ... COMMIT)."""
        raise NotImplementedError

    def set_timeout(self, conn, seconds: float) -> None:
        """Bounds each statement (or lock wait) of `conn` to `seconds`."""
        raise NotImplementedError

    def guard(self, conn, seconds: float):
        """A context manager that bounds what happens within it, on our side of the link."""
        raise NotImplementedError

    def lost(self, conn) -> bool:
        """Whether the connection broke and must be opened afresh."""
        raise NotImplementedError

    def abandon(self, conn) -> None:
        """Cuts a connection whose work is stuck, from any thread."""
        raise NotImplementedError

    def public_reason(self, exc: BaseException, reason: str) -> str:
        """The failure in a few words, without the store's address (for MCP clients)."""
        raise NotImplementedError

    def refused_value(self, exc: BaseException) -> bool:
        """Whether the failure is the row's (a value refused), not the store's."""
        raise NotImplementedError

    def begin(self, conn, write: bool) -> None:
        """Opens a transaction; `write`: one that will write."""
        raise NotImplementedError

    def take_turns(self, conn, key: int) -> None:
        """Serialises this transaction with every other that takes turns with `key`."""
        raise NotImplementedError

    def hold_schema(self, conn) -> None:
        """Keeps the schema from changing under this transaction until it ends."""
        raise NotImplementedError

    def has_table(self, conn, name: str) -> bool:
        """Whether the table exists, read afresh."""
        raise NotImplementedError

    def columns(self, conn, tables: list) -> dict:
        """{table: {column, ...}} for those of `tables` that exist."""
        raise NotImplementedError

    def sql(self, text: str) -> str:
        """A statement written with `?` placeholders, in this backend's dialect."""
        raise NotImplementedError


class _SqliteBackend(StateBackend):
    """A SQLite file in WAL mode, private to the user (with its -wal and -shm) from creation."""

    postgres = False

    def __init__(self, path: str):
        self.path = path
        self.label = f"state file {path}"
        self.hint = "fix or delete the file, or set state.path: off"

    def errors(self) -> tuple:
        import sqlite3

        return (sqlite3.Error, OSError)

    def connect(self):
        import sqlite3

        directory = os.path.dirname(self.path)
        # SQLite gives the -wal and -shm files the mode of the database file, which the umask
        # makes 0600 from its first byte (a chmod afterwards would leave them 0644).
        with _UMASK_LOCK:
            previous = os.umask(0o077)
            try:
                if directory:
                    os.makedirs(directory, mode=0o700, exist_ok=True)
                conn = sqlite3.connect(
                    self.path,
                    timeout=_BUSY_TIMEOUT_S,
                    isolation_level=None,
                    check_same_thread=False,
                )
                try:
                    conn.execute("PRAGMA journal_mode=WAL")
                    conn.execute("PRAGMA synchronous=NORMAL")
                except BaseException:
                    conn.close()
                    raise
            finally:
                os.umask(previous)
        import stat

        for suffix in ("", "-wal", "-shm"):  # files left by an older version
            try:
                # Only a file of ours: state.path may name a device (/dev/null: as root, a chmod
                # took it from every other user of the machine) or a link to another's file.
                # Group and others lose their access; the owner gains none (a file made
                # read-only stays so: 0444 became 0600, writable).
                mode = os.lstat(self.path + suffix).st_mode
                if stat.S_ISREG(mode) and mode & 0o077:
                    os.chmod(self.path + suffix, stat.S_IMODE(mode) & 0o700)
            except OSError:
                pass
        return conn

    def set_timeout(self, conn, seconds: float) -> None:
        conn.execute(f"PRAGMA busy_timeout = {int(seconds * 1000)}")

    def guard(self, conn, seconds: float):
        """A local file: SQLite's busy timeout bounds every wait already."""
        import contextlib

        return contextlib.nullcontext()

    def lost(self, conn) -> bool:
        return False

    def abandon(self, conn) -> None:
        """Nothing to cut: a SQLite wait ends at its busy timeout."""

    def public_reason(self, exc: BaseException, reason: str) -> str:
        """SQLite's own messages name no file; an OSError's does."""
        if isinstance(exc, OSError):
            return exc.strerror or type(exc).__name__
        return reason

    def refused_value(self, exc: BaseException) -> bool:
        """Whether the failure is the row's (a value SQLite cannot take), not the file's."""
        import sqlite3

        return not isinstance(exc, (sqlite3.OperationalError, OSError, MemoryError))

    def begin(self, conn, write: bool) -> None:
        conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")

    def take_turns(self, conn, key: int) -> None:
        """Serialises this transaction with every other that takes turns: BEGIN IMMEDIATE
        already holds the file's one write lock."""

    def hold_schema(self, conn) -> None:
        """Keeps the schema from changing under this transaction: a SQLite transaction reads
        one snapshot, and one that read an older snapshot cannot write after an upgrade."""

    def has_table(self, conn, name: str) -> bool:
        found = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)
        )
        return found.fetchone() is not None

    def columns(self, conn, tables: list) -> dict:
        """{table: {column, ...}} for those of `tables` that exist."""
        found = {}
        for table in tables:
            names = {row[1] for row in conn.execute(f"PRAGMA table_info({table})").fetchall()}
            if names:
                found[table] = names
        return found

    def sql(self, text: str) -> str:
        return text


class _PostgresBackend(StateBackend):
    """A PostgreSQL database (psycopg 3), shared by every host that has its URL."""

    postgres = True

    def __init__(self, url: str):
        self.url = url
        self.label = f"state database {redact_url(url)}"
        self.hint = "check the database and state.url, or unset state.url"
        self.secrets = url_secrets(url)

    def errors(self) -> tuple:
        import psycopg

        return (psycopg.Error, OSError)

    def connect(self):
        import psycopg

        conn = psycopg.connect(
            self.url,
            autocommit=True,  # transactions are explicit BEGIN ... COMMIT, as with SQLite
            connect_timeout=_CONNECT_TIMEOUT_S,
            application_name=SERVER_NAME,
            **_KEEPALIVE,  # a dead peer is noticed by the kernel too, not just the watchdog
        )
        try:
            # The server's own bounds on our sessions: one left idle inside a transaction (its
            # instance cut off mid-check) is ended, which frees the budget's lock; and no lock
            # is waited for longer than a budget check may take.
            with self.guard(conn, _BUSY_TIMEOUT_S + _WATCHDOG_GRACE_S):
                conn.execute(
                    f"SET idle_in_transaction_session_timeout = {_IDLE_IN_TRANSACTION_S * 1000}"
                )
                conn.execute(f"SET lock_timeout = {int(_BUSY_TIMEOUT_S * 1000)}")
        except BaseException:
            conn.close()
            raise
        return conn

    def set_timeout(self, conn, seconds: float) -> None:
        conn.execute(f"SET statement_timeout = {int(seconds * 1000)}")

    def guard(self, conn, seconds: float):
        """A bound on our side for what happens within it (see _Watchdog)."""
        return _WATCHDOG.guard(conn, seconds)

    def lost(self, conn) -> bool:
        """Whether the connection broke (the server restarted, or the link went)."""
        return bool(getattr(conn, "broken", False) or getattr(conn, "closed", False))

    def abandon(self, conn) -> None:
        _shut_down(conn)

    def refused_value(self, exc: BaseException) -> bool:
        """Whether the failure is the row's (a value the database or the driver refused), not
        the connection's or the server's."""
        import psycopg

        refused = (psycopg.DataError, psycopg.IntegrityError, ValueError, TypeError)
        return isinstance(exc, (*refused, OverflowError))

    def public_reason(self, exc: BaseException, reason: str) -> str:
        """The failure without the database's address (psycopg's messages quote the host,
        port, user and database): its kind only."""
        if isinstance(exc, (_Abandoned, StateUnavailable)):
            return reason if isinstance(exc, _Abandoned) else exc.public
        import psycopg

        if isinstance(exc, psycopg.errors.QueryCanceled):
            return "timed out"
        if isinstance(exc, psycopg.errors.LockNotAvailable):
            return "lock not available in time"
        if isinstance(exc, (psycopg.OperationalError, OSError)):
            return "connection failed"
        return f"database error {getattr(exc, 'sqlstate', None) or type(exc).__name__}"

    def begin(self, conn, write: bool) -> None:
        conn.execute("BEGIN")

    def take_turns(self, conn, key: int) -> None:
        """Serialises this transaction with every other that takes turns with `key`, on any
        host: an advisory lock held until COMMIT."""
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (key,))

    def hold_schema(self, conn) -> None:
        """Keeps the schema from changing under this transaction, on any host: a shared hold
        of the lock an upgrade takes whole (_ensure_schema), until COMMIT. Shared holds do not
        wait for each other."""
        conn.execute("SELECT pg_advisory_xact_lock_shared(%s)", (_LOCK_SCHEMA,))

    def has_table(self, conn, name: str) -> bool:
        # A read of pg_class, not to_regclass(): that answers from the session's catalog cache,
        # which a transaction that waited for the schema lock has not refreshed, so a table made
        # meanwhile was still missing (and a version 2 database taken for version 1).
        found = conn.execute(
            "SELECT 1 FROM pg_catalog.pg_class WHERE relname = %s "
            "AND pg_catalog.pg_table_is_visible(oid)",
            (name,),
        )
        return found.fetchone() is not None

    def columns(self, conn, tables: list) -> dict:
        """{table: {column, ...}} for those of `tables` that exist (pg_catalog, read afresh:
        see has_table)."""
        rows = conn.execute(
            "SELECT c.relname, a.attname FROM pg_catalog.pg_attribute a "
            "JOIN pg_catalog.pg_class c ON a.attrelid = c.oid WHERE c.relkind = 'r' "
            "AND pg_catalog.pg_table_is_visible(c.oid) AND a.attnum > 0 AND NOT a.attisdropped "
            "AND c.relname = ANY(%s)",
            (tables,),
        ).fetchall()
        found: dict = {}
        for table, column in rows:
            found.setdefault(table, set()).add(column)
        return found

    def sql(self, text: str) -> str:
        return text.replace("?", "%s")


def state_backend(config: Config) -> StateBackend | None:
    """The backend state.url or state.path names, or None when the state is off."""
    url = config.get("state", "url")
    path = None if url else state_path(config)
    backend = _PostgresBackend(url) if url else _SqliteBackend(path) if path else None
    if backend is not None:  # whose subjects a store older than version 7 holds (see there)
        backend.oauth_issuer = config.get("server", "auth", "issuer")
    return backend


def _ensure_schema(backend, conn) -> None:
    """Creates or upgrades the tables, once, even when several instances start at once: every
    table and column this version expects is checked (and made where missing, whatever the
    version says), then each migration step past the store's version runs."""
    # Looking, and waiting for another instance making them now, is bounded as any check is;
    # the upgrade itself may take longer on a large store (_MIGRATION_S).
    with backend.guard(conn, 2 * _BUSY_TIMEOUT_S + _WATCHDOG_GRACE_S):
        version = _stored_version(backend, conn)
        if version is not None and version > STATE_SCHEMA_VERSION:
            # Refused before taking the schema lock whole: that waits for every transaction of
            # the newer hosts (a long report), and holds up all their others meanwhile.
            backend.refused = _newer_store(version)
            raise backend.refused
        if version == STATE_SCHEMA_VERSION and not _missing(backend, conn):
            return
        backend.set_timeout(conn, _BUSY_TIMEOUT_S)
        _schema_turn(backend, conn, lambda: backend.begin(conn, write=True))
    try:
        with backend.guard(conn, 2 * _BUSY_TIMEOUT_S + _WATCHDOG_GRACE_S):
            _schema_turn(backend, conn, lambda: backend.take_turns(conn, _LOCK_SCHEMA))
            version = _stored_version(backend, conn)
        if version is not None and version > STATE_SCHEMA_VERSION:
            backend.refused = _newer_store(version)
            raise backend.refused
        if version is None and backend.has_table(conn, "usage"):
            version = 1  # version 1 had no version table
        with backend.guard(conn, _MIGRATION_S + _WATCHDOG_GRACE_S):
            backend.set_timeout(conn, _MIGRATION_S)
            _upgrade(backend, conn, version)
            conn.execute("COMMIT")
    except BaseException:
        _rollback(conn)
        raise
    finally:
        try:  # back to a check's bound (the channel sets its own before its next transaction)
            backend.set_timeout(conn, _BUSY_TIMEOUT_S)
        except Exception:  # noqa: BLE001 - the connection is gone: it is not used again
            pass


def _refuse_newer(backend, conn) -> None:
    """In every transaction, first: refuses the store once a newer version has upgraded it
    (issue 39). This version is the older host of the next upgrade: its rows (subjects, names,
    columns) would be of the old shape, so it writes none, and says so (StateRefused)."""
    backend.hold_schema(conn)
    found = conn.execute("SELECT MAX(version) FROM schema_version").fetchone()[0]
    version = _valid_version(backend, found)  # the table is there: the store was opened
    if version > STATE_SCHEMA_VERSION:
        backend.refused = _newer_store(version)
        raise backend.refused
    backend.refused = None


def _stored_version(backend, conn) -> int | None:
    """The store's schema version; None before version 2 (no table). StateRefused when the
    table holds none, or no version (every version from 2 wrote its row with its tables, in
    one transaction): any guess would run steps again (the totals summed twice) or skip them."""
    if not backend.has_table(conn, "schema_version"):
        return None
    return _valid_version(
        backend, conn.execute("SELECT MAX(version) FROM schema_version").fetchone()[0]
    )


def _valid_version(backend, version) -> int:
    """The version a schema_version table holds (its MAX), or StateRefused."""
    if not isinstance(version, int) or isinstance(version, bool) or version < 2:
        shown = "no version" if version is None else f"{str(version)[:20]!r}, not a version"
        backend.refused = StateRefused(
            f"its schema_version table holds {shown}; nothing was changed: set it back to the "
            "last version that used the store (the highest usage.writer_schema: docs/upgrade.md)"
        )
        raise backend.refused
    return version


def _missing(backend, conn) -> list:
    """The statements that make what this version expects and the store lacks: whole tables
    (with their indexes), and columns added to tables made by an earlier version."""
    tables = _tables(backend.postgres)
    found = backend.columns(conn, list(tables))
    statements = []
    for table, columns in tables.items():
        if table not in found:
            statements.append(next(s for s in _schema(backend.postgres) if f" {table} (" in s))
            continue
        statements += [
            f"ALTER TABLE {table} ADD COLUMN {name} {_added_column(kind)}"
            for name, kind in columns
            if name and name not in found[table]
        ]
    if statements:
        statements += _INDEXES
    return statements


def _rollback(conn) -> None:
    try:
        conn.execute("ROLLBACK")
    except Exception:  # noqa: BLE001 - no transaction open, or the connection is gone
        pass


def _one_line(text: str, limit: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _state_reason(exc: BaseException, url: str = "", secrets: tuple = ()) -> str:
    """A failure in a few words, on one line, without the database password (psycopg's errors
    can quote the whole URL, percent-encoding and all)."""
    if isinstance(exc, StateUnavailable):
        return exc.reason
    text = str(exc).strip().splitlines()
    reason = text[0] if text else type(exc).__name__
    if url:
        reason = reason.replace(url, redact_url(url))
    for secret in secrets:
        reason = reason.replace(secret, "***")
    return _one_line(reason, 160)


# -- Channels: one connection per role, opened in the background -------------------------------


class _Channel:
    """One connection to the store for one role (the answer path, the writer, a report), with
    its own lock and rest after a failure: trouble there holds up no other role."""

    def __init__(self, backend, on_failure):
        self._backend = backend
        self._on_failure = on_failure  # (what, reason, refused): the store's warning
        self._conn = None
        self._lock = threading.Lock()
        self._timeout = None
        self._resting_until = 0.0
        self._reason = self._public = ""
        self._opening = None  # (thread, box): a connection being opened aside, see _open_aside

    def run(
        self,
        what: str,
        work,
        *,
        write=False,
        timeout_s=_BUSY_TIMEOUT_S,
        wait_s=None,
        turns=0,
        connect_wait=None,
    ):
        """work(q) in one transaction, where q(sql, params) runs a statement ("?" marks);
        its result. Raises StateUnavailable when the store fails, or is resting after a
        failure, or when this role's connection stays busy past wait_s, or (with
        connect_wait) when opening the connection takes longer than that."""
        if not self._lock.acquire(timeout=-1 if wait_s is None else wait_s):
            raise StateUnavailable("busy")
        try:
            if time.monotonic() < self._resting_until:
                raise StateUnavailable(self._reason, self._public)
            # A connection that broke while idle (the database restarted) fails its next use:
            # that use is tried once more at once on a new connection, not after a rest.
            for retry in (True, False):
                try:
                    if connect_wait is not None and self._conn is None:
                        self._open_aside(connect_wait)
                    return self._transaction(work, write, timeout_s, turns)
                except _StillOpening:
                    raise StateUnavailable("connecting") from None
                except (StateUnavailable, _Abandoned, *self._backend.errors()) as exc:
                    lost = not isinstance(exc, _Abandoned) and self._lost()
                    self._close()
                    if retry and lost:
                        continue
                    self._fail(what, exc)
        finally:
            self._lock.release()

    def _lost(self) -> bool:
        return self._conn is not None and self._backend.lost(self._conn)

    def _fail(self, what: str, exc: BaseException):
        """Rests the channel after a failure, warns, and raises StateUnavailable."""
        backend = self._backend
        self._reason = _state_reason(exc, backend.url, backend.secrets)
        self._public = backend.public_reason(exc, self._reason)
        self._resting_until = time.monotonic() + _BACKOFF_S
        self._on_failure(what, self._reason, isinstance(exc, StateRefused))
        if isinstance(exc, StateRefused):
            raise StateRefused(self._reason, self._public) from None
        raise StateUnavailable(self._reason, self._public) from None

    def _open(self):
        conn = self._backend.connect()
        try:
            # Making or checking the tables waits on the schema lock, bounded by its timeout
            # (and an upgrade by _MIGRATION_S: see _ensure_schema).
            _ensure_schema(self._backend, conn)
        except BaseException:
            conn.close()
            raise
        return conn

    def _open_aside(self, wait_s: float) -> None:
        """Opens the connection on a thread of its own, waiting for it up to wait_s: a store
        that does not answer (a connect may take _CONNECT_TIMEOUT_S) costs the caller a miss,
        not a stall. Raises _StillOpening meanwhile, or what opening raised."""
        if self._opening is None:
            box: dict = {}
            thread = threading.Thread(
                target=self._open_into, args=(box,), name="state-connect", daemon=True
            )
            thread.start()
            self._opening = (thread, box)
        thread, box = self._opening
        thread.join(wait_s)
        if thread.is_alive():
            raise _StillOpening()
        self._opening = None
        if "error" in box:
            raise box["error"]
        self._conn, self._timeout = box["conn"], None

    def _open_into(self, box: dict) -> None:
        try:
            box["conn"] = self._open()
        except BaseException as exc:  # noqa: BLE001 - raised by the next run()
            box["error"] = exc

    def _transaction(self, work, write: bool, timeout_s: float, turns: int):
        backend = self._backend
        if self._conn is None:
            self._conn, self._timeout = self._open(), None
        conn = self._conn
        # The server's statement timeout bounds each statement it received; the guard bounds
        # the whole transaction on our side, however the link behaves.
        with backend.guard(conn, 2 * timeout_s + _WATCHDOG_GRACE_S):
            if self._timeout != timeout_s:
                backend.set_timeout(conn, timeout_s)
                self._timeout = timeout_s
            backend.begin(conn, write)
            try:
                _refuse_newer(backend, conn)
                if turns:
                    backend.take_turns(conn, turns)
                result = work(lambda text, params=(): conn.execute(backend.sql(text), params))
                conn.execute("COMMIT")
            except BaseException:
                if not backend.lost(conn):
                    _rollback(conn)
                raise
        return result

    def wake(self) -> None:
        """Ends a rest after a failure: the next run tries the store again."""
        self._resting_until = 0.0

    def _close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except Exception:  # noqa: BLE001 - a connection already gone
                pass
            self._conn = None

    def close(self) -> None:
        # A transaction still running is bounded by the watchdog; close() waits no longer than
        # that, then cuts the connection under it.
        if not self._lock.acquire(timeout=4 * _BUSY_TIMEOUT_S + _WATCHDOG_GRACE_S):
            if self._conn is not None:
                self._backend.abandon(self._conn)
            return
        try:
            self._close()
            opening, self._opening = self._opening, None
        finally:
            self._lock.release()
        # One still opening ends within the connect timeout; its connection is dropped unused.
        if opening is not None and "conn" in opening[1]:
            opening[1]["conn"].close()


class _StillOpening(Exception):
    """A channel's connection is still being opened aside (see _Channel._open_aside)."""


# -- Rows: bounded, and each kind of write -----------------------------------------------------


_MAX_TEXT = 200  # characters of a model name (or any text) in a ledger row
# ... but an identity is kept whole (budgets sum its rows by it): IDENTITY_MAX at most.
IDENTITY_MAX = 600
_MAX_COUNT = 10**12  # a token or search count past this is not real; the sums stay in BIGINT
# Dollars one call can be recorded as: above any cost of counts capped at USAGE_MAX_TOKENS
# (10^12 tokens at $180 a million x 4.5, or 10^12 searches at $10 a thousand), so the row
# holds what the client was shown, never less.
_MAX_USD = 1e13
_COUNT_COLUMNS = (
    "input_tokens",
    "cached_input_tokens",
    "output_tokens",
    "reasoning_tokens",
    "web_searches",
    "cache_hit",
    "elapsed_ms",
)


def bounded_row(values: dict) -> dict:
    """A ledger row every database takes, whatever the API reported: text without NUL or
    lone surrogates and at most _MAX_TEXT characters; counts whole, in [0, _MAX_COUNT];
    dollars finite in [0, _MAX_USD], or None (unpriced) when they are not a number."""
    import math

    row = dict(values)
    for name in ("day", "tool", "model", "outcome"):
        row[name] = _clean_text(row.get(name))
    row["user_name"] = _clean_text(row.get("user_name"), IDENTITY_MAX)
    for name in _COUNT_COLUMNS:
        row[name] = _bounded_count(row.get(name))
    at = row.get("at")
    row["at"] = float(at) if isinstance(at, (int, float)) and math.isfinite(at) else time.time()
    usd = row.get("usd")
    if isinstance(usd, bool) or not isinstance(usd, (int, float)) or not math.isfinite(usd):
        row["usd"] = None
    else:
        row["usd"] = min(max(float(usd), 0.0), _MAX_USD)
    return row


def _clean_text(value, limit: int = _MAX_TEXT) -> str:
    """Text every database takes: no NUL, no lone surrogate, at most `limit` characters."""
    text = "" if value is None else str(value)
    return text.encode("utf-8", "replace").decode("utf-8").replace("\0", "")[:limit]


def _bounded_count(value) -> int:
    try:
        count = int(value) if isinstance(value, (int, float, str)) else 0
    except (ValueError, OverflowError):  # "x", nan, inf
        count = 0
    return min(max(count, 0), _MAX_COUNT)


class _UsageWrite:
    """A ledger row (values None: none) and the reservation it settles (None: none)."""

    __slots__ = ("day", "only_if_held", "reservation", "seq", "usd", "values")

    def __init__(self, values: dict | None, reservation: str | None, only_if_held=False):
        values = {**bounded_row(values), "writer_schema": STATE_SCHEMA_VERSION} if values else None
        self.values, self.reservation = values, reservation
        # A handed-over call's row: written only by whoever settles its reservation first.
        self.only_if_held = only_if_held
        self.seq = 0  # its place in its writer's order, set by StateWriter.submit()
        self.day = values["day"] if values else ""
        self.usd = (values["usd"] or 0.0) if values else 0.0

    def plainer(self):
        """The row with only its day, tool, outcome and dollars: what is left to write when
        the whole row could not be (the spend is kept; the rest is lost, and said so)."""
        if self.values is None:
            return None
        values = {**self.values, "model": "?", **dict.fromkeys(_COUNT_COLUMNS, 0)}
        plain = _UsageWrite(values, self.reservation, self.only_if_held)
        plain.seq = self.seq
        return plain

    def settle_only(self, q) -> None:
        if self.reservation:
            q("DELETE FROM reservations WHERE id = ?", (self.reservation,))

    def apply(self, q) -> None:
        if self.only_if_held and self.reservation:
            settled = q("DELETE FROM reservations WHERE id = ?", (self.reservation,)).rowcount
            if settled == 0:
                return  # its creator wrote it, or another instance did
        else:
            self.settle_only(q)
        if self.values is None:
            return
        values = self.values
        marks = ", ".join("?" for _ in _USAGE_COLUMNS)
        q(
            f"INSERT INTO usage ({', '.join(_USAGE_COLUMNS)}) VALUES ({marks})",
            [values[name] for name in _USAGE_COLUMNS],
        )
        sums = {
            "usd": self.usd,
            "calls": 1,
            "cache_hits": values["cache_hit"],
            "input_tokens": values["input_tokens"],
            "cached_input_tokens": values["cached_input_tokens"],
            "output_tokens": values["output_tokens"],
            "web_searches": values["web_searches"],
            "unpriced": int(values["usd"] is None),
        }
        names = ", ".join(sums)
        adds = ", ".join(f"{name} = usage_daily.{name} + excluded.{name}" for name in sums)
        q(
            f"INSERT INTO usage_daily (day, tool, model, {names}) VALUES (?, ?, ?, "
            f"{', '.join('?' for _ in sums)}) ON CONFLICT (day, tool, model) DO UPDATE SET {adds}",
            [values["day"], values["tool"], values["model"], *sums.values()],
        )
        q(
            "INSERT INTO usage_by_user (day, user_name, calls, usd) VALUES (?, ?, 1, ?) "
            "ON CONFLICT (day, user_name) DO UPDATE SET calls = usage_by_user.calls + 1, "
            "usd = usage_by_user.usd + excluded.usd",
            (values["day"], values["user_name"], self.usd),
        )
        if self.usd:
            # A running total per day, so a budget check reads a month in 31 rows at most.
            q(
                "INSERT INTO spend_by_day (day, usd) VALUES (?, ?) ON CONFLICT (day) "
                "DO UPDATE SET usd = spend_by_day.usd + excluded.usd",
                (self.day, self.usd),
            )


class _HandoverWrite:
    """A call whose process stops while it runs on upstream (a signed task at a rolling
    restart): its reservation becomes the handover's, which the instance that reads the
    response to its end settles with the ledger row (_UsageWrite.only_if_held). The held
    estimate keeps counting against the budgets meanwhile (usd 0 without a budget)."""

    __slots__ = ("expires_at", "handover", "reservation")

    def __init__(self, reservation: str | None, handover: str, expires_at: float):
        self.reservation, self.handover, self.expires_at = reservation, handover, expires_at

    def plainer(self):
        return None  # nothing plainer to write

    def settle_only(self, q) -> None:
        pass  # a handover that cannot be written leaves the reservation as it was

    def apply(self, q) -> None:
        held = None
        if self.reservation:
            held = q(
                "SELECT usd, user_name FROM reservations WHERE id = ?", (self.reservation,)
            ).fetchone()
            q("DELETE FROM reservations WHERE id = ?", (self.reservation,))
        # The hold stays its user's: it keeps counting against their allowance meanwhile.
        q(
            "INSERT INTO reservations (id, at, expires_at, usd, user_name) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT (id) DO NOTHING",
            (
                self.handover,
                time.time(),
                self.expires_at,
                float(held[0]) if held else 0.0,
                held[1] if held else LOCAL_USER,
            ),
        )


def handover_reservation(response_id: str) -> str:
    """The reservation id a handed-over call's response is settled by."""
    return f"handover:{response_id}"


class _CacheWrite:
    """An answer to keep (text None: the entry to drop, a row of the wrong shape)."""

    __slots__ = ("key", "max_entries", "stored_at", "text", "ttl_s")

    def __init__(self, key: str, text: str | None, ttl_s: int = 0, max_entries: int = 0):
        self.key, self.text, self.ttl_s, self.max_entries = key, text, ttl_s, max_entries
        self.stored_at = time.time()

    def plainer(self):
        return None  # an answer that cannot be kept is just not cached

    def settle_only(self, q) -> None:
        pass

    def apply(self, q) -> None:
        if self.text is None:
            q("DELETE FROM answers WHERE key = ?", (self.key,))
            return
        q(
            "INSERT INTO answers (key, stored_at, body) VALUES (?, ?, ?) ON CONFLICT (key) "
            "DO UPDATE SET stored_at = excluded.stored_at, body = excluded.body",
            (self.key, self.stored_at, self.text),
        )
        q("DELETE FROM answers WHERE stored_at <= ?", (time.time() - self.ttl_s,))
        q(
            "DELETE FROM answers WHERE stored_at < (SELECT stored_at FROM answers "
            "ORDER BY stored_at DESC LIMIT 1 OFFSET ?)",
            (self.max_entries - 1,),
        )


class _OwnerWrite:
    """A user was given a response id (ResponseOwners)."""

    __slots__ = ("at", "response_id", "user")

    def __init__(self, response_id: str, user: str):
        self.response_id, self.user, self.at = (
            _clean_text(response_id),
            _clean_text(user),
            time.time(),
        )

    def plainer(self):
        return None  # nothing smaller to keep: a row refused is set aside

    def settle_only(self, q) -> None:
        """Settles nothing: no reservation waits on it."""

    def apply(self, q) -> None:
        q(
            "INSERT INTO response_owners (response_id, user_name, at) VALUES (?, ?, ?) "
            "ON CONFLICT (response_id, user_name) DO NOTHING",
            (self.response_id, self.user, self.at),
        )


_OWNERS_KEEP_S = 31 * 86400.0  # OpenAI keeps a stored response 30 days


class _Prune:
    """Drops raw ledger rows older than the retention (the per-day totals stay) and
    reservations whose process never settled them."""

    __slots__ = ("first_kept_day",)

    def __init__(self, first_kept_day: str):
        self.first_kept_day = first_kept_day

    def plainer(self):
        return None

    def settle_only(self, q) -> None:
        pass

    def apply(self, q) -> None:
        q("DELETE FROM usage WHERE day < ?", (self.first_kept_day,))
        q("DELETE FROM reservations WHERE expires_at <= ?", (time.time(),))
        q("DELETE FROM writers WHERE at < ?", (time.time() - _WRITER_MARK_KEEP_S,))
        q("DELETE FROM response_owners WHERE at < ?", (time.time() - _OWNERS_KEEP_S,))


# -- The writer: one thread batching every write (StateWriter) ---------------------------------


class StateWriter:
    """Writes ledger rows, settlements and cache entries in one thread, off the answer path;
    the thread ends when it has had nothing to write for a second, so an idle server keeps
    no thread for it.

    submit() never waits. What cannot be written yet stays queued in memory (ledger rows up to
    _MAX_PENDING_ROWS, the oldest dropped past that with a warning) and is written once the
    store is back; the writer rests _BACKOFF_S between tries.

    Each ledger row gets a sequence number, and each transaction records the last one it wrote
    (the writer's mark, in the writers table). A reader of the totals reads the mark with them,
    so it adds exactly the unwritten rows the totals do not hold yet, even in the moment between
    a commit and the rows leaving unwritten(); and a batch whose commit went through but whose
    acknowledgement was lost is not written twice when it is tried again."""

    def __init__(self, store: StateStore):
        self._store = store
        self.id = os.urandom(12).hex()
        self._seq = 0
        self._channel = _Channel(store.backend, store.failed)
        self._cond = threading.Condition()
        self._queue: list = []
        self._writing: list = []  # the batch in its transaction now
        self._thread: threading.Thread | None = None
        self._closing = False
        self._next_prune = 0.0
        self._set_aside_said: set = set()

    def submit(self, write) -> None:
        with self._cond:
            if isinstance(write, _UsageWrite):
                self._seq += 1
                write.seq = self._seq
            self._queue.append(write)
            self._trim()
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="state-writer")
                self._thread.daemon = True
                self._thread.start()
            self._cond.notify_all()

    def open(self) -> None:
        """Opens the connection the writes go through, if it is not open yet. A failure is
        the ledger's writer failing (and warned as such: answers go on without it)."""
        self._channel.run("writing the ledger", lambda q: None)

    def unwritten(self) -> list:
        """What was submitted and is not in the store yet, oldest first."""
        with self._cond:
            return [*self._writing, *self._queue]

    def _trim(self) -> None:
        caches = [w for w in self._queue if isinstance(w, _CacheWrite)]
        for write in caches[: max(0, len(caches) - _MAX_PENDING_CACHE)]:
            self._queue.remove(write)
        owners = [w for w in self._queue if isinstance(w, _OwnerWrite)]
        for write in owners[: max(0, len(owners) - _MAX_PENDING_ROWS)]:
            self._queue.remove(write)  # ResponseOwners keeps the newest in memory too
        rows = [w for w in self._queue if isinstance(w, _UsageWrite)]
        extra = len(rows) - _MAX_PENDING_ROWS
        if extra > 0:
            for write in rows[:extra]:
                self._queue.remove(write)
            self._store.say(
                f"{extra} usage row(s) dropped: more than {_MAX_PENDING_ROWS} waited in memory "
                "for the state to come back"
            )

    def _loop(self) -> None:
        while True:
            with self._cond:
                if not self._queue and not self._closing:
                    self._cond.wait(_WRITER_IDLE_S)
                if not self._queue:
                    if not self._closing:
                        self._thread = None  # idle: the next submit() starts another
                    return
                self._writing, self._queue = self._queue[:_BATCH], self._queue[_BATCH:]
                batch = list(self._writing)
            if time.monotonic() >= self._next_prune:
                batch.append(_Prune(self._store.first_kept_day()))
            try:
                work = _write_batch(self.id, batch, self._store.backend, self._set_aside)
                self._channel.run("writing the ledger", work)
                written = True
            except StateUnavailable:
                written = False
            except Exception as exc:  # noqa: BLE001 - a bug must not stop the writer
                self._store.say(f"writing state failed ({type(exc).__name__}); batch dropped")
                written = True
            with self._cond:
                if written:
                    if isinstance(batch[-1], _Prune):
                        self._next_prune = time.monotonic() + _PRUNE_EVERY_S
                else:
                    self._queue[:0] = self._writing
                    self._trim()
                self._writing = []
                if not written:
                    if self._closing:
                        return  # the try after close() failed too; close() reports the rest
                    # Rest (new rows do not cut it short; close() does), then try again.
                    deadline = time.monotonic() + _BACKOFF_S
                    while not self._closing and time.monotonic() < deadline:
                        self._cond.wait(deadline - time.monotonic())

    def _set_aside(self, write, exc: BaseException, kept: bool) -> None:
        """Says (once per kind of failure) that a write could not be stored as it was."""
        reason = f"{type(write).__name__.strip('_')}: {type(exc).__name__}"
        if reason in self._set_aside_said:
            return
        self._set_aside_said.add(reason)
        what = (
            "a ledger row was written with its spend only (model and counts left out)"
            if kept
            else "a write was set aside"
        )
        self._store.say(f"{what}: the database refused a value ({reason}); the rest go on")

    def close(self, wait_s: float) -> int:
        """Writes what is queued, trying once more at once if the store was resting, for up
        to wait_s; how many ledger rows are left unwritten."""
        self._channel.wake()
        with self._cond:
            self._closing = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join(wait_s)
        self._channel.close()
        with self._cond:
            return sum(1 for w in [*self._writing, *self._queue] if isinstance(w, _UsageWrite))


def _write_batch(writer: str, writes: list, backend, set_aside):
    """The batch's transaction: it skips the rows the writer's mark says are in already, and
    moves the mark past the rows it writes. Each write has a savepoint: one the database
    refuses for a value in it is written plainer (a ledger row with its spend only), or set
    aside, its reservation settled all the same; the batch goes on (a refused value must not
    hold every later row back, nor leave its batch's reservations holding budget)."""

    def work(q) -> None:
        row = q("SELECT seq FROM writers WHERE id = ?", (writer,)).fetchone()
        mark = int(row[0]) if row else 0
        last = mark
        for write in writes:
            seq = getattr(write, "seq", 0)
            if seq and seq <= mark:
                continue
            _apply_or_set_aside(q, write, backend, set_aside)
            last = max(last, seq)
        if last > mark:
            q(
                "INSERT INTO writers (id, seq, at) VALUES (?, ?, ?) ON CONFLICT (id) "
                "DO UPDATE SET seq = excluded.seq, at = excluded.at",
                (writer, last, time.time()),
            )

    return work


def _apply_or_set_aside(q, write, backend, set_aside) -> None:
    plain = write.plainer()
    steps = [write.apply, *([plain.apply] if plain else []), write.settle_only]
    refused = None
    for step in steps:
        q("SAVEPOINT one_write")
        try:
            step(q)
        except Exception as exc:
            if not backend.refused_value(exc):
                raise  # the store's trouble, not the row's: the batch is tried again later
            q("ROLLBACK TO SAVEPOINT one_write")
            q("RELEASE SAVEPOINT one_write")
            refused = exc
            continue
        q("RELEASE SAVEPOINT one_write")
        break
    if refused is not None:
        set_aside(write, refused, kept=step is not steps[-1])


# -- The store: what a failure means, StateStore, daily claims ---------------------------------


# What a failure means, by what failed: only a failed budget check refuses a call (a writer
# that fails retries, a cache read that fails is a miss), and only that one says so.
_FAILURE_OUTCOMES = {
    "checking the budget": "calls that would spend are refused while a budget is set, and ",
    "reading the budget": "calls that would spend are refused while a budget is set, and ",
    "writing the ledger": "answers go on without it, and ",
    "reading the cache": "answers go on without it (no cache hits), and ",
}


class ToolError(Exception):
    """A call that failed, with one line for a person and details for `error.data`."""

    kind = "failed"  # what the usage ledger records as the outcome

    def __init__(self, message: str, detail: str = "", **debug):
        super().__init__(message)
        self.message = message
        self.detail = detail or message
        self.debug = {key: value for key, value in debug.items() if value is not None}


class StateStore:
    """The one interface to the state, whichever database holds it: reads on the answer path
    (short, on their own connection), writes through the StateWriter, reports on a
    connection of their own. Failures are warnings (at most one a minute per reason)."""

    def __init__(self, backend, log: Log, timezone: str = "UTC", retention_days: int = 90):
        self.backend = backend
        self._log = log
        self._timezone = timezone
        self._retention_days = retention_days
        self._warned: dict = {}
        self._warn_lock = threading.Lock()
        self._prepared = False  # see prepare()
        # The cache's reads and the budget's checks each have a connection: a slow cache read
        # (a miss after _CACHE_READ_S) puts no budget check at rest.
        self._reads = _Channel(backend, self.failed) if backend else None
        self._cache_reads = _Channel(backend, self.failed) if backend else None
        self._writer = StateWriter(self) if backend else None

    @property
    def enabled(self) -> bool:
        return self.backend is not None

    @property
    def label(self) -> str:
        return self.backend.label if self.backend else "off"

    @property
    def kind(self) -> str:
        """Which store, without where: for what MCP clients see."""
        if self.backend is None:
            return "the state"
        return "the state database" if self.backend.postgres else "the state file"

    def read(self, what: str, work, cache: bool = False, **options):
        """work(q) in a transaction on the answer path's connection (the cache's own with
        cache=True); raises StateUnavailable."""
        if self.backend is None:
            raise StateUnavailable("state is off")
        return (self._cache_reads if cache else self._reads).run(what, work, **options)

    def write_later(self, write) -> None:
        if self._writer is not None:
            self._writer.submit(write)

    def prepare(self) -> None:
        """Opens the writer's connection (imports the driver, makes or checks the tables) in a
        thread of its own, once, while a call is in flight: else a stop signal during a first
        call left all of that to the second the process has to write the call's row and exit
        (over a second on a busy machine, with the cache off and no budget to open it first).
        Raises ToolError while the store refuses this process (refused()): the call's row could
        not be written, so the call does not run (issue 39)."""
        refused = self.refused()
        if refused is not None:
            raise ToolError(f"this server cannot use {self.kind}: {refused.public}")
        if self._writer is None or self._prepared:
            return
        self._prepared = True

        def open_it() -> None:
            try:
                self._writer.open()
            except StateUnavailable:
                pass  # warned already; the row's write tries again

        threading.Thread(target=open_it, name="state-open", daemon=True).start()

    def unwritten(self) -> list:
        return self._writer.unwritten() if self._writer else []

    def refused(self) -> StateRefused | None:
        """The refusal once the store was found upgraded past this version, or waiting for an
        upgrade this config cannot make (until a transaction goes through): every call is
        refused then, since its row could not be written (issue 39)."""
        return self.backend.refused if self.backend is not None else None

    @property
    def writer_id(self) -> str:
        """The key of this process's writer's mark in the writers table."""
        return self._writer.id if self._writer else ""

    def report(self, what: str, work):
        """work(q) on a connection of its own, opened and closed here: a long report holds up
        no call. Raises StateUnavailable."""
        if self.backend is None:
            raise StateUnavailable("state is off")
        channel = _Channel(self.backend, self.failed)
        try:
            return channel.run(what, work, timeout_s=30.0)
        finally:
            channel.close()

    def first_kept_day(self) -> str:
        import datetime

        today = datetime.date.fromisoformat(today_in(self._timezone))
        return (today - datetime.timedelta(days=self._retention_days)).isoformat()

    def failed(self, what: str, reason: str, refused: bool = False) -> None:
        now = time.monotonic()
        with self._warn_lock:
            if now - self._warned.get(reason, -_WARN_EVERY_S) < _WARN_EVERY_S:
                return
            self._warned[reason] = now
        if refused:  # the reason says what to do; the store's own hint (delete it...) must not
            self._log.say(f"error: {self.label}: {reason}")
            return
        self._log.say(
            f"warning: {self.label}: {what} failed ({reason}); {_FAILURE_OUTCOMES.get(what, '')}"
            f"spend is kept in memory until it is back ({self.backend.hint})"
        )

    def say(self, text: str) -> None:
        self._log.say(f"warning: {self.label}: {text}")

    def close(self, wait_s: float = 5.0) -> None:
        """Writes what is queued (waiting up to wait_s), then closes the connections."""
        if self.backend is None:
            return
        left = self._writer.close(wait_s)
        if left:  # the dollars too: what the ledger will lack, for whoever accounts for it
            lost = sum(w.usd for w in self.unwritten() if isinstance(w, _UsageWrite))
            self.say(
                f"{left} usage row(s) could not be written before exit ({usd(lost)} of spend "
                "that no ledger holds)"
            )
        self._reads.close()
        self._cache_reads.close()


def claim_daily(state: StateStore, name: str, today: str) -> bool:
    """Whether this process is the first to run the check `name` today (and now has): with
    the state off, every process is; with the state unavailable, none is."""
    if not state.enabled:
        return True

    def claim(q) -> bool:
        row = q("SELECT day FROM checks WHERE name = ?", (name,)).fetchone()
        if row is not None and row[0] >= today:
            return False
        q(
            "INSERT INTO checks (name, day) VALUES (?, ?) ON CONFLICT (name) "
            "DO UPDATE SET day = excluded.day",
            (name, today),
        )
        return True

    try:
        return state.read(f"claiming today's {name} check", claim, write=True)
    except StateUnavailable:
        return False


def release_daily(state: StateStore, name: str, today: str) -> None:
    """Gives back today's claim of the check `name` (its look failed): the next process, or
    this one's next try, runs it."""
    if not state.enabled:
        return
    try:
        state.read(
            f"giving back today's {name} check",
            lambda q: q("DELETE FROM checks WHERE name = ? AND day = ?", (name, today)),
            write=True,
        )
    except StateUnavailable:
        pass


# -- The ledger: usage rows, what was spent, --usage's pages -----------------------------------


class UsageRow:
    """One finished call, as the ledger stores it: counts and dollars, never the query."""

    def __init__(
        self, tool: str, model: str, outcome: str, meta: dict | None = None, user: str = LOCAL_USER
    ):
        meta = meta or {}
        usage = meta.get("usage") or {}
        cost = meta.get("cost") or {}
        self.values = {
            "at": time.time(),
            "tool": tool,
            "model": model,
            "input_tokens": usage.get("input_tokens", 0),
            "cached_input_tokens": usage.get("cached_input_tokens", 0),
            "output_tokens": usage.get("output_tokens", 0),
            "reasoning_tokens": usage.get("reasoning_tokens", 0),
            "web_searches": meta.get("web_searches", 0),
            "usd": cost.get("usd", 0.0),
            "cache_hit": int(bool((meta.get("cache") or {}).get("hit"))),
            "elapsed_ms": meta.get("elapsed_ms", 0),
            "outcome": outcome,
            "user_name": user,
            # How many files the call sent, and their bytes: never their names or content.
            "files": len(meta.get("files") or ()),
            "file_bytes": sum(f["bytes"] for f in meta.get("files") or ()),
        }


def usd(amount: float) -> str:
    """$5.03; an amount under a cent keeps two significant digits ($0.0039), not $0.00."""
    return f"${amount:.2f}" if amount >= 0.01 or amount == 0 else f"${amount:.2g}"


class Ledger:
    """The usage rows, budgets' reservations, and the per-day sums --usage and budgets read."""

    def __init__(self, state: StateStore, timezone: str):
        self._state = state
        self._timezone = timezone

    def record(self, row: UsageRow, reservation: str | None = None) -> None:
        """Queues the row (and settles the call's reservation with it); never waits."""
        values = {**row.values, "day": today_in(self._timezone)}
        self._state.write_later(_UsageWrite(values, reservation))

    def release(self, reservation: str) -> None:
        """Gives a reservation back unused (its call made no request of its own)."""
        self._state.write_later(_UsageWrite(None, reservation))

    def hand_over(self, reservation: str | None, response_id: str, expires_at: float) -> None:
        """Leaves a running call's row to the instance that reads its response to the end."""
        handover = handover_reservation(response_id)
        self._state.write_later(_HandoverWrite(reservation, handover, expires_at))

    def settle_handover(self, row: UsageRow, response_id: str) -> None:
        """The row of a response read to its end here: written only if its creator handed it
        over (and no other instance has written it first)."""
        values = {**row.values, "day": today_in(self._timezone)}
        reservation = handover_reservation(response_id)
        self._state.write_later(_UsageWrite(values, reservation, only_if_held=True))

    def spent_since(self, first_day: str) -> float:
        """Dollars spent from first_day (YYYY-MM-DD, in policy.timezone) on, rows not yet
        written included. Raises StateUnavailable."""
        unwritten = self._state.unwritten()
        writer = self._state.writer_id
        sums = self._state.read(
            "reading the budget", lambda q: _spent(q, [(first_day, None)], writer)
        )
        return sums[0] + _unwritten_spend(unwritten, first_day, sums[-1])

    def spent_in(self, periods: list) -> list:
        """Dollars spent in each (first day, user) (user None: the team's), rows not yet
        written included: what the cost question says of the budgets. Raises
        StateUnavailable."""
        if not periods:
            return []
        unwritten = self._state.unwritten()
        writer = self._state.writer_id
        *sums, mark = self._state.read("reading the budget", lambda q: _spent(q, periods, writer))
        return [
            total + _unwritten_spend(unwritten, day, mark, who)
            for total, (day, who) in zip(sums, periods, strict=True)
        ]

    def recent(self, tool: str, model: str | None) -> list:
        """[(usd, input tokens, model)] of the tool's recent priced calls (of `model` when it
        has any), as reserve() reads them: what the cost question's quote starts from (the
        model says whether they are of `model`). Raises StateUnavailable."""
        return self._state.read("reading recent calls", lambda q: _recent_calls(q, tool, model))

    def reserve(
        self,
        tool: str,
        limits: list,
        floor: float,
        ttl_s: float,
        user: str = LOCAL_USER,
        estimator=None,
        held: bool = True,
    ) -> tuple:
        """Reserves a call's expected cost if every (first day, limit, user) has room for it
        (user None: the team's spend; else that user's), all in one transaction that takes
        turns with every other process's: (reservation id or None, the estimate, [(spent,
        reserved by calls in flight)] per limit). The tool's typical cost is the mean of its
        last priced calls (of `estimator.model`, when it has any: another model's are priced at
        other rates), never under `floor`; `estimator(typical usd, the least input tokens they
        carried)` makes the call's estimate of it (Pricing.estimate), else it is the estimate.
        `held` False: the check alone, nothing reserved (the id is then '' when there is room).
        Raises StateUnavailable."""
        unwritten = self._state.unwritten()
        writer = self._state.writer_id
        settling = {w.reservation for w in unwritten if isinstance(w, _UsageWrite)}
        bounds = [(*limit, None)[:3] for limit in limits]  # (first day, limit): the team's

        def work(q):
            now = time.time()
            recent = _recent_calls(q, tool, getattr(estimator, "model", None))
            mean = sum(float(row[0]) for row in recent) / len(recent) if recent else 0.0
            # The least input they carried, for the long-context line: a mean would put every
            # call after one with a large file over it.
            tokens = min((int(row[1] or 0) for row in recent), default=0)
            estimate = max(floor, mean)
            if estimator is not None:
                estimate = estimator(estimate, tokens)
            live = q(
                "SELECT id, usd, user_name FROM reservations WHERE expires_at > ?", (now,)
            ).fetchall()
            live = [(float(usd), who) for rid, usd, who in live if rid not in settling]
            *totals, mark = _spent(q, [(day, who) for day, _, who in bounds], writer)
            sums = [
                (
                    total + _unwritten_spend(unwritten, day, mark, who),
                    sum(usd for usd, holder in live if who is None or holder == who),
                )
                for total, (day, _limit, who) in zip(totals, bounds, strict=True)
            ]
            pairs = zip(sums, bounds, strict=True)
            room = all(s + r + estimate <= limit + 1e-9 for (s, r), (_, limit, _) in pairs)
            if not (room and held):  # no room; or room, only checked ('': nothing held)
                return (None if not room else ""), estimate, sums
            reservation = os.urandom(12).hex()
            q(
                "INSERT INTO reservations (id, at, expires_at, usd, user_name) "
                "VALUES (?, ?, ?, ?, ?)",
                (reservation, now, now + ttl_s, estimate, user),
            )
            return reservation, estimate, sums

        # wait_s: this process's other calls checking their budget first (each a few ms,
        # unless the store is slow: then each gives up after _BUSY_TIMEOUT_S). connect_wait:
        # an upgrade of a large store, made as the connection opens, goes on aside while the
        # call is refused (up to _MIGRATION_S, issue 39).
        return self._state.read(
            "checking the budget",
            work,
            write=True,
            turns=_LOCK_BUDGET,
            wait_s=_BUDGET_WAIT_S,
            connect_wait=_BUDGET_WAIT_S,
        )

    def report(self, since: str | None) -> dict:
        """Spend by day, model and tool, with totals, from the per-day sums: what --usage
        prints. Raises StateUnavailable."""
        where, params = ("WHERE day >= ?", (since,)) if since else ("", ())
        sums = ", ".join(f"COALESCE(SUM({name}), 0) AS {name}" for name in _DAILY_SUMS)

        def read(q):
            report = {"since": since, "timezone": self._timezone}
            for name, column in (("by_day", "day"), ("by_model", "model"), ("by_tool", "tool")):
                cursor = q(
                    f"SELECT {column}, {sums} FROM usage_daily {where} GROUP BY {column} "
                    f"ORDER BY {column}",
                    params,
                )
                report[name] = [_usage_row(cursor, row) for row in cursor.fetchall()]
            cursor = q(f"SELECT {sums} FROM usage_daily {where}", params)
            report["total"] = _usage_row(cursor, cursor.fetchone())
            rows = q(
                f"SELECT user_name, SUM(calls), COALESCE(SUM(usd), 0) FROM usage_by_user {where} "
                "GROUP BY user_name ORDER BY user_name",
                params,
            ).fetchall()
            report["by_user"] = [
                {
                    "user": who.key or who.label,  # '' as "(before users)": Identity.of_row
                    "kind": who.kind,  # user, oauth, shared, local or none
                    "calls": int(calls),
                    "usd": round(float(d), 6),
                }
                for who, calls, d in ((Identity.parse(name), n, usd) for name, n, usd in rows)
            ]
            return report

        return self._state.report("reading usage", read)

    def user_report(self, since: str, user: str) -> dict:
        """report() for one user's spend only (what a non-admin's GET /usage shows): totals
        and calls from the per-user sums, by model and by tool from that user's raw rows
        (kept state.retention_days). Raises StateUnavailable."""
        sums = (
            "COUNT(*) AS calls, COALESCE(SUM(usd), 0) AS usd, SUM(cache_hit) AS cache_hits, "
            "SUM(input_tokens) AS input_tokens, SUM(cached_input_tokens) AS "
            "cached_input_tokens, SUM(output_tokens) AS output_tokens, SUM(web_searches) AS "
            "web_searches, SUM(CASE WHEN usd IS NULL THEN 1 ELSE 0 END) AS unpriced"
        )
        mine = "WHERE day >= ? AND user_name = ?"

        def read(q):
            report = {"since": since, "timezone": self._timezone}
            for name, column in (("by_model", "model"), ("by_tool", "tool")):
                cursor = q(
                    f"SELECT {column}, {sums} FROM usage {mine} GROUP BY {column} "
                    f"ORDER BY {column}",
                    (since, user),
                )
                report[name] = [_usage_row(cursor, row) for row in cursor.fetchall()]
            cursor = q(f"SELECT {sums} FROM usage {mine}", (since, user))
            total = _usage_row(cursor, cursor.fetchone())
            calls, usd = q(
                f"SELECT COALESCE(SUM(calls), 0), COALESCE(SUM(usd), 0) FROM usage_by_user {mine}",
                (since, user),
            ).fetchone()
            total.update(calls=int(calls), usd=round(float(usd), 6))
            report["total"] = total
            report["by_user"] = [{"user": user, "calls": total["calls"], "usd": total["usd"]}]
            return report

        return self._state.report("reading usage", read)


def _recent_calls(q, tool: str, model: str | None) -> list:
    """[(usd, input tokens, model)] of the tool's last _RECENT_CALLS priced calls: those of
    `model` (its dated snapshots too) among the last _RECENT_SCAN when there are any, else any
    model's (a gateway's response names the model its own way)."""
    rows = q(
        "SELECT usd, input_tokens, model FROM usage WHERE tool = ? AND outcome = 'ok' "
        "AND usd IS NOT NULL ORDER BY id DESC LIMIT ?",
        (tool, _RECENT_SCAN),
    ).fetchall()
    same = [row for row in rows if model is not None and _undated(str(row[2])) == _undated(model)]
    return [tuple(row) for row in (same or rows)[:_RECENT_CALLS]]


def _spent(q, since: list, writer: str) -> list:
    """The spend from each (first day, user) on (user None: everyone's), then this process's
    writer's mark, in one statement: one snapshot of the store, even where each statement
    sees the latest commit."""
    parts, params = [], []
    for first_day, user in since:
        if user is None:
            parts.append("(SELECT SUM(usd) FROM spend_by_day WHERE day >= ?)")
            params.append(first_day)
        else:
            parts.append("(SELECT SUM(usd) FROM usage_by_user WHERE day >= ? AND user_name = ?)")
            params += [first_day, user]
    row = q(
        f"SELECT {', '.join(parts)}, (SELECT seq FROM writers WHERE id = ?)", (*params, writer)
    ).fetchone()
    return [float(value or 0.0) for value in row[:-1]] + [int(row[-1] or 0)]


def _unwritten_spend(unwritten: list, first_day: str, mark: int, user=None) -> float:
    """What the rows not in the totals yet add: those past the writer's mark (the user's
    only, when one is named)."""
    return sum(
        w.usd
        for w in unwritten
        if isinstance(w, _UsageWrite)
        and w.seq > mark
        and w.day >= first_day
        and (user is None or w.values["user_name"] == user)
    )


def _usage_row_empty() -> dict:
    names = ("calls", "usd", "cache_hits", "input_tokens", "cached_input_tokens")
    names += ("output_tokens", "web_searches", "unpriced")
    return {name: 0 for name in names}


def spend_summary(ledger: Ledger, timezone: str, in_flight: int, user=None) -> dict:
    """What GET /usage shows: today's and this month's spend by model, tool and user (`user`:
    that user's spend only, every figure of it; None: the team's), the cache hit rate, and
    the calls in flight (the caller counts them for the same people)."""
    today = today_in(timezone)
    summary: dict = {"timezone": timezone, "today": today, "in_flight": in_flight}
    for period, since in (("day", today), ("month", today[:8] + "01")):
        try:
            report = ledger.report(since) if user is None else ledger.user_report(since, user)
        except StateUnavailable:  # zeros below, but not passed off as "nothing spent"
            summary["warning"] = "the usage ledger could not be read; see the server's stderr"
            report = {"by_model": [], "by_tool": [], "by_user": [], "total": None}
        total = report["total"] or _usage_row_empty()
        by_user = report["by_user"]
        calls = total["calls"]
        summary[period] = {
            "since": since,
            "usd": total["usd"],
            "calls": calls,
            "cache_hit_rate": round(total["cache_hits"] / calls, 4) if calls else 0.0,
            "by_model": [_spend(row, "model") for row in report["by_model"]],
            "by_tool": [_spend(row, "tool") for row in report["by_tool"]],
            "by_user": by_user,
        }
    return summary


def _spend(row: dict, key: str) -> dict:
    return {
        key: row[key],
        "usd": row["usd"],
        "calls": row["calls"],
        "cache_hits": row["cache_hits"],
    }


def spend_page(summary: dict) -> bytes:
    """GET /usage as a small HTML page for a browser: no scripts, no external assets."""
    import html

    def table(title: str, rows: list, key: str) -> str:
        hits = key != "user"  # by user: calls and dollars only
        cells = "".join(
            f"<tr><td>{html.escape(Identity.of_row(row).label if key == 'user' else str(row[key]))}"
            f"</td><td>{row['calls']}</td>"
            + (f"<td>{row['cache_hits']}</td>" if hits else "")
            + f"<td>${row['usd']:.4f}</td></tr>"
            for row in rows
        )
        return (
            f"<table><caption>{title}</caption><tr><th>{key}</th><th>calls</th>"
            + ("<th>cache hits</th>" if hits else "")
            + f"<th>USD</th></tr>{cells}</table>"
        )

    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>{SERVER_NAME}: spend</title>",
        "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;"
        "margin:1em 0}td,th{border:1px solid #999;padding:.2em .6em;text-align:right}"
        "caption{text-align:left;font-weight:bold}</style></head><body>",
        f"<h1>Spend</h1><p>{html.escape(summary['today'])} ({html.escape(summary['timezone'])})"
        f"; calls in flight: <span id='in-flight'>{summary['in_flight']}</span></p>",
    ]
    if summary.get("warning"):
        parts.append(f"<p id='warning'><strong>{html.escape(summary['warning'])}</strong></p>")
    for period, title in (("day", "Today"), ("month", "This month")):
        data = summary[period]
        parts.append(
            f"<h2>{title}: <span id='{period}-usd'>${data['usd']:.4f}</span></h2>"
            f"<p>{data['calls']} calls, cache hit rate {data['cache_hit_rate'] * 100:.1f}%</p>"
        )
        parts.append(table(f"{title} by model", data["by_model"], "model"))
        parts.append(table(f"{title} by tool", data["by_tool"], "tool"))
        parts.append(table(f"{title} by user", data["by_user"], "user"))
    parts.append("</body></html>")
    return "".join(parts).encode("utf-8")


def _usage_row(cursor, row) -> dict:
    names = [getattr(column, "name", None) or column[0] for column in cursor.description]
    entry = {name: (value or 0) for name, value in zip(names, row, strict=True)}
    for name in _DAILY_SUMS:  # PostgreSQL sums integers as Decimal
        entry[name] = round(float(entry[name]), 6) if name == "usd" else int(entry[name])
    return entry


# -- Identities: one person, one identity; users and response owners ---------------------------
# Three namespaces that never meet: named users (their name: letters, digits and . _ @ + -,
# never ':'), OAuth subjects (oauth:<issuer>#<sub>, per issuer) and the two reserved
# identities, `shared` (MCP_HTTP_TOKEN) and `local` (stdio; HTTP with no token asked). The
# ledger, budgets, cache keys, response owners, tasks and handoffs all key by this string;
# Identity is the one place that makes, parses and shows it (issue 40).


def token_sha256(token: str) -> str:
    """What the state keeps of a named user's token."""
    import hashlib

    return hashlib.sha256(token.encode("utf-8", "replace")).hexdigest()


USER_NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._@+-]{0,63}"
OAUTH_SUBJECT_MAX = 255  # characters of a token's user claim; a longer one is refused


class Identity:
    """One identity: `kind` (user, oauth, shared, local, or none: '' for rows from before
    users existed), `issuer` (an OAuth subject's, without a trailing '/'; '' when an upgrade
    filed it without one, issue 39), `subject` (a named user's name, a token's sub) and `key`,
    the string the state, signed ids and cache keys hold (never changes form). Equal by key."""

    __slots__ = ("issuer", "key", "kind", "subject")
    OAUTH_KEYS = OAUTH_PREFIX  # what every OAuth subject's key starts with (for SQL's substr)

    def __init__(self, kind: str, issuer: str, subject: str, key: str) -> None:
        self.kind, self.issuer, self.subject, self.key = kind, issuer, subject, key

    @classmethod
    def parse(cls, key: str) -> Identity:
        """The identity a stored string names (the one place one is parsed)."""
        if key.startswith(OAUTH_PREFIX):  # an issuer has no '#'; a subject can have
            issuer, _, subject = key[len(OAUTH_PREFIX) :].partition("#")
            return cls("oauth", issuer, subject, key)
        if key in (SHARED_USER, LOCAL_USER):
            return cls(key, "", "", key)
        return cls("user", "", key, key) if key else cls("none", "", "", "")

    @classmethod
    def named(cls, name: str) -> Identity:
        """A named user (--user add) by name."""
        identity = cls.parse(name)
        if identity.kind != "user":
            raise ValueError(f"{name[:80]!r} is not a named user's name")
        return identity

    @classmethod
    def oauth(cls, issuer: str, subject: str) -> Identity:
        """An OAuth subject: its issuer (without a trailing '/') and its subject."""
        issuer = issuer.rstrip("/")
        return cls("oauth", issuer, subject, f"{OAUTH_PREFIX}{issuer}#{subject}")

    @classmethod
    def of_row(cls, row: dict) -> Identity:
        """A by_user row's identity (its `user` shows '' as "(before users)")."""
        return cls.parse("" if row.get("kind") == "none" else row["user"])

    @classmethod
    def admin_entry(cls, entry: str) -> Identity:
        """A server.auth.admins entry as the identity it names; ValueError saying why not.
        user:NAME (or NAME alone, as before schema 7) is a named user; oauth:ISSUER#SUB a
        subject of that issuer; `shared` whoever holds MCP_HTTP_TOKEN."""
        entry = entry.strip()
        if entry.startswith(OAUTH_PREFIX):
            issuer, sep, subject = entry[len(OAUTH_PREFIX) :].partition("#")
            if not sep or not subject or not re.match(r"https?://[^/\s#]+", issuer):
                raise ValueError(
                    f"{entry[:80]!r} is not oauth:ISSUER#SUBJECT (e.g. "
                    "oauth:https://login.example.com/realms/team#3f2a...): the issuer as "
                    "server.auth.issuer writes it, '#', the token's sub (or server.auth.user_claim)"
                )
            return cls.oauth(issuer, subject)
        if entry == SHARED_USER:
            return cls.SHARED
        name = entry[len(USER_PREFIX) :] if entry.startswith(USER_PREFIX) else entry
        if not re.fullmatch(USER_NAME_PATTERN, name) or name in (LOCAL_USER, SHARED_USER):
            raise ValueError(
                f"{entry[:80]!r} is not user:NAME (a --user add name), oauth:ISSUER#SUBJECT or "
                "shared"
            )
        return cls.named(name)

    @staticmethod
    def names_another_kind(text: str) -> bool:
        """Whether `text`, given where a named user's name is asked for, names an identity of
        another kind: an OAuth subject's oauth:ISSUER#SUB, user:NAME (a named user never has
        ':' in their name), or shared in any case."""
        return ":" in text or text.lower() == SHARED_USER

    @property
    def label(self) -> str:
        """How --usage and /usage show it, its kind first: user:alice,
        oauth:https://login.example.com#alice, shared (MCP_HTTP_TOKEN), local, (before users);
        a subject filed without its issuer oauth:(issuer unknown)#carol."""
        if self.kind == "user":
            return USER_PREFIX + self.subject
        if self.kind == "oauth" and not self.issuer:
            return f"{OAUTH_PREFIX}(issuer unknown)#{self.subject}"
        labels = {"shared": "shared (MCP_HTTP_TOKEN)", "none": "(before users)"}
        return labels.get(self.kind, self.key)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Identity) and other.key == self.key

    def __hash__(self) -> int:
        return hash(self.key)

    def __repr__(self) -> str:
        return f"Identity.parse({self.key!r})"


Identity.SHARED = Identity.parse(SHARED_USER)
# What an upgrade run without server.auth.issuer made of every subject's key (issue 39): the
# prefix of the keys SQL looks for (misfiled_subjects).
Identity.UNKEYED = Identity.oauth("", "").key


def user_name_problem(name: str) -> str | None:
    """Why `name` cannot be a user's name, or None."""
    if not re.fullmatch(USER_NAME_PATTERN, name):
        return (
            f"{name[:80]!r} is not a user name: 1-64 letters, digits and . _ @ + -, starting "
            "with a letter or digit"
        )
    if name.lower() in (LOCAL_USER, SHARED_USER):
        return f"{name!r} is reserved (the {name.lower()} identity); pick another name"
    return None


def misfiled_subjects(run) -> list:
    """(table, identity, sub) for each OAuth subject a version 7 store holds outside its
    issuer's namespace (issue 39): oauth:#<sub>, filed so by an upgrade run without
    server.auth.issuer (before that was refused), and a bare <sub>, written by a host of an
    older release that kept serving after another host upgraded the store (since 7 no name but
    a named user's, `local` and `shared` is bare). run(sql) runs a statement."""
    found = []
    for table in _IDENTITY_COLUMNS:
        rows = run(
            f"SELECT DISTINCT user_name FROM {table} WHERE substr(user_name, 1, "
            f"{len(Identity.UNKEYED)}) = '{Identity.UNKEYED}'"
        ).fetchall()
        found += [(table, row[0], Identity.parse(row[0]).subject) for row in rows]
    return found + [(table, name, name) for table, name in _bare_subjects(run)]


def refile_subjects(backend, run) -> int:
    """Files each misfiled subject under the issuer server.auth.issuer names (a store before 7
    can have had only that one: it was the server's one issuer); how many identities."""
    issuer = (backend.oauth_issuer or "").rstrip("/")
    found = misfiled_subjects(run) if issuer else []
    if found:  # oauth:#<sub> first: a bare <sub> of the same subject then folds into it
        _refile_prefix(backend, run, Identity.UNKEYED, Identity.oauth(issuer, "").key)
        _refile_bare(backend, run, issuer)
    return len({name for _, name, _ in found})


def _bare_rows(run, name: str) -> bool:
    """Whether any row holds `name` as its identity."""
    return any(
        run(f"SELECT 1 FROM {table} WHERE user_name = ? LIMIT 1", (name,)).fetchone()
        for table in _IDENTITY_COLUMNS
    )


def filed_issuers(run) -> dict:
    """{issuer: how many OAuth subjects the store files under it}, oauth:#<sub> left out (see
    misfiled_subjects); run(sql) runs a statement."""
    found: dict = {}
    for table in _IDENTITY_COLUMNS:
        rows = run(
            f"SELECT DISTINCT user_name FROM {table} WHERE substr(user_name, 1, "
            f"{len(Identity.OAUTH_KEYS)}) = '{Identity.OAUTH_KEYS}'"
        ).fetchall()
        for (identity,) in rows:
            issuer = Identity.parse(identity).issuer
            if issuer:
                found.setdefault(issuer, set()).add(identity)
    return {issuer: len(identities) for issuer, identities in found.items()}


def refile_issuer(backend, run, old: str) -> int:
    """Files every subject of issuer `old` under the one server.auth.issuer names, as the same
    `sub` (--upgrade-state --from-issuer, issue 39): undoes an upgrade run with a mistyped
    issuer, which filed the subjects under it for good. How many identities moved."""
    issuer = (backend.oauth_issuer or "").rstrip("/")
    moved = filed_issuers(run).get(old.rstrip("/"), 0)
    if moved:
        old_keys, new_keys = Identity.oauth(old, "").key, Identity.oauth(issuer, "").key
        _refile_prefix(backend, run, old_keys, new_keys)
    return moved


class UserDirectory:
    """Named users (--user add/list/revoke) in the state, so every host sharing it knows them.

    Servers keep the users' token hashes for _USERS_CACHE_S, so a revoked token is refused
    within seconds; each user's own allowance (--daily-usd, --monthly-usd) comes with them.
    Once the state has had a user, active or revoked, it has had one for good (issue 31): a
    revoke never turns a server back into one that asks for no token."""

    def __init__(self, state: StateStore):
        self._state = state
        self._lock = threading.Lock()
        self._active: dict | None = None  # token hash -> (name, daily_usd, monthly_usd)
        self._hashes: set = set()  # every named token's hash seen, revoked ones too
        self._read_at = -_USERS_CACHE_S
        self._had = None  # whether the state has had any user (None: never read)
        self._on_read = None  # see after_each_read

    def after_each_read(self, hook) -> None:
        """Calls hook(number of active users) after each read of the users (HttpApp: says on
        stderr the moment none is left)."""
        self._on_read = hook

    def _snapshot(self) -> dict:
        """The active users by token hash, read again once _USERS_CACHE_S old; raises
        StateUnavailable (the state is off: no users)."""
        if not self._state.enabled:
            return {}
        with self._lock:
            if self._active is not None and time.monotonic() - self._read_at < _USERS_CACHE_S:
                return self._active
            rows = self._state.read(
                "reading users",
                lambda q: q(
                    "SELECT token_sha256, name, daily_usd, monthly_usd, revoked_at FROM users"
                ).fetchall(),
            )
            self._active = {row[0]: (row[1], row[2], row[3]) for row in rows if row[4] is None}
            if len(self._hashes) < _USERS_HASHES_KEPT:
                self._hashes.update(row[0] for row in rows)
            self._read_at = time.monotonic()
            self._had = bool(self._had) or bool(rows)
            active, hook = self._active, self._on_read
        if hook is not None:
            hook(len(active))
        return active

    def exist(self) -> bool:
        """Whether the state has had any user, active or revoked (a revoke never opens a
        server); when the state cannot be read, what the last read said. A state never read
        yet counts as having users (fail closed: its users may be there, in a team's database
        or a local file that cannot be read now)."""
        if not self._state.enabled:
            return False
        try:
            self._snapshot()
        except StateUnavailable:
            pass
        return True if self._had is None else self._had

    def had(self) -> bool:
        """Whether a read of the state has ever found a user (not a guess: see exist())."""
        return bool(self._had)

    def ever_read(self) -> bool:
        """Whether this process has read the users once: then every named token there was
        is known by its hash (named_shaped), those from before the prefix too."""
        return self._had is not None

    def active(self) -> int | None:
        """How many users have a valid token; None when the state cannot be read."""
        try:
            return len(self._snapshot())
        except StateUnavailable:
            return None

    def named_shaped(self, token: str) -> bool:
        """Whether a token is one of ours (a named token's prefix, or the hash of a named
        token seen, revoked ones too): never sent to an OAuth issuer's introspection."""
        return token.startswith(NAMED_TOKEN_PREFIX) or token_sha256(token) in self._hashes

    def user_of(self, token: str) -> str | None:
        """The active user whose token this is, or None; raises StateUnavailable."""
        found = self._snapshot().get(token_sha256(token))
        return found[0] if found else None

    def allowance(self, name: str) -> tuple:
        """(daily_usd, monthly_usd) set for this user (None: the per-user default); raises
        StateUnavailable."""
        for user, daily, monthly in self._snapshot().values():
            if user == name:
                return daily, monthly
        return None, None

    # -- the --user commands: on a connection of their own ----------------------------------------

    def add(self, name: str, token: str, daily: float | None, monthly: float | None) -> tuple:
        """Adds a user, or gives a revoked one a new token keeping its allowances unless new
        ones are given (issue 39); ((daily, monthly) it now has, whether it was there);
        ValueError if it is active."""

        def work(q):
            row = q(
                "SELECT revoked_at, daily_usd, monthly_usd FROM users WHERE name = ?", (name,)
            ).fetchone()
            if row is not None and row[0] is None:
                raise ValueError(f"user {name!r} exists; --user rotate {name} gives it a new token")
            # Names that differ only in case are two people who read as one (admins, --usage).
            for (other,) in q("SELECT name FROM users").fetchall():
                if other != name and other.lower() == name.lower():
                    raise ValueError(
                        f"user {other!r} exists, and {name!r} differs from it only in case; "
                        "pick another name"
                    )
            if row is None and _bare_rows(q, name):
                raise ValueError(
                    f"the state holds spend under the bare name {name!r}, which no user has had: "
                    "an OAuth subject's, written by a host of an older release after the upgrade "
                    "(issue 39), which would become this user's; run "
                    f"`{SERVER_NAME} --config FILE --upgrade-state` with the --http server's "
                    "config first"
                )
            if row is not None:  # revoked: a new token, the same allowances and history
                kept = (row[1] if daily is None else daily, row[2] if monthly is None else monthly)
                q(
                    "UPDATE users SET token_sha256 = ?, revoked_at = NULL, daily_usd = ?, "
                    "monthly_usd = ? WHERE name = ?",
                    (token_sha256(token), *kept, name),
                )
                return kept, True
            q(
                "INSERT INTO users (name, token_sha256, created_at, revoked_at, daily_usd, "
                "monthly_usd) VALUES (?, ?, ?, NULL, ?, ?)",
                (name, token_sha256(token), time.time(), daily, monthly),
            )
            return (daily, monthly), False

        return self._state.report("adding a user", work)

    def rotate(self, name: str, token: str) -> tuple:
        """Gives an active user a new token in place of its old one, which is refused from
        now on (by running servers within _USERS_CACHE_S); its allowances and usage stay.
        (daily, monthly); ValueError if there is no such active user."""

        def work(q):
            row = self._row(q, name)
            if row[0] is not None:
                raise ValueError(f"user {name!r} is revoked; --user add {name} gives it a token")
            q("UPDATE users SET token_sha256 = ? WHERE name = ?", (token_sha256(token), name))
            return row[1], row[2]

        return self._state.report("rotating a user's token", work)

    def limit(self, name: str, daily, monthly) -> tuple:
        """Sets a user's own allowances: a number, None to leave it, ALLOWANCE_DEFAULT for the
        per-user default. (daily, monthly) it now has; ValueError if there is no such user."""

        def work(q):
            row = self._row(q, name)
            kept = tuple(
                old if new is None else (None if new == ALLOWANCE_DEFAULT else new)
                for old, new in ((row[1], daily), (row[2], monthly))
            )
            q("UPDATE users SET daily_usd = ?, monthly_usd = ? WHERE name = ?", (*kept, name))
            return kept

        return self._state.report("setting a user's allowance", work)

    @staticmethod
    def _row(q, name: str) -> tuple:
        row = q(
            "SELECT revoked_at, daily_usd, monthly_usd FROM users WHERE name = ?", (name,)
        ).fetchone()
        if row is None:
            raise ValueError(f"no user named {name!r} (see --user list)")
        return row

    def revoke(self, name: str) -> None:
        """Revokes a user's token; ValueError if there is no such active user."""

        def work(q):
            row = q("SELECT revoked_at FROM users WHERE name = ?", (name,)).fetchone()
            if row is None:
                raise ValueError(f"no user named {name!r} (see --user list)")
            if row[0] is not None:
                raise ValueError(f"user {name!r} is revoked already")
            q("UPDATE users SET revoked_at = ? WHERE name = ?", (time.time(), name))

        self._state.report("revoking a user", work)

    def listing(self) -> list[dict]:
        """Every user, active or revoked, without any token or hash."""

        def work(q):
            return q(
                "SELECT name, created_at, revoked_at, daily_usd, monthly_usd FROM users "
                "ORDER BY name"
            ).fetchall()

        names = ("name", "created_at", "revoked_at", "daily_usd", "monthly_usd")
        return [dict(zip(names, row, strict=True)) for row in self._state.report("users", work)]


class ResponseOwners:
    """Who was given each response id: its creator, and whoever got it from the cache or an
    identical call. A follow-up (previous_response_id) must name one of its user's own while
    several people use the server. This process's recent ones are in memory; all of them in
    the state, so any instance can tell."""

    _MEMORY = 10_000

    def __init__(self, state: StateStore):
        self._state = state
        self._recent: dict = {}  # (response id, user) -> None, oldest first
        self._lock = threading.Lock()

    def add(self, response_id: str | None, user: str) -> None:
        if not response_id:
            return
        with self._lock:
            self._recent[(response_id, user)] = None
            if len(self._recent) > self._MEMORY:
                del self._recent[next(iter(self._recent))]
        self._state.write_later(_OwnerWrite(response_id, user))

    def owned(self, response_id: str, user: str) -> bool:
        """Whether `user` was given this response id; raises StateUnavailable."""
        with self._lock:
            if (response_id, user) in self._recent:
                return True
        if not self._state.enabled:
            return False
        found = self._state.read(
            "checking a response's owner",
            lambda q: q(
                "SELECT 1 FROM response_owners WHERE response_id = ? AND user_name = ?",
                (response_id, user),
            ).fetchone(),
        )
        return found is not None


# -- The answer cache: AnswerCache and its keys ------------------------------------------------


class AnswerCache:
    """Complete answers by key, for cache.ttl_s seconds, at most cache.max_entries of them.
    A process sees its own entries at once, before the writer has stored them."""

    def __init__(self, state: StateStore, ttl_s: int, max_entries: int):
        self._state = state
        self.ttl_s = ttl_s
        self.max_entries = max_entries

    @property
    def enabled(self) -> bool:
        return self._state.enabled and self.ttl_s > 0

    def get(self, key: str) -> tuple[dict, float] | None:
        """(stored body, age in seconds) of a live entry of the right shape, or None: a slow
        or failing store, like a damaged row, is a miss."""
        now = time.time()
        unwritten = [w for w in self._state.unwritten() if isinstance(w, _CacheWrite)]
        for write in reversed(unwritten):
            if write.key == key:
                if write.text is None or write.stored_at <= now - self.ttl_s:
                    return None
                if self._pushed_out(unwritten, key, write.stored_at):
                    return None
                return json.loads(write.text), max(0.0, now - write.stored_at)

        def read(q):
            found = q(
                "SELECT stored_at, body FROM answers WHERE key = ? AND stored_at > ?",
                (key, now - self.ttl_s),
            ).fetchone()
            if found is None:
                return None
            # The newer entries in the store, less those still in `unwritten` too (committed
            # since it was taken): _pushed_out() counts those, and each must count once.
            pending = sorted(
                {w.key for w in unwritten if w.text and w.key != key and w.stored_at > found[0]}
            )
            marks = ", ".join("?" for _ in pending) or "NULL"
            newer = q(
                f"SELECT COUNT(*) - COUNT(CASE WHEN key IN ({marks}) THEN 1 END) FROM answers "
                "WHERE stored_at > ?",
                (*pending, found[0]),
            )
            return found[0], found[1], newer.fetchone()[0]

        try:
            found = self._state.read(
                "reading the cache",
                read,
                cache=True,
                timeout_s=_CACHE_READ_S,
                wait_s=_CACHE_READ_S,
                connect_wait=_CACHE_READ_S,
            )
        except StateUnavailable:
            return None
        if found is None:
            return None
        body = cached_body(found[1])
        if body is None:
            self._state.write_later(_CacheWrite(key, None))
            return None
        if self._pushed_out(unwritten, key, float(found[0]), found[2]):
            return None
        return body, max(0.0, now - float(found[0]))

    def _pushed_out(self, unwritten: list, key: str, stored_at: float, stored: int = 0) -> bool:
        """Whether the entries stored after this one (`stored` of them in the store, the rest
        not written yet) evict it, as they will once written."""
        newer = {w.key for w in unwritten if w.text and w.key != key and w.stored_at > stored_at}
        return stored + len(newer) >= self.max_entries

    def put(self, key: str, answer: dict, response_id: str | None) -> None:
        body = {"format": ANSWER_FORMAT, "answer": answer, "response_id": response_id}
        text = json.dumps(body, ensure_ascii=False)
        if not text.isascii():
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:  # a lone surrogate from the API: kept, as an escape
                text = json.dumps(body)
        self._state.write_later(_CacheWrite(key, text, self.ttl_s, self.max_entries))


def cached_body(text) -> dict | None:
    """A stored answer's body if it has this version's shape, else None (another version of
    the server wrote it, or the row is damaged)."""
    try:
        body = json.loads(text)
    except (TypeError, ValueError):
        return None
    if not isinstance(body, dict) or body.get("format") != ANSWER_FORMAT:
        return None
    answer, response_id = body.get("answer"), body.get("response_id")
    shaped = (
        isinstance(answer, dict)
        and isinstance(answer.get("answer"), str)
        and isinstance(answer.get("citations"), list)
        and all(isinstance(c, dict) and isinstance(c.get("url"), str) for c in answer["citations"])
        and isinstance(answer.get("used_search"), bool)
        and isinstance(answer.get("model"), str)
        and (response_id is None or isinstance(response_id, str))
    )
    return body if shaped else None


def account_id(key: str) -> str:
    """Which account an API key is, for the cache key: a hash, never the key."""
    import hashlib

    return hashlib.sha256(f"{SERVER_NAME} account\0{key}".encode()).hexdigest()[:32]


def answer_key(
    tool: str,
    args: dict,
    request: dict,
    today: str,
    max_citations: int,
    endpoint: str = "",
    account: str = "",
    user: str = "",
) -> str:
    """The cache and single-flight key: a hash of the tool, the query, the hints, today's date,
    the policy's revision, everything else the request sends, what shapes the answer after it
    (max_citations), and who answers it: the endpoint (openai.base_url) and the account
    (account_id of the key); and whose it is (the user, while several people use the server
    and cache.share_across_users is false; '' otherwise). The query itself is never stored.

    The query is taken exactly, trimmed only at its ends: to a coding agent case and inner
    whitespace are meaning (`grep -i` is not `grep -I`, `None` is not `none`, and indentation is
    Python's syntax), so folding them would answer one question with another's answer."""
    import hashlib

    shape = {name: value for name, value in request.items() if name != "input"}
    shape["instructions"] = hashlib.sha256(request["instructions"].encode("utf-8")).hexdigest()
    hints = {name: args.get(name) for name in ("recency_days", "max_results", "domains")}
    text = json.dumps(
        [
            SYSTEM_POLICY_REV,
            tool,
            args["query"].strip(),
            hints,
            today,
            request_text(request).rpartition("\n\n[hints]")[2],
            # Each file by its content (a URL by itself), never its path: a changed file is
            # asked again, an unchanged one under another name is not.
            *([[(f.kind, f.sha256) for f in args["files"]]] if args.get("files") else []),
            shape,
            max_citations,
            endpoint,
            account,
            *([user] if user else []),  # '': the key of a server without users, as before
        ],
        sort_keys=True,
        ensure_ascii=False,
    )
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# ============================================================================================
# Answer engine: the OpenAI call and the answer's shape
# ============================================================================================


# -- The request: what a call sends, and the budgets it meets ----------------------------------


class Cancelled(Exception):
    """The client cancelled the call; nothing is sent for it. `billed`: the response it was
    billed for all the same (complete when the cancel came), whose cost its ledger row books."""

    def __init__(self, billed: dict | None = None):
        super().__init__()
        self.billed = billed


class BudgetPeriod:
    """One budget set: its `span` ("daily" or "monthly"), `limit` in USD, `since` (its first
    day), `words` for when it is spent ("today", "this month"), when it `resets` ("at 00:00"),
    and `user`, whose allowance it is (None: the team's)."""

    __slots__ = ("limit", "resets", "since", "span", "user", "words")

    def __init__(self, span: str, limit, since: str, words: str, resets: str, user=None):
        self.span, self.limit, self.since = span, limit, since
        self.words, self.resets, self.user = words, resets, user

    @property
    def per_user(self) -> bool:
        return self.user is not None

    @property
    def name(self) -> str:
        """As in its config key, budget.NAME_usd: "daily", "per_user_monthly"."""
        return f"per_user_{self.span}" if self.per_user else self.span


def budgets(config: Config, today: str) -> list[BudgetPeriod]:
    """The team's budgets that are set (the daily one first)."""
    get = config.get if isinstance(config, Config) else lambda *path: config[path[0]][path[1]]
    periods = (
        BudgetPeriod("daily", get("budget", "daily_usd"), today, "today", "at 00:00"),
        BudgetPeriod(
            "monthly",
            get("budget", "monthly_usd"),
            today[:8] + "01",
            "this month",
            f"on {_next_month(today)} at 00:00",
        ),
    )
    return [period for period in periods if period.limit is not None]


def user_budgets(
    config: Config, today: str, user: str, own: tuple = (None, None)
) -> list[BudgetPeriod]:
    """Like budgets(), for `user`'s allowance: their own (--user add --daily-usd/--monthly-usd,
    `own`), else budget.per_user_daily_usd / per_user_monthly_usd."""
    limits = (
        own[0] if own[0] is not None else config.get("budget", "per_user_daily_usd"),
        own[1] if own[1] is not None else config.get("budget", "per_user_monthly_usd"),
    )
    team = budgets({"budget": {"daily_usd": limits[0], "monthly_usd": limits[1]}}, today)
    for period in team:
        period.user = user
    return team


def _next_month(today: str) -> str:
    year, month = int(today[:4]), int(today[5:7])
    return f"{year + month // 12}-{month % 12 + 1:02d}-01"


def _flex_unavailable(request: dict, failure) -> bool:
    """A flex request refused for lack of capacity (429 resource_unavailable)."""
    words = f"{failure.code} {failure.type} {failure.detail}".lower().replace(" ", "_")
    return (
        request.get("service_tier") == "flex"
        and failure.status == 429
        and "resource_unavailable" in words
    )


def build_request(tool: str, args: dict, config: Config, today: str) -> dict:
    """The Responses API request body for one call (without `stream`)."""
    profile = config.profile(tool)
    defaults = config.get("search", "defaults")
    hints = {
        "recency_days": args.get("recency_days", defaults["recency_days"]),
        "max_results": args.get("max_results", defaults["max_results"]),
        "domains": args.get("domains") or defaults["domains"],
    }
    web_search: dict = {"type": "web_search"}
    if hints["domains"] and config.get("search", "domain_filter"):
        web_search["filters"] = {"allowed_domains": list(hints["domains"])}
    timezone = config.get("policy", "timezone")
    if profile.get("search_context_size"):
        web_search["search_context_size"] = profile["search_context_size"]
    location = user_location(config)
    if location:
        web_search["user_location"] = location
    request = {
        "model": profile["model"],
        "instructions": config.instructions,
        "input": build_input(args["query"], hints, today, timezone),
        "tools": [web_search],
        "include": ["web_search_call.action.sources"],
        "prompt_cache_key": prompt_cache_key(tool, config.instructions),
    }
    if is_deep_research(profile["model"]):
        # Deep research models take web_search_preview only (a web_search tool is a 400), so
        # no filters.allowed_domains: the domains stay a hint in the input. Nothing else of
        # web_search's is sent to them, nor the sources include made for it.
        request["tools"] = [{"type": "web_search_preview"}]
        del request["include"]
    if args.get("previous_response_id"):
        # A follow-up: the API reads the earlier turns from its stored response (billed again
        # as input); the instructions are not carried over, so they are sent again above.
        request["previous_response_id"] = args["previous_response_id"]
    if args.get("files"):  # FileInputs (FileReader): the question, then each file
        request["input"] = files_text(request["input"], args["files"])
    for name in ("service_tier", "max_output_tokens", "max_tool_calls"):
        if profile.get(name) is not None:
            request[name] = profile[name]
    if supports_verbosity(profile["model"]) and profile.get("verbosity"):  # answer_deep: none
        request["text"] = {"verbosity": profile["verbosity"]}
    if supports_reasoning(profile["model"]):
        request["reasoning"] = {"effort": profile["reasoning_effort"]}
    return request


def user_location(config: Config) -> dict | None:
    """web_search's approximate user_location, when any part of search.user_location is set."""
    where = config.get("search", "user_location")
    given = {key: where[key] for key in ("country", "region", "city", "timezone") if where[key]}
    if not given:
        return None
    given.setdefault("timezone", config.get("policy", "timezone"))
    return {"type": "approximate", **given}


def prompt_cache_key(tool: str, instructions: str) -> str:
    """The same key for every request of a profile, so OpenAI routes them to the machines
    that hold the instructions' prefix in the prompt cache (cheaper cached input)."""
    import hashlib

    digest = hashlib.sha256(instructions.encode("utf-8")).hexdigest()[:12]
    return f"{SERVER_NAME}/{tool}/{digest}"


# -- Shaping the answer --------------------------------------------------------------------------


def _output_text_parts(response: dict) -> list[dict]:
    parts = []
    for item in response.get("output") or ():
        if item.get("type") == "message":
            parts.extend(c for c in item.get("content") or () if c.get("type") == "output_text")
    return parts


def _answer_text(response: dict) -> str:
    return "".join(part.get("text") or "" for part in _output_text_parts(response)).strip()


def _search_sources(response: dict) -> list[dict]:
    """Sources listed by web_search_call actions: URLs, and ids such as oai-weather."""
    found = []
    for item in response.get("output") or ():
        if item.get("type") != "web_search_call":
            continue
        for source in (item.get("action") or {}).get("sources") or ():
            if source.get("url"):
                if is_web_url(source["url"]):
                    found.append({"url": without_tracking(source["url"]), "title": None})
            else:
                name = source.get("name") or source.get("id") or source.get("source")
                if isinstance(name, str) and re.fullmatch(_SOURCE_ID, name):
                    found.append({"url": name, "title": "api", "is_id": True})
    return found


# A source id such as oai-weather: a name, never a URL (`javascript:...` has a colon) nor text
# that could break out of its line in the Sources section.
_SOURCE_ID = r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}"


def is_web_url(url) -> bool:
    """An http(s) URL with a host: `javascript:` or `data:` URLs must never reach a client."""
    if not isinstance(url, str):
        return False
    scheme, sep, rest = url.partition("://")
    return bool(sep) and scheme.lower() in ("http", "https") and rest[:1] not in ("", "/")


# OpenAI's web search tags the URLs it hands the model with this query parameter. It is dropped
# everywhere: the agent repeats the URLs to its user, and a page with and without it is one
# source (else the model's own Sources line, written without it, gets the URL a second time).


def without_tracking(text: str) -> str:
    """`text` (a URL, or an answer holding URLs) without the exact query parameter
    `utm_source=openai` in any URL's query; every other parameter, their order and the
    fragment are kept as written, and so is code (a code span or block shows what it shows)."""
    if _TRACKED not in text:
        return text
    if is_web_url(text) and not re.search(r"\s", text):  # one URL: all of it, [::1] hosts too
        return _untracked(text)
    return sub_outside_code(_URL, lambda group: _untracked_in_text(group()), text)


_TRACKED = "utm_source=openai"


def _untracked_in_text(url: str) -> str:
    """A URL found in text, the punctuation after it (a sentence's `.`, a Markdown link's `)`)
    kept out of its query."""
    core = url
    while core[-1] in ".,;:!?*_" or (core[-1] == ")" and core.count(")") > core.count("(")):
        core = core[:-1]
    return _untracked(core) + url[len(core) :]


def _untracked(url: str) -> str:
    """The URL without `utm_source=openai` among its `&`-separated query parameters (as
    browsers split a query: `?utm_source=openai;id=42` holds one parameter, not this one)."""
    base, hash_mark, fragment = url.partition("#")
    path, question, query = base.partition("?")
    params = query.split("&")
    kept = [param for param in params if param != _TRACKED]
    if not question or len(kept) == len(params):
        return url
    query = "&".join(kept)
    return path + (f"?{query}" if query.strip("&") else "") + hash_mark + fragment


# -- Links: what an MCP client must never make clickable ---------------------------------------

# An inline Markdown link or image: [text](destination "title"), the text with one level of
# nested brackets, the destination in <...> or with balanced parentheses.
_MD_LINK = (
    r"(!?)\[((?:[^\[\]\\]|\\.|\[(?:[^\[\]\\]|\\.)*\])*)\]"
    r"\(\s*(<[^<>\n]*>|(?:[^\s()\\]|\\.|\((?:[^\s()\\]|\\.)*\))+)"
    r"(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^()]*\)))?\s*\)"
)
_AUTOLINK = r"<([A-Za-z][A-Za-z0-9+.-]{1,31}:[^\s<>]*)>"
_LINK_DEFINITION = r"(?m)^ {0,3}\[[^\]\n]+\]:[ \t]*(<[^<>\n]*>|\S+).*$"


def defused_links(text: str) -> str:
    """The answer with every link whose target is not http(s) (`javascript:`, `data:`,
    `file:`...) turned into its plain text: a client renders the answer as Markdown, and a
    click there must never run script or open a local file. Code is left as written."""
    text = sub_outside_code(_MD_LINK, lambda g: g(2) if _unsafe_target(g(3)) else g(), text)
    text = sub_outside_code(_AUTOLINK, lambda g: g(1) if _unsafe_target(g(1)) else g(), text)
    return sub_outside_code(_LINK_DEFINITION, lambda g: "" if _unsafe_target(g(1)) else g(), text)


def _unsafe_target(destination: str) -> bool:
    """Whether a link destination names a scheme other than http(s), read as a browser reads
    it: Markdown escapes and HTML entities decoded, tabs, newlines and controls dropped."""
    import html

    target = html.unescape(re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", destination.strip("<>")))
    target = "".join(char for char in target if char > " " and char != "\x7f")
    scheme = re.match(r"([A-Za-z][A-Za-z0-9+.-]*):", target)
    return scheme is not None and scheme[1].lower() not in ("http", "https")


def sub_outside_code(pattern: str, replace, text: str) -> str:
    """re.sub of `pattern` where it matches outside code spans and code blocks: code is
    masked with spaces first, so a match never reaches into it (as a code span binds before a
    link does in CommonMark), and `replace(group)` builds the replacement from the text as
    written, `group(n)` being the n-th group's original text ("" when it did not match).

    Code is read strictly (a fence indented at most three spaces, a span within one line):
    what a renderer shows as text is never taken for code, so a link there is never left
    clickable by mistake; a rare code span over two lines is treated as text."""
    masked = _code_masked(text)
    parts, end = [], 0
    for match in re.finditer(pattern, masked):

        def group(n: int = 0, match=match) -> str:
            return text[match.start(n) : match.end(n)] if match.start(n) >= 0 else ""

        parts += [text[end : match.start()], replace(group)]
        end = match.end()
    return "".join([*parts, text[end:]])


def _code_masked(text: str) -> str:
    """text with every character of its code blocks and code spans (newlines kept) a space."""
    lines = text.split("\n")
    fenced = _fences(lines, strict=True)[0]
    return "\n".join(
        " " * len(line) if code else _spans_masked(line)
        for line, code in zip(lines, fenced, strict=True)
    )


def _spans_masked(line: str) -> str:
    """The line with its code spans as spaces: a run of backticks up to the next run as long
    (CommonMark), found in one pass; an escaped backtick opens none."""
    if "`" not in line:
        return line
    runs = [(m.start(), m.end()) for m in re.finditer(r"`+", line)]
    runs = [(a + 1, b) if a and line[a - 1] == "\\" else (a, b) for a, b in runs]
    later: dict[int, list[int]] = {}  # run length -> indexes of runs of that length, reversed
    for index in range(len(runs) - 1, -1, -1):
        later.setdefault(runs[index][1] - runs[index][0], []).append(index)
    parts, end, index = [], 0, 0
    while index < len(runs):
        start, stop = runs[index]
        queue = later.get(stop - start, [])
        while queue and queue[-1] <= index:
            queue.pop()
        if stop > start and queue:
            closer = queue.pop()
            parts += [line[end:start], " " * (runs[closer][1] - start)]
            end, index = runs[closer][1], closer
        index += 1
    return "".join([*parts, line[end:]])


def _host(url: str) -> str:
    rest = url.split("://", 1)[-1]
    return rest.split("/", 1)[0] or url


def collect_citations(response: dict, max_citations: int, today: str) -> list[dict]:
    """url_citation annotations first (deduplicated, in order); else the search sources.

    Source ids that are not URLs are always kept: room is made for them under the cap.
    """
    cited, seen = [], set()
    for part in _output_text_parts(response):
        for note in part.get("annotations") or ():
            url = note.get("url")
            url = without_tracking(url) if isinstance(url, str) else url
            if note.get("type") == "url_citation" and is_web_url(url) and url not in seen:
                seen.add(url)
                cited.append({"url": url, "title": note.get("title") or _host(url)})
    sources = _search_sources(response)
    ids = []
    for source in sources:
        if source.get("is_id") and source["url"] not in seen:
            seen.add(source["url"])
            ids.append({"url": source["url"], "title": source["title"]})
    if not cited:
        for source in sources:
            if not source.get("is_id") and source["url"] not in seen:
                seen.add(source["url"])
                cited.append({"url": source["url"], "title": _host(source["url"])})
    ids = ids[:max_citations]
    chosen = cited[: max_citations - len(ids)] + ids
    return [{**c, "published_at": today} for c in chosen]


# -- The Sources section ---------------------------------------------------------------------------

# Headers a model writes over its sources, compared case-insensitively, with or without a colon
# (`:` or `：`) or a short aside (`Sources (accessed 2026-01-14):`), bold or as a Markdown
# heading. A policy file can add its own (sources_headers).
SOURCES_HEADERS = (
    "sources", "source", "references", "出典", "参考文献", "参考資料", "参考リンク", "参考url",
    "参考サイト", "参考", "情報源", "引用元",
)  # fmt: skip
_HEADER_ASIDE = r"[(（][^()（）\n]{1,60}[)）]"
_ISO_DATE = r"(?<!\d)\d{4}-\d{2}-\d{2}(?!\d)"
_OTHER_DATE = (
    r"(?<!\d)(\d{4})(?:年\s*(\d{1,2})\s*月\s*(\d{1,2})\s*日|[/.-](\d{1,2})[/.-](\d{1,2})(?!\d))"
)
_URL = r"https?://[^\s<>\"'\]（）「」『』、。，：]+"
_LIST_ITEM = r"\s*(?:[-*+•・]|\d{1,3}[.)]|\[\d{1,3}\])\s"
# A code fence as CommonMark reads it: three or more backticks or tildes; a block ends at a
# fence of the same character at least as long, with nothing after it (```` holds ``` lines).
_FENCE_LINE = r"[ \t]*(`{3,}|~{3,})(.*)"
_NO_SOURCE = "- no citable source was returned by the search (accessed {today})"


def _fences(lines: list[str], strict: bool = False) -> tuple[list[bool], str | None]:
    """(for each line, whether it is part of a code block, its fences included; the fence of
    the block still open after the last line, or None). `strict`: a fence is indented at most
    three spaces, as CommonMark has it outside lists (else any indent: a list item's block)."""
    inside, fence = [], None
    for line in lines:
        match = re.match(_FENCE_LINE, line)
        if strict and match and len(line) - len(line.lstrip(" ")) > 3:
            match = None
        if fence is None:
            opens = match is not None and not (match[1][0] == "`" and "`" in match[2])
            fence = match[1] if opens else None
            inside.append(opens)
            continue
        inside.append(True)
        same = match and match[1][0] == fence[0] and len(match[1]) >= len(fence)
        if same and not match[2].strip():
            fence = None
    return inside, fence


def _urls_in(text: str) -> list[str]:
    """The URLs in a line, without the punctuation or Markdown that follows them."""
    found = []
    for url in re.findall(_URL, text):
        while url[-1] in ".,;:!?*_" or (url[-1] == ")" and url.count(")") > url.count("(")):
            url = url[:-1]
        found.append(url)
    return found


def _mentions(text: str, source: str) -> bool:
    """Whether the text names this citation: the same URL, or the source id as a whole word."""
    if source.startswith(("http://", "https://")):
        return any(url.rstrip("/") == source.rstrip("/") for url in _urls_in(text))
    return re.search(rf"(?<![\w-]){re.escape(source)}(?![\w-])", text) is not None


def _has_iso_date(text: str) -> bool:
    """An ISO date outside the URLs (a URL's path may hold one)."""
    return re.search(_ISO_DATE, re.sub(_URL, " ", text)) is not None


def _iso_dated(text: str) -> str | None:
    """The text with its first other-format date (2026年1月5日, 2026/1/5) in ISO form, or None."""
    import datetime

    for match in re.finditer(_OTHER_DATE, re.sub(_URL, lambda u: "#" * len(u[0]), text)):
        year, month, day = match[1], match[2] or match[4], match[3] or match[5]
        try:
            iso = datetime.date(int(year), int(month), int(day)).isoformat()
        except ValueError:
            continue
        return text[: match.start()] + iso + text[match.end() :]
    return None


def _dated(text: str, citations: list[dict], today: str, entry: str = "") -> str:
    """One source's text with one ISO date: as written, converted, or its date appended.

    The appended date is its citation's (looked up in the whole entry), else today's.
    """
    if _has_iso_date(text):
        return text
    converted = _iso_dated(text)
    if converted is not None:
        return converted
    entry = entry or text
    date = next((c["published_at"] for c in citations if _mentions(entry, c["url"])), today)
    return f"{text.rstrip()} ({date})"


def _sources_header(line: str, names: tuple, citations: list[dict], last: bool) -> str | None:
    """The sources written on a header's own line ("" for none), or None for no header.

    Text after the header (`Sources: https://a.example/ (2026-01-05)`) counts when it names a
    URL, a citation or a date, or when it is the answer's last line: `参考: ...` in the middle
    of an answer is a note, not a sources section.
    """
    text = line.strip()
    heading = text.startswith("#")
    if heading:
        text = text.strip("#").strip()
    text = text.lstrip("*_").lstrip()
    name = next((n for n in names if text[: len(n)].lower() == n), None)
    if name is None:
        return None
    rest = text[len(name) :].lstrip("*_ \t")
    aside = re.match(_HEADER_ASIDE, rest)
    if aside:
        rest = rest[aside.end() :].lstrip("*_ \t")
    colon = rest[:1] in (":", "：")
    rest = rest[1:].lstrip("*_ \t") if colon else rest
    if not rest:
        return ""
    if not colon or heading:
        return None
    named = _urls_in(rest) or any(_mentions(rest, c["url"]) for c in citations)
    if named or last or re.search(_ISO_DATE, rest) or _iso_dated(rest) is not None:
        return rest
    return None


def _find_sources_header(lines: list[str], names: tuple, citations: list[dict]):
    """(index, sources on its line) of the last sources header outside code blocks, or None."""
    found, (fenced, _) = None, _fences(lines)
    last = max((i for i, line in enumerate(lines) if line.strip()), default=-1)
    for index, line in enumerate(lines):
        if not fenced[index]:
            rest = _sources_header(line, names, citations, index == last)
            if rest is not None:
                found = (index, rest)
    return found


def _is_entry(line: str, citations: list[dict], after_gap: bool) -> bool:
    """A listed source: a list item, or a line naming a source (after a blank line: opening
    with one), so that prose after the section is not taken for a source."""
    if re.match(_LIST_ITEM, line):
        return True
    if after_gap:
        line = line.strip().lstrip("[<")
        return line.startswith(("http://", "https://")) or any(
            line.startswith(c["url"]) for c in citations
        )
    return bool(_urls_in(line)) or any(_mentions(line, c["url"]) for c in citations)


def _section_entries(lines: list[str], start: int, citations: list[dict]) -> list[list[int]]:
    """The line numbers of each source listed from `start` on, an entry with its continuations.

    The list ends at a heading, a code block, or the first line that is neither a source nor
    indented under one.
    """
    entries: list[list[int]] = []
    gap = False
    for index in range(start, len(lines)):
        line = lines[index]
        if not line.strip():
            gap = True
            continue
        if line.lstrip().startswith("#") or re.match(_FENCE_LINE, line):
            break
        if _is_entry(line, citations, gap and bool(entries)):
            entries.append([index])
        elif entries and not gap and line[:1] in " \t":
            entries[-1].append(index)
        else:
            break
        gap = False
    return entries


def _complete_inline(rest: str, citations: list[dict], today: str, listed: str) -> str:
    """Sources written after their header, each dated, with the citations listed nowhere added."""
    ids = "".join(f"|{re.escape(c['url'])}" for c in citations)
    # Sources are separated by commas, or (`[1] url [2] url`) by the next bracketed number.
    parts = re.split(rf"(\s*[,、;；]\s*|\s+(?=\[\d{{1,3}}\]\s))(?=https?://|\[{ids})", rest)
    for i in range(0, len(parts), 2):  # odd indexes hold the separators
        parts[i] = _dated(parts[i], citations, today)
    added = [
        f"{c['url']} ({c['published_at']})"
        for c in citations
        if not _mentions(rest, c["url"]) and not _mentions(listed, c["url"])
    ]
    return ", ".join(["".join(parts), *added])


def ensure_sources_section(
    answer: str, citations: list[dict], today: str, headers: tuple = ()
) -> str:
    """The answer with one sources section listing each citation with one ISO date.

    A section the model wrote (the last one, under `Sources:`, `出典:`, `参考:`... or a header
    the policy names) is completed in place under the model's header: entries get an ISO date
    where they lack one and missing citations are added. Without one, `Sources:` is appended.
    """
    names = tuple(sorted({*SOURCES_HEADERS, *headers}, key=len, reverse=True))
    lines = answer.rstrip().split("\n")
    found = _find_sources_header(lines, names, citations)
    if found is None:
        entries = [f"- {c['url']} ({c['published_at']})" for c in citations]
        listing = entries or [_NO_SOURCE.format(today=today)]
        return "\n".join([answer.rstrip(), "", "Sources:", *listing])
    header, rest = found
    entries = _section_entries(lines, header + 1, citations)
    listed = "\n".join(lines[i] for entry in entries for i in entry)
    if rest:
        lines[header] = lines[header].rstrip()[: -len(rest)] + _complete_inline(
            rest, citations, today, listed
        )
    for entry in entries:
        text = "\n".join(lines[i] for i in entry)
        if not _has_iso_date(text):
            lines[entry[0]] = _dated(lines[entry[0]], citations, today, text)
    missing = (
        []
        if rest
        else [
            f"- {c['url']} ({c['published_at']})"
            for c in citations
            if not _mentions(listed, c["url"])
        ]
    )
    if not rest and not entries and not missing:
        missing = [_NO_SOURCE.format(today=today)]
    end = entries[-1][-1] + 1 if entries else header + 1
    return "\n".join(lines[:end] + missing + lines[end:])


def incomplete_reason(response: dict) -> str | None:
    """Why the API stopped the answer early (max_output_tokens, content_filter…), else None."""
    details = response.get("incomplete_details")
    if response.get("status") != "incomplete" and not details:
        return None
    reason = details.get("reason") if isinstance(details, dict) else None
    return str(reason or "unknown")


def shape_answer(
    response: dict, max_citations: int, today: str, *, model: str = "", headers: tuple = ()
) -> dict:
    """The four-key answer of the output contract, from a completed Responses API object.

    `model` stands in when the API reports none; `headers` are the policy's sources headers.
    """
    text = defused_links(without_tracking(_answer_text(response)))
    searched = any(item.get("type") == "web_search_call" for item in response.get("output") or ())
    citations = collect_citations(response, max_citations, today)
    cited = any(
        note.get("type") == "url_citation"
        for part in _output_text_parts(response)
        for note in part.get("annotations") or ()
    )
    used_search = searched or cited
    if used_search:
        text = ensure_sources_section(text, citations, today, headers)
    reason = incomplete_reason(response)
    if reason:
        # Last, after any Sources section: never taken for a source line, and where a reader
        # stops (a cut usually falls in the prose, before the model wrote its sources).
        text = f"{text}\n\n(answer cut short: {reason})"
    return {
        "answer": text,
        "used_search": used_search,
        "citations": citations,
        "model": response.get("model") or model,
    }


# -- Sizing: results every client shows whole --------------------------------------------------
# A client passes a tool result to its model whole only up to a size (Claude Code about 50,000
# characters, then a 2 KB preview of a file; Codex about 12,000, then it cuts the middle out
# silently): a longer answer is shortened here, at a section boundary, keeping its start and its
# sources section, and saying so. Sizes count UTF-8 bytes, a conservative bound for dense text:
# a Japanese character is three, so 50,000 is about 16,700 of them, well under the 25,000 tokens
# older Claude Code refused.


def result_size(answer: dict) -> int:
    """The size of the text a client shows its model: the answer as JSON, in UTF-8 bytes."""
    return len(json.dumps(answer, ensure_ascii=False).encode("utf-8", "surrogatepass"))


def _cut_points(text: str) -> tuple[list[int], list[int]]:
    """Where a shortened answer may end, outside code blocks: (before each heading, at each
    blank line), as offsets into text."""
    sections, paragraphs, offset = [], [], 0
    lines = text.split("\n")
    for line, fenced in zip(lines, _fences(lines)[0], strict=True):
        if not fenced and offset:
            if line.lstrip().startswith("#"):
                sections.append(offset)
            elif not line.strip():
                paragraphs.append(offset)
        offset += len(line) + 1
    return sections, paragraphs


def _heading_at(text: str, offset: int) -> str | None:
    """The heading that starts at or after offset (the first section left out), if any."""
    for line in text[offset:].split("\n"):
        if line.lstrip().startswith("#"):
            return _one_line(line.strip().lstrip("#").strip(), 80) or None
        if line.strip():
            return None
    return None


def _shortened_note(total: int, kept: int, section: str | None, rest: dict, sources: bool) -> str:
    """What the model reads where the answer was cut, and how to get the rest."""
    where = f", from the section '{section}' on" if section else ""
    if rest.get("response_id"):
        ask = f"from the section '{section}'" if section else "from where it was shortened"
        how = (
            f'call {rest["tool"]} with previous_response_id "{rest["response_id"]}" and a query '
            f'such as "Continue your previous answer {ask}"'
        )
    else:
        how = "ask again with a narrower question"
    return (
        f"[Shortened by the server so that your MCP client shows this result whole: "
        f"{total - kept:,} of {total:,} characters left out here{where}."
        f"{' The sources section is kept.' if sources else ''} For the rest, {how}.]"
    )


_MORE_SOURCES = "- … {} more lines of sources left out (see citations)"
_CUT_SOURCES = "- … (the line above is shortened: see citations)"


def _fit_sources(tail: str, budget: int) -> str:
    """The sources section in `budget` bytes of JSON: its last lines dropped (and counted) if
    it is too long, and a line too long on its own (`Sources: url, url, …` on one line) cut,
    so the body keeps its room."""
    if _json_len(tail) <= budget:
        return tail
    lines, kept, size = tail.split("\n"), [], 0
    room = max(0, budget - _json_len(_MORE_SOURCES.format(len(lines))) - 2)
    for line in lines:
        need = _json_len(line) + 2  # and its newline, escaped
        if size + need > room:
            if not kept:
                kept.append(_cut_to(line, max(0, room - 3)) + "…")
            break
        kept.append(line)
        size += need
    left = len(lines) - len(kept)
    return "\n".join([*kept, _MORE_SOURCES.format(left) if left else _CUT_SOURCES])


def _split_sources(text: str, citations: list[dict], headers: tuple) -> tuple[str, str]:
    """(the body, its sources section). What follows the section (prose, a cut-short note) is
    body: shortened, and counted as left out, like the rest of it."""
    names = tuple(sorted({*SOURCES_HEADERS, *headers}, key=len, reverse=True))
    lines = text.split("\n")
    found = _find_sources_header(lines, names, citations)
    if found is None:
        return text.rstrip(), ""
    entries = _section_entries(lines, found[0] + 1, citations)
    end = entries[-1][-1] + 1 if entries else found[0] + 1
    before = "\n".join(lines[: found[0]]).rstrip()
    after = "\n".join(lines[end:]).strip()
    body = "\n\n".join(part for part in (before, after) if part)
    return body, "\n".join(lines[found[0] : end]).strip("\n")


def fit_answer(answer: dict, limit: int, rest: dict, headers: tuple = ()) -> tuple[dict, dict]:
    """(answer, what was done): the answer as is when its JSON fits `limit` bytes, else its
    text shortened at the last section boundary (a heading; else a paragraph, else a line)
    that fits, its sources section kept, and a note saying how to get the rest.

    `rest` holds what that note offers: {"tool", "response_id"}; `headers`, the policy's
    sources headers."""
    if result_size(answer) <= limit:
        return answer, {}
    text = answer.get("answer") or ""
    head, tail = _split_sources(text, answer.get("citations") or [], headers)
    fixed = result_size({**answer, "answer": ""}) + 400  # the other keys, the note, escapes
    tail = _fit_sources(tail, max(0, limit - fixed) // 2) if tail else tail

    def shortened(end: int) -> dict:
        kept = head[:end].rstrip()
        note = _shortened_note(len(head), len(kept), _heading_at(head, end), rest, bool(tail))
        parts = [_closed(kept), note, tail]
        return {**answer, "answer": "\n\n".join(part for part in parts if part)}

    end = _longest_fit(head, limit, shortened)
    fitted = shortened(end)
    return fitted, {"chars": len(text), "shown_chars": len(fitted["answer"]), "limit": limit}


def _closed(kept: str) -> str:
    """The kept start, its code block closed when the cut fell inside one (a giant JSON or code
    answer has no other place to cut), so the note and sources are not read as code."""
    fence = _fences(kept.split("\n"))[1]
    return f"{kept}\n{fence}" if fence else kept


def _longest_fit(head: str, limit: int, shortened) -> int:
    """The end of the longest start of head that fits: at a heading, else at a paragraph, when
    that keeps at least half of what a line boundary would (not so inside one long code block),
    else at a line, or a character for one giant line."""
    sections, paragraphs = _cut_points(head)
    lines = [i + 1 for i, char in enumerate(head) if char == "\n"]

    def best(points: list[int]) -> int:
        low, high, found = 0, len(points) - 1, 0
        while low <= high:  # points ascend, and so does the size of what they keep
            middle = (low + high) // 2
            if result_size(shortened(points[middle])) <= limit:
                found, low = points[middle], middle + 1
            else:
                high = middle - 1
        return found

    room = min(len(head), limit)  # a longer start takes more than `limit` bytes
    safe = _safe_offsets(head[: room + 1])
    chars = sorted({safe[i] for i in range(1, room + 1, 100)} - {0})
    by_line = best(lines) or best(chars)
    for end in (best(sections), best(paragraphs)):
        if end and end * 2 >= by_line:  # a cleaner cut, unless it throws away most of the room
            return end
    return by_line


def _json_len(text: str) -> int:
    """The UTF-8 bytes text takes inside a JSON string: escapes (\\n, \\", \\u0000) count."""
    return len(json.dumps(text, ensure_ascii=False).encode("utf-8", "surrogatepass")) - 2


def _cut_to(text: str, budget: int) -> str:
    """The longest start of text that takes at most `budget` bytes of JSON and splits no
    character a reader sees as one."""
    low, high = 0, len(text)
    while low < high:  # the longest prefix that fits
        middle = (low + high + 1) // 2
        low, high = (middle, high) if _json_len(text[:middle]) <= budget else (low, middle - 1)
    return text[: _grapheme_safe(text, low)]


# A cut between two characters a reader sees as one (a grapheme cluster) leaves half a flag, a
# joined emoji in pieces or a letter without its accent. The standard library has no UAX #29,
# so this is the conservative part of it that matters here: no cut before a combining mark
# (accents, variation selectors, Indic vowel signs), an emoji skin-tone modifier, a tag
# character (subdivision flags), a Hangul vowel or final jamo, before or after a zero-width
# joiner, inside CR LF, or between the two regional indicators of a flag.
_ZWJ = "\u200d"


def _grapheme_safe(text: str, end: int) -> int:
    """end, or the nearest offset before it where a cut splits no grapheme cluster."""
    return _safe_offsets(text[: end + 1])[end]


def _safe_offsets(text: str) -> list[int]:
    """For each offset 0..len(text), the nearest one at or before it where a cut splits no
    grapheme cluster: one pass, so a line of 100,000 accents or flags costs no more than
    one of letters."""
    import unicodedata

    safe, last, regional = [0], 0, 0
    for index in range(1, len(text) + 1):
        before = text[index - 1]
        regional = regional + 1 if _is_regional(before) else 0
        if index == len(text) or not _joined(before, text[index], regional, unicodedata):
            last = index
        safe.append(last)
    return safe


def _joined(before: str, after: str, regional: int, unicodedata) -> bool:
    """Whether `before` and `after` belong to one grapheme cluster; `regional` is the number
    of regional indicators that end at `before`."""
    if _ZWJ in (before, after) or (before, after) == ("\r", "\n"):
        return True
    if unicodedata.category(after)[0] == "M" or "\U0001f3fb" <= after <= "\U0001f3ff":
        return True
    if "\U000e0020" <= after <= "\U000e007f" or "\u1160" <= after <= "\u11ff":
        return True
    if "\ud7b0" <= after <= "\ud7ff":
        return True
    return _is_regional(after) and regional % 2 == 1  # `after` ends a flag's pair


def _is_regional(char: str) -> bool:
    return "\U0001f1e6" <= char <= "\U0001f1ff"


# -- Usage: the tokens and searches an answer used ---------------------------------------------


def is_billed_search(item) -> bool:
    """An output item OpenAI bills as a web search call: a web_search_call whose action is a
    search. OpenAI's web search guide: "Search actions incur a tool call cost"; the page opens
    and finds within a page that reasoning and deep research models also make (action.type
    open_page, find_in_page) do not. An action of no known type counts, erring on the high
    side rather than missing spend."""
    if not isinstance(item, dict) or item.get("type") != "web_search_call":
        return False
    action = item.get("action")
    kind = action.get("type") if isinstance(action, dict) else None
    return kind not in UNBILLED_WEB_ACTIONS


UNBILLED_WEB_ACTIONS = ("open_page", "find_in_page", "find")


def usage_meta(response: dict, elapsed_s: float, attempts: int) -> dict:
    """What a call cost, for the tool result's `_meta`. The counts are read defensively
    (usage_counts): a gateway's null, string or negative count never fails a paid answer."""
    searches = sum(1 for item in _items(response.get("output")) if is_billed_search(item))
    meta = {
        "response_id": response.get("id"),
        "usage": usage_counts(response.get("usage")),
        "web_searches": searches,
        "elapsed_ms": round(elapsed_s * 1000),
        "attempts": attempts,
    }
    reason = incomplete_reason(response)
    if reason:
        meta["incomplete"] = {"reason": reason}
    return meta


def _items(value) -> list:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _mapping(value) -> dict:
    return value if isinstance(value, dict) else {}


def usage_counts(usage) -> dict:
    """The API's `usage` object (ResponseUsage: input_tokens, input_tokens_details.
    {cached_tokens, cache_write_tokens, cache_write_tokens_details.ttl_12h_tokens},
    output_tokens, output_tokens_details.reasoning_tokens, total_tokens) as whole counts in
    [0, USAGE_MAX_TOKENS]. OpenAI-compatible gateways send null, strings, negatives and
    fractions: a count that is not a number is 0, a negative one 0 (it never lowers a cost),
    a fraction is rounded up. A cache write of 12 hours counts within the writes."""
    usage = _mapping(usage)
    details = _mapping(usage.get("input_tokens_details"))
    written = token_count(details.get("cache_write_tokens"))
    split = _mapping(details.get("cache_write_tokens_details"))
    counts = {
        "input_tokens": token_count(usage.get("input_tokens")),
        "cached_input_tokens": token_count(details.get("cached_tokens")),
        "cache_write_tokens": written,
        "cache_write_12h_tokens": min(written, token_count(split.get("ttl_12h_tokens"))),
        "output_tokens": token_count(usage.get("output_tokens")),
        "reasoning_tokens": token_count(
            _mapping(usage.get("output_tokens_details")).get("reasoning_tokens")
        ),
    }
    total = token_count(usage.get("total_tokens"))
    counts["total_tokens"] = min(
        max(total, counts["input_tokens"] + counts["output_tokens"]), USAGE_MAX_TOKENS
    )
    return counts


USAGE_MAX_TOKENS = 10**12  # a count past this is no real request's; kept finite in dollars


def token_count(value) -> int:
    """A token count as a whole number in [0, USAGE_MAX_TOKENS]: a fraction rounded up and an
    infinite or huge one capped (count more, never less); a negative one, and anything that
    is no number ("n/a", null, nan, true), 0."""
    import math

    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            return 0
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0
    if isinstance(value, float):
        if not math.isfinite(value):
            return USAGE_MAX_TOKENS if value > 0 else 0
        value = math.ceil(value) if value < USAGE_MAX_TOKENS else USAGE_MAX_TOKENS
    return min(max(int(value), 0), USAGE_MAX_TOKENS)


# -- Prices: what an answer cost in dollars, and what a call may cost (the budget's estimate) ------

# The tiers a request asking for a tier may be billed at: a flex request without capacity is
# retried on the default tier (_flex_unavailable), so its discount is never certain.
TIER_FALLBACKS = {"flex": "default"}


class Pricing:
    """Turns a call's usage into dollars, from the config's price table over the built-in one.

    The most specific price wins (price_of): the model's exact id in pricing.models, then in
    the built-in table; then, for a dated snapshot (gpt-5.2-2025-12-11), its alias's id the same
    way; then the longest pricing.models key ending in `*` that the id starts with (`acme-*`,
    or `*` for any model). A model with no price costs null, with one warning per model naming
    the key to set.
    """

    def __init__(self, config: Config, log: Log):
        self._config = {
            str(model): tuple(float(entry[name]) for name in PRICE_FIELDS)
            for model, entry in config.get("pricing", "models").items()
        }
        self._search_per_1k = float(config.get("pricing", "web_search_per_1k"))
        self._log = log
        self._warned: set = set()
        self._lock = threading.Lock()

    def prices(self, model: str) -> tuple[tuple, str] | None:
        """((input, cached_input, output), where from) for the model, or None."""
        return price_of(self._config, model)

    def cost(
        self, model: str, usage: dict, searches: int, tier: str | None = None, window=None
    ) -> dict:
        """`_meta.cost`: dollars in total and by part. Reasoning tokens are part of
        output_tokens in the API's usage, so they are billed as output once. `window`: the
        completion window the response ran in (2h, 8h: its tokens at the discount)."""
        found = self.prices(model)
        search_usd = round(token_count(searches) * self._search_per_1k / 1000, 8)
        if found is None:
            self._warn(model)
            return {
                "usd": None,
                "input_usd": None,
                "cached_input_usd": None,
                "cache_write_usd": None,
                "output_usd": None,
                "web_search_usd": search_usd,
                "prices": None,
            }
        return self._priced(model, found, _counts(usage), search_usd, tier, window=window)

    def estimate(
        self, model: str, tier, brought: int, besides: int = 0, typical=0.0, window=None
    ) -> float:
        """The most a call can be billed, as far as it is known before it is sent, in dollars:
        the input tokens it `brought` (its question and files) and `typical`, what the tool's
        calls cost in the ledger (their output, searches and the input they carry `besides`:
        instructions, search results). Priced by _priced, as the answer will be: over the
        long-context line (brought + besides) the whole request at the long-context rates,
        the typical part too; at the dearest tier the request may be billed at
        (TIER_FALLBACKS); every token brought as a prompt-cache write (1.25 times the input
        rate: the most a token costs at the API's default retention, which the server never
        changes), never at the cached-input discount, which is not certain. A model with no
        price (under a budget, refused before this) adds nothing to `typical`. `window`: the
        completion window it will run in, its tokens brought at the discount; `typical` stays
        as the ledger has it (its rows are booked at the price each call was billed)."""
        found = self.prices(model)
        if found is None:
            return typical
        usage = {**_counts({}), "input_tokens": brought, "cache_write_tokens": brought}
        tiers = (tier, TIER_FALLBACKS[tier]) if tier in TIER_FALLBACKS else (tier,)
        context = brought + besides  # the input the request will carry, for the line
        known = max(
            self._priced(model, found, usage, 0.0, t, context, window)["usd"] for t in tiers
        )
        # The typical calls were billed at the tier asked for (flex, when it had capacity):
        # this one, retried on the fallback tier, costs that much more.
        dearer = max(tier_factor(model, t) for t in tiers) / tier_factor(model, tier)
        return known + typical * dearer * max(_long_context(model, context))

    def _priced(
        self, model, found: tuple, usage: dict, search_usd: float, tier, context=None, window=None
    ) -> dict:
        """`context`: the request's input tokens, for the long-context line, when `usage` is
        a part of it (an estimate's); else its own. `window`: the discount applies to the
        token parts only (web searches are not tokens), and only on Standard processing, the
        only tier a window runs on."""
        (input_rate, cached_rate, output_rate), source = found
        tiered = tier_factor(model, tier)
        off = window_factor(window) if tier in STANDARD_TIERS else 1.0
        factor = tiered * off
        context = usage["input_tokens"] if context is None else context
        long_in, long_out = _long_context(model, context)
        cached = usage["cached_input_tokens"]
        written = usage["cache_write_tokens"]
        written_12h = min(written, usage["cache_write_12h_tokens"])
        uncached = max(0, usage["input_tokens"] - cached - written)
        writes = (written - written_12h) * CACHE_WRITE_FACTORS["30m"] + written_12h * (
            CACHE_WRITE_FACTORS["12h"]
        )
        parts = {
            "input_usd": uncached * input_rate * factor * long_in / 1e6,
            "cached_input_usd": cached * cached_rate * factor * long_in / 1e6,
            "cache_write_usd": writes * input_rate * factor * long_in / 1e6,
            "output_usd": usage["output_tokens"] * output_rate * factor * long_out / 1e6,
        }
        parts = {name: round(value, 8) for name, value in parts.items()}
        parts["web_search_usd"] = search_usd
        # The total is the sum of the parts as shown, so they always add up.
        cost = {"usd": round(sum(parts.values()), 8), **parts}
        cost["prices"] = source if tiered == 1.0 else f"{source} x{tiered:g} ({tier})"
        if off != 1.0:
            cost["prices"] += f" x{off:g} ({window} window)"
        if long_in != 1.0:
            cost["prices"] += f", long context (over {LONG_CONTEXT_TOKENS:,} input tokens)"
        return cost

    def booked(
        self, model: str, requested: str, usage: dict, searches: int, tier=None, window=None
    ) -> dict:
        """The cost of a response naming `model`, made for a request of `requested`: never
        less than the requested model's price (the one admission reserved against), so a
        response naming a model with no price (a gateway's `openai/gpt-6.1-terra`) or a cheaper
        one is not booked at less than the call was let through for."""
        cost = self.cost(model, usage, searches, tier, window)
        if requested == model or self.prices(requested) is None:
            return cost
        floor = self.cost(requested, usage, searches, tier, window)
        if cost["usd"] is not None and cost["usd"] >= floor["usd"]:
            return cost
        floor["prices"] = f"{floor['prices']}, as {requested} (the model requested)"
        return floor

    def _warn(self, model: str) -> None:
        with self._lock:
            if model in self._warned:
                return
            self._warned.add(model)
        self._log.say(
            f"warning: no price known for model {model!r}, so it is priced as the model "
            "requested, or shows as null when that has none either: set "
            f"pricing.models.{_undated(model)} to {{input, cached_input, output}} in USD per "
            "million tokens"
        )


def billed_meta(pricing: Pricing, error, requested: str, searched: int = 0, window=None) -> dict:
    """The usage, searches and cost a failed or cancelled call was billed for, for its ledger
    row, so the spend is counted against the budgets: those of the response it came with (one
    cut short before any text, complete when the cancel came, or failed with its usage), else
    the web searches its streams showed done (`searched`, every attempt's: each is billed,
    whatever becomes of the response); {} when neither. `window`: the completion window the
    response ran in (its tokens at the discount)."""
    response = getattr(error, "billed", None)
    if not isinstance(response, dict) or not isinstance(response.get("usage"), dict):
        if not searched:
            return {}
        return {"web_searches": searched, "cost": pricing.cost(requested, {}, searched)}
    meta = usage_meta(response, 0.0, 0)
    usage, searches = meta["usage"], max(meta["web_searches"], searched)
    model, tier = _model_named(response, requested), response.get("service_tier")
    cost = pricing.booked(model, requested, usage, searches, tier, window_taken(response, window))
    return {"usage": usage, "web_searches": searches, "cost": cost}


def price_of(table: dict, model: str) -> tuple[tuple, str] | None:
    """((input, cached_input, output), where from) for `model`, the most specific price
    first: its exact id in `table` (pricing.models), then in BUILTIN_PRICES; the same for its
    alias when it is a dated snapshot; then the longest `table` key ending in `*` that it
    starts with. A key without `*` matches its own id (and its snapshots) only."""
    base = _undated(model)
    for name in dict.fromkeys((model, base)):
        if name in table:
            return table[name], "config"
        if name in BUILTIN_PRICES:
            return BUILTIN_PRICES[name], f"builtin {PRICES_DATE}"
    wild = [key for key in table if key.endswith("*") and model.startswith(key[:-1])]
    if wild:
        key = max(wild, key=len)
        return table[key], f"config {key}"
    return None


def _counts(usage) -> dict:
    """`_meta.usage` (usage_counts' keys) with every count whole and in range, whatever it
    holds: the cost is finite and never negative."""
    usage = _mapping(usage)
    names = ("input_tokens", "cached_input_tokens", "cache_write_tokens")
    counts = {name: token_count(usage.get(name)) for name in names}
    counts["cache_write_12h_tokens"] = token_count(usage.get("cache_write_12h_tokens"))
    counts["output_tokens"] = token_count(usage.get("output_tokens"))
    return counts


def _model_named(response: dict, requested: str) -> str:
    """The model the response names (text), else the one requested."""
    named = response.get("model")
    return named if isinstance(named, str) and named.strip() else requested


def text_tokens(text: str) -> int:
    """A text's input tokens as a budget estimate counts them: by its UTF-8 bytes, as a text
    file's (TEXT_BYTES_PER_TOKEN)."""
    return len(text.encode("utf-8", "replace")) // TEXT_BYTES_PER_TOKEN + 1


ZERO_COST = {
    "usd": 0.0,
    "input_usd": 0.0,
    "cached_input_usd": 0.0,
    "cache_write_usd": 0.0,
    "output_usd": 0.0,
    "web_search_usd": 0.0,
}


# -- Retirements: a configured model's shutdown date ------------------------------------------
# GET /v1/models reports each model's shutdown_date (YYYY-MM-DD, or null when none is
# announced). --doctor lists them for every profile; a running server looks once a day (the
# state says when it last did, across processes) and warns on stderr. A call to a model that
# has shut down gets the API's 404 model_not_found, which is not retried.


def model_settings(config: Config, tools=None) -> list[tuple[str, str, str]]:
    """(tool, model, the key that sets it) for each profile (all of them by default)."""
    rows = []
    for tool in tools or TOOL_NAMES:
        holder = _profile_holder(config, tool, "model")
        rows.append((tool, config.profile(tool)["model"], setting_name(config, holder, "model")))
    return rows


def list_models(client):
    """GET /v1/models as the JSON it is (any shape: shutdown_dates reads it defensively).
    Raises what the SDK raises for a status or a connection error."""
    return client.get("/models", cast_to=object)


# -- A call: its cancel flag, its streams, its background run (Call) ---------------------------


class Call:
    """One tools/call in flight: its cancel flag, the upstream connections it reads, its progress.

    cancel() may come from any thread. It shuts the call's sockets down at once, so a worker
    blocked reading a silent stream wakes immediately instead of at the next event, and runs
    what was registered with when_cancelled() (a background response's server-side cancel).
    The one exception is a background create whose reply has not yet named its response: its
    stream stays open until it does (see BackgroundMode.cancel), since the name is
    what a server-side cancel needs.
    """

    def __init__(self, request_id, tool: str, progress=None):
        self.id = request_id
        self.tool = tool
        self.cancelled = threading.Event()
        self.started = time.monotonic()
        self._lock = threading.Lock()
        self._streams: list = []
        self._progress = progress  # callable(progress: int, message: str) or None
        self._progress_count = 0
        self._last_progress = 0.0
        self._done = False
        self.status_message: str | None = None
        self._on_cancel: list = []
        self._reading = False  # the current request went out; its reply is being read
        self._cancel_ran = False  # cancel() has run (Session sets `cancelled` just before)
        self._held = False  # a cancel keeps the streams open until the response is named
        self.background: BackgroundRun | None = None  # set when the request runs in background
        # The completion window the person chose for this call (the cost question's
        # run_discounted), over its profile's model_profiles.<tool>.completion_window; None:
        # the profile's.
        self.window: str | None = None
        self.upstream: Call | None = None  # the Call that makes the request, when shared
        self.cancelled_upstream = False  # its background response was cancelled elsewhere
        self.result_chars: int | None = None  # its client's result size (None: the default)
        self.searches = 0  # web searches done so far (the upstream Call counts them)
        self.user = LOCAL_USER  # whose call it is: its ledger row, budget, cache key, ids
        self.reservation: str | None = None  # its budget reservation, while it makes a request
        self._recorded = self._handed_over = False  # see record_here / hand_over

    def record_here(self) -> bool:
        """Whether this process writes the call's ledger row: yes, unless the call was
        handed over first to whichever instance serves its task (Dispatcher.hand_over)."""
        with self._lock:
            self._recorded = not self._handed_over
            return self._recorded

    def hand_over(self) -> bool:
        """Leaves the call's ledger row to another instance; False if it is written already
        (or being written): then this process has recorded it."""
        with self._lock:
            self._handed_over = not self._recorded
            return self._handed_over

    def cancel(self) -> None:
        """Cancels the call; a second cancel changes nothing (above all, not a hold)."""
        run = self.background
        with self._lock:
            if self._cancel_ran:
                return
            self._cancel_ran = True
            self._held = (
                run is not None and run.response_id is None and not run.finished and self._reading
            )
            self.cancelled.set()
        if not self._held:
            self.abort_streams()
        with self._lock:
            actions = list(self._on_cancel)
        for action in actions:
            action()

    def when_cancelled(self, action) -> None:
        """Runs action() when the call is cancelled, at once if it already was. action() must
        be quick and idempotent (it may run twice when a cancel races this registration)."""
        with self._lock:
            self._on_cancel.append(action)
        if self.cancelled.is_set():
            action()

    @property
    def held(self) -> bool:
        """Cancelled while an unnamed background response was being read, and not let go."""
        return self._held

    @property
    def reading(self) -> bool:
        """The last request written went out whole and its reply is being read."""
        return self._reading

    def attach(self, stream, reading: bool = False) -> None:
        """Called from the worker before each read (reading=True) or write on an upstream
        connection. httpcore reads a reply only once its whole request is written, so the
        first read after writes means the request went out (a proxy's CONNECT is a request
        too: the write of the real one that follows resets the mark)."""
        with self._lock:
            if stream not in self._streams:
                self._streams.append(stream)
            self._reading = reading
            abort = self._cancel_ran and not self._held
        if abort:
            stream.abort()

    def let_go(self) -> None:
        """Ends the hold a cancel put on the streams, and shuts them down."""
        with self._lock:
            self._held = False
        self.abort_streams()

    def abort_streams(self) -> None:
        """Shuts the call's connections down without cancelling the call."""
        with self._lock:
            streams = list(self._streams)
        for stream in streams:
            stream.abort()

    def detach_all(self) -> None:
        with self._lock:
            self._streams.clear()
            self._reading = False

    def report(self, message: str, *, min_interval: float = 0.2) -> None:
        """Sends a progress notification, at most one per min_interval, never after finish()."""
        self.status_message = message  # a task's statusMessage, with or without progress
        if self._progress is None:
            return
        with self._lock:
            now = time.monotonic()
            if self._done or self.cancelled.is_set() or now - self._last_progress < min_interval:
                return
            self._progress_count += 1
            self._last_progress = now
            self._progress(self._progress_count, message)

    def quiet_for(self) -> float:
        with self._lock:
            return time.monotonic() - max(self._last_progress, self.started)

    def finish(self) -> None:
        with self._lock:
            self._done = True


class BackgroundRun:
    """A response created with `background: true`: its id and the last event seen.

    The id is what survives a dropped stream (resume with GET /responses/{id}?stream=true&
    starting_after=last_sequence) and what a cancel stops server-side. A later owner of the
    call (a task) can keep it and rebuild the answer from it alone.
    """

    def __init__(self, deadline: float, response_id: str | None = None, window=None):
        self.deadline = deadline  # request.timeout_ms from the call's start, across resumes
        self.response_id = response_id
        # A discounted run's completion window (2h, 8h): created unstreamed and polled, since
        # the API streams no windowed response; None: soonest, streamed as always.
        self.window = window
        self.last_sequence: int | None = None
        self.resumes = 0
        self.created = threading.Event()  # set once response_id is known
        if response_id:
            self.created.set()
        # Ask GET /responses/{id} for its status before streaming again: when following a
        # response made elsewhere, and after a resume that brought nothing.
        self.check_status = bool(response_id)
        self.finished = False  # a final event was read: nothing left to cancel
        self.cancel_sent = False
        self.lock = threading.Lock()
        # A windowed run's cancel: done (sent, or nothing to send), and the response as it
        # stood then when it had ended by itself meanwhile (billed: the call's row books it).
        self.cancel_done = threading.Event()
        self.ended: dict | None = None


class _CallStream:
    """An httpcore network stream that tells the current call it is being used."""

    def __init__(self, inner, local):
        self._inner = inner
        self._local = local

    def _mark(self, reading: bool = False) -> None:
        call = getattr(self._local, "call", None)
        if call is not None:
            call.attach(self, reading)

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        self._mark(reading=True)
        return self._inner.read(max_bytes, timeout)

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._mark()
        return self._inner.write(buffer, timeout)

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, *args, **kwargs):
        return _CallStream(self._inner.start_tls(*args, **kwargs), self._local)

    def get_extra_info(self, info: str):
        return self._inner.get_extra_info(info)

    def abort(self) -> None:
        """shutdown(), not close(): close() does not wake a thread blocked in recv()."""
        import socket

        sock = self._inner.get_extra_info("socket")
        try:
            socket.socket.shutdown(sock, socket.SHUT_RDWR)
        except (OSError, TypeError, AttributeError):
            pass


class _CallBackend:
    """Wraps httpcore's network backend so every connection it opens is a _CallStream."""

    def __init__(self, inner, local):
        self._inner = inner
        self._local = local

    def connect_tcp(self, *args, **kwargs):
        return _CallStream(self._inner.connect_tcp(*args, **kwargs), self._local)

    def connect_unix_socket(self, *args, **kwargs):
        return _CallStream(self._inner.connect_unix_socket(*args, **kwargs), self._local)

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def track_connections(http_client, local) -> bool:
    """Routes the HTTP client's connections through _CallBackend; False if its layout is unknown.

    Without it a cancel still stops the call, but the upstream socket closes only when the
    worker next wakes (at the next stream event or the read timeout).
    """
    transports = [getattr(http_client, "_transport", None)]
    transports += list((getattr(http_client, "_mounts", None) or {}).values())
    pools = [getattr(t, "_pool", None) for t in transports if t is not None]
    pools = [p for p in pools if p is not None and hasattr(p, "_network_backend")]
    for pool in pools:
        if not isinstance(pool._network_backend, _CallBackend):
            pool._network_backend = _CallBackend(pool._network_backend, local)
    return bool(pools)


# -- Single flight: identical calls share one request ------------------------------------------


class _Flight:
    """One upstream request and the callers waiting for it.

    The request runs on its own thread with its own Call, so a caller that is cancelled just
    leaves; the request is cancelled only when the last caller has left.
    """

    def __init__(self, tool: str):
        self.upstream = Call(None, tool, self._relay)
        self.result = None
        self.error: BaseException | None = None
        self._callers: dict = {}  # caller Call -> Event set when it may stop waiting
        self._lock = threading.Lock()
        self._done = False
        self._abandoned = False  # its last caller left: the request is being cancelled

    def join(self, caller: Call) -> bool:
        """Adds the caller; False (nothing done) when the flight is abandoned, for a caller
        would only get its cancellation: the caller makes a request of its own."""
        with self._lock:
            if self._abandoned:
                return False
            self._callers[caller] = threading.Event()
        caller.upstream = self.upstream
        caller.attach(_Leaver(self, caller))  # the caller's cancel() calls _Leaver.abort()
        return True

    def leave(self, caller: Call) -> None:
        with self._lock:
            woke = self._callers.pop(caller, None)
            last = not self._callers and not self._done
            self._abandoned = self._abandoned or last
        if woke is not None:
            woke.set()
        if last:
            self.upstream.cancel()

    def finish(self) -> None:
        with self._lock:
            self._done = True
            waiting = list(self._callers.values())
        for woke in waiting:
            woke.set()

    def wait(self, caller: Call):
        with self._lock:
            woke = self._callers.get(caller)
        if woke is not None:
            woke.wait()
        if caller.cancelled.is_set():
            raise Cancelled()
        if self.error is not None:
            raise self.error
        return self.result

    def _relay(self, count: int, message: str) -> None:
        with self._lock:
            callers = list(self._callers)
        for caller in callers:
            caller.report(message, min_interval=0)


class _Leaver:
    """Stands in a caller's stream list, so cancelling the caller takes it off the flight."""

    def __init__(self, flight: _Flight, caller: Call):
        self._flight = flight
        self._caller = caller

    def abort(self) -> None:
        if self._caller.cancelled.is_set():
            self._flight.leave(self._caller)


class SingleFlight:
    """Identical calls in flight in this process make one upstream request."""

    def __init__(self, log: Log):
        self._flights: dict = {}
        self._lock = threading.Lock()
        self._log = log

    def run(self, key: str, caller: Call, fetch, admit=None) -> tuple:
        """(fetch's result, shared): shared is True when another call made the request.

        admit() (a budget, say) is asked only by a call that would make a new request, and
        refuses it by raising; joining a request already in flight costs nothing."""
        admitted = admit is None
        while True:
            with self._lock:
                flight = self._flights.get(key)
                shared = flight is not None and flight.join(caller)
                if shared or admitted:
                    if not shared:  # none, or one abandoned (it leaves the table when it ends)
                        flight = self._flights[key] = _Flight(caller.tool)
                        flight.join(caller)
                    break
            admit()  # outside the lock: it may read the ledger
            admitted = True
        if shared:
            self._log.debug("answer", "joined an identical call in flight (no new request)")
        else:
            thread = threading.Thread(
                target=self._fly, args=(key, flight, fetch), name="upstream", daemon=True
            )
            try:
                thread.start()
            except RuntimeError:
                self._forget(key, flight)
                raise
        return flight.wait(caller), shared

    def _forget(self, key: str, flight: _Flight) -> None:
        """Takes the flight out of the table, unless a newer one has taken its place."""
        with self._lock:
            if self._flights.get(key) is flight:
                del self._flights[key]

    def _fly(self, key: str, flight: _Flight, fetch) -> None:
        try:
            flight.result = fetch(flight.upstream)
        except BaseException as exc:  # noqa: BLE001 - handed to every caller
            flight.error = exc
        finally:
            self._forget(key, flight)
            flight.upstream.finish()
            flight.finish()

    def in_flight(self) -> int:
        with self._lock:
            return len(self._flights)


# -- Failures and retries ------------------------------------------------------------------------


class Failure:
    """What went wrong in one attempt, and whether another attempt may help."""

    def __init__(self, kind: str, retryable: bool, **facts):
        self.kind = kind
        self.retryable = retryable
        self.status = facts.get("status")
        self.code = facts.get("code")
        self.type = facts.get("type")
        self.name = facts.get("name")
        self.detail = facts.get("detail") or ""
        self.retry_after = facts.get("retry_after")
        self.param = facts.get("param")  # the request field a 400 names, e.g. reasoning.effort
        self.response = facts.get("response")  # one it came with, billed: its ledger row's cost


def _retry_after(headers) -> float | None:
    """Seconds the API asked us to wait, from retry-after-ms or Retry-After."""
    if headers is None:
        return None
    try:
        if headers.get("retry-after-ms"):
            return max(0.0, float(headers["retry-after-ms"]) / 1000)
        value = headers.get("retry-after")
        if value:
            try:
                return max(0.0, float(value))
            except ValueError:
                import email.utils

                when = email.utils.parsedate_to_datetime(value)
                return max(0.0, when.timestamp() - time.time())
    except (TypeError, ValueError, OverflowError):
        return None
    return None


def _api_error_fields(body) -> tuple:
    error = body.get("error", body) if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return None, None, ""
    return error.get("code"), error.get("type"), str(error.get("message") or "")


def _previous_response_refused(status: int, body) -> bool:
    """The API does not know the previous_response_id a follow-up named: 400
    previous_response_not_found ("Previous response with id '…' not found."; a gateway may
    say 404), or a 400 naming the parameter (an id of the wrong shape)."""
    error = body.get("error", body) if isinstance(body, dict) else None
    if status not in (400, 404) or not isinstance(error, dict):
        return False
    message = str(error.get("message") or "").lower()
    return (
        error.get("code") == "previous_response_not_found"
        or error.get("param") == "previous_response_id"
        or ("previous response" in message and "not found" in message)
    )


def _kind_of_404(body) -> str:
    """A 404 is a model the key cannot use, or a base URL that is not the API's.

    The real API says `model_not_found` (or names the model) for the first, and "Invalid URL
    (POST /responses)" with a null code for the second; a gateway or web server that is not
    the API at all answers with no JSON error body (often an HTML page).
    """
    code, _, message = _api_error_fields(body)
    lowered = message.lower()
    if code == "model_not_found":
        return "model"
    if code == "unknown_url" or not message or "invalid url" in lowered:
        return "endpoint"
    if "unknown request url" in lowered:
        return "endpoint"
    return "model" if "model" in lowered else "rejected"


OPENAI_REQUIREMENT = "openai>=3.54,<4"  # as pyproject.toml and the inline script metadata


def openai_missing(exc: BaseException) -> str:
    """The one line every entry point (a tools/call, --ask, --doctor) gives when `openai`
    cannot be imported: what failed and the command that installs it for this Python."""
    said = " ".join(str(exc).split())[:200]
    if not isinstance(exc, ImportError):  # a broken install raises anything (issue 39)
        said = f"{type(exc).__name__}: {said}"
    return (
        f"the openai package cannot be imported ({said}); install it: "
        f'{sys.executable} -m pip install "{OPENAI_REQUIREMENT}"'
    )


# What the server takes from `openai` itself: a release without them (openai 0.x, or a 1.x
# without the Responses API) fails here, in one line, not with an AttributeError at a call.
OPENAI_NAMES = ("OpenAI", "DefaultHttpxClient", "APIStatusError", "APIConnectionError")


def load_openai():
    """(`openai`, None), or (None, the one line saying why it cannot be used: not installed,
    broken, or too old to have what the server calls)."""
    try:
        import openai
    except Exception as exc:  # noqa: BLE001 - an ImportError, or what a broken install raises
        return None, openai_missing(exc)
    lacking = [name for name in OPENAI_NAMES if not hasattr(openai, name)]
    if not lacking and not hasattr(openai.OpenAI, "responses"):  # 1.x before the Responses API
        lacking = ["OpenAI.responses"]
    if lacking:
        version = getattr(openai, "__version__", "?")
        return None, (
            f"the openai package {version} is too old (it has no openai.{lacking[0]}); "
            f'install a newer one: {sys.executable} -m pip install "{OPENAI_REQUIREMENT}"'
        )
    return openai, None


def import_openai():
    """`openai`, or a ToolError whose message is load_openai's one line, not a traceback."""
    openai, problem = load_openai()
    if problem:
        raise ToolError(problem)
    return openai


def classify_failure(exc: BaseException) -> Failure:
    """Sorts an exception from one attempt into a Failure."""
    import openai

    name = type(exc).__name__
    if isinstance(exc, UpstreamFailure):
        return exc.failure
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        code, kind_type, message = _api_error_fields(exc.body)
        facts = dict(status=status, code=code, type=kind_type, name=name, detail=message)
        error = exc.body.get("error", exc.body) if isinstance(exc.body, dict) else None
        if isinstance(error, dict) and isinstance(error.get("param"), str):
            facts["param"] = error["param"]
        retry_after = _retry_after(getattr(exc.response, "headers", None))
        if status == 429 and (code == "insufficient_quota" or kind_type == "insufficient_quota"):
            return Failure("quota", False, **facts)
        if status == 429:
            return Failure("rate_limit", True, retry_after=retry_after, **facts)
        if status >= 500:
            return Failure("server", True, retry_after=retry_after, **facts)
        if _previous_response_refused(status, exc.body):
            return Failure("previous_response", False, **facts)
        kind = {401: "auth", 403: "forbidden", 404: _kind_of_404(exc.body)}.get(status, "rejected")
        if status == 403 and "model" in f"{code} {message}".lower():
            kind = "model"
        return Failure(kind, False, **facts)
    if type(exc) is openai.APIError:  # an `error` event inside the stream
        code = getattr(exc, "code", None)
        retryable = code in ("server_error", "rate_limit_exceeded")
        detail = f"{code or 'error'}: {exc.message}"
        return Failure("failed", retryable, code=code, type=exc.type, name=name, detail=detail)
    if isinstance(exc, openai.APITimeoutError):
        return Failure("timeout", False, name=name)
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__
        connect = cause is not None and "Connect" in type(cause).__name__
        detail = str(cause or exc)
        if connect and "certificate" in detail.lower():
            return Failure("tls", False, name=name, detail=detail)
        return Failure("connect" if connect else "dropped", not connect, name=name, detail=detail)
    if isinstance(exc, (ValueError, KeyError, TypeError, AttributeError)):
        return Failure("malformed", False, name=name, detail=str(exc))
    return Failure("unexpected", False, name=name, detail=str(exc))


def background_refused(exc: BaseException) -> bool:
    """A create refused because of `background: true`, not for anything else in it.

    OpenAI refuses background mode where responses cannot be stored (store=false, and
    organizations or projects whose data policy forbids it); gateways and other Responses
    servers refuse the parameter itself. Both answer a 4xx whose error names `background`
    in `param` or its message.
    """
    import openai

    if not isinstance(exc, openai.APIStatusError) or exc.status_code not in (400, 403, 422):
        return False
    body = exc.body if isinstance(exc.body, dict) else {}
    error = body.get("error", body)
    if not isinstance(error, dict):
        return False
    return error.get("param") == "background" or "background" in str(error.get("message")).lower()


def window_refused(exc: BaseException) -> bool:
    """A create refused because of `background_options` (its completion window): a gateway or
    other Responses server that lacks the parameter, or an API that does not take the window
    here. Both answer a 4xx whose error names it in `param` or its message."""
    import openai

    if not isinstance(exc, openai.APIStatusError) or exc.status_code not in (400, 403, 422):
        return False
    body = exc.body if isinstance(exc.body, dict) else {}
    error = body.get("error", body)
    if not isinstance(error, dict):
        return False
    said = str(error.get("message")).lower()
    named = str(error.get("param") or "").startswith("background_options")
    return named or "background_options" in said or "completion_window" in said


class StreamEnded(ValueError):
    """The event stream closed cleanly before its final event (malformed, unless resumable)."""


class UpstreamFailure(Exception):
    """A failure the stream itself reported (an `error` or `response.failed` event)."""

    def __init__(self, failure: Failure):
        super().__init__(failure.detail)
        self.failure = failure


def _stream_failure(error, name: str, response=None) -> UpstreamFailure:
    error = error if isinstance(error, dict) else {}
    code = error.get("code")
    retryable = code in ("server_error", "rate_limit_exceeded")
    detail = f"{code or 'error'}: {error.get('message') or 'no message'}"
    facts = dict(code=code, name=name, detail=detail, response=response)
    return UpstreamFailure(Failure("failed", retryable, **facts))


def _timeout_message(failure: Failure, tool: str, config: Config) -> str:
    """What a call out of time says: of its completion window when it ran in one (request.
    timeout_ms bounds each poll only, so raising it would change nothing)."""
    if failure.name == "window":
        return (
            f"the run did not end within its {failure.detail} completion window (and "
            f"{WINDOW_MARGIN_S // 60} min more), so it was cancelled: ask again, or set "
            f"model_profiles.{tool}.completion_window to soonest to be answered without waiting"
        )
    if tool == DEEP_TOOL and failure.name == "deadline":
        return (
            f"the deep research run did not finish within {run_timeout_ms(config, tool)} "
            "ms (request.deep_timeout_ms): raise it, or lower "
            "model_profiles.answer_deep.max_tool_calls"
        )
    timeout_ms = config.get("request", "timeout_ms")
    return (
        f"no answer within {timeout_ms} ms (request.timeout_ms): "
        "raise request.timeout_ms or use answer_quick"
    )


def failure_message(failure: Failure, *, tool: str, model: str, config: Config, tries: int):
    """The one line a person reads, naming what happened and what to do about it."""
    base_url = redact_url(config.get("openai", "base_url"))  # a gateway's password: never
    key_env = config.get("openai", "api_key_env")
    retries = tries - 1
    after = f" after {retries} {'retry' if retries == 1 else 'retries'}" if retries else ""
    if failure.kind == "rejected":
        refused = refused_setting(failure, tool, config)
        if refused:
            return f"{refused[0]}: {refused[1]}"
    messages = {
        "auth": f"the API key in {key_env} was rejected (HTTP 401): set a valid key",
        "model": (
            f"model {model!r} is not available to this API key (HTTP {failure.status}; it may "
            f"have shut down: {DEPRECATIONS_URL}): set "
            f"{setting_name(config, _profile_holder(config, tool, 'model'), 'model')} to "
            f"{REPLACEMENTS.get(_undated(model)) or 'a model your key can use'}"
        ),
        "endpoint": _endpoint_message(failure, base_url, config.sources),
        "forbidden": (
            f"the API refused this key (HTTP 403): {_one_line(failure.detail, 160)}; check "
            "the key's project permissions and whether the API is offered in your region"
        ),
        "quota": (
            "the API key's quota is exhausted (insufficient_quota): "
            "add credit or raise the project's usage limit"
        ),
        "rate_limit": f"rate limited by the API (HTTP 429){after}: wait a minute and try again",
        "server": f"the API failed with HTTP {failure.status}{after}: try again later",
        "rejected": (
            f"the API rejected the request (HTTP {failure.status}): "
            f"{_one_line(failure.detail, 200) or 'no reason given'}"
        ),
        "timeout": _timeout_message(failure, tool, config),
        "connect": (
            f"cannot connect to {base_url}: check openai.base_url, the network and any "
            "HTTPS_PROXY setting"
        ),
        "tls": (
            f"the TLS certificate of {base_url} is not trusted: behind a proxy or gateway with "
            "a private CA, set SSL_CERT_FILE to its CA bundle (PEM)"
        ),
        "dropped": f"the connection to {base_url} dropped{after}: try again",
        "malformed": (
            f"malformed response from {base_url}: {_one_line(failure.detail, 200)}; "
            "check that openai.base_url is a Responses API endpoint"
        ),
        "failed": f"the model reported an error{after}: {_one_line(failure.detail, 200)}",
        "gone": (
            f"the background response {failure.detail} is no longer known to the API (HTTP 404): "
            "try again"
        ),
        "previous_response": (
            f"previous_response_id is not known to the API (HTTP {failure.status}: "
            f"{_one_line(failure.detail, 160) or 'not found'}): a response is kept 30 days, "
            "only by the project that made it, and only when stored; ask again without "
            "previous_response_id, or pass the response_id of a recent answer"
        ),
        "cancelled_upstream": (
            f"the background response was cancelled upstream ({failure.detail}), by another "
            "client or server instance"
        ),
    }
    return messages.get(failure.kind, f"unexpected error: {_one_line(failure.detail, 200)}")


# -- Refusals: a profile setting the API refuses for its model ---------------------------------

# The request fields a 400 names (`param`) for the profile keys that set them.
PROFILE_PARAMS = {
    "reasoning": "reasoning_effort",
    "reasoning.effort": "reasoning_effort",
    "reasoning_effort": "reasoning_effort",
    "text.verbosity": "verbosity",
    "verbosity": "verbosity",
}


def refused_setting(failure: Failure, tool: str, config: Config) -> tuple[str, str] | None:
    """(what was refused, the fix) for a 400 that refuses one of the profile's settings for its
    model (an effort, a verbosity, web search with effort minimal): the fix names the key to
    change and what the model accepts. None for any other refusal."""
    if failure.status != 400:
        return None
    cost = refused_cost_control(failure, tool, config)
    if cost or not failure.param:
        return cost
    profile = config.profile(tool)
    model, param = profile["model"], failure.param
    key = PROFILE_PARAMS.get(param)
    search = False
    if key is None and param.startswith("tools"):
        words = f"{param} {failure.detail}"
        if profile.get("reasoning_effort") == "minimal" and "minimal" in words:
            key, search = "reasoning_effort", True  # web_search cannot run with minimal
        elif "search_context_size" in words:
            key = "search_context_size"
        else:
            return (
                f"the API refused the web_search tool for {model} (HTTP 400: "
                f"{_one_line(failure.detail, 160) or 'no reason given'})",
                f"set {setting_name(config, tool, 'model')} to a model that can search the web",
            )
    if key is None or key not in profile:
        return None
    if failure.code == "unsupported_parameter":
        # Left out and retried (Refusals) unless the tables know the model takes the value:
        # then the endpoint is at odds with OpenAI's models, which no profile key can fix.
        return (
            f"the API refused {param} for {model}, which is known to take {key} "
            f"{profile[key]!r} (HTTP 400, unsupported_parameter)",
            "try again; if every call fails so, the endpoint (openai.base_url) does not serve "
            f"{model} as OpenAI does",
        )
    accepted = _supported_values(failure.detail) or accepted_values(model, key, search)
    if not accepted:
        return None
    what = "web search with reasoning_effort" if search else key
    fix = setting_fix(config, tool, key, profile[key], model, accepted, search)
    return f"the API refused {what} {profile[key]!r} for {model} (HTTP 400)", fix


# The cost controls a 400 may refuse: sent only when set, so a refusal names the key that set
# them (the tool's own, or `answer`'s that it inherits) rather than "the API rejected".
COST_CONTROLS = ("service_tier", "max_tool_calls")


def refused_cost_control(failure: Failure, tool: str, config: Config) -> tuple[str, str] | None:
    """(what was refused, the fix) for a 400 refusing the profile's service_tier or
    max_tool_calls: by `param`, or, as the API words a tier a model lacks ("Flex is not
    available for this model.", no param), by the tier named in the message. None otherwise."""
    profile = config.profile(tool)
    key = failure.param if failure.param in COST_CONTROLS else None
    tier = profile.get("service_tier")
    if key is None and not failure.param and tier is not None:
        words = f"{failure.detail}".lower().replace("service tier", "service_tier")
        if "service_tier" in words or f"{tier} is not" in words:
            key = "service_tier"
    if key is None or profile.get(key) is None:
        return None
    model, value = profile["model"], profile[key]
    name = setting_name(config, _profile_holder(config, tool, key), key)
    if failure.code == "unsupported_parameter":  # no value would do: leave it unset
        return (
            f"the API refused {key} for {model}, which takes no {key} (HTTP 400)",
            f"set {name} to null",
        )
    said = f"the API refused {key} {value!r} for {model} (HTTP 400"
    if key == "service_tier":
        accepted = [v for v in _supported_values(failure.detail) if v in SERVICE_TIERS]
        if accepted:
            best = next((v for v in ("default", "auto") if v in accepted), accepted[0])
            return f"{said})", f"set {name} to {best} ({model} accepts {', '.join(accepted)})"
        return f"{said}: {_one_line(failure.detail, 120)})", f"set {name} to default or null"
    bound = re.search(r"[Ee]xpected a value ([<>])= ?(\d+)", failure.detail or "")
    if bound:
        most = "at most" if bound[1] == "<" else "at least"
        return f"{said})", f"set {name} to {bound[2]} ({model} accepts {most} {bound[2]})"
    return f"{said}: {_one_line(failure.detail, 120)})", f"set {name} to another value or null"


def _is_default_setting(config: Config, tool: str, key: str) -> bool:
    """Whether the tool's `key` is a built-in default (its own, or `answer`'s it inherits)."""
    where = config.sources.get(("model_profiles", _profile_holder(config, tool, key), key))
    return where is None or where == "default" or where.startswith("default ")


def _profile_holder(config: Config, tool: str, key: str) -> str:
    """The profile whose `key` the tool uses: its own when set there, else `answer`'s."""
    own = (config.values["model_profiles"].get(tool) or {}).get(key)
    return tool if own is not None or _row(tool).get("opt_in") else "answer"


def _supported_values(message: str) -> tuple[str, ...]:
    """The values an `unsupported_value` message lists: "Supported values are: 'a', and 'b'."."""
    found = re.search(r"[Ss]upported values are:?\s*(.*)", message or "")
    return tuple(re.findall(r"'([^']+)'", found[1])) if found else ()


def accepted_values(model: str, key: str, search: bool = False) -> tuple[str, ...]:
    """What `model` takes for the profile `key`, as far as this module knows (() = unknown);
    with web search, reasoning effort minimal is never among them."""
    if key == "reasoning_effort":
        efforts = model_efforts(model) or (EFFORTS if search else ())
        return tuple(e for e in efforts if not (search and e == "minimal"))
    if key == "verbosity":
        return model_verbosities(model)
    return VERBOSITIES if key == "search_context_size" else ()


def known_to_take(model: str, key: str, value) -> bool:
    """Whether the tables know `model` (a model of a family they list) takes `value` for the
    profile `key`; False for a model they do not know (a gateway's alias, a fine-tune)."""
    efforts = model_efforts(model)
    if key == "reasoning_effort":
        return value in (efforts or ())
    listed = _by_family(MODEL_VERBOSITIES, model) or (efforts and supports_verbosity(model))
    return key == "verbosity" and bool(listed) and value in model_verbosities(model)


def setting_fix(config: Config, tool: str, key: str, value, model: str, accepted, search=False):
    """`set model_profiles.<tool>.<key> to <the accepted value nearest the refused one>
    (<model> accepts only X)`: the fix in the words a person acts on."""
    if key == "reasoning_effort" and "minimal" in accepted and len(accepted) > 1:
        accepted, search = [a for a in accepted if a != "minimal"], True  # every call searches
    best = nearest_value(key, value, accepted)
    only = "only " if len(accepted) == 1 else ""
    with_search = " with web search" if search else ""
    return (
        f"set {setting_name(config, tool, key)} to {best} "
        f"({model} accepts {only}{', '.join(accepted)}{with_search})"
    )


def setting_name(config: Config, tool: str, key: str) -> str:
    """The setting a person changes: model_profiles.<tool>.<key>, or the environment variable
    or flag that sets it now (which a config file would not override)."""
    path = ("model_profiles", tool, key)
    where = config.sources.get(path, "")
    if where.startswith(("env ", "flag ")):
        return f"{where.split(' ', 1)[1]} (model_profiles.{tool}.{key})"
    return ".".join(path)


def _endpoint_message(failure: Failure, base_url: str, sources: dict) -> str:
    said = _one_line(failure.detail, 120) or "with no API error in the body"
    where = sources.get(("openai", "base_url"), "default")
    hint = (
        "is it an OpenAI-compatible Responses API?"
        if base_url.rstrip("/").endswith("/v1")
        else "it usually ends in /v1"
    )
    return (
        f"{base_url} returned {failure.status} {said}: check openai.base_url (from {where}); {hint}"
    )


def backoff_delay(retry: int, retry_after: float | None) -> float:
    """Seconds before retry number `retry` (1-based): the API's word, else exponential + jitter."""
    import random

    if retry_after is not None:
        return min(retry_after, 60.0)
    return min(8.0, 0.5 * 2 ** (retry - 1)) * random.uniform(0.5, 1.0)


# Where each adaptable profile key goes in a request: (field, inner key).
PROFILE_FIELDS = {"reasoning_effort": ("reasoning", "effort"), "verbosity": ("text", "verbosity")}


def _sent(request: dict, key: str):
    field, inner = PROFILE_FIELDS[key]
    part = request.get(field)
    return part.get(inner) if isinstance(part, dict) else None


def _refused_key(failure: Failure) -> str | None:
    """The profile key a 400 refuses, by its `param`, else (a gateway that sends none) by the
    parameter its message names: "Unsupported parameter: 'reasoning.effort' ..."."""
    if failure.param:
        return PROFILE_PARAMS.get(failure.param)
    named = re.match(r"Unsupported (?:parameter|value): '([^']+)'", failure.detail or "")
    return PROFILE_PARAMS.get(named[1]) if named else None


# Creates one call may make while adapting to refusals (both keys, a value changed at most
# twice each), so an API that refuses every value it lists cannot loop a call forever.
MAX_ADAPTED_TRIES = 5


class Refusals:
    """What models refused of a profile's reasoning effort or verbosity, remembered for the
    process: a parameter a model takes none of (HTTP 400 unsupported_parameter: a gateway
    alias, a fine-tune, an older model) is left out for that model whoever set it; a built-in
    default value it refuses (unsupported_value) becomes the nearest value it lists, for the
    tools whose value is that default only. A value the user set is never changed, and a value
    the module's tables know the model takes is never dropped on a 400."""

    def __init__(self, config: Config, log: Log):
        self._config, self._log = config, log
        self._dropped: set = set()  # (model, key): the model takes no such parameter
        self._instead: dict = {}  # (model, key, refused default) -> the value sent instead
        self._warned: set = set()  # (model, setting name): said once each
        self._lock = threading.Lock()

    def fit(self, tool: str, request: dict) -> dict:
        """The request with what its model refused before left out or changed (see adapt)."""
        model, fitted = request["model"], dict(request)
        for key, (field, inner) in PROFILE_FIELDS.items():
            sent = _sent(fitted, key)
            if sent is None:
                continue
            with self._lock:
                dropped = (model, key) in self._dropped
                instead = self._instead.get((model, key, sent))
            if dropped:
                rest = {k: v for k, v in fitted[field].items() if k != inner}
                fitted.pop(field)
                if rest:
                    fitted[field] = rest
                self._say(tool, model, key, sent, None)
            elif instead is not None and _is_default_setting(self._config, tool, key):
                fitted[field] = {**fitted[field], inner: instead}
                self._say(tool, model, key, sent, instead)
        return fitted

    def adapt(self, tool: str, request: dict, failure: Failure) -> dict | None:
        """The request again without (or with an accepted value of) the reasoning effort or
        verbosity its model refused (HTTP 400), remembered (see the class); None when the call
        must fail instead, naming the key: a value the user set that the model refuses, or one
        the tables say the model takes."""
        key = _refused_key(failure)
        if failure.status != 400 or key is None:
            return None
        model, sent = request["model"], _sent(request, key)
        if sent is None or known_to_take(model, key, sent):
            return None  # not sent, or known to be taken: one 400 does not undo the tables
        if failure.code == "unsupported_parameter":
            with self._lock:
                self._dropped.add((model, key))  # another call may have learnt it first
            return self._refit(tool, request)
        if not _is_default_setting(self._config, tool, key):
            return None  # the user's value: theirs to change
        accepted = [v for v in _supported_values(failure.detail) if v != "minimal"]
        if not accepted:
            return None
        instead = nearest_value(key, sent, accepted)
        if instead == sent:
            return None  # the API lists the value it refused: nothing left to adapt
        with self._lock:
            self._instead[(model, key, sent)] = instead
        return self._refit(tool, request)

    def _refit(self, tool: str, request: dict) -> dict | None:
        fitted = self.fit(tool, request)
        return None if fitted == request else fitted

    def _say(self, tool: str, model: str, key: str, value, instead) -> None:
        """One stderr warning per model and setting, naming the key that set the value."""
        name = setting_name(self._config, _profile_holder(self._config, tool, key), key)
        with self._lock:
            if (model, name) in self._warned:
                return
            self._warned.add((model, name))
        if instead is None:
            self._log.say(
                f"warning: {model} takes no {key} (HTTP 400, unsupported_parameter), so this "
                f"server leaves {name} ({value!r}) out of its requests to {model}"
            )
        else:
            self._log.say(
                f"warning: {model} refused {key} {value!r} (HTTP 400, {name}), so this server "
                f"sends {instead} instead; set the key to a value {model} takes to silence this"
            )


# -- Streaming: progress events, a stream opened and resumed -----------------------------------

PROGRESS_EVENTS = {
    "response.queued": "queued",
    "response.in_progress": "thinking",
    "response.web_search_call.searching": "searching the web",
    "response.web_search_call.completed": "search done",
    "response.output_text.delta": "writing the answer",
}


def _deep_progress(kind: str, event: dict, message: str | None) -> str | None:
    """A deep research run's progress words: what each web action did, said when it ends
    (its action is known only then), instead of a "search done" for page opens too."""
    if kind == "response.web_search_call.completed":
        return None
    item = event.get("item") if kind == "response.output_item.done" else None
    if not isinstance(item, dict) or item.get("type") != "web_search_call":
        return message
    action = item.get("action") if isinstance(item.get("action"), dict) else {}
    return {"open_page": "read a page", "find_in_page": "looked within a page"}.get(
        action.get("type"), "search done"
    )


def _drain(stream, call: Call, limit: float = 1.0) -> None:
    """Reads what follows response.completed, so HTTP/1.1 can reuse the connection.

    The rest is normally just the end of the chunked body; an upstream that stalls there
    instead has the connection cut after `limit` seconds, and the answer stands.
    """
    guard = threading.Timer(limit, call.abort_streams)
    guard.daemon = True
    guard.start()
    try:
        for _ in stream:
            pass
    except Exception:  # noqa: BLE001 - the answer is complete already
        pass
    finally:
        guard.cancel()


class _NotSent(Exception):
    """Raised by the warm-up's HTTP client instead of sending a request."""


def _refuse_to_send(request) -> None:
    raise _NotSent()


DEEP_NEEDS_BACKGROUND = (
    "answer_deep runs only in background mode, which the API refused for this key (a Zero Data "
    "Retention organization or project cannot store responses): use answer_detailed instead"
)


def _stop_asking(config: Config) -> str:
    """How to stop asking for background mode, naming only keys that exist: answer_deep has
    no background key (it runs only in background mode), so it is turned off instead."""
    keys = [
        f"model_profiles.{tool}.background to false"
        for tool in TOOL_NAMES
        if tool != DEEP_TOOL and config.background(tool)
    ]
    if DEEP_TOOL in enabled_tools(config):
        keys.append(f"tools.{DEEP_TOOL} to false ({DEEP_TOOL} runs only in background mode)")
    return f"to stop asking, set {' and '.join(keys)}" if keys else "nothing asks for it again"


def run_timeout_ms(config: Config, tool: str) -> int:
    """The time a call may take in all: request.deep_timeout_ms for answer_deep (a deep
    research run takes minutes), request.timeout_ms for the others."""
    key = "deep_timeout_ms" if tool == DEEP_TOOL else "timeout_ms"
    return config.get("request", key)


# A discounted run may take its whole window: its deadline is the window and this margin (the
# create, the last poll's wait, a run finishing as its window closes), never less than the
# tool's own time (window_timeout_ms).
WINDOW_MARGIN_S = 900
# Polling a discounted run (GET /responses/{id}): a queued run may start at once when there
# is capacity, so the first look comes soon; then each wait doubles up to the cap, so hours in
# a window cost a request a minute, not one a second, and an answer is at most a minute late.
WINDOW_POLL_FIRST_S = 0.5
WINDOW_POLL_BACKOFF = 2.0
WINDOW_POLL_MAX_S = 60.0


def window_timeout_ms(config: Config, tool: str, window=None) -> int:
    """The time a call may take in all (run_timeout_ms); for a discounted run at least its
    window and WINDOW_MARGIN_S."""
    own = run_timeout_ms(config, tool)
    if window not in WINDOW_SECONDS:
        return own
    return max(own, (WINDOW_SECONDS[window] + WINDOW_MARGIN_S) * 1000)


# A server-side cancel is best effort: it must not hold up the thread that cancels for long.
CANCEL_TIMEOUT_S = 5.0
# How long a cancelled background create may keep reading for response.created, its first event
# (normally well under a second), to learn the id that cancels it server-side.
NAMING_WAIT_S = 3.0


def _open_stream(client, request: dict, timeout):
    """POST /responses with `stream: true`; iterating the result yields each event as a dict.

    `client.post` with `cast_to=object` is the SDK's way to call an endpoint without its
    typed models: it still sends, authenticates and frames the server-sent events, raises
    APIError for an `error` event and wraps transport errors, but skips decoding every event
    into pydantic models, which took over half of a call's CPU time (pydantic tries the ~60
    event types in turn) and ~10 MiB for the models. Only the final response is read, and as
    a dict, which is what the answer is shaped from.
    """
    import openai

    return client.post(
        "/responses",
        body={**request, "stream": True},
        cast_to=object,
        options={} if timeout is None else {"timeout": timeout},
        stream=True,
        stream_cls=openai.Stream[object],
    )


def _resume_stream(client, run: BackgroundRun, timeout):
    """GET /responses/{id}?stream=true&starting_after=N: the events after the last one seen
    (all of them when none was), framed and raised as _open_stream's are."""
    import openai

    params: dict = {"stream": "true"}
    if run.last_sequence is not None:
        params["starting_after"] = run.last_sequence
    options: dict = {"params": params}
    if timeout is not None:
        options["timeout"] = timeout
    return client.get(
        f"/responses/{run.response_id}",
        cast_to=object,
        options=options,
        stream=True,
        stream_cls=openai.Stream[object],
    )


def _status_of(client, run: BackgroundRun, timeout) -> dict:
    """GET /responses/{id}: the response object as it is now (status, and output when done)."""
    options = {} if timeout is None else {"timeout": timeout}
    response = client.get(f"/responses/{run.response_id}", cast_to=object, options=options)
    if not isinstance(response, dict):
        raise ValueError("GET /responses/{id} returned no response object")
    return response


def _resumable(exc: BaseException, failure: Failure) -> bool:
    """A background stream that stopped short, or a resume the API could not serve just now."""
    return isinstance(exc, StreamEnded) or failure.kind in ("dropped", "server", "rate_limit")


def reservation_floor(config: Config, tool: str) -> float:
    """The least a call of `tool` reserves against a budget: one web search; for answer_deep,
    whose runs search dozens of times, the searches its max_tool_calls allows (its first runs
    have no history for a mean, and would otherwise reserve a cent for a run of dollars).
    Without a cap (null) a run may search more, never less: the default cap's searches."""
    search = config.get("pricing", "web_search_per_1k") / 1000
    if tool != DEEP_TOOL:
        return search
    cap = config.profile(tool).get("max_tool_calls") or _row(tool)["max_tool_calls"]
    return search * max(1, cap)


# -- Around a call: its estimate, its log lines, the retirement check --------------------------


class CallEstimator:
    """A call's estimate from its tool's typical cost and input (Ledger.reserve reads them, from
    the tool's calls of the call's `model`): Pricing.estimate, at the tier the request asks
    for, with what it brings: its question, its files and, for a follow-up, the `carried`
    tokens of its earlier turns (billed again as input; _Carried knows them when this process
    made the response it follows), in the completion `window` it will run in (None: soonest).
    `rebilled`: (searches, rate) when it runs in another window than the one its tool's recent
    calls were billed at: their token part (what is over `searches`) times `rate`."""

    def __init__(
        self, pricing: Pricing, request: dict, args, carried: int = 0, window=None, rebilled=None
    ):
        brought = text_tokens(request_text(request))
        brought += sum(f.tokens for f in args.get("files") or ())
        brought += carried
        # Besides: at least the instructions; a recent call's input had them too.
        self._besides = text_tokens(request.get("instructions") or "")
        self._pricing, self._brought = pricing, brought
        self.model, self._tier = request["model"], request.get("service_tier")
        self.window, self._rebilled = window, rebilled

    def __call__(self, usd: float, tokens: int) -> float:
        if self._rebilled is not None:
            searches, rate = self._rebilled
            usd = min(usd, searches) + max(0.0, usd - searches) * rate
        model, tier, brought, besides = self.model, self._tier, self._brought, self._besides
        return self._pricing.estimate(model, tier, brought, max(besides, tokens), usd, self.window)


def _log_request(log: Log, tool: str, request: dict) -> None:
    if not log.debug_enabled:
        return
    model = request["model"]
    log.debug(
        "answer",
        f"profile={tool} model={model} supports={{verbosity:"
        f"{str(supports_verbosity(model)).lower()}, reasoning:"
        f"{str(supports_reasoning(model)).lower()}}}",
    )
    filters = "on" if "filters" in request["tools"][0] else "off"
    log.debug(
        "answer",
        f"request summary tools=web_search(on) domain_filter={filters} "
        f"reasoning={'on' if 'reasoning' in request else 'off'} "
        f"text.verbosity={'on' if 'text' in request else 'off'}",
    )


def _log_failure(log: Log, attempt: int, failure: Failure, exc: BaseException) -> None:
    if not log.debug_enabled:
        return
    body = getattr(exc, "body", None)
    excerpt = json.dumps(body, ensure_ascii=False)[:300] if body is not None else ""
    log.debug(
        "openai(client)",
        f"error attempt={attempt} status={failure.status} name={failure.name} "
        f"code={failure.code} msg={json.dumps(_one_line(failure.detail, 200))} "
        f"body={json.dumps(excerpt, ensure_ascii=False)}",
    )


# A failed look at the shutdown dates is tried again after each of these (seconds), then left
# to the next start or the next day.
RETIREMENT_RETRY_S = (60.0, 600.0)


class RetirementCheck:
    """A running server's look at its models' shutdown dates: once per start, after the
    first call has its reply (AnswerEngine.answered), at most once a day across the
    processes that share the state. The day is marked checked only once GET /v1/models has
    answered: a failure gives the day back (another process, or a later start, looks
    again), is said once on stderr, and is tried again after each of RETIREMENT_RETRY_S.
    Calls go on whatever happens here."""

    def __init__(self, config: Config, log: Log, state, client):
        self._config, self._log, self._state, self._client = config, log, state, client
        self._failures = 0

    def run(self) -> None:
        config, log = self._config, self._log
        if not config.get("openai", "check_retirements"):
            log.debug("retirements", "not checked: openai.check_retirements is false")
            return
        today = today_in(config.get("policy", "timezone"))
        if not claim_daily(self._state, "retirements", today):
            log.debug("retirements", "not checked: checked today already")
            return
        try:
            listing = list_models(self._client())
        except Exception as exc:  # noqa: BLE001 - a warning not given is no failure
            release_daily(self._state, "retirements", today)
            self._failed(exc)
            return
        try:
            self._warn(shutdown_dates(listing, lambda text: log.debug("retirements", text)), today)
        except Exception as exc:  # noqa: BLE001 - a shape no one foresaw: said, never raised
            log.debug("retirements", f"dates not read: {type(exc).__name__}")

    def _warn(self, dates: dict, today: str) -> None:
        settings = model_settings(self._config, enabled_tools(self._config))
        for tool, model, key in settings:
            date = shutdown_date_of(dates, model)
            if date:
                level, what, fix = retirement_words(model, str(date), today, key)
                done = "calls to it fail" if level == "retired" else "calls to it will fail then"
                self._log.say(f"warning: {tool}: {what} ({done}): {fix}")
        self._log.debug("retirements", f"checked the shutdown dates of {len(settings)} model(s)")

    def _failed(self, exc: BaseException) -> None:
        """Says the first failure on stderr (later ones are debug lines), and tries again."""
        why = _one_line(self._log.redact(f"{type(exc).__name__}: {exc}"), 200)
        retry = (
            RETIREMENT_RETRY_S[self._failures] if self._failures < len(RETIREMENT_RETRY_S) else None
        )
        self._failures += 1
        then = (
            f"trying again in {retry:g} s"
            if retry is not None
            else "not tried again until the next start"
        )
        if self._failures == 1:
            self._log.say(
                f"warning: the models' shutdown dates could not be read ({why}); {then} "
                "(openai.check_retirements: false turns the check off)"
            )
        else:
            self._log.debug("retirements", f"not checked: {why}; {then}")
        if retry is not None:
            timer = threading.Timer(retry, self.run)
            timer.daemon = True
            timer.start()


# -- ResponsesClient: the OpenAI call, streamed, retried, cancelled ----------------------------


class ResponsesClient:
    """The OpenAI side of a call: the SDK client, the streamed request and its events, the retry
    loop and its recovery strategies (adapting refused settings, flex to default, resuming a
    background response), and background mode (BackgroundMode).

    One OpenAI client per process, made on first use and shared by every worker thread so
    connections are reused. The SDK's own retries are off: retries happen here, once.
    """

    def __init__(self, config: Config, log: Log, refusals: Refusals, background_always=False):
        self._config = config
        self._log = log
        self._client = None
        self._client_lock = threading.Lock()
        self._warming = False
        self._local = threading.local()  # the Call a worker thread is serving
        self.refusals = refusals  # what models refused of the default settings
        self.background = BackgroundMode(
            config, log, self.client, self._as_tool_error, background_always
        )

    def warm_up(self, delay: float = 0.3) -> None:
        """Loads `openai` and builds the client in the background, so the first call is fast.

        The short delay keeps the import (a few hundred ms of CPU) from competing with the
        handshake messages that follow initialize.
        """
        with self._client_lock:
            if self._warming:
                return
            self._warming = True
        timer = threading.Timer(delay, self._warm)
        timer.daemon = True
        timer.start()

    def _warm(self) -> None:
        """Does now what the first call would otherwise pay for: importing `openai` and
        building the client (a few hundred ms of CPU), then opening one stream as a call does
        on a copy of the client whose HTTP client refuses to send it (the SDK runs `uname` for
        its platform headers on the first request). Nothing is sent anywhere."""
        try:
            import openai

            client = self.client()
            today = today_in(self._config.get("policy", "timezone"))
            request = build_request(TOOL_NAMES[0], {"query": "warm-up"}, self._config, today)
            # verify=False: no certificate store loaded a second time (about 1 MiB held for
            # the life of the process) for a client whose hook stops every request unsent.
            refuse = openai.DefaultHttpxClient(
                event_hooks={"request": [_refuse_to_send]}, verify=False
            )
            try:
                _open_stream(client.with_options(http_client=refuse), request, None)
            except _NotSent:
                pass  # stopped by _refuse_to_send before any connection was opened
            finally:
                refuse.close()
        except Exception:  # noqa: BLE001 - the first call reports whatever this hit
            pass

    def client(self):
        with self._client_lock:
            if self._client is None:
                self._client = self._make_client()
            return self._client

    def _make_client(self):
        problem = api_key_problem(self._config) or ": ".join(ca_bundle_problem() or ())
        if problem:
            raise ToolError(problem)
        openai = import_openai()

        # The default client honours HTTPS_PROXY / NO_PROXY and SSL_CERT_FILE from the env.
        http_client = openai.DefaultHttpxClient()
        if not track_connections(http_client, self._local):
            self._log.debug("openai(client)", "connection tracking unavailable")
        return openai.OpenAI(
            api_key=api_key(self._config),
            base_url=self._config.get("openai", "base_url"),
            max_retries=0,
            http_client=http_client,
        )

    def fit(self, tool: str, args: dict, today: str) -> dict:
        """The call's request, without what its model is known to refuse (Refusals.fit)."""
        return self.refusals.fit(tool, build_request(tool, args, self._config, today))

    def request(
        self, tool: str, request: dict, call: Call, today: str, response_id=None, window=None
    ):
        """Runs the request with retries (resumes, in background); returns (answer, meta,
        response). With response_id, follows that background response instead of creating
        (polling it when it was created in a completion `window`: it has no stream); else the
        call's window is BackgroundMode.window's."""
        config = self._config
        model = request["model"]
        _log_request(self._log, tool, request)
        client = self.client()
        started = time.monotonic()
        max_retries = config.get("request", "max_retries")
        if response_id is None:
            window = self.background.window(tool, call.window, request)
            if call.window is not None and window != call.window:
                # The person chose the discount, and another call's refusal closed windows
                # after this one was checked (AnswerEngine._check_window_open): not in full.
                raise NotRun(DISCOUNT_GONE_NOT_RUN, "declined", {})
        run = self.background.run(tool, call, started, response_id, window)
        attempt = 0
        stalls = 0  # resumes in a row that brought no new event
        while True:
            if run is None or run.response_id is None:
                attempt += 1  # a create; a resume is never one
            seen = run.last_sequence if run is not None else None
            try:
                response = self._attempt(client, request, call, run)
                answer = shape_answer(
                    response,
                    config.get("policy", "max_citations"),
                    today,
                    model=model,
                    headers=sources_headers(config.instructions),
                )
                # In the answer itself, not only in _meta (which the model does not see): the
                # id a follow-up passes as previous_response_id.
                answer["response_id"] = response.get("id")
                meta = usage_meta(response, time.monotonic() - started, attempt)
                meta["web_searches"] = max(meta["web_searches"], call.searches)  # retries' too
                if run is not None:
                    meta["background"] = True
                    meta["resumes"] = run.resumes
                if run is not None and window_taken(response, run.window):  # at the discount
                    meta["window"] = run.window  # (Spending.book)
            except Exception as exc:  # noqa: BLE001 - every failure is classified below
                if call.cancelled.is_set():  # a windowed run may have ended before the cancel
                    raise Cancelled(self.background.billed_at_cancel(run)) from None
                failure = classify_failure(exc)
                _log_failure(self._log, attempt, failure, exc)
                if run is not None and run.window and not run.response_id and window_refused(exc):
                    # Before background_refused, whose test the word "background" in
                    # background_options would pass: only the window is off, at full price.
                    self.background.windows_refused(failure)
                    if call.window is not None:  # the person chose this discount: no full price
                        said = DISCOUNT_REFUSED_NOT_RUN.format("the completion window")
                        raise NotRun(said, "declined", {}) from None
                    call.background = None
                    run = self.background.run(tool, call, started)
                    continue
                if run is not None and run.response_id is None and background_refused(exc):
                    self.background.refused(tool, failure)
                    if tool == DEEP_TOOL:  # half an hour on one open stream is no fallback
                        raise ToolError(DEEP_NEEDS_BACKGROUND, failure.detail) from None
                    if call.window is not None and run.window:  # as for a refused window
                        said = DISCOUNT_REFUSED_NOT_RUN.format(
                            "background mode (which a window needs)"
                        )
                        raise NotRun(said, "declined", {}) from None
                    run = call.background = None
                    continue
                adapted = self.refusals.adapt(tool, request, failure)
                adapting = run is None or run.response_id is None
                if adapted is not None and adapting and attempt <= MAX_ADAPTED_TRIES:
                    request = adapted
                    continue
                if run is not None and run.response_id is not None:
                    stalls = 0 if run.last_sequence != seen else stalls + 1
                    self.background.resume_or_fail(run, exc, failure, call, stalls, tool, model)
                    continue
                if _flex_unavailable(request, failure):
                    # Flex capacity comes and goes: this one answer is worth the default price.
                    request = {**request, "service_tier": "default"}
                    self._log.debug("answer", "flex unavailable; retrying on service_tier=default")
                    continue
                if not failure.retryable or attempt > max_retries:
                    raise self._as_tool_error(failure, tool, model, attempt) from None
                call.report(f"retrying ({attempt}/{max_retries})", min_interval=0)
                if call.cancelled.wait(backoff_delay(attempt, failure.retry_after)):
                    raise Cancelled() from None
                continue
            if call.cancelled.is_set():  # too late to stop the bill: the call's row books it
                raise Cancelled(response)
            return answer, meta, response

    def _as_tool_error(self, failure: Failure, tool: str, model: str, tries: int) -> ToolError:
        message = self._log.redact(
            failure_message(failure, tool=tool, model=model, config=self._config, tries=tries)
        )
        error = ToolError(
            message,
            _one_line(self._log.redact(failure.detail or message), 400),
            status=failure.status or failure.code,
            type=failure.type,
            name=failure.name,
        )
        error.kind = failure.kind
        error.billed = failure.response
        return error

    def _attempt(self, client, request: dict, call: Call, run: BackgroundRun | None = None):
        """One streamed request (a create, or a background response's resume); returns the
        completed response as a dict."""
        import openai

        seconds = self._config.get("request", "timeout_ms") / 1000
        deadline = time.monotonic() + seconds if run is None else run.deadline
        quiet = min(seconds, deadline - time.monotonic())
        if quiet <= 0:
            raise UpstreamFailure(Failure("timeout", False, name="deadline"))
        timeout = openai.Timeout(quiet, connect=min(quiet, 10.0))
        self._local.call = call
        try:
            if call.cancelled.is_set():
                raise Cancelled()
            if run is not None and run.window:
                return self._windowed(client, request, call, run, timeout)
            if run is None:
                stream = _open_stream(client, request, timeout)
            elif run.response_id is None:
                stream = _open_stream(client, {**request, "background": True}, timeout)
            else:
                final = self._check_status(client, run, call, timeout)
                if final is not None:
                    return final
                stream = _resume_stream(client, run, timeout)
            with stream:
                for event in stream:
                    if run is not None:
                        self.background.follow(event, run, call)
                        if call.cancelled.is_set() and run.response_id:  # what it read on for
                            raise Cancelled()
                    final = self._on_event(event, call)
                    if final is not None:
                        if run is not None:
                            run.finished = True
                        _drain(stream, call)
                        # Before the connection returns to the pool for another call to use.
                        call.detach_all()
                        return final
                    if time.monotonic() > deadline:
                        raise openai.APITimeoutError(request=stream.response.request)
            raise StreamEnded("the event stream ended before response.completed")
        finally:
            self._local.call = None
            call.detach_all()

    def _windowed(self, client, request: dict, call: Call, run: BackgroundRun, timeout) -> dict:
        """A discounted run: created unstreamed with its completion window (the API takes no
        stream with one), then polled until it ends (BackgroundMode.poll); returns the
        response as a streamed create's final event would, or raises as that would."""
        if run.response_id is None:
            options = {"completion_window": run.window}
            body = {**request, "background": True, "background_options": options}
            created = client.post(
                "/responses", body=body, cast_to=object, options={"timeout": timeout}
            )
            self.background.named(run, created, request["model"])
            if call.cancelled.is_set():  # its cancel waited for the name, and has it now
                raise Cancelled()
        else:  # a resume, or a response created elsewhere: how it is now
            created = _status_of(client, run, timeout)
        return self._ended(run, call, self.background.poll(client, run, call, created, timeout))

    def _check_status(self, client, run: BackgroundRun, call: Call, timeout) -> dict | None:
        """The finished response when GET /responses/{id} says it has ended (raising as its
        final event would), else None: it is still running, so streaming goes on."""
        if not run.check_status:
            return None
        run.check_status = False
        response = _status_of(client, run, timeout)
        if response.get("status") in ("queued", "in_progress"):
            return None
        return self._ended(run, call, response)

    def _ended(self, run: BackgroundRun, call: Call, response: dict) -> dict:
        """A background response that has ended, as its final event: the response, or what
        that event raises (cancelled upstream, failed, cut short)."""
        status = response.get("status")
        run.finished = True
        if status == "cancelled":
            raise UpstreamFailure(
                Failure("cancelled_upstream", False, name=status, detail=str(run.response_id))
            )
        final = self._on_event({"type": f"response.{status}", "response": response}, call)
        if final is None:
            raise ValueError(f"GET /responses/{{id}} returned status {status!r}")
        return final

    def _on_event(self, event, call: Call) -> dict | None:
        """Handles one stream event (a dict); returns the response once it is complete."""
        kind = event.get("type") if isinstance(event, dict) else None
        if kind in ("response.completed", "response.incomplete"):
            response = event.get("response")
            if not isinstance(response, dict):
                raise ValueError(f"{kind} event without a response object")
            if kind == "response.incomplete" and not _answer_text(response):
                reason = incomplete_reason(response) or "unknown"
                # Billed all the same (its reasoning is output): the row books its usage.
                detail = f"answer cut short: {reason}"
                raise UpstreamFailure(
                    Failure("failed", False, name=kind, detail=detail, response=response)
                )
            return response
        if kind == "response.failed":
            response = event.get("response")
            error = response.get("error") if isinstance(response, dict) else None
            raise _stream_failure(error, kind, response)
        if kind == "error":
            raise _stream_failure(event, kind)
        if kind == "response.output_item.done" and is_billed_search(event.get("item")):
            call.searches += 1  # at the item's end: only then does it say what it did
        message = PROGRESS_EVENTS.get(kind)
        if call.tool == DEEP_TOOL:
            message = _deep_progress(kind, event, message)
        if message and call.tool == DEEP_TOOL:  # minutes long: say how far the research is
            elapsed = round(time.monotonic() - call.started)
            message = f"researching: {message} ({call.searches} searches so far, {elapsed} s)"
        if message:
            call.report(message)
        return None


# -- Spending: budgets checked before a call, its cost booked after ----------------------------


class _Hold:
    """A call's budget reservation, taken once: by the request that spends it, or given back."""

    def __init__(self):
        self._lock = threading.Lock()
        self._reservation: str | None = None

    def put(self, reservation: str | None) -> None:
        with self._lock:
            self._reservation = reservation

    def take(self) -> str | None:
        with self._lock:
            reservation, self._reservation = self._reservation, None
            return reservation


class _Carried:
    """What a follow-up of each of this process's recent responses carries: its earlier turns,
    billed again as input (that response's input and output tokens, which hold the turns before
    it too), for the budget's estimate. A follow-up of a response this process did not make (or
    has forgotten) is estimated from its tool's recent calls only."""

    _MEMORY = 2_000

    def __init__(self):
        self._tokens: dict = {}  # response id -> tokens, oldest first
        self._lock = threading.Lock()

    def add(self, meta: dict) -> None:
        response_id, usage = meta.get("response_id"), _mapping(meta.get("usage"))
        if not isinstance(response_id, str) or not response_id:
            return
        tokens = token_count(usage.get("input_tokens")) + token_count(usage.get("output_tokens"))
        with self._lock:
            self._tokens[response_id] = tokens
            if len(self._tokens) > self._MEMORY:
                del self._tokens[next(iter(self._tokens))]

    def of(self, response_id) -> int:
        with self._lock:
            return self._tokens.get(response_id, 0) if isinstance(response_id, str) else 0


# The cost question's worst case for a tool with no priced call of its model in the ledger yet
# (docs/costly-runs.md): the output tokens a call may write (its max_output_tokens when set;
# reasoning counts as output) and, for deep research, the input each search brings back, on top
# of the searches its max_tool_calls allows (reservation_floor). Not small on purpose: the
# question is asked on the worst case, and a first deep research run can cost dollars.
QUOTE_PRIOR_OUTPUT_TOKENS = 16_000
QUOTE_DEEP_PRIOR_OUTPUT_TOKENS = 100_000
QUOTE_DEEP_PRIOR_SEARCH_TOKENS = 4_000


# A discounted run the person chose (the cost question's run_discounted) whose window, or the
# background mode a window needs, the API refused on its own create: at soonest it would be
# billed in full, above what they agreed to. {} names what was refused.
DISCOUNT_REFUSED_NOT_RUN = (
    "not run: the API refused {} of the discounted run chosen, so it would be billed in full; "
    "call again to be asked at the full price; nothing ran and nothing was spent"
)


# The same, when windows (or background mode) were refused meanwhile: before the request went.
DISCOUNT_GONE_NOT_RUN = (
    "not run: the discounted run chosen cannot run in a completion window now (the API "
    "refused one meanwhile), so it would be billed in full; call again to be asked at "
    "the full price; nothing was sent and nothing was spent"
)


class NotRun(ToolError):
    """A call the cost question stopped before anything was sent: the person said no (or did
    not answer), or the client cannot be asked under budget.confirm_required. Its reply is an
    isError result (CallReplies), its ledger row `outcome` with no cost, `meta` its
    _meta.confirm."""

    def __init__(self, message: str, outcome: str, meta: dict):
        super().__init__(message)
        self.kind = self.outcome = outcome
        self.meta = meta


class InputRequired(Exception):  # named for the 2026-07-28 result it stands for
    """2026-07-28: the call cannot go on until its client answers `result`'s input requests
    (the cost question, roots) and retries with them: its reply is that input_required
    result, and nothing was sent or spent."""

    def __init__(self, result: dict):
        super().__init__("input required")
        self.result = result


class Quote:
    """What a call is expected to cost, before anything is sent (Spending.quote): `expected`
    as admission estimates it, `worst` from the dearest recent call (or the prior), both in
    dollars at the window the call runs at (`window`: its profile's completion_window);
    `offer`, a cheaper completion window the person may choose (None: none), and `spend`,
    lines of the day's spend against each budget that is set."""

    def __init__(
        self, tool: str, model: str, expected: float, worst: float, searches: float, window=None
    ):
        self.tool, self.model = tool, model
        # The figures at `window`, as admission makes them: the ledger's recent calls as they
        # were billed (a windowed profile's at its discount already), so that discount is
        # never taken twice (issue 41: a call over confirm_over_usd ran unasked).
        self._at_window = (expected, max(expected, worst))
        self._searches = searches  # the part of a figure that is web searches (no discount)
        self.window, self.offer = window or "soonest", None
        # The window `run` runs in (its profile's completion_window; None: soonest), said in
        # the question whether or not its figures take its discount yet: the person choosing
        # `run` learns it may take that long.
        self.runs_in: str | None = None
        # Admission's budget check at the cheapest choice offered (AnswerEngine._room_for),
        # made before the person is asked: a yes no budget has room for is not asked for.
        self.check_room = lambda: None
        self.spend: list[str] = []
        self.priced = True  # False: no price known for the model, so its tokens are not in it

    def at(self, window) -> tuple[float, float]:
        """(expected, worst) at a completion window: its discount applies to tokens only;
        web searches keep their price. Relative to the quote's own window, whose discount
        the figures already carry."""
        factor = window_factor(window) / window_factor(self.window)
        return tuple(
            min(x, self._searches) + max(0.0, x - self._searches) * factor for x in self._at_window
        )

    @property
    def expected(self) -> float:
        return self.at(self.window)[0]

    @property
    def worst(self) -> float:
        return self.at(self.window)[1]

    def figures(self, window=None) -> str:
        """ "$2.40 (up to $6.00)"."""
        expected, worst = self.at(self.window if window is None else window)
        return f"{usd(expected)} (up to {usd(worst)})"

    def as_meta(self, asked: bool = True) -> dict:
        """The estimate as _meta.confirm carries it; `discounted` only when it was offered (a
        client that cannot be asked was offered nothing)."""
        meta = {"expected_usd": round(self.expected, 6), "worst_usd": round(self.worst, 6)}
        if self.window != "soonest":
            meta["window"] = self.window
        if self.offer is not None and asked:
            expected, worst = self.at(self.offer)
            meta["discounted"] = {
                "window": self.offer,
                "expected_usd": round(expected, 6),
                "worst_usd": round(worst, 6),
            }
        return meta


class Spending:
    """A call's money: admitting it under the budgets (the team's and, while several people use
    the server, its user's) with its expected cost reserved, and the ledger row that settles the
    reservation with what the call cost (a row handed over to another instance included)."""

    def __init__(self, config: Config, pricing: Pricing, state: "EngineState", multi_user):
        self._config = config
        self.pricing = pricing
        self.state, self.ledger, self.users = state.store, state.ledger, state.users
        self.carried = _Carried()  # what a follow-up of a recent answer carries, for budgets
        self._multi_user = multi_user  # whether calls can come from several people

    def admit(
        self,
        tool,
        request: dict,
        today: str,
        hold: _Hold,
        user: str,
        args,
        window=None,
        priced=None,
        billed=None,
    ) -> None:
        """Lets a call make a new request, its expected cost (its question's and files' too)
        reserved against each budget (the team's and its user's), or refuses it (a ledger row
        says so). `window`: the completion window it runs in (its reservation outlives it);
        `priced`: the one its estimate takes the discount of (BackgroundMode.estimate_window);
        `billed`: the one its tool's recent calls are taken as billed at (its profile's, priced
        the same way). A discounted run the person chose is reserved at the figure they were
        offered (Quote.at), not at the price of the tool's own window. `hold` None: the check
        alone (AnswerEngine._room_for), nothing reserved."""
        model = request["model"]
        try:
            self._check_priced(model, today, user)
            carried = self.carried.of(request.get("previous_response_id"))
            rate = window_factor(priced) / window_factor(billed)
            rebilled = (reservation_floor(self._config, tool), rate) if rate != 1.0 else None
            estimator = CallEstimator(self.pricing, request, args, carried, priced, rebilled)
            # Checked only (hold None): a reservation, however brief, is others' "in flight".
            reservation = self._reserve(tool, today, user, estimator, window, hold is not None)
            if hold is not None:
                hold.put(reservation)
            self.state.prepare()  # the call's row is written at its end, even a stop signal's
        except ToolError:
            self.refuse(tool, model, user)
            raise

    def quote(self, tool, request: dict, args: dict, today: str, user: str, offer, window=None):
        """The call's Quote, from what admission uses (CallEstimator over the tool's recent
        calls of the request's model): expected as admission reserves it, worst from the
        dearest of them (with none of its model, QUOTE_PRIOR_*, or other models' dearest if
        dearer), never below expected, at `window` (the profile's, once a window was
        accepted: BackgroundMode.estimate_window). `offer`: the
        cheaper completion window the person may choose (None: the call can run in none now,
        or none is cheaper). Raises ToolError when the ledger cannot be read."""
        model = request["model"]
        carried = self.carried.of(request.get("previous_response_id"))
        estimator = CallEstimator(self.pricing, request, args, carried, window)
        floor = reservation_floor(self._config, tool)
        try:
            recent = self.ledger.recent(tool, model)
        except StateUnavailable as exc:
            raise ToolError(
                f"the cost cannot be estimated: {self.state.label} is unavailable "
                f"({exc.reason}), and budget.confirm_over_usd asks for an estimate; retry shortly"
            ) from None
        tokens = min((int(row[1] or 0) for row in recent), default=0)
        usds = [float(row[0]) for row in recent]
        expected = estimator(max(floor, sum(usds) / len(usds) if usds else 0.0), tokens)
        # The prior is at Standard prices; the ledger's rows are as they were billed, at the
        # tier asked for, which the estimator takes `typical` at: the prior is put there too
        # (a priority call was quoted at half its worst case, a flex one at twice it).
        tier = tier_factor(model, request.get("service_tier"))
        prior = floor + (self._prior(tool, model) - floor) * window_factor(window) * tier
        # Another model's calls (none of this one's yet: the profile's model changed) say
        # nothing of this one's worst case: the prior stands, or their dearest if dearer.
        own = any(_undated(str(row[2])) == _undated(model) for row in recent)
        worst = estimator(max([floor, *usds] if own else [prior, *usds]), tokens)
        quote = Quote(tool, model, expected, worst, floor, window)
        quote.priced = self.pricing.prices(model) is not None
        quote.offer = offer
        quote.spend = self._spend_lines(today, user)
        return quote

    def _prior(self, tool: str, model: str) -> float:
        """A call's worst case before the ledger knows its tool's model: QUOTE_PRIOR_*."""
        found = self.pricing.prices(model)
        floor = reservation_floor(self._config, tool)
        if found is None:
            return floor
        (input_rate, _cached, output_rate), _source = found
        deep = tool == DEEP_TOOL
        cap = self._config.profile(tool).get("max_output_tokens")
        output = cap or (QUOTE_DEEP_PRIOR_OUTPUT_TOKENS if deep else QUOTE_PRIOR_OUTPUT_TOKENS)
        searches = round(floor / (self._config.get("pricing", "web_search_per_1k") / 1000 or 1))
        read = searches * QUOTE_DEEP_PRIOR_SEARCH_TOKENS if deep else 0
        return floor + (output * output_rate + read * input_rate) / 1e6

    def _spend_lines(self, today: str, user: str) -> list[str]:
        """ "$0.40 of the $5.00 daily budget spent today", one per budget set (none when the
        ledger cannot be read: admission will say so)."""
        try:
            periods = self._budgets_of(today, user)
            spent = self.ledger.spent_in([(p.since, p.user) for p in periods])
        except (ToolError, StateUnavailable):
            return []
        lines = []
        for period, amount in zip(periods, spent, strict=True):
            name = (
                f"{user}'s {period.span} allowance" if period.per_user else f"{period.name} budget"
            )
            lines.append(f"{usd(amount)} of the {usd(period.limit)} {name} spent {period.words}")
        return lines

    def _check_priced(self, model: str, today: str, user: str) -> None:
        """Under a budget, a model with no known price is refused before any request: its
        calls could not be counted against the budget (fail closed, as for a broken ledger)."""
        periods = self._budgets_of(today, user)
        if not periods or self.pricing.prices(model) is not None:
            return
        raise ToolError(
            f"no price known for model {model!r}, so budget.{periods[0].name}_usd cannot count "
            f"its calls: set pricing.models.{_undated(model)} to {{input, cached_input, "
            "output} in USD per million tokens (see --doctor), or use a model with a price"
        )

    def _budgets_of(self, today: str, user: str) -> list:
        """The team's budgets, then the user's allowance (BudgetPeriod each)."""
        periods = budgets(self._config, today)
        try:
            own = self.users.allowance(user) if self._multi_user() else (None, None)
        except StateUnavailable as exc:
            raise ToolError(
                f"budget cannot be checked: {self.state.label} is unavailable ({exc.reason}): "
                "calls that would spend are refused while users have allowances; retry shortly"
            ) from None
        return periods + user_budgets(self._config, today, user, own)

    def _reserve(
        self, tool: str, today: str, user: str = LOCAL_USER, estimator=None, window=None, held=True
    ) -> str | None:
        """The call's reservation (None: no budget is set; '' when only checked, `held`
        False), or ToolError when a budget has no room for it or cannot be checked.
        `estimator`: see Ledger.reserve."""
        periods = self._budgets_of(today, user)
        if not periods:
            return None
        limits = [(period.since, period.limit, period.user) for period in periods]
        try:
            reservation, estimate, sums = self.ledger.reserve(
                tool,
                limits,
                reservation_floor(self._config, tool),
                self._reservation_ttl(tool, window),
                user,
                estimator,
                held,
            )
        except StateUnavailable as exc:
            raise ToolError(
                # Never the store's address: the client may be anyone; the log names it.
                f"budget cannot be checked: {self.state.kind} is unavailable ({exc.public}): "
                f"calls that would spend are refused while budget.{periods[0].name}_usd is set; "
                "fix it, or unset the budget"
            ) from None
        if reservation is not None:
            return reservation
        timezone = self._config.get("policy", "timezone")
        for period, (spent, reserved) in zip(periods, sums, strict=True):
            limit, spent_when, resets = period.limit, period.words, period.resets
            name = (
                f"{user}'s {period.span} allowance" if period.per_user else f"{period.name} budget"
            )
            fix = f"raise budget.{period.name}_usd" + (
                f" (or {user}'s own: --user limit {user} --{period.span}-usd X)"
                if period.per_user and Identity.parse(user).kind == "user"
                else ""  # an OAuth subject's, shared's and local's: the config key alone
            )
            if spent >= limit:
                raise ToolError(
                    f"{name} of {usd(limit)} reached ({usd(spent)} spent {spent_when}; "
                    f"resets {resets} {timezone}): {fix} or wait"
                )
            if spent + reserved + estimate > limit + 1e-9:
                raise ToolError(
                    f"{name} of {usd(limit)} has no room for this call ({usd(spent)} "
                    f"spent {spent_when}, {usd(reserved)} held by calls in flight, about "
                    f"{usd(estimate)} expected for this one; resets {resets} {timezone}): "
                    f"{fix} or wait"
                )
        raise ToolError("budget cannot be checked: no room reported")  # not reached

    def _reservation_ttl(self, tool: str, window=None) -> float:
        """How long a reservation counts if its process dies before settling it: longer than
        any call of the tool (every attempt in full; an answer_deep run's
        request.deep_timeout_ms, up to a day; a discounted run's window), and at least an
        hour."""
        config = self._config
        longest = (
            config.get("request", "timeout_ms") / 1000 * (config.get("request", "max_retries") + 1)
        )
        if tool == DEEP_TOOL:
            longest = max(longest, config.get("request", "deep_timeout_ms") / 1000)
        longest = max(longest, window_timeout_ms(config, tool, window) / 1000)
        return max(3600.0, longest + 60)

    def release(self, reservation: str) -> None:
        """Gives a reservation back: its call made no request."""
        self.ledger.release(reservation)

    def refuse(self, tool: str, model: str, user: str) -> None:
        """The ledger row of a call refused before any request."""
        self.ledger.record(UsageRow(tool, model, "refused", user=user))

    def note(self, row: UsageRow) -> None:
        """The ledger row of a call that cost nothing (a cache hit, a shared request)."""
        self.ledger.record(row)

    def book(self, response: dict, request: dict, meta: dict) -> str:
        """Prices a completed response into meta["cost"] (at its service tier, and in the
        completion window meta["window"] says it ran in) and remembers what a follow-up of it
        carries; returns the model the response names."""
        model = _model_named(response, request["model"])
        meta["cost"] = self.pricing.booked(
            model,
            request["model"],
            meta["usage"],
            meta["web_searches"],
            response.get("service_tier"),
            meta.get("window"),
        )
        self.carried.add(meta)
        return model

    def book_failure(self, call: Call, tool, model, outcome, meta: dict, user, exc) -> None:
        """The row of a call that failed or was cancelled (settling its reservation), with what
        its attempts were billed (in the completion window its response ran in, if any)."""
        window = call.background.window if call.background is not None else None
        meta.update(billed_meta(self.pricing, exc, model, call.searches, window))
        self.record(call, UsageRow(tool, model, outcome, meta, user), call.reservation)

    def record(self, call: Call, row: UsageRow, reservation: str | None) -> None:
        """The call's ledger row, unless its call was handed over to another instance."""
        if call.record_here():
            self.ledger.record(row, reservation)

    def hand_over(self, call: Call, response_id: str, expires_ms: int) -> bool:
        """Leaves a running call's ledger row to the instance that serves its task (this
        process is stopping); False if this process has recorded it already."""
        upstream = call.upstream or call
        if not upstream.hand_over():
            return False
        self.ledger.hand_over(upstream.reservation, response_id, expires_ms / 1000)
        return True

    def settle_followed(
        self, tool: str, meta: dict, response_id: str, model: str, user: str = LOCAL_USER
    ) -> None:
        """The ledger row of a response another instance created and this one read to its
        end, `user`'s (the task's): written if that instance handed it over, else its creator
        writes it. Its cost is collect()'s, tier and all."""
        cost = meta.get("cost") or self.pricing.cost(
            model, meta.get("usage") or {}, meta.get("web_searches", 0)
        )
        row = UsageRow(tool, model, "ok", {**meta, "cost": cost}, user)
        self.ledger.settle_handover(row, response_id)

    def settle_followed_failure(self, tool, exc, response_id, model, user, window=None) -> None:
        """The row of a response another instance created and this one followed, that ended
        cancelled (by a cancel sent here) or failed: what it was billed (billed_meta), written
        if its creator handed it over (settling that handover), else its creator writes it."""
        outcome = exc.kind if isinstance(exc, ToolError) else "cancelled"
        meta = billed_meta(self.pricing, exc, model, 0, window)
        self.ledger.settle_handover(UsageRow(tool, model, outcome, meta, user), response_id)


# -- The engine: EngineState and AnswerEngine --------------------------------------------------


class EngineState:
    """The state the engine reads and writes, all kept in one StateStore: the ledger (budgets),
    the answer cache, the named users and who was given which response."""

    def __init__(self, store: "StateStore", timezone: str, cache_ttl_s, cache_entries: int):
        self.store = store
        self.ledger = Ledger(store, timezone)
        self.cache = AnswerCache(store, cache_ttl_s, cache_entries)
        self.users = UserDirectory(store)
        self.owners = ResponseOwners(store)


class AnswerEngine:
    """Turns a tool call into the answer of the output contract: from the cache, or from one
    Responses API request (shared with identical calls in flight) that `upstream` makes and
    `spending` admits and books. build_engine gives it its parts."""

    def __init__(
        self,
        config: Config,
        log: Log,
        state: EngineState,
        spending: Spending,
        upstream: ResponsesClient,
        retirements: RetirementCheck,
        multi_user=lambda: False,
    ):
        self._config = config
        self._log = log
        self.state, self.ledger, self.cache = state.store, state.ledger, state.cache
        self.users, self.owners = state.users, state.owners
        self.spending, self.pricing = spending, spending.pricing
        self.upstream, self.background = upstream, upstream.background
        self.retirements = retirements
        # Whether calls can come from several people (over HTTP, Authenticator.multi_user):
        # then response ids are checked against their owners, and the cache is per user.
        self._multi_user = multi_user
        self.flights = SingleFlight(log)
        self._lock = threading.Lock()
        self._checked = False

    def warm_up(self, delay: float = 0.3) -> None:
        """Readies the OpenAI client in the background (ResponsesClient.warm_up)."""
        self.upstream.warm_up(delay)

    def answered(self) -> None:
        """After the first call's reply, looks at the models' shutdown dates in the background.
        Not at initialize: claiming the day loads sqlite3 (~1.6 MiB, issue 34), which a server
        that is never called would hold for nothing; a called one has it open for the ledger."""
        with self._lock:
            if self._checked:
                return
            self._checked = True
        threading.Thread(target=self.check_retirements, name="retirements", daemon=True).start()

    def check_retirements(self) -> None:
        """Warns on stderr about each enabled tool's model with an announced shutdown date
        (RetirementCheck)."""
        self.retirements.run()

    def client(self):
        """The process's one OpenAI client."""
        return self.upstream.client()

    def answer(self, tool: str, args: dict, call: Call, confirm=None) -> tuple[dict, dict]:
        """Answers from the cache, or runs the call (shared with identical calls in flight);
        returns (answer, meta) or raises ToolError / Cancelled. `confirm(quote)`, the cost
        question (CostQuestion), is asked after a cache miss and before admission: nothing is
        reserved or sent before it returns (what it returns is _meta.confirm); it raises
        NotRun (a no: its ledger row is written here) or InputRequired."""
        started = time.monotonic()
        today = today_in(self._config.get("policy", "timezone"))
        request = self.upstream.fit(tool, args, today)
        user = call.user
        if args.get("previous_response_id"):  # another user's is not found; nothing is sent
            self._check_owner(tool, request, args["previous_response_id"], user)
        key = answer_key(
            tool,
            args,
            request,
            today,
            self._config.get("policy", "max_citations"),
            self._config.get("openai", "base_url"),
            account_id(api_key(self._config)),
            self._cache_user(user),
        )
        if self.cache.enabled and not args.get("fresh"):
            hit = self._from_cache(tool, key, started, user)
            if hit is not None:
                self.owners.add(hit[0].get("response_id"), user)
                return hit
        asked = self._confirm(confirm, tool, request, args, today, user)
        self._check_window_open(tool, request, call, asked)
        hold = _Hold()
        window = self.background.window(tool, call.window, request)  # its request asks for it
        priced = self.background.estimate_window(window, request["model"])
        billed = self._billed_window(tool, request)

        def fly(upstream: Call) -> tuple:
            upstream.window = call.window  # the request is the flight's own Call's
            files = args.get("files")
            return self._fetch(tool, request, upstream, today, key, hold.take(), user, files)

        try:
            result, shared = self.flights.run(
                # Only calls in the same window share a request: none waits hours for another;
                # nor one the person agreed to at its discount (not run if the window is
                # refused) with one nobody was asked about (run at soonest then).
                key if window is None else f"{key} {window} {call.window is not None}",
                call,
                fly,
                admit=lambda: self.spending.admit(
                    tool, request, today, hold, user, args, window, priced, billed
                ),
            )
        except NotRun as exc:  # the chosen discount's window refused: _meta.confirm says what
            # the person was asked and chose; a copy each, as identical calls that joined one
            # request share its exception (and each its own _meta.confirm, not another's).
            raise NotRun(exc.message, exc.outcome, asked or exc.meta) from None
        finally:
            unused = hold.take()  # admitted, then joined an identical call, or never flew
            if unused is not None:
                self.spending.release(unused)
        answer, meta = dict(result[0]), dict(result[1])
        if shared:  # the request's cost is on the row of the call that made it
            meta["cost"] = {**ZERO_COST, "prices": meta["cost"]["prices"]}
            meta["shared"] = True
            meta["elapsed_ms"] = round((time.monotonic() - started) * 1000)
            model = answer.get("model") or request["model"]
            self.spending.note(UsageRow(tool, model, "shared", meta, user))
        self.owners.add(answer.get("response_id"), user)
        if asked:
            meta["confirm"] = asked
        return answer, meta

    def _confirm(self, confirm, tool: str, request: dict, args, today: str, user: str):
        """The cost question's answer (its _meta.confirm, or None when not asked); a no is
        booked as a ledger row of no cost, and raised."""
        if confirm is None:
            return None
        # A discount only where the call can run in a window (none once the API refused one),
        # and the profile's own taken as admission takes it (once a window was accepted).
        opens = self.background.windows_open(request)
        own = self._config.completion_window(tool) if opens else None
        offer = "8h" if opens and own != "8h" else None  # 8h is the cheapest window there is
        priced = self._billed_window(tool, request)
        quote = self.spending.quote(tool, request, args, today, user, offer, priced)
        quote.runs_in = own if own in WINDOW_FACTORS else None  # `run` waits that long
        quote.check_room = lambda: self._room_for(tool, request, args, today, user, offer)
        try:
            return confirm(quote)
        except NotRun as exc:
            self.spending.note(UsageRow(tool, request["model"], exc.outcome, user=user))
            raise

    def _room_for(self, tool: str, request: dict, args, today: str, user: str, offer) -> None:
        """Before the person is asked: admission's budget check at the cheapest choice offered
        (`offer` or `run`, as admission prices each), reserving nothing: a reservation held
        even for the moment its release waited to be written was another question's "held by
        calls in flight", so questions asked together at a budget's margin refused each other.
        A call no budget has room for even so is refused as admission refuses it (ledger row
        `refused`), not asked about: the person's yes could not run it."""
        # Not the offer's alone: its 8h is priced in full until the API has taken it for the
        # model, while `run` in the profile's 2h, once taken, is at its discount.
        windows = [self.background.window(tool, chosen, request) for chosen in (offer, None)]
        priced = min(
            (self.background.estimate_window(window, request["model"]) for window in windows),
            key=window_factor,
        )
        billed = self._billed_window(tool, request)
        self.spending.admit(tool, request, today, None, user, args, None, priced, billed)

    def _billed_window(self, tool: str, request: dict) -> str | None:
        """The window the tool's recent calls are taken as billed at, by the quote and by
        admission alike: its profile's, once the API took it for the model (else None)."""
        if not self.background.windows_open(request):
            return None
        own = self._config.completion_window(tool)
        own = own if own in WINDOW_FACTORS else None
        return self.background.estimate_window(own, request["model"])

    def _check_window_open(self, tool: str, request: dict, call: Call, asked) -> None:
        """The discounted run the person chose (call.window) cannot run in a window any more
        when the API refused one while they decided: it would be billed in full, above the
        figure they agreed to, so it is not run (a ledger row of no cost says so)."""
        if call.window is None or self.background.windows_open(request):
            return
        self.spending.note(UsageRow(tool, request["model"], "declined", user=call.user))
        raise NotRun(DISCOUNT_GONE_NOT_RUN, "declined", asked or {})

    def _cache_user(self, user: str) -> str:
        """Whose cache entries a call reads and writes: its user's own while several people use
        the server, unless cache.share_across_users; everyone's ('') otherwise."""
        if self._config.get("cache", "share_across_users") or not self._multi_user():
            return ""
        return user

    def _check_owner(self, tool: str, request: dict, response_id: str, user: str) -> None:
        """A follow-up must name a response its user was given: else, while several people use
        the server, it is "not known", as the API would say, and nothing is sent."""
        if not self._multi_user():
            return
        try:
            owned = self.owners.owned(response_id, user)
        except StateUnavailable as exc:
            self.spending.refuse(tool, request["model"], user)
            raise ToolError(
                f"previous_response_id cannot be checked: {self.state.label} is unavailable "
                f"({exc.reason}); retry shortly"
            ) from None
        if not owned:
            self.spending.refuse(tool, request["model"], user)
            raise ToolError(
                "previous_response_id not found: no answer with that id was given to you; "
                "ask without previous_response_id, or pass the response_id of one of your "
                "recent answers"
            )

    def _from_cache(self, tool: str, key: str, started: float, user: str) -> tuple | None:
        found = self.cache.get(key)
        if found is None:
            return None
        body, age = found
        meta = {
            "response_id": body.get("response_id"),
            "cache": {"hit": True, "age_s": round(age, 1)},
            "cost": {**ZERO_COST, "prices": None},
            "web_searches": 0,
            "elapsed_ms": round((time.monotonic() - started) * 1000),
            "attempts": 0,
        }
        # An entry stored before answers carried their response_id gets it from the body.
        answer = dict(body["answer"])
        answer.setdefault("response_id", body.get("response_id"))
        self.spending.note(UsageRow(tool, answer.get("model") or "", "cache", meta, user))
        return answer, meta

    def _fetch(
        self,
        tool: str,
        request: dict,
        call: Call,
        today: str,
        key: str,
        reservation=None,
        user: str = LOCAL_USER,
        files=None,
    ) -> tuple:
        """The upstream request with retries, its cost, its ledger row (`user`'s, which settles
        the call's reservation; with the count and bytes of its files), and its cache entry."""
        started = time.monotonic()
        sent = {"files": [f.summary() for f in files]} if files else {}
        call.reservation = reservation  # a handover passes it on (Dispatcher.hand_over)
        try:
            answer, meta, response = self.upstream.request(tool, request, call, today)
        except (ToolError, Cancelled) as exc:
            meta = {"elapsed_ms": round((time.monotonic() - started) * 1000), **sent}
            kind = exc.kind if isinstance(exc, ToolError) else "cancelled"
            self.spending.book_failure(call, tool, request["model"], kind, meta, user, exc)
            raise
        except BaseException:
            if reservation is not None:
                self.spending.release(reservation)
            raise
        meta.update(sent)
        model = self.spending.book(response, request, meta)
        if self.cache.enabled:
            meta["cache"] = {"hit": False}
        self.spending.record(call, UsageRow(tool, model, "ok", meta, user), reservation)
        if self.cache.enabled and response.get("status") == "completed":
            self.cache.put(key, answer, meta.get("response_id"))
        return answer, meta

    def wait_for_flights(self, timeout: float) -> None:
        """Waits (up to timeout) for the requests in flight to end: a cancelled call's
        request ends on its own thread, which writes its ledger row a moment after the call
        has given up on it; a process about to leave waits for that row."""
        deadline = time.monotonic() + timeout
        while self.flights.in_flight() and time.monotonic() < deadline:
            time.sleep(0.02)

    def hand_over(self, call: Call, response_id: str, expires_ms: int) -> bool:
        """Spending.hand_over: leaves a running call's ledger row to another instance."""
        return self.spending.hand_over(call, response_id, expires_ms)

    def settle_followed(self, tool, meta, response_id, model, user: str = LOCAL_USER) -> None:
        """Spending.settle_followed: the row of a response another instance created."""
        self.spending.settle_followed(tool, meta, response_id, model, user)

    def settle_followed_failure(self, tool, exc, response_id, model, user, window=None) -> None:
        """Spending.settle_followed_failure: the row of such a response that did not answer."""
        self.spending.settle_followed_failure(tool, exc, response_id, model, user, window)

    def close(self, wait_s: float = 5.0) -> None:
        """Writes the ledger rows still queued (up to wait_s), for a process about to exit."""
        self.state.close(wait_s)

    @property
    def background_off(self) -> bool:
        """Whether the API refused background mode, so no call of this process uses it."""
        return self.background.off

    def collect(
        self, tool: str, args: dict, response_id: str, call: Call, window=None
    ) -> tuple[dict, dict]:
        """The answer of a background response created earlier, by this process or another,
        from its id alone: its events are read from the first (GET /responses/{id}?stream=true),
        resuming after drops as any background call does; a cancel cancels it upstream.
        Returns (answer, meta) or raises ToolError / Cancelled; no ledger row, no cache entry
        (the caller decides who accounts for a response it did not create); its _meta.cost is
        the response's, priced with its service tier. `window`: the completion window it was
        created in (2h, 8h), which has no stream: it is polled instead, and priced so."""
        today = today_in(self._config.get("policy", "timezone"))
        request = self.upstream.fit(tool, args, today)
        answer, meta, response = self.upstream.request(
            tool, request, call, today, response_id, window
        )
        self.spending.book(response, request, meta)
        return answer, meta


# -- Background mode: runs that outlive a connection (BackgroundMode) --------------------------


class BackgroundMode:
    """The engine's background responses: whether a call asks for one, what happens when the
    API refuses them, resuming a dropped stream, and the server-side cancel (sent on a thread
    of its own, which a leaving process waits for)."""

    def __init__(self, config: Config, log: Log, client, as_tool_error, force: bool = False):
        self._config, self._log = config, log
        self._client = client  # ResponsesClient.client: the process's one OpenAI client
        self._as_tool_error = as_tool_error  # ResponsesClient's: a Failure as the call's ToolError
        self._lock = threading.Lock()
        self.off = False  # set for the process when the API refused background mode
        # Tasks across --stateless instances (background_always): every call runs in
        # background, so that its task can be served by any instance from OpenAI's stored
        # response.
        self.force = force
        self._cancels: set = set()  # server-side cancels still being sent
        # Completion windows: off for the process once the API refused one (windows_refused);
        # (model, window) seen once the API took that window for that model, from when a
        # budget estimate of such a call takes its discount (the API takes them model by model).
        self.windows_off = False
        self.windows_seen: set = set()

    def window(self, tool: str, chosen: str | None, request: dict) -> str | None:
        """The completion window a new request of the call asks for: `chosen` (the person's
        choice, call.window) over model_profiles.<tool>.completion_window; None (soonest) when
        windows or background mode are off for the process, or when the request is not on
        Standard processing (a window runs on no other tier, and is priced so)."""
        chosen = chosen or self._config.completion_window(tool)
        return chosen if chosen in WINDOW_FACTORS and self.windows_open(request) else None

    def windows_open(self, request: dict) -> bool:
        """Whether the request could run in a completion window now: neither windows nor
        background mode refused in this process, and on Standard processing."""
        off = self.windows_off or self.off
        return not off and request.get("service_tier") in STANDARD_TIERS

    def estimate_window(self, window, model: str) -> str | None:
        """The window a call's budget estimate takes the discount of: its own once this process
        has seen the API take that window for the call's model, else None (full price). A
        refusal bills the call's fallback at full price, and it comes before the API takes
        that window for that model: so no call is billed more than its estimate for a window
        that never ran."""
        seen = (model, window) in self.windows_seen
        return window if seen and not self.windows_off else None

    def run(self, tool: str, call: Call, started: float, response_id=None, window=None):
        """A BackgroundRun for the call when its profile asks for background mode or it runs in
        a completion `window` (or it follows a response that exists already)."""
        wanted = self.force or self._config.background(tool) or window is not None
        if response_id is None and self.off and tool == DEEP_TOOL:
            raise ToolError(DEEP_NEEDS_BACKGROUND)
        if response_id is None and (self.off or not wanted):
            return None
        seconds = window_timeout_ms(self._config, tool, window) / 1000
        run = call.background = BackgroundRun(started + seconds, response_id, window)
        call.when_cancelled(lambda: self.cancel(run, call))
        return run

    def named(self, run: BackgroundRun, created, model: str) -> None:
        """Keeps the id an unstreamed create's reply names (arming the server-side cancel);
        when it says it took the window (window_taken), estimates of the model's calls in
        that window may take its discount from now on."""
        response_id = created.get("id") if isinstance(created, dict) else None
        if not isinstance(response_id, str) or not response_id:
            raise ValueError("the background create's reply named no response")
        run.response_id = response_id
        run.created.set()
        if window_taken(created, run.window):
            with self._lock:
                self.windows_seen.add((model, run.window))

    def poll(self, client, run: BackgroundRun, call: Call, response: dict, timeout) -> dict:
        """GET /responses/{id} until the discounted run has ended, waiting WINDOW_POLL_FIRST_S
        first and longer each time up to WINDOW_POLL_MAX_S, saying meanwhile how long it has
        waited; returns the response as it ended. A cancel stops the wait at once."""
        wait = WINDOW_POLL_FIRST_S
        while True:
            # A windowed run has no events: each reply about it is its progress, so a failed
            # poll hours later is not counted as one more in a row (ResponsesClient.request).
            run.last_sequence = (run.last_sequence or 0) + 1
            if response.get("status") not in ("queued", "in_progress"):
                return response
            minutes = int((time.monotonic() - call.started) // 60)
            state = "queued for" if response.get("status") == "queued" else "running in"
            call.report(f"{state} the {run.window} window, {minutes} min so far", min_interval=0)
            left = run.deadline - time.monotonic()
            if call.cancelled.wait(max(0.0, min(wait, left))):
                raise Cancelled()
            if left <= wait:
                raise UpstreamFailure(Failure("timeout", False, name="deadline"))
            wait = min(wait * WINDOW_POLL_BACKOFF, WINDOW_POLL_MAX_S)
            response = _status_of(client, run, timeout)

    @staticmethod
    def billed_at_cancel(run: BackgroundRun | None) -> dict | None:
        """A cancelled windowed run's response when it had ended by itself before the cancel
        reached it (polls come up to a minute apart): billed all the same, so the call's row
        books it. Waits for the cancel's thread, which looks (_look_after_cancel)."""
        if run is None or not run.window:
            return None
        run.cancel_done.wait(NAMING_WAIT_S + 2 * CANCEL_TIMEOUT_S)
        return run.ended

    def windows_refused(self, failure: Failure) -> None:
        """Completion windows are off for the rest of the process (one warning, naming the
        keys that ask for them); the call goes on at soonest, at full price (a discounted run
        the person chose is not run: ResponsesClient). A window that was only the cost
        question's run_discounted names no key: every profile is at soonest already."""
        with self._lock:
            warned, self.windows_off = self.windows_off, True
        if warned:
            return
        keys = [
            f"model_profiles.{name}.completion_window"
            for name in TOOL_NAMES
            if self._config.completion_window(name) in WINDOW_FACTORS
        ]
        fix = (
            f"set {' and '.join(keys)} to soonest"
            if keys
            else "the cost question offers no discounted run (no model profile sets a window)"
        )
        said = _one_line(self._log.redact(failure.detail), 160) or "no reason given"
        self._log.say(
            f"warning: the API refused a completion window (background_options, HTTP "
            f"{failure.status}: {said}); calls run at soonest, at full price, until restart: "
            f"{fix}"
        )

    def refused(self, tool: str, failure: Failure) -> None:
        """Background mode is off for the rest of the process; the call goes on without it."""
        with self._lock:
            warned, self.off = self.off, True
        if not warned:
            said = _one_line(self._log.redact(failure.detail), 160) or "no reason given"
            self._log.say(
                f"warning: the API refused background mode (HTTP {failure.status}: {said}); "
                f"calls run without it until restart: {_stop_asking(self._config)}"
            )

    def resume_or_fail(self, run: BackgroundRun, exc, failure: Failure, call, stalls, tool, model):
        """Readies the next resume of a background response after `exc` (waiting first when
        the last resume brought nothing), or raises the call's ToolError after cancelling the
        response upstream (unless it has ended by itself)."""
        if time.monotonic() >= run.deadline or failure.name == "deadline":  # the time, then
            # of the window it ran in, if any (WINDOW_MARGIN_S past it)
            name = "window" if run.window else "deadline"
            failure = Failure("timeout", False, name=name, detail=run.window)
        elif failure.status == 404:  # not a wrong base URL: that answered the create
            failure = Failure("gone", False, status=404, detail=run.response_id)
        # A windowed run goes on upstream for hours whatever our polls meet: failed polls
        # are retried, further apart each time, until its window ends, not given up after
        # request.max_retries in a row (a network blip would cancel a discounted run).
        out_of_tries = stalls > self._config.get("request", "max_retries") and not run.window
        if not _resumable(exc, failure) or out_of_tries or run.finished:
            if failure.kind not in ("failed", "cancelled_upstream"):
                self.cancel(run)
            raise self._as_tool_error(failure, tool, model, stalls + 1) from None
        run.resumes += 1
        run.check_status = stalls > 0
        self._log.debug(
            "answer",
            f"resuming background response {run.response_id} after "
            f"sequence_number={run.last_sequence} ({failure.kind})",
        )
        call.report("resuming the answer", min_interval=0)
        delay = backoff_delay(stalls, failure.retry_after)
        if run.window:
            delay = min(WINDOW_POLL_FIRST_S * WINDOW_POLL_BACKOFF**stalls, WINDOW_POLL_MAX_S)
            delay = max(0.0, min(delay, run.deadline - time.monotonic()))
        if stalls and call.cancelled.wait(delay):
            raise Cancelled() from None

    def follow(self, event, run: BackgroundRun, call: Call) -> None:
        """Keeps the response id (arming the server-side cancel) and the last sequence_number."""
        if not isinstance(event, dict):
            return
        number = event.get("sequence_number")
        if type(number) is int:
            run.last_sequence = number
        if run.response_id is None and event.get("type") in ("response.created", "response.queued"):
            response = event.get("response")
            response_id = response.get("id") if isinstance(response, dict) else None
            if isinstance(response_id, str) and response_id:
                run.response_id = response_id
                run.created.set()

    def cancel(self, run: BackgroundRun, call: Call | None = None) -> None:
        """POST /responses/{id}/cancel, once, on its own thread: best effort, bounded by
        CANCEL_TIMEOUT_S. Not a daemon thread, so a process that is exiting sends it first.

        A call cancelled while its create's reply is read but has not named the response yet
        (call.held) would leave that response running, and billed, if it just hung up: the
        thread first waits for the name, then lets the call's streams go."""
        held = call if call is not None and call.held else None
        with run.lock:
            if run.cancel_sent:  # sent, or waiting for the name, already
                return
            nothing = run.finished or not (run.response_id or held)
            run.cancel_sent = not nothing
        if nothing:
            run.cancel_done.set()
            if held is not None:
                held.let_go()
            return
        thread = threading.Thread(
            target=self._send_cancel, args=(run, held), name="upstream-cancel"
        )
        with self._lock:
            self._cancels.add(thread)
        try:
            thread.start()
        except RuntimeError:  # no thread to spare (or the interpreter is exiting)
            with self._lock:
                self._cancels.discard(thread)  # join() refuses a thread never started
            self._send_cancel(run, held)

    def wait_for_cancels(self, timeout: float = NAMING_WAIT_S + CANCEL_TIMEOUT_S) -> None:
        """Waits (up to timeout) for server-side cancels being sent: for a process about to
        leave with os._exit(), which does not wait for threads."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:  # a cancel started meanwhile is waited for too
            with self._lock:
                threads = list(self._cancels)  # each leaves the set when it has sent its cancel
            if not threads:
                return
            try:
                threads[0].join(max(0.0, deadline - time.monotonic()))
            except RuntimeError:  # in the set, not started yet (cancel_background)
                time.sleep(0.01)

    def _send_cancel(self, run: BackgroundRun, held: Call | None) -> None:
        try:
            if held is not None and not self._await_name(run, held):
                return
            response_id = run.response_id
            self._client().post(
                f"/responses/{response_id}/cancel",
                cast_to=object,
                options={"timeout": CANCEL_TIMEOUT_S},
            )
            self._log.debug("answer", f"cancelled background response {response_id} upstream")
        except Exception as exc:  # noqa: BLE001 - best effort; the response expires anyway
            failure = classify_failure(exc)
            said = _one_line(self._log.redact(failure.detail or failure.kind), 160)
            status = f"HTTP {failure.status}" if failure.status else failure.kind
            self._log.say(
                f"warning: could not cancel background response {run.response_id} upstream "
                f"({status}: {said}); it runs until it ends and is billed"
            )
        finally:
            self._look_after_cancel(run)
            run.cancel_done.set()
            with self._lock:
                self._cancels.discard(threading.current_thread())

    def _look_after_cancel(self, run: BackgroundRun) -> None:
        """Keeps, in run.ended, a windowed run's response when GET /responses/{id} says it
        had ended (completed, cut short or failed: billed) by the time its cancel came."""
        if not (run.window and run.response_id):
            return
        try:
            response = _status_of(self._client(), run, CANCEL_TIMEOUT_S)
        except Exception:  # noqa: BLE001 - best effort, as the cancel itself
            return
        if response.get("status") in ("completed", "incomplete", "failed"):
            run.ended = response

    def _await_name(self, run: BackgroundRun, call: Call) -> bool:
        """Waits (at most NAMING_WAIT_S) for the held call's stream to name its response, then
        lets the stream go; False when there is nothing left to cancel. A reply that ended
        unnamed (an HTTP error, say) made no response, so only the time running out is
        worth a warning."""
        deadline = time.monotonic() + NAMING_WAIT_S
        while call.reading and time.monotonic() < deadline:
            if run.created.wait(0.05):
                break
        if call.reading and not run.created.is_set():  # said before the hang-up it explains
            self._log.say(
                "warning: a call was cancelled before OpenAI named its background response "
                f"(no response.created within {NAMING_WAIT_S:g} s), so it could not be cancelled "
                "upstream; if it was created, it runs until it ends and is billed"
            )
        call.let_go()
        return run.created.is_set() and not run.finished


# -- Composition root: build_engine ------------------------------------------------------------


def background_always(config: Config, http: bool) -> bool:
    """Whether every call runs in background mode: over HTTP with --stateless and a task secret
    (tasks are on, signed), so any instance can serve a call's task from OpenAI's stored
    response (LongCalls.signing)."""
    stateless = http and config.get("server", "http")["stateless"]
    return stateless and tasks_off_reason(config, stateless) is None


def multi_user_check(config: Config, users: "UserDirectory"):
    """Over HTTP, whether calls can come from several people (Authenticator.multi_user, for
    the server's own users): with an OAuth issuer, or once named users exist."""
    issuer = config.get("server", "auth")["issuer"]
    return lambda: bool(issuer) or users.exist()


def build_engine(config: Config, log: Log, *, http: bool = False) -> AnswerEngine:
    """The answer engine and every part it is given: the state (one StateStore), the spending
    that admits and books calls, the OpenAI client, the check of the models' shutdown dates.
    Nothing is opened or imported here: the store and the client open on first use. `http`:
    the engine serves --http (several people may call; --stateless may force background)."""
    timezone = config.get("policy", "timezone")
    store = StateStore(state_backend(config), log, timezone, config.get("state", "retention_days"))
    state = EngineState(
        store, timezone, config.get("cache", "ttl_s"), config.get("cache", "max_entries")
    )
    multi_user = multi_user_check(config, state.users) if http else (lambda: False)
    spending = Spending(config, Pricing(config, log), state, multi_user)
    upstream = ResponsesClient(config, log, Refusals(config, log), background_always(config, http))
    retirements = RetirementCheck(config, log, store, upstream.client)
    return AnswerEngine(config, log, state, spending, upstream, retirements, multi_user)


# ============================================================================================
# Tools
# ============================================================================================

# -- Versions and instructions: the protocol versions, what the model is told ------------------


# The MCP protocol versions this server speaks, one name each: code compares these, never the
# dates as text (a mistyped name fails at once; a mistyped date would compare wrong quietly).
MCP_2024_11_05 = "2024-11-05"
MCP_2025_03_26 = "2025-03-26"  # tool annotations, instructions, progress messages
MCP_2025_06_18 = "2025-06-18"  # titles, outputSchema and structuredContent
MCP_2025_11_25 = "2025-11-25"  # experimental tasks (capabilities.tasks)
MCP_2026_07_28 = "2026-07-28"  # stateless: no initialize; the tasks extension
# The handshake era: initialize negotiates one of these for the session.
PROTOCOL_VERSIONS = (MCP_2024_11_05, MCP_2025_03_26, MCP_2025_06_18, MCP_2025_11_25)
LATEST_PROTOCOL = PROTOCOL_VERSIONS[-1]
# The stateless era: no initialize, every request names its version in params._meta.
MODERN_VERSIONS = (MCP_2026_07_28,)
SUPPORTED_VERSIONS = (*MODERN_VERSIONS, *reversed(PROTOCOL_VERSIONS))  # newest first

SERVER_INSTRUCTIONS = (
    "Answers questions with OpenAI's Responses API and live web search, returning JSON "
    "{answer, used_search, citations, model, response_id}. Use `answer` for most questions, "
    "especially anything current (versions, releases, prices, news, dates); `answer_detailed` "
    "for complex research, comparisons or analysis worth a slower, thorough answer; "
    "`answer_quick` for simple lookups where speed matters. Quote the citations' URLs when you "
    "relay an answer. "
    "To ask more about an answer (a detail, a next step, the rest of a shortened answer), pass "
    "its response_id as previous_response_id: the model keeps what it found, so it need not "
    "search again; a new topic is a new question without it."
)
# Added only while answer_deep is listed: an agent must not learn of a tool it cannot call.
DEEP_INSTRUCTIONS = (
    " Use `answer_deep` only when the user asks for thorough research: it writes a long cited "
    "report, takes minutes and costs dollars per call. Ask about its report with `answer` and "
    "the report's response_id, not with another answer_deep."
)


def server_instructions(deep: bool) -> str:
    """What initialize (and server/discover) tells the client's model about these tools."""
    return SERVER_INSTRUCTIONS + (DEEP_INSTRUCTIONS if deep else "")


# -- Schemas: the tools' inputs, outputs and annotations (tools/list) --------------------------


RESPONSE_ID_MAX = 256  # characters in a previous_response_id (OpenAI's are about 50)
INPUT_PROPERTIES = {
    "query": {
        "type": "string",
        "minLength": 1,
        "maxLength": 20_000,
        "description": "The question, in any language; the answer uses the same language.",
    },
    "recency_days": {
        "type": "integer",
        "minimum": 1,
        "maximum": 36_500,
        "description": "Prefer sources from the last N days (default from config: 60).",
    },
    "max_results": {
        "type": "integer",
        "minimum": 1,
        "maximum": 50,
        "description": "About how many search results to use (default from config: 5).",
    },
    "domains": {
        "type": "array",
        "items": {"type": "string", "minLength": 1},
        "maxItems": 20,
        "description": 'Restrict the search to these domains, e.g. ["docs.python.org"].',
    },
    "fresh": {
        "type": "boolean",
        "description": "true: do not reuse a recent identical answer from the cache.",
    },
    "previous_response_id": {
        "type": "string",
        "minLength": 1,
        "maxLength": RESPONSE_ID_MAX,
        "pattern": "^[A-Za-z0-9_-]+$",
        "description": (
            "A follow-up: the response_id of an earlier answer (within 30 days) to continue "
            "from, so the model knows that conversation and need not search for it again. "
            "The earlier turns are billed again as input."
        ),
    },
}

FILES_MAX_ITEMS = 100  # the schema's bound; files.max_files is the one a call meets
INPUT_PROPERTIES["files"] = {
    "type": "array",
    "items": {"type": "string", "minLength": 1},
    "maxItems": FILES_MAX_ITEMS,
    "description": (
        "Screenshots, PDFs, logs or source files the question is about, sent to the model with "
        "it: each a local path (inside the project), an https:// URL or a data: URL (base64). "
        "PNG, JPEG, WebP, GIF, PDF and UTF-8 text; secrets (.env, keys, ~/.ssh) are refused. "
        "A follow-up (previous_response_id) need not send them again."
    ),
}

OUTPUT_SCHEMA = {
    "type": "object",
    "properties": {
        "answer": {"type": "string"},
        "used_search": {"type": "boolean"},
        "citations": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "url": {"type": "string"},
                    "title": {"type": "string"},
                    "published_at": {"type": "string"},
                },
                "required": ["url", "published_at"],
            },
        },
        "model": {"type": "string"},
        "response_id": {
            "type": ["string", "null"],
            "description": "pass as previous_response_id to ask a follow-up",
        },
    },
    "required": ["answer", "used_search", "citations", "model"],
}

TOOLS_BY_NAME = {tool["name"]: tool for tool in TOOL_TABLE}

ANNOTATIONS = {
    "readOnlyHint": True,
    "destructiveHint": False,
    "idempotentHint": False,
    "openWorldHint": True,
}


ANSWER_RESULT = "answer_result"  # the fourth tool: collects a handed-off answer
ANSWER_RESULT_TOOL = {
    "name": ANSWER_RESULT,
    "title": "Collect a handed-off answer",
    "description": (
        "Collects an answer that answer, answer_detailed, answer_quick or answer_deep handed off "
        "because it took long. Pass the id they gave; waits up to wait_s seconds for it."
    ),
    "inputSchema": {
        "type": "object",
        "properties": {
            "id": {"type": "string", "minLength": 1, "maxLength": 4096},
            "wait_s": {
                "type": "integer",
                "minimum": 0,
                "maximum": 60,
                "description": "seconds to wait for it (default 30)",
            },
            "cancel": {
                "type": "boolean",
                "description": "true: stop the research and drop the answer instead",
            },
        },
        "required": ["id"],
    },
}


def tool_definitions(
    version: str,
    cache: bool = False,
    handoff: bool = False,
    tasks: bool = False,
    deep: bool = False,
) -> list[dict]:
    """tools/list's tools, with only the fields the negotiated protocol version has;
    `fresh` is offered only when the answer cache is on, answer_result only when calls may be
    handed off, execution.taskSupport (2025-11-25) only when tasks are on, and answer_deep
    only when turned on (tools.answer_deep)."""
    listed = []
    for tool in TOOL_TABLE:
        if tool.get("opt_in") and not deep:
            continue
        names = tool["properties"] + (("fresh",) if cache else ())
        entry = {
            "name": tool["name"],
            "description": tool["description"],
            "inputSchema": {
                "type": "object",
                "properties": {name: INPUT_PROPERTIES[name] for name in names},
                "required": ["query"],
            },
        }
        if version >= MCP_2025_03_26:
            entry["annotations"] = {"title": tool["title"], **ANNOTATIONS}
        if version >= MCP_2025_06_18:
            entry["title"] = tool["title"]
            entry["outputSchema"] = OUTPUT_SCHEMA
        if tasks and version == MCP_2025_11_25:
            entry["execution"] = {"taskSupport": "optional"}
        listed.append(entry)
    if handoff:
        entry = {key: value for key, value in ANSWER_RESULT_TOOL.items() if key != "title"}
        if version >= MCP_2025_03_26:
            entry["annotations"] = {
                "title": ANSWER_RESULT_TOOL["title"],
                **ANNOTATIONS,
                "idempotentHint": True,
            }
        if version >= MCP_2025_06_18:
            entry["title"] = ANSWER_RESULT_TOOL["title"]
            entry["outputSchema"] = OUTPUT_SCHEMA
        listed.append(entry)
    return listed


# -- Argument checks: each argument validated, domains normalized ------------------------------


DOMAIN_MAX = 253  # characters in a domain name (RFC 1035)
LABEL_MAX = 63  # characters in one of its labels


class InvalidParams(Exception):
    """Arguments that do not fit the tool's input schema."""


def _describe(value) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (ValueError, RecursionError):
        text = f"a deeply nested {type(value).__name__}"
    return text if len(text) <= 40 else text[:39] + "…"


def _check_integer(name: str, value, schema: dict) -> int:
    """An integer in range; 2.0 counts as 2 (JSON does not tell them apart)."""
    whole = type(value) is int or (type(value) is float and value.is_integer())
    if not whole:
        raise InvalidParams(f"'{name}' must be a whole number, got {_describe(value)}")
    if not schema["minimum"] <= value <= schema["maximum"]:
        raise InvalidParams(
            f"'{name}' must be from {schema['minimum']} to {schema['maximum']}, got {value}"
        )
    return int(value)


def _check_unicode(name: str, value) -> None:
    """Refuses a lone UTF-16 surrogate (JSON's "\\ud800"): no valid text holds one."""
    if isinstance(value, str) and not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidParams(
                f"'{name}' holds a lone surrogate (an unpaired \\ud800-\\udfff escape), which is "
                "not valid Unicode; send the text as valid UTF-8 or as escaped surrogate pairs"
            ) from None
    elif isinstance(value, list):
        for item in value:
            _check_unicode(name, item)


def _check_domains(value, schema: dict) -> list[str]:
    if not isinstance(value, list):
        raise InvalidParams(f"'domains' must be an array of strings, got {_describe(value)}")
    if len(value) > schema["maxItems"]:
        raise InvalidParams(f"'domains' may list at most {schema['maxItems']} domains")
    for item in value:
        if not isinstance(item, str):
            raise InvalidParams(
                f"'domains' items must be domain names like \"example.com\", got {_describe(item)}"
            )
    try:
        return normalize_domains(value)
    except ValueError as exc:
        raise InvalidParams(f"'domains' item {exc}") from None


def normalize_domains(items: list[str]) -> list[str]:
    """Each item as normalize_domain makes it, duplicates dropped; ValueError names the item."""
    domains: list[str] = []
    for item in items:
        try:
            domain = normalize_domain(item)
        except ValueError as exc:
            raise ValueError(f"{_describe(item)} {exc}") from None
        if domain not in domains:
            domains.append(domain)
    return domains


def normalize_domain(item: str) -> str:
    """The host name web_search's filters.allowed_domains expects, from what a person wrote.

    A URL becomes its host, an international name its IDNA (xn--) form, the result lower
    case. Raises ValueError saying what is wrong, for a message that names the item.
    """
    text = item.strip()
    if not text:
        raise ValueError("is empty: remove it, or write a domain name like example.com")
    if "*" in text:
        raise ValueError(
            "has a wildcard, which is not supported: write the domain itself "
            "(example.com covers its subdomains too)"
        )
    if "," in text:
        raise ValueError("has a comma: write each domain as an item of its own")
    if any(char.isspace() for char in text):
        raise ValueError("has a space: write each domain as an item of its own")
    rest = text.split("://", 1)[-1]  # a URL: keep its host
    host = rest.split("/", 1)[0].split("?", 1)[0].split("#", 1)[0].rpartition("@")[2]
    if host.count(":") == 1:
        host = host.partition(":")[0]  # a port
    host = host.rstrip(".")
    if host.isascii():
        host = host.lower()
    else:
        host = ".".join(_a_label(label) for label in _uts46_mapped(host).split("."))
    if not host:
        raise ValueError("has no host name: write a domain name like example.com")
    if len(host) > DOMAIN_MAX:
        raise ValueError(f"is longer than {DOMAIN_MAX} characters")
    for label in host.split("."):
        if not label:
            raise ValueError("has an empty label (two dots in a row)")
        if len(label) > LABEL_MAX:
            raise ValueError(f"has a label longer than {LABEL_MAX} characters")
        if label[0] == "-" or label[-1] == "-":
            raise ValueError("has a label that starts or ends with '-'")
    bad = next((c for c in host if not (c.isascii() and c.isalnum()) and c not in "-_."), None)
    if bad is not None:
        raise ValueError(f"has {bad!r}, which a domain name cannot contain")
    return host


# International names as IDNA 2008 with UTS #46 nontransitional processing, as browsers and
# registries read them today (Python's "idna" codec is IDNA 2003, which turns faß.de into
# fass.de, another domain). What the standard library allows: compatibility forms and case
# mapped (NFKC, then lower case, which keeps ß and ς), every label checked, then Punycode.
_IDEOGRAPHIC_STOPS = str.maketrans({"\u3002": ".", "\uff61": ".", "\uff0e": "."})
_CAPITAL_SIGMA = str.maketrans({"\u03a3": "\u03c3"})  # σ always (lower() ends a word in ς)
_JOINERS = ("\u200c", "\u200d")  # ZWNJ, ZWJ: kept, and valid only after a virama


def _uts46_mapped(host: str) -> str:
    import unicodedata

    mapped = unicodedata.normalize("NFKC", host.translate(_IDEOGRAPHIC_STOPS))
    mapped = mapped.translate(_CAPITAL_SIGMA).lower()
    return unicodedata.normalize("NFC", mapped.translate(_IDEOGRAPHIC_STOPS)).rstrip(".")


def _a_label(label: str) -> str:
    """The label in the form DNS carries (xn--...), or ValueError saying what is wrong."""
    import unicodedata

    if label.isascii():
        return label
    bad = "is not a valid international domain name: the label"
    if label[0] == "-" or label[-1] == "-":
        raise ValueError(f"{bad} {label!r} starts or ends with '-'")
    if label[2:4] == "--":
        raise ValueError(f"{bad} {label!r} has '--' in its third and fourth places")
    if unicodedata.category(label[0])[0] == "M":
        raise ValueError(f"{bad} {label!r} starts with a combining mark")
    for index, char in enumerate(label):
        if char in _JOINERS:
            if index and unicodedata.combining(label[index - 1]) == 9:
                continue  # a joiner after a virama shapes a script (CONTEXTJ)
            raise ValueError(f"{bad} {label!r} has a zero-width joiner that follows no virama")
        if not (unicodedata.category(char)[0] in "LM" or char.isdecimal() or char in "-_"):
            raise ValueError(f"{bad} {label!r} has {char!r}, which IDNA 2008 does not allow")
    return "xn--" + label.encode("punycode").decode("ascii")


def validate_arguments(tool: str, arguments) -> dict:
    """Checks a call's arguments against the tool's input schema; returns the clean values.

    Properties the tool does not declare are ignored, as JSON Schema allows.
    """
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise InvalidParams(f"'arguments' must be an object, got {_describe(arguments)}")
    declared = TOOLS_BY_NAME[tool]["properties"]
    for name in declared:
        _check_unicode(name, arguments.get(name))
    query = arguments.get("query")
    if query is None:
        raise InvalidParams("'query' is required: pass the question as a string")
    if not isinstance(query, str):
        raise InvalidParams(f"'query' must be a string, got {_describe(query)}")
    if _is_blank(query):
        raise InvalidParams(
            "'query' must not be empty: it holds only whitespace or invisible characters "
            "(NUL, zero-width space...); pass the question as text"
        )
    limit = INPUT_PROPERTIES["query"]["maxLength"]
    if len(query) > limit:
        raise InvalidParams(f"'query' is {len(query)} characters; the limit is {limit}")
    clean = {"query": query.strip()}
    for name in declared:
        if INPUT_PROPERTIES[name]["type"] == "integer" and arguments.get(name) is not None:
            clean[name] = _check_integer(name, arguments[name], INPUT_PROPERTIES[name])
    if "domains" in declared and arguments.get("domains") is not None:
        clean["domains"] = _check_domains(arguments["domains"], INPUT_PROPERTIES["domains"])
    fresh = arguments.get("fresh")
    if fresh is not None and type(fresh) is not bool:
        raise InvalidParams(f"'fresh' must be true or false, got {_describe(fresh)}")
    if fresh:
        clean["fresh"] = True
    previous = arguments.get("previous_response_id")
    if "previous_response_id" in declared and previous is not None:
        clean["previous_response_id"] = _check_response_id(previous)
    if "files" in declared and arguments.get("files") is not None:
        clean["files"] = _check_files(arguments["files"])
    return clean


def _check_files(value) -> list[str]:
    """A list of non-empty strings: what each one is, and whether it may be sent, is the
    FileReader's to say (on the call's worker, with the client's roots)."""
    if not isinstance(value, list) or not all(isinstance(i, str) and i.strip() for i in value):
        raise InvalidParams(
            f"'files' must be an array of paths or URLs (non-empty strings), got {_describe(value)}"
        )
    if len(value) > FILES_MAX_ITEMS:
        raise InvalidParams(f"'files' may list at most {FILES_MAX_ITEMS} files")
    return [item.strip() for item in value]


# Characters no one sees that Python's str.isspace() does not count: fillers (Hangul, braille
# blank), variation selectors and the combining grapheme joiner. Categories Cc (NUL, controls),
# Cf (zero-width space, joiners, BOM, bidi marks) and Z* are tested by category.
_INVISIBLE = frozenset("\u034f\u115f\u1160\u2800\u3164\uffa0") | frozenset(
    map(chr, [*range(0xFE00, 0xFE10), *range(0xE0100, 0xE01F0)])
)


def _is_blank(text: str) -> bool:
    """Whether text shows nothing: a query of a NUL or a zero-width space asks no question, and
    would be billed like one."""
    import unicodedata

    return all(
        char.isspace() or char in _INVISIBLE or unicodedata.category(char) in _BLANK_CATEGORIES
        for char in text
    )


_BLANK_CATEGORIES = ("Cc", "Cf", "Zs", "Zl", "Zp")


def _check_response_id(value) -> str:
    """A previous_response_id the API could know: letters, digits, '_' and '-' only."""
    name = "previous_response_id"
    if not isinstance(value, str):
        raise InvalidParams(f"'{name}' must be a string (a response_id), got {_describe(value)}")
    value = value.strip()
    if not value or len(value) > RESPONSE_ID_MAX:
        raise InvalidParams(f"'{name}' must be 1 to {RESPONSE_ID_MAX} characters")
    if not all(char.isascii() and (char.isalnum() or char in "_-") for char in value):
        raise InvalidParams(
            f"'{name}' must be the response_id an earlier answer gave (like resp_abc123), "
            f"got {_describe(value)}"
        )
    return value


# -- Prompts: slash commands that ask for a tool (prompts/list, prompts/get) -------------------
# Clients show MCP prompts to the user (Claude Code as /mcp__<server>__<prompt>); each expands
# to one user message that asks the client's model to call our tool with the user's words, so
# a user can ask for research without hoping the model picks the tool. `research` asks for
# `answer`, the standard tool SERVER_INSTRUCTIONS recommends for most questions; the model
# may still be told to go deeper in the question itself. `deep` marks the prompt listed only
# while answer_deep is (tools.answer_deep).

PROMPT_TABLE = (
    {
        "name": "research",
        "title": "Research a question",
        "description": "Ask the answer tool (web search, cited sources) a question.",
        "arguments": (("question", "The question, in any language.", True),),
        "tool": "answer",
    },
    {
        "name": "deep-research",
        "title": "Deep research report",
        "description": (
            "Ask answer_deep for a long, cited research report: takes minutes and costs "
            "dollars per call."
        ),
        "arguments": (("question", "What to research, in any language.", True),),
        "tool": DEEP_TOOL,
        "deep": True,
    },
    {
        "name": "ask-about-file",
        "title": "Ask about a file",
        "description": (
            "Ask the answer tool a question about a screenshot, PDF, log or source file."
        ),
        "arguments": (
            ("path", "The file: a path inside the project, an https:// URL or a data: URL.", True),
            ("question", "What to ask about it, in any language.", True),
        ),
        "tool": "answer",
    },
)
PROMPTS_BY_NAME = {prompt["name"]: prompt for prompt in PROMPT_TABLE}


def listed_prompts(deep: bool) -> list[dict]:
    """The prompts on offer: deep-research only while answer_deep is turned on."""
    return [prompt for prompt in PROMPT_TABLE if deep or not prompt.get("deep")]


def prompt_definitions(version: str, deep: bool) -> list[dict]:
    """prompts/list's prompts, with titles from 2025-06-18 on (as tools have them)."""
    listed = []
    for prompt in listed_prompts(deep):
        entry = {
            "name": prompt["name"],
            "description": prompt["description"],
            "arguments": [
                {"name": name, "description": text, "required": required}
                for name, text, required in prompt["arguments"]
            ],
        }
        if version >= MCP_2025_06_18:
            entry["title"] = prompt["title"]
        listed.append(entry)
    return listed


def prompt_arguments(prompt: dict, arguments) -> dict[str, str]:
    """A prompts/get's arguments checked against its prompt: an object of strings (as the
    spec types them), none unknown, each required one present and not blank, and none the
    tool would refuse as its query (a lone surrogate, a question over its maxLength)."""
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise InvalidParams(f"'arguments' must be an object, got {_describe(arguments)}")
    known = [name for name, _, _ in prompt["arguments"]]
    for name, value in arguments.items():
        if name not in known:
            raise InvalidParams(
                f"prompt {prompt['name']!r} takes no argument {_describe(name)}; "
                f"it takes {', '.join(known)}"
            )
        if not isinstance(value, str):
            raise InvalidParams(f"argument {name!r} must be a string, got {_describe(value)}")
        _check_unicode(name, value)  # as the tool checks it: never a message it would refuse
    for name, _, required in prompt["arguments"]:
        if required and _is_blank(arguments.get(name, "")):
            raise InvalidParams(f"prompt {prompt['name']!r} needs the argument {name!r}")
    checked = {name: value.strip() for name, value in arguments.items()}
    # The question, trimmed as the message carries it, becomes the tool's query.
    limit, length = INPUT_PROPERTIES["query"]["maxLength"], len(checked.get("question", ""))
    if length > limit:
        raise InvalidParams(
            f"argument 'question' is {length} characters (trimmed); the "
            f"{prompt['tool']} tool takes at most {limit}"
        )
    return checked


def prompt_message(prompt: dict, arguments: dict[str, str]) -> str:
    """The user message a prompt expands to: the tool to call and its arguments, as JSON."""
    call = {"query": arguments["question"]}
    if "path" in arguments:
        call["files"] = [arguments["path"]]
    text = (
        # The server's own name (serverInfo): the client's name for it is the user's choice.
        f"Call the `{prompt['tool']}` tool of the {SERVER_NAME} MCP server with these "
        f"arguments:\n\n{json.dumps(call, ensure_ascii=False, indent=2)}\n\n"
        "Then give me its answer, quoting the citations' URLs."
    )
    if prompt.get("deep"):
        text += " The report takes minutes: wait for it rather than calling the tool again."
    return text


def prompt_result(name, arguments, deep: bool) -> dict:
    """prompts/get's result for one prompt, or InvalidParams saying what is wrong."""
    prompt = PROMPTS_BY_NAME.get(name) if isinstance(name, str) else None
    if prompt is None or prompt not in listed_prompts(deep):
        off = (
            " (it is off: set tools.answer_deep: true or MCP_ANSWER_DEEP=1 to list it)"
            if prompt is not None
            else ""
        )
        names = ", ".join(entry["name"] for entry in listed_prompts(deep))
        raise InvalidParams(f"unknown prompt {_describe(name)}{off}; prompts: {names}")
    checked = prompt_arguments(prompt, arguments)
    return {
        "description": prompt["description"],
        "messages": [
            {"role": "user", "content": {"type": "text", "text": prompt_message(prompt, checked)}}
        ],
    }


# ============================================================================================
# JSON-RPC dispatch
# ============================================================================================

# -- JSON-RPC: error codes, _meta keys, eras, replies ------------------------------------------


# What a request POST ends with when its call is cancelled: 2025-era Streamable HTTP ends a
# request's response only with a JSON-RPC response, and the MCP SDKs' servers send this one.
REQUEST_CANCELLED = -32800


PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
SERVER_BUSY = -32000
TOOL_FAILED = -32001
HEADER_MISMATCH = -32020  # 2026-07-28: HTTP headers that disagree with the body
UNSUPPORTED_VERSION = -32022  # 2026-07-28: a protocol version this server does not speak

META_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
META_SERVER_INFO = "io.modelcontextprotocol/serverInfo"
META_CLIENT_INFO = "io.modelcontextprotocol/clientInfo"
MODERN_ONLY_METHODS = frozenset({"server/discover", "subscriptions/listen"})
# How long a client may reuse server/discover and tools/list: both are fixed for the life of
# the process, and a restarted server is a new process (stdio) or rarely changes its tools.
LIST_TTL_MS = 3_600_000

# The era a request speaks, as its methods receive it in `version`: the 2026-07-28 version a
# stateless request names in its _meta, or HANDSHAKE_ERA (None) for a request of the
# handshake era, which speaks what initialize negotiated (Session.protocol_version).
HANDSHAKE_ERA = None


def handshake_era(version: str | None) -> bool:
    """Whether a request is of the handshake era (its session's version applies)."""
    return version is HANDSHAKE_ERA


def modern_era(version: str | None) -> bool:
    """Whether a request is of the stateless era (2026-07-28): it named its own version."""
    return version is not HANDSHAKE_ERA


def spoken_version(version: str | None, session: Session) -> str:
    """The protocol version a request speaks: its own, or its session's negotiated one."""
    return session.protocol_version if handshake_era(version) else version


class RpcError(Exception):
    def __init__(self, code: int, message: str, data=None):
        super().__init__(message)
        self.code, self.message, self.data = code, message, data


def rpc_result(request_id, result: dict) -> dict:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def rpc_error(request_id, code: int, message: str, data=None) -> dict:
    error = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


def is_reply(message: dict) -> bool:
    """Whether a message going to the client ends a request (its result or error), rather than
    a notification on the way (progress): a transport's response is complete after it."""
    return "method" not in message


# -- Task ids: self-describing and tamper-proof --------------------------------------------------
# A task (or handoff) id carries what any instance needs to serve it from OpenAI's stored
# background response, signed with a secret the instances share: no store of our own.
# Its payload is readable (base64) but unforgeable; a response id is useless without the API key.

TASK_ID_VERSION = "t1"
TASK_ID_MAX = 4096  # characters; ours are about 300
_TASK_ID_CONTEXT = b"openai-responses-mcp task id"  # the secret signs nothing else


class TaskIdError(ValueError):
    """A task id this server will not honour; `reason` is said in the -32602 error."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def _b64(data: bytes) -> str:
    import base64

    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _task_mac(secret: str, signed: str) -> str:
    import hashlib
    import hmac

    key = hmac.new(secret.encode("utf-8"), _TASK_ID_CONTEXT, hashlib.sha256).digest()
    return _b64(hmac.new(key, signed.encode("ascii"), hashlib.sha256).digest())


def mint_task_id(secret: str, fields: dict, ttl_ms: int, now_ms: int | None = None) -> str:
    """A signed id carrying `fields` (JSON values), plus its creation `c` and expiry `e` in
    epoch milliseconds and a nonce `n` (two calls may share one response: single flight).

    What a task needs to be served from GET /responses/{id} anywhere: `r` the response id, `t`
    the tool, `k` the kind (x: extension task, s: 2025-11-25 task, h: handoff), `d` the call's
    day (access dates), `m` policy.max_citations, `o` the requested model, `z` the client's
    result size (server.result_max_chars for it), `w` the completion window of a discounted
    run (polled, not streamed, by whoever collects it).
    """
    now_ms = round(time.time() * 1000) if now_ms is None else now_ms
    payload = {**fields, "c": now_ms, "e": now_ms + ttl_ms, "n": _b64(os.urandom(8))}
    body = _b64(json.dumps(payload, separators=(",", ":"), sort_keys=True).encode("utf-8"))
    signed = f"{TASK_ID_VERSION}.{body}"
    return f"{signed}.{_task_mac(secret, signed)}"


def open_task_id(secret: str, task_id, now_ms: int | None = None) -> dict:
    """The fields of a task id this server signed and that has not expired; else TaskIdError.

    The signature is compared as text, in constant time, before anything is decoded: bytes
    would let a changed last base64 character (whose low bits are ignored) pass.
    """
    import base64
    import hmac

    if not (isinstance(task_id, str) and task_id.isascii() and len(task_id) <= TASK_ID_MAX):
        raise TaskIdError("not a task id of this server")
    parts = task_id.split(".")
    if len(parts) != 3 or not parts[0].startswith("t"):
        raise TaskIdError("not a task id of this server")
    version, body, mac = parts
    if version != TASK_ID_VERSION:
        raise TaskIdError(f"task id version {version!r} is not one this server reads")
    if not hmac.compare_digest(_task_mac(secret, f"{version}.{body}"), mac):
        raise TaskIdError("forged or altered: its signature does not match")
    try:
        payload = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    except ValueError:
        payload = None
    if not (isinstance(payload, dict) and type(payload.get("e")) is int):
        raise TaskIdError("unreadable")
    now_ms = round(time.time() * 1000) if now_ms is None else now_ms
    if now_ms >= payload["e"]:
        raise TaskIdError(f"expired at {iso_utc(payload['e'])}")
    return payload


def iso_utc(epoch_ms: int) -> str:
    """ISO 8601 in UTC, as tasks' createdAt and lastUpdatedAt are written."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch_ms / 1000))


def tasks_off_reason(config: Config, stateless: bool) -> str | None:
    """Why tasks and handoffs are off, or None when they are on.

    With --stateless the next request may reach another instance, which can serve a task only
    from a signed id; without a secret nothing is offered and every call answers inline.
    """
    if stateless and not config.get("server", "tasks", "secret"):
        return (
            "tasks and handoffs are off with --stateless until server.tasks.secret "
            "(MCP_TASK_SECRET) is set: another instance could not serve them"
        )
    return None


# -- Task wire shapes: a task's view, a handoff's answer, client names -------------------------
# Two shapes of the same idea: MCP 2025-11-25's experimental tasks (capabilities.tasks, ttl,
# pollInterval, tasks/result, tasks/list) and the 2026-07-28 extension (declared per request
# in _meta, resultType "task", ttlMs, pollIntervalMs, tasks/update, no list).

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
RELATED_TASK = "io.modelcontextprotocol/related-task"  # tasks/result's _meta (2025-11-25)
MISSING_CAPABILITY = -32021  # 2026-07-28: the request lacks a client capability it needs
HANDOFF_META = "openai-responses-mcp/handoff"


def task_view(
    shape: str,
    task_id: str,
    status: str,
    created_ms: int,
    updated_ms: int,
    ttl_ms: int | None,
    poll_ms: int,
    message: str | None = None,
) -> dict:
    """A task as its client's shape writes it: "extension" (ttlMs, pollIntervalMs) or
    MCP_2025_11_25 (ttl, pollInterval). The caller adds resultType, result or error."""
    extension = shape == "extension"
    view = {
        "taskId": task_id,
        "status": status,
        "createdAt": iso_utc(created_ms),
        "lastUpdatedAt": iso_utc(updated_ms),
        "ttlMs" if extension else "ttl": ttl_ms,
        "pollIntervalMs" if extension else "pollInterval": poll_ms,
    }
    if message:
        view["statusMessage"] = message
    return view


def tasks_extension_declared(params) -> bool:
    """Whether this request's own _meta declares the tasks extension (2026-07-28): only then
    may its reply be a task, and only then are tasks/* served to it."""
    meta = params.get("_meta") if isinstance(params, dict) else None
    caps = meta.get(META_CAPABILITIES) if isinstance(meta, dict) else None
    extensions = caps.get("extensions") if isinstance(caps, dict) else None
    return isinstance(extensions, dict) and isinstance(extensions.get(TASKS_EXTENSION), dict)


def missing_tasks_extension() -> RpcError:
    """The -32021 error (HTTP 400) for tasks/* from a request that did not declare tasks."""
    return RpcError(
        MISSING_CAPABILITY,
        f"Missing required client capability: the {TASKS_EXTENSION} extension (declare it in "
        "params._meta clientCapabilities.extensions)",
        {"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}},
    )


def answered_response_id(reply: dict | None) -> str | None:
    """The response id a tool result's answer carries (None: an error, or none given)."""
    result = reply.get("result") if isinstance(reply, dict) else None
    answer = result.get("structuredContent") if isinstance(result, dict) else None
    if answer is None and isinstance(result, dict) and result.get("content"):
        try:
            answer = json.loads(result["content"][0].get("text", ""))
        except (ValueError, AttributeError, TypeError):
            answer = None
    response_id = answer.get("response_id") if isinstance(answer, dict) else None
    return response_id if isinstance(response_id, str) and response_id else None


def handoff_answer(handoff_id: str, model: str, elapsed_s: int, ttl_ms: int) -> dict:
    """The answer of a call handed off (or still not ready for answer_result): the output
    contract's four keys, so the result validates against the tool's outputSchema, and words
    that tell the model how to collect the answer."""
    return {
        "answer": (
            f"Still researching ({elapsed_s} s so far); the answer is not ready yet. Call the "
            f'answer_result tool with {{"id": "{handoff_id}", "wait_s": 30}} to collect it; '
            f"it can be collected for {max(ttl_ms // 60_000, 1)} minutes."
        ),
        "used_search": False,
        "citations": [],
        "model": model,
        "response_id": None,  # not answered yet: answer_result's answer will carry it
    }


# What a client needs of this server, by clientInfo.name: `handoff_s`, seconds after which a
# call is handed off, for clients that give up on a tool call sooner than a long answer takes
# and support no tasks; `result_chars`, the longest tool result text (UTF-8 bytes) the client
# passes its model whole, for clients known to show less than server.result_max_chars
# (default 50,000: Claude Code's).
HANDOFF_CLIENTS = {
    # Codex CLI: tool_timeout_sec defaults to 60 s in older releases (openai/codex,
    # codex-rs/core/src/mcp_connection_manager.rs), 300 s in newer ones. Codex 0.169.0 and
    # 0.171.0 cut the middle out of a result longer than about 12,000 characters, silently.
    "codex-mcp-client": {"handoff_s": 50, "result_chars": 12_000},
    "codex": {"handoff_s": 50, "result_chars": 12_000},  # older Codex CLI builds
    # Claude Desktop: the TypeScript SDK's 60 s, not configurable (anthropics/claude-code#22542).
    "claude-ai": {"handoff_s": 50},
    # Cursor cancels a tool call after 5 minutes (cursor/cursor#3510).
    "cursor-vscode": {"handoff_s": 240},
    # Claude Code 2.1 shows about 50,000 characters, then saves the result to a file and shows
    # its model a 2 KB preview; older versions refused results over 25,000 tokens.
    "claude-code": {"result_chars": 50_000},
}


def client_name_of(params, session: Session, version=HANDSHAKE_ERA) -> str | None:
    """initialize's clientInfo.name, or (2026-07-28) the one the request's _meta names."""
    if handshake_era(version):
        return session.client_name
    meta = params.get("_meta") if isinstance(params, dict) else None
    info = meta.get(META_CLIENT_INFO) if isinstance(meta, dict) else None
    return info.get("name") if isinstance(info, dict) else None


def result_chars(config: Config, client_name: str | None) -> int:
    """The longest result text for this client: server.result_max_chars_by_client when it
    names the client, else the smaller of its HANDOFF_CLIENTS size and
    server.result_max_chars."""
    name = client_name.strip().lower() if isinstance(client_name, str) else ""
    configured = {
        str(key).strip().lower(): size
        for key, size in config.get("server", "result_max_chars_by_client").items()
    }
    if name in configured:
        return configured[name]
    default = config.get("server", "result_max_chars")
    return min(default, HANDOFF_CLIENTS.get(name, {}).get("result_chars", default))


def handoff_after(config: Config, client_name: str | None) -> int:
    """Seconds after which a call without a task is handed off to answer_result; 0 = never.

    request.handoff_after_s decides when set; null leaves it to HANDOFF_CLIENTS."""
    configured = config.get("request", "handoff_after_s")
    if configured is not None:
        return configured
    name = client_name.strip().lower() if isinstance(client_name, str) else ""
    return HANDOFF_CLIENTS.get(name, {}).get("handoff_s", 0)


def _valid_id(value) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


# -- Eras: the version a request speaks, headers that must agree -------------------------------


def is_modern(method: str, params, header_version: str | None = None) -> bool:
    """Whether a request speaks the stateless 2026-07-28 era rather than the handshake era.

    The spec decides per request: one that names its version or capabilities in
    params._meta, calls a method only that era has, or (HTTP) carries a modern
    MCP-Protocol-Version header. Anything else is served as the handshake era always was.
    """
    if method in MODERN_ONLY_METHODS or header_version in MODERN_VERSIONS:
        return True
    meta = params.get("_meta") if isinstance(params, dict) else None
    return isinstance(meta, dict) and (META_VERSION in meta or META_CAPABILITIES in meta)


def modern_version(params) -> str:
    """The version a stateless request speaks, after checking the _meta it must carry."""
    meta = params.get("_meta") if isinstance(params, dict) else None
    if not isinstance(meta, dict):
        raise RpcError(
            INVALID_PARAMS,
            f"Invalid params: a {MODERN_VERSIONS[-1]} request needs params._meta with "
            f"{META_VERSION} and {META_CAPABILITIES}",
        )
    version = meta.get(META_VERSION)
    if not isinstance(version, str):
        raise RpcError(INVALID_PARAMS, f"Invalid params: params._meta needs {META_VERSION}")
    if not isinstance(meta.get(META_CAPABILITIES), dict):
        raise RpcError(
            INVALID_PARAMS, f"Invalid params: params._meta needs {META_CAPABILITIES} (an object)"
        )
    if version not in MODERN_VERSIONS:
        # A handshake version is spoken here, but only after initialize: say so, or the
        # message would list the very version it refuses.
        speaks = (
            f"{version} needs the initialize handshake; without it this server speaks "
            f"{', '.join(MODERN_VERSIONS)}"
            if version in PROTOCOL_VERSIONS
            else f"this server speaks {', '.join(SUPPORTED_VERSIONS)}"
        )
        raise RpcError(
            UNSUPPORTED_VERSION,
            f"Unsupported protocol version: {_describe(version)}; {speaks}",
            {"supported": list(SUPPORTED_VERSIONS), "requested": version},
        )
    return version


# What Streamable HTTP mirrors into Mcp-Name, by method (2026-07-28).
NAME_PARAMS = {
    "tools/call": "name",
    "prompts/get": "name",
    "resources/read": "uri",
    "tasks/get": "taskId",
    "tasks/cancel": "taskId",
    "tasks/update": "taskId",
}


def _mirrored(raw: str) -> str | None:
    """A mirrored header's value: optional whitespace trimmed, the Base64 sentinel decoded;
    None if it holds characters a header value may not."""
    import base64
    import binascii

    value = raw.strip(" \t")
    if not re.fullmatch(r"[\x20-\x7e]*", value):
        return None
    if value.startswith("=?base64?") and value.endswith("?=") and len(value) >= 11:
        try:
            return base64.b64decode(value[9:-2], validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return None
    return value


def header_mismatch(message: dict, header) -> str | None:
    """Why a stateless HTTP request's headers disagree with its body (-32020), or None.

    2026-07-28 mirrors MCP-Protocol-Version, Mcp-Method and, for tools/call and the like,
    Mcp-Name into headers so that proxies can route without reading bodies; a body that says
    otherwise would run something they did not route. `header(name)` reads one header.
    A body without a version is left to modern_version(), which words that error (-32602).
    """
    method, params = message["method"], message.get("params")
    params = params if isinstance(params, dict) else {}
    meta = params.get("_meta")
    version = meta.get(META_VERSION) if isinstance(meta, dict) else None
    mirrored = [("MCP-Protocol-Version", version), ("Mcp-Method", method)]
    if isinstance(params.get(NAME_PARAMS.get(method, "")), str):
        mirrored.append(("Mcp-Name", params[NAME_PARAMS[method]]))
    for name, body in mirrored:
        if not isinstance(body, str):
            continue
        raw = header(name)
        if raw is None:
            return f"Header mismatch: no {name} header (the body says {body[:60]!r})"
        value = _mirrored(raw)
        if value is None:
            return f"Header mismatch: the {name} header holds characters a header may not"
        if value != body:
            return (
                f"Header mismatch: {name} header value {value[:60]!r} does not match body "
                f"value {body[:60]!r}"
            )
    return None


def server_info(version: str) -> dict:
    info = {"name": SERVER_NAME, "version": __version__}
    if version >= MCP_2025_06_18:
        info["title"] = "OpenAI Responses (web search)"
    return info


def modern_result(result: dict, version: str) -> dict:
    """A stateless-era result: marked complete (unless it is a task), and saying which server
    wrote it."""
    result.setdefault("resultType", "complete")
    result["_meta"] = {**result.get("_meta", {}), META_SERVER_INFO: server_info(version)}
    return result


def progress_token(params) -> str | int | None:
    """The progressToken a request's params carry in _meta, if it is a valid one."""
    meta = params.get("_meta") if isinstance(params, dict) else None
    token = meta.get("progressToken") if isinstance(meta, dict) else None
    return token if _valid_id(token) else None


# -- Session: one client's negotiated state ----------------------------------------------------


class _Ask:
    """A request this server sent its client (Session.ask): set once answered (or given up
    on), and the response that came, if any."""

    __slots__ = ("answered", "response")

    def __init__(self):
        self.answered, self.response = threading.Event(), None


class Session:
    """One client's conversation: its protocol version, its calls in flight, and its outlet.

    `send` delivers messages that are not the direct reply to what was just handled: tool
    results from worker threads and progress notifications.
    """

    def __init__(self, send):
        self.send = send
        self.protocol_version = LATEST_PROTOCOL
        self.client_name = None  # initialize's clientInfo.name: who may need a handoff
        self.client_key = None  # whose tasks these are (the transport says; None: this session)
        self.user = LOCAL_USER  # who is asking (HTTP: Authenticator.authenticate); see Identity
        self._calls: dict = {}
        self._running = 0
        self._waiters: dict = {}  # request id -> Waiter (tasks/result, answer_result)
        self._closing: list = []  # what close() runs: the dispatcher's dropping of its tasks
        self.closed = False
        self.tasks_closed = False  # its client can collect nothing more: no call becomes a task
        self._lock = threading.Condition()
        # Files (see Files): stdio's paths are the client's own disk; its roots, once asked.
        self.local = False
        self.roots_capable = False  # initialize declared capabilities.roots
        self.elicits = False  # initialize declared form elicitation: the cost question is asked
        self.may_ask = False  # ... and budget.confirm_over_usd is set: a call may ask it
        # Streamable HTTP: a request to the client goes on the stream of the call that asks it
        # (Router.relate); None where everything shares one outlet (stdio, legacy SSE).
        self.relate = None
        self.roots: list | None = None  # the roots it listed (None: not asked since a change)
        self.roots_generation = 0  # counts notifications/roots/list_changed
        self._asks: dict = {}  # request id -> _Ask: requests to the client
        self._ask_seq = 0
        self.asks_ended = False  # no answer can come any more (stdio: end of input)

    def ask(self, method: str, params: dict, timeout: float, related=None, stop=None):
        """Sends the client a request and waits up to `timeout` for its result; TimeoutError
        when none comes (or the session ends, or the Event `stop` is set: its call was
        cancelled), ValueError when it answers with an error. `related`: the id of the call
        that asks (Streamable HTTP sends it on that call's stream)."""
        with self._lock:
            self._check_open()
            if self.asks_ended:
                raise TimeoutError(method)
            self._ask_seq += 1
            request_id = f"{SERVER_NAME}-{self._ask_seq}"
            slot = self._asks[request_id] = _Ask()
        if self.relate is not None and related is not None:
            self.relate(request_id, related)
        try:
            self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
            deadline = time.monotonic() + timeout
            while not slot.answered.wait(min(0.2, max(0.0, deadline - time.monotonic()))):
                if time.monotonic() >= deadline or (stop is not None and stop.is_set()):
                    break
        finally:
            with self._lock:
                self._asks.pop(request_id, None)
        response = slot.response
        if not isinstance(response, dict):
            raise TimeoutError(method)
        if "error" in response or not isinstance(response.get("result"), dict):
            raise ValueError(_one_line(str(response.get("error")), 200))
        return response["result"]

    def answered(self, message: dict) -> bool:
        """A response from the client: to the request of ask() waiting for it, if any (ask's
        ids are strings: any other id, a list or an object included, is no answer of ours)."""
        request_id = message.get("id")
        if not isinstance(request_id, str):
            return False
        with self._lock:
            slot = self._asks.get(request_id)
            if slot is None:
                return False
            if slot.response is not None:  # the first answer stands: a later one (a `run`
                return True  # after a `cancel`) must not overturn what the person chose
            slot.response = message
        slot.answered.set()
        return True

    def end_asks(self) -> None:
        """No answer can come any more (stdio: end of input): the requests to the client stop
        waiting for one, and none is sent from now on."""
        with self._lock:
            self.asks_ended = True
            asks = list(self._asks.values())
        for slot in asks:
            slot.answered.set()

    def _check_open(self) -> None:
        """A request that raced its session's end (HTTP: DELETE, expiry, pushed out) starts
        nothing: what it started now would outlive the session, which has dropped its own."""
        if self.closed:
            raise RpcError(REQUEST_CANCELLED, "Request cancelled: the session has ended")

    def register(self, call: Call) -> None:
        with self._lock:
            self._check_open()
            if call.id in self._calls:
                raise RpcError(
                    INVALID_REQUEST,
                    f"Invalid Request: id {json.dumps(call.id)} is already used by a call in "
                    "progress; use a new id",
                )
            self._calls[call.id] = call
            self._running += 1

    def unregister(self, call: Call) -> bool:
        """Forgets the call; True unless it was cancelled (then nothing may be sent for it)."""
        with self._lock:
            self._calls.pop(call.id, None)
            return not call.cancelled.is_set()

    def done(self) -> None:
        with self._lock:
            self._running -= 1
            self._lock.notify_all()

    def cancel(self, request_id) -> Call | None:
        with self._lock:
            call = self._calls.get(request_id)
            if call is not None:
                call.cancelled.set()  # under the lock, so unregister() sees it: no reply
        if call is not None:
            call.cancel()
        return call

    def cancel_all(self) -> list:
        """Cancels every call in flight; returns their request ids."""
        with self._lock:
            calls = list(self._calls.values())
            for call in calls:
                call.cancelled.set()
        for call in calls:
            call.cancel()
        return [call.id for call in calls]

    def in_flight(self) -> int:
        with self._lock:
            return self._running

    def add_waiter(self, request_id, waiter, limit: int) -> None:
        """Holds a request that waits for a task; -32000 (HTTP 429) past `limit` of them."""
        with self._lock:
            self._check_open()
            if request_id in self._waiters or request_id in self._calls:
                raise RpcError(
                    INVALID_REQUEST,
                    f"Invalid Request: id {json.dumps(request_id)} is already used by a request "
                    "in progress; use a new id",
                )
            if len(self._waiters) >= limit:
                raise RpcError(
                    SERVER_BUSY,
                    f"too many requests waiting for tasks in this session ({limit}, "
                    "server.tasks.max_per_client); wait for one to finish",
                    TOO_MANY_WAITING,
                )
            self._waiters[request_id] = waiter

    def remove_waiter(self, request_id, waiter) -> None:
        with self._lock:
            if self._waiters.get(request_id) is waiter:
                del self._waiters[request_id]

    def waiter(self, request_id):
        with self._lock:
            return self._waiters.get(request_id)

    def waiting(self) -> int:
        """Requests waiting for a task's end (they count against the per-session limits)."""
        with self._lock:
            return len(self._waiters)

    def on_close(self, action) -> None:
        """Runs action(session) when the session ends (once, however often it is asked)."""
        with self._lock:
            if action not in self._closing:
                self._closing.append(action)

    def close(self) -> list:
        """The session has ended (HTTP: DELETE, idle expiry, pushed out, its SSE stream closed):
        cancels its calls, drops its waiting requests and its tasks; returns the request ids
        of the calls cancelled."""
        with self._lock:
            self.closed = True  # no call or waiter joins from now on
            asks = list(self._asks.values())
        for slot in asks:  # a call waiting for the client's answer stops waiting
            slot.answered.set()
        cancelled = self.cancel_all()
        with self._lock:
            waiters, self._waiters = list(self._waiters.values()), {}
            actions, self._closing = self._closing, []
        for waiter in waiters:
            waiter.drop()
        for action in actions:
            action(self)
        return cancelled

    def stop_tasks(self) -> None:
        """Its client can collect no task or handoff any more (stdio: end of input): none is
        made from now on, and those it has are dropped (cancelled upstream if working); its
        calls answering inline go on. The actions stay for close() to run again (dropping is
        idempotent); stdio holds stop signals while this runs (StdioTransport._uninterrupted)."""
        with self._lock:
            self.tasks_closed = True
            actions = list(self._closing)
        for action in actions:
            action(self)

    def wait_idle(self, timeout: float | None = None, spare: int = 0) -> bool:
        """Waits until every call has finished and its answer has been sent (all but `spare`:
        a call's own worker waiting does not wait for itself)."""
        with self._lock:
            return self._lock.wait_for(lambda: self._running <= spare, timeout)


# -- Waiting: heartbeats, deadlines, waiters ---------------------------------------------------


class Heartbeat:
    """Keeps clients' idle timers alive: a progress notice for any call quiet for too long."""

    def __init__(self, interval: float):
        self._interval = interval
        self._calls: set = set()
        self._lock = threading.Lock()
        self._thread = None

    def watch(self, call: Call) -> None:
        with self._lock:
            self._calls.add(call)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="heartbeat", daemon=True)
                self._thread.start()

    def forget(self, call: Call) -> None:
        with self._lock:
            self._calls.discard(call)

    def _run(self) -> None:
        while True:
            time.sleep(min(1.0, self._interval / 2))
            with self._lock:
                calls = list(self._calls)
            for call in calls:
                if call.quiet_for() >= self._interval:
                    elapsed = round(time.monotonic() - call.started)
                    searches = (call.upstream or call).searches
                    done = f", {searches} searches so far" if searches else ""
                    call.report(f"still working ({elapsed} s{done})", min_interval=0)


class Deadline:
    """An entry of Deadlines' heap: when (monotonic) its callback runs, the order it was made
    in (ties), and the callback, None once it has run or been cancelled."""

    __slots__ = ("callback", "sequence", "when")

    def __init__(self, when: float, sequence: int, callback):
        self.when, self.sequence, self.callback = when, sequence, callback

    def __lt__(self, other: Deadline) -> bool:  # the heap's order: by when, then as made
        return (self.when, self.sequence) < (other.when, other.sequence)


class Deadlines:
    """Runs short callbacks when their time comes, all on one thread started on first use: a
    request waiting for a task, or a call waiting for its handoff point, costs an entry here,
    never a thread of its own. A callback must not block (it would hold up every other)."""

    def __init__(self, log: Log):
        self._log = log
        self._heap: list[Deadline] = []
        self._sequence = 0
        self._cancelled = 0
        self._cond = threading.Condition()
        self._thread = None

    def after(self, seconds: float, callback) -> Deadline:
        """Schedules callback(); the entry returned is what cancel() takes."""
        import heapq

        with self._cond:
            self._sequence += 1
            entry = Deadline(time.monotonic() + seconds, self._sequence, callback)
            heapq.heappush(self._heap, entry)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="deadlines", daemon=True)
                self._thread.start()
            self._cond.notify()
        return entry

    def cancel(self, entry: Deadline) -> None:
        import heapq

        with self._cond:
            if entry.callback is None:
                return
            entry.callback = None
            self._cancelled += 1
            if self._cancelled > 64 and 2 * self._cancelled > len(self._heap):  # mostly stale
                self._heap = [e for e in self._heap if e.callback is not None]
                heapq.heapify(self._heap)
                self._cancelled = 0

    def __len__(self) -> int:
        with self._cond:
            return len(self._heap) - self._cancelled

    def _next(self):
        import heapq

        with self._cond:
            while True:
                while self._heap and self._heap[0].callback is None:
                    heapq.heappop(self._heap)
                    self._cancelled -= 1
                wait = self._heap[0].when - time.monotonic() if self._heap else None
                if wait is not None and wait <= 0:
                    entry = heapq.heappop(self._heap)
                    callback, entry.callback = entry.callback, None
                    return callback
                self._cond.wait(wait)

    def _run(self) -> None:
        while True:
            callback = self._next()
            try:
                callback()
            except Exception as exc:  # noqa: BLE001 - one failure must not stop the others
                self._log.say(f"internal error in a deadline: {type(exc).__name__}: {exc}")


class Waiter:
    """One request waiting for a task's end (tasks/result, answer_result) without a thread:
    served once, by the task's end (serve(False)) or its deadline (serve(True)), unless dropped
    first, when its client hung up, cancelled it, or its session ended."""

    def __init__(self, task, session: Session, request_id, serve, deadlines: Deadlines):
        self.task, self.session, self.request_id = task, session, request_id
        self._serve, self._deadlines = serve, deadlines
        self._entry: Deadline | None = None
        self._over = False
        self._lock = threading.Lock()

    def start(self, timeout_s: float) -> None:
        """Waits (the session has counted it in): at once if the task has ended already."""
        if not self.task.when_done(self.ended):
            return self.ended()
        entry = self._deadlines.after(max(0.0, timeout_s), self.timed_out)
        with self._lock:
            self._entry = entry
            over = self._over
        if over:  # served meanwhile
            self._deadlines.cancel(entry)

    def ended(self) -> None:
        if self._finish():
            self._serve(False)

    def timed_out(self) -> None:
        if self._finish():
            self._serve(True)

    def drop(self) -> None:
        self._finish()

    def _finish(self) -> bool:
        """True the first time only: whoever gets here first serves (or drops) it."""
        with self._lock:
            if self._over:
                return False
            self._over, entry = True, self._entry
        self.task.unwait(self.ended)
        if entry is not None:
            self._deadlines.cancel(entry)
        self.session.remove_waiter(self.request_id, self)
        return True


# The session whose call the current thread works on (CallsInFlight._run), if any.
_WORKER = threading.local()


# -- The cost question: the person asked before a costly call (CostQuestion) -------------------
# budget.confirm_over_usd (docs/costly-runs.md). The handshake era asks with elicitation/create
# on the session, as roots/list is asked; 2026-07-28 answers the tools/call with input_required
# and a signed requestState, which the client echoes on its retry with the answers.

CONFIRM_KEY, ROOTS_KEY = "confirm", "roots"  # inputRequests keys; CONFIRM_KEY is _meta's too
INPUT_STATE_KIND = "q"  # a requestState's `k`: never a task kind, so never a task id
INPUT_STATE_TTL_MS = 600_000  # how long a requestState is honoured after it was minted
# Questions one person may have waiting at once (the handshake era, where each holds a call's
# server.max_calls slot until answered): a client that never answers cannot fill the server.
QUESTIONS_WAITING_PER_USER = 4
# A 2026-07-28 retry whose worst case has grown past the figure the person agreed to by more
# than this (the ledger or a file changed between the rounds) is asked again.
AGREED_SLACK_USD = 0.005
NOTHING_SPENT = "nothing was sent and nothing was spent"
NO_FORMS = "no form elicitation"  # why a client cannot be asked, as _meta.confirm says it
STATELESS_UNASKED = "a --stateless server asks only 2026-07-28 clients, through input_required"


def arguments_hash(arguments) -> str:
    """What a requestState binds its call's arguments with: SHA-256 of them as canonical JSON."""
    import hashlib

    canonical = json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return _b64(hashlib.sha256(canonical.encode("utf-8")).digest())


def declared_capability(params, capability: str) -> dict | None:
    """A capability a 2026-07-28 request declares in its _meta (None: it declares none)."""
    meta = params.get("_meta") if isinstance(params, dict) else None
    caps = meta.get(META_CAPABILITIES) if isinstance(meta, dict) else None
    found = caps.get(capability) if isinstance(caps, dict) else None
    return found if isinstance(found, dict) else None


def listed_roots(answer) -> list:
    """The local directories of a client's answer to roots/list, in either era; ToolError
    when it is no ListRootsResult (an error object, entries that are no Root: an object with
    a string uri), which is not "outside the allowed directories": no roots were read."""
    listed = answer.get("roots") if isinstance(answer, dict) else None
    rooted = isinstance(listed, list) and all(
        isinstance(root, dict) and isinstance(root.get("uri"), str) for root in listed
    )
    if not rooted:
        raise ToolError(
            f"the client answered roots/list with {_describe(answer)}, not a list of roots, so "
            "no local path can be checked against its roots; retry, or send the file as a "
            f"data: URL; {NOTHING_SPENT}"
        )
    return roots_from(answer)


def asks_forms(capability) -> bool:
    """Whether an elicitation capability takes forms: `{}` (the 2025-06-18 shape) or `form`."""
    return isinstance(capability, dict) and (not capability or "form" in capability)


class CostQuestion:
    """Whether a call may go on: over budget.confirm_over_usd, the person chooses through the
    client (run, run discounted, cancel); a client that cannot be asked runs unasked (or, with
    budget.confirm_required, is refused). Also reads and mints the 2026-07-28 requestState,
    which carries a call's roots from one round to the next."""

    def __init__(self, config: Config, log: Log, stateless: bool = False):
        import secrets

        self.log = log
        # --stateless: a handshake-era call's session is its request's own, without the
        # capabilities initialize declared, and an answer would come on another request
        # (or instance): nothing can be asked there, whatever the client declared.
        self.stateless = stateless
        self.threshold = config.get("budget", "confirm_over_usd")
        self.required = config.get("budget", "confirm_required")
        self.timeout_s = config.get("budget", "confirm_timeout_s")
        # Shared by --stateless instances (a retry may land on another one); else this
        # process's own: a state outlives no restart, which only asks again.
        self._secret = config.get("server", "tasks", "secret") or secrets.token_urlsafe(32)
        self._answered_states: dict = {}  # nonce -> expiry: states whose answer was read
        self._answered_lock = threading.Lock()
        self._waiting: dict = {}  # user -> questions waiting for their answer (handshake era)

    def state_of(self, params: dict, tool: str, user: str) -> dict | None:
        """The fields of the requestState a 2026-07-28 retry echoes (None: none), checked: ours,
        unaltered, unexpired, of this tool, these arguments and this user; else -32602 and
        nothing runs."""
        state = params.get("requestState")
        if state is None:
            return None
        try:
            fields = open_task_id(self._secret, state)
        except TaskIdError as exc:  # said of a requestState, never echoing much of it
            why = _one_line(exc.reason.replace("task id", "requestState"), 120)
            raise self._refused(why) from None
        if fields.get("k") != INPUT_STATE_KIND or fields.get("t") != tool:
            raise self._refused("it is not a requestState of this tool")
        if fields.get("a") != arguments_hash(params.get("arguments")):
            raise self._refused("it was given for other arguments")
        if fields.get("u") != user:
            raise self._refused("it was given to another user")
        responses = params.get("inputResponses")
        if fields.get("w") == CONFIRM_KEY and isinstance(responses, dict):
            self._read_once(fields)
        return fields

    def _read_once(self, fields: dict) -> None:
        """An answer to the cost question is read once (on this instance): a yes is to one
        call, so the same state and answer sent again are refused, not run and paid again.
        One opened a moment before its expiry and read past it is refused too: its nonce may
        be pruned already (the clock read under the lock, so no read can be older than one
        that pruned)."""
        with self._answered_lock:
            now = round(time.time() * 1000)  # the clock the state's expiry is written in
            if fields["e"] <= now:
                raise self._refused(f"it expired at {iso_utc(fields['e'])}")
            if fields.get("n") in self._answered_states:
                raise self._refused("it was answered already; each answer runs one call")
            for nonce, expiry in list(self._answered_states.items()):
                if expiry <= now:  # past it, the state is refused as expired anyway
                    del self._answered_states[nonce]
            self._answered_states[fields.get("n")] = fields["e"]

    @staticmethod
    def _refused(why: str) -> RpcError:
        return RpcError(
            INVALID_PARAMS,
            f"Invalid params: requestState refused ({why}); call the tool again without "
            f"requestState and inputResponses, and answer what it asks; {NOTHING_SPENT}",
        )

    def input_required(self, params, tool: str, user: str, asked: dict, **carried) -> dict:
        """The 2026-07-28 result asking for `asked` (inputRequests), with a requestState bound to
        this call that carries `carried` (w: what was asked; r: roots; o: the offered window)."""
        fields = {"k": INPUT_STATE_KIND, "t": tool, "u": user}
        fields.update(a=arguments_hash(params.get("arguments")), **carried)
        state = mint_task_id(self._secret, fields, INPUT_STATE_TTL_MS)
        return {"resultType": "input_required", "inputRequests": asked, "requestState": state}

    def hook(self, call: Call, session: Session, params: dict, version, state) -> object:
        """The `confirm(quote)` the engine asks after a cache miss (None: never asked)."""
        if self.threshold is None:
            return None
        return lambda quote: self.confirm(quote, call, session, params, version, state)

    def confirm(self, quote: Quote, call: Call, session: Session, params, version, state):
        """_meta.confirm of a call allowed to go on (None: under the threshold, not asked);
        raises NotRun for a no, InputRequired to ask (2026-07-28)."""
        # Unpriced, its figure is its searches alone: no worst case, so it is asked.
        if quote.priced and not quote.worst > self.threshold:
            return None
        if handshake_era(version):
            if self.stateless:
                return self._unasked(quote, STATELESS_UNASKED)
            if not session.elicits:
                return self._unasked(quote)
            quote.check_room()
            choice = self._ask_now(quote, session, call)
        else:
            if not asks_forms(declared_capability(params, "elicitation")):
                return self._unasked(quote)
            choice = self._answered(params, state)
            agreed = state.get("q", float("inf")) if state else float("inf")
            if choice is not None and quote.worst > agreed + AGREED_SLACK_USD:
                choice = None  # dearer than what the person agreed to: asked again
            if choice is None:
                quote.check_room()
                asked = {CONFIRM_KEY: {"method": "elicitation/create", "params": self.form(quote)}}
                carried = {"w": CONFIRM_KEY, "o": quote.offer, "q": round(quote.worst, 6)}
                if state and state.get("r") is not None:
                    carried["r"] = state["r"]
                raise InputRequired(
                    self.input_required(params, call.tool, call.user, asked, **carried)
                )
            # What was offered when the person chose, if the call can still run in it now (a
            # window refused meanwhile would run it at full price).
            quote.offer = state.get("o") if quote.offer is not None else None
        return self._apply(choice, quote, call)

    def _unasked(self, quote: Quote, why: str = NO_FORMS) -> dict:
        meta = {"asked": False, "reason": f"the client cannot be asked ({why})"}
        meta["estimate"] = quote.as_meta(asked=False)
        if self.required:
            raise NotRun(
                f"not run: {quote.tool} may cost up to {usd(quote.worst)}, over "
                f"budget.confirm_over_usd ({usd(self.threshold)}), and this client cannot be "
                f"asked ({why}), so budget.confirm_required refuses it; "
                f"{NOTHING_SPENT}",
                "refused",
                meta,
            )
        return meta

    def form(self, quote: Quote, titled: bool = True) -> dict:
        """elicitation/create's params: the message and a form of one enum, `choice`."""
        within = f" within {quote.runs_in.rstrip('h')} hours" if quote.runs_in else ""
        options = [("run", f"Run it{within}: {quote.figures()}")]
        if quote.offer is not None:
            hours = quote.offer.rstrip("h")
            options.append(
                ("run_discounted", f"Run within {hours} hours for {quote.figures(quote.offer)}")
            )
        options.append(("cancel", "Cancel: send nothing, spend nothing"))
        choice: dict = {"type": "string", "title": "Run this call?"}
        if titled:  # 2025-11-25 on: each option with its title
            choice["oneOf"] = [{"const": value, "title": title} for value, title in options]
        else:  # 2025-06-18's enum, with enumNames for the titles
            choice.update(enum=[o[0] for o in options], enumNames=[o[1] for o in options])
        message = f"{quote.tool} ({quote.model}) is estimated at {quote.figures()}."
        if not quote.priced:
            message += (
                f" No price is known for {quote.model} (pricing.models), so that is its web "
                "searches only: its tokens may cost any amount more."
            )
        if quote.spend:
            message += " Spent: " + "; ".join(quote.spend) + "."
        offer = (
            f", run within {hours} hours for {quote.figures(quote.offer)}" if quote.offer else ""
        )
        message += f" Run it{within}{offer}, or cancel?"
        schema = {"type": "object", "properties": {"choice": choice}, "required": ["choice"]}
        return {"mode": "form", "message": message, "requestedSchema": schema}

    def _ask_now(self, quote: Quote, session: Session, call: Call) -> str:
        """The handshake era: elicitation/create on the session, its answer waited for."""
        params = self.form(quote, titled=session.protocol_version >= MCP_2025_11_25)
        if session.protocol_version < MCP_2025_11_25:
            del params["mode"]
        with self._answered_lock:
            waiting = self._waiting.get(call.user, 0)
            if waiting >= QUESTIONS_WAITING_PER_USER:
                return "busy"
            self._waiting[call.user] = waiting + 1
        try:
            answer = session.ask(
                "elicitation/create", params, self.timeout_s, call.id, call.cancelled
            )
            return self._choice(answer)
        except TimeoutError:
            if call.cancelled.is_set():
                return "cancelled"
            return "ended" if session.asks_ended else "timeout"
        except (ValueError, RpcError):
            return "failed"
        finally:
            with self._answered_lock:
                self._waiting[call.user] -= 1
                if not self._waiting[call.user]:
                    del self._waiting[call.user]

    def _answered(self, params, state) -> str | None:
        """2026-07-28: the choice an authenticated retry carries (None: not asked yet)."""
        responses = params.get("inputResponses")
        if not (state and state.get("w") == CONFIRM_KEY and isinstance(responses, dict)):
            return None
        if CONFIRM_KEY not in responses:
            return None
        return self._choice(responses[CONFIRM_KEY])

    @staticmethod
    def _choice(result) -> str:
        """run, run_discounted, cancel; or the no of an answer without one: declined,
        dismissed (the form's cancel action), invalid."""
        action = result.get("action") if isinstance(result, dict) else None
        if action == "decline":
            return "declined"
        if action != "accept":
            return "dismissed" if action == "cancel" else "invalid"
        content = result.get("content")
        choice = content.get("choice") if isinstance(content, dict) else None
        return choice if choice in ("run", "run_discounted", "cancel") else "invalid"

    def _apply(self, choice: str, quote: Quote, call: Call) -> dict:
        """A yes lets the call go on (run_discounted at the offered window); anything else
        stops it, before anything is sent."""
        meta = {"asked": True, "choice": choice, "estimate": quote.as_meta()}
        if choice == "run_discounted" and quote.offer is not None:
            call.window = meta["window"] = quote.offer
            return meta
        if choice == "run":
            if quote.window in WINDOW_FACTORS:  # figures at the profile window's discount:
                call.window = quote.window  # refused, it is not run above them in full
            return meta
        said = {
            "cancel": "the person chose cancel",
            "declined": "the person declined",
            "dismissed": "the person dismissed the question",
            "timeout": f"no answer came within {self.timeout_s:g} s (budget.confirm_timeout_s)",
            "failed": "the client could not ask the person",
            "cancelled": "the call was cancelled while the person was asked",
            "busy": f"{QUESTIONS_WAITING_PER_USER} questions already wait for this person's "
            "answer; answer them, then call again",
            "ended": "the client closed its input while the person was asked",
            "run_discounted": "the discounted run is not offered here",
        }.get(choice, "the answer chose none of run, run_discounted, cancel")
        raise NotRun(
            f"not run: {said} ({quote.tool} estimated at {quote.figures()}); {NOTHING_SPENT}",
            "declined",
            meta,
        )

    def roots(self, params, state, call: Call):
        """2026-07-28: a client's roots, for a call with local paths: those its state carries,
        those its retry answers, or InputRequired to ask (None: it declares none)."""
        if declared_capability(params, "roots") is None:
            return None
        if state and isinstance(state.get("r"), list):
            return state["r"]
        responses = params.get("inputResponses")
        answered = isinstance(responses, dict) and ROOTS_KEY in responses
        if state and state.get("w") == ROOTS_KEY and answered:
            return listed_roots(responses[ROOTS_KEY])
        asked = {ROOTS_KEY: {"method": "roots/list"}}
        raise InputRequired(self.input_required(params, call.tool, call.user, asked, w=ROOTS_KEY))


# -- Calls in flight: their replies and cancellation (CallsInFlight) ---------------------------


class CallReplies:
    """What a call answers: its answer as a tool result, shortened to what its client shows
    its model whole, or its failure as the -32001 error; the same for a task another instance
    created, read here (TaskIds)."""

    def __init__(self, config: Config, log: Log):
        self.config, self.log = config, log

    def reply_of(self, call: Call, version: str, work) -> dict | None:
        """What a call answers: work()'s (answer, meta) as a result, or its failure as the
        -32001 error; None when it was cancelled."""
        reply = None
        try:
            answer, meta = self._fit(call, *work())
            reply = rpc_result(call.id, tool_result(answer, meta, version))
        except Cancelled:
            if not call.cancelled.is_set():  # the identical call it joined was cancelled
                reply = rpc_tool_failed(
                    call.id,
                    "answer failed: the identical call this one joined was cancelled; retry",
                    {"message": "cancelled by another caller"},
                )
        except InputRequired as exc:  # 2026-07-28: asked of the client, who retries
            reply = rpc_result(call.id, modern_result(exc.result, version))
        except NotRun as exc:  # a no to the cost question: a result the model can read
            result = tool_error_result(exc.message, {"message": exc.message})
            result["_meta"][CONFIRM_KEY] = exc.meta
            modern = version in MODERN_VERSIONS
            reply = rpc_result(call.id, modern_result(result, version) if modern else result)
        except ToolError as exc:
            said = self.log.redact(exc.message)  # as its data: a key it quotes is not echoed
            reply = rpc_tool_failed(call.id, f"answer failed: {said}", self._data(exc))
            call.cancelled_upstream = getattr(exc, "kind", None) == "cancelled_upstream"
        except Exception as exc:  # noqa: BLE001 - a bug must not take the server down
            self.log.say(f"internal error in {call.tool}: {type(exc).__name__}: {exc}")
            reply = rpc_tool_failed(
                call.id,
                f"answer failed: internal error ({type(exc).__name__}); run with --debug and "
                "report it",
                {"message": self.log.redact(_one_line(str(exc), 400))},
            )
        return reply

    def _fit(self, call: Call, answer: dict, meta: dict) -> tuple[dict, dict]:
        """The answer shortened to what the call's client shows its model whole; meta says so.
        structuredContent gets the same shortened answer: some clients show it instead of the
        text, and the rest is one follow-up away."""
        limit = call.result_chars or self.config.get("server", "result_max_chars")
        # The rest of a deep research report is asked of `answer`: answer_deep would research
        # it all over again, at dollars a run.
        tool = "answer" if call.tool == DEEP_TOOL else call.tool
        rest = {"tool": tool, "response_id": answer.get("response_id")}
        headers = sources_headers(self.config.instructions)
        answer, shortened = fit_answer(answer, limit, rest, headers)
        if shortened:
            meta = {**meta, "shortened": shortened}
            self.log.debug("server", f"result shortened to {limit} bytes: {shortened}")
        return answer, meta

    def _data(self, exc: ToolError) -> dict:
        data = {"message": self.log.redact(_one_line(exc.detail, 400))}
        if self.log.debug_enabled:
            data.update({k: self.log.redact(str(v)) for k, v in exc.debug.items()})
        return data


class _Asking:
    """What a call's cost question and roots need: its request's params, era and checked
    requestState (2026-07-28), and `go`, which arms its task once it may go on."""

    __slots__ = ("_arm", "era", "params", "state", "task")

    def __init__(self, params: dict, era, state, arm, task=None):
        self.params, self.era, self.state, self._arm = params, era, state, arm
        self.task = task  # the task or handoff the call may be (kept for a chosen window)

    def go(self) -> None:
        arm, self._arm = self._arm, None
        if arm is not None:
            arm()

    def holds_task_reply(self) -> bool:
        """A 2025-11-25 task whose reply (the task) has not been sent yet."""
        return (
            self._arm is not None and self.task is not None and self.task.kind == TaskKind.HANDSHAKE
        )


class CallsInFlight:
    """The tools/call in flight: each admitted against server.max_calls and run on a worker
    thread of its own, with its progress notices, the files it reads, and its cancel
    (notifications/cancelled, a client hanging up). A call that may outlive its request is
    LongCalls' (`policy`): it says when one becomes a task or a handoff."""

    def __init__(self, config: Config, log: Log, engine, replies: CallReplies, long_calls):
        self.config, self.log, self.engine = config, log, engine
        self.replies = replies  # what a call answers
        # The person asked first; 2026-07-28 rounds
        self.question = CostQuestion(config, log, getattr(long_calls, "stateless", False))
        self.long_calls: LongCalls = long_calls  # its task or handoff, if it becomes one
        self.heartbeat = Heartbeat(config.get("server", "progress_interval_s"))
        self.max_calls = config.get("server", "max_calls")
        self._running = 0  # tools/call in flight, across every session
        self._running_lock = threading.Lock()

    def start(self, params: dict, args: dict, session: Session, request_id, name: str, version):
        """Starts a checked tools/call on its worker: the result, a 2025-11-25 task (its
        reply at once), or None when the reply is sent later."""
        policy = self.long_calls.policy
        token = progress_token(params)
        # 2026-07-28: a retry's requestState, checked before anything starts (-32602 if not ours)
        state = (
            None if handshake_era(version) else self.question.state_of(params, name, session.user)
        )
        task = policy.new_task(params, session, name, version)
        client = client_name_of(params, session, version)  # before the era becomes a version
        era, version = version, spoken_version(version, session)
        progress = None if token is None else self._progress_sender(session, token, version)
        call = Call(request_id, name, progress)
        call.user = session.user
        call.result_chars = result_chars(self.config, client)
        if task is not None:
            task.call = call
        try:
            self._admit()
        except RpcError:
            policy.forget(task)
            raise
        try:
            session.register(call)
        except RpcError:
            self._release()
            policy.forget(task)
            raise
        arguments = params.get("arguments")
        keys = sorted(arguments) if isinstance(arguments, dict) else []
        self.log.debug(
            "server", f"tools/call name={name} argsKeys={keys} queryLen={len(args['query'])}"
        )
        if progress is not None:
            self.heartbeat.watch(call)
        # A task or handoff that converts later waits for the cost question (and 2026-07-28
        # roots) to be settled: it is armed once the call may go on. A 2025-11-25 task is the
        # reply at once (its worker asks the person on the session before anything is sent),
        # but over Streamable HTTP, where the question can only go on the call's own POST
        # stream, its reply waits for the question too (held).
        held = task is not None and task.kind == TaskKind.HANDSHAKE and self._held(session)
        later = task is not None and (task.kind != TaskKind.HANDSHAKE or held)
        arm = None
        if later:
            import functools

            armed = functools.partial(policy.arm, task, call, session, request_id, version)
            # held: the task goes out as the POST's reply once armed
            arm = functools.partial(self._give, task, armed, session, request_id) if held else armed
            task.held = held
        asking = _Asking(params, era, state, arm, task)
        worker = threading.Thread(
            target=self._run,
            args=(call, args, session, version, task, asking),
            name="call",
            daemon=True,
        )
        try:
            worker.start()
        except RuntimeError:  # out of threads: undo the registration, say so
            self.heartbeat.forget(call)
            session.unregister(call)
            session.done()
            self._release()
            policy.forget(task)
            raise RpcError(INTERNAL_ERROR, "Internal error: cannot start a worker; retry") from None
        if task is None or later:
            return None
        return policy.arm(task, call, session, request_id, version)

    @staticmethod
    def _give(task: Task, armed, session: Session, request_id) -> None:
        """A held task becomes the client's: its POST's reply."""
        result = armed()
        task.held = False  # before the reply: the client may ask about it the moment it reads it
        session.send(rpc_result(request_id, result))

    def _held(self, session: Session) -> bool:
        """Whether a 2025-11-25 task's reply waits for the cost question: over Streamable HTTP
        (its POST stream is the only way to ask) when the person may be asked, and task ids are
        not signed (they wait for the response OpenAI names, which a held task has not sent)."""
        signing = self.long_calls.ids.signing
        return session.relate is not None and session.may_ask and not signing

    def _admit(self) -> None:
        """Counts a new call in, or refuses it when server.max_calls are already running."""
        with self._running_lock:
            if self._running >= self.max_calls:
                raise RpcError(
                    SERVER_BUSY,
                    f"too many calls in flight ({self.max_calls}, server.max_calls); wait for "
                    "one to finish or raise the limit",
                )
            self._running += 1

    def _release(self) -> None:
        with self._running_lock:
            self._running -= 1

    def _progress_sender(self, session: Session, token, version: str):
        with_message = version >= MCP_2025_03_26

        def send(progress: int, message: str) -> None:
            params = {"progressToken": token, "progress": progress}
            if with_message:
                params["message"] = message
            session.send({"jsonrpc": "2.0", "method": "notifications/progress", "params": params})

        return send

    def _run(self, call: Call, args: dict, session: Session, version: str, task=None, asking=None):
        _WORKER.session = session  # see StdioTransport.end_calls
        policy = self.long_calls.policy
        asking = asking or _Asking({}, HANDSHAKE_ERA, None, None)
        try:
            reply = self.replies.reply_of(
                call, version, lambda: self._answer(call, args, session, asking)
            )
        finally:
            call.finish()
            self.heartbeat.forget(call)
            self._release()  # before the reply goes out: the client may send the next call
        if asking.holds_task_reply():  # never asked (a cache hit, an error before it)
            if reply is None or call.cancelled.is_set():  # cancelled while held: no task was
                task.converted = False  # ever given, so none is kept
            else:
                asking.go()
        try:
            kept = task is not None and policy.call_ended(task, reply, session)
            if not kept and session.unregister(call) and reply is not None:
                session.send(reply)
            elif not kept:  # cancelled: nothing may be sent for it
                self.log.debug("server", f"cancelled requestId={_describe(call.id)} (no reply)")
        finally:
            if task is not None:
                policy.settle(task)
            session.done()
            if hasattr(self.engine, "answered"):
                self.engine.answered()

    def _answer(self, call: Call, args: dict, session: Session, asking) -> tuple[dict, dict]:
        """The engine's answer, its `files` read first (all, or none: FileRefused is the
        call's error, and nothing is sent); `_meta.files` lists what went with it. The cost
        question is asked after them (they are part of the estimate)."""
        if not args.get("files"):
            return self.engine.answer(call.tool, args, call, **self._confirm(call, session, asking))
        allowed = None  # HTTP: paths name the server's disk, so only files.allowed_dirs
        if session.local:
            allowed = allowed_dirs(self.config, self._local_roots(call, args, session, asking))
        elif self.config.get("files", "local_paths"):
            allowed = allowed_dirs(self.config, [])
        try:
            files = FileReader(self.config).read(args["files"], allowed)
        except FileRefused as exc:
            raise ToolError(str(exc)) from None
        confirm = self._confirm(call, session, asking)
        answer, meta = self.engine.answer(call.tool, {**args, "files": files}, call, **confirm)
        return answer, {**meta, "files": [f.summary() for f in files]}

    def _confirm(self, call: Call, session: Session, asking) -> dict:
        """engine.answer's `confirm`: the cost question, then the task armed (a call whose
        question is never asked, from the cache, answers inline anyway)."""
        hook = self.question.hook(call, session, asking.params, asking.era, asking.state)
        if hook is None:
            asking.go()
            return {}

        def confirm(quote):
            note = hook(quote)
            self.long_calls.policy.widen(asking.task, call.window)  # run_discounted: 8h
            asking.go()
            return note

        return {"confirm": confirm}

    def _local_roots(self, call: Call, args: dict, session: Session, asking) -> list | None:
        """The client's roots for its local paths: asked on the session (handshake era), or
        through input_required (2026-07-28), then carried in the requestState."""
        if handshake_era(asking.era):
            return self._roots(session)
        if all(url_scheme(item) for item in args["files"]):  # no local path: nothing to ask
            return None
        roots = self.question.roots(asking.params, asking.state, call)
        if roots is not None:
            asking.state = {**(asking.state or {}), "r": roots}
        return roots

    def _roots(self, session: Session) -> list | None:
        """The client's roots (None: it declared none, so the working directory serves):
        asked once, then kept until notifications/roots/list_changed."""
        if not session.roots_capable:
            return None
        with session._lock:
            cached, generation = session.roots, session.roots_generation
        if cached is not None:
            return cached
        try:
            answer = session.ask("roots/list", {}, ROOTS_TIMEOUT_S)
        except (TimeoutError, ValueError, RpcError) as exc:
            what = "did not answer" if isinstance(exc, TimeoutError) else "refused"
            raise ToolError(
                f"the client {what} roots/list (within {ROOTS_TIMEOUT_S:g} s), so no local path "
                "can be checked against its roots; retry, or send the file as a data: URL"
            ) from None
        roots = listed_roots(answer)  # outside the try: its own refusal says what came
        with session._lock:
            if session.roots_generation == generation:  # no change came while it was asked
                session.roots = roots
        return roots

    def cancel(self, session: Session, request_id) -> bool:
        """notifications/cancelled: the call in flight with that id; else the request waiting
        for a task; else the handoff of the call that had that id. False if none is found."""
        if session.cancel(request_id) is not None:
            return True
        waiter = session.waiter(request_id)
        if waiter is not None:
            waiter.drop()
            return True
        return self.long_calls.handoffs.cancel_handoff_of(session, request_id)

    def abandoned(self, session: Session, request_id) -> None:
        """The transport says nobody reads this request's reply any more (its client hung up):
        a request waiting for a task stops waiting. (A call goes on: see StreamableHttp.hung_up.)"""
        waiter = session.waiter(request_id)
        if waiter is not None:
            waiter.drop()


# -- Handshake: initialize, and what it negotiates ---------------------------------------------


class Handshake:
    """Who the client is, and what this server offers it: initialize (the handshake era) and
    server/discover (2026-07-28), and the client's name in the debug log."""

    def __init__(self, config: Config, log: Log, engine, long_calls):
        self.config, self.log, self.engine = config, log, engine
        self.long_calls: LongCalls = long_calls  # whether tasks are offered, and handoffs

    def initialize(self, params: dict, session: Session, request_id) -> dict:
        asked = params.get("protocolVersion")
        version = asked if asked in PROTOCOL_VERSIONS else LATEST_PROTOCOL
        session.protocol_version = version
        info = params.get("clientInfo")
        session.client_name = info.get("name") if isinstance(info, dict) else None
        capabilities = params.get("capabilities")
        session.roots_capable = isinstance(capabilities, dict) and isinstance(
            capabilities.get("roots"), dict
        )
        session.elicits = (
            version >= MCP_2025_06_18  # elicitation came with 2025-06-18
            and isinstance(capabilities, dict)
            and asks_forms(capabilities.get("elicitation"))
        )
        session.may_ask = (
            session.elicits and self.config.get("budget", "confirm_over_usd") is not None
        )
        result = {
            "protocolVersion": version,
            "capabilities": {"tools": {"listChanged": False}, "prompts": {"listChanged": False}},
            "serverInfo": server_info(version),
        }
        if version == MCP_2025_11_25 and self.long_calls.tasks_off is None:
            tasks = {"cancel": {}, "requests": {"tools": {"call": {}}}}
            if not self.long_calls.stateless:  # a task must be listable wherever it can be got
                tasks["list"] = {}
            result["capabilities"]["tasks"] = tasks
        if version >= MCP_2025_03_26:
            result["instructions"] = server_instructions(DEEP_TOOL in enabled_tools(self.config))
        self.log.debug("server", f"initialize asked={asked} answered={version}")
        self._log_client(params, session)
        if hasattr(self.engine, "warm_up"):
            self.engine.warm_up()
        return result

    def discover(self, params: dict, session: Session, request_id, version: str) -> dict:
        self.log.debug("server", f"server/discover era={version}")
        self._log_client(params, session, version)
        capabilities: dict = {"tools": {"listChanged": False}, "prompts": {"listChanged": False}}
        if self.long_calls.tasks_off is None:
            capabilities["extensions"] = {TASKS_EXTENSION: {}}
        return {
            "supportedVersions": list(SUPPORTED_VERSIONS),
            "capabilities": capabilities,
            "instructions": server_instructions(DEEP_TOOL in enabled_tools(self.config)),
            "ttlMs": LIST_TTL_MS,
            "cacheScope": "public",
        }

    def _log_client(self, params, session: Session, version=HANDSHAKE_ERA) -> None:
        """Who the client says it is and what the client table makes of it (debug only): how
        the agent tests see that the pinned agents' names are the ones HANDOFF_CLIENTS uses."""
        if self.log.debug_enabled:
            name = _one_line(str(client_name_of(params, session, version)), 80)
            handoff = self.long_calls.policy.handoff_s(params, session, version)
            size = result_chars(self.config, client_name_of(params, session, version))
            self.log.debug(
                "server", f"client name={name} handoff_after_s={handoff} result_chars={size}"
            )


# -- Tasks: their limits, a task (Task) and its expiry -----------------------------------------
# A call that outlives its request: a task (2026-07-28 extension or 2025-11-25 shape) or a
# handoff. The call keeps running, owned by the TaskTable instead of the request; its reply
# (the JSON-RPC result or error the call would have sent) waits here until its TTL runs out.

TOO_MANY_TASKS = {"limit": "server.tasks.max_per_client"}  # the -32000 refusal's data: HTTP 429
TASKS_FULL = {"limit": "server.tasks.max_open"}
REPLIES_FULL = {"limit": "server.tasks.max_reply_bytes"}
TOO_MANY_WAITING = {"limit": "server.tasks.max_per_client", "waiting": True}
TASK_LIMITS = (TOO_MANY_TASKS, TASKS_FULL, REPLIES_FULL, TOO_MANY_WAITING)  # each: HTTP 429


class TaskKind:
    """What a Task is. The letter is written into its id (an unsigned id's prefix, a signed
    id's field `k`), which outlives this process and travels between --stateless instances:
    a letter must never change, or ids made before would no longer be served."""

    EXTENSION = "x"  # the 2026-07-28 tasks extension's task (declared in the request's _meta)
    HANDSHAKE = "s"  # a 2025-11-25 task (capabilities.tasks, negotiated at initialize)
    HANDOFF = "h"  # a call handed off to answer_result


TASK_KIND_NAMES = {  # as the debug log names them
    TaskKind.EXTENSION: "extension",
    TaskKind.HANDSHAKE: MCP_2025_11_25,
    TaskKind.HANDOFF: "handoff",
}


def now_ms() -> int:
    return round(time.time() * 1000)


def _pack(reply: dict | None) -> tuple[dict | None, bool]:
    """A reply as a task stores it: a result's text content is dropped when it is only the JSON
    of its structuredContent (tool_result writes both), so the answer is held once, not twice;
    True says so, and Task.reply writes the text again."""
    result = reply.get("result") if isinstance(reply, dict) else None
    if not isinstance(result, dict) or "structuredContent" not in result:
        return reply, False
    content = result.get("content")
    text = json.dumps(result["structuredContent"], ensure_ascii=False)
    if content != [{"type": "text", "text": text}]:
        return reply, False
    return {**reply, "result": {k: v for k, v in result.items() if k != "content"}}, True


class Task:
    """One task or handoff: its call (None when served from a signed id alone), its status and,
    once the call has ended, the reply it produced.

    `converted` says the request was answered with the task rather than the answer; finish()
    and convert() race under `lock`, so exactly one of the two reaches the request.
    Requests waiting for its end (tasks/result, answer_result) are callbacks in `_waiters`,
    called once when it ends: no thread waits for a task.
    """

    def __init__(self, task_id: str, kind: str, call, client_key, ttl_ms: int, model: str):
        self.id, self.kind, self.call, self.client_key = task_id, kind, call, client_key
        self.tool = call.tool if call is not None else None
        self.model = model
        self.created = self.updated = now_ms()
        self.ttl_ms = ttl_ms
        self.expires = self.created + ttl_ms
        self.status, self.message = "working", None
        self.handoff_s = 0  # a handoff: seconds after which the request got its id
        self.request_id = None  # a handoff: the tools/call it answered (whose cancel cancels it)
        self.timer: Deadline | None = None  # converts the request when due
        self._reply: dict | None = None
        self._text_dropped = False  # see _pack
        self.size = 0  # bytes of the stored reply
        self.counted = 0  # of which its TaskTable counts (the table's lock guards it)
        self.table = None  # the TaskTable holding it, told when its reply is stored or collected
        self.converted = self.collected = False
        self.signed = False  # its id is signed: any instance serves it from OpenAI
        # A 2025-11-25 task over HTTP whose POST waits for the cost question: not the client's
        # yet, so no tasks/* request sees it (a cancel would leave that POST unanswered).
        self.held = False
        self.followed = False  # created by another instance, followed here from its id
        self.done = threading.Event()
        self.lock = threading.Lock()
        self._waiters: dict | None = {}  # callback -> None; None once the task has ended
        self.user = LOCAL_USER  # whose it is: another user's request finds no such task

    @property
    def reply(self) -> dict | None:
        """The JSON-RPC result or error the call produced (None: cancelled, or still running)."""
        reply = self._reply
        if reply is None or not self._text_dropped:
            return reply
        result = reply["result"]
        text = json.dumps(result["structuredContent"], ensure_ascii=False)
        return {**reply, "result": {"content": [{"type": "text", "text": text}], **result}}

    def convert(self) -> bool:
        """The request gets the task now, unless the call has ended (or was cancelled) first."""
        with self.lock:
            if self.done.is_set() or (self.call is not None and self.call.cancelled.is_set()):
                return False
            self.converted = True
            return True

    def finish(self, reply: dict | None) -> bool:
        """Records the call's reply (None: cancelled) and serves the requests waiting for it;
        True if the task keeps it, False if it goes to the request inline (the task was never
        converted)."""
        with self.lock:
            if self.converted:  # kept: stored once, and counted against max_reply_bytes
                self._reply, self._text_dropped = _pack(reply)
                self.size = len(json.dumps(self._reply)) if reply is not None else 0
            else:
                self._reply = reply
            if self.status == "working":
                self.status, self.message = self._outcome(reply)
                if self.call is not None and self.call.cancelled_upstream:
                    # tasks/cancel on another instance: a cancelled task there, here too
                    self.status, self.message = "cancelled", "cancelled upstream"
                self.updated = now_ms()
            self.done.set()
            self.call = None  # nothing left to cancel; its memory can go
            waiters, self._waiters = self._waiters or {}, None
            converted = self.converted
        if converted and self.table is not None:
            self.table.stored(self)
        for serve in waiters:
            serve()
        return converted

    def when_done(self, serve) -> bool:
        """Calls serve() once the task ends; False (and no call) if it has ended already."""
        with self.lock:
            if self._waiters is None:
                return False
            self._waiters[serve] = None
            return True

    def unwait(self, serve) -> None:
        with self.lock:
            if self._waiters is not None:
                self._waiters.pop(serve, None)

    def mark_collected(self) -> None:
        """Its client has its outcome: it no longer counts against max_per_client, and is the
        first to go when the server is at a limit."""
        with self.lock:
            if self.collected:
                return
            self.collected = True
        if self.table is not None:
            self.table.collected(self)

    def _outcome(self, reply: dict | None) -> tuple[str, str | None]:
        if reply is None:
            return "cancelled", "cancelled"
        if "error" in reply:
            return "failed", reply["error"].get("message")
        if reply["result"].get("isError") and self.kind == TaskKind.HANDSHAKE:  # isError fails
            return "failed", _one_line(reply["result"]["content"][0].get("text", ""), 400)
        return "completed", "done"

    def cancel(self) -> str | None:
        """Moves a working task to cancelled and cancels its call; the terminal status it had
        instead, if any."""
        with self.lock:
            if self.status != "working":
                return self.status
            self.status, self.message, self.updated = "cancelled", "cancelled by request", now_ms()
            call = self.call
        self.mark_collected()
        if call is not None:
            call.cancel()
        return None

    def view(self, shape: str, poll_ms: int) -> dict:
        with self.lock:
            status, message, updated, call = self.status, self.message, self.updated, self.call
        if status == "working" and call is not None and call.status_message:
            message = call.status_message
        return task_view(
            shape, self.id, status, self.created, updated, self.ttl_ms, poll_ms, message
        )


class _Expiry:
    """An entry of TaskTable's expiry heap: when a task expires (epoch ms), the order it was
    added in (ties), and its id (stale once the task has gone or been renamed)."""

    __slots__ = ("expires", "sequence", "task_id")

    def __init__(self, expires: int, sequence: int, task_id: str):
        self.expires, self.sequence, self.task_id = expires, sequence, task_id

    def __lt__(self, other: _Expiry) -> bool:  # the heap's order: by expiry, then as added
        return (self.expires, self.sequence) < (other.expires, other.sequence)


# -- The task table: open tasks and their replies (TaskTable) ----------------------------------


class TaskTable:
    """This process's tasks: by id, by client and by expiry, so that nothing scans the whole
    table; with the per-client limit, the server-wide limits on tasks and on the bytes of their
    stored replies, and expiry after their TTL.

    Locking: a Task's lock may be held while this table's is taken, never the reverse.
    """

    def __init__(
        self, max_per_client: int, log: Log, max_open: int = 1000, max_bytes: int = 64 * MIB
    ):
        self._max, self._log = max_per_client, log
        self._max_open, self._max_bytes = max_open, max_bytes
        self._tasks: dict[str, Task] = {}
        self._clients: dict = {}  # client key -> {task id: Task}, oldest first
        self._collected: dict = {}  # Task -> None, in the order collected: dropped first
        # Task -> None: signed tasks that ended uncollected, in the order they ended: dropped
        # next (any instance still serves them from OpenAI); an unsigned one's reply is
        # nowhere else, so it holds its room until collected or expired.
        self._ended: dict = {}
        self._expiry: list[_Expiry] = []  # a heap; stale entries are skipped
        self._sequence = 0
        self._bytes = 0  # of the stored replies of the tasks here
        self._lock = threading.Lock()

    def add(self, task: Task, make_room: bool = False) -> None:
        """Adds a task; -32000 (HTTP 429) when its client has max_per_client open already
        (working, or ended but not yet collected), or the server is at max_open tasks or
        max_reply_bytes (after dropping collected tasks, oldest first). With `make_room` (a
        handoff), the client's oldest handoff that has ended uncollected is dropped to make
        room: its answer is in the cache, if the cache is on."""
        self.sweep()
        with self._lock:
            mine = list(self._clients.get(task.client_key, {}).values())
            uncollected = [t for t in mine if not t.collected]
            if len(uncollected) >= self._max and make_room:
                spare = next(
                    (t for t in uncollected if t.kind == TaskKind.HANDOFF and t.done.is_set()),
                    None,
                )
                if spare is not None:
                    self._remove(spare)
                    uncollected.remove(spare)
                    self._log.debug("server", "an uncollected handoff dropped to make room")
            if len(uncollected) >= self._max:
                raise RpcError(
                    SERVER_BUSY,
                    f"too many open tasks ({self._max}, server.tasks.max_per_client); collect "
                    "or cancel one first",
                    TOO_MANY_TASKS,
                )
            # A collected task stays readable a while, but only the client's latest few: the
            # client has its answer, and memory must not grow with calls times the TTL.
            collected = [t for t in mine if t.collected]
            for old in collected[: max(0, len(collected) - self._max)]:
                self._remove(old)
            self._check_room()
            self._insert(task)

    def _check_room(self) -> None:
        """Drops collected tasks, oldest first, then ended ones nobody has collected, oldest
        ended first, while the server is at a limit; then refuses (lock held). Only working
        and unsigned tasks hold room for good: else one client could fill the server with
        answers it never collects."""
        while len(self._tasks) >= self._max_open or self._bytes >= self._max_bytes:
            if not self._drop_spare():
                break
        if len(self._tasks) >= self._max_open:
            raise RpcError(
                SERVER_BUSY,
                f"too many tasks on this server ({self._max_open}, server.tasks.max_open); "
                "retry when some have been collected or expired, or raise the limit",
                TASKS_FULL,
            )
        if self._bytes >= self._max_bytes:
            raise RpcError(
                SERVER_BUSY,
                f"the stored replies of tasks fill server.tasks.max_reply_bytes "
                f"({self._max_bytes}); retry when some have been collected or expired",
                REPLIES_FULL,
            )

    def _drop_spare(self, keep: Task | None = None) -> bool:
        """Drops the task that is least missed (lock held): the oldest collected, else the
        one that ended uncollected first (never `keep`); False when there is none."""
        spare = next(iter(self._collected or self._ended), None)
        if spare is None or spare is keep:
            return False
        if spare in self._ended and spare not in self._collected:
            self._log.debug("server", "an ended, uncollected task dropped to make room")
        self._remove(spare)
        return True

    def _insert(self, task: Task) -> None:
        import heapq

        task.table = self
        self._tasks[task.id] = task
        self._clients.setdefault(task.client_key, {})[task.id] = task
        if task.collected:
            self._collected[task] = None
        elif task.signed and task.done.is_set():
            self._ended[task] = None
        self._sequence += 1
        heapq.heappush(self._expiry, _Expiry(task.expires, self._sequence, task.id))
        if len(self._expiry) > 2 * len(self._tasks) + 64:  # mostly stale: rebuild it
            self._expiry = [e for e in self._expiry if e.task_id in self._tasks]
            heapq.heapify(self._expiry)

    def _remove(self, task: Task) -> None:
        """Forgets a task (lock held); its reply's bytes are no longer counted."""
        if self._tasks.get(task.id) is not task:
            return
        del self._tasks[task.id]
        mine = self._clients.get(task.client_key)
        if mine is not None:
            mine.pop(task.id, None)
            if not mine:
                del self._clients[task.client_key]
        self._collected.pop(task, None)
        self._ended.pop(task, None)
        self._bytes -= task.counted
        task.table, task.counted = None, 0

    def extend(self, task: Task, ttl_ms: int) -> None:
        """Keeps a task longer (never shorter): a discounted run chosen after it was made."""
        import heapq

        with self._lock:
            if ttl_ms <= task.ttl_ms:
                return
            task.ttl_ms, task.expires = ttl_ms, task.created + ttl_ms
            if self._tasks.get(task.id) is task:  # its old expiry entry is skipped as stale
                self._sequence += 1
                heapq.heappush(self._expiry, _Expiry(task.expires, self._sequence, task.id))

    def stored(self, task: Task) -> None:
        """A task's reply is stored: counted, and collected tasks dropped (oldest first) while
        the replies exceed max_reply_bytes."""
        with self._lock:
            if self._tasks.get(task.id) is not task:
                task.table = None
                return
            self._bytes += task.size - task.counted
            task.counted = task.size
            if task.signed and not task.collected:
                self._ended[task] = None
            while self._bytes > self._max_bytes and self._drop_spare(keep=task):
                pass

    def collected(self, task: Task) -> None:
        with self._lock:
            if self._tasks.get(task.id) is task:
                self._collected[task] = None
                self._ended.pop(task, None)

    def get(self, task_id) -> Task | None:
        self.sweep()
        with self._lock:
            return self._tasks.get(task_id) if isinstance(task_id, str) else None

    def discard(self, task: Task) -> None:
        with self._lock:
            self._remove(task)

    def rename(self, task: Task, task_id: str) -> None:
        """The task's signed id, once OpenAI has named its response (a handoff not yet in the
        table is only renamed)."""
        with self._lock:
            if self._tasks.get(task.id) is not task:
                task.id, task.signed = task_id, True
                return
            counted = task.counted
            self._remove(task)
            task.id, task.signed = task_id, True
            self._insert(task)
            task.counted = counted
            self._bytes += counted

    def put(self, task: Task) -> Task:
        """Adds a task another instance created (no limit: its creator counted it); returns the
        one already here if another request got there first."""
        with self._lock:
            found = self._tasks.get(task.id)
            if found is None:
                self._insert(task)
            return found or task

    def of_client(self, client_key, kind: str) -> list[Task]:
        self.sweep()
        with self._lock:
            mine = self._clients.get(client_key, {}).values()
            return [t for t in mine if t.kind == kind and not t.held]

    def handoff_of(self, client_key, request_id) -> Task | None:
        """The client's newest handoff of the tools/call with this request id."""
        with self._lock:
            mine = list(self._clients.get(client_key, {}).values())
        for task in reversed(mine):
            if task.kind == TaskKind.HANDOFF and task.request_id == request_id:
                return task
        return None

    def drop_client(self, client_key) -> int:
        """Forgets a client's tasks (its session has ended), cancelling those still working;
        how many there were. Cancelled before they are forgotten: a stop signal that cuts
        this short leaves the rest here for the next drop (Session.stop_tasks, then close)."""
        with self._lock:
            mine = list(self._clients.get(client_key, {}).values())
        for task in mine:
            task.cancel()
        with self._lock:
            for task in mine:
                self._remove(task)
        return len(mine)

    def sweep(self) -> None:
        """Drops expired tasks; one still working is cancelled first (upstream too)."""
        import heapq

        now = now_ms()
        expired = []
        with self._lock:
            while self._expiry and self._expiry[0].expires <= now:
                task = self._tasks.get(heapq.heappop(self._expiry).task_id)
                if task is not None and task.expires <= now:
                    self._remove(task)
                    expired.append(task)
        for task in expired:
            if task.cancel() is None:
                self._log.debug("server", f"task expired while working: {task.id[:12]}...")

    def working_signed(self) -> list[Task]:
        """The tasks still working whose ids any instance can serve."""
        with self._lock:
            return [t for t in self._tasks.values() if t.signed and not t.done.is_set()]

    def stored_bytes(self) -> int:
        with self._lock:
            return self._bytes

    def __len__(self) -> int:
        with self._lock:
            return len(self._tasks)


# -- Long calls: task ids, when a call becomes a task ------------------------------------------
# What the dispatcher hands a call that may outlive its request, and the requests about such
# calls: tasks/* in both shapes, answer_result, notifications/cancelled of a handoff. LongCalls
# makes the parts, each given what it needs: TaskIds (what an id names; signed ids), TaskPolicy
# (when a call becomes a task or a handoff), TaskRequests (tasks/* in both shapes) and Handoffs
# (answer_result, and the cancel of a handoff).


def session_owner(session: Session):
    """Whose tasks a session's are: its client's (the transport says), else the session's own."""
    return session.client_key if session.client_key is not None else id(session)


def still_working_result(task: Task, version: str) -> dict:
    """A handoff's result (and answer_result's before the answer is ready): the output
    contract with words saying how to collect the answer."""
    elapsed = round((now_ms() - task.created) / 1000)
    answer = handoff_answer(task.id, task.model, elapsed, task.ttl_ms)
    return tool_result(answer, {HANDOFF_META: {"id": task.id, "status": "working"}}, version)


class TaskIds:
    """What a task id names: this instance's task, or (signed ids, --stateless with a secret)
    another instance's, followed here from OpenAI's stored background response; and the
    signing of a task's id once OpenAI has named its response, and the handing over of such
    tasks when this instance stops."""

    def __init__(self, config: Config, log: Log, engine, tasks: TaskTable, reply_of, stateless):
        self.config, self.log, self.engine, self.tasks = config, log, engine, tasks
        self._reply_of = reply_of  # CallReplies.reply_of: a remote task's answer, as a call's
        self.settings = config.get("server", "tasks")
        self.stateless = stateless
        self.tasks_off: str | None = tasks_off_reason(config, stateless)

    def owner(self, session: Session):
        """Whose tasks a session's are; when the session ends, they are dropped. (Only an HTTP
        session with an id ever ends: a stateless request's throwaway session is left to
        expire, its tasks belonging to the client, which may come back.)"""
        session.on_close(self._session_ended)
        return session_owner(session)

    def _session_ended(self, session: Session) -> None:
        dropped = self.tasks.drop_client(session_owner(session))
        if dropped:
            self.log.debug("server", f"session ended: {dropped} of its tasks dropped")

    @property
    def signing(self) -> bool:
        """Whether task ids are signed for any instance to serve (--stateless with a secret)."""
        return self.stateless and self.tasks_off is None

    def find(self, task_id, kind: str, session: Session) -> Task:
        """This instance's task, or another instance's from its signed id; else TaskIdError."""
        task = self.tasks.get(task_id)
        if task is not None and (task.user != session.user or task.held):  # not the client's
            raise TaskIdError("not a task of this server, or it has expired")
        if task is not None and task.kind == kind:
            return task
        if task is not None or not isinstance(task_id, str) or self.tasks_off is not None:
            raise TaskIdError("not a task of this server, or it has expired")
        return self._remote(task_id, kind, session)

    def _remote(self, task_id: str, kind: str, session: Session) -> Task:
        """A task another instance created, from its signed id: followed here from OpenAI's
        stored background response (GET /responses/{id}); TaskIdError if it is not ours."""
        secret = self.settings["secret"]
        if not secret:
            raise TaskIdError("not a task of this server, or it has expired")
        fields = open_task_id(secret, task_id)
        tool, response_id = fields.get("t"), fields.get("r")
        if fields.get("k") != kind or tool not in TOOLS_BY_NAME or not isinstance(response_id, str):
            raise TaskIdError("not a task of this kind")
        if fields.get("u") != session.user:  # told apart from an unknown id by nothing
            raise TaskIdError("not a task of this server, or it has expired")
        window = fields.get("w")
        if window is not None and window not in WINDOW_FACTORS:
            # A newer server's window: its response has no stream, and trying to read one
            # would end in cancelling it upstream. Left running for an instance that knows it.
            raise TaskIdError(
                f"made by a newer version of this server (completion window {str(window)[:16]!r}):"
                " ask an upgraded instance for it"
            )
        call = Call(None, tool)
        call.user = session.user
        size = fields.get("z")  # the creating client's result size, signed with the rest
        call.result_chars = size if type(size) is int and size > 0 else None
        key = self.owner(session)
        task = Task(task_id, kind, call, key, fields["e"] - fields["c"], str(fields.get("o", "")))
        task.created, task.expires, task.converted = fields["c"], fields["e"], True
        task.user = session.user
        task.signed = task.followed = True
        found = self.tasks.put(task)
        if found is task:
            threading.Thread(
                target=self._follow,
                args=(task, response_id, window),
                name="task-follow",
                daemon=True,
            ).start()
        return found

    def _follow(self, task: Task, response_id: str, window=None) -> None:
        """Reads a remote task's response to its end (polled, when it was created in a
        completion `window`: such a response has no stream). Its ledger row is its
        creator's, unless the creator stopped and handed it over (hand_over): then the first
        instance to read it to the end writes it (AnswerEngine.settle_followed)."""
        version = MODERN_VERSIONS[-1] if task.kind == TaskKind.EXTENSION else MCP_2025_11_25
        call = task.call
        read: list = []
        ended: list = []  # how it ended when not answered (cancelled here, failed upstream)

        def work() -> tuple[dict, dict]:
            try:
                answer, meta = self.engine.collect(
                    task.tool, {"query": "-"}, response_id, call, window
                )
            except (ToolError, Cancelled) as exc:
                ended.append(exc)
                raise
            read.append((answer.get("model") or task.model, meta))
            return answer, meta

        try:
            reply = self._reply_of(call, version, work)
        finally:
            call.finish()
        user = task.user or LOCAL_USER
        if read and hasattr(self.engine, "settle_followed"):
            self.engine.settle_followed(task.tool, read[0][1], response_id, read[0][0], user)
        elif ended and hasattr(self.engine, "settle_followed_failure"):
            # A handed-over run cancelled or failed here: its handover is settled with what
            # it was billed, not left holding the estimate for its task's life (a window's: 8h).
            self.engine.settle_followed_failure(
                task.tool, ended[0], response_id, task.model, user, window
            )
        task.finish(reply)

    def sign(self, task: Task, call: Call) -> bool:
        """Gives the task a signed id carrying its background response's id, once OpenAI has
        named it; False if there is none (no background mode, or the call failed first)."""
        response_id = self._response_named(task, call)
        if response_id is None and task.done.is_set():
            # Ended first (an answer from the cache, or quicker than the wait): its answer
            # names the response any instance reads it from.
            response_id = answered_response_id(task.reply)
        if response_id is None:
            return False
        # The user is signed with the rest: another user's request finds no such task.
        fields = {"r": response_id, "t": task.tool, "k": task.kind, "o": task.model, "u": task.user}
        if call.result_chars is not None:  # the instance that serves it shortens it the same
            fields["z"] = call.result_chars
        run = (call.upstream or call).background
        if run is not None and run.window:  # no stream to read it from: it is polled
            fields["w"] = run.window
        secret = self.settings["secret"]
        self.tasks.rename(task, mint_task_id(secret, fields, task.ttl_ms, task.created))
        return True

    def _response_named(self, task: Task, call: Call) -> str | None:
        """The id OpenAI gives the call's background response, waited for (up to
        request.timeout_ms) while the task is working; None if it ends first unnamed."""
        deadline = time.monotonic() + self.config.get("request", "timeout_ms") / 1000
        while not task.done.is_set() and time.monotonic() < deadline:
            run = (call.upstream or call).background
            if run is not None and run.created.wait(0.05):
                return run.response_id
            if run is None and getattr(self.engine, "background_off", False):
                return None  # refused: there will be no response id to sign
            if run is None:
                time.sleep(0.05)
        run = (call.upstream or call).background
        return run.response_id if run is not None else None

    def hand_over(self) -> int:
        """This instance is stopping (--stateless, signed ids): the working tasks it created
        run on upstream instead of being cancelled, since any instance serves them from their
        signed ids; their ledger rows are left to the instance that reads them to the end.
        How many were handed over."""
        if not (self.signing and hasattr(self.engine, "hand_over")):
            return 0
        handed = 0
        for task in self.tasks.working_signed():
            call = task.call
            run = (call.upstream or call).background if call is not None else None
            if task.followed or run is None or not run.response_id:
                continue
            if self.engine.hand_over(call, run.response_id, task.expires):
                self.tasks.discard(task)  # nothing here cancels it now
                handed += 1
        return handed


class TaskPolicy:
    """When a call becomes a task or a handoff: which kind, the point at which its request is
    answered with it instead of the answer (converted), and what happens at the call's end."""

    def __init__(self, config: Config, log: Log, tasks: TaskTable, deadlines: Deadlines, ids):
        self.config, self.log, self.tasks, self.deadlines = config, log, tasks, deadlines
        self.ids: TaskIds = ids  # signs a converted task's id; whose tasks a session's are
        self.settings = ids.settings
        self.tasks_off = ids.tasks_off

    def handoff_s(self, params, session: Session, version=HANDSHAKE_ERA) -> int:
        """Seconds after which this client's calls are handed off to answer_result; 0 = never."""
        if self.tasks_off is not None:
            return 0
        return handoff_after(self.config, client_name_of(params, session, version))

    def new_task(self, params: dict, session: Session, tool: str, version) -> Task | None:
        """The Task a call may become (added to the table, so the client's limit applies before
        the call starts), or None when it answers inline however long it takes."""
        if self.tasks_off is not None:
            return None
        # Never shorter than the call: a discounted run's window may outlast server.tasks.ttl_ms.
        longest = window_timeout_ms(self.config, tool, self.config.completion_window(tool))
        ttl = max(self.settings["ttl_ms"], longest)
        handshake = handshake_era(version)
        if not handshake and tasks_extension_declared(params):
            kind = TaskKind.EXTENSION
        elif handshake and session.protocol_version == MCP_2025_11_25 and "task" in params:
            kind, asked = TaskKind.HANDSHAKE, params["task"]
            asked = asked.get("ttl") if isinstance(asked, dict) else None
            if type(asked) is int and asked > 0:  # granted, but never shorter than the call
                ttl = max(min(asked, ttl), longest)
        elif self.handoff_s(params, session, version) > 0:
            kind = TaskKind.HANDOFF
        else:
            return None
        handoff_s = self.handoff_s(params, session, version) if kind == TaskKind.HANDOFF else 0
        import secrets

        key = self.ids.owner(session)
        model = str(self.config.profile(tool).get("model") or "")
        task = Task(f"{kind}-{secrets.token_urlsafe(24)}", kind, None, key, ttl, model)
        task.tool, task.handoff_s, task.user = tool, handoff_s, session.user
        # A 2025-11-25 task is the reply whatever happens: even an answer from the cache,
        # ready before the reply is written, goes to the task, never inline as well.
        task.converted = kind == TaskKind.HANDSHAKE
        if kind == TaskKind.HANDSHAKE:  # the others count once the call becomes one (_convert)
            self.tasks.add(task)
        return task

    def forget(self, task: Task | None) -> None:
        if task is not None:
            self.tasks.discard(task)

    def widen(self, task: Task | None, window) -> None:
        """The person chose a completion window (the cost question) after the call's task was
        made at its tool's own ttl: the task is kept for the window and its margin, as the
        task of a tool whose profile sets that window is."""
        if task is not None and window is not None:
            self.tasks.extend(task, window_timeout_ms(self.config, task.tool, window))

    def arm(self, task: Task, call: Call, session: Session, request_id, version: str):
        """A 2025-11-25 task is the request's reply at once; an extension task after
        server.tasks.immediate_ms, a handoff after its seconds, unless the call ends first."""
        if task.kind == TaskKind.HANDSHAKE:
            if self.ids.signing and not self.ids.sign(task, call):
                self.log.debug("server", "task without a response id: served by this instance only")
            session.unregister(call)  # the task owns the call now: no request cancels it
            self.log.debug(
                "server", f"task created ({TASK_KIND_NAMES[task.kind]}) tool={task.tool}"
            )
            immediate = "The answer is being researched; it will follow when the task completes."
            return {
                "task": task.view(MCP_2025_11_25, self.settings["poll_interval_ms"]),
                "_meta": {"io.modelcontextprotocol/model-immediate-response": immediate},
            }
        extension = task.kind == TaskKind.EXTENSION
        delay = self.settings["immediate_ms"] / 1000 if extension else task.handoff_s
        # An entry on the shared deadlines thread, not a timer thread per call: a hundred calls
        # waiting for their handoff point cost a hundred heap entries.
        task.timer = self.deadlines.after(
            delay, lambda: self._due(task, call, session, request_id, version)
        )
        if task.done.is_set():  # ended before its entry was made: nothing to convert
            self.deadlines.cancel(task.timer)
        return None

    def _due(self, task: Task, call: Call, session: Session, request_id, version: str) -> None:
        """The handoff point, run on the shared deadlines thread, which must never block: it
        also times out every waiting tasks/result and answer_result. Converting can block:
        with signed ids, TaskIds.sign waits (up to request.timeout_ms) for OpenAI to name the
        background response, and the reply is written to the client (a stdio pipe blocks while
        the client does not read). So a call that has ended is left alone here, and the rest
        runs on a thread of its own that lives only while it converts. (Not on the call's
        worker: that one is busy reading the answer's stream.)"""
        if task.done.is_set() or call.cancelled.is_set():
            return
        converter = threading.Thread(
            target=self._convert,
            args=(task, call, session, request_id, version),
            name="handoff",
            daemon=True,
        )
        try:
            converter.start()
        except RuntimeError:  # out of threads: the call answers inline, however long it takes
            self.log.say("cannot start a thread to hand a call off; it answers inline")

    def _convert(self, task: Task, call: Call, session: Session, request_id, version: str):
        """The handoff point has come: unless the call has ended, the request is answered with
        the task (or the handoff) and the call goes on without it."""
        if self.ids.signing and not self.ids.sign(task, call):
            return  # the call ended before OpenAI named its response: it answers inline
        if not self._hold(task, session, request_id):
            return  # at a limit, or its client has gone: it answers inline
        if not task.convert():
            self.forget(task)
            return
        session.unregister(call)
        self.log.debug("server", f"task created ({TASK_KIND_NAMES[task.kind]}) tool={task.tool}")
        if task.kind == TaskKind.EXTENSION:
            view = task.view("extension", self.settings["poll_interval_ms"])
            result = modern_result({**view, "resultType": "task"}, version)
        else:
            result = still_working_result(task, version)
        session.send(rpc_result(request_id, result))

    def _hold(self, task: Task, session: Session, request_id) -> bool:
        """A handoff or extension task is counted against the limits only now that the call
        becomes one (an answer from the cache never does); at max_per_client a handoff's
        client's oldest handoff that has ended uncollected makes room. False at a limit: the
        call goes on and answers inline, so that no client is locked out. False too once the
        client can collect nothing (Session.stop_tasks), checked again after the add: a stop
        that raced it dropped the task, or this check sees the stop."""
        task.request_id = request_id
        if session.tasks_closed:
            return False
        try:
            self.tasks.add(task, make_room=task.kind == TaskKind.HANDOFF)
        except RpcError as exc:
            self.log.debug("server", f"not handed off, answering inline: {exc.message}")
            return False
        if session.tasks_closed:
            self.tasks.discard(task)
            return False
        return True

    def call_ended(self, task: Task, reply: dict | None, session: Session) -> bool:
        """A call with a task has ended: True if the task keeps its reply (the client collects
        it later), False if the reply goes to the request inline."""
        if not task.finish(reply):
            return False
        self._task_ended(task, session)
        return True

    def _task_ended(self, task: Task, session: Session) -> None:
        """notifications/tasks/status (2025-11-25) where the client can receive one."""
        if task.kind == TaskKind.HANDSHAKE:
            view = task.view(MCP_2025_11_25, self.settings["poll_interval_ms"])
            session.send({"jsonrpc": "2.0", "method": "notifications/tasks/status", "params": view})

    def settle(self, task: Task) -> None:
        """After a call's end: a task it never became is forgotten, and its handoff point, if
        any, cancelled (answered inline: nothing left to convert)."""
        if not task.converted:
            self.forget(task)
            if task.timer is not None:
                self.deadlines.cancel(task.timer)


# -- Task requests and handoffs: tasks/*, and LongCalls that holds them ------------------------


class TaskRequests:
    """The requests about tasks: tasks/* of the 2025-11-25 shape (tasks/get, tasks/list,
    tasks/cancel, tasks/result) and of the 2026-07-28 extension (tasks/get, tasks/cancel,
    tasks/update); and the waiting for a task's end that tasks/result and answer_result share
    (a Waiter, no thread)."""

    def __init__(self, log: Log, tasks: TaskTable, deadlines: Deadlines, ids: TaskIds):
        self.log, self.tasks, self.deadlines = log, tasks, deadlines
        self.ids = ids  # what a task id names; whose tasks a session's are
        self.settings = ids.settings
        self.stateless, self.tasks_off = ids.stateless, ids.tasks_off  # tasks/list; tasks at all

    def _task_named(self, params, kind: str, session: Session) -> Task:
        """The task a tasks/* request names; -32602 for an unknown, forged or expired id."""
        task_id = params.get("taskId") if isinstance(params, dict) else None
        if not isinstance(task_id, str) or not task_id:
            raise RpcError(INVALID_PARAMS, "Invalid params: taskId must be a non-empty string")
        try:
            return self.ids.find(task_id, kind, session)
        except TaskIdError as exc:
            why = f"Invalid params: unknown task id ({exc.reason})"
            raise RpcError(INVALID_PARAMS, why) from None

    def _tasks_2025(self, session: Session) -> None:
        if session.protocol_version != MCP_2025_11_25 or self.tasks_off is not None:
            raise RpcError(
                METHOD_NOT_FOUND,
                f"Method not found: tasks are offered in protocol {MCP_2025_11_25} (and as the "
                f"{TASKS_EXTENSION} extension in {MCP_2026_07_28})",
            )

    def tasks_get(self, params: dict, session: Session, request_id) -> dict:
        self._tasks_2025(session)
        return self._task_named(params, TaskKind.HANDSHAKE, session).view(
            MCP_2025_11_25, self.settings["poll_interval_ms"]
        )

    def tasks_list(self, params: dict, session: Session, request_id) -> dict:
        self._tasks_2025(session)
        if self.stateless:
            raise RpcError(METHOD_NOT_FOUND, "Method not found: tasks/list (off with --stateless)")
        if params.get("cursor") is not None:
            raise RpcError(INVALID_PARAMS, "Invalid params: this server issued no cursor")
        key = self.ids.owner(session)
        poll = self.settings["poll_interval_ms"]
        mine = self.tasks.of_client(key, TaskKind.HANDSHAKE)
        return {"tasks": [task.view(MCP_2025_11_25, poll) for task in mine]}

    def tasks_cancel(self, params: dict, session: Session, request_id) -> dict:
        self._tasks_2025(session)
        task = self._task_named(params, TaskKind.HANDSHAKE, session)
        terminal = task.cancel()
        if terminal is not None:
            raise RpcError(
                INVALID_PARAMS, f"Cannot cancel task: already in terminal status '{terminal}'"
            )
        self.log.debug("server", f"task cancelled tool={task.tool}")
        return task.view(MCP_2025_11_25, self.settings["poll_interval_ms"])

    def tasks_result(self, params: dict, session: Session, request_id) -> dict | None:
        """Waits until the task ends, then answers exactly what the tools/call would have, with
        the related-task _meta: at once if it has ended, else from the task's end (a Waiter,
        no thread), or when it expires."""
        self._tasks_2025(session)
        task = self._task_named(params, TaskKind.HANDSHAKE, session)
        if task.done.is_set():
            reply = self.task_reply(task, request_id)
            if "error" in reply:
                error = reply["error"]
                raise RpcError(error["code"], error["message"], error.get("data"))
            return reply["result"]

        def serve(expired: bool) -> None:
            session.send(self.task_reply(task, request_id))

        self.wait(task, session, request_id, (task.expires - now_ms()) / 1000, serve)
        return None

    def wait(self, task: Task, session: Session, request_id, timeout_s: float, serve) -> None:
        """serve(timed_out) once the task ends or timeout_s pass, whichever comes first; the
        request counts against the session's limits meanwhile (-32000 past them)."""
        waiter = Waiter(task, session, request_id, serve, self.deadlines)
        session.add_waiter(request_id, waiter, self.settings["max_per_client"])
        waiter.start(timeout_s)

    def task_reply(self, task: Task, request_id) -> dict:
        with task.lock:
            status, reply = task.status, task.reply
        if task.done.is_set():
            task.mark_collected()
        if status == "cancelled":
            return rpc_error(request_id, INVALID_PARAMS, "Invalid params: task was cancelled")
        if reply is None:
            return rpc_error(request_id, INVALID_PARAMS, "Invalid params: task has expired")
        if "error" in reply:
            return {**reply, "id": request_id}
        result = dict(reply["result"])
        result["_meta"] = {**result.get("_meta", {}), RELATED_TASK: {"taskId": task.id}}
        return rpc_result(request_id, result)

    def _ext_task(self, params, session: Session) -> Task:
        if not tasks_extension_declared(params):
            raise missing_tasks_extension()
        return self._task_named(params, TaskKind.EXTENSION, session)

    def ext_get(self, params: dict, session: Session, request_id, version: str) -> dict:
        task = self._ext_task(params, session)
        result = task.view("extension", self.settings["poll_interval_ms"])
        with task.lock:
            status, reply = task.status, task.reply
        if status == "completed":
            result["result"] = reply["result"]
        elif status == "failed":
            result["error"] = reply["error"]
        if status in ("completed", "failed"):
            task.mark_collected()
        return result

    def ext_cancel(self, params: dict, session: Session, request_id, version: str) -> dict:
        task = self._ext_task(params, session)
        if task.cancel() is None:  # finished already: still an ack (cooperative cancel)
            self.log.debug("server", f"task cancelled tool={task.tool}")
        return {}

    def ext_update(self, params: dict, session: Session, request_id, version: str) -> dict:
        task = self._ext_task(params, session)
        raise RpcError(
            INVALID_PARAMS,
            f"Invalid params: task {task.id} has no outstanding input requests (this server "
            "never asks for input)",
        )


class Handoffs:
    """A call handed off to answer_result: that tool's answer once ready, its cancel (with
    cancel: true, or notifications/cancelled naming the tools/call that was handed off)."""

    def __init__(self, log: Log, tasks: TaskTable, ids: TaskIds, requests, policy: TaskPolicy):
        self.log, self.tasks, self.ids = log, tasks, ids  # ids: what a handoff id names
        self.requests: TaskRequests = requests  # waits for a task's end, reads its reply
        self.policy = policy  # how long this client may wait (its handoff point)

    def answer_result(self, params: dict, session: Session, request_id, version) -> None:
        """answer_result: the handed-off answer once ready (waiting up to wait_s, within the
        client's own timeout), else another "still working" result; with cancel: true, the
        handoff is cancelled instead. A wait holds no thread (a Waiter)."""
        arguments = params.get("arguments")
        arguments = arguments if isinstance(arguments, dict) else {}
        handoff_id, wait_s = arguments.get("id"), arguments.get("wait_s", 30)
        why = task = None
        if not isinstance(handoff_id, str) or not handoff_id:
            why = "id must be the non-empty string a handed-off answer gave"
        elif type(wait_s) is not int or not 0 <= wait_s <= 60:
            why = "wait_s must be an integer from 0 to 60"
        elif type(arguments.get("cancel", False)) is not bool:
            why = "cancel must be true or false"
        else:
            try:
                task = self.ids.find(handoff_id, TaskKind.HANDOFF, session)
            except TaskIdError as exc:
                why = f"unknown id: {exc.reason}"
        if why is not None:
            if modern_era(version):  # 2026-07-28: a tool execution error the model can fix
                return tool_error_result(f"Invalid arguments: {why}")
            raise RpcError(INVALID_PARAMS, f"Invalid params: {why}")
        era = spoken_version(version, session)
        if arguments.get("cancel") is True:
            session.send(rpc_result(request_id, self._cancel_handoff(task, era)))
            return None
        wait = min(wait_s, self.policy.handoff_s(params, session, version))

        def collect(timed_out: bool) -> None:
            if timed_out:
                session.send(rpc_result(request_id, still_working_result(task, era)))
                return
            reply = self.requests.task_reply(task, request_id)
            if "result" in reply:
                meta = {**reply["result"].get("_meta", {}), HANDOFF_META: None}
                meta.pop(RELATED_TASK, None)
                meta[HANDOFF_META] = {"id": task.id, "status": "completed"}
                reply["result"]["_meta"] = meta
                if era in MODERN_VERSIONS:
                    modern_result(reply["result"], era)
            elif task.status == "cancelled":
                reply = rpc_tool_failed(
                    request_id,
                    "answer failed: the handed-off call was cancelled (on request, at its "
                    "expiry, or as the server stopped); ask again",
                    {"message": "cancelled"},
                )
            session.send(reply)

        self.requests.wait(task, session, request_id, wait, collect)
        return None

    def _cancel_handoff(self, task: Task, version: str) -> dict:
        """answer_result with cancel: true: the call stops (upstream too) and the handoff no
        longer counts against the client's limit; a result in the output contract says so."""
        terminal = task.cancel()
        task.mark_collected()
        if terminal is not None:  # it had ended: its answer goes now, as the result says
            self.tasks.discard(task)
        self.log.debug("server", f"handoff cancelled tool={task.tool}")
        answer = handoff_answer(task.id, task.model, 0, task.ttl_ms)
        answer["answer"] = (
            "Cancelled: the research for this id was stopped; nothing more will come of it."
            if terminal is None
            else f"Dropped: the research for this id had already ended ({terminal}); its "
            "answer is no longer kept here."
        )
        return tool_result(answer, {HANDOFF_META: {"id": task.id, "status": "cancelled"}}, version)

    def cancel_handoff_of(self, session: Session, request_id) -> bool:
        """notifications/cancelled naming a tools/call that was handed off: the handoff is
        cancelled. False if there is none."""
        task = self.tasks.handoff_of(session_owner(session), request_id)
        if task is None:
            return False
        task.cancel()
        task.mark_collected()
        return True


class LongCalls:
    """Tasks and handoffs for the Dispatcher: the TaskTable that holds them, the Deadlines
    their waits and handoff points run on, and the parts that serve them, made here each with
    what it needs. The Dispatcher asks `policy` whether a call becomes one and tells it of
    each call's end, and routes tasks/* to `requests`, answer_result to `handoffs`.
    """

    def __init__(self, config: Config, log: Log, engine, reply_of, stateless: bool = False):
        settings = config.get("server", "tasks")
        self.tasks = TaskTable(
            settings["max_per_client"], log, settings["max_open"], settings["max_reply_bytes"]
        )
        # answer_result's wait_s, tasks/result's expiry, and each call's handoff point
        self.deadlines = Deadlines(log)
        self.ids = TaskIds(config, log, engine, self.tasks, reply_of, stateless)
        self.policy = TaskPolicy(config, log, self.tasks, self.deadlines, self.ids)
        self.requests = TaskRequests(log, self.tasks, self.deadlines, self.ids)
        self.handoffs = Handoffs(log, self.tasks, self.ids, self.requests, self.policy)
        self.settings = settings
        # --http --stateless: tasks need the secret, and tasks/list is off.
        self.stateless = stateless
        self.tasks_off: str | None = self.ids.tasks_off

    @property
    def signing(self) -> bool:
        """Whether task ids are signed for any instance to serve (--stateless with a secret)."""
        return self.ids.signing

    def hand_over(self) -> int:
        """This instance is stopping: see TaskIds.hand_over."""
        return self.ids.hand_over()


# -- The dispatcher: each message to its method (Dispatcher) -----------------------------------
# Last in its section: it routes to every part above (sessions, calls, handshake, tasks).


class Dispatcher:
    """MCP over JSON-RPC: takes decoded messages, returns replies. Knows nothing about bytes.

    It tells messages apart and routes each request to its method by the era it speaks (the
    tables below; prompts/list and prompts/get are served here, from PROMPT_TABLE), to the
    parts it makes here: Handshake (initialize, server/discover), CallsInFlight (tools/call:
    each runs on its own worker thread, so ping and notifications/cancelled are served while
    it runs; its reply goes out later through the session's `send`) and LongCalls (tasks and
    handoffs).
    """

    def __init__(self, config: Config, log: Log, engine, stateless: bool = False):
        """stateless: serving --http --stateless (LongCalls: tasks need the secret)."""
        self.config = config
        self.log = log
        self.engine = engine
        self.modern = config.get("server", "protocol_eras") == "both"
        replies = CallReplies(config, log)
        # Tasks and handoffs: calls that outlive their request, and the requests about them.
        self.long_calls = LongCalls(config, log, engine, replies.reply_of, stateless)
        self.calls = CallsInFlight(config, log, engine, replies, self.long_calls)
        self.handshake = Handshake(config, log, engine, self.long_calls)
        tasks = self.long_calls.requests
        self._methods = {
            "initialize": self.handshake.initialize,
            "ping": lambda params, session, request_id: {},
            "tools/list": self._tools_list,
            "tools/call": self._tools_call,
            "prompts/list": self._prompts_list,
            "prompts/get": self._prompts_get,
            "tasks/get": tasks.tasks_get,
            "tasks/result": tasks.tasks_result,
            "tasks/list": tasks.tasks_list,
            "tasks/cancel": tasks.tasks_cancel,
        }
        # The stateless era has no initialize and no ping; each takes the request's version.
        # Nothing here ever changes, so subscriptions/listen is not offered either (-32601).
        self._modern_methods = {
            "server/discover": self.handshake.discover,
            "tools/list": self._tools_list,
            "tools/call": self._tools_call,
            "prompts/list": self._prompts_list,
            "prompts/get": self._prompts_get,
            "tasks/get": tasks.ext_get,
            "tasks/cancel": tasks.ext_cancel,
            "tasks/update": tasks.ext_update,
        }

    @staticmethod
    def classify(message) -> tuple[str, str | None]:
        """What a decoded message is, and its method: ("request", method),
        ("notification", method), ("response", None) or ("invalid", None).

        The one place that tells messages apart; both transports ask it before they decide
        where a message goes. A request's id is checked later, by handle().
        """
        if not isinstance(message, dict):
            return "invalid", None
        method = message.get("method")
        if isinstance(method, str):
            return ("request" if "id" in message else "notification"), method
        if method is None and ("result" in message or "error" in message):
            return "response", None  # to Session.ask (roots/list); its id may be null
        return "invalid", None

    def handle(self, message, session: Session, header_version: str | None = None) -> dict | None:
        """The reply to one message, or None (notifications, responses, calls still running).

        `header_version` is HTTP's MCP-Protocol-Version header, when there is one.
        """
        kind, method = self.classify(message)
        if kind == "notification":
            self._notification(method, message.get("params"), session)
            return None
        if kind == "response":
            session.answered(message)  # an answer to one of ask()'s requests, or nothing
            return None
        if not isinstance(message, dict):
            why = (
                "batches (JSON arrays) are not supported; send one message at a time"
                if isinstance(message, list)
                else "a message must be a JSON object"
            )
            return rpc_error(None, INVALID_REQUEST, f"Invalid Request: {why}")
        if "id" not in message:
            if "result" in message or "error" in message:
                return None  # a response with a strange method; answer nothing
            return rpc_error(None, INVALID_REQUEST, "Invalid Request: missing 'method'")
        request_id = message["id"]
        if not _valid_id(request_id):
            got = _describe(request_id)
            return rpc_error(
                None,
                INVALID_REQUEST,
                f"Invalid Request: 'id' must be a string or an integer, got {got}",
            )
        try:
            if message.get("jsonrpc") != "2.0":
                raise RpcError(INVALID_REQUEST, "Invalid Request: 'jsonrpc' must be \"2.0\"")
            if not isinstance(method, str):
                raise RpcError(INVALID_REQUEST, "Invalid Request: 'method' must be a string")
            if self.modern and is_modern(method, message.get("params"), header_version):
                return self._modern(method, message.get("params"), session, request_id)
            handler = self._methods.get(method)
            if handler is None:
                raise RpcError(METHOD_NOT_FOUND, f"Method not found: {method}")
            params = message.get("params")
            if params is None:
                params = {}
            elif not isinstance(params, dict):
                raise RpcError(INVALID_PARAMS, "Invalid params: 'params' must be an object")
            result = handler(params, session, request_id)
            return None if result is None else rpc_result(request_id, result)
        except RpcError as exc:
            return rpc_error(request_id, exc.code, exc.message, exc.data)

    def _modern(self, method: str, params, session: Session, request_id) -> dict | None:
        version = modern_version(params)
        if hasattr(self.engine, "warm_up"):  # no initialize to warm up after: any request will do
            self.engine.warm_up()
        handler = self._modern_methods.get(method)
        if handler is None:
            raise RpcError(
                METHOD_NOT_FOUND, f"Method not found: {method} (not served in protocol {version})"
            )
        result = handler(params, session, request_id, version)
        return None if result is None else rpc_result(request_id, modern_result(result, version))

    # -- methods ---------------------------------------------------------------------------------

    # Each takes (params, session, request_id) and returns the result, or None when the reply
    # is sent later (a tools/call answers from its worker thread).

    def _tools_list(
        self, params: dict, session: Session, request_id, version=HANDSHAKE_ERA
    ) -> dict:
        listed = {
            "tools": tool_definitions(
                spoken_version(version, session),
                cache_enabled(self.config),
                handoff=self.long_calls.policy.handoff_s(params, session, version) > 0,
                tasks=self.long_calls.tasks_off is None,
                deep=DEEP_TOOL in enabled_tools(self.config),
            )
        }
        if modern_era(version):  # stateless era: the list is the same for everyone, all day
            listed.update(ttlMs=LIST_TTL_MS, cacheScope="public")
        return listed

    def _tools_call(self, params: dict, session: Session, request_id, version=HANDSHAKE_ERA):
        name = params.get("name")
        if name == ANSWER_RESULT and self.long_calls.policy.handoff_s(params, session, version) > 0:
            return self.long_calls.handoffs.answer_result(params, session, request_id, version)
        tools = enabled_tools(self.config)
        if not isinstance(name, str) or name not in tools:
            off = (
                " (it is off: set tools.answer_deep: true or MCP_ANSWER_DEEP=1 to list it)"
                if name == DEEP_TOOL
                else ""
            )
            raise RpcError(
                METHOD_NOT_FOUND if handshake_era(version) else INVALID_PARAMS,  # 2026-07-28
                f"Unknown tool: {_describe(name)}{off}; available tools: {', '.join(tools)}",
            )
        arguments = params.get("arguments")
        try:
            args = validate_arguments(name, arguments)
        except InvalidParams as exc:
            if modern_era(version):  # 2026-07-28: a tool execution error the model can fix
                return tool_error_result(f"Invalid arguments: {exc}")
            raise RpcError(INVALID_PARAMS, f"Invalid params: {exc}") from None
        return self.calls.start(params, args, session, request_id, name, version)

    def _prompts_list(
        self, params: dict, session: Session, request_id, version=HANDSHAKE_ERA
    ) -> dict:
        # One page holds them all, so no nextCursor is ever given, and any cursor is one this
        # server never issued: -32602, as the spec's pagination asks.
        cursor = params.get("cursor")
        if cursor is not None:
            raise RpcError(
                INVALID_PARAMS,
                f"Invalid params: unknown cursor {_describe(cursor)}; every prompt fits in one "
                "page, so list them without a cursor",
            )
        deep = DEEP_TOOL in enabled_tools(self.config)
        listed = {"prompts": prompt_definitions(spoken_version(version, session), deep)}
        if modern_era(version):  # as tools/list: the same for everyone, all day
            listed.update(ttlMs=LIST_TTL_MS, cacheScope="public")
        return listed

    def _prompts_get(
        self, params: dict, session: Session, request_id, version=HANDSHAKE_ERA
    ) -> dict:
        deep = DEEP_TOOL in enabled_tools(self.config)
        try:
            return prompt_result(params.get("name"), params.get("arguments"), deep)
        except InvalidParams as exc:
            raise RpcError(INVALID_PARAMS, f"Invalid params: {exc}") from None

    def abandoned(self, session: Session, request_id) -> None:
        """The transport says nobody reads this request's reply any more: see
        CallsInFlight.abandoned."""
        self.calls.abandoned(session, request_id)

    def _notification(self, method: str, params, session: Session) -> None:
        params = params if isinstance(params, dict) else {}
        if method == "notifications/cancelled":
            request_id = params.get("requestId")
            if _valid_id(request_id) and self.calls.cancel(session, request_id):
                reason = _one_line(str(params.get("reason", "")), 80)
                self.log.debug(
                    "server",
                    f"cancelled requestId={_describe(request_id)} reason={json.dumps(reason)}",
                )
        elif method == "notifications/roots/list_changed":
            with session._lock:
                session.roots, session.roots_generation = None, session.roots_generation + 1
        # notifications/initialized: nothing to do (a request before it is served all the same)


def rpc_tool_failed(request_id, message: str, data: dict) -> dict:
    """A failed call's JSON-RPC error reply, in both eras: -32001 `answer failed: ...`. (Only
    arguments that do not fit the schema are an isError result, tool_error_result, in the
    stateless era: the model can fix those; and a failed task is `failed` with this same
    error.) Not to be confused with Failure, the engine's classified upstream failure."""
    return rpc_error(request_id, TOOL_FAILED, message, data)


def tool_error_result(text: str, data: dict | None = None) -> dict:
    """A CallToolResult reporting a tool execution error (isError: a result, not a JSON-RPC
    error); `data` details it in _meta."""
    detail = (data or {}).get("message")
    if detail and detail not in text:
        text = f"{text}: {detail}"
    result = {"content": [{"type": "text", "text": text}], "isError": True}
    if data:
        result["_meta"] = {"error": data}
    return result


def tool_result(answer: dict, meta: dict, version: str) -> dict:
    """A CallToolResult: the answer as JSON text, and as structuredContent where it exists."""
    result = {"content": [{"type": "text", "text": json.dumps(answer, ensure_ascii=False)}]}
    if version >= MCP_2025_06_18:
        result["structuredContent"] = answer
    if meta:
        result["_meta"] = meta
    return modern_result(result, version) if version in MODERN_VERSIONS else result


# ============================================================================================
# Transports
# ============================================================================================

# -- The contract: what every transport honours ------------------------------------------------


# The contract every transport (StdioTransport, HttpTransport) honours:
# - It owns bytes only: it reads whole messages, hands each to Dispatcher.handle with its
#   client's Session, and writes the reply handle() returns. HTTP, which must pick a session
#   and a response shape first, asks Dispatcher.classify what a message is (stdio need not).
#   Protocol decisions (errors, versions, results) are the dispatcher's, never the socket's;
#   a transport words only its own refusals (a frame it cannot read, an HTTP limit).
# - One Session per client: stdio has one for its whole life, HTTP one per Mcp-Session-Id or
#   GET /sse stream (one per POST with --stateless, and for every 2026-07-28 request).
# - The era (MCP 2026-07-28 or the handshake) is decided per request by the dispatcher
#   (is_modern); HTTP passes its MCP-Protocol-Version header along and checks the headers that
#   mirror the body (header_mismatch). Both eras share one stdio pipe and one /mcp endpoint.
# - A Session's `send` is how everything else reaches the client (tool results from worker
#   threads, progress notices): thread-safe, whole messages, and silent once the client has gone.
# - Admission: the dispatcher refuses calls past server.max_calls; HTTP first refuses its own
#   limits (HttpApp.dispatch), in one step with the call's start.
# - When the client goes, its calls are cancelled (Session.cancel_all); at end of input or a
#   graceful stop, the transport waits for them (Session.wait_idle) up to its limit.
# - A client that sends nothing or reads nothing costs a bounded amount: HTTP keeps connections
#   waiting for a request in its Lobby (no thread each) and what a /sse stream has not taken in
#   a StreamOutbox of server.http.sse_outbox_bytes.


class Transport:
    """The contract above, as the one thing a caller uses: a transport is made with what it
    serves (the Dispatcher, or the HttpApp that holds it) and where, then serve() answers its
    clients until end of input or a stop signal and returns the exit status (0 when it ends
    gracefully, 2 when it cannot start). StdioTransport and HttpTransport are the two."""

    def serve(self) -> int:
        raise NotImplementedError


# -- Framing: Content-Length and newline-delimited JSON (FrameReader) --------------------------


# json.dumps and json.loads build a new encoder or decoder on every call, which costs more than
# the work on a small message. The transport makes the C encoder and scanner that `json` is
# built on once, with json's defaults, and leaves anything they refuse to `json` itself (so
# errors and their wording stay json's).
try:
    from _json import encode_basestring as _c_escape
    from _json import make_encoder as _c_make_encoder
    from _json import make_scanner as _c_make_scanner
except ImportError:  # a Python without the accelerator: json does everything
    _c_make_encoder = _c_make_scanner = None


_JSON_CONSTANTS = {"-Infinity": -float("inf"), "Infinity": float("inf"), "NaN": float("nan")}


class _ScanContext:
    """The settings _json.make_scanner reads from a JSONDecoder: those of json.loads."""

    strict = True
    object_hook = object_pairs_hook = None
    parse_float, parse_int = float, int
    parse_constant = _JSON_CONSTANTS.__getitem__


def _not_serializable(value):
    raise TypeError(type(value).__name__)  # json.dumps below raises json's own error


if _c_make_scanner is not None:
    _scan = _c_make_scanner(_ScanContext())
    # (markers, default, escape, indent, key_separator, item_separator, sort_keys, skipkeys,
    # allow_nan): json.dumps(separators=(",", ":"), ensure_ascii=False) without its
    # circular-reference check, which json.dumps below still makes if recursion runs away.
    _encode = _c_make_encoder(None, _not_serializable, _c_escape, None, ":", ",", 0, 0, 1)

_JSON_SPACE = " \t\n\r"


def encode_message(message: dict) -> bytes:
    """Compact UTF-8 JSON; escapes only if a lone surrogate makes raw UTF-8 impossible."""
    try:
        if _c_make_encoder is not None:
            try:
                return "".join(_encode(message, 0)).encode("utf-8")
            except (TypeError, ValueError, RecursionError):
                pass
        return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(message, separators=(",", ":")).encode("ascii")


def _json_value_end(data: bytes) -> int:
    """Where the JSON value at the start of `data` ends, in bytes, or -1 if it is not whole."""
    text = data.decode("utf-8", "surrogateescape")
    start = len(text) - len(text.lstrip(_JSON_SPACE))
    try:
        if _c_make_scanner is not None:
            end = _scan(text, start)[1]
        else:
            end = json.JSONDecoder().raw_decode(text, start)[1]
    except (StopIteration, ValueError, RecursionError, SystemError):
        return -1
    return len(text[:end].encode("utf-8", "surrogateescape"))


def decode_message(body: bytes):
    """(message, None) for a JSON body, or (None, parse-error reply)."""
    if _c_make_scanner is not None:
        try:
            text = body.decode("utf-8")
            value, end = _scan(text, len(text) - len(text.lstrip(_JSON_SPACE)))
            if end == len(text) or not text[end:].strip(_JSON_SPACE):
                return value, None
        except (StopIteration, ValueError, RecursionError, SystemError):
            # json.loads says what is wrong, or decodes what strict UTF-8 refused. (Python
            # 3.10/3.11's scanner raises SystemError for bad JSON until json.decoder has
            # been imported, which json.loads does.)
            pass
    try:
        return json.loads(body), None
    except (ValueError, RecursionError) as exc:
        if isinstance(exc, json.JSONDecodeError):
            why = exc.msg
        elif isinstance(exc, RecursionError):
            why = "nested too deeply"
        elif isinstance(exc, UnicodeDecodeError):
            why = "not UTF-8"
        else:  # Python's int() limit: a number of thousands of digits is no id anyone means
            return None, rpc_error(
                None, PARSE_ERROR, "Parse error: a number in the message has too many digits"
            )
        return None, rpc_error(None, PARSE_ERROR, f"Parse error: the message is not JSON ({why})")


class Frame:
    """One thing the reader found: a message body, an oversized message, a refused frame
    (`invalid`, with the reason), or skipped bytes."""

    __slots__ = ("body", "kind", "mode", "reason", "size")

    def __init__(
        self, kind: str, body: bytes = b"", mode: str = "line", size: int = 0, reason: str = ""
    ):
        self.kind, self.body, self.mode, self.size, self.reason = kind, body, mode, size, reason

    def __repr__(self) -> str:
        return f"Frame({self.kind!r}, {self.body[:40]!r}, mode={self.mode!r}, size={self.size})"


BOM = b"\xef\xbb\xbf"
_HEADER_LIMIT = 8192
_TOKEN = b"!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
_HEADER_NAMES = (b"Content-Length", b"content-length", b"CONTENT-LENGTH")
_RESYNC_TAIL = 64  # bytes kept while resynchronising: a header name may be cut by the read
_SCALAR_START = b'-0123456789"ntf'
_PENDING_CHECK = 1 << 14  # how far into a pending body a too-long length is looked for


def _find_header(buffer, start: int, end: int) -> int:
    """Where the first `Content-Length:` header starts in buffer[start:end], or -1.

    Used only to resynchronise after bad input, so it looks for the usual spellings only.
    """
    found, end = -1, min(end, len(buffer))
    for name in _HEADER_NAMES:
        at = buffer.find(name, start, end)
        while at >= 0:
            colon = at + len(name)
            while colon < end and buffer[colon] in b" \t":
                colon += 1
            if colon < end and buffer[colon] == 0x3A:  # ':'
                break
            at = buffer.find(name, at + 1, end)
        if at >= 0 and (found < 0 or at < found):
            found = at
    return found


def _looks_whole(buffer, start: int, end: int) -> bool:
    """A JSON object or array ends with `}` or `]`; a cut or overrun body usually does not."""
    while end > start and buffer[end - 1] in b" \t\r\n":
        end -= 1
    return end > start and buffer[end - 1] in b"}]"


def _header_next(buffer, pos: int, end: int) -> bool:
    """Whether buffer[pos:end] starts a `Content-Length:` header (or could, once more arrives)."""
    if end - pos < 16:
        head = bytes(buffer[pos:end])
        return any(name.startswith(head) or head.startswith(name) for name in _HEADER_NAMES)
    return _find_header(buffer, pos, pos + 32) == pos


class FrameReader:
    """Owns stdio framing: turns bytes, in chunks of any size, into Frames.

    Accepts `Content-Length: N` frames (any header case, other headers ignored, CRLF or LF)
    and newline-delimited JSON, in any mix. A message over `max_bytes` is reported and skipped
    without being held in memory; bytes that are neither are skipped a line at a time.

    A bad frame (a bad or missing Content-Length, a length that is too short or too long) is
    reported once as `invalid`, and the reader resynchronises on the next `Content-Length:`
    header or the next line, so that one bad frame never glues later ones together.
    """

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self._buffer = bytearray()
        self._skip_bytes = 0  # body of an oversized frame still to discard
        self._skip_line = False  # rest of an oversized line still to discard
        self._resync = False  # discarding up to the next header or through the next newline
        self._looked = 0  # bytes of a pending body already checked for a too-long length

    def feed(self, data: bytes) -> list[Frame]:
        frames: list[Frame] = []
        buffer = self._buffer
        buffer += data
        pos, end = 0, len(buffer)
        while pos < end:
            if self._skip_bytes:
                taken = min(self._skip_bytes, end - pos)
                self._skip_bytes -= taken
                pos += taken
                continue
            if self._skip_line:
                newline = buffer.find(b"\n", pos)
                if newline < 0:
                    pos = end
                    break
                self._skip_line = False
                pos = newline + 1
                continue
            first = buffer[pos]
            if first in b" \t\r\n":
                pos += 1
                continue
            if first == 0xEF:
                if buffer.startswith(BOM, pos):
                    pos += 3
                    continue
                if BOM.startswith(bytes(buffer[pos:end])):
                    break  # the rest of a BOM has not arrived yet
            if first in b"{[":
                pos, done = self._line(buffer, pos, end, frames)
            elif self._resync:
                pos, done = self._resynchronise(buffer, pos, end)
            else:
                pos, done = self._framed(buffer, pos, end, frames)
            if not done:
                break
        del buffer[:pos]
        return frames

    def _resynchronise(self, buffer, pos: int, end: int) -> tuple[int, bool]:
        """Skips the rest of a refused frame: up to the next header, or past the next newline."""
        header = _find_header(buffer, pos, end)
        newline = buffer.find(b"\n", pos, header if header >= 0 else end)
        if newline >= 0:
            header = newline + 1
        if header < 0:
            return max(pos, end - _RESYNC_TAIL), False
        self._resync = False
        return header, True

    def _line(self, buffer, pos: int, end: int, frames: list) -> tuple[int, bool]:
        newline = buffer.find(b"\n", pos)
        if newline < 0:
            if end - pos > self.max_bytes:
                frames.append(Frame("oversized", mode="line", size=end - pos))
                self._skip_line, self._resync = True, False
                return end, True
            return pos, False
        resyncing, self._resync = self._resync, False
        if newline - pos > self.max_bytes:
            frames.append(Frame("oversized", mode="line", size=newline - pos))
            return newline + 1, True
        if buffer[newline - 1] != 0x7D and not _looks_whole(buffer, pos, newline):  # '}'
            header = _find_header(buffer, pos + 1, newline)
            if resyncing:  # the rest of a refused frame, reported already
                return (header if header >= 0 else newline + 1), True
            if header >= 0:  # JSON ran straight into a framed message: keep the frame
                reason = "a JSON text ran into a Content-Length header"
                frames.append(Frame("invalid", size=-1, reason=reason))
                return header, True
        frames.append(Frame("message", bytes(buffer[pos:newline]), "line"))
        return newline + 1, True

    def _framed(self, buffer, pos: int, end: int, frames: list) -> tuple[int, bool]:
        """Header lines, a blank line, then exactly Content-Length bytes of body."""
        length, problem = None, ""
        cursor = pos
        while True:
            newline = buffer.find(b"\n", cursor, min(end, pos + _HEADER_LIMIT))
            if newline < 0:
                if end - pos >= _HEADER_LIMIT:
                    return self._garbage(buffer, pos, end, frames)
                return pos, False
            line = bytes(buffer[cursor:newline]).rstrip(b"\r")
            if not line:
                break
            name, colon, value = line.partition(b":")
            if (
                name.endswith((b" ", b"\t"))
                and colon
                and name.rstrip().lower() == b"content-length"
            ):
                problem = problem or f"bad header {_quote(line)}: no space before the colon"
            elif not colon or not name or name.translate(None, _TOKEN):
                if cursor == pos:
                    return self._garbage(buffer, pos, end, frames)
                if length is None and not problem:
                    frames.append(Frame("garbage", bytes(buffer[pos:cursor])))
                else:
                    frames.append(
                        Frame("invalid", reason="a header block without the blank line after it")
                    )
                return cursor, True  # the header block was broken off: look again here
            elif name.lower() == b"content-length":
                value = value.strip(b" \t")
                if not (value.isdigit() and len(value) < 16):
                    problem = problem or (
                        f"bad Content-Length {_quote(value)}: it must be the body's size in "
                        "bytes, digits only"
                    )
                elif length is not None and int(value) != length:
                    problem = problem or "two different Content-Length headers"
                else:
                    length = int(value)
            cursor = newline + 1
        body_start = newline + 1
        if not problem and length is None:
            problem = "a header block without a Content-Length header"
        if problem:
            frames.append(Frame("invalid", mode="framed", size=-1, reason=problem))
            self._resync = True  # its body, if any, is skipped
            return body_start, True
        if length > self.max_bytes:
            frames.append(Frame("oversized", mode="framed", size=length))
            self._skip_bytes = length
            return body_start, True
        after = body_start + length
        if end < after:
            return self._pending(buffer, pos, body_start, end, length, frames)
        self._looked = 0
        whole = buffer[after - 1] == 0x7D or _looks_whole(buffer, body_start, after)  # '}'
        if not whole or buffer.find(b"\n", body_start, after) >= 0:  # compact JSON has none
            overrun = self._overrun(buffer, body_start, after, length, frames)
            if overrun:
                return overrun
        if not whole:
            return self._check_length(buffer, body_start, after, end, length, frames)
        frames.append(Frame("message", bytes(buffer[body_start:after]), "framed", length))
        return after, True

    def _pending(self, buffer, pos, body_start, end, length, frames) -> tuple[int, bool]:
        """A body still arriving: refused at once if what has come already overruns a message
        (_overrun), rather than swallowing later messages until `length` bytes arrive."""
        reach = min(end, body_start + _PENDING_CHECK)
        if reach - body_start == self._looked:
            return pos, False  # nothing new within reach
        self._looked = reach - body_start
        return self._overrun(buffer, body_start, reach, length, frames) or (pos, False)

    def _overrun(self, buffer, body_start, stop, length, frames) -> tuple[int, bool] | None:
        """A whole message followed by more (the next frame or line) within the body: the
        length is too long. Refuses it and resumes after that message; else None."""
        head = bytes(buffer[body_start : min(stop, body_start + _PENDING_CHECK)])
        whole = _json_value_end(head)
        if whole < 0 or not head[whole:].strip():
            return None
        self._looked = 0
        reason = f"Content-Length {length} is longer than the message it holds"
        frames.append(Frame("invalid", mode="framed", size=length, reason=reason))
        return body_start + whole, True

    def _check_length(self, buffer, body_start, after, end, length, frames) -> tuple[int, bool]:
        """A body that does not end like an object: the length may be wrong; find out which."""
        body = bytes(buffer[body_start:after])
        if decode_message(body)[1] is None:  # a JSON scalar, refused later as a message
            frames.append(Frame("message", body, "framed", length))
            return after, True
        header = _find_header(buffer, body_start, after)
        if header >= 0:
            reason = f"Content-Length {length} is longer than the message before the next header"
            frames.append(Frame("invalid", mode="framed", size=length, reason=reason))
            return header, True
        if after == end or buffer[after] in b" \t\r\n\xef" or _header_next(buffer, after, end):
            frames.append(Frame("message", body, "framed", length))  # not JSON: a parse error
            if after < end:
                return after, True
            # Nothing follows yet: if the rest of the body does, it must not glue onto the next
            # frame, so the body is looked at again (silently) as the rest of a refused frame.
            self._resync = True
            return body_start, True
        reason = f"Content-Length {length} is shorter than the message"
        frames.append(Frame("invalid", mode="framed", size=length, reason=reason))
        self._resync = True
        return body_start, True

    def _garbage(self, buffer, pos: int, end: int, frames: list) -> tuple[int, bool]:
        """Bytes that are neither a header nor a JSON line: up to the next header or line."""
        header = _find_header(buffer, pos + 1, end)
        newline = buffer.find(b"\n", pos, header if header >= 0 else end)
        if newline < 0 and header < 0:
            frames.append(Frame("garbage", bytes(buffer[pos : pos + 200])))
            self._resync = True
            return max(pos + 1, end - _RESYNC_TAIL), True
        stop = header if newline < 0 else newline + 1
        text = bytes(buffer[pos:stop])
        if text[:1] in _SCALAR_START and newline >= 0 and _is_json(text):
            frames.append(Frame("message", text.rstrip(), "line"))  # 42, "hi", null: refused later
        else:
            frames.append(Frame("garbage", text[:200]))
        return stop, True


def _quote(value: bytes) -> str:
    return json.dumps(value[:40].decode("utf-8", "replace"))


def _is_json(text: bytes) -> bool:
    return decode_message(text)[1] is None


# -- Writers: whole messages onto a pipe, or onto an HTTP event stream --------------------------


class StdioWriter:
    """Owns stdout: whole messages only, written one batch at a time under a lock.

    Answers in the framing the client uses: newline-delimited JSON once a line message is
    understood (or when the first thing the client sends is a line), else Content-Length.
    """

    def __init__(self, fd: int, line_mode: bool, on_closed, log: Log | None = None):
        self.line_mode = line_mode
        self._fd = fd
        self._lock = threading.Lock()
        self._closed = False
        self._on_closed = on_closed
        self._log = log
        self.settled = False  # a message has been understood: its framing is the client's

    def follow(self, mode: str, understood: bool) -> None:
        """Notes the framing of a message just read; a garbled line only counts at first."""
        if mode == "line" and (understood or not self.settled):
            self.line_mode = True
        if understood:
            self.settled = True

    def frame(self, message: dict) -> bytes:
        body = encode_message(message)
        if self.line_mode:
            return body + b"\n"
        return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)

    def send(self, *messages: dict) -> None:
        chunks = [self.frame(message) for message in messages]
        if self._log is not None and self._log.debug_enabled:
            framing = "line" if self.line_mode else "content-length"
            for chunk in chunks:
                self._log.debug("stdio", f"send framing={framing} bytes={len(chunk)}")
        data = b"".join(chunks)
        with self._lock:
            if self._closed:
                return
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(self._fd, view) :]
            except OSError:
                self._closed = True
        if self._closed:
            self._on_closed()


class EventStream:
    """Server-sent events on an HTTP response whose headers have gone: chunked on HTTP/1.1,
    raw until the connection closes on HTTP/1.0."""

    def __init__(self, wfile, chunked: bool):
        self._wfile, self._chunked = wfile, chunked

    def write(self, data: bytes) -> None:
        self._wfile.write(b"%x\r\n%s\r\n" % (len(data), data) if self._chunked else data)

    def event(self, name: str, data: bytes) -> None:
        self.write(b"event: %s\ndata: %s\n\n" % (name.encode(), data))

    def end(self) -> None:
        if self._chunked:
            self._wfile.write(b"0\r\n\r\n")

    def pump(self, box, until_reply: bool, keepalive_s: float, peer_gone) -> bool:
        """Writes what arrives in `box` as events, with keep-alive comments while quiet, until
        _END or the reply (if until_reply), then ends the stream; False if the client hung up
        first (the stream is left unended)."""
        quiet_since = time.monotonic()
        while True:
            item = box.get(_POLL_S)
            if item is None:
                if peer_gone():
                    return False
                if time.monotonic() - quiet_since >= keepalive_s:
                    self.write(b": keep-alive\n\n")
                    quiet_since = time.monotonic()
                continue
            if item is _END:
                break
            self.event("message", item if isinstance(item, bytes) else encode_message(item))
            quiet_since = time.monotonic()
            if until_reply and is_reply(item):
                break
        self.end()
        return True


# -- stdio: one client on stdin/stdout ----------------------------------------------------------


def reader_gone(fd: int) -> bool:
    """Whether nobody reads `fd` any more: the other end of its pipe or socket has closed."""
    try:
        import select

        poller = select.poll()
    except (ImportError, AttributeError):  # Windows has no poll(): assume a reader
        return False
    poller.register(fd, select.POLLOUT)  # POLLERR and POLLHUP are reported whatever is asked
    try:
        events = poller.poll(0)
    except OSError:
        return False
    return any(event & (select.POLLERR | select.POLLHUP) for _, event in events)


class _Stop(Exception):
    """Raised in the main thread by a stop signal (see stop_signals)."""


def finish_calls(engine) -> None:
    """What a stopping server does last (stdio and HTTP alike): sends the server-side cancels,
    waits for the rows of requests still ending (a cancelled windowed run's row waits for its
    cancel's last look, which says what it was billed), then writes the ledger rows queued."""
    background = getattr(engine, "background", None)
    if background is not None:
        background.wait_for_cancels()  # os._exit() would drop server-side cancels
    if hasattr(engine, "wait_for_flights"):  # ... and the rows of requests still ending
        engine.wait_for_flights(NAMING_WAIT_S + 1)
    if hasattr(engine, "close"):
        engine.close()  # ... and the ledger rows still queued


def leave(engine) -> NoReturn:
    """Exits 0 once the server-side cancels are sent and the ledger rows written, without the
    interpreter's teardown: with the SDK loaded, that took over a second of a busy machine's
    time, past the second the README promises after a stop signal, and past the 2 s an SDK
    client waits after closing stdin before it sends SIGTERM."""
    finish_calls(engine)
    os._exit(0)


def stop_signals(signal) -> tuple:
    """The signals that ask a server to stop: SIGTERM and SIGINT, and on Windows SIGBREAK,
    which a service manager's CTRL_BREAK_EVENT raises (Windows never sends SIGTERM)."""
    extra = (signal.SIGBREAK,) if hasattr(signal, "SIGBREAK") else ()
    return (signal.SIGTERM, signal.SIGINT, *extra)


class StdioTransport(Transport):
    """One client on a pipe: frames in from `fd_in`, whole messages out through a StdioWriter
    on `fd_out`, one Session for the client's whole life."""

    def __init__(self, dispatcher: Dispatcher, config: Config, log: Log, fd_in: int, fd_out: int):
        self.dispatcher, self.log = dispatcher, log
        self.fd_in, self.fd_out = fd_in, fd_out
        self.max_bytes = config.get("server", "max_message_bytes")
        self.writer = StdioWriter(fd_out, config.get("server", "line_mode"), self.gone, log)
        self.session = Session(self.writer.send)
        self.session.local = True  # a path names the client's own disk (see Files)
        self.reader = FrameReader(self.max_bytes)
        self._holding_stops = self._stop_pending = False  # see _uninterrupted

    def gone(self) -> None:
        """stdout has closed: the client has gone, so nothing is left to answer."""
        self.end_calls()
        leave(self.dispatcher.engine)

    def end_calls(self) -> None:
        """The process leaves next: cancels the client's calls, and its tasks and handoffs,
        which no request holds (upstream too), then waits a moment for their workers to queue
        their ledger rows, as a call cancelled inline does. A cancel that waits for OpenAI to
        name its response (NAMING_WAIT_S) bounds the wait; a second signal cuts it short."""
        if self._uninterrupted(self.session.close):
            return  # a second signal came meanwhile: it cuts the wait short
        spare = 1 if getattr(_WORKER, "session", None) is self.session else 0
        try:
            self.session.wait_idle(NAMING_WAIT_S + 1, spare)
        except _Stop:
            pass

    def _on_stop(self, signum, frame) -> None:
        """A stop signal: _Stop in the main thread, or, inside _uninterrupted, a note of it."""
        if self._holding_stops:
            self._stop_pending = True
            return
        raise _Stop()

    def _uninterrupted(self, action) -> bool:
        """Runs action with stop signals held until it ends; whether one came meanwhile. A
        drop of tasks cut in half would be lost: a task marked cancelled whose call was not
        yet told is skipped by the next drop, so its response ran on upstream, unrecorded."""
        self._holding_stops, self._stop_pending = True, False
        try:
            action()
        finally:
            self._holding_stops = False
        return self._stop_pending

    def serve(self) -> int:
        import _signal as signal  # `signal` itself imports enum (~1 ms) for its IntEnums

        log, session, writer = self.log, self.session, self.writer
        for signum in stop_signals(signal):
            signal.signal(signum, self._on_stop)
        try:
            while True:
                data = os.read(self.fd_in, 1 << 16)
                if log.debug_enabled:
                    log.debug("stdio", f"stdin bytes={len(data)}")
                # At end of input, a newline completes a last line-mode message sent without one.
                replies = self.handle_frames(self.reader.feed(data or b"\n"))
                if replies:
                    writer.send(*replies)
                if not data:
                    break
            # Nobody can collect a task or a handoff now: they are cancelled, not awaited.
            if self._uninterrupted(session.stop_tasks):
                raise _Stop()
            session.end_asks()  # answers come on stdin: a question waiting now gets none
            log.debug("server", f"end of input; waiting for {session.in_flight()} call(s)")
            # A client that closed stdout as well has gone: its calls are cancelled, not awaited.
            while session.in_flight():
                if reader_gone(self.fd_out):
                    log.debug("server", "stdout closed too; in-flight calls cancelled")
                    self.gone()
                session.wait_idle(0.25)
            return 0
        except _Stop:
            self.end_calls()
            log.debug("server", "stopped by signal; in-flight calls, tasks and handoffs cancelled")
            return 0
        finally:
            # The process leaves next (leave()): a stop signal now, as an SDK client sends 2 s
            # after closing stdin, must not cut short the cancels and rows being written.
            for signum in stop_signals(signal):
                signal.signal(signum, signal.SIG_IGN)

    def handle_frames(self, frames: list) -> list[dict]:
        """The replies to one read's frames; a bug in handling one message never ends the
        session."""
        replies = []
        for frame in frames:
            try:
                reply = self.handle_frame(frame)
            except Exception as exc:  # noqa: BLE001 - one bad message must not end the session
                self.log.say(f"internal error handling a message: {type(exc).__name__}: {exc}")
                reply = rpc_error(
                    None, INTERNAL_ERROR, "Internal error; run with --debug and report it"
                )
            if reply is not None:
                replies.append(reply)
        return replies

    def handle_frame(self, frame: Frame) -> dict | None:
        log, writer = self.log, self.writer
        if log.debug_enabled and frame.mode == "framed" and frame.size >= 0:
            log.debug("stdio", f"frame header length={frame.size}")
        if frame.kind == "garbage":
            log.say(
                f"skipped {len(frame.body)} bytes that are not an MCP message: {frame.body[:60]!r}"
            )
            return None
        if frame.kind == "invalid":
            log.say(f"refused a message: {frame.reason}")
            return rpc_error(
                None,
                PARSE_ERROR,
                f"Parse error: {frame.reason}; that message was skipped, and reading goes on at "
                "the next one",
            )
        if frame.kind == "oversized":
            writer.follow(frame.mode, understood=False)
            return rpc_error(
                None,
                INVALID_REQUEST,
                f"Invalid Request: a message of {frame.size} bytes exceeds the {self.max_bytes}-"
                "byte limit (server.max_message_bytes); it was skipped",
            )
        message, error = decode_message(frame.body)
        if frame.mode == "line" or not writer.settled:
            writer.follow(frame.mode, error is None)
        if error is not None:
            return error
        if log.debug_enabled and isinstance(message, dict):
            log.debug("server", f"recv method={message.get('method')} ({frame.mode})")
        return self.dispatcher.handle(message, self.session)


def serve_stdio(dispatcher: Dispatcher, config: Config, log: Log) -> int:
    """Serves one client on stdin/stdout until end of input or a signal."""
    fd_in, fd_out = sys.stdin.fileno(), sys.stdout.fileno()
    if os.name == "nt":
        import msvcrt

        msvcrt.setmode(fd_in, os.O_BINARY)
        msvcrt.setmode(fd_out, os.O_BINARY)
    return StdioTransport(dispatcher, config, log, fd_in, fd_out).serve()


# -- HTTP: how --http is built; paths, outboxes, routes, sessions ------------------------------
# `--http` serves the same Dispatcher from one http.server.HTTPServer: a connection waits for
# its request in the Lobby (one selector thread for all of them) and gets a thread of its own
# while it has a request to read or answer (HttpServer). Streamable HTTP (MCP 2025-03-26 and
# later) is POST/DELETE on /mcp; the 2024-11-05 transport is GET /sse plus POST /messages.
# Results and progress leave worker threads through Session.send; a Router hands each to the
# response waiting for that request.
# Who does what: HttpHandler only reads requests and writes responses; HttpApp checks the
# token, routes, and holds the limits and the lifecycle; HostPolicy is the Host and Origin
# gates; StreamableHttp answers /mcp, LegacySse /sse and /messages, UsageReport /usage, each
# with the HttpHandler as its reader and writer; HttpSessions holds every client's session.
# Each is given what it needs when serve_http makes them; the engine comes built
# (build_engine), already told whether it serves several people.
# http.server and friends are imported only when --http is used.

MCP_PATH, SSE_PATH, MESSAGES_PATH, HEALTH_PATH = "/mcp", "/sse", "/messages", "/healthz"
USAGE_PATH = "/usage"
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
HTTP_REFUSED = -32000  # JSON-RPC error code of refusals made by the HTTP layer


MAX_JSON_VALUES = 50_000  # commas and brackets in one HTTP body; an MCP message needs far fewer
DEFAULT_HTTP_VERSION = MCP_2025_03_26  # what a request without MCP-Protocol-Version speaks
# --stateless: initialize's Mcp-Session-Id is a signed record of the client (identity_id):
# its kind is none of a task's, so it can never pass for a task id, and a record lasts 30 days.
IDENTITY_KIND, IDENTITY_TTL_MS = "c", 30 * 86_400_000
# Without server.tasks.secret the record is unsigned: "c1." and base64url JSON, its name at
# most IDENTITY_NAME_MAX characters (so the whole id at most IDENTITY_PLAIN_MAX).
IDENTITY_PLAIN, IDENTITY_NAME_MAX, IDENTITY_PLAIN_MAX = "c1.", 100, 1024
_END = object()  # an Outbox's "nothing more will come"
_POLL_S = 0.25  # how often a waiting response looks for a hung-up client
JSON_ONLY_ASKS = (
    "the client takes only application/json on this POST, so no request can reach it "
    "(Accept: application/json, text/event-stream lets the server ask)"
)


class HttpError(Exception):
    """A refusal: an HTTP status, one line saying what to do, and any extra headers."""

    def __init__(self, status: int, message: str, headers: dict | None = None):
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers or {}


class Outbox:
    """The messages one open response still has to write, in order; _END closes it."""

    def __init__(self):
        from collections import deque  # threading has imported it: free

        self._items = deque()  # popleft is O(1); a list's pop(0) moves everything behind it
        self._ready = threading.Condition()
        self.replied = False  # a reply (result or error) was taken, to be written now

    def put(self, item) -> None:
        with self._ready:
            self._items.append(item)
            self._ready.notify()

    def get(self, timeout: float):
        """The next item, or None if none came within `timeout` seconds."""
        with self._ready:
            if not self._ready.wait_for(lambda: self._items, timeout):
                return None
            item = self._items.popleft()
            if isinstance(item, dict) and is_reply(item):
                self.replied = True
            return self._taken(item)

    def _taken(self, item):
        return item


class StreamOutbox(Outbox):
    """A legacy /sse stream's outbox: everything its session sends, stored encoded so its size
    is known, up to `limit` bytes (server.http.sse_outbox_bytes).

    A client that opens /sse and never reads it must not make the server queue without end:
    past the limit its POSTs are refused (LegacySse.session) and progress notices are
    dropped (they are lossy by nature); replies of calls already admitted still queue, as
    max_calls_per_session bounds them. `stalled` tells the watchdog when to give up on it.
    """

    def __init__(self, limit: int):
        super().__init__()
        self.limit, self.bytes = limit, 0
        self._moved = time.monotonic()  # when the reader last took something, or work arrived

    def send(self, message: dict) -> None:
        """A Session's outlet: queues the message as an event's data."""
        data = encode_message(message)
        with self._ready:
            if self.bytes >= self.limit and not is_reply(message):
                return
            if not self._items:
                self._moved = time.monotonic()
            self._items.append(data)
            self.bytes += len(data)
            self._ready.notify()

    def _taken(self, item):
        if isinstance(item, bytes):
            self.bytes -= len(item)
        self._moved = time.monotonic()
        return item

    def full(self) -> bool:
        return self.bytes >= self.limit

    def stalled(self, after_s: float) -> bool:
        """Full, and nothing taken for `after_s` seconds: its client has stopped reading."""
        with self._ready:
            return self.full() and time.monotonic() - self._moved > after_s


class _Route:
    """Where a Router sends one request's messages: its Outbox, and the progress token its
    notices carry (None: it asked for none)."""

    __slots__ = ("box", "token")

    def __init__(self, box: Outbox, token):
        self.box, self.token = box, token


class Router:
    """A Streamable HTTP session's outlet: each result or progress notice goes to the POST
    waiting for it (results by request id, progress by progressToken).

    A message nobody waits for any more is dropped: a client that hangs up has not cancelled
    (seed 001 §6.1), so its call still runs to the end, but its answer has nowhere to go.
    """

    def __init__(self, log: Log):
        self._log = log
        self._boxes: dict = {}  # request id -> _Route
        self._tokens: dict = {}  # progress token -> request id
        self._asks: dict = {}  # id of a request to the client -> the call's that asks it
        self._lock = threading.Lock()

    def relate(self, ask_id: str, request_id) -> None:
        """Session.ask's request `ask_id` goes on the stream of the call `request_id`."""
        with self._lock:
            self._asks[ask_id] = request_id

    def open(self, request_id, token) -> Outbox | None:
        """A new Outbox for this request, or None if the id is already waited for.

        An id whose reply has been taken is free again: the client may read that reply and
        send its next request with the same id before the POST that wrote it closes its box
        (that close then leaves the new one alone)."""
        with self._lock:
            entry = self._boxes.get(request_id)
            if entry is not None:
                if not entry.box.replied:
                    return None
                if self._tokens.get(entry.token) == request_id:
                    del self._tokens[entry.token]
            box = Outbox()
            self._boxes[request_id] = _Route(box, token)
            if token is not None:
                self._tokens.setdefault(token, request_id)
            return box

    def close(self, request_id, box: Outbox) -> None:
        with self._lock:
            entry = self._boxes.get(request_id)
            if entry is None or entry.box is not box:
                return
            del self._boxes[request_id]
            if self._tokens.get(entry.token) == request_id:
                del self._tokens[entry.token]

    def end(self, request_id, code: int, message: str) -> None:
        """The call was cancelled: its response ends with this error (a request's POST always
        ends with a JSON-RPC response; if the result came first, the error is never read)."""
        with self._lock:
            entry = self._boxes.get(request_id)
        if entry is not None:
            entry.box.put(rpc_error(request_id, code, message))

    def end_all(self, code: int, message: str) -> None:
        with self._lock:
            waiting = list(self._boxes)
        for request_id in waiting:
            self.end(request_id, code, message)

    def waiting(self) -> int:
        with self._lock:
            return len(self._boxes)

    def send(self, message: dict) -> None:
        with self._lock:
            if "id" in message and "method" in message:  # a request to the client (Session.ask)
                request_id = self._asks.pop(message["id"], None)
            elif not is_reply(message):
                token = (message.get("params") or {}).get("progressToken")
                request_id = self._tokens.get(token)
            else:
                request_id = message.get("id")
            entry = self._boxes.get(request_id)
        if entry is None:
            self._log.debug("http", f"dropped a message for {_describe(request_id)}: client gone")
            return
        entry.box.put(message)


def task_owner(client: tuple) -> tuple:
    """Whose tasks a stateless request's are (their per-client limit): its client identity
    without the User-Agent, which a client may change at will to get a fresh quota. (The
    User-Agent still tells apart the calls a cancel could mean: HttpSessions.cancel_target.)"""
    return client[:3]


class HttpSession:
    """One client over HTTP: the dispatcher's Session and where its messages go.

    Streamable HTTP sessions route through a Router; a legacy SSE session sends everything down
    its one GET /sse stream. Stateless mode makes a throwaway one per POST (id None).
    """

    def __init__(
        self,
        session_id: str | None,
        log: Log,
        legacy: bool = False,
        outbox_bytes: int = MIB,
        hang_up=None,
    ):
        self.id = session_id
        self.legacy = legacy
        self.requests = 0  # requests being handled in it now (SessionTable.get/release)
        self.client = None  # stateless: who sent the POST (StreamableHttp.client_identity)
        self.call_id = None  # stateless: the id of the POST's request
        self.modern = False  # a 2026-07-28 request's own: closing its response cancels its call
        self.header_version = None  # that request's MCP-Protocol-Version header
        self.stream = StreamOutbox(outbox_bytes) if legacy else None
        self.router = None if legacy else Router(log)
        self.session = Session(self.stream.send if legacy else self.router.send)
        self.session.relate = None if legacy else self.router.relate
        self.hang_up = hang_up  # legacy: closes the /sse stream's connection (LegacySse.stream)
        self.session.client_key = session_id  # stateless: the client's identity, set later
        self.last_used = time.monotonic()

    def touch(self) -> None:
        self.last_used = time.monotonic()

    def busy(self) -> bool:
        """Whether the session is in use: a request or call in flight, a response waiting, or
        an /sse stream open and read (one whose outbox is full is not: it can be pushed out)."""
        waiting = self.router.waiting() if self.router else 0
        streaming = self.legacy and not self.stream.full()
        return streaming or self.requests > 0 or waiting > 0 or self.session.in_flight() > 0

    def end(self, code: int = REQUEST_CANCELLED, message: str = "Request cancelled") -> None:
        """Cancels the session's calls and drops its tasks; every response still waiting on one
        gets this error."""
        cancelled = self.session.close()
        if self.router is not None:
            self.router.end_all(code, message)
        else:
            for request_id in cancelled:
                self.stream.send(rpc_error(request_id, code, message))
            self.stream.put(_END)


class SessionTable:
    """Open sessions by id (secrets.token_urlsafe: unguessable), with a cap and idle expiry.

    At the cap, a new session pushes out the least recently used idle one: many clients
    (`claude mcp list`, the Inspector CLI) never send DELETE, and their abandoned sessions
    must not lock everyone out until they expire.
    """

    def __init__(self, limit: int, idle_s: int, log: Log, outbox: tuple[int, int] = (MIB, 30)):
        self._limit, self._idle_s, self._log = limit, idle_s, log
        self._outbox_bytes, self._stall_s = outbox  # server.http.sse_outbox_bytes, sse_stall_s
        self._sessions: dict[str, HttpSession] = {}
        self._lock = threading.Lock()

    def create(self, legacy: bool = False, hang_up=None) -> HttpSession:
        """A new session; `hang_up` closes a legacy one's /sse connection."""
        import secrets

        with self._lock:
            evicted = self._evict_one() if len(self._sessions) >= self._limit else None
            session_id, outbox = secrets.token_urlsafe(32), self._outbox_bytes
            hs = HttpSession(session_id, self._log, legacy, outbox, hang_up)
            hs.requests = 1  # its initialize (or GET /sse) is being handled
            self._sessions[hs.id] = hs
        if evicted is not None:  # ended outside the lock: its calls are cancelled upstream
            evicted.end()
            if evicted.hang_up is not None:  # a full, unread /sse stream: its connection too
                evicted.hang_up()
        return hs

    def _evict_one(self) -> HttpSession:
        """Takes out the least recently used idle session, for the caller to end (call with the
        lock held); 429 if every session has a call in flight, a response waiting or an SSE
        stream open and read."""
        idle = [hs for hs in self._sessions.values() if not hs.busy()]
        if not idle:
            raise HttpError(
                429,
                f"too many open sessions ({self._limit}, server.http.max_sessions), each with "
                "a call or stream in progress; retry when one finishes, or raise the limit",
                {"Retry-After": "5"},
            )
        oldest = min(idle, key=lambda hs: hs.last_used)
        del self._sessions[oldest.id]
        idle_s = round(time.monotonic() - oldest.last_used)
        self._log.debug(
            "http",
            f"session idle for {idle_s} s ended to make room (server.http.max_sessions "
            f"{self._limit} reached)",
        )
        return oldest

    def get(self, session_id: str, legacy: bool = False) -> HttpSession:
        """The session, held until release(): it cannot be pushed out while in use."""
        with self._lock:
            hs = self._sessions.get(session_id)
            if hs is not None and hs.legacy == legacy:
                hs.requests += 1
        if hs is None or hs.legacy != legacy:
            raise self.not_found()
        hs.touch()
        return hs

    @staticmethod
    def not_found() -> HttpError:
        return HttpError(
            404,
            "session not found: it ended (DELETE, idle for server.http.session_idle_s, "
            "pushed out by newer ones at server.http.max_sessions, or a server restart) or "
            "never existed; start a new one with initialize",
        )

    def release(self, hs: HttpSession) -> None:
        with self._lock:
            hs.requests -= 1

    def end(self, hs: HttpSession, code: int = REQUEST_CANCELLED, message="Request cancelled"):
        with self._lock:
            if self._sessions.get(hs.id) is hs:
                del self._sessions[hs.id]
        hs.end(code, message)

    def all(self) -> list[HttpSession]:
        with self._lock:
            return list(self._sessions.values())

    def expire_idle(self) -> None:
        now = time.monotonic()
        for hs in self.all():
            if hs.legacy and hs.stream.stalled(self._stall_s):
                self.end_stalled(hs)
            elif not hs.busy() and now - hs.last_used > self._idle_s:
                self._log.debug("http", f"session idle for {self._idle_s} s: ended")
                self.end(hs)

    def end_stalled(self, hs: HttpSession) -> None:
        """An /sse stream unread with its outbox full: the session ends and the stream's
        connection is closed (a writer blocked on it would otherwise wait for the socket's
        timeout, holding the outbox)."""
        self._log.say(
            f"a /sse stream went unread for {self._stall_s} s with {hs.stream.bytes} bytes "
            "waiting (server.http.sse_outbox_bytes, sse_stall_s): its session was ended"
        )
        self.end(hs)
        if hs.hang_up is not None:
            hs.hang_up()


def parse_listen(text: str) -> tuple[str, int]:
    """`[HOST:]PORT` (HOST may be [IPv6]) as (host, port); raises ValueError."""
    host, _, port = text.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    if not port.isdigit() or int(port) > 65535:
        raise ValueError(text)
    return host, int(port)


# -- Client addresses: trusted proxies, where a request comes from -----------------------------


def _ip(text: str):
    """An IP address from a header or a peer, or None: brackets, a zone and a port dropped
    (proxies that write "192.0.2.7:4711" or "[2001:db8::7]:4711" in X-Forwarded-For would
    otherwise put every client behind them on the proxy's one allowance), and an IPv4-mapped
    IPv6 one as the IPv4 it is (a dual-stack listener sees 127.0.0.1 as ::ffff:127.0.0.1)."""
    import ipaddress

    text = text.strip()
    if text.startswith("[") and "]" in text:
        text = text[1 : text.index("]")]
    elif text.count(":") == 1:  # IPv4 and a port (a bare IPv6 address has two or more)
        text = text.partition(":")[0]
    try:
        address = ipaddress.ip_address(text.partition("%")[0])
    except ValueError:
        return None
    return getattr(address, "ipv4_mapped", None) or address


def trusted_networks(entries: list) -> list:
    """server.http.trusted_proxies as networks; ConfigError naming the key for a bad entry."""
    import ipaddress

    networks = []
    for entry in entries:
        try:
            network = ipaddress.ip_network(str(entry).strip(), strict=False)
            mapped = getattr(network.network_address, "ipv4_mapped", None)
            if mapped is not None and network.prefixlen >= 96:  # as _ip() reads a peer
                network = ipaddress.ip_network(f"{mapped}/{network.prefixlen - 96}")
            networks.append(network)
        except ValueError:
            raise ConfigError(
                f"server.http.trusted_proxies: {str(entry)[:60]!r} is not an address or a "
                "CIDR range (like 127.0.0.1 or 10.0.0.0/8)"
            ) from None
    return networks


# The narrowest range trusted_proxies may list without a warning, per IP version: wider is no
# one's proxies (a whole registry's block, or everything: 0.0.0.0/0, ::/0).
TRUSTED_WIDEST_PREFIX = {4: 8, 6: 16}
# The ranges wider than that which hold no public address (reserved, unique local, link-local).
# Named here, not asked of ipaddress: on Python 3.10 (3.10.13 seen) a network's is_private is
# its first and last addresses', so 0.0.0.0/0 is "private" (CPython issue 82836), unwarned.
TRUSTED_NOT_PUBLIC = ("240.0.0.0/4", "fc00::/7", "fe80::/10")
# IPv6 ranges that hold the IPv4 internet, each address embedded at a bit offset: 6to4's
# 2002:AABB:CCDD::/48 (offset 16), NAT64's 64:ff9b::A.B.C.D (offset 96, the address a
# stateless translator gives every IPv4 client). Listed, they are judged as the IPv4 range held.
TRUSTED_EMBEDDING_IPV4 = (("2002::/16", 16), ("64:ff9b::/96", 96))


def _as_ipv4(network):
    """The IPv4 range a 6to4 or NAT64 range holds (TRUSTED_EMBEDDING_IPV4), all of it for one
    holding such a prefix (64:ff9b::/64), else the network."""
    import ipaddress

    for prefix, offset in TRUSTED_EMBEDDING_IPV4:
        outer = ipaddress.ip_network(prefix)
        if network.version == 6 and outer.subnet_of(network):
            return ipaddress.ip_network("0.0.0.0/0")
        if network.version == 6 and network.subnet_of(outer):
            bits = int(network.network_address) >> (128 - offset - 32) & 0xFFFFFFFF
            length = min(network.prefixlen - offset, 32)
            return ipaddress.ip_network(f"{ipaddress.IPv4Address(bits)}/{length}", strict=False)
    return network


def too_wide(networks: list) -> list:
    """The networks of trusted_proxies (trusted_networks) wider than any operator's proxies,
    public addresses among them: every client there may write X-Forwarded-For, and so spend
    another address's allowance, or a fresh one each request. Private ranges are left be."""
    import ipaddress

    not_public = [ipaddress.ip_network(text) for text in TRUSTED_NOT_PUBLIC]
    wide = []
    for network in networks:
        held = _as_ipv4(network)
        if held.prefixlen < TRUSTED_WIDEST_PREFIX[held.version] and not any(
            held.version == other.version and held.subnet_of(other) for other in not_public
        ):
            wide.append(network)
    return wide


def too_wide_warning(networks: list) -> str:
    """The one line that names them (too_wide), and what to do; "" when there are none."""
    wide = too_wide(networks)
    if not wide:
        return ""
    named = ", ".join(str(network) for network in wide[:3])
    more = f" (and {len(wide) - 3} more)" if len(wide) > 3 else ""
    return (
        f"server.http.trusted_proxies lists {named}{more}, which holds public addresses: any "
        "client there can write X-Forwarded-For and spend another address's allowance, or a new "
        "one each request; list only your proxies' addresses"
    )


def client_source(peer: str, forwarded: str, trusted: list) -> str:
    """Whose allowance a request spends (issue 39): the peer's address, an IPv6 one by its
    /64 (what one host is given whole). From a proxy in `trusted` (trusted_networks), the
    address nearest the end of X-Forwarded-For that is not itself a trusted proxy: what the
    proxy saw. Without one, X-Forwarded-For counts for nothing: anyone can write it."""
    address = _ip(peer)
    if address is not None and forwarded and any(address in net for net in trusted):
        for hop in reversed(forwarded.split(",")):
            seen = _ip(hop)
            if seen is None:
                break  # what the proxy wrote is a name or garbage: the nearest good one counts
            address = seen
            if not any(seen in net for net in trusted):
                break
    if address is None:
        return peer[:64]
    mapped = getattr(address, "ipv4_mapped", None)
    if address.version == 6 and mapped is None:
        import ipaddress

        return str(ipaddress.ip_network(f"{address}/64", strict=False))
    return str(mapped or address)


class ClientSources:
    """Each request's client_source, by server.http.trusted_proxies; says once on stderr
    when a proxy on this host passes X-Forwarded-For unheeded (with introspection's
    allowance at stake: its clients then share one)."""

    def __init__(self, trusted: list, log: Log, oauth: bool):
        self.trusted, self.log = trusted_networks(trusted), log
        self._say = oauth and not self.trusted
        wide = too_wide_warning(self.trusted)
        if wide:  # said once, at start: the limits of issue 39 are at the mercy of any client
            log.say(f"warning: {wide}")

    def of(self, peer: str, forwarded: list | None) -> str:
        forwarded = ", ".join(forwarded or ())
        if forwarded and self._say:
            address = _ip(peer)
            if address is not None and address.is_loopback:
                self._say = False
                self.log.say(
                    f"warning: requests from {peer} carry X-Forwarded-For, which is ignored "
                    "until server.http.trusted_proxies lists that proxy: every client behind "
                    "it shares one introspection allowance"
                )
        return client_source(peer, forwarded, self.trusted)


def _host_name(value: str) -> str:
    """The name in a Host header or an origin's authority, lower-cased, without the port.
    Anything else after the name ("[::1].evil.com", "localhost:evil") keeps the value whole,
    which matches no name: the gates compare whole names, never a prefix."""
    value = value.strip().lower()
    if value.startswith("["):
        name, close, port = value[1:].partition("]")
        return name if close and _is_port(port) else value
    if value.count(":") == 1:
        name, colon, port = value.partition(":")
        return name if _is_port(colon + port) else value
    return value


def _is_port(text: str) -> bool:
    """Nothing, or ":" and a number."""
    return text == "" or (text[0] == ":" and text[1:].isascii() and text[1:].isdigit())


# -- OAuth: a resource server (server.auth.issuer); the issuer's keys --------------------------
# MCP's authorization spec makes a remote server an OAuth 2.1 resource server: it publishes
# RFC 9728 metadata naming its authorization server, answers 401 with a pointer to it, and checks
# the JWT access tokens that server issues against the keys it publishes (JWKS). PyJWT (the
# [oauth] extra) does the cryptography; this code decides which keys and claims count.

WELL_KNOWN_RESOURCE = "/.well-known/oauth-protected-resource"
# Asymmetric signatures only: `none` proves nothing, and an HMAC "signed" with the issuer's
# public key (which anyone can fetch) is the classic forgery.
JWT_ALGORITHMS = {
    "RS256": "RSA", "RS384": "RSA", "RS512": "RSA", "PS256": "RSA", "PS384": "RSA",
    "PS512": "RSA", "ES256": "EC", "ES384": "EC", "ES512": "EC", "EdDSA": "OKP",
}  # fmt: skip
JWT_LEEWAY_S = 60  # clock skew allowed on exp, nbf and iat
JWKS_REFETCH_S = 10  # an unknown kid fetches the keys again at most this often
JWKS_FETCHED_LATELY = "fetched moments ago"  # IssuerKeys.refresh, within JWKS_REFETCH_S
ISSUER_RETRY_MAX_S = 10  # an unreachable issuer is tried again at most this far apart
FETCH_TIMEOUT_S = 5
FETCH_MAX_BYTES = 1024 * 1024
INTROSPECTION_CACHE_S = 60  # an active opaque token is asked about again after this long
INTROSPECTION_CACHE_SIZE = 10_000
INTROSPECTION_REFUSED_S = 30  # a token the issuer called inactive is not asked about again
INTROSPECTION_CONCURRENCY = 4  # introspection calls at once, at most
# Each source (a client's address; see client_source) has its own allowance: INTROSPECTION_BURST
# calls in a row, then INTROSPECTION_PER_S a second. A call whose token proves active is given
# back, so only junk spends it: a flood from one source never starves another (issue 39).
INTROSPECTION_BURST = 20
INTROSPECTION_PER_S = 5.0
INTROSPECTION_SOURCES = 4096  # sources whose allowance is remembered, at most (memory bound)
# Unknown tokens of one source asked about (or waiting to be) at once, at most: the rest get 503
# at once, so one source never holds every introspection slot, nor connections busy waiting.
INTROSPECTION_SOURCE_AT_ONCE = 2
INTROSPECTION_GOOD_S = 3600.0  # a token that introspected active skips the allowance this long
INTROSPECTION_FAILURE_SAID_S = 10.0  # the endpoint's failures go to stderr once this often


class TokenRefused(HttpError):
    """A bearer token the resource server does not accept: 401 (invalid_token), 403
    (insufficient_scope) or 503 (the issuer's keys are not known yet), with the
    WWW-Authenticate challenge that tells the client what to do. Never holds the token."""

    def __init__(self, status: int, message: str, challenge: str, retry: bool = False):
        headers = {"WWW-Authenticate": challenge, **({"Retry-After": "5"} if retry else {})}
        super().__init__(status, message, headers)
        self.challenge = challenge


def fetch_json(url: str) -> dict:
    """GET a JSON object over http(s) with a timeout and a size bound; OSError or ValueError."""
    import urllib.request

    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    with urllib.request.urlopen(request, timeout=FETCH_TIMEOUT_S) as response:
        body = response.read(FETCH_MAX_BYTES + 1)
    if len(body) > FETCH_MAX_BYTES:
        raise ValueError(f"more than {FETCH_MAX_BYTES} bytes")
    document = json.loads(body)
    if not isinstance(document, dict):
        raise ValueError("not a JSON object")
    return document


def issuer_metadata_urls(issuer: str) -> list[str]:
    """Where an issuer's metadata may be: RFC 8414 (the well-known name inserted before the
    issuer's path), then OpenID Connect discovery (appended), then OIDC's form of RFC 8414."""
    scheme, _, rest = issuer.rstrip("/").partition("://")
    authority, _, path = rest.partition("/")
    path = f"/{path}" if path else ""
    origin = f"{scheme}://{authority}"
    return [
        f"{origin}/.well-known/oauth-authorization-server{path}",
        f"{origin}{path}/.well-known/openid-configuration",
        f"{origin}/.well-known/openid-configuration{path}",
    ]


class IssuerKeys:
    """The issuer's signing keys (JWKS), found through its metadata and cached by kid.

    Fetched in the background from start-up until they are known (an issuer that is down
    is retried; meanwhile every token is refused); an unknown kid fetches them again, at most
    every JWKS_REFETCH_S, so the issuer can rotate keys without a restart."""

    def __init__(self, issuer: str, log: Log):
        self.issuer, self.log = issuer, log
        self.jwks_uri: str | None = None
        self.keys: list | None = None  # the JWKS's signing keys (dicts); None until fetched
        self._fetched = -1e9  # monotonic time of the last JWKS fetch attempt
        self._lock = threading.Lock()
        self.ready = threading.Event()

    def start(self) -> None:
        threading.Thread(target=self._until_known, name="oauth-keys", daemon=True).start()

    def _until_known(self) -> None:
        delay, warned = 1.0, False
        while True:
            problem = self.refresh()
            if problem is None:
                if warned:
                    self.log.say(f"oauth: the issuer's keys are known now ({self.issuer})")
                return
            if not warned:
                self.log.say(
                    f"warning: oauth: cannot get the signing keys of {self.issuer} ({problem}); "
                    "every token is refused until they are known, retrying in the background"
                )
                warned = True
            else:
                self.log.debug("oauth", f"issuer still unreachable: {problem}")
            time.sleep(delay)
            delay = min(delay * 2, ISSUER_RETRY_MAX_S)

    def refresh(self, min_age: float = 0.0) -> str | None:
        """Fetches the metadata (once) and the JWKS, unless they were fetched less than
        `min_age` seconds ago; None, or what went wrong."""
        with self._lock:
            if time.monotonic() - self._fetched < min_age:
                return JWKS_FETCHED_LATELY
            self._fetched = time.monotonic()
            try:
                if self.jwks_uri is None:
                    self.jwks_uri = self._discover()
                listed = fetch_json(self.jwks_uri).get("keys")
                if not isinstance(listed, list):
                    raise ValueError(f"{self.jwks_uri} holds no list of keys")
                keys = [
                    key
                    for key in listed
                    if isinstance(key, dict) and key.get("use", "sig") == "sig"
                ]
            except (OSError, ValueError) as exc:
                return f"{type(exc).__name__}: {str(exc)[:200]}"
            self.keys = keys
            self.ready.set()
            self.log.debug("oauth", f"{len(keys)} signing key(s) from {self.jwks_uri}")
            return None

    def _discover(self) -> str:
        problems = []
        for url in issuer_metadata_urls(self.issuer):
            try:
                metadata = fetch_json(url)
            except (OSError, ValueError) as exc:
                problems.append(f"{url}: {type(exc).__name__}")
                continue
            if str(metadata.get("issuer", "")).rstrip("/") != self.issuer.rstrip("/"):
                raise ValueError(f"{url} names another issuer, {metadata.get('issuer')!r}")
            jwks_uri = metadata.get("jwks_uri")
            if not isinstance(jwks_uri, str) or not jwks_uri.startswith(("https://", "http://")):
                raise ValueError(f"{url} has no jwks_uri")
            return jwks_uri
        raise OSError("no authorization server metadata: " + "; ".join(problems))

    def key_for(self, kid: str | None, family: str) -> tuple:
        """(the JWK for a token's kid, or None; without kid: the issuer's only key of that
        family, whether the keys looked in are current). An unknown kid fetches the JWKS
        again, at most every JWKS_REFETCH_S: within that, the keys are not current (anyone's
        token with an unknown kid, junk too, may have spent the fetch), and the kid may be
        one the issuer has published since."""
        found = self._lookup(kid, family)
        if found is not None or self.keys is None:
            return found, True
        problem = self.refresh(JWKS_REFETCH_S)
        if problem == JWKS_FETCHED_LATELY:
            return None, False
        return (self._lookup(kid, family) if problem is None else None), True

    def _lookup(self, kid: str | None, family: str) -> dict | None:
        same = [key for key in self.keys or () if key.get("kty") == family]
        if kid is not None:
            return next((key for key in same if key.get("kid") == kid), None)
        return same[0] if len(same) == 1 else None


class IntrospectionBusy(Exception):
    """Too many introspection calls at once, or from one source in a short while: the
    request gets 503."""


# -- Introspection: opaque tokens, and what each source may spend ------------------------------


def introspected_exp(answer: dict) -> float | None:
    """An introspection answer's `exp` as a number, or None for none. RFC 7662 makes it an
    optional NumericDate: null, or a value that is no date (a word, a list), is read as no
    expiry of the issuer's (our cache's bound still holds); a number in a string is read."""
    exp = answer.get("exp")
    if isinstance(exp, str):
        try:
            exp = float(exp.strip())
        except ValueError:
            return None
    return float(exp) if _is_number(exp) else None


class SourceAllowances:
    """A token bucket per source (burst, then `per_s` a second), in at most `size` entries:
    a source whose bucket has refilled is forgotten first, then the one least recently seen,
    so a spray of sources cannot grow the table. Never one allowance for everyone."""

    def __init__(self, burst: int, per_s: float, size: int):
        from collections import OrderedDict

        self.burst, self.per_s, self.size = float(burst), per_s, size
        self._buckets: OrderedDict = OrderedDict()  # source -> [allowance, when filled]
        self._at_once: dict[str, int] = {}  # source -> its calls under way (none: absent)
        self._lock = threading.Lock()

    def take(self, source: str) -> bool:
        """Spends one of `source`'s allowance; False when it has none left."""
        with self._lock:
            bucket = self._bucket(source)
            if bucket[0] < 1:
                return False
            bucket[0] -= 1
            return True

    def enter(self, source: str, most: int) -> bool:
        """One more call of `source` under way, unless it has `most` already (False)."""
        with self._lock:
            if self._at_once.get(source, 0) >= most:
                return False
            self._at_once[source] = self._at_once.get(source, 0) + 1
            return True

    def leave(self, source: str) -> None:
        with self._lock:
            left = self._at_once.pop(source, 1) - 1
            if left > 0:
                self._at_once[source] = left

    def give_back(self, source: str) -> None:
        with self._lock:
            bucket = self._bucket(source)
            bucket[0] = min(self.burst, bucket[0] + 1)

    def __len__(self) -> int:
        return len(self._buckets)

    def _bucket(self, source: str) -> list:
        now = time.monotonic()
        bucket = self._buckets.get(source)
        if bucket is None:
            self._make_room(now)
            bucket = self._buckets[source] = [self.burst, now]
        bucket[0] = min(self.burst, bucket[0] + (now - bucket[1]) * self.per_s)
        bucket[1] = now
        self._buckets.move_to_end(source)
        return bucket

    def _make_room(self, now: float) -> None:
        if len(self._buckets) < self.size:
            return
        full = [
            source
            for source, (left, filled) in self._buckets.items()
            if left + (now - filled) * self.per_s >= self.burst
        ]
        for source in full:  # a full bucket is the same as none
            del self._buckets[source]
        while len(self._buckets) >= self.size:
            self._buckets.popitem(last=False)


class Introspection:
    """RFC 7662: asks the issuer whether an opaque access token is active, as this server's
    own client. Answers are kept by the token's hash, never the token: an active one for up
    to INTROSPECTION_CACHE_S, so a session's every request is not a round trip; a refusal for
    INTROSPECTION_REFUSED_S, so a client retrying a bad token does not ask again each time.
    At most INTROSPECTION_CONCURRENCY calls run at once, and each source (client_source) has
    an allowance of its own (SourceAllowances), given back when the token proves active: junk
    spends only its sender's, so a valid token from anyone else is never refused for it, and
    a token known good (active in the last INTROSPECTION_GOOD_S) is asked about again whatever
    its source's allowance (issue 39)."""

    def __init__(self, url: str, client_id: str, secret: str):
        import base64
        from urllib.parse import quote

        self.url = url
        pair = f"{quote(client_id, safe='')}:{quote(secret, safe='')}"  # RFC 6749 2.3.1
        self._basic = "Basic " + base64.b64encode(pair.encode()).decode()
        self._cache: dict[str, tuple[dict, float]] = {}  # hash -> (an active answer, until)
        # Refusals (and expired answers) apart: junk fills only this table, so a valid token's
        # answer is kept however many junk tokens were refused lately (issue 39).
        self._refused: dict[str, tuple[dict, float]] = {}
        self._good: dict[str, tuple] = {}  # hash of a token that was active -> (None, until)
        self._lock = threading.Lock()
        self._running = threading.BoundedSemaphore(INTROSPECTION_CONCURRENCY)
        # Tokens known good ask on slots of their own: a junk flood from many sources at once
        # can fill the shared ones (with a slow issuer), never these (issue 39).
        self._running_good = threading.BoundedSemaphore(INTROSPECTION_CONCURRENCY)
        self.sources = SourceAllowances(
            INTROSPECTION_BURST, INTROSPECTION_PER_S, INTROSPECTION_SOURCES
        )

    def claims(self, token: str, source: str = "") -> dict:
        """The introspection answer; OSError or ValueError if the endpoint fails,
        IntrospectionBusy past the bounds (`source`'s allowance, or the calls at once)."""
        digest = token_sha256(token)
        cached = self._cached(digest)
        if cached is not None:
            return cached
        if self._known_good(digest):  # a valid user's token, asked about again
            return self._ask_once(token, digest, self._running_good)
        if not self.sources.enter(source, INTROSPECTION_SOURCE_AT_ONCE):
            raise IntrospectionBusy("too many introspection calls from this client at once")
        try:
            if not self.sources.take(source):
                raise IntrospectionBusy("too many introspection calls from this client")
            # A call that fails is spent too: junk the issuer answers with an error (or slowly)
            # must not be free, or one client could have it asked without end (issue 39).
            answer = self._ask_once(token, digest)
        finally:
            self.sources.leave(source)
        if answer.get("active") is True:  # no junk: its allowance is given back
            self.sources.give_back(source)
        return answer

    def _ask_once(self, token: str, digest: str, slots=None) -> dict:
        slots = slots or self._running
        if not slots.acquire(timeout=FETCH_TIMEOUT_S):
            raise IntrospectionBusy("too many introspection calls at once")
        try:
            cached = self._cached(digest)  # another request may have asked while this waited
            if cached is not None:
                return cached
            answer = self._ask(token)
        finally:
            slots.release()
        self._keep(digest, answer)
        return answer

    def cached(self, token: str) -> bool:
        """Whether the issuer's answer about this token is at hand (asking nobody)."""
        return self._cached(token_sha256(token)) is not None

    def _cached(self, digest: str) -> dict | None:
        now = time.monotonic()
        with self._lock:
            for table in (self._cache, self._refused):
                cached = table.get(digest)
                if cached is not None and cached[1] > now:
                    return cached[0]
        return None

    def _known_good(self, digest: str) -> bool:
        with self._lock:
            return self._good.get(digest, (None, 0.0))[1] > time.monotonic()

    def _keep(self, digest: str, answer: dict) -> None:
        now = time.monotonic()
        left = -1.0  # seconds the token is good for; an inactive one is kept as refused
        if answer.get("active") is True:
            exp = introspected_exp(answer)
            left = INTROSPECTION_GOOD_S if exp is None else exp - time.time()
        # An expired one is kept as a refusal is (each use checks its exp again).
        until = now + (min(INTROSPECTION_CACHE_S, left) if left > 0 else INTROSPECTION_REFUSED_S)
        with self._lock:
            if left > 0:
                good = now + min(INTROSPECTION_GOOD_S, left)
                self._remember(self._good, digest, (None, good), now)
            else:  # revoked or expired since: it spends its source's allowance like junk
                self._good.pop(digest, None)
            kept, other = (self._cache, self._refused) if left > 0 else (self._refused, self._cache)
            other.pop(digest, None)
            self._remember(kept, digest, (answer, until), now)

    @staticmethod
    def _remember(table: dict, digest: str, value: tuple, now: float) -> None:
        """table[digest] = (what, until when), in at most INTROSPECTION_CACHE_SIZE entries
        (lapsed ones go first; past that, nothing new is kept)."""
        if len(table) >= INTROSPECTION_CACHE_SIZE:
            for key in [key for key, (_, until) in table.items() if until <= now]:
                del table[key]
        if len(table) < INTROSPECTION_CACHE_SIZE:
            table[digest] = value

    def _ask(self, token: str) -> dict:
        import urllib.parse
        import urllib.request

        body = urllib.parse.urlencode({"token": token, "token_type_hint": "access_token"})
        request = urllib.request.Request(
            self.url,
            data=body.encode(),
            headers={
                "Authorization": self._basic,
                "Content-Type": "application/x-www-form-urlencoded",
                "Accept": "application/json",
            },
        )
        with urllib.request.urlopen(request, timeout=FETCH_TIMEOUT_S) as response:
            data = response.read(FETCH_MAX_BYTES + 1)
        answer = json.loads(data) if len(data) <= FETCH_MAX_BYTES else None
        if not isinstance(answer, dict):
            raise ValueError("not a JSON object")
        return answer


INACTIVE = "the token is not active (not the issuer's, or revoked or expired there)"


# -- OAuthVerifier: a bearer token checked, as a JWT or introspected ---------------------------


class OAuthVerifier:
    """Checks bearer tokens for one resource: verify(token) -> the user, or TokenRefused."""

    def __init__(self, auth: dict, log: Log):
        self.issuer, self.log = auth["issuer"], log
        self.scopes: list[str] = list(auth["scopes"])
        self.user_claim: str = auth["user_claim"]
        self.audience: str | None = auth["audience"]
        self.resource = ""  # set by set_resource() once the URL clients use is known
        # Without server.public_url on a loopback address: each loopback Host a client may
        # use (lower-cased, with the port) -> the resource named to it (see for_host).
        self.loopback_resources: dict[str, str] = {}
        self.keys = IssuerKeys(self.issuer, log)
        self.introspection = None
        self._failure_said = -INTROSPECTION_FAILURE_SAID_S  # when stderr last heard of one
        if auth["introspection_url"]:
            url, client_id = auth["introspection_url"], auth["client_id"]
            self.introspection = Introspection(url, client_id, auth["client_secret"])

    def set_resource(self, public_url: str, loopback_port: int | None = None) -> None:
        """The resource clients are told of; with `loopback_port` (no server.public_url, a
        loopback address) also the one each loopback name reaches it by: a client that
        connected as localhost must be told http://localhost:PORT/mcp, or the MCP SDK
        refuses to sign in (the resource must match the URL it used)."""
        self.resource = public_url.rstrip("/") + MCP_PATH
        if loopback_port is None:
            return
        for name in ("localhost", "127.0.0.1", "[::1]"):
            url = f"http://{name}:{loopback_port}"
            self.loopback_resources[f"{name}:{loopback_port}"] = url + MCP_PATH
            if loopback_port == 80:  # the port a client leaves out of its Host
                self.loopback_resources[name] = url + MCP_PATH

    def for_host(self, host: str | None) -> OAuthVerifier:
        """This verifier as seen by a request with that Host header: its resource (in the
        metadata, the challenge, the audience a token must name) is the URL the client used
        when that is one of this server's loopback names and port, else the default. Any
        other Host, a lying one included, gets the default: a Host header never puts a name
        of its own choosing into the metadata."""
        resource = self.loopback_resources.get((host or "").strip().lower())
        if resource is None or resource == self.resource:
            return self
        import copy

        view = copy.copy(self)  # shares the keys, the introspection cache and the log
        view.resource = resource
        return view

    def metadata_url(self) -> str:
        """RFC 9728: the well-known name inserted between the resource's origin and path."""
        scheme, _, rest = self.resource.partition("://")
        authority, _, path = rest.partition("/")
        return f"{scheme}://{authority}{WELL_KNOWN_RESOURCE}/{path}"

    def metadata(self) -> dict:
        """The RFC 9728 protected resource metadata document."""
        document = {
            "resource": self.resource,
            "authorization_servers": [self.issuer],
            "bearer_methods_supported": ["header"],
            "resource_name": SERVER_NAME,
        }
        if self.scopes:
            document["scopes_supported"] = self.scopes
        return document

    def challenge(self, error: str | None = None, description: str = "") -> str:
        """The WWW-Authenticate value (ASCII, no quotes inside its quoted strings)."""
        parts = [f'resource_metadata="{self.metadata_url()}"']
        if self.scopes:
            parts.append(f'scope="{" ".join(self.scopes)}"')
        if error:
            parts.append(f'error="{error}"')
            if description:
                plain = description.encode("ascii", "replace").decode().replace('"', "'")
                parts.append(f'error_description="{plain.replace(chr(92), "/")}"')
        return "Bearer " + ", ".join(parts)

    def refuse(self, why: str, status: int = 401, error: str = "invalid_token") -> TokenRefused:
        self.log.debug("oauth", f"token refused ({status}): {why}")
        message = f"bearer token refused: {why}"
        if status == 503:
            return TokenRefused(503, message, self.challenge(), retry=True)
        return TokenRefused(status, message, self.challenge(error, why))

    def missing(self) -> TokenRefused:
        """No bearer token at all: the plain challenge that starts a client's sign-in."""
        return TokenRefused(
            401,
            "this server needs an OAuth access token: sign in with your MCP client (it finds "
            f"the authorization server through {self.metadata_url()})",
            self.challenge(),
        )

    def verify(self, token: str, introspect: bool = True, source: str = "") -> str:
        """The user an access token names, if its signature (or the issuer's introspection),
        issuer, times, audience and scopes are right. `introspect` False: an opaque token is
        one of this server's own (Authenticator.ours), never sent to the issuer, refused as
        an inactive one is. `source` (client_source) is whose introspection allowance a
        token not known yet spends."""
        if self.introspection is not None and token.count(".") != 2:
            if not introspect:
                raise self.refuse(INACTIVE)
            claims = self._introspected(token, source)
        else:
            claims = self._jwt_claims(token)
        self._check_scopes(claims)
        user = claims.get(self.user_claim)
        if isinstance(user, int) and not isinstance(user, bool):
            user = str(user)
        if not isinstance(user, str) or not user.strip():
            raise self.refuse(f"the token has no {self.user_claim} claim naming the user")
        if len(user) > OAUTH_SUBJECT_MAX or not user.isprintable():
            raise self.refuse(
                f"the token's {self.user_claim} claim is not a printable name of at most "
                f"{OAUTH_SUBJECT_MAX} characters"
            )
        # Its own namespace: sub=alice is not the named user alice, nor sub=shared `shared`.
        identity = Identity.oauth(self.issuer, user).key
        if len(identity) > IDENTITY_MAX:  # whole in every row, or its allowance leaks
            raise self.refuse(
                f"the issuer and {self.user_claim} name more than {IDENTITY_MAX} "
                "characters together"
            )
        return identity

    def _introspected(self, token: str, source: str = "") -> dict:
        """An opaque token's claims from the issuer's introspection endpoint (RFC 7662)."""
        try:
            claims = self.introspection.claims(token, source)
        except IntrospectionBusy as exc:
            raise self.refuse(f"{exc}; retry shortly", 503) from None
        except (OSError, ValueError) as exc:
            problem = f"{type(exc).__name__}: {str(exc)[:120]}"
            said = f"oauth: the introspection endpoint failed ({problem})"
            if time.monotonic() - self._failure_said >= INTROSPECTION_FAILURE_SAID_S:
                self._failure_said = time.monotonic()  # a stranger's junk never floods stderr
                self.log.say(said)
            else:
                self.log.debug("oauth", said)
            why = "the issuer's introspection endpoint failed; retry shortly"
            raise self.refuse(why, 503) from None
        if claims.get("active") is not True:
            raise self.refuse(INACTIVE)
        if "iss" in claims and str(claims["iss"]).rstrip("/") != self.issuer.rstrip("/"):
            raise self.refuse(f"the token was not issued by {self.issuer}")
        audience = claims.get("aud")
        audience = [audience] if isinstance(audience, str) else audience
        if not isinstance(audience, list) or not set(audience) & set(self.audiences()):
            raise self.refuse(
                f"the token is for another audience, not {self.audiences()[0]} "
                "(server.auth.audience)"
            )
        expires = introspected_exp(claims)
        if expires is not None and expires < time.time() - JWT_LEEWAY_S:
            raise self.refuse("the token has expired; sign in again")
        return claims

    def _jwt_claims(self, token: str) -> dict:
        """A JWT access token's claims, if its signature, issuer, times and audience hold."""
        import jwt

        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise self.refuse("not a JWT access token") from None
        algorithm, kid = header.get("alg"), header.get("kid")
        family = JWT_ALGORITHMS.get(algorithm) if isinstance(algorithm, str) else None
        if family is None:
            raise self.refuse(f"signature algorithm {str(algorithm)[:20]!r} is not accepted")
        if not self.keys.ready.is_set():
            raise self.refuse("the issuer's signing keys are not known yet; retry shortly", 503)
        jwk, current = self.keys.key_for(kid if isinstance(kid, str) else None, family)
        if jwk is None and not current:  # a 401 would send a valid token's client to sign in
            raise self.refuse("signed with a key not known yet; retry shortly", 503)
        if jwk is None or jwk.get("alg", algorithm) != algorithm:
            raise self.refuse("signed with a key the issuer does not publish")
        return self._decode(jwt, token, jwk, algorithm)

    def audiences(self) -> list[str]:
        base = (self.audience or self.resource).rstrip("/")
        return [base, base + "/"] if base else [self.audience or ""]

    def _decode(self, jwt, token: str, jwk: dict, algorithm: str) -> dict:
        issuers = [self.issuer.rstrip("/"), self.issuer.rstrip("/") + "/"]
        try:
            key = jwt.PyJWK(jwk, algorithm).key
            return jwt.decode(
                token,
                key,
                algorithms=[algorithm],
                audience=self.audiences(),
                issuer=issuers,
                leeway=JWT_LEEWAY_S,
                options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.ExpiredSignatureError:
            raise self.refuse("the token has expired; sign in again") from None
        except jwt.ImmatureSignatureError:
            raise self.refuse("the token is not valid yet (nbf/iat in the future)") from None
        except jwt.InvalidAudienceError:
            raise self.refuse(
                f"the token is for another audience, not {self.audiences()[0]} "
                "(server.auth.audience)"
            ) from None
        except jwt.InvalidIssuerError:
            raise self.refuse(f"the token was not issued by {self.issuer}") from None
        except jwt.MissingRequiredClaimError as exc:
            raise self.refuse(f"the token has no {exc.claim} claim") from None
        except jwt.InvalidSignatureError:
            raise self.refuse("the token's signature does not verify") from None
        except (jwt.PyJWTError, ValueError, TypeError) as exc:
            raise self.refuse(f"the token is malformed ({type(exc).__name__})") from None

    def _check_scopes(self, claims: dict) -> None:
        granted = claims.get("scope", claims.get("scp", ""))
        if isinstance(granted, str):
            granted = granted.split()
        granted = set(granted) if isinstance(granted, list) else set()
        lacking = [scope for scope in self.scopes if scope not in granted]
        if lacking:
            why = f"the token lacks the scope {' '.join(lacking)}"
            raise self.refuse(why, 403, "insufficient_scope")


# -- Identity: who is asking (Authenticator), and their session record -------------------------
# Every request over HTTP is someone's: Authenticator.authenticate turns its Authorization
# header into a user name, which HttpApp puts on the request's Session (Session.user); the
# Dispatcher copies it onto each Call (Call.user) and Task (Task.user), and the answer engine
# keys the ledger row, the budget, the cache and response ids by it. stdio is LOCAL_USER.


def near_token(given: str, token: str, edits: int = 2) -> bool:
    """Whether `given` is `token` mistyped: within `edits` insertions, deletions or changes,
    or holding it whole. Its time depends on the lengths only, never on where they differ."""
    if abs(len(given) - len(token)) > edits or len(token) > 96:  # a bound on the work
        return token in given
    row = list(range(len(token) + 1))
    for i in range(1, len(given) + 1):
        last, row[0] = row[0], i
        for j in range(1, len(token) + 1):
            here = min(row[j] + 1, row[j - 1] + 1, last + (given[i - 1] != token[j - 1]))
            last, row[j] = row[j], here
    return row[len(token)] <= edits


class Authenticator:
    """Who a request's bearer token is: the shared token (SHARED_USER), then a named user's
    token (--user add; UserDirectory, read again every few seconds so a revoked token is
    refused within seconds), then an OAuth access token (the `oauth` hook).

    A token of ours (a named token's shape, or the shared token mistyped) never goes to the
    OAuth hook, so never to an issuer's introspection endpoint (issue 31).

    The OAuth hook, when set, is an object with
      verify(token: str) -> str | None: the token's user, or None if it is not one of the
          issuer's valid tokens; it may raise HttpError itself (403 insufficient_scope);
      challenge(error: str | None) -> str: the WWW-Authenticate value of a 401 (error is
          "invalid_token" when a token was sent, else None).
    """

    def __init__(self, token: str | None, users=None, oauth=None):
        self.token = token
        self.users = users  # UserDirectory, or None when the state is off
        self.oauth = oauth  # the OAuth 2.1 resource server's verifier (server.auth.issuer)
        self._latched = False  # once a token is required, it always is (issue 31)

    def required(self) -> bool:
        """Whether every request must carry a valid token: a shared token, OAuth, or a state
        that has had a named user (even on 127.0.0.1, even once every one is revoked). Once
        true, true for the life of the process."""
        if self.token or self.oauth is not None or self._latched:
            return True
        if self.users is None or not self.users.exist():
            return False
        self._latched = self.users.had()  # a state never read is not latched on a guess
        return True

    def _guessed(self) -> bool:
        """Whether required() holds only on a guess: no shared token, no OAuth, never latched,
        and the users never read (a state that cannot be read counts as having users)."""
        if self.token or self.oauth is not None or self._latched or self.users is None:
            return False
        return not self.users.ever_read()

    def multi_user(self) -> bool:
        """Whether requests can come from more than one person: then ids, the cache and
        budgets are kept apart per user."""
        return self.oauth is not None or (self.users is not None and self.users.exist())

    def locked_out(self) -> bool:
        """Whether no credential can be valid: a token is required, yet there is no shared
        token, no OAuth, and every named user is revoked. Every request is then refused."""
        if self.token or self.oauth is not None or self.users is None:
            return False
        return self.required() and self.users.active() == 0

    def ours(self, given: str) -> bool:
        """Whether a token is shaped like one of ours: a named token's, or the shared token
        mistyped. Such a token is only ever checked here."""
        if self.users is not None and self.users.named_shaped(given):
            return True
        return bool(self.token) and near_token(given, self.token)

    def authenticate(self, authorization: str, host: str | None = None, source: str = "") -> str:
        """The user a request's Authorization header names; HttpError 401 (503 when named
        tokens cannot be checked) otherwise. The token itself is never logged or shown.
        `host` (the Host header) picks the OAuth resource the request is for; `source`
        (client_source) is whose introspection allowance an unknown opaque token spends."""
        import hmac

        oauth = self.oauth.for_host(host) if self.oauth is not None else None
        if not self.required():
            return LOCAL_USER
        scheme, _, given = authorization.partition(" ")
        given = given.strip() if scheme.lower() == "bearer" else ""
        if not given and self._guessed():
            # A token is asked for only because the users could not be read yet (a state
            # another process is still making, an outage): a 401 would send the client to
            # sign in for nothing; this is the state's to answer, and it will.
            raise HttpError(
                503,
                "cannot tell now whether this server needs a token: the state is unavailable; "
                "retry shortly",
                {"Retry-After": "2"},
            )
        unavailable = None
        if given:
            # Timing-safe on purpose, though no test can see it: `==` stops at the first byte
            # that differs, so how long a refusal takes tells a caller (on a LAN, or through a
            # proxy, over many tries) how much of its guess is right, a byte at a time.
            if self.token and hmac.compare_digest(
                given.encode("utf-8", "replace"), self.token.encode()
            ):
                return SHARED_USER
            if self.users is not None:
                try:
                    user = self.users.user_of(given)
                except StateUnavailable as exc:
                    user, unavailable = None, exc.reason
                if user is not None:
                    return user
            if oauth is not None and self._for_oauth(given, unavailable is not None):
                user = oauth.verify(given, introspect=not self.ours(given), source=source)
                if user is not None:
                    return user
        if unavailable is not None:
            raise HttpError(
                503,
                f"cannot check the token now: the state is unavailable ({unavailable}); "
                "retry shortly",
                {"Retry-After": "2"},
            )
        raise self.refusal(bool(given), oauth)

    def _for_oauth(self, given: str, unavailable: bool) -> bool:
        """Whether the OAuth verifier may check this token: while the state cannot be read,
        only a JWT or (with introspection) an opaque token not of our shape, so a named
        token gets 503, not the 401 that tells a client to sign in again. (Ours are checked
        without introspection, and refused just as the issuer's inactive ones are: the
        answer tells a guesser nothing about the shared token.)"""
        if not unavailable or given.count(".") == 2:
            return True
        if self.oauth.introspection is None or self.ours(given):
            return False
        # A named token from before the prefix is known only by its hash, which a process
        # that has never read the users does not have: such a token cannot be told from an
        # opaque one, so it waits (503) unless the issuer's answer is cached (issue 39).
        return self.users.ever_read() or self.oauth.introspection.cached(given)

    def refusal(self, given: bool, oauth=None) -> HttpError:
        error = "invalid_token" if given else None
        oauth = oauth or self.oauth
        if oauth is not None and not given:
            return oauth.missing()  # points the client at signing in
        if oauth is not None:
            challenge = oauth.challenge(error)
        else:
            challenge = f'Bearer realm="{SERVER_NAME}"' + (f', error="{error}"' if error else "")
        if self.locked_out():
            return HttpError(401, LOCKED_OUT, {"WWW-Authenticate": challenge})
        return HttpError(
            401,
            "missing or wrong bearer token: send 'Authorization: Bearer <token>' with the "
            "shared token (MCP_HTTP_TOKEN / server.http.token) or your own (--user add)",
            {"WWW-Authenticate": challenge},
        )


LOCKED_OUT = (
    "this server has no valid token: every named user is revoked and it has no shared token "
    "(MCP_HTTP_TOKEN) or OAuth issuer, so it refuses every request; its operator adds a user "
    "with --user add NAME"
)


def identity_id(secret: str | None, session: Session) -> str:
    """Under --stateless: initialize's Mcp-Session-Id, a record of the client's
    clientInfo.name and the version agreed, which the client sends back on every later
    request. No instance keeps a session, so this is how any of them knows a handshake-era
    client (Codex: its result size, 12,000 characters where Claude Code takes 50,000).

    With server.tasks.secret it is signed (its handoff ids are too); without one it is plain
    base64url JSON under IDENTITY_PLAIN: the name is only what the client said of itself in
    initialize, so a record it could forge tells no more than it could say anyway. Either
    way the name is cleaned (printable, one line, at most IDENTITY_NAME_MAX characters)."""
    fields = {"v": session.protocol_version, "w": _client_name_clean(session.client_name)}
    if secret:
        return mint_task_id(secret, {"k": IDENTITY_KIND, **fields}, IDENTITY_TTL_MS)
    plain = {name: value for name, value in fields.items() if value is not None}
    text = json.dumps(plain, separators=(",", ":"), ensure_ascii=False)  # 4 bytes a char at most
    return IDENTITY_PLAIN + _b64(text.encode("utf-8"))


def _client_name_clean(name) -> str | None:
    if not isinstance(name, str):
        return None
    name = "".join(ch for ch in name if ch.isprintable()).strip()[:IDENTITY_NAME_MAX]
    return name or None


def restore_identity(secret, session: Session, session_id: str | None, version, log: Log) -> None:
    """A stateless request's client, from the Mcp-Session-Id initialize gave it (identity_id):
    its name, and its version unless the MCP-Protocol-Version header says one. An id that is
    not such a record (altered, expired, another secret's, unsigned where a secret signs
    them, too long, not JSON) is ignored: the request is served as from an unknown client."""
    if not session_id:
        return
    session_id = session_id.strip()
    try:
        fields = _signed_identity(secret, session_id) if secret else _plain_identity(session_id)
    except (TaskIdError, ValueError) as exc:
        log.debug("http", f"Mcp-Session-Id ignored: {getattr(exc, 'reason', None) or exc}")
        return
    name = _client_name_clean(fields.get("w"))
    if name is not None:
        session.client_name = name
    if version is None and fields.get("v") in PROTOCOL_VERSIONS:
        session.protocol_version = fields["v"]


def _signed_identity(secret: str, session_id: str) -> dict:
    fields = open_task_id(secret, session_id)
    if fields.get("k") != IDENTITY_KIND:
        raise ValueError("not a client identity")
    return fields


def _plain_identity(session_id: str) -> dict:
    """The fields of an unsigned identity; ValueError if it is not one."""
    import base64

    if not session_id.startswith(IDENTITY_PLAIN) or len(session_id) > IDENTITY_PLAIN_MAX:
        raise ValueError("not an unsigned client identity of this server")
    body = session_id[len(IDENTITY_PLAIN) :]
    if not re.fullmatch(r"[A-Za-z0-9_-]*", body):
        raise ValueError("not base64url")
    try:
        fields = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    except (ValueError, RecursionError):
        raise ValueError("not base64url JSON") from None
    if not isinstance(fields, dict):
        raise ValueError("not a JSON object")
    return fields


def refuse_new_calls(stopping: bool, state, method: str) -> None:
    """HttpError 503 for a new call while the server stops, or (a tools/call) while its state
    (the engine's StateStore, None without one) refuses it (issue 39: a newer version
    upgraded it, or its upgrade needs the issuer): the call's row could not be written."""
    if stopping:
        raise HttpError(
            503,
            "the server is shutting down and takes no new calls; retry (another instance "
            "will answer)",
            {"Retry-After": "1"},
        )
    refused = state.refused() if state is not None else None
    if refused is not None and method == "tools/call":
        raise HttpError(
            503,
            f"this server cannot use {state.kind}: {refused.public}; retry later",
            {"Retry-After": "30"},
        )


# -- Gates and sessions: Host and Origin (HostPolicy), HttpSessions ----------------------------


class HostPolicy:
    """Who may reach the address --http serves: the names a request's Host may give (DNS
    rebinding protection), the pages whose Origin may call it (CORS), and the start-up
    refusals of that address (exit 2). HttpApp is given one; --doctor tries one."""

    def __init__(self, config: Config, host: str):
        import ipaddress
        import socket

        settings = config.get("server", "http")
        self.settings, self.host = settings, host
        self.public_url = config.get("server", "public_url")
        try:
            info = socket.getaddrinfo(host, 0, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        except socket.gaierror as exc:
            raise ConfigError(f"--http: cannot resolve {host!r}: {exc.strerror}") from None
        info.sort(key=lambda entry: entry[0] != socket.AF_INET)  # "localhost": prefer IPv4
        self.family, address = info[0][0], info[0][4][0]
        ip = ipaddress.ip_address(address.partition("%")[0])
        self.loopback, wildcard = ip.is_loopback, ip.is_unspecified
        self.wildcard = wildcard
        hosts = [_host_name(name) for name in settings["allowed_hosts"]]  # ports do not matter
        self.hosts = LOOPBACK_NAMES | set(hosts) | ({host.lower(), address} - {"0.0.0.0", "::"})
        self.any_host = "*" in hosts or (wildcard and not hosts)
        self.origins = {o.lower().rstrip("/") for o in settings["allowed_origins"]}
        if self.public_url:  # the name a proxy in front passes on
            self.hosts |= {_host_name(self.public_url.partition("://")[2].partition("/")[0])}

    def refuse_open(self, auth: Authenticator) -> None:
        """Start-up refusals (exit 2): a weak token, an open address without a token, an
        origin that is not one, OAuth on an open address without server.public_url."""
        token = self.settings["token"]
        if token is not None and not re.fullmatch(r"[!-~]{16,}", token):
            raise ConfigError(
                "server.http.token must be at least 16 printable ASCII characters, no spaces; "
                "make one with: python3 -c 'import secrets; print(secrets.token_urlsafe(32))'"
            )
        if not self.loopback and not auth.required() and not self.settings["allow_insecure"]:
            raise ConfigError(
                f"refusing to serve on {self.host} without a token: anyone who can reach it "
                "could spend your OpenAI credit. Set MCP_HTTP_TOKEN (or server.http.token), or "
                "pass --http-allow-insecure if an authenticating proxy is in front"
            )
        for origin in self.origins - {"*"}:
            if not re.fullmatch(r"https?://[^/\s]+", origin):
                raise ConfigError(
                    f"server.http.allowed_origins: {origin!r} is not an origin like "
                    "https://app.example.com (scheme://host[:port], no path)"
                )
        if auth.oauth is not None and not self.loopback and not self.public_url:
            where = " (every address)" if self.wildcard else ""
            raise ConfigError(
                f"server.public_url must be set with server.auth.issuer when --http listens on "
                f"{self.host}{where}, not a loopback address: OAuth tokens name the URL clients "
                "use, like https://mcp.example.com"
            )

    def check_host(self, host: str | None) -> None:
        """DNS rebinding protection: the Host must be a name this server is known by."""
        if host is None or self.any_host or _host_name(host) in self.hosts:
            return
        raise HttpError(
            421,
            f"Host {host!r} is not a name of this server (DNS rebinding protection); add it to "
            "server.http.allowed_hosts if clients really use it",
        )

    def origin_allowed(self, origin: str) -> bool:
        origin = origin.strip().lower()
        if "*" in self.origins or origin in self.origins:
            return True
        scheme, sep, authority = origin.partition("://")
        return bool(sep) and scheme in ("http", "https") and _host_name(authority) in LOOPBACK_NAMES

    def cors_headers(self, origin: str | None) -> dict:
        """The headers an answer to a page from `origin` carries; 403 if it is not allowed."""
        if origin is None:
            return {}
        if not self.origin_allowed(origin):
            raise HttpError(
                403,
                f"Origin {origin!r} is not allowed; add it to server.http.allowed_origins to "
                "let pages from it use this server",
            )
        return {
            "Access-Control-Allow-Origin": origin,
            "Access-Control-Expose-Headers": "Mcp-Session-Id, WWW-Authenticate",
            "Vary": "Origin",
        }


class HttpSessions:
    """Every HTTP client's HttpSession: the SessionTable of those with an id (initialize's
    Mcp-Session-Id, a GET /sse stream), and the loose ones without (one per POST with
    --stateless, one per 2026-07-28 request) while their calls may still run."""

    def __init__(self, config: Config, log: Log, stopping: threading.Event):
        settings = config.get("server", "http")
        self.log, self.stopping = log, stopping  # stopping: no new sessions (HttpApp's)
        self.stateless = settings["stateless"]
        self.secret = config.get("server", "tasks")["secret"]  # signs a client's identity
        outbox = settings["sse_outbox_bytes"], settings["sse_stall_s"]
        self.table = SessionTable(settings["max_sessions"], settings["session_idle_s"], log, outbox)
        self.loose: set[HttpSession] = set()  # stateless sessions whose calls may still run
        self._lock = threading.Lock()

    def new(self, user: str, legacy: bool = False, hang_up=None) -> HttpSession:
        if self.stopping.is_set():
            raise HttpError(
                503, "the server is shutting down; connect again (another instance will answer)"
            )
        if self.stateless:
            hs = HttpSession(None, self.log)
            hs.session.user = user
            with self._lock:
                self.loose.add(hs)
            return hs
        hs = self.table.create(legacy, hang_up)
        hs.session.user = user
        return hs

    def cancel_target(self, request_id, client: tuple) -> HttpSession | None:
        """Stateless mode: the POST session whose call a cancel from `client` means.

        Clients number their requests alike, so the id alone could hit another client's
        call: the cancel is tied to a call only if exactly one call with that id, from the
        same client (StreamableHttp.client_identity), is in flight here; else none is cancelled.
        """
        with self._lock:
            found = [hs for hs in self.loose if hs.call_id == request_id and hs.client == client]
        found = [hs for hs in found if hs.session.in_flight()]
        if len(found) > 1:
            self.log.say(
                f"a cancel for request {_describe(request_id)} matches {len(found)} calls from "
                "clients that look alike (same credential, address, X-Forwarded-For and "
                "User-Agent); none cancelled"
            )
        elif not found:
            self.log.debug("http", f"a cancel for request {_describe(request_id)}: no such call")
        return found[0] if len(found) == 1 else None

    def release(self, hs: HttpSession) -> None:
        """The request using `hs` is done."""
        if hs.id is not None:
            self.table.release(hs)
        elif not hs.busy():
            with self._lock:
                self.loose.discard(hs)

    def named(self, session_id: str | None, user: str) -> HttpSession:
        """The session an Mcp-Session-Id header names, held until release(); another user's
        is not found."""
        if not session_id:
            raise HttpError(
                400,
                "missing Mcp-Session-Id header: send initialize first and repeat the session id "
                "it returns on every request (or run the server with --stateless)",
            )
        return self.own(self.table.get(session_id.strip()), user)

    def own(self, hs: HttpSession, user: str) -> HttpSession:
        """`hs` if it is `user`'s; else it is let go and 404, as for a session that never was."""
        if hs.session.user == user:
            return hs
        self.release(hs)
        raise SessionTable.not_found()

    def for_post(self, message: dict, kind: str, method, version, session_id, client, user):
        """The session a POST's message belongs to: a new one for initialize (and for every
        POST with --stateless, speaking the header's version), else the one its header names."""
        if not (self.stateless or (kind == "request" and method == "initialize")):
            return self.named(session_id, user)
        hs = self.new(user)
        if hs.id is None:
            hs.session.protocol_version = version or DEFAULT_HTTP_VERSION
            hs.client, hs.session.client_key = client, task_owner(client)
            hs.call_id = message.get("id")
            restore_identity(self.secret, hs.session, session_id, version, self.log)
        return hs

    def modern(self, message: dict, client, header_version, user) -> HttpSession:
        """A 2026-07-28 message's own session: no id, no Mcp-Session-Id, gone with its call."""
        hs = HttpSession(None, self.log)
        hs.session.user = user
        hs.modern, hs.header_version = True, header_version
        hs.client, hs.call_id = client, message.get("id")
        hs.session.client_key = task_owner(client)
        with self._lock:
            self.loose.add(hs)
        return hs

    def end(self, session_id: str | None, user: str) -> None:
        """DELETE /mcp: ends the session, cancelling its calls."""
        hs = self.named(session_id, user)
        self.release(hs)
        self.table.end(hs, REQUEST_CANCELLED, "Request cancelled: the session was ended")

    def all(self) -> list[HttpSession]:
        with self._lock:
            loose = list(self.loose)
        return self.table.all() + loose

    def in_flight(self) -> int:
        return sum(hs.session.in_flight() for hs in self.all())

    def waiting(self) -> int:
        return sum(hs.router.waiting() for hs in self.all() if hs.router)

    def tidy(self) -> None:
        """The watchdog's round: loose sessions whose calls are done go, idle ones expire."""
        with self._lock:
            self.loose = {hs for hs in self.loose if hs.busy()}
        self.table.expire_idle()


# -- Endpoints: /mcp (StreamableHttp), /sse (LegacySse), /usage (UsageReport) ------------------
# Before HttpApp, which routes each request to one of them.


class _Held:
    """A request's hold on its session, let go once: before a ready reply is written (the
    client may send its next request the moment it reads it), else when the request ends."""

    def __init__(self, hs: HttpSession, sessions: HttpSessions):
        self.hs, self._sessions = hs, sessions

    def let_go(self) -> None:
        hs, self.hs = self.hs, None
        if hs is not None:
            hs.touch()
            self._sessions.release(hs)


class StreamableHttp:
    """POST and DELETE /mcp (Streamable HTTP, both eras): what a message means, which session
    it belongs to, and what its response is (JSON, or an event stream). The HttpHandler it is
    given reads and writes the bytes."""

    def __init__(self, dispatcher, sessions: HttpSessions, dispatch, log: Log):
        self.dispatcher, self.sessions, self.log = dispatcher, sessions, log
        self._dispatch = dispatch  # HttpApp.dispatch: the HTTP limits, then the dispatcher

    def post(self, handler) -> None:
        headers = handler.headers
        self.check_content_type(headers.get("Content-Type", ""))
        json_ok, sse_ok = self.accepts(headers.get("Accept"))
        try:
            message = handler.read_message()
        except _Answered:
            return
        kind, method = self.dispatcher.classify(message)
        header_version = (headers.get("MCP-Protocol-Version") or "").strip() or None
        if self.is_modern(message, kind, method, header_version):
            accepts = json_ok, sse_ok
            return self._post_modern(handler, message, kind, method, header_version, accepts)
        version = self.protocol_version(headers.get("MCP-Protocol-Version"))
        if kind == "invalid":
            reply = self.invalid_reply(message)
            if reply is None:  # nothing to answer (a malformed response, say)
                return handler.send_empty(202)
            return handler.send_json(self.status_of(reply), reply)
        address = handler.client_address[0]
        client = self.client_identity(headers, address) if self.sessions.stateless else None
        session_id = headers.get("Mcp-Session-Id")
        hs = self.sessions.for_post(
            message, kind, method, version, session_id, client, handler.user
        )
        self._handle(handler, hs, message, kind, method, client, (json_ok, sse_ok))

    def _post_modern(self, handler, message, kind: str, method, header_version, accepts) -> None:
        client = self.client_identity(handler.headers, handler.client_address[0])
        refusal = self.mismatch(message, handler.headers.get) if kind == "request" else None
        if refusal is not None:
            return handler.send_json(self.status_of(refusal, modern=True), refusal)
        hs = self.sessions.modern(message, client, header_version, handler.user)
        self._handle(handler, hs, message, kind, method, client, accepts)

    def _handle(self, handler, hs: HttpSession, message, kind: str, method, client, accepts):
        """A request is answered; anything else is handed over and gets 202, no body."""
        held = _Held(hs, self.sessions)
        try:
            if kind == "request":
                self._answer(handler, held, message, method, *accepts)
            else:
                self.notify(hs, message, client)
                handler.send_empty(202)
        finally:
            held.let_go()

    def _answer(self, handler, held: _Held, message: dict, method: str, json_ok, sse_ok):
        hs = held.hs
        reply, box, token = self.start_request(hs, message, method)
        try:
            if reply is not None:
                # Released before the write: a client may send its next request (at
                # max_sessions, a new session, and maybe with the same id) the moment it
                # reads this reply.
                held.let_go()
                if box is not None:
                    hs.router.close(message["id"], box)
                return self._reply(handler, hs, method, reply, json_ok)
            # A call that may ask the person first (the cost question) needs a stream to ask on.
            asks = method == "tools/call" and hs.session.may_ask
            if self.as_events(token, json_ok and not asks, sse_ok, method):
                delivered = handler.pump(handler.start_events(), box, until_reply=True)
            else:
                delivered = handler.await_json(box, hs.session.answered)
            if not delivered:
                self.hung_up(hs, message["id"])
        finally:
            if box is not None:
                hs.router.close(message["id"], box)

    def _reply(self, handler, hs: HttpSession, method: str, reply: dict, json_ok: bool) -> None:
        headers = self.reply_headers(hs, method, reply)
        if self.reply_as_json(hs, reply, json_ok):
            return handler.send_json(self.status_of(reply, hs.modern), reply, headers)
        events = handler.start_events(headers)
        events.event("message", encode_message(reply))
        events.end()

    def delete(self, handler) -> None:
        self.protocol_version(handler.headers.get("MCP-Protocol-Version"))
        self.sessions.end(handler.headers.get("Mcp-Session-Id"), handler.user)
        handler.send_empty(204)

    # -- what a POST /mcp means and ends with ------------------------------------------------

    @staticmethod
    def check_content_type(value: str) -> None:
        kind = value.partition(";")[0].strip().lower()
        if kind != "application/json":
            raise HttpError(415, f"Content-Type must be application/json, not {kind or 'missing'}")

    @staticmethod
    def accepts(accept: str | None) -> tuple[bool, bool]:
        """(JSON acceptable, SSE acceptable); a missing Accept and */* are taken as JSON."""
        if not accept:
            return True, False
        kinds = {part.partition(";")[0].strip().lower() for part in accept.split(",")}
        json_ok = bool(kinds & {"application/json", "application/*", "*/*"})
        sse_ok = "text/event-stream" in kinds
        if not (json_ok or sse_ok):
            raise HttpError(
                406,
                "Accept must include application/json and text/event-stream (MCP clients send "
                f"both), not {accept[:80]!r}",
            )
        return json_ok, sse_ok

    @staticmethod
    def protocol_version(version: str | None) -> str | None:
        """The MCP-Protocol-Version header's version; 400 for one this server does not speak."""
        if version is not None and version.strip() not in PROTOCOL_VERSIONS:
            raise HttpError(
                400,
                f"unsupported MCP-Protocol-Version {version[:40]!r}; this server speaks "
                f"{', '.join(PROTOCOL_VERSIONS)}",
            )
        return version and version.strip()

    @staticmethod
    def client_identity(headers, address: str) -> tuple:
        """Who sent a request, as far as stateless mode can tell: the credential, the peer's
        address (not its port: a cancel comes on another connection), X-Forwarded-For (the
        client behind a proxy) and the User-Agent. A client can only make itself look like
        another by sending that one's credential too."""
        return (
            headers.get("Authorization", ""),
            address,
            headers.get("X-Forwarded-For", ""),
            headers.get("User-Agent", ""),
        )

    def invalid_reply(self, message) -> dict | None:
        """The dispatcher's words for a message that is no request, notification or response."""
        return self.dispatcher.handle(message, Session(lambda m: None))

    @staticmethod
    def status_of(reply: dict, modern: bool = False) -> int:
        """A JSON reply's HTTP status: 400 when the request could not even be identified; for
        2026-07-28, 400 for a malformed request and 404 for an unknown method, as it says."""
        if "error" in reply and reply["error"].get("data") in TASK_LIMITS:
            return 429
        if modern and "error" in reply:
            return _MODERN_STATUS.get(reply["error"].get("code"), 200)
        return 200 if reply.get("id") is not None else 400

    def start_request(self, hs: HttpSession, message: dict, method: str):
        """Hands a request over: (its reply or None if it comes later, the Outbox its later
        messages arrive in, its progress token). Close the Outbox with hs.router.close."""
        request_id = message["id"]
        token = progress_token(message.get("params")) if method == "tools/call" else None
        box = hs.router.open(request_id, token) if _valid_id(request_id) else None
        try:
            return self._dispatch(hs, message, method), box, token
        except BaseException:
            if box is not None:
                hs.router.close(request_id, box)
            raise

    @staticmethod
    def as_events(token, json_ok: bool, sse_ok: bool, method: str | None = None) -> bool:
        """Whether a call's response is an event stream (progress can go there; keep-alive
        comments hold proxies while tasks/result waits) or JSON."""
        return sse_ok and (token is not None or not json_ok or method == "tasks/result")

    @staticmethod
    def reply_as_json(hs: HttpSession, reply: dict, json_ok: bool) -> bool:
        """Whether a reply ready at once goes out as JSON rather than as one event: when the
        client takes JSON, and a 2026-07-28 error always (its HTTP status tells what failed)."""
        return json_ok or (hs.modern and "error" in reply)

    def reply_headers(self, hs: HttpSession, method: str, reply: dict) -> dict:
        """A reply's extra headers: initialize's session id; a failed initialize ends it.
        With --stateless, the session id is the client's signed identity (or none)."""
        if method == "initialize" and hs.id is None and "result" in reply:
            return {"Mcp-Session-Id": identity_id(self.sessions.secret, hs.session)}
        if method != "initialize" or hs.id is None:
            return {}
        if "result" in reply:
            return {"Mcp-Session-Id": hs.id}
        self.sessions.table.end(hs)
        return {}

    def notify(self, hs: HttpSession, message: dict, client) -> None:
        """Handles a notification or response; a cancel also ends the call's waiting POST
        with a "Request cancelled" error.

        With --stateless every POST has a session of its own, so a cancel goes to the one
        call it can be tied to (HttpSessions.cancel_target), or to none.
        """
        params = message.get("params")
        request_id = params.get("requestId") if isinstance(params, dict) else None
        cancel = message.get("method") == "notifications/cancelled" and _valid_id(request_id)
        if cancel and (self.sessions.stateless or hs.modern):
            hs = self.sessions.cancel_target(request_id, client)
            if hs is None:
                return
        self.dispatcher.handle(message, hs.session)
        if cancel and hs.router is not None:
            hs.router.end(request_id, REQUEST_CANCELLED, "Request cancelled")

    # -- MCP 2026-07-28: requests that need no session ---------------------------------------------

    def is_modern(self, message: dict, kind: str, method, header_version) -> bool:
        """Whether a POST speaks 2026-07-28: the dispatcher's rule for a request, the header
        for anything else (that era has no notifications over HTTP, but a cancel is honoured)."""
        if not self.dispatcher.modern or kind == "invalid":
            return False
        if kind == "request":
            return is_modern(method, message.get("params"), header_version)
        return header_version in MODERN_VERSIONS

    @staticmethod
    def mismatch(message: dict, header) -> dict | None:
        """The -32020 reply to a request whose headers disagree with its body, else None."""
        request_id = message.get("id")
        why = header_mismatch(message, header) if _valid_id(request_id) else None
        return None if why is None else rpc_error(request_id, HEADER_MISMATCH, why)

    def hung_up(self, hs: HttpSession, request_id) -> None:
        """A client closed a response before its reply: for 2026-07-28 that cancels the call
        (the handshake era cancels with notifications/cancelled only)."""
        if hs.modern and hs.session.cancel(request_id) is not None:
            self.log.debug("http", f"response closed: cancelled requestId={_describe(request_id)}")
        self.dispatcher.abandoned(hs.session, request_id)  # a tasks/result stops waiting


class LegacySse:
    """Legacy HTTP+SSE (2024-11-05): GET /sse opens a session and its stream, POST /messages
    sends it a message whose reply goes down that stream. Off with --stateless."""

    def __init__(self, sessions: HttpSessions, dispatch, log: Log):
        self.sessions, self.log = sessions, log
        self._dispatch = dispatch  # HttpApp.dispatch: the HTTP limits, then the dispatcher
        self.streams = 0  # GET /sse streams open
        self._lock = threading.Lock()

    def stream(self, handler) -> None:
        """GET /sse: the session's stream, open until the client closes it."""
        hs = self.open(handler.user, handler.hang_up)
        try:
            events = handler.start_events()
            # Relative, so it resolves against whatever URL (proxy included) reached /sse.
            events.event("endpoint", f"{MESSAGES_PATH}?sessionId={hs.id}".encode())
            handler.pump(events, hs.stream, until_reply=False)
        finally:
            self.close(hs)

    def post(self, handler) -> None:
        """POST /messages?sessionId=: a message for the session's stream."""
        import urllib.parse

        query = urllib.parse.parse_qs(urllib.parse.urlsplit(handler.path).query)
        session_id = (query.get("sessionId") or query.get("session_id") or [""])[0]
        hs = self.session(session_id, handler.user)
        try:
            message = handler.read_message()
            # Always 202 for a parseable message (a non-2xx breaks some SSE clients); only a
            # client that does not read its stream got 429 already (LegacySse.session).
            handler.send_empty(202)
            self.deliver(hs, message)
        except _Answered:
            return
        finally:
            self.sessions.release(hs)

    def open(self, user: str, hang_up) -> HttpSession:
        hs = self.sessions.new(user, legacy=True, hang_up=hang_up)
        self._count(+1)
        return hs

    def close(self, hs: HttpSession) -> None:
        """The GET /sse stream has ended: so has its session, and its calls are cancelled."""
        self._count(-1)
        self.sessions.release(hs)
        self.sessions.table.end(hs)

    def session(self, session_id: str, user: str) -> HttpSession:
        """The session a POST /messages names, held until release(); 429 while its stream's
        outbox is full (the client is not reading what it asked for)."""
        if not session_id:
            raise HttpError(400, "missing ?sessionId=: use the URL from the /sse endpoint event")
        hs = self.sessions.own(self.sessions.table.get(session_id, legacy=True), user)
        if hs.stream.full():
            self.sessions.release(hs)
            raise HttpError(
                429,
                f"this session's /sse stream is not being read: {hs.stream.bytes} bytes of "
                f"messages wait for it, past server.http.sse_outbox_bytes ({hs.stream.limit}); "
                "read the stream before sending more",
                {"Retry-After": "1"},
            )
        return hs

    def deliver(self, hs: HttpSession, message) -> None:
        """A POST /messages message: its reply, errors and refusals included, goes down the
        session's stream (the POST itself always ends 202)."""
        hs.touch()
        try:
            reply = self._dispatch(hs, message, Dispatcher.classify(message)[1])
        except HttpError as exc:
            reply = rpc_error(message.get("id"), HTTP_REFUSED, exc.message)
        if reply is not None:
            hs.stream.send(reply)

    def _count(self, change: int) -> None:
        with self._lock:
            self.streams += change


class UsageReport:
    """GET /usage: spend from the usage ledger, as JSON or a page. While several people use
    the server, each sees only their own spend (every figure: totals, by model, by tool, in
    flight); server.auth.admins see the team's (issue 31)."""

    def __init__(self, config: Config, ledger, state, auth: Authenticator, sessions):
        self.config, self.ledger, self.state = config, ledger, state
        self.auth, self.sessions = auth, sessions

    def summary(self, user: str | None) -> dict:
        """The spend `user` may see; 404 when there is no ledger."""
        if self.ledger is None or not self.state.enabled:
            raise HttpError(404, "no usage ledger: state.path is off and state.url unset")
        config = self.config
        admins = {
            Identity.admin_entry(entry).key for entry in config.get("server", "auth", "admins")
        }
        timezone = config.get("policy", "timezone")
        if user in admins or not self.auth.multi_user():
            return spend_summary(self.ledger, timezone, self.sessions.in_flight())
        everyone = self.sessions.all()
        mine = sum(hs.session.in_flight() for hs in everyone if hs.session.user == user)
        return spend_summary(self.ledger, timezone, mine, user)

    def answer(self, handler) -> None:
        """JSON, or a page when a browser asks for HTML."""
        summary = self.summary(handler.user)
        if "text/html" not in (handler.headers.get("Accept") or ""):
            return handler.send_json(200, summary)
        headers = {
            "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'",
            "Cache-Control": "no-store",
        }
        handler.send_body(200, "text/html; charset=utf-8", spend_page(summary), headers)


# -- The HTTP app: a request's way through (HttpApp) -------------------------------------------


class HttpApp:
    """What every request needs: settings, the dispatcher, the gates, the limits, the
    lifecycle; it routes each request to what answers it (StreamableHttp, LegacySse,
    UsageReport, or HttpHandler itself)."""

    def __init__(
        self,
        dispatcher,
        config: Config,
        log: Log,
        policy: HostPolicy,
        *,
        users=None,
        state=None,
        ledger=None,
    ):
        """users, state, ledger: the AnswerEngine's UserDirectory (named tokens), StateStore
        (its refusals, whether /usage has a ledger) and Ledger; None where there is none
        (--doctor's trial has no engine)."""
        settings = config.get("server", "http")
        self.dispatcher, self.log, self.settings, self.policy = dispatcher, log, settings, policy
        auth = config.get("server", "auth")
        self.oauth = OAuthVerifier(auth, log) if auth["issuer"] else None
        self.auth = Authenticator(settings["token"], users, self.oauth)
        self._active_users = None  # at the last read of the users (None: not read yet)
        # Only named users' tokens let anyone in: say so the moment none is left.
        self._watching_users = users is not None and not settings["token"] and self.oauth is None
        if self._watching_users:
            users.after_each_read(self.users_read)
        self.stateless = settings["stateless"]
        self.state = state
        self.max_body = settings["max_body_bytes"]
        self.header_timeout = settings["header_timeout_s"]
        self.calls_lock = threading.Lock()  # makes "under the limit? then start" one step
        self.draining = threading.Event()  # SIGTERM: /healthz says 503
        self.stopping = threading.Event()  # after the lame-duck delay: no new sessions or calls
        self.sessions = HttpSessions(config, log, self.stopping)
        self.mcp = StreamableHttp(dispatcher, self.sessions, self.dispatch, log)
        self.legacy = LegacySse(self.sessions, self.dispatch, log)
        self.usage = UsageReport(config, ledger, self.state, self.auth, self.sessions)
        self.routes = {
            ("POST", MCP_PATH): self.mcp.post,
            ("DELETE", MCP_PATH): self.mcp.delete,
            ("GET", SSE_PATH): self.legacy.stream,
            ("POST", MESSAGES_PATH): self.legacy.post,
            ("GET", HEALTH_PATH): HttpHandler.get_healthz,
            ("GET", USAGE_PATH): self.usage.answer,
            ("GET", WELL_KNOWN_RESOURCE): HttpHandler.get_resource_metadata,
        }
        self._deadlines: dict = {}  # handler -> when its request must have arrived
        self._lock = threading.Lock()
        policy.refuse_open(self.auth)

    def listening(self, host: str, port: int) -> None:
        """The server is bound: OAuth's resource URL is known, its keys are fetched."""
        if self.oauth is None:
            return
        shown = f"[{host}]" if ":" in host else host
        if self.policy.public_url:
            self.oauth.set_resource(self.policy.public_url)
        else:  # only loopback: elsewhere public_url is required (HostPolicy.refuse_open)
            self.oauth.set_resource(f"http://{shown}:{port}", loopback_port=port)
        self.oauth.keys.start()
        self.log.say(
            f"OAuth: accepting access tokens from {self.oauth.issuer} for {self.oauth.resource}"
        )

    # -- requests and limits ---------------------------------------------------------------------

    def admit_call(self, hs: HttpSession, method: str = "tools/call") -> None:
        """Refuses a new tools/call that would pass a limit, or a tasks/result past the
        per-session one (call with calls_lock held)."""
        refuse_new_calls(self.stopping.is_set(), self.state, method)
        limit = self.settings["max_calls_per_session"]
        if method == "tasks/result":  # each waits as long as a call: as many as calls
            if hs.id is not None and hs.session.waiting() >= limit:
                raise HttpError(
                    429,
                    f"too many tasks/result waiting in this session ({limit}, "
                    "server.http.max_calls_per_session); wait for one to finish",
                    {"Retry-After": "1"},
                )
            return
        if hs.id is not None and hs.session.in_flight() >= limit:
            raise HttpError(
                429,
                f"too many calls in flight in this session ({limit}, "
                "server.http.max_calls_per_session); wait for one to finish",
                {"Retry-After": "1"},
            )
        limit = self.settings["max_calls"]
        if self.sessions.in_flight() >= limit:
            raise HttpError(
                429,
                f"too many calls in flight on this server ({limit}, server.http.max_calls); "
                "retry shortly",
                {"Retry-After": "1"},
            )

    def dispatch(self, hs: HttpSession, message, method: str | None) -> dict | None:
        """Hands a message to the dispatcher; a tools/call is admitted against the HTTP limits
        first, in one step with its start (calls_lock), so two calls cannot both pass."""
        if method not in ("tools/call", "tasks/result"):
            return self.dispatcher.handle(message, hs.session, hs.header_version)
        with self.calls_lock:
            self.admit_call(hs, method)
            return self.dispatcher.handle(message, hs.session, hs.header_version)

    # -- gates: token, route (Host and Origin: HostPolicy) -------------------------------------

    def route(self, command: str, path: str, authorization: str, host=None, source="") -> tuple:
        """(what answers this request: a function of its HttpHandler, the user asking), once
        its token is checked (Authenticator.authenticate: its Host header and client_source)."""
        if command == "OPTIONS":
            return HttpHandler.preflight, None
        if path.startswith(WELL_KNOWN_RESOURCE):  # public; any resource path under it
            path = WELL_KNOWN_RESOURCE
        public = path in (HEALTH_PATH, WELL_KNOWN_RESOURCE)
        user = None if public else self.auth.authenticate(authorization, host, source)
        route = self.routes.get((command, path))
        if self.stateless and (command, path) in _SESSION_ROUTES:
            route = None
        if route is None:
            raise self.no_route(command, path)
        return route, user

    def no_route(self, command: str, path: str) -> HttpError:
        allowed = _ALLOWED.get(path)
        if self.stateless and path in (SSE_PATH, MESSAGES_PATH):
            return HttpError(
                404, "legacy HTTP+SSE needs sessions and is off with --stateless; use /mcp"
            )
        if allowed is None:
            return HttpError(404, f"no such endpoint; MCP is served at {MCP_PATH}")
        if self.stateless and path == MCP_PATH:
            allowed = "POST"
        why = {
            (MCP_PATH, "GET"): "this server sends no server-initiated messages, so there is no "
            "GET stream",
            (MCP_PATH, "DELETE"): "there are no sessions with --stateless",
            (SSE_PATH, "POST"): "/sse is the legacy HTTP+SSE stream; Streamable HTTP clients "
            f"POST to {MCP_PATH}",
        }.get((path, command), "")
        hint = f"{why}; " if why else ""
        return HttpError(
            405, f"{command} {path} is not supported: {hint}use {allowed}", {"Allow": allowed}
        )

    @staticmethod
    def refusal(exc: HttpError, body: bytes | None) -> dict:
        """A refusal's body: a JSON-RPC error if the request's body was a JSON-RPC request
        with an id, else {"error": ...}."""
        try:
            message = json.loads(body) if body is not None else None
        except (ValueError, RecursionError):
            message = None
        if isinstance(message, dict) and "method" in message and _valid_id(message.get("id")):
            return rpc_error(message["id"], HTTP_REFUSED, exc.message)
        return {"error": exc.message}

    def health(self) -> tuple[int, dict]:
        draining = self.draining.is_set()
        body = {
            "status": "draining" if draining else "ok",
            "version": __version__,
            "in_flight": self.sessions.in_flight(),
            "sessions": len(self.sessions.table.all()),
            "api_key": bool(api_key(self.dispatcher.config)),
        }
        return (503 if draining else 200), body

    # -- the watchdog: slow clients, idle sessions -------------------------------------------------

    def watch(self, handler, deadline: float) -> None:
        with self._lock:
            self._deadlines[handler] = deadline

    def evict_reader(self) -> bool:
        """Closes the connection nearest its deadline among those still sending their request
        line or headers, if any (HttpServer.admit, at max_connections); its slot passes to a
        new connection."""
        with self._lock:
            readers = [(when, h) for h, when in self._deadlines.items() if h.awaits_request()]
            if not readers:
                return False
            handler = min(readers, key=lambda entry: entry[0])[1]
            del self._deadlines[handler]
            handler.evicted = True
        handler.too_slow()
        return True

    def unwatch(self, handler) -> None:
        with self._lock:
            self._deadlines.pop(handler, None)

    def start_watchdog(self) -> None:
        threading.Thread(target=self._watchdog, name="http-watchdog", daemon=True).start()
        if self._watching_users:
            threading.Thread(target=self._watch_users, name="http-users", daemon=True).start()

    def _watch_users(self) -> None:
        """Reads the users every few seconds even while no request comes, so a revoke that
        leaves no valid token is said on stderr the moment it happens."""
        while True:
            try:
                self.auth.users.active()  # a read, when the last is old enough: see users_read
            except Exception as exc:  # noqa: BLE001 - the watch must outlive any one read
                self.log.debug("http", f"reading the users failed: {type(exc).__name__}")
            time.sleep(_USERS_CACHE_S)

    def users_read(self, active: int) -> None:
        """After each read of the users: a warning when none has a valid token any more."""
        before, self._active_users = self._active_users, active
        if active == 0 and before != 0 and self.auth.required():
            self.log.say(f"warning: {LOCKED_OUT}")

    def _watchdog(self) -> None:
        while True:
            time.sleep(_POLL_S)
            now = time.monotonic()
            with self._lock:
                late = [h for h, when in self._deadlines.items() if when <= now]
                for handler in late:
                    del self._deadlines[handler]
            for handler in late:
                handler.too_slow()
            self.sessions.tidy()


# -- The request handler: bytes in, a response out (HttpHandler) -------------------------------


class HttpHandler:
    """HTTP plumbing, mixed into http.server.BaseHTTPRequestHandler by HttpTransport: reads
    requests, writes responses (send_json, start_events, pump, read_message: the writer and
    reader the routes use). What they mean and what they get is HttpApp's to decide."""

    protocol_version = "HTTP/1.1"
    server_version = f"{SERVER_NAME}/{__version__}"
    # TCP_NODELAY on accepted sockets: with Nagle's algorithm, a kept-alive connection's
    # small writes wait for the client's delayed ACK (~40 ms a request).
    disable_nagle_algorithm = True

    def version_string(self) -> str:
        return self.server_version  # no Python version in the Server header

    # -- the connection ----------------------------------------------------------------------------

    def serve(self, line_deadline: float) -> bool:
        """Answers the requests this connection has bytes for; True if it stays open and
        should wait for its next request holding no thread (HttpServer's Lobby), False if it
        closes. The request line must arrive by `line_deadline`."""
        self.evicted = False  # HttpApp.evict_reader closed it to make room
        self.close_connection = True
        while True:
            self._line_deadline = line_deadline
            self.handle_one_request()
            if self.close_connection:
                return False
            if not self._has_buffered():
                return True
            line_deadline = time.monotonic() + self.app.settings["request_line_timeout_s"]

    def _has_buffered(self) -> bool:
        """Whether the next request's bytes are here already (pipelined, or read with the
        last one), looked at without waiting."""
        self.connection.settimeout(0)
        try:
            return bool(self.rfile.peek(0))
        except OSError:
            return True  # the next read ends the connection with its error
        finally:
            self.connection.settimeout(self.timeout)

    def handle_one_request(self) -> None:
        self.app: HttpApp = self.server.app
        self._phase = "idle"  # idle -> headers (line read) -> request (headers read) -> answered
        self._body: bytes | None = None
        self._framing_ok = False  # Content-Length and Transfer-Encoding were checked
        self._cors: dict = {}
        self.user: str | None = None  # who is asking, once route() has checked the token
        self._started = time.monotonic()
        self.app.watch(self, self._line_deadline)  # the request line must arrive in time
        try:
            super().handle_one_request()
        finally:
            self.app.unwatch(self)

    def parse_request(self) -> bool:
        self._phase = "headers"  # then the body, within header_timeout_s in all
        self.app.watch(self, self._started + self.app.header_timeout)
        parsed = super().parse_request()
        if parsed:  # else send_error() has answered it already
            self._phase = "request"
        return parsed

    def awaits_request(self) -> bool:
        """Whether this connection has not yet sent its request line and headers (so not its
        token either): one that sends them a byte at a time is as idle as one that sends
        nothing, and makes room at max_connections like it."""
        return self._phase in ("idle", "headers")

    def too_slow(self) -> None:
        """Called by the watchdog: the request did not arrive in time, so drop the connection
        (with a 408 if it had started; an idle keep-alive connection, or one closed to make
        room, just closes)."""
        if self._phase in ("headers", "request") and not self.evicted:
            why = f"the request did not arrive within {self.app.header_timeout} s"
            body = encode_message({"error": f"{why} (server.http.header_timeout_s)"})
            head = "HTTP/1.1 408 Request Timeout\r\nContent-Type: application/json\r\n"
            head += f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
            try:
                self.connection.sendall(head.encode() + body)
            except OSError:
                pass
        self.hang_up()

    def hang_up(self) -> None:
        """Closes the connection under whatever this handler's thread is doing with it."""
        import socket

        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _peer_gone(self) -> bool:
        """True once the client has closed its side (a waiting client sends nothing)."""
        import select
        import socket

        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            return bool(readable) and self.connection.recv(1, socket.MSG_PEEK) == b""
        except (OSError, ValueError):
            return True

    def log_request(self, code="-", size="-") -> None:
        path = getattr(self, "path", "").partition("?")[0]  # the query may hold a session id
        self.app.log.debug("http", f"{self.command} {path} -> {code}")

    def log_message(self, format, *args) -> None:
        self.app.log.debug("http", format % args)

    # -- writing responses -------------------------------------------------------------------------

    def send_error(self, code, message=None, explain=None) -> None:
        """http.server's own refusals (bad request line, headers too large) as JSON."""
        self.close_connection = True
        text = message or self.responses.get(code, ("error",))[0]
        self.send_json(code, {"error": text}, {"Connection": "close"})

    def _answering(self, status: int) -> None:
        self._phase = "answered"
        self.app.unwatch(self)
        request_headers = getattr(self, "headers", None)  # absent if the request line was bad
        length = (request_headers or {}).get("Content-Length", "0").strip()
        if self._body is None and length not in ("", "0"):
            self.close_connection = True  # its body was never read
        self.send_response(status)

    def send_json(self, status: int, body: dict, headers: dict | None = None) -> None:
        self.send_body(status, "application/json", encode_message(body), headers)

    def send_body(self, status: int, kind: str, data: bytes, headers: dict | None = None) -> None:
        self._answering(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self._end_headers(headers, b"" if self.command == "HEAD" else data)

    def send_empty(self, status: int, headers: dict | None = None) -> None:
        self._answering(status)
        self.send_header("Content-Length", "0")
        self._end_headers(headers)

    def _end_headers(self, headers: dict | None, body: bytes = b"") -> None:
        """Ends the headers and sends them with `body` in one write (two small writes would
        wait for the client's delayed ACK if TCP_NODELAY were ever off)."""
        for name, value in {**self._cors, **(headers or {})}.items():
            self.send_header(name, value)
        if self.close_connection and not (headers or {}).get("Connection"):
            self.send_header("Connection", "close")
        if not body:
            return self.end_headers()
        if self.request_version == "HTTP/0.9":  # no headers at all
            self.wfile.write(body)
            return
        self._headers_buffer.append(b"\r\n" + body)  # end_headers() appends b"\r\n", flushes
        self.flush_headers()

    def start_events(self, headers: dict | None = None) -> EventStream:
        chunked = self.request_version != "HTTP/1.0"
        self._answering(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("X-Accel-Buffering", "no")  # nginx: pass each event on at once
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.close_connection = True
        self._end_headers(headers)
        return EventStream(self.wfile, chunked)

    def pump(self, events: EventStream, box: Outbox, until_reply: bool) -> bool:
        """False if the client hung up first."""
        if events.pump(box, until_reply, self.app.settings["keepalive_s"], self._peer_gone):
            return True
        self.close_connection = True
        return False

    def await_json(self, box: Outbox, answered=None) -> bool:
        """Waits for the call's reply and sends it as JSON (progress has nowhere to go);
        False if the client hung up first. A request to the client (the cost question) has
        nowhere to go either: `answered` gets its error at once, rather than the call waiting
        budget.confirm_timeout_s for an answer that cannot come."""
        while True:
            item = box.get(_POLL_S)
            if item is None:
                if self._peer_gone():
                    self.close_connection = True
                    return False
            elif is_reply(item):
                self.send_json(200, item)
                return True
            elif "method" in item and "id" in item and answered is not None:
                answered(rpc_error(item["id"], INVALID_REQUEST, JSON_ONLY_ASKS))

    # -- reading requests ------------------------------------------------------------------------

    def do_GET(self) -> None:
        path = self.path.partition("?")[0]
        headers, app = self.headers, self.app
        try:
            self._check_framing()
            app.policy.check_host(headers.get("Host"))
            self._cors = app.policy.cors_headers(headers.get("Origin"))
            authorization = headers.get("Authorization", "")
            source = self.server.sources.of(
                self.client_address[0], headers.get_all("X-Forwarded-For")
            )
            route, self.user = app.route(
                self.command, path, authorization, headers.get("Host"), source
            )
            route(self)
        except HttpError as exc:
            body = self._small_body() if exc.status != 413 and self._framing_ok else None
            self.send_json(exc.status, app.refusal(exc, body), exc.headers)
        except (OSError, ValueError) as exc:  # the client went away while we wrote
            app.log.debug("http", f"connection dropped: {type(exc).__name__}: {exc}")
            self.close_connection = True
        except Exception as exc:  # noqa: BLE001 - a bug must not take the server down
            app.log.say(f"internal error in {self.command} {path}: {type(exc).__name__}: {exc}")
            if app.log.debug_enabled:  # where it happened, for the report the 500 asks for
                import traceback

                app.log.debug("http", "".join(traceback.format_exception(exc)).rstrip())
            if self._phase != "answered":
                self.close_connection = True
                self.send_json(500, {"error": "internal error; run with --debug and report it"})

    do_POST = do_DELETE = do_OPTIONS = do_PUT = do_PATCH = do_HEAD = do_GET

    def _check_framing(self) -> None:
        """Refuses a request whose body length is ambiguous, and closes its connection: where
        the body ends decides where the next request starts (request smuggling)."""
        headers = self.headers
        error = _framing_error(
            headers.get_all("Content-Length"), headers.get_all("Transfer-Encoding")
        )
        if error is not None:
            self.close_connection = True
            raise error
        self._framing_ok = True

    def _small_body(self) -> bytes | None:
        """A refused request's body, read now if it is small and still unread; None if it
        stays unread. Without a valid token, only if it is here already (sent with the
        headers): never waited for, or a stranger's requests trickling their bodies would
        hold connections busy, and at max_connections every new one is closed (issue 39)."""
        if self._body is None:
            length = self.headers.get("Content-Length", "0").strip()
            if not length.isdigit() or int(length) > 65536:
                self.close_connection = True  # its body stays unread
                return None
            if self.user is None and not self._arrived(int(length)):
                self.close_connection = True  # its body stays unread
                return None
            try:
                self._read_body()
            except (HttpError, OSError):
                self.close_connection = True
                return None
        return self._body

    def _arrived(self, size: int) -> bool:
        """Whether `size` bytes are here to read (one look, without waiting)."""
        if size == 0:
            return True
        self.connection.settimeout(0)
        try:
            return len(self.rfile.peek(size)) >= size
        except OSError:
            return False
        finally:
            self.connection.settimeout(self.timeout)

    def _read_body(self) -> bytes:
        """The body, whose Content-Length _check_framing() has checked; 413 past the limit
        before a byte of it is read."""
        size, limit = int(self.headers.get("Content-Length", "0")), self.app.max_body
        if size > limit:
            self.close_connection = True
            raise HttpError(
                413,
                f"the request body of {size} bytes exceeds the {limit}-byte limit "
                "(server.http.max_body_bytes); send a smaller message or raise the limit",
            )
        self._body = self.rfile.read(size)
        self.app.unwatch(self)
        if len(self._body) < size:
            raise ConnectionError("client went away mid-body")
        return self._body

    def read_message(self):
        """The body as a JSON value; 400 with a JSON-RPC parse error if it is not JSON."""
        body = self._read_body()
        error = _costly_body_error(body)
        if error is None:
            message, error = decode_message(body)
        if error is not None:
            self.send_json(400, error)
            raise _Answered()
        return message

    # -- the routes it answers itself (the others: StreamableHttp, LegacySse, UsageReport) ------

    def preflight(self) -> None:
        self.send_empty(204, _PREFLIGHT)

    def get_healthz(self) -> None:
        self.send_json(*self.app.health())

    def get_resource_metadata(self) -> None:
        """RFC 9728 protected resource metadata: where clients get tokens for /mcp."""
        if self.app.oauth is None:
            raise HttpError(404, "OAuth is off on this server (server.auth.issuer is not set)")
        document = self.app.oauth.for_host(self.headers.get("Host")).metadata()
        # It names the URL the client used (a loopback name): caches must keep them apart.
        self.send_json(200, document, {"Cache-Control": "max-age=300", "Vary": "Host"})


def _is_length(text: str) -> bool:
    return re.fullmatch(r"[0-9]+", text.strip()) is not None  # str.isdigit() takes "²" too


def _framing_error(lengths: list | None, codings: list | None) -> HttpError | None:
    """The refusal for Content-Length and Transfer-Encoding headers that leave a body's length
    ambiguous, else None."""
    if codings and lengths:
        return HttpError(
            400, "Transfer-Encoding and Content-Length together; send Content-Length only"
        )
    if codings:
        return HttpError(
            411, f"Transfer-Encoding {codings[0][:40]!r} is not supported; send Content-Length"
        )
    if lengths and len(lengths) > 1:
        return HttpError(
            400, f"{len(lengths)} Content-Length headers; send exactly one (ASCII digits)"
        )
    if lengths and not _is_length(lengths[0]):
        return HttpError(
            400, f"bad Content-Length {lengths[0][:20]!r}; send ASCII digits (0-9) only"
        )
    return None


def _costly_body_error(body: bytes) -> dict | None:
    """A JSON-RPC error for a body whose parse would cost far more memory than its size
    (each 3-byte `{},` becomes a ~64-byte dict), found without parsing it; else None."""
    if re.match(rb"\s*\[", body):
        return rpc_error(
            None,
            INVALID_REQUEST,
            "Invalid Request: batches (JSON arrays) are not supported; send one message at a time",
        )
    values = body.count(b",") + body.count(b"{") + body.count(b"[")
    if values > MAX_JSON_VALUES:
        return rpc_error(
            None,
            INVALID_REQUEST,
            f"Invalid Request: the message holds {values} commas and brackets, more than the "
            f"{MAX_JSON_VALUES} any MCP message needs; send one tool call with a plain query",
        )
    return None


class _Answered(Exception):
    """The response has been sent already; stop handling."""


# The routes HttpApp.route refuses with --stateless (HttpApp.routes maps each to its answer).
_SESSION_ROUTES = {("DELETE", MCP_PATH), ("GET", SSE_PATH), ("POST", MESSAGES_PATH)}
_ALLOWED = {
    MCP_PATH: "POST, DELETE",
    SSE_PATH: "GET",
    MESSAGES_PATH: "POST",
    HEALTH_PATH: "GET",
    USAGE_PATH: "GET",
    WELL_KNOWN_RESOURCE: "GET",
}
_PREFLIGHT = {
    "Allow": "GET, POST, DELETE, OPTIONS",
    "Access-Control-Allow-Methods": "GET, POST, DELETE",
    "Access-Control-Allow-Headers": "Authorization, Content-Type, Accept, "
    "Mcp-Session-Id, MCP-Protocol-Version, Mcp-Method, Mcp-Name, Last-Event-ID",
    "Access-Control-Max-Age": "600",
}
# 2026-07-28's HTTP statuses for errors; the others travel with 200.
_MODERN_STATUS = {
    INVALID_REQUEST: 400,
    INVALID_PARAMS: 400,
    HEADER_MISMATCH: 400,
    UNSUPPORTED_VERSION: 400,
    MISSING_CAPABILITY: 400,
    METHOD_NOT_FOUND: 404,
}


def _unread(conn) -> bool:
    """Whether a connection has nothing waiting to be read (closed by its client counts: nothing
    will come)."""
    import socket

    try:
        if hasattr(socket, "MSG_DONTWAIT"):
            return not conn.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        import select  # Windows: its select() has no limit on descriptor numbers

        return not select.select([conn], [], [], 0)[0]
    except (BlockingIOError, InterruptedError):
        return True
    except (OSError, ValueError):  # gone already: nothing will be read from it
        return True


# -- The server: the lobby, HttpServer, HttpTransport, serve_http ------------------------------


class _Parked:
    """A connection waiting in the Lobby: its peer's address, its handler (None before its
    first request), and its deadline (monotonic)."""

    __slots__ = ("address", "deadline", "handler")

    def __init__(self, address, handler, deadline: float):
        self.address, self.handler, self.deadline = address, handler, deadline


class Lobby:
    """Connections waiting for a request, held by no thread: one selector thread watches them
    and hands each to `on_ready` (a worker thread) once it has bytes to read.

    A connection that sends nothing costs a file descriptor, not a thread. Each waits until its
    deadline (a new one: server.http.request_line_timeout_s; a kept-alive one:
    idle_timeout_s) and is then closed. Only the lobby's thread touches its selector; others
    hand it work through `_incoming` and `_doomed` and wake it through a socket pair.
    """

    def __init__(self, on_ready, on_closed, log: Log):
        import selectors
        import socket
        from collections import OrderedDict

        self._on_ready, self._on_closed, self._log = on_ready, on_closed, log
        self._selector = selectors.DefaultSelector()
        self._waiting: OrderedDict = OrderedDict()  # socket -> _Parked
        self._incoming: list = []  # sockets to register
        self._doomed: list = []  # (socket, handler) evicted: to close, slots passed on already
        self._lock = threading.Lock()
        self._wake_in, self._wake_out = socket.socketpair()
        self._wake_out.setblocking(False)
        self._selector.register(self._wake_in, selectors.EVENT_READ)
        self.closed = False

    def wait(self, conn, address, handler, deadline: float) -> None:
        """Parks `conn` (with its handler, None before its first request) until it has bytes
        to read or its deadline passes."""
        with self._lock:
            parked = not self.closed  # decided once: a close between two looks closed it twice
            if parked:
                self._waiting[conn] = _Parked(address, handler, deadline)
                self._incoming.append(conn)
        if not parked:
            return self._on_closed(conn, handler)
        self._wake()

    def evict_oldest(self) -> bool:
        """Closes the connection that has waited longest with nothing to read, if any; its slot
        is the caller's. One whose request has arrived but not yet been seen (the lobby is busy
        when an attacker opens connections fast) is passed over: it is not idle."""
        with self._lock:
            conn = next((c for n, c in enumerate(self._waiting) if n >= 64 or _unread(c)), None)
            if conn is None:
                return False
            handler = self._waiting.pop(conn).handler
            self._doomed.append((conn, handler))
        self._wake()
        return True

    def waiting(self) -> int:
        with self._lock:
            return len(self._waiting)

    def close(self) -> None:
        """Stops: every waiting connection is closed, and any parked later too."""
        with self._lock:
            self.closed = True
        self._wake()

    def _wake(self) -> None:
        try:
            self._wake_out.send(b"\0")
        except OSError:  # its buffer is full: the lobby is being woken already
            pass

    def run(self) -> None:
        import selectors

        while True:
            try:
                if self._turn(selectors.EVENT_READ):
                    return
            except Exception as exc:  # noqa: BLE001 - a bug must not stop every connection
                self._log.say(f"internal error in the HTTP lobby: {type(exc).__name__}: {exc}")
                time.sleep(_POLL_S)

    def _turn(self, readable: int) -> bool:
        """One look at the connections; True once closed and emptied."""
        for key, _ in self._selector.select(_POLL_S):
            if key.fileobj is self._wake_in:
                self._wake_in.recv(4096)
                continue
            self._selector.unregister(key.fileobj)
            with self._lock:
                entry = self._waiting.pop(key.fileobj, None)
            if entry is not None:
                self._on_ready(key.fileobj, entry.address, entry.handler, entry.deadline)
        with self._lock:
            incoming, self._incoming = self._incoming, []
            doomed, self._doomed = self._doomed, []
            now = time.monotonic()
            late = [c for c, p in self._waiting.items() if p.deadline <= now or self.closed]
            ended = [(conn, self._waiting.pop(conn).handler) for conn in late]
        gone = {id(conn) for conn, _ in doomed + ended}
        for conn in incoming:
            if id(conn) not in gone:
                self._selector.register(conn, readable)
        for conn, handler in doomed:
            self._forget(conn)
            self._on_closed(conn, handler, release=False)
        for conn, handler in ended:
            self._forget(conn)
            self._on_closed(conn, handler)
        return self.closed

    def _forget(self, conn) -> None:
        try:
            self._selector.unregister(conn)
        except (KeyError, ValueError):  # never registered (or already closed)
            pass


def read_request_head(conn, wait_s: float) -> tuple[str, str, str | None]:
    """The method, target and Host of the request on `conn`, read within wait_s (8 KiB at
    most); ("", "", None) when none came whole."""
    deadline = time.monotonic() + wait_s
    head = b""
    while b"\r\n\r\n" not in head and len(head) < 8192:
        left = deadline - time.monotonic()
        if left <= 0:
            return "", "", None
        conn.settimeout(left)
        chunk = conn.recv(8192 - len(head))
        if not chunk:
            return "", "", None
        head += chunk
    lines = head.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3:
        return "", "", None
    hosts = [line[5:].strip() for line in lines[1:] if line.lower().startswith("host:")]
    host = hosts[0] if len(hosts) == 1 else ("" if hosts else None)  # two: none of ours
    return parts[0], parts[1], host


class HttpServer:
    """The listening socket, mixed into http.server.HTTPServer by HttpTransport.

    A connection holds a worker thread only while it has a request to read or answer; between
    requests (and before its first) it waits in the Lobby. At most server.http.max_connections
    are open: at the cap a new connection closes the one idle longest, and is itself closed at
    once only when every open connection is busy with a request.
    """

    request_queue_size = 128
    # Connections past the cap that may ask for /healthz (and nothing else) while every other
    # is busy: a load balancer must not see an instance full of long calls as dead. How long
    # one may take to send its request, in seconds.
    health_room, health_wait_s = 4, 2.0

    def __init__(self, app: HttpApp, host: str, port: int, handler):
        self.app, self.host = app, host
        # Whose introspection allowance each request spends (issue 39).
        self.sources = ClientSources(app.settings["trusted_proxies"], app.log, bool(app.oauth))
        self.address_family = app.policy.family
        self.limit = app.settings["max_connections"]
        if os.name == "nt":  # select(), Windows' only selector, watches at most 512 sockets
            self.limit = min(self.limit, 500)
        self.open = 0  # connections accepted and not yet closed
        self.probes = 0  # connections past the cap, in the health room
        self._count = threading.Lock()
        self.lobby = Lobby(self._ready, self._close, app.log)
        super().__init__((host, port), handler)

    def admit(self) -> bool:
        """Whether a new connection may open: under the cap, or by closing an idle one."""
        with self._count:
            if self.open < self.limit:
                self.open += 1
                return True
        if self.lobby.evict_oldest() or self.app.evict_reader():
            self.app.log.debug("http", "closed the longest idle connection to make room")
            return True
        return False

    def process_request(self, request, client_address) -> None:
        if not self.admit():
            if self._probe_admitted(request):
                return
            self.app.log.debug(
                "http", "connection refused: server.http.max_connections, all of them busy"
            )
            return self.shutdown_request(request)
        deadline = time.monotonic() + self.app.settings["request_line_timeout_s"]
        self.lobby.wait(request, client_address, None, deadline)

    def _probe_admitted(self, conn) -> bool:
        """Takes a connection past the cap into the health room, if there is room there."""
        with self._count:
            if self.probes >= self.health_room:
                return False
            self.probes += 1
        try:
            threading.Thread(target=self._probe, args=(conn,), daemon=True).start()
        except RuntimeError:  # no thread to be had: refused like the rest
            with self._count:
                self.probes -= 1
            return False
        return True

    def _probe(self, conn) -> None:
        """Answers GET (or HEAD) /healthz on a connection in the health room, then closes it;
        any other request is closed unanswered, as past the cap it would have been."""
        try:
            method, path, host = read_request_head(conn, self.health_wait_s)
            if method in ("GET", "HEAD") and path.split("?", 1)[0] == HEALTH_PATH:
                self.app.policy.check_host(host)
                status, body = self.app.health()
                data = encode_message(body)
                reason = "OK" if status == 200 else "Service Unavailable"
                head = (
                    f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\n"
                    f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n"
                )
                conn.sendall(head.encode("ascii") + (data if method == "GET" else b""))
        except (OSError, HttpError, ValueError):
            pass  # a probe that fails is a failed health check: nothing else to do
        finally:
            self.shutdown_request(conn)
            with self._count:
                self.probes -= 1

    def _ready(self, conn, address, handler, deadline: float) -> None:
        """The lobby's hand-over: `conn` has bytes to read; a worker thread serves them."""
        if handler is not None:  # kept alive: its request line is due soon after its first byte
            deadline = time.monotonic() + self.app.settings["request_line_timeout_s"]
        worker = threading.Thread(
            target=self._serve, args=(conn, address, handler, deadline), daemon=True
        )
        try:
            worker.start()
        except RuntimeError:  # no thread to be had (a pids limit): this connection closes
            self._close(conn, handler)

    def _serve(self, conn, address, handler, deadline: float) -> None:
        parked = False
        try:
            if handler is None:
                handler = self.RequestHandlerClass.__new__(self.RequestHandlerClass)
                handler.request, handler.client_address, handler.server = conn, address, self
                handler.setup()
            parked = handler.serve(deadline)
        except Exception:  # noqa: BLE001 - one connection's failure is only its own
            self.handle_error(conn, address)
        if parked and not handler.evicted:
            self.lobby.wait(conn, address, handler, time.monotonic() + self.idle_s())
        else:
            self._close(conn, handler)

    def idle_s(self) -> int:
        return self.app.settings["idle_timeout_s"]

    def _close(self, conn, handler, release: bool = True) -> None:
        """Closes a connection and frees its slot (unless an eviction passed it on). The slot
        first: a client that saw its connection close and opens another finds it free."""
        if handler is not None:
            try:
                handler.finish()
            except Exception:  # noqa: BLE001 - a handler whose setup failed has no files
                pass
        if release and not getattr(handler, "evicted", False):
            with self._count:
                self.open -= 1
        self.shutdown_request(conn)

    def server_bind(self) -> None:  # HTTPServer's would look the name up in DNS
        import socketserver

        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.host, self.server_address[1]

    def handle_error(self, request, client_address) -> None:
        exc = sys.exc_info()[1]
        self.app.log.debug("http", f"connection error: {type(exc).__name__}: {exc}")


class HttpTransport(Transport):
    """Every HTTP client of one listening address: an HttpServer with its Lobby and
    HttpHandler threads, an HttpApp that decides, and the shutdown sequence."""

    def __init__(self, app: HttpApp, host: str, port: int):
        self.app, self.log, self.host, self.port = app, app.log, host, port
        self.hurry = threading.Event()  # a second signal: stop waiting for calls
        self.server = None

    def serve(self) -> int:
        import http.server
        import signal

        app, log, host = self.app, self.log, self.host
        handler = type("Handler", (HttpHandler, http.server.BaseHTTPRequestHandler), {})
        # Bounds each socket read and write (a client that stops reading); the watchdog
        # enforces header_timeout_s itself, so this must not fire first.
        handler.timeout = max(30, 2 * app.header_timeout)
        server_class = type("Server", (HttpServer, http.server.HTTPServer), {})
        try:
            self.server = server_class(app, host, self.port, handler)
        except OSError as exc:
            print(
                f"{SERVER_NAME}: cannot listen on {host}:{self.port}: {exc.strerror}",
                file=sys.stderr,
            )
            return 2
        app.listening(host, self.server.server_port)
        stop, interrupted = threading.Event(), threading.Event()

        def on_signal(signum, frame) -> None:
            if signum == signal.SIGINT and not stop.is_set():
                interrupted.set()  # Ctrl-C: a person at a terminal, no load balancer to tell
            (self.hurry if stop.is_set() else stop).set()  # a second signal skips the waiting

        for signum in stop_signals(signal):
            signal.signal(signum, on_signal)
        threading.Thread(target=self.server.serve_forever, args=(0.2,), daemon=True).start()
        threading.Thread(target=self.server.lobby.run, name="http-lobby", daemon=True).start()
        app.start_watchdog()
        shown = f"[{host}]" if ":" in host else host
        where = "stateless" if app.stateless else f"legacy SSE at {SSE_PATH}"
        log.say(f"serving MCP on http://{shown}:{self.server.server_port}{MCP_PATH} ({where})")
        while not stop.wait(0.5):
            pass
        return self.shut_down(interrupted.is_set())

    def shut_down(self, ctrl_c: bool) -> int:
        """Lame duck (healthz 503), stop accepting, let calls finish up to drain_s, then exit.

        Ctrl-C (SIGINT) skips the lame duck: it tells a load balancer nothing when a person
        stops the server at a terminal, and they expect it gone at once.
        """
        app, log, hurry = self.app, self.log, self.hurry
        lameduck, drain = app.settings["lameduck_s"], app.settings["drain_s"]
        app.draining.set()
        if ctrl_c:
            self.close_listener()
            if app.sessions.in_flight() or app.sessions.waiting():
                log.say(f"stopping: calls in flight get {drain} s (Ctrl-C again to stop now)")
        else:
            log.say(
                f"stopping: /healthz answers 503 for {lameduck} s, then calls get {drain} s "
                "(signal again to stop now)"
            )
            hurry.wait(lameduck)
            self.close_listener()
        deadline = time.monotonic() + drain
        sessions = app.sessions
        while (sessions.in_flight() or sessions.waiting()) and time.monotonic() < deadline:
            if hurry.wait(0.05):
                break
        handed = app.dispatcher.long_calls.hand_over()
        if handed:
            log.say(
                f"left {handed} task(s) running upstream for another instance to serve "
                "(signed ids); their usage is recorded by the instance that serves them"
            )
        left = sessions.in_flight() - handed
        when = "at a second signal" if hurry.is_set() else f"after {drain} s (server.http.drain_s)"
        if left > 0:
            log.say(f"cancelled {left} call(s) still running {when}")
        ended = sessions.all()
        why = f"the server is shutting down and cancelled this call {when}; retry it"
        for hs in ended:
            sessions.table.end(hs, HTTP_REFUSED, why)
        deadline = time.monotonic() + 2  # let responses and SSE streams write what they hold
        while app.legacy.streams or any(hs.router and hs.router.waiting() for hs in ended):
            if time.monotonic() > deadline:
                break
            time.sleep(0.02)
        return 0

    def close_listener(self) -> None:
        """Stops accepting: the port is free for a new server at once (SO_REUSEADDR is set)."""
        self.server.shutdown()
        self.server.server_close()
        self.server.lobby.close()  # idle connections: nothing to finish
        self.app.stopping.set()


def serve_http(dispatcher: Dispatcher, config: Config, log: Log, host: str, port: int) -> int:
    """Serves MCP over HTTP until SIGTERM/SIGINT, then shuts down gracefully (exit 0)."""
    engine = dispatcher.engine
    try:
        policy = HostPolicy(config, host)
        app = HttpApp(
            dispatcher,
            config,
            log,
            policy,
            users=engine.users,
            state=engine.state,
            ledger=engine.ledger,
        )
    except ConfigError as exc:
        print(f"{SERVER_NAME}: config error: {inert(str(exc))}", file=sys.stderr)
        return 2
    long_calls = dispatcher.long_calls  # made with stateless = server.http.stateless (main)
    if long_calls.tasks_off is not None:
        log.say(long_calls.tasks_off)
    return HttpTransport(app, host, port).serve()


# ============================================================================================
# CLI
# ============================================================================================

# -- Flags: USAGE, FLAG_TABLE and --help -------------------------------------------------------


USAGE = f"""\
usage: {SERVER_NAME} --stdio [--config PATH] [--model ID] [--debug [PATH]] [--show-config]
       {SERVER_NAME} --http [HOST:]PORT [--stateless] [--http-token TOKEN]
              [--http-allow-insecure] [--config PATH] [--model ID] [--debug [PATH]]
       {SERVER_NAME} --ask QUERY [--file PATH]... [--tool NAME] [--json] [--config PATH]
              [--model ID] [--debug [PATH]]
       {SERVER_NAME} --show-config [--config PATH] [--model ID]
       {SERVER_NAME} --print-example config|policy|policy-replace
       {SERVER_NAME} --doctor [--live] [--http [HOST:]PORT] [--config PATH] [--model ID]
       {SERVER_NAME} --usage [--since YYYY-MM-DD] [--json] [--config PATH]
       {SERVER_NAME} --user add NAME [--daily-usd X] [--monthly-usd Y] | list | revoke NAME
              | rotate NAME | limit NAME [--daily-usd X|none] [--monthly-usd Y|none]
       {SERVER_NAME} --upgrade-state [--from-issuer URL] [--config PATH]
       {SERVER_NAME} -h | --help | -V | --version"""

EXAMPLES = {
    "config": CONFIG_EXAMPLE,
    "policy": POLICY_EXAMPLE,
    "policy-replace": POLICY_REPLACE_EXAMPLE,
}


def _flag(names, key, kind, metavar, group, text, goes_with="", setting=None) -> dict:
    return {
        "names": names,
        "key": key,
        "kind": kind,
        "metavar": metavar,
        "group": group,
        "help": text,
        "with": goes_with,
        "setting": setting,
    }


def _tool_choices() -> str:
    """The tools --tool takes, from TOOL_TABLE: "answer (default), ... or answer_deep (when
    tools.answer_deep is on)"."""
    words = [
        row["name"] + (f" (when tools.{row['name']} is on)" if row.get("opt_in") else "")
        for row in TOOL_TABLE
    ]
    words[0] += " (default)"
    return ", ".join(words[:-1]) + " or " + words[-1]


# Every flag, one row each (a flag with several forms, --user, one row a form: parse_args reads
# the first). parse_args reads what a flag is from here, did-you-mean the names it offers and
# --help its text, under its group; docs/cli.md has a row for each (tests/test_cli.py checks
# both ways). names: the flag, then its short form. kind: switch (on when given), setting (a
# switch that sets the config key `setting`, which shows it as the source), value (given once),
# values (repeats, each kept), optional (takes the next word unless it is a flag). with: the
# flag or mode it goes with, said first in its help.
_IN_SERVE, _IN_ASK, _IN_CONFIG, _IN_CHECK, _IN_STATE, _IN_ABOUT = (
    "serve MCP",
    "answer one question here",
    "config",
    "check the setup",
    "spend and users (state.path or state.url)",
    "this program",
)
FLAG_TABLE = (
    _flag(("--stdio",), "stdio", "switch", "", _IN_SERVE,
          "serve MCP on stdin/stdout (what MCP clients launch)"),
    _flag(("--http",), "http", "value", "[HOST:]PORT", _IN_SERVE,
          "serve MCP over HTTP at /mcp (legacy SSE at /sse, health at /healthz); HOST defaults "
          "to 127.0.0.1, PORT 0 picks a free port"),
    _flag(("--stateless",), "stateless", "setting", "", _IN_SERVE,
          "no sessions, so any instance can answer any request", "--http",
          ("server", "http", "stateless")),
    _flag(("--http-token",), "http_token", "value", "TOKEN", _IN_SERVE,
          "require 'Authorization: Bearer TOKEN' (better: set the environment variable "
          "MCP_HTTP_TOKEN, which other users cannot see)", "--http"),
    _flag(("--http-allow-insecure",), "http_allow_insecure", "setting", "", _IN_SERVE,
          "allow a non-loopback HOST without a token (only behind a proxy that "
          "authenticates)", "--http", ("server", "http", "allow_insecure")),
    _flag(("--ask",), "ask", "value", "QUERY", _IN_ASK,
          "answer one question: the answer, its sources and cost on a terminal, the result "
          "JSON when piped or with --json (checks key, model, config); a question that starts "
          "with '-' goes as --ask=\"-x?\" or --ask -- \"-x?\""),
    _flag(("--file",), "files", "values", "PATH", _IN_ASK,
          "attach a file (a path, https:// or data: URL) as the tools' `files` do, same checks "
          "and limits (files.*); repeatable", "--ask"),
    _flag(("--tool",), "tool", "value", "NAME", _IN_ASK, "{tools}", "--ask"),
    _flag(("--config",), "config", "value", "PATH", _IN_CONFIG,
          "YAML config file (default: {default_config})"),
    _flag(("--model",), "model", "value", "ID", _IN_CONFIG,
          "model for the answer tool (overrides config and MODEL_ANSWER)"),
    _flag(("--debug",), "debug", "optional", "[PATH]", _IN_CONFIG,
          "debug lines on stderr, and appended to PATH if given"),
    _flag(("--show-config",), "show_config", "switch", "", _IN_CONFIG,
          "print the effective config and where each value came from, to stderr"),
    _flag(("--print-example",), "print_example", "value", "|".join(EXAMPLES), _IN_CONFIG,
          "print the shipped config.yaml example, or a policy.system file example (policy: "
          "rules to append; policy-replace: the built-in policy to edit)"),
    _flag(("--doctor",), "doctor", "switch", "", _IN_CHECK,
          "check the installation, config, key, endpoint and models, one line per check with "
          "its fix (exit 1 if any fails), then print the lines that add this server to Claude "
          "Code, Codex CLI and Cursor"),
    _flag(("--live",), "live", "switch", "", _IN_CHECK,
          "also make one small real answer and print its cost", "--doctor"),
    _flag(("--usage",), "usage", "switch", "", _IN_STATE,
          "print spend by day, model and tool from the usage ledger"),
    _flag(("--since",), "since", "value", "YYYY-MM-DD", _IN_STATE,
          "only from this day on (in policy.timezone)", "--usage"),
    _flag(("--json",), "json", "switch", "", _IN_STATE,
          "print JSON instead of text (--ask prints JSON anyway when its output is not a "
          "terminal)", "--ask, --usage or --user list"),
    _flag(("--user",), "user", "value", "add NAME", _IN_STATE,
          "add a named user for --http: prints its new token once, alone on the last line "
          "(only a hash is kept in the state); every --http server on the same state then "
          "requires a token, even on 127.0.0.1"),
    _flag(("--user",), "user", "value", "list", _IN_STATE,
          "list the users (never a token), with their allowances"),
    _flag(("--user",), "user", "value", "revoke NAME", _IN_STATE,
          "revoke a user's token: running servers refuse it within seconds (--user add NAME "
          "later gives a new one, keeping its allowances)"),
    _flag(("--user",), "user", "value", "rotate NAME", _IN_STATE,
          "give a user a new token (printed once, as by add); the old one is refused within "
          "seconds; allowances and usage stay"),
    _flag(("--user",), "user", "value", "limit NAME", _IN_STATE,
          "set a user's own allowances (--daily-usd, --monthly-usd)"),
    _flag(("--daily-usd",), "daily_usd", "value", "X", _IN_STATE,
          "this user's daily allowance in USD (over budget.per_user_daily_usd; with limit, "
          "none: back to that)", "--user add NAME or --user limit NAME"),
    _flag(("--monthly-usd",), "monthly_usd", "value", "Y", _IN_STATE,
          "this user's monthly allowance in USD (over budget.per_user_monthly_usd; with limit, "
          "none: back to that)", "--user add NAME or --user limit NAME"),
    _flag(("--upgrade-state",), "upgrade_state", "switch", "", _IN_STATE,
          "upgrade the state to this version's schema now, with the --http server's config "
          "(an upgrade may need its server.auth.issuer), and file under that issuer OAuth "
          "subjects an earlier upgrade left without it"),
    _flag(("--from-issuer",), "from_issuer", "value", "URL", _IN_STATE,
          "also file under server.auth.issuer the subjects an upgrade filed under URL (a "
          "mistyped issuer; --doctor names them)", "--upgrade-state"),
    _flag(("--version", "-V"), "version", "switch", "", _IN_ABOUT, "print the version"),
    _flag(("--help", "-h"), "help", "switch", "", _IN_ABOUT, "print this help"),
)  # fmt: skip


def _first_rows(table: tuple) -> dict:
    """Each name (short forms too) to the first row of its flag, in the table's order (the
    order did-you-mean weighs equally close names in)."""
    index: dict = {}
    for row in table:
        for name in row["names"]:
            index.setdefault(name, row)
    return index


FLAGS = _first_rows(FLAG_TABLE)


def _wrap(text: str, width: int) -> list[str]:
    """`text` in lines of at most `width` characters, broken between words."""
    lines = [""]
    for word in text.split():
        if lines[-1] and len(lines[-1]) + 1 + len(word) > width:
            lines.append(word)
        else:
            lines[-1] = f"{lines[-1]} {word}".lstrip()
    return lines


HELP_WIDTH, HELP_COLUMN = 96, 21


def help_text() -> str:
    """--help: the usage, then every FLAG_TABLE row under its group."""
    tools = [row["name"] for row in TOOL_TABLE]
    opt_in = [row["name"] for row in TOOL_TABLE if row.get("opt_in")]
    about = (
        f"An MCP server: each call of its tools {', '.join(tools[:-1])} and {tools[-1]}"
        + "".join(f" ({name} only when tools.{name} is on)" for name in opt_in)
        + " becomes one OpenAI Responses API request with web search allowed, returning"
        " {answer, used_search, citations[{url, title, published_at}], model}."
    )
    lines = [USAGE, "", *_wrap(about, HELP_WIDTH)]
    for group in dict.fromkeys(row["group"] for row in FLAG_TABLE):
        lines += ["", f"{group}:"]
        for row in FLAG_TABLE:
            if row["group"] == group:
                lines += _help_lines(row)
    key_line = "The API key is read from the environment variable OPENAI_API_KEY"
    lines += ["", f"{key_line} (openai.api_key_env).", ""]
    return "\n".join(lines)


def _help_lines(row: dict) -> list[str]:
    label = "  " + ", ".join(sorted(row["names"], key=len))
    label += f" {row['metavar']}" if row["metavar"] else ""
    text = f"with {row['with']}: {row['help']}" if row["with"] else row["help"]
    text = text.replace("{tools}", _tool_choices())
    text = text.replace("{default_config}", default_config_path(dict(os.environ)))
    wrapped = _wrap(text, HELP_WIDTH - HELP_COLUMN)
    indent = " " * HELP_COLUMN
    if len(label) >= HELP_COLUMN:  # a long label: its help starts on the next line
        return [label, *(indent + line for line in wrapped)]
    return [label.ljust(HELP_COLUMN) + wrapped[0], *(indent + line for line in wrapped[1:])]


STDIO_ON_A_TERMINAL = f"""\
{SERVER_NAME}: waiting for an MCP client on stdin: --stdio is what a client (Claude Code,
Codex, Cursor) starts, not a prompt for people. Instead:
  {SERVER_NAME} --ask "your question"   answer one question here
  {SERVER_NAME} --doctor                check the setup and print the lines that add it
Ctrl-D or Ctrl-C ends.
"""


class UsageError(Exception):
    pass


# -- Parsing: the command line read, a mistyped flag named -------------------------------------


def parse_args(argv: list[str]) -> dict:
    """The command line as a dict of options; raises UsageError for anything unknown."""
    options: dict = {"debug": None, "settings": {}, "files": []}
    args = list(argv)
    while args:
        arg = args.pop(0)
        name, equals, inline = arg.partition("=")
        row = FLAGS.get(name)
        kind = row["kind"] if row else None
        if kind == "value":
            _read_value(options, name, row["key"], inline if equals else None, args)
        elif kind == "values":  # repeatable: each one a file for --ask
            value = inline if equals else args.pop(0) if args else ""
            if not value.strip():
                raise UsageError("--file needs a path: --ask QUESTION --file PATH")
            if value.startswith("-") and not equals:  # a flag, read as a path to a file
                flag = value.partition("=")[0]
                raise UsageError(
                    f"--file needs a path, not the flag {flag!r} (a file named -x: ./-x)"
                )
            options[row["key"]].append(value)
        elif kind == "optional":
            if equals:
                options[row["key"]] = inline or True
            elif args and not args[0].startswith("-"):
                options[row["key"]] = args.pop(0)
            else:
                options[row["key"]] = True
        elif equals and kind in ("switch", "setting"):  # --json=1: not "--json?"
            raise UsageError(f"{name} takes no value: give it alone, without '='")
        elif kind == "switch":
            options[row["key"]] = True
        elif kind == "setting":  # a flag that sets a config key (and shows as its source)
            options["settings"][row["setting"]] = (True, arg)
        else:
            asked = bool(options.get("ask"))
            # The name only: what follows "=" may be a token typed into a mistyped flag.
            raise UsageError(f"unknown option {name!r}{_did_you_mean(name, list(FLAGS), asked)}")
    if options.get("http_token"):
        options["settings"][("server", "http", "token")] = (options["http_token"], "--http-token")
    if options.get("http") is not None:
        try:
            options["http"] = parse_listen(options["http"])
        except ValueError:
            raise UsageError("--http takes [HOST:]PORT, like 8080 or 127.0.0.1:8080") from None
        if options.get("stdio") or options.get("ask"):
            raise UsageError("--http cannot be combined with --stdio or --ask; pick one")
    elif options["settings"]:
        raise UsageError(
            f"{options['settings'][next(iter(options['settings']))][1]} goes with --http"
        )
    if options.get("print_example") and options["print_example"] not in EXAMPLES:
        raise UsageError("--print-example takes config, policy or policy-replace")
    if options.get("tool") and options["tool"] not in TOOL_NAMES:
        raise UsageError(f"--tool must be one of {', '.join(TOOL_NAMES)}")
    if options.get("tool") and not options.get("ask"):
        raise UsageError("--tool goes with --ask")
    if options["files"] and not options.get("ask"):
        raise UsageError("--file goes with --ask")
    if options.get("ask") and options.get("stdio"):
        raise UsageError("--ask and --stdio cannot be combined")
    if options.get("live") and not options.get("doctor"):
        raise UsageError("--live goes with --doctor")
    if options.get("doctor") and (options.get("stdio") or options.get("ask")):
        raise UsageError("--doctor cannot be combined with --stdio or --ask")
    _check_usage_options(options)
    _check_user_options(options)
    if options.get("from_issuer") and not options.get("upgrade_state"):
        raise UsageError("--from-issuer goes with --upgrade-state")
    if options.get("upgrade_state"):
        others = ("stdio", "http", "ask", "usage", "user", "doctor", "show_config")
        if any(options.get(name) for name in others):
            raise UsageError("--upgrade-state goes alone (with --config)")
    return options


def _read_value(options: dict, name: str, key: str, inline: str | None, args: list[str]) -> None:
    """The value of a flag that takes one (`inline`: what followed its "=")."""
    if key in options:  # the last one won unsaid: --ask q1 --ask q2 billed q2 alone
        raise UsageError(f"{name} given twice; give it once")
    if inline is not None:
        value = inline
    elif name == "--ask":
        value = _ask_question(args)
    elif args:
        value = args.pop(0)
    else:
        raise UsageError(f"{name} needs a value")
    if not value.strip():
        raise UsageError(f"{name} needs a non-empty value")
    options[key] = value
    if name == "--user" and value not in USER_ACTIONS:
        raise UsageError(
            f"--user takes add NAME, list, revoke NAME, rotate NAME or limit NAME, not {value!r}"
        )
    if name == "--user" and value != "list":
        if not args or args[0].startswith("-"):
            raise UsageError(f"--user {value} needs a user name")
        options["user_name"] = args.pop(0)


ASK_DASH_HINT = 'a question that starts with \'-\' goes as --ask="-x?" or --ask -- "-x?"'


def _ask_question(args: list[str]) -> str:
    """The word after --ask, which must be a question: a flag there (`--ask --json`) would be
    sent, and billed, as the question. `--ask -- "-x?"` takes the word after `--` whatever it
    is (so does `--ask="-x?"`, read by the caller)."""
    if not args:
        raise UsageError('--ask needs a question: --ask "your question"')
    word = args.pop(0)
    if word == "--":
        if not args:
            raise UsageError(f"--ask -- needs a question after it; {ASK_DASH_HINT}")
        return args.pop(0)
    if word.startswith("-") or _typographic_flag(word):
        flag = word.partition("=")[0]  # named only by its flag: what follows "=" may be a token
        raise UsageError(
            f"--ask takes the question right after it, not the flag {flag!r}; " + ASK_DASH_HINT
        )
    return word


def _typographic_flag(word: str) -> bool:
    """`—json` (a pasted command's "--json" turned into a dash): a flag, not a question."""
    return (
        word[:1] in TYPOGRAPHIC_DASHES
        and " " not in word
        and word.lstrip(TYPOGRAPHIC_DASHES)[:1].isalpha()
    )


# Words people type for a flag by another name: what --help calls it.
FLAG_ALIASES = {
    "--query": "--ask",
    "--question": "--ask",
    "--prompt": "--ask",
    "--q": "--ask",
    "--search": "--ask",
    "--attach": "--file",
    "--files": "--file",
    "--check": "--doctor",
    "--diagnose": "--doctor",
    "--selftest": "--doctor",
    "--self-test": "--doctor",
    "--verbose": "--debug",
    "-v": "--debug",
    "--serve": "--http",
    "--port": "--http",
    "--listen": "--http",
    "--token": "--http-token",
    "--cfg": "--config",
    "--config-file": "--config",
    "--example": "--print-example",
    "--cost": "--usage",
    "--costs": "--usage",
    "--spend": "--usage",
    "--stats": "--usage",
    "--users": "--user",
    "--mcp": "--stdio",
    "--output": "--json",
    "--format": "--json",
}


# Dashes a keyboard, a word processor or a chat app puts where "--" was typed ("—ask").
TYPOGRAPHIC_DASHES = "\u2010\u2011\u2012\u2013\u2014\u2015\u2212\ufe63\uff0d"


def _did_you_mean(word: str, known: list[str], asked: bool = False) -> str:
    """ "; did you mean --doctor?" for a mistyped flag or one by another name (--query: --ask);
    for a stray word after --ask, the quotes its question lacked."""
    if word[:1] in TYPOGRAPHIC_DASHES and word.lstrip(TYPOGRAPHIC_DASHES):  # — or – for --
        meant = _did_you_mean("--" + word.lstrip(TYPOGRAPHIC_DASHES + "-"), known)
        said = " (it starts with a typographic dash, not two hyphens)"
        return meant + said if "did you mean" in meant else meant
    if not word.startswith("-"):
        if asked:
            return ' (a question with spaces goes in quotes: --ask "...")'
        return "; --help lists the options"
    candidates = [flag for flag in known if flag.startswith("--")]
    typed = (word if word.startswith("--") else "-" + word).lower()
    meant = FLAG_ALIASES.get(word.lower()) or FLAG_ALIASES.get(typed)
    if meant is None:
        meant = _nearest_flag(typed, candidates)
    return f"; did you mean {meant}?" if meant else "; --help lists the options"


def _nearest_flag(typed: str, candidates: list[str]) -> str | None:
    """The flag `typed` is a typo of (a few edits, fewer for a short word) or the one flag it
    begins; None when nothing is that close: a far guess (--query: --user) misleads."""
    starting = [flag for flag in candidates if flag.startswith(typed)]
    if len(typed) >= 5 and len(starting) == 1:
        return starting[0]
    stem = len(typed.lstrip("-"))
    allowed = 1 if stem <= 4 else 2
    scored = sorted((_edit_distance(typed, flag), i) for i, flag in enumerate(candidates))
    if scored and scored[0][0] <= allowed:
        return candidates[scored[0][1]]
    return None


def _edit_distance(a: str, b: str) -> int:
    """Insertions, deletions, substitutions and swaps of two neighbours that turn a into b."""
    rows = [list(range(len(b) + 1))]
    for i, char in enumerate(a, 1):
        row = [i]
        for j, other in enumerate(b, 1):
            best = min(rows[-1][j] + 1, row[j - 1] + 1, rows[-1][j - 1] + (char != other))
            if i > 1 and j > 1 and char == b[j - 2] and a[i - 2] == other:
                best = min(best, rows[-2][j - 2] + 1)
            row.append(best)
        rows.append(row)
    return rows[-1][-1]


USER_ACTIONS = ("add", "list", "revoke", "rotate", "limit")


def _check_user_options(options: dict) -> None:
    """--user ACTION [NAME] [--daily-usd X] [--monthly-usd Y]: the allowances as numbers
    (with limit, `none` too: back to the per-user default)."""
    action = options.get("user")
    if action == "limit" and options.get("daily_usd") is options.get("monthly_usd") is None:
        raise UsageError("--user limit NAME needs --daily-usd X and/or --monthly-usd Y")
    for flag, key in (("--daily-usd", "daily_usd"), ("--monthly-usd", "monthly_usd")):
        if options.get(key) is None:
            continue
        if action not in ("add", "limit"):
            raise UsageError(f"{flag} goes with --user add NAME or --user limit NAME")
        if action == "limit" and options[key].strip().lower() == "none":
            options[key] = ALLOWANCE_DEFAULT
            continue
        try:
            amount = float(options[key])
        except ValueError:
            amount = -1.0
        if not (0 <= amount <= 1_000_000) or amount != amount:
            raise UsageError(f"{flag} takes dollars from 0 to 1000000, got {options[key]!r}")
        options[key] = amount
    if action is None:
        return
    if options.get("stdio") or options.get("http") or options.get("ask") or options.get("usage"):
        raise UsageError("--user cannot be combined with --stdio, --http, --ask or --usage")


def _check_usage_options(options: dict) -> None:
    if options.get("since") and not options.get("usage"):
        raise UsageError("--since goes with --usage")
    if options.get("json") and not (
        options.get("usage") or options.get("user") == "list" or options.get("ask")
    ):
        raise UsageError("--json goes with --ask, --usage or --user list")
    if options.get("usage") and (options.get("stdio") or options.get("ask") or options.get("http")):
        raise UsageError("--usage cannot be combined with --stdio, --http or --ask")
    since = options.get("since")
    if since is not None:
        import datetime

        try:
            datetime.date.fromisoformat(since)
            valid = len(since) == 10
        except ValueError:
            valid = False
        if not valid:
            raise UsageError(f"--since takes a date like 2026-11-01, got {since!r}")


# -- Commands: --usage, --user, --upgrade-state, --ask -----------------------------------------


def write_json(value) -> None:
    """`value` as JSON on stdout, inert: its characters as they are where stdout can show them,
    else as \\u escapes (still the same JSON), never a UnicodeEncodeError after the answer was
    paid for (issue 39: a Windows pipe's cp1252, PYTHONIOENCODING=ascii)."""
    try:
        sys.stdout.write(inert(json.dumps(value, ensure_ascii=False, indent=2), json_text=True))
    except UnicodeEncodeError:  # nothing was written: the text is encoded before it goes out
        sys.stdout.write(inert(json.dumps(value, indent=2), json_text=True))
    sys.stdout.write("\n")


def write_text(text: str) -> None:
    """Text for a person on stdout, a character its encoding cannot show as "?"."""
    try:
        sys.stdout.write(text)
    except UnicodeEncodeError:
        encoding = sys.stdout.encoding or "utf-8"
        sys.stdout.write(text.encode(encoding, "replace").decode(encoding))


def run_usage(config: Config, log: Log, since: str | None, as_json: bool) -> int:
    """--usage: the ledger's spend by day, model and tool, with totals, on stdout."""
    path = state_path(config)
    if not state_enabled(config):
        print(f"{SERVER_NAME}: state.path is off, so no usage is recorded", file=sys.stderr)
        return 1
    timezone = config.get("policy", "timezone")
    backend = state_backend(config)
    if backend.postgres or os.path.exists(path):
        state = StateStore(backend, log, timezone)
        try:
            report = Ledger(state, timezone).report(since)
        except StateUnavailable:
            return 1  # the warning said why
        finally:
            state.close()
    else:
        report = {"since": since, "timezone": timezone}
        report.update(by_day=[], by_model=[], by_tool=[], by_user=[], total=_usage_row_empty())
    report["state_path"] = path if path else redact_url(config.get("state", "url"))
    if as_json:
        write_json(report)
        return 0
    write_text(format_usage(report))
    return 0


def run_user(config: Config, log: Log, options: dict) -> int:
    """--user add|list|revoke: the named users in the state (exit 2 for a bad name or an
    unknown user, 1 when the state cannot be reached)."""
    action, name = options["user"], options.get("user_name", "")
    if not state_enabled(config):
        print(f"{SERVER_NAME}: --user needs the state (state.path is off)", file=sys.stderr)
        return 2
    problem = user_name_problem(name) if action in ("add", "limit") else None
    if problem and action == "limit" and Identity.names_another_kind(name):
        problem = (
            f"{name[:80]!r} is not a named user: an OAuth subject's and shared's allowance is "
            "budget.per_user_daily_usd / budget.per_user_monthly_usd in the config"
        )
    if problem:
        print(f"{SERVER_NAME}: error: {inert(problem)}", file=sys.stderr)
        return 2
    state = StateStore(state_backend(config), log, config.get("policy", "timezone"))
    users = UserDirectory(state)
    try:
        if action == "list":
            return _print_users(users.listing(), bool(options.get("json")))
        if action == "revoke":
            users.revoke(name)
            print(f"user {name} revoked: running servers refuse its token within seconds")
            return 0
        if action == "limit":
            kept = users.limit(name, options.get("daily_usd"), options.get("monthly_usd"))
            print(f"user {name}'s allowance: {allowance_words(kept)}")
            return 0
        return _new_token(users, action, name, options)
    except ValueError as exc:
        print(f"{SERVER_NAME}: error: {inert(str(exc))}", file=sys.stderr)
        return 2
    except StateUnavailable:
        return 1  # the warning said why
    finally:
        state.close()


def _new_token(users: UserDirectory, action: str, name: str, options: dict) -> int:
    """--user add (a revoked name's allowances kept unless given) or --user rotate: the new
    token, alone on the last line."""
    import secrets

    token = NAMED_TOKEN_PREFIX + secrets.token_urlsafe(32)
    if action == "rotate":
        kept = users.rotate(name, token)
        said = (
            f"user {name}'s token rotated: running servers refuse the old one within seconds; "
            f"its allowance ({allowance_words(kept)}) and usage stay"
        )
    else:
        kept, again = users.add(name, token, options.get("daily_usd"), options.get("monthly_usd"))
        said = f"user {name} added" + (
            f" again, its allowance kept unless given ({allowance_words(kept)}), and its "
            "history: its spend, conversations (response ids) and tasks are this user's (for "
            "another person, pick another name)"
            if again
            else ""
        )
    print(f"{said}; its token follows, shown once (only a hash is kept):")
    print(token)
    return 0


def allowance_words(allowance: tuple) -> str:
    """(daily, monthly) as --user prints it: daily $2.00, monthly: the per-user default."""
    return ", ".join(
        f"{label} {usd(amount)}" if amount is not None else f"{label}: the per-user default"
        for label, amount in zip(("daily", "monthly"), allowance, strict=True)
    )


def run_upgrade_state(config: Config, log: Log, from_issuer: str | None = None) -> int:
    """--upgrade-state: the state upgraded to this version's schema with this config (the
    upgrade to 7 needs server.auth.issuer while the store holds OAuth subjects), and subjects
    filed without their issuer (oauth:#<sub>, or bare: see misfiled_subjects) filed under this
    config's (issue 39); with --from-issuer, those of that issuer too (a mistyped one).
    Exit 1 when the state cannot be reached or refuses (the error says why)."""
    if not state_enabled(config):
        print(
            f"{SERVER_NAME}: --upgrade-state needs the state (state.path is off)", file=sys.stderr
        )
        return 2
    backend = state_backend(config)
    from_issuer = (from_issuer or "").strip() or None
    problem = _from_issuer_problem(from_issuer, backend.oauth_issuer) if from_issuer else None
    if problem:
        print(f"{SERVER_NAME}: --from-issuer: {problem}", file=sys.stderr)
        return 2
    before = _schema_before(backend)
    state = StateStore(backend, log, config.get("policy", "timezone"))

    def work(q) -> tuple:
        moved = refile_issuer(backend, q, from_issuer) if from_issuer else 0
        repaired = refile_subjects(backend, q)
        return repaired, len({n for _, n, _ in misfiled_subjects(q)}), moved

    try:
        repaired, left, moved = state.report("upgrading the state", work)
    except StateUnavailable:
        return 1  # the error said why
    finally:
        state.close()
    was = "new" if before is None else f"schema {before}"
    print(f"{backend.label}: {was}, now schema {STATE_SCHEMA_VERSION}")
    if from_issuer:
        issuer, old = backend.oauth_issuer.rstrip("/"), from_issuer.rstrip("/")
        if moved:
            print(f"{moved} OAuth subject(s) of {old} are now filed under {issuer}")
        else:
            print(
                f"{SERVER_NAME}: warning: no OAuth subject is filed under {old} (--doctor names "
                "the issuers the state files subjects under)",
                file=sys.stderr,
            )
    if repaired:
        print(
            f"{repaired} OAuth subject(s) filed without their issuer (oauth:#<sub>, or a bare "
            f"name an older host wrote) are now filed under {backend.oauth_issuer.rstrip('/')}"
        )
    if left:
        print(
            f"{SERVER_NAME}: warning: {left} OAuth subject(s) are filed without their issuer "
            "(oauth:#<sub>, or a bare name an older host wrote): run --upgrade-state again with "
            "the --http server's --config",
            file=sys.stderr,
        )
    return 0


def _from_issuer_problem(old: str, issuer: str | None) -> str | None:
    """Why --upgrade-state cannot file the subjects of issuer `old` under this config's."""
    if not (issuer or "").strip():
        return "the --config names no server.auth.issuer to file its subjects under"
    if not re.fullmatch(r"https?://[^\s#]+", old.strip()):
        return f"{old[:80]!r} is not an issuer URL (https://..., as oauth:ISSUER#SUB shows it)"
    if old.strip().rstrip("/") == issuer.strip().rstrip("/"):
        return "it is this config's server.auth.issuer: its subjects are filed under it already"
    return None


def _schema_before(backend) -> int | None:
    """The store's schema version as it is, or None when it is new (nothing made here)."""
    if not backend.postgres and not os.path.exists(backend.path):
        return None
    try:
        conn = backend.connect()
    except backend.errors():
        return None  # the upgrade itself says why
    try:
        version = _stored_version(backend, conn)
        return 1 if version is None and backend.has_table(conn, "usage") else version
    except (*backend.errors(), StateUnavailable):
        return None  # the upgrade itself says why
    finally:
        conn.close()


def _print_users(rows: list, as_json: bool) -> int:
    import datetime

    def when(epoch) -> str | None:
        if epoch is None:
            return None
        moment = datetime.datetime.fromtimestamp(float(epoch), datetime.timezone.utc)
        return moment.strftime("%Y-%m-%dT%H:%M:%SZ")

    shown = [
        {
            "name": row["name"],
            "created_at": when(row["created_at"]),
            "revoked_at": when(row["revoked_at"]),
            "daily_usd": row["daily_usd"],
            "monthly_usd": row["monthly_usd"],
        }
        for row in rows
    ]
    if as_json:
        sys.stdout.write(inert(json.dumps({"users": shown}, indent=2), json_text=True) + "\n")
        return 0
    if not shown:
        print("no users (add one with --user add NAME)")
    for row in shown:
        status = f"revoked {row['revoked_at']}" if row["revoked_at"] else "active"
        daily, monthly = row["daily_usd"], row["monthly_usd"]
        allowance = ", ".join(
            f"{label} {usd(amount)}"
            for label, amount in (("daily", daily), ("monthly", monthly))
            if amount is not None
        )
        line = f"{row['name']}  created {row['created_at']}  {status}"
        print(inert(line + (f"  allowance: {allowance}" if allowance else "")))
    return 0


_USAGE_TABLES = (("by day", "by_day", "day"), ("by model", "by_model", "model"))
_USAGE_TABLES += (("by tool", "by_tool", "tool"),)


def format_usage(report: dict) -> str:
    """The --usage tables, for people. Model names come from the API (or a gateway): they are
    shown inert, whole, and the first column is as wide as the widest of them."""
    since = f" since {report['since']}" if report["since"] else ""
    lines = [inert(f"usage{since} ({report['timezone']}; {report['state_path']})")]
    labels = {
        name: [inert(str(row[column])) for row in report[name]] for _, name, column in _USAGE_TABLES
    }
    # OAuth subjects' labels name their issuer: often the widest of all.
    labels["by_user"] = [inert(Identity.of_row(row).label) for row in report.get("by_user") or ()]
    width = max([28] + [_shown_width(label) for names in labels.values() for label in names])
    for title, name, _ in _USAGE_TABLES:
        head = f"{_pad(title, width)} {'calls':>7} {'from cache':>10} {'searches':>8} {'USD':>12}"
        lines += ["", head]
        for label, row in zip(labels[name], report[name], strict=True):
            lines.append(_usage_line(label, row, width))
    if report.get("by_user"):
        lines += ["", f"{_pad('by user', width)} {'calls':>7} {'USD':>32}"]
        for label, row in zip(labels["by_user"], report["by_user"], strict=True):
            lines.append(f"{_pad(label, width)} {row['calls']:>7} {row['usd']:>32.4f}")
    lines += ["", _usage_line("total", report["total"], width)]
    if report["total"]["unpriced"]:
        lines.append(
            f"({report['total']['unpriced']} calls had no known price: set pricing.models)"
        )
    return "\n".join(lines) + "\n"


def _usage_line(label: str, row: dict, width: int = 28) -> str:
    return (
        f"{_pad(label, width)} {row['calls']:>7} {row['cache_hits']:>10} "
        f"{row['web_searches']:>8} {row['usd']:>12.4f}"
    )


def _shown_width(text: str) -> int:
    """Terminal columns `text` takes: wide (CJK) characters take two, combining marks none."""
    import unicodedata

    if text.isascii():
        return len(text)
    return sum(
        0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1
        for c in text
    )


def _pad(text: str, width: int) -> str:
    return text + " " * (width - _shown_width(text))


def run_ask(
    config: Config, log: Log, query: str, tool: str, as_json: bool = True, files: tuple = ()
) -> int:
    """The one-shot command: prints the answer (exit 0), as JSON for a program or as text for
    a person on a terminal, or the error to stderr (exit 1). `files` (--file) are read as a
    tool call's `files` on stdio from a client without roots: inside the working directory
    and files.allowed_dirs, secrets refused, within files.max_*."""
    if tool not in enabled_tools(config):  # answer_deep costs dollars: on only when asked for
        print(
            f"{SERVER_NAME}: --tool {tool} is off: set tools.{tool}: true or MCP_ANSWER_DEEP=1",
            file=sys.stderr,
        )
        return 2
    try:
        args = validate_arguments(
            tool, {"query": query, **({"files": list(files)} if files else {})}
        )
    except InvalidParams as exc:
        print(f"{SERVER_NAME}: {inert(str(exc))}", file=sys.stderr)
        return 2
    sent = []
    if args.get("files"):
        try:  # all or nothing, before anything is sent
            sent = FileReader(config).read(args["files"], allowed_dirs(config, None))
        except FileRefused as exc:
            print(f"answer failed: {inert(str(exc))}", file=sys.stderr)
            return 1
        args["files"] = sent

    def progress(count: int, message: str) -> None:
        log.say(f"{message}…")

    window = config.completion_window(tool)
    if window in WINDOW_FACTORS:  # a discounted run: said first, since it may take hours
        log.say(
            f"{tool} runs in the {window} window (model_profiles.{tool}.completion_window): "
            f"the answer may take up to {window.rstrip('h')} hours; Ctrl-C cancels it"
        )
    call = Call(None, tool, progress if sys.stderr.isatty() else None)
    engine = build_engine(config, log)
    try:
        answer, meta = engine.answer(tool, args, call)
    except ToolError as exc:  # redacted as a tool error is (a key or password it quotes)
        print(f"answer failed: {inert(log.redact(exc.message))}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        call.cancel()
        return 130
    finally:
        engine.close()
    if sent:
        meta = {**meta, "files": [f.summary() for f in sent]}
    if not as_json:
        write_text(format_answer(answer, meta))
        return 0
    write_json({**answer, "_meta": meta})
    return 0


def format_answer(answer: dict, meta: dict) -> str:
    """--ask on a terminal: the answer with its Sources section, then one line of what it
    cost; text from the API is shown inert (no terminal escapes)."""
    searched = "web search" if answer["used_search"] else "no web search"
    cited = len(answer["citations"])
    tail = f"{answer['model']}, {searched}, {cited} citation(s); cost: {_cost_words(meta)}"
    lines = [inert(line) for line in answer["answer"].rstrip().split("\n")]
    return "\n".join([*lines, "", f"-- {inert(tail)}"]) + "\n"


# -- --doctor: a self-check for a person setting the server up ---------------------------------

DOCTOR_TIMEOUT_S = 15.0
DOCTOR_QUERY = "Search the web: what is the latest stable Python release? One short sentence."


class Doctor:
    """Prints one line per check: ✓ passed, ✗ failed (with its fix), ! worth a look, - skipped.

    Every line passes through Log.redact, so neither the API key nor the HTTP token can appear,
    and credentials in a URL (`https://user:password@gateway/v1`, a proxy) are masked.
    """

    MARKS = ("✓", "✗", "!", "-")
    PLAIN = ("ok", "FAIL", "!", "-")  # for a console that cannot show the marks (cp1252)

    def __init__(self, out, secrets: tuple = ()) -> None:
        self.out = out
        self.failures = 0
        self.redact = Log(secrets=secrets).redact
        try:
            "".join(self.MARKS).encode(getattr(out, "encoding", None) or "utf-8")
            self.marks = self.MARKS
        except (UnicodeEncodeError, LookupError):
            self.marks = self.PLAIN

    def line(self, text: str) -> None:
        # ssh's `git@` holds no secret, and masked a `uvx --from git+ssh://git@…` line
        # would not run as printed.
        text = inert(re.sub(r"//(?!git@)[^/@\s]*@", "//***@", text))
        try:
            self.out.write(self.redact(text) + "\n")
            self.out.flush()
        except UnicodeEncodeError:
            self.out.write(self.redact(text).encode("ascii", "replace").decode() + "\n")

    def ok(self, text: str) -> None:
        self.line(f"{self.marks[0]} {text}")

    def fail(self, text: str, fix: str) -> None:
        self.failures += 1
        self.line(f"{self.marks[1]} {text}")
        self.line(f"    fix: {fix}")

    def warn(self, text: str, fix: str = "") -> None:
        self.line(f"{self.marks[2]} {text}")
        if fix:
            self.line(f"    fix: {fix}")

    def skip(self, text: str) -> None:
        self.line(f"{self.marks[3]} {text}")

    def detail(self, text: str) -> None:
        self.line(f"    {text}")

    def finish(self) -> int:
        """The summary line and the exit status: 1 if any check failed."""
        self.line("")
        if self.failures:
            self.line(f"{self.failures} check(s) failed.")
            return 1
        self.line("All checks passed.")
        return 0


def _doctor_versions(doctor: Doctor) -> bool:
    """Python and openai; False when openai cannot be imported (nothing below can run)."""
    python = ".".join(map(str, sys.version_info[:3]))
    where = f"{SERVER_NAME} {__version__}, Python {python} ({sys.executable})"
    openai, problem = load_openai()
    if problem:
        install = f'{sys.executable} -m pip install "{OPENAI_REQUIREMENT}"'
        doctor.fail(f"{where}; {problem.rpartition('; ')[0]}", install)
        # The one line every entry point gives, for a script that reads stderr only.
        print(f"{SERVER_NAME}: error: {inert(doctor.redact(problem))}", file=sys.stderr)
        return False
    version = getattr(openai, "__version__", "?")
    major = version.split(".")[0]
    if major != "3":
        doctor.warn(
            f"{where}, openai {version} (this release is tested with openai>=3.54,<4)",
            f'{sys.executable} -m pip install "openai>=3.54,<4"',
        )
    else:
        doctor.ok(f"{where}, openai {version}")
    return True


def _doctor_config(doctor: Doctor, options: dict) -> Config | None:
    try:
        config = load_config(options)
    except ConfigError as exc:
        doctor.fail(f"config: {exc}", "correct the key named above, then run --doctor again")
        return None
    if config.path:
        doctor.ok(f"config file {config.path}")
    else:
        wanted = options.get("config") or default_config_path(dict(os.environ))
        doctor.ok(f"no config file (looked for {wanted}); defaults and environment apply")
    for warning in config.warnings:
        doctor.warn(f"config: {warning}")
    for path, where in sorted(config.sources.items()):
        if where == "default":
            continue
        value = config.get(*path)
        if path == ("state", "url") and value is not None:  # the example's `url: null`
            value = redact_url(value)
        shown = (
            '"***"'
            if path[-1] in ("token", "secret", "client_secret")
            else json.dumps(value, ensure_ascii=False)
        )
        doctor.detail(f"{'.'.join(path)} = {shown} (from {where})")
    doctor.detail("every other value is the default (--show-config prints them all)")
    return config


def _doctor_key(doctor: Doctor, config: Config) -> str | None:
    """The API key, if usable; never printed, not even in part."""
    name = config.get("openai", "api_key_env")
    set_it = (
        f'$env:{name} = "<your key>" in PowerShell'
        if os.name == "nt"
        else f"export {name}=<your key>"
    )
    problem = api_key_problem(config)
    if problem:
        doctor.fail(problem, f"{set_it}, and pass it in your MCP client's env setting (see below)")
        return None
    key = api_key(config)
    note = " (surrounding whitespace is ignored)" if key != os.environ.get(name) else ""
    doctor.ok(f"{name} is set ({len(key)} characters){note}")
    return key


def _network_settings() -> str:
    """The proxy and CA variables in effect, with any proxy password hidden."""
    shown = []
    for name in ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "NO_PROXY", "SSL_CERT_FILE"):
        for variant in (name, name.lower()):
            value = os.environ.get(variant)
            if value:
                shown.append(f"{variant}={value}")  # Doctor.line masks any password
                break
    if os.environ.get("SSL_CERT_DIR"):
        shown.append(f"SSL_CERT_DIR={os.environ['SSL_CERT_DIR']}")
    return ", ".join(shown) if shown else "no proxy or CA variables set"


def _root_cause(exc: BaseException) -> BaseException:
    """The innermost exception under the SDK's APIConnectionError (httpx, then ssl/socket)."""
    seen = set()
    while id(exc) not in seen:
        seen.add(id(exc))
        inner = exc.__cause__ or exc.__context__
        if inner is None:
            break
        exc = inner
    return exc


def describe_connection_error(exc: BaseException, url: str) -> tuple[str, str]:
    """(what happened, what to do) for a failure to reach `url`."""
    import socket
    import ssl

    cause = _root_cause(exc)
    text = " ".join(str(cause).split()) or type(cause).__name__
    host = url.split("//", 1)[-1].split("/", 1)[0].rpartition("@")[2]  # no user:password@
    if isinstance(cause, ssl.SSLCertVerificationError) or "CERTIFICATE_VERIFY_FAILED" in text:
        return (
            f"the TLS certificate of {host} is not trusted ({text})",
            "behind a TLS-inspecting proxy or private gateway, set SSL_CERT_FILE to a PEM "
            "bundle holding its CA",
        )
    if isinstance(cause, ssl.SSLError):
        return (
            f"TLS handshake with {host} failed ({text})",
            "check that openai.base_url uses https:// only where the server speaks TLS",
        )
    if isinstance(cause, socket.gaierror) or "name resolution" in text.lower():
        return (
            f"cannot resolve {host} ({text})",
            "check the host in openai.base_url, your DNS, or set HTTPS_PROXY",
        )
    if "proxy" in type(cause).__name__.lower() or "proxy" in text.lower():
        return (f"the proxy failed ({text})", "check HTTPS_PROXY / HTTP_PROXY and NO_PROXY")
    if isinstance(cause, ConnectionRefusedError) or "refused" in text.lower():
        return (
            f"connection to {host} refused ({text})",
            "nothing listens there: check the port in openai.base_url, or start the gateway",
        )
    if "timeout" in type(cause).__name__.lower() or "timed out" in text.lower():
        return (
            f"no answer from {host} within {DOCTOR_TIMEOUT_S:.0f} s ({text})",
            "a firewall or a needed proxy (HTTPS_PROXY)?",
        )
    return (
        f"cannot connect to {host} ({type(cause).__name__}: {text})",
        "check openai.base_url, the network, and HTTPS_PROXY / NO_PROXY",
    )


def _doctor_client(config: Config, key: str | None):
    import openai

    return openai.OpenAI(
        api_key=key or "no-key-set",  # still shows whether the URL answers at all
        base_url=config.get("openai", "base_url"),
        max_retries=0,
        timeout=DOCTOR_TIMEOUT_S,
    )


def _doctor_endpoint(doctor: Doctor, config: Config, client, key: str | None):
    """base_url reachable, then the key accepted (one GET /models, the only one --doctor
    asks): its JSON when models can be read (the shutdown dates are read from it), else None."""
    import openai

    url = config.get("openai", "base_url")
    where = config.sources.get(("openai", "base_url"), "default")
    try:
        listing = list_models(client)
    except openai.APIStatusError as exc:
        _doctor_status(doctor, exc, url, where, key)
        return None
    except openai.APIConnectionError as exc:
        what, fix = describe_connection_error(exc, url)
        doctor.fail(f"base_url {url} (from {where}) is not reachable: {what}", fix)
        doctor.detail(f"network: {_network_settings()}")
        doctor.skip("key and models not checked (the endpoint could not be reached)")
        return None
    doctor.ok(f"base_url {url} (from {where}) is reachable")
    doctor.detail(f"network: {_network_settings()}")
    if key is None:
        doctor.skip("key not checked (no usable key)")
        return None
    doctor.ok(f"the API key is accepted (GET {url.rstrip('/')}/models)")
    return listing if listing is not None else {}


def _error_code(exc) -> str:
    body = exc.body if isinstance(getattr(exc, "body", None), dict) else {}
    error = body.get("error") if isinstance(body.get("error"), dict) else body
    return str(error.get("code") or error.get("type") or "")


def _error_text(exc) -> str:
    body = exc.body if isinstance(getattr(exc, "body", None), dict) else {}
    error = body.get("error") if isinstance(body.get("error"), dict) else body
    return _one_line(str(error.get("message") or exc.message), 200)


def _doctor_status(doctor: Doctor, exc, url: str, where: str, key: str | None) -> bool:
    """GET /models answered with an error status: the endpoint is reachable, but…"""
    status = exc.status_code
    if status == 401:
        doctor.ok(f"base_url {url} (from {where}) is reachable")
        if key is None:
            doctor.skip("key not checked (no usable key)")
        else:
            doctor.fail(
                f"the API key was rejected (HTTP 401 {_error_code(exc)})".rstrip(),
                "the key is wrong, revoked or for another endpoint: create one at "
                "https://platform.openai.com/api-keys",
            )
        return False
    if status == 404:
        doctor.fail(
            f"base_url {url} (from {where}) answered HTTP 404 to GET /models: {_error_text(exc)}",
            "the URL should end with the API's version path, like https://api.openai.com/v1",
        )
        return False
    if status == 403:
        doctor.ok(f"base_url {url} (from {where}) is reachable")
        doctor.warn(
            f"the key may not list models (HTTP 403: {_error_text(exc)}); models not checked",
            "a restricted key needs read access to Models for this check; answers may work",
        )
        return False
    doctor.fail(
        f"base_url {url} (from {where}) answered HTTP {status}: {_error_text(exc)}",
        "check openai.base_url; if it is right, the service may be down: try again later",
    )
    return False


# -- --doctor's checks: models, state, paths, budget, HTTP -------------------------------------


def _doctor_models(doctor: Doctor, config: Config, client) -> None:
    """Each profile's model available to the key, with an effort and verbosity it accepts."""
    import openai

    available: dict[str, bool] = {}
    for tool in enabled_tools(config):
        profile = config.profile(tool)
        model = profile["model"]
        source = config.sources.get(("model_profiles", tool, "model")) or "inherited from answer"
        if model not in available:
            try:
                client.models.retrieve(model)
                available[model] = True
            except openai.NotFoundError:
                available[model] = False
            except (openai.APIStatusError, openai.APIConnectionError) as exc:
                doctor.warn(
                    f"{tool}: model {model} could not be checked ({_one_line(str(exc), 160)})"
                )
                continue
        if not available[model]:
            doctor.fail(
                f"{tool}: model {model} (from {source}) is not available to this key",
                f"set model_profiles.{tool}.model (or --model / MODEL_ANSWER for answer) to a "
                "model your project can use",
            )
            continue
        problem = _profile_problem(config, tool, profile)
        if problem:
            doctor.fail(*problem)
        else:
            doctor.ok(f"{tool}: model {model} is available{_profile_words(profile)}")


def _doctor_retirements(doctor: Doctor, config: Config, listing, log: Log) -> None:
    """Every profile's model (answer_deep's too) with its shutdown date, from GET /models's
    `listing`: a warning within RETIREMENT_WARN_DAYS of it, a failure once it has come. Odd
    entries are skipped, a --debug line each."""
    dates = shutdown_dates(listing, lambda text: log.debug("doctor", text))
    today = today_in(config.get("policy", "timezone"))
    for tool, model, key in model_settings(config):
        date = shutdown_date_of(dates, model)
        listed = model in dates or _undated(model) in dates
        if not listed:
            doctor.warn(
                f"{tool}: {model} is not listed by GET /v1/models (shut down, or not "
                f"available to this key)",
                retirement_words(model, today, today, key)[2],
            )
        elif not date:
            doctor.ok(f"{tool}: {model} has no shutdown date announced")
        else:
            level, what, fix = retirement_words(model, str(date), today, key)
            if level == "retired":
                doctor.fail(f"{tool}: {what}: calls to it fail", fix)
            elif level == "soon":
                doctor.warn(f"{tool}: {what}", fix)
            else:
                doctor.ok(f"{tool}: {what}")
                doctor.detail(f"then: {fix}")


def _profile_words(profile: dict) -> str:
    model, words = profile["model"], []
    if supports_reasoning(model):
        words.append(f"effort {profile['reasoning_effort']}")
    if supports_verbosity(model):
        words.append(f"verbosity {profile['verbosity']}")
    return f" ({', '.join(words)})" if words else ""


def _profile_problem(config: Config, tool: str, profile: dict) -> tuple[str, str] | None:
    """(what, fix) when the profile's reasoning effort or verbosity is one its model refuses
    (only what the request sends: effort to reasoning models, verbosity to gpt-5 models), or
    its effort is minimal, with which web search cannot run. The fix is the one a refused call
    names (setting_fix)."""
    model = profile["model"]
    for key, accepted in _known_values(model):
        if accepted is not None and profile[key] not in accepted:
            return (
                f"{tool}: model {model} does not accept {key} {profile[key]!r}",
                setting_fix(config, tool, key, profile[key], model, accepted),
            )
    effort = profile.get("reasoning_effort")
    if supports_reasoning(model) and effort == "minimal":
        accepted = accepted_values(model, "reasoning_effort", search=True)
        return (
            f"{tool}: web search cannot run with reasoning_effort 'minimal' (the API refuses it)",
            setting_fix(config, tool, "reasoning_effort", effort, model, accepted, True),
        )
    return None


def writable_problem(path: str) -> str | None:
    """Why `path` could not be appended to, or None if it can (nothing is left behind)."""
    import tempfile

    path = os.path.abspath(os.path.expanduser(path))
    if os.path.isdir(path):
        return "it is a directory"
    if os.path.exists(path):
        try:
            with open_for_append(path):  # a FIFO nobody reads: refused, not waited on
                return None
        except OSError as exc:
            return exc.strerror or str(exc)
    parent = os.path.dirname(path)
    while parent and not os.path.exists(parent):  # created on first use
        parent = os.path.dirname(parent) if os.path.dirname(parent) != parent else ""
    if not parent or not os.path.isdir(parent):
        return f"{parent or 'its folder'} is not a directory"
    try:
        with tempfile.TemporaryFile(dir=parent):
            return None
    except OSError as exc:
        return f"cannot create files in {parent}: {exc.strerror or exc}"


def _not_a_state_file(path: str) -> str | None:
    """Why an existing `path` cannot hold the state, which SQLite keeps in a file of its own:
    a device (/dev/null takes writes, but no database) or a file that is no SQLite database
    (issue 39: both passed, then every call warned that the state failed)."""
    import stat

    try:
        mode = os.stat(path).st_mode
        if not stat.S_ISREG(mode):
            return "it is not a regular file (a device, FIFO or socket)"
        with open(path, "rb") as handle:
            head = handle.read(16)
    except FileNotFoundError:
        return None  # created on first use
    except OSError as exc:
        return os_error_words(exc)
    if head and head != b"SQLite format 3\x00":
        return "it is not an SQLite database (another file, or one this server did not make)"
    return None


def _written_paths(config: Config) -> list[tuple[str, str | None]]:
    """(key, file or None when off) for each file the server writes: debug log, state."""
    debug_file = config.get("server", "debug_file")
    paths = [("server.debug_file", os.path.expanduser(debug_file) if debug_file else None)]
    if not config.get("state", "url"):  # else _doctor_state_url checks the database
        paths.append(("state.path", state_path(config)))
    return paths


class _QuietLog(Log):
    """A Log that says nothing: the doctor reports the state's trouble in its own lines."""

    def say(self, text: str) -> None:
        pass


def _doctor_state_url(doctor: Doctor, config: Config) -> None:
    """With state.url: whether the database answers, with its tables made if need be."""
    if not config.get("state", "url"):
        return
    backend = state_backend(config)
    state = StateStore(backend, _QuietLog())
    try:
        state.read("connecting", lambda q: q("SELECT 1").fetchone())
    except StateRefused:  # it answers; _doctor_state_schema says why it refuses, and the fix
        doctor.ok(f"state.url: {backend.label} answers")
    except StateUnavailable as exc:
        doctor.fail(f"state.url: {backend.label} is unavailable ({exc.reason})", backend.hint)
    else:
        doctor.ok(f"state.url: {backend.label} answers")
    finally:
        state.close()


def _doctor_state_schema(doctor: Doctor, config: Config) -> None:
    """The state opened as any command opens it (upgraded, or refused saying what to run
    when its upgrade needs server.auth.issuer), and OAuth subjects an earlier upgrade filed
    without their issuer (issue 39): their allowances and conversations are lost to them."""
    backend = state_backend(config)
    if backend is None or not (backend.postgres or os.path.isfile(backend.path)):
        return  # no store yet, or not one (a device, a folder: the path check says so)
    state = StateStore(backend, _QuietLog())
    try:
        left, issuers = state.read(
            "checking the state",
            lambda q: (len({n for _, n, _ in misfiled_subjects(q)}), filed_issuers(q)),
        )
    except StateRefused as exc:
        doctor.fail(f"state: {backend.label}: {exc.reason}", "see docs/upgrade.md")
        return
    except StateUnavailable:
        return  # said by the state.url check, or by the budget's
    finally:
        state.close()
    if left:
        doctor.warn(
            f"state: {left} OAuth subject(s) are filed without their issuer (oauth:#<sub>, by "
            "an upgrade run without server.auth.issuer, or a bare name a host of an older "
            "release wrote after the upgrade): their allowances and earlier conversations do "
            "not find them",
            f"run {SERVER_NAME} --config FILE --upgrade-state with the --http server's config",
        )
    else:
        doctor.ok(f"state: schema {STATE_SCHEMA_VERSION}")
    _doctor_other_issuers(doctor, config, issuers)


def _doctor_other_issuers(doctor: Doctor, config: Config, issuers: dict) -> None:
    """Subjects filed under an issuer that is not server.auth.issuer: an earlier one (their
    allowances and conversations stay theirs), or a mistyped one an upgrade filed them under
    for good (issue 39): --upgrade-state --from-issuer files them under this one."""
    issuer = (config.get("server", "auth", "issuer") or "").rstrip("/")
    others = {name: n for name, n in issuers.items() if name != issuer}
    if not issuer or not others:
        return
    shown = inert(", ".join(f"{name} ({n})" for name, n in sorted(others.items())[:3]))
    doctor.warn(
        f"state: OAuth subjects are filed under another issuer than server.auth.issuer "
        f"{issuer}: {shown}; they count under this one only if filed under it",
        f"if that issuer was a mistake (an upgrade with a mistyped server.auth.issuer), run "
        f"{SERVER_NAME} --config FILE --upgrade-state --from-issuer "
        f"{inert(sorted(others)[0])} with the --http server's config",
    )


def _doctor_oauth(doctor: Doctor, config: Config) -> None:
    """With server.auth.issuer: whether its metadata and signing keys can be fetched from here,
    as the server will at start (it refuses every token until they are)."""
    issuer = config.get("server", "auth", "issuer")
    if not issuer:
        return
    keys = IssuerKeys(issuer, _QuietLog())
    problem = keys.refresh()
    if problem is not None:
        doctor.fail(
            f"server.auth.issuer: cannot get the signing keys of {issuer} ({problem})",
            "check the URL (as the provider's metadata writes `issuer`) and that this host "
            "reaches it; until it does, the server refuses every token",
        )
    else:
        doctor.ok(f"server.auth.issuer: {len(keys.keys)} signing key(s) from {keys.jwks_uri}")


def _doctor_paths(doctor: Doctor, config: Config) -> None:
    for name, value in _written_paths(config):
        if value is None:
            doctor.skip(f"{name}: off")
            continue
        problem = writable_problem(value)
        verdict = "is not writable"
        if not problem and name == "state.path":
            problem, verdict = _not_a_state_file(value), "cannot hold the state"
        source = config.sources.get(tuple(name.split(".")), "default")
        if problem:
            doctor.fail(
                f"{name} = {value} (from {source}) {verdict}: {problem}",
                f"point {name} at a file in a folder you can write to, or set it to off",
            )
        else:
            doctor.ok(f"{name} = {value} is writable")
    system = config.get("policy", "system")
    if system["source"] == "file":  # already read by load_config, or it would have failed
        doctor.ok(f"policy.system.path = {system['path']} is readable")


def _doctor_budget(doctor: Doctor, config: Config) -> None:
    """Each budget with what is spent of it, and the models no budget can count (no price):
    under any budget, the team's or a user's, the server refuses their calls."""
    timezone = config.get("policy", "timezone")
    today = today_in(timezone)
    periods = budgets(config, today)
    path, backend = state_path(config), state_backend(config)
    exists = backend is not None and (backend.postgres or os.path.exists(path))
    state = StateStore(backend, _QuietLog(), timezone) if exists else None
    keys = _budget_keys(config, today, state)
    if not keys:
        doctor.skip(
            "budget: none (budget.daily_usd, budget.monthly_usd and the per-user ones are null)"
        )
        if state:
            state.close()
        return
    pricing = Pricing(config, Log())
    for model in sorted({config.profile(tool)["model"] for tool in enabled_tools(config)}):
        if pricing.prices(model) is None:
            doctor.fail(
                f"budget: model {model} has no known price, so its calls are refused while "
                f"{keys[0]} is set",
                f"set pricing.models.{_undated(model)} to {{input, cached_input, output}} in USD "
                "per million tokens",
            )
    ledger = Ledger(state, timezone) if state else None
    for budget in periods:
        period, limit, spent_when, resets = budget.name, budget.limit, budget.words, budget.resets
        try:
            spent = ledger.spent_since(budget.since) if ledger else 0.0
        except StateUnavailable as exc:
            doctor.fail(
                f"budget.{period}_usd: the usage ledger ({backend.label}) could not be read "
                f"({exc.reason}): calls that would spend are refused",
                backend.hint,
            )
            continue
        if spent >= limit:
            doctor.warn(
                f"budget.{period}_usd {usd(limit)} is spent ({usd(spent)} {spent_when}): calls "
                f"are refused until it resets {resets} {timezone}",
                f"raise budget.{period}_usd, or wait",
            )
        else:
            doctor.ok(f"budget.{period}_usd {usd(limit)}: {usd(spent)} spent {spent_when}")
    if state:
        state.close()


def _doctor_costly_runs(doctor: Doctor, config: Config) -> None:
    """What the cost question and the completion windows will do (docs/costly-runs.md), and
    budget.confirm_required set where it does nothing."""
    threshold = config.get("budget", "confirm_over_usd")
    if threshold is None and config.get("budget", "confirm_required"):
        doctor.warn(
            "budget.confirm_required does nothing while budget.confirm_over_usd is null: no "
            "call is asked, none refused",
            "set budget.confirm_over_usd (the dollars over which the person is asked)",
        )
    elif threshold is not None:
        others = (
            "refused (budget.confirm_required)"
            if config.get("budget", "confirm_required")
            else "run unasked"
        )
        doctor.ok(
            f"budget.confirm_over_usd {usd(threshold)}: a call that may cost more asks the "
            f"person first (clients with form elicitation); other clients' are {others}"
        )
    served = enabled_tools(config)
    for tool in (row["name"] for row in TOOL_TABLE):
        window = config.completion_window(tool)
        if window in WINDOW_FACTORS and tool not in served:  # docs' answer_deep example alone
            where = config.sources.get(("tools", tool), "default")  # env overrides the file
            doctor.warn(
                f"model_profiles.{tool}.completion_window {window} does nothing: {tool} is "
                f"not served (tools.{tool} is false, from {where})",
                f"set {where[4:]}=true" if where.startswith("env ") else f"set tools.{tool}: true",
            )
        elif window in WINDOW_FACTORS:
            off = round((1 - WINDOW_FACTORS[window]) * 100)
            doctor.ok(
                f"model_profiles.{tool}.completion_window {window}: runs in background within "
                f"{window} at {off}% off its tokens, polled; a task or handoff collects it"
            )


def _budget_keys(config: Config, today: str, state) -> list[str]:
    """What sets a budget: the team's keys, the per-user ones, and each user's own allowance
    (--user add --daily-usd / --monthly-usd) in the state."""
    keys = [f"budget.{period.name}_usd" for period in budgets(config, today)]
    keys += [f"budget.{period.name}_usd" for period in user_budgets(config, today, LOCAL_USER)]
    if state is not None:
        try:
            users = UserDirectory(state)._snapshot().values()
        except StateUnavailable:
            users = ()
        keys += [
            f"{name}'s own allowance (--user add {name})"
            for name, daily, monthly in users
            if daily is not None or monthly is not None
        ]
    return keys


def token_weakness(token: str) -> str | None:
    """Why an HTTP bearer token is weak, or None."""
    if len(token) < 16:
        return f"only {len(token)} characters"
    if len(set(token)) < 8:
        return f"only {len(set(token))} distinct characters"
    if len(token) < 32:
        return f"{len(token)} characters (32 or more recommended)"
    return None


def _doctor_http(doctor: Doctor, config: Config, listen: tuple | None) -> None:
    settings = config.get("server", "http")
    token = settings["token"]
    wide = too_wide_warning(trusted_networks(settings["trusted_proxies"]))
    if wide:
        doctor.warn(wide, "list each proxy's address (127.0.0.1) or its private range (10.0.0.0/8)")
    if token is None and listen is None:
        doctor.skip("HTTP: not checked (add --http [HOST:]PORT to check an address)")
        return
    make = "python3 -c 'import secrets; print(secrets.token_urlsafe(32))'"
    if token is not None:
        weakness = token_weakness(token)
        source = config.sources.get(("server", "http", "token"), "default")
        if weakness and len(token) < 16:
            doctor.fail(f"server.http.token (from {source}) is weak: {weakness}", make)
        elif weakness:
            doctor.warn(f"server.http.token (from {source}): {weakness}", make)
        else:
            doctor.ok(f"server.http.token (from {source}) is strong ({len(token)} characters)")
        if source.startswith("flag"):
            doctor.warn(
                "the token was given with --http-token, which other users can see in the "
                "process list",
                "set MCP_HTTP_TOKEN in the environment instead",
            )
    if listen is not None:
        _doctor_bind(doctor, config, *listen)


def _doctor_bind(doctor: Doctor, config: Config, host: str, port: int) -> None:
    import socket

    path, backend = state_path(config), state_backend(config)
    state = None
    if backend is not None and (backend.postgres or os.path.exists(path)):
        state = StateStore(backend, _QuietLog(), config.get("policy", "timezone"))
    try:  # its start-up refusals, as serving would do (named users count as tokens)
        policy = HostPolicy(config, host)
        users = UserDirectory(state) if state else None
        required = HttpApp(None, config, Log(), policy, users=users).auth.required()
    except ConfigError as exc:
        doctor.fail(f"--http {host}:{port}: {exc}", "see the message above")
        return
    finally:
        if state is not None:
            state.close()
    try:
        with socket.socket(policy.family, socket.SOCK_STREAM) as probe:
            probe.bind((host, port))
    except OSError as exc:
        doctor.fail(
            f"--http {host}:{port}: cannot listen there ({exc.strerror or exc})",
            "pick a free port (another server may hold this one), or an address of this machine",
        )
        return
    if policy.loopback:
        doctor.ok(f"--http {host}:{port}: loopback only (reachable from this machine)")
    elif required:
        doctor.ok(f"--http {host}:{port}: open to the network, every request needs a token")
    else:
        doctor.warn(
            f"--http {host}:{port}: open to the network without a token (--http-allow-insecure)",
            "only behind a proxy that authenticates every request",
        )


# -- --doctor --live: a trial call; the command line a client runs -----------------------------


# --doctor --live tries each profile's settings with a request as cheap as one gets.
TRIAL_INPUT = "Reply with the word OK."


def trial_request(tool: str, config: Config, today: str) -> dict:
    """The tool's request with every setting of its profile (model, effort, verbosity, the
    web_search tool and its options, the cost controls), made as cheap as a request gets: a
    one-line input, no instructions, at most 16 output tokens, the tool offered but not used
    (tool_choice none), not stored."""
    request = build_request(tool, {"query": TRIAL_INPUT}, config, today)
    for name in ("instructions", "include", "prompt_cache_key"):
        request.pop(name, None)
    request.update(input=TRIAL_INPUT, max_output_tokens=16, tool_choice="none", store=False)
    return request


def _try_request(client, request: dict) -> Failure | None:
    try:
        client.responses.create(**request)
    except Exception as exc:  # noqa: BLE001 - every failure is classified
        return classify_failure(exc)
    return None


def _doctor_try_profiles(doctor: Doctor, config: Config, client) -> None:
    """Each profile's settings sent to the API for real: a setting its model refuses that the
    tables above do not know fails with the same fix a refused call names."""
    today = today_in(config.get("policy", "timezone"))
    budgeted = _budget_keys(config, today, None)
    if budgeted:  # a trial goes straight to the API: no budget admits it, no ledger counts it
        doctor.skip(
            f"profiles' settings not tried: under {budgeted[0]} only calls the budget admits "
            "and counts are made (as the live answer below is)"
        )
        return
    tried: dict = {}  # profiles that send the same request are tried once
    for tool in enabled_tools(config):
        if _row(tool).get("opt_in"):
            # A deep research run is billed by the searches it decides to make: not a trial.
            doctor.detail(f"{tool}: not tried (its settings are checked at start-up)")
            continue
        request = trial_request(tool, config, today)
        same = json.dumps(request, sort_keys=True)
        if same not in tried:
            tried[same] = _try_request(client, request)
        _report_trial(doctor, config, tool, request["model"], tried[same])


def _report_trial(doctor: Doctor, config: Config, tool: str, model: str, failure) -> None:
    if failure is None:
        doctor.ok(f"{tool}: the API accepts its settings{_profile_words(config.profile(tool))}")
        return
    refused = refused_setting(failure, tool, config) if failure.kind == "rejected" else None
    if refused:
        doctor.fail(f"{tool}: {refused[0]}", refused[1])
        return
    said = failure_message(failure, tool=tool, model=model, config=config, tries=1)
    # A refusal of what only the trial sends (a gateway's, say) says nothing of the profile.
    ours = failure.param in ("input", "store", "tool_choice", "max_output_tokens")
    if failure.kind in ("rejected", "model") and not ours:
        doctor.fail(f"{tool}: the API refused its settings: {said}", f"check model_profiles.{tool}")
    else:
        doctor.warn(f"{tool}: its settings could not be tried: {said}")


def _doctor_live(doctor: Doctor, config: Config) -> None:
    """One small real answer with web search, and what it cost."""
    tool = "answer_quick"
    # fresh: a second --doctor --live must ask the API again, not show the cached answer as live
    args = {"query": DOCTOR_QUERY, "max_results": 1, "fresh": True}
    started = time.monotonic()
    engine = build_engine(config, Log())
    try:
        answer, meta = engine.answer(tool, args, Call(None, tool, None))
    except ToolError as exc:
        doctor.fail(f"live answer ({tool}): {exc.message}", "fix the first failure above")
        return
    finally:
        engine.close()
    searched = "with web search" if answer["used_search"] else "WITHOUT a web search"
    line = (
        f"live answer ({tool}, {answer['model']}) in {time.monotonic() - started:.1f} s, "
        f"{searched}, {len(answer['citations'])} citation(s); cost: {_cost_words(meta)}"
    )
    if answer["used_search"]:
        doctor.ok(line)
    else:
        doctor.warn(line, "the model chose not to search; web search may be unavailable to it")
    doctor.detail(_one_line(answer["answer"], 160))


def _cost_words(meta: dict) -> str:
    cost = meta.get("cost") if isinstance(meta.get("cost"), dict) else {}
    usd = cost.get("usd")
    if isinstance(usd, (int, float)):
        return f"${usd:.4f}"
    usage = meta.get("usage") or {}
    return (
        f"{usage.get('input_tokens', 0)} input + {usage.get('output_tokens', 0)} output tokens, "
        f"{meta.get('web_searches', 0)} search(es)"
    )


def client_command(
    config: Config | None = None,
) -> tuple[list[str], list[tuple[str, str]], str | None]:
    """How an MCP client should start this installation: (command, the variables it needs, a
    copied file's cached bytecode); absolute paths, and nothing that a cache clean removes
    (see install_kind)."""
    import shutil

    kind = this_installation()
    if kind in ("uvx", "uv-run"):  # uv's cache: name the package or file, not the cache's copy
        uv = "uvx" if kind == "uvx" else "uv"
        uv = os.path.abspath(shutil.which(uv)) if shutil.which(uv) else uv
        if kind == "uv-run":
            return [uv, "run", os.path.abspath(__file__)], [], None
        withs = [word for extra in _extras_in_use(config) for package in EXTRA_PACKAGES[extra]
                 for word in ("--with", package)]  # fmt: skip
        return [uv, *uvx_words(), *withs, SERVER_NAME], [], None
    if kind == "file":  # a copied file: the Python that runs it now, from cached bytecode
        return dropin_launch(__file__, os.path.abspath(sys.executable), dict(os.environ))
    return _installed_command(), [], None


def _installed_command() -> list[str]:
    import shutil

    name = SERVER_NAME + (".exe" if os.name == "nt" else "")
    beside = os.path.join(os.path.dirname(os.path.abspath(sys.executable)), name)
    on_path = shutil.which(SERVER_NAME)
    if os.path.isfile(beside):  # this installation's own script (a venv, pipx, uv tool)
        same = on_path and os.path.realpath(on_path) == os.path.realpath(beside)
        return [os.path.abspath(on_path if same else beside)]
    if on_path:
        return [os.path.abspath(on_path)]
    return [os.path.abspath(sys.executable), os.path.abspath(__file__)]


def _doctor_dropin(doctor: Doctor, launch: tuple, options: dict) -> None:
    """A copied file: where its cached bytecode is, which makes its start as quick as an
    installation's (client_command wrote it), and one start by the line the clients get. Under
    PYTHONPYCACHEPREFIX, that start also caches the standard library modules read before
    `initialize` (the prefix holds every module's bytecode), which a client that sets
    PYTHONDONTWRITEBYTECODE would otherwise compile at every start."""
    if this_installation() != "file":
        return
    command, variables, cached = launch
    if cached is None:
        doctor.warn(
            "no bytecode cache can be written for this file: each start compiles it (~0.2 s)",
            f"make __pycache__ beside it writable, or {default_pycache_prefix(os.environ)}",
        )
        return
    where = " (under PYTHONPYCACHEPREFIX: no __pycache__ beside it)" if variables else ""
    doctor.ok(f"bytecode cached at {cached}{where}: clients start it by its loader")
    argv = [*command, "--stdio"]
    if options.get("config"):
        argv += ["--config", os.path.abspath(os.path.expanduser(options["config"]))]
    problem = _first_start(argv, dict(variables))
    if problem:
        doctor.fail(
            f"the client line did not start the server: {problem}",
            "run its command below in a terminal, with its variables, to see the whole error",
        )
    else:
        doctor.ok("the client line starts the server and it answers `initialize`")


def _first_start(argv: list[str], variables: dict) -> str | None:
    """Starts `argv` as a client would, with `variables`, until it answers `initialize`; None,
    or what went wrong."""
    import subprocess

    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    hello = {"protocolVersion": LATEST_PROTOCOL, "capabilities": {}}
    hello["clientInfo"] = {"name": f"{SERVER_NAME}-doctor", "version": __version__}
    request = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello}
    try:
        proc = subprocess.run(
            argv, input=encode_message(request) + b"\n", capture_output=True,
            env={**env, **variables}, timeout=60,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    first = proc.stdout.split(b"\n", 1)[0]
    if b'"result"' in first and b'"serverInfo"' in first:
        return None
    said = proc.stderr.decode("utf-8", "replace").strip().splitlines()
    return f"exit status {proc.returncode}" + (f": {said[-1]}" if said else "")


def _extras_in_use(config: Config | None) -> list[str]:
    if config is None:
        return []
    used = [
        ("postgres", config.get("state", "url")),
        ("oauth", config.get("server", "auth", "issuer")),
    ]
    return [extra for extra, value in used if value]


# Variables outside SETTINGS that change what the server does: debug, and the HTTP client's
# proxy and CA settings (a client that starts the server without them cannot reach the API).
CARRIED_ENV = (
    "DEBUG",
    "HTTPS_PROXY",
    "HTTP_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
)
SECRET_ENV = ("MCP_HTTP_TOKEN", "MCP_TASK_SECRET", "MCP_AUTH_CLIENT_SECRET")


def client_env(config: Config, env: dict | None = None) -> list[tuple[str, str | None]]:
    """(name, value) for each variable set now that changes what the server does, for the
    client setup --doctor prints: the MCP client starts the server with its own environment,
    so what is set only in this shell would be lost. The API key comes first and, like a
    token, a secret or a value with a password in it, as None: a reference to the client's
    own environment, never the value."""
    env = dict(os.environ) if env is None else env
    key = config.get("openai", "api_key_env")
    names = [s.env for s in SETTINGS.values() if s.env] + list(CARRIED_ENV)
    carried: list[tuple[str, str | None]] = [(key, None)]
    for name in sorted(set(names) - {key}):
        spellings = (name, name.lower()) if name.endswith("_PROXY") else (name,)
        variant = next((v for v in spellings if (env.get(v) or "").strip()), None)
        if variant is None:
            continue
        value = env[variant]
        secret = name in SECRET_ENV or url_has_secret(value)
        carried.append((variant, None if secret else value))
    return carried


def client_lines(options: dict, config: Config, launch: tuple | None = None) -> list[str]:
    """The lines that add this installation to Claude Code, Codex CLI and Cursor, with the
    environment the server runs with here (see client_env) and the variables its command needs
    (`launch`, from client_command)."""
    import shlex

    start, needed, _cached = client_command(config) if launch is None else launch
    command = [*start, "--stdio"]
    if options.get("config"):
        command += ["--config", os.path.abspath(os.path.expanduser(options["config"]))]
    quote = (lambda s: f'"{s}"') if os.name == "nt" else shlex.quote
    argv = " ".join(quote(part) for part in command)
    carried = client_env(config) + list(needed)

    def shell(name: str, value: str | None) -> str:
        if value is None:
            return f'{name}="{f"$env:{name}" if os.name == "nt" else f"${name}"}"'
        return quote(f"{name}={value}")

    env = " ".join(f"--env {shell(name, value)}" for name, value in carried)
    cursor = {
        "mcpServers": {
            CLIENT_NAME: {
                "command": command[0],
                "args": command[1:],
                "env": {
                    name: "${env:" + name + "}" if value is None else value
                    for name, value in carried
                },
            }
        }
    }
    # The name goes before --env: Claude Code's --env takes every word up to the next option,
    # so `--env K=V name --` fails with "Invalid environment variable format: name".
    return [
        "Claude Code:",
        f"    claude mcp add {CLIENT_NAME} --transport stdio --scope user {env} -- {argv}",
        "Codex CLI:",
        f"    codex mcp add {CLIENT_NAME} {env} -- {argv}",
        # codex mcp add cannot set it; without it `codex exec` may start without the tools.
        f"    then add `required = true` under [mcp_servers.{CLIENT_NAME}] in ~/.codex/config.toml",
        "Cursor (~/.cursor/mcp.json, merged into mcpServers):",
        *("    " + row for row in json.dumps(cursor, indent=2).splitlines()),
    ]


def run_doctor(options: dict) -> int:
    """--doctor: checks the installation, the config, the key and the endpoint; exit 1 if any
    check failed. Never prints the key or the HTTP token."""
    doctor = Doctor(sys.stdout, (os.environ.get("OPENAI_API_KEY", ""),))
    if not _doctor_versions(doctor):
        return doctor.finish()
    config = _doctor_config(doctor, options)
    if config is None:
        return doctor.finish()
    key_env = config.get("openai", "api_key_env")
    doctor.redact = Log(
        secrets=(os.environ.get(key_env, ""), config.get("server", "http", "token") or "")
    ).redact
    key = _doctor_key(doctor, config)
    problem = ca_bundle_problem()
    if problem:  # the client cannot even be made: nothing below reaches the endpoint
        doctor.fail(*problem)
        return doctor.finish()
    client = _doctor_client(config, key)
    listing = _doctor_endpoint(doctor, config, client, key)
    if listing is not None:
        _doctor_models(doctor, config, client)
        log = Log(config.get("server", "debug"), secrets=(os.environ.get(key_env, ""),))
        _doctor_retirements(doctor, config, listing, log)
    _doctor_paths(doctor, config)
    _doctor_state_url(doctor, config)
    _doctor_state_schema(doctor, config)
    _doctor_oauth(doctor, config)
    _doctor_budget(doctor, config)
    _doctor_costly_runs(doctor, config)
    _doctor_http(doctor, config, options.get("http"))
    if options.get("live"):
        if not doctor.failures:
            _doctor_try_profiles(doctor, config, client)
        if doctor.failures:
            doctor.skip("live answer not tried (fix the failures above first)")
        else:
            _doctor_live(doctor, config)
    launch = client_command(config)
    _doctor_dropin(doctor, launch, options)
    doctor.line("")
    doctor.line(
        "To add this installation to a client (the key comes from your environment; "
        "the other variables are the ones set here):"
    )
    for row in client_lines(options, config, launch):
        doctor.line(row)
    return doctor.finish()


# -- main(): the entry point -------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    try:
        status = _main(sys.argv[1:] if argv is None else argv)
        if sys.stdout is not None:
            sys.stdout.flush()  # here, where a reader gone is caught, not at exit
        return status
    except BrokenPipeError:  # `--doctor | head -1`: the reader left, so nothing is left to say
        _stdout_to_devnull()  # and Python's own flush at exit must not say it either
        return 1
    except KeyboardInterrupt:  # Ctrl-C on a --doctor waiting for an endpoint: no traceback
        sys.stderr.write(f"{SERVER_NAME}: interrupted\n")
        return 130


def _is_stdout(path: str) -> bool:
    """Whether `path` is the file stdout writes to (/dev/stdout, /proc/self/fd/1, the file it
    is redirected into): debug lines there would be mixed into --stdio's protocol."""
    try:
        named, out = os.stat(os.path.expanduser(path)), os.fstat(1)
    except (OSError, ValueError):
        return False
    return named.st_ino != 0 and (named.st_dev, named.st_ino) == (out.st_dev, out.st_ino)


def _stdout_to_devnull() -> None:
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # no stdout at all: nothing to flush
        pass


def _main(argv: list[str]) -> int:
    try:
        options = parse_args(argv)
    except UsageError as exc:
        print(f"{USAGE}\n{SERVER_NAME}: error: {inert(str(exc))}", file=sys.stderr)
        return 2
    if options.get("help") or not argv:
        sys.stdout.write(help_text())
        return 0
    if options.get("version"):
        print(f"{SERVER_NAME} {__version__}")
        return 0
    if options.get("print_example"):
        sys.stdout.write(EXAMPLES[options["print_example"]])
        return 0
    if options.get("doctor"):
        return run_doctor(options)
    serving = options.get("stdio") or options.get("http")
    doing = options.get("ask") or options.get("show_config") or options.get("usage")
    doing = doing or options.get("upgrade_state")
    if not (serving or doing or options.get("user")):
        print(
            f"{USAGE}\n{SERVER_NAME}: error: nothing to do: add --stdio or --http PORT",
            file=sys.stderr,
        )
        return 2
    try:
        config = load_config(options)
    except ConfigError as exc:
        print(f"{SERVER_NAME}: config error: {inert(str(exc))}", file=sys.stderr)
        return 2
    server = config.values["server"]
    key_env = config.get("openai", "api_key_env")
    secrets = (
        os.environ.get(key_env, ""),
        server["http"]["token"] or "",
        server["tasks"]["secret"] or "",
        *url_secrets(config.get("state", "url") or ""),
        *url_secrets(config.get("openai", "base_url")),  # a gateway's user:password@
    )
    debug_file = server["debug_file"]
    if options.get("stdio") and debug_file and _is_stdout(debug_file):
        debug_file = None  # said below, once the log can say it
    log = Log(server["debug"], debug_file, secrets)
    if debug_file != server["debug_file"]:
        log.say(
            f"warning: debug file {server['debug_file']} is this server's stdout, which carries "
            "the MCP messages: debug goes to stderr only"
        )
    for warning in config.warnings:
        log.say(f"warning: {warning}")
    problem = api_key_problem(config) if serving else None
    if problem:
        log.say(f"warning: {problem}; tool calls fail until then")
    if options.get("show_config") or (server["show_config_on_start"] and serving):
        shown = json.dumps(config.describe(), ensure_ascii=False, indent=2)
        sys.stderr.write(inert(shown, json_text=True) + "\n")
        sys.stderr.flush()
    if options.get("ask"):
        terminal = sys.stdout is not None and sys.stdout.isatty()
        as_json = bool(options.get("json")) or not terminal
        tool = options.get("tool") or "answer"
        return run_ask(config, log, options["ask"], tool, as_json, tuple(options["files"]))
    if options.get("usage"):
        return run_usage(config, log, options.get("since"), bool(options.get("json")))
    if options.get("user"):
        return run_user(config, log, options)
    if options.get("upgrade_state"):
        return run_upgrade_state(config, log, options.get("from_issuer"))
    if not serving:
        return 0
    engine = build_engine(config, log, http=bool(options.get("http")))
    stateless = bool(options.get("http")) and server["http"]["stateless"]
    dispatcher = Dispatcher(config, log, engine, stateless)
    if options.get("http"):
        try:
            return serve_http(dispatcher, config, log, *options["http"])
        finally:
            finish_calls(engine)  # the cancels sent, the rows of calls cut short written
    log.debug("server", f"{SERVER_NAME} {__version__} serving stdio (pid {os.getpid()})")
    if os.isatty(0):  # a person, not a client: say what this waits for (stdout stays MCP's)
        sys.stderr.write(STDIO_ON_A_TERMINAL)
        sys.stderr.flush()
    try:
        serve_stdio(dispatcher, config, log)  # its calls answered, or cancelled by a signal
    except BaseException:
        engine.close()
        raise
    leave(engine)


if __name__ == "__main__":
    sys.exit(main())
