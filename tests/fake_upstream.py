"""A fake OpenAI Responses API (plus a forward proxy and TLS helpers) for tests.

Standard library only.  The real ``openai`` SDK talks to it through ``base_url``::

    with FakeResponsesAPI() as fake:
        fake.enqueue(Reply(text="Hi", searches=[{"query": "q", "sources": [...]}]))
        client = openai.OpenAI(api_key="sk-test", base_url=fake.base_url, max_retries=0)
        client.responses.create(model="gpt-5.2", input="hi", stream=True, ...)
        (rec,) = fake.wait_for_requests(1)

Every JSON shape mirrors the types shipped with the installed SDK
(``openai/types/responses/*.py``): ``Response``, the ``ResponseStreamEvent`` union,
``ResponseOutputMessage``/``ResponseOutputText`` with ``AnnotationURLCitation``,
``ResponseFunctionWebSearch`` (``action.sources`` only when the request's ``include``
has ``"web_search_call.action.sources"``), ``ResponseReasoningItem``, ``ResponseUsage``.

Stream layout for ``"stream": true`` (``sequence_number`` counts from 0)::

    response.created, response.in_progress
    [reasoning models: response.output_item.added/done (reasoning item)]
    per search: response.output_item.added (web_search_call, in_progress),
                response.web_search_call.in_progress, .searching, .completed,
                response.output_item.done (web_search_call, completed, action)
    message:    response.output_item.added, response.content_part.added,
                response.output_text.delta x N (annotation.added right after the delta
                that completes each cited span), response.output_text.done,
                response.content_part.done, response.output_item.done
    response.completed  (or response.incomplete)

``GET /v1/models`` and ``GET /v1/models/{id}`` answer from ``fake.models`` with the SDK's
``Model`` shape (an unknown id gets 404 ``model_not_found``), each with its ``shutdown_date``
from ``fake.shutdown_dates`` (the deprecations page's dates by default, null when none). A model
whose date has come (UTC) has shut down: it is not listed, and a create naming it gets 404
``model_not_found`` and consumes no Reply. Usage reports ``cache_write_tokens`` with
``cache_write_tokens_details`` (``ttl_30m_tokens``, ``ttl_12h_tokens``), zero by default.
With ``fake.api_keys`` set, a request carrying any other bearer key gets 401
``invalid_api_key``, as the real API does.

Each event goes out as ``event: <type>\\ndata: <compact json>\\n\\n`` in its own HTTP/1.1
chunk, so keep-alive reuse works and stall/drop faults can cut the stream anywhere.

Background mode (``"background": true``): the response lives on in the fake whether or not
a client is connected. Its events become available over time (``Reply.event_delay`` apart,
from the create), its status goes ``queued`` -> ``in_progress`` -> ``completed`` (or
``incomplete``/``failed``, or ``cancelled``), and:

* ``GET /v1/responses/{id}`` returns the ``Response`` object as it is now;
* ``GET /v1/responses/{id}?stream=true&starting_after=N`` streams the events after
  sequence number N (all of them without it), waiting for the ones not yet available;
* ``POST /v1/responses/{id}/cancel`` stops it and returns the ``Response`` with status
  ``cancelled`` (a finished one is returned as it is: cancelling is idempotent); a stream
  following it ends without a final event;
* an unknown id gets 404 ``Response with id '…' not found.``
The create's stream honours the Reply's faults; ``Reply.resume_drops`` drops the i-th
resume stream after that many events. ``fake.refuse_background`` (True, or a dict with
``status``/``message``/``code``/``type``) answers every background create with the 4xx a
refused parameter gets (``param: "background"``) and consumes no Reply.

Completion windows (``background_options.completion_window`` ``2h``/``8h``, discounted
background runs): as the SDK's ``BackgroundOptions`` says, they need ``background: true``,
Standard processing (``service_tier`` absent, ``auto`` or ``default``) and no streaming; a
create with a window that breaks one of these, or a window the API does not know, gets a
400 with ``param: "background_options"`` (see :func:`window_refusal`) and consumes no Reply.
A windowed create answers the ``Response`` object with status ``queued`` (JSON, not a
stream); ``GET /v1/responses/{id}`` then reports it ``queued`` (the first poll) or
``in_progress`` for ``fake.window_polls`` polls, and completed (usage, ``service_tier:
"default"``) after; such a response cannot be streamed (``?stream=true`` gets a 400), and
``POST .../cancel`` cancels it; ``fake.failing_polls`` (1-based numbers of those GETs) answer
500 instead. ``fake.refuse_windows`` (True) is a gateway that lacks the
parameter: every create naming ``background_options`` gets
``unsupported_parameter("background_options")``'s 400. ``fake.ignore_windows`` (True) is a
gateway that drops ``background`` and ``background_options`` without a word: the create is
served as a plain one (``background: false`` in its response), recorded as it was sent.
``fake.windows_end_before_cancel`` (True): a windowed run finishes (completed, billed) just
before a cancel reaches it, between two polls, so the cancel changes nothing.

A create whose settings the model refuses gets the real API's 400 and consumes no Reply (see
``refused_setting``): a ``-chat-latest`` gpt-5.x model with reasoning effort other than
``medium``, gpt-5-chat-latest with verbosity other than ``medium``, a GPT-6 model with effort
``minimal`` (or ``none``, but for gpt-6-sol, gpt-6-luna and gpt-6.1-terra), any reasoning for
gpt-4.1 and gpt-4o (``unsupported_parameter``), web_search with effort
``minimal``, service_tier ``flex`` on a model without a flex tier, and a service_tier or
max_tool_calls out of the API's range. :func:`unsupported_parameter` is the 400 for a parameter
a model (or a gateway) takes no value of.

Stored responses and follow-ups: every response created without ``"store": false`` is kept
in ``fake.stored`` (id -> the tokens its conversation holds so far). A create whose
``previous_response_id`` is not there gets the real API's 400 (``code:
previous_response_not_found``, ``param: previous_response_id``, "Previous response with id
'…' not found.") and consumes no Reply; one that is there is billed the earlier turns again as
input tokens. ``fake.stored.pop(id)`` makes a response expire.

Deep research models (``o3-deep-research``, ``o4-mini-deep-research``, dated or not) get the
real API's 400s, consuming no Reply: a tool other than ``web_search_preview``, ``mcp``,
``file_search`` or ``code_interpreter`` ("Deep research models only support the
'web_search_preview', 'code_interpreter', 'mcp', and 'file_search' tools.", ``param: tools``),
none of ``web_search_preview``/``mcp`` ("Deep research models require at least one of
'web_search_preview' or 'mcp' tools."), and a ``reasoning.effort`` other than ``medium``
(``unsupported_value``). :func:`deep_research_reply` is a run like theirs: many searches, a
long report with headings and cited sources, events spread over time.

The two 404s the real API sends: a request to any path but ``/v1/responses`` (a base URL
without ``/v1``) gets ``{"error": {"message": "Invalid URL (POST /responses)", "type":
"invalid_request_error", "param": null, "code": null}}``, and ``Reply(status=404)`` gets the
``model_not_found`` error. ``Reply(status=404, body="<html>…")`` is a web server that is not
the API at all.
"""

from __future__ import annotations

import copy
import hashlib
import http.server
import json
import os
import re
import secrets
import select
import shutil
import socket
import ssl
import struct
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from waiting import wait_until

__all__ = [
    "DEFAULT_MODELS",
    "SHUTDOWN_DATES",
    "FakeResponsesAPI",
    "ForwardProxy",
    "Recorded",
    "Reply",
    "TLSMaterial",
    "deep_research_refusal",
    "deep_research_reply",
    "input_problem",
    "input_tokens_of",
    "make_tls_material",
    "model_object",
    "openssl_available",
    "refused_setting",
    "unsupported_parameter",
]

DEFAULT_TEXT = "HTTP 404 means the server could not find the requested resource."
SOURCES_INCLUDE = "web_search_call.action.sources"
_REASONING_MODEL = re.compile(r"^(gpt-5|gpt-6|o\d)")
_DATED_SUFFIX = re.compile(r"-\d{4}-\d{2}-\d{2}$")

# (type, code, message) the real API sends per status; ``{model}`` is filled in.
_ERROR_DEFAULTS: dict[int, tuple[str, str | None, str]] = {
    400: ("invalid_request_error", None, "Invalid request."),
    401: (
        "invalid_request_error",
        "invalid_api_key",
        (
            "Incorrect API key provided: sk-****. You can find your API key at "
            "https://platform.openai.com/account/api-keys."
        ),
    ),
    403: (
        "invalid_request_error",
        "unsupported_country_region_territory",
        "Country, region, or territory not supported",
    ),
    404: (
        "invalid_request_error",
        "model_not_found",
        "The model `{model}` does not exist or you do not have access to it.",
    ),
    429: (
        "tokens",
        "rate_limit_exceeded",
        (
            "Rate limit reached for {model} in organization org-fake on tokens per "
            "min (TPM): Limit 30000, Used 30000, Requested 1200. Please try again in "
            "2.4s. Visit https://platform.openai.com/account/rate-limits to learn more."
        ),
    ),
    500: (
        "server_error",
        None,
        "The server had an error while processing your request. Sorry about that!",
    ),
    502: ("server_error", None, "Bad gateway."),
    503: ("server_error", None, "The server is overloaded or not ready yet."),
}
_QUOTA_ERROR = (
    "insufficient_quota",
    "insufficient_quota",
    (
        "You exceeded your current quota, please check your plan and billing "
        "details. For more information on this error, read the docs: "
        "https://platform.openai.com/docs/guides/error-codes/api-errors."
    ),
)
# GET /v1/models: what a typical project's key lists (``Model``: id, object, created, owned_by).
DEFAULT_MODELS = (
    "gpt-6-luna",
    "gpt-6.1-terra",
    "gpt-6.2-sol",
    "gpt-6.1-sol",
    "gpt-6-sol",
    "gpt-6-astra",
    "gpt-5.6-sol",
    "gpt-5.6-terra",
    "gpt-5.6-luna",
    "gpt-5.2",
    "gpt-5.2-2025-12-11",
    "gpt-5.2-pro",
    "gpt-5.1",
    "gpt-5",
    "gpt-5-mini",
    "gpt-5-nano",
    "gpt-4.1",
    "gpt-4.1-mini",
    "o3",
    "o3-deep-research",
    "o4-mini-deep-research",
)
# Each model's ``shutdown_date`` (YYYY-MM-DD) as GET /v1/models reports it, from OpenAI's
# deprecations page (developers.openai.com/api/docs/deprecations); a model not listed has
# null. A model whose date has passed (UTC) is gone: not listed, 404 ``model_not_found`` on
# GET /v1/models/{id} and on a create (which consumes no Reply).
SHUTDOWN_DATES = {
    "gpt-5": "2026-12-11",
    "gpt-5-mini": "2026-12-11",
    "gpt-5-nano": "2026-12-11",
    "gpt-5-pro": "2026-12-11",
    "o3": "2026-12-11",
    "gpt-4.1": "2027-01-14",
    "gpt-4.1-mini": "2027-01-14",
    "gpt-4o": "2027-01-14",
    "gpt-4o-mini": "2027-01-14",
    "o4-mini": "2026-10-23",
    "gpt-4.1-nano": "2026-10-23",
    "gpt-5.2-chat-latest": "2026-08-10",
    "gpt-5.1-codex": "2026-07-23",
}
# The day SHUTDOWN_DATES was read off the deprecations page. The fake keeps each date as far
# ahead of its own today as it was of this day (shutdown_dates_today), so the suite meets the
# same lineup on any later day: gpt-5 still "shuts down in 14 days" next year, while a test
# about retirement sets the dates it needs.
SHUTDOWN_DATES_AS_OF = "2026-11-27"


def shutdown_dates_today() -> dict[str, str]:
    """SHUTDOWN_DATES moved forward by the days since SHUTDOWN_DATES_AS_OF (UTC, OpenAI's
    clock, as the fake retires by it); unchanged on that day or before it."""
    import datetime

    as_of = datetime.date.fromisoformat(SHUTDOWN_DATES_AS_OF)
    today = datetime.datetime.now(datetime.timezone.utc).date()  # clock: utc
    shift = max(today - as_of, datetime.timedelta())
    return {
        model: (datetime.date.fromisoformat(date) + shift).isoformat()
        for model, date in SHUTDOWN_DATES.items()
    }


_MODEL_CREATED = 1_765_400_000  # a fixed time, like the API's per-model creation stamps


def model_object(model_id: str, shutdown_date: str | None = None) -> dict:
    """One ``openai.types.Model``, as ``GET /v1/models/{id}`` returns it."""
    return {
        "id": model_id,
        "object": "model",
        "created": _MODEL_CREATED,
        "owned_by": "system" if model_id.startswith(("gpt-", "o")) else "openai",
        "shutdown_date": shutdown_date,
    }


def _masked_key(authorization: str) -> str:
    """How the API echoes a rejected key: its start and last four characters only."""
    key = authorization.removeprefix("Bearer ").strip()
    return f"{key[:3]}{'*' * 12}{key[-4:]}" if len(key) > 8 else "***"


_STREAM_ERROR_MESSAGE = (
    "An error occurred while processing your request. You can retry your request, "
    "or contact us through our help center at help.openai.com if the error persists."
)


@dataclass
class Reply:
    """What the fake does for one ``POST /v1/responses``.

    Output:
      text: the assistant message text.
      searches: one ``web_search_call`` output item each, e.g.
        ``{"query": "...", "sources": [{"type": "url", "url": "..."}]}``.  Optional keys:
        ``"queries"`` (default ``[query]``), ``"status"`` (default ``"completed"``),
        ``"action"`` (a full action dict, e.g. ``{"type": "open_page", "url": ...}``,
        emitted verbatim).  ``sources`` are only emitted when the request's ``include``
        lists ``"web_search_call.action.sources"`` (as the real API does) and are passed
        through verbatim; note the SDK only models ``{"type": "url", "url": ...}``.
      citations: ``url_citation`` annotations on the output text: ``{"url", "title"}``
        plus optional ``start_index``/``end_index`` (default: the span where the url,
        else the title, appears in ``text``, else the whole text).
      model: model id reported back; default ``<requested>-2026-01-01``.
      reasoning: emit a reasoning item first.  ``None`` = auto: yes for ``gpt-5*`` and
        ``o<digit>*`` models unless the request sets ``reasoning.effort == "none"``.
      usage: deep-merged over a realistic default (``total_tokens`` recomputed unless
        given); sent as given, nulls, strings and negatives too (as gateways send them).
      incomplete / incomplete_reason: finish as ``response.incomplete`` with
        ``incomplete_details.reason`` (message item status ``incomplete``).
      text_chunks: how many ``response.output_text.delta`` events to split text into.

    Errors (``status != 200``): JSON body ``{"error": {message, type, param, code}}``;
      ``error_type``/``error_code``/``error_message``/``error_param`` override the
      per-status defaults (401 invalid_api_key, 404 model_not_found, 429
      rate_limit_exceeded; 429 with ``error_code="insufficient_quota"`` uses the real
      quota type/message; 500 type server_error with code null).
      ``body`` (str/bytes/dict) replaces the body verbatim for any status, with
      ``content_type``.
      headers: extra response headers, e.g. ``{"retry-after-ms": "10"}``.

    Timing / faults (``N`` counts SSE events already sent; 0 = right after headers):
      delay_before_headers: wait before the status line (ends early on hang-up/stop).
      event_delay: sleep between SSE events (slow trickle).
      work_seconds: a long answer: after ``response.created`` and ``response.in_progress``
        nothing comes for this long, then the rest (a background response stays
        ``in_progress`` meanwhile, whether or not anyone is connected; a non-streaming
        request waits before the headers).
      stall_after_events / stall_seconds: after N events stop sending but keep the
        socket open; ends on client hang-up (recorded), server stop, or after
        ``stall_seconds`` (then the stream resumes).  Non-streaming requests stall
        before the headers instead.
      drop_after_events: after N events close the TCP connection with no terminating
        chunk (FIN; ``drop_with_rst=True`` sends RST).  Non-streaming: close before
        any response bytes.
      malformed_after_events: after N events send ``data: {not json`` and end the
        stream.  Non-streaming: a 200 whose JSON body is malformed.
      stream_error: after ``after_events`` (default 2) events emit a terminal error
        and end the stream.  Keys: ``event`` = ``"error"`` (default) or
        ``"response.failed"``; ``shape`` = ``"nested"`` (default; what production sends:
        ``{"type":"error","error":{type,code,message,param},"sequence_number":n}``,
        which openai 3.54 raises as ``APIError``) or ``"flat"`` (the documented
        ``ResponseErrorEvent`` shape, which the SDK yields as an event instead);
        ``code``/``message``/``type``/``param``.
      close_connection: answer with ``Connection: close`` and close afterwards.
      resume_drops: background only: resume stream i (0-based) drops after
        ``resume_drops[i]`` events (the response itself goes on).
    """

    text: str = DEFAULT_TEXT
    searches: list[dict] = field(default_factory=list)
    citations: list[dict] = field(default_factory=list)
    model: str | None = None
    status: int = 200
    error_type: str | None = None
    error_code: str | None = None
    error_message: str | None = None
    error_param: str | None = None
    body: str | bytes | dict | None = None
    content_type: str | None = None
    headers: dict = field(default_factory=dict)
    delay_before_headers: float = 0.0
    event_delay: float = 0.0
    work_seconds: float = 0.0
    stall_after_events: int | None = None
    stall_seconds: float = 3600.0
    drop_after_events: int | None = None
    drop_with_rst: bool = False
    malformed_after_events: int | None = None
    stream_error: dict | None = None
    usage: dict | None = None
    incomplete: bool = False
    incomplete_reason: str = "max_output_tokens"
    reasoning: bool | None = None
    text_chunks: int = 4
    close_connection: bool = False
    resume_drops: list[int] = field(default_factory=list)


def deep_research_reply(searches: int = 12, sections: int = 6, **overrides: Any) -> Reply:
    """A deep-research-like run: ``searches`` web searches (a few open a page rather than
    search), then a long report in Markdown sections citing several sources."""
    urls = [f"https://research{i}.example.org/report-{i}" for i in range(max(1, searches))]
    calls = []
    for i, url in enumerate(urls[:searches]):
        if i % 4 == 3:  # deep research also opens the pages it found
            calls.append({"action": {"type": "open_page", "url": url}})
        else:
            calls.append(
                {"query": f"research question part {i}", "sources": [{"type": "url", "url": url}]}
            )
    body = "\n\n".join(
        f"## Finding {i + 1}\n\nWhat the sources say about part {i + 1}, with figures "
        f"and dates ([source]({urls[i % len(urls)]})). " + "Detail that goes on. " * 40
        for i in range(sections)
    )
    fields: dict[str, Any] = dict(
        text=f"# Research report\n\nSummary: the short answer.\n\n{body}",
        searches=calls,
        citations=[{"url": url, "title": f"Report {i}"} for i, url in enumerate(urls[:3])],
        usage={"input_tokens": 60_000, "output_tokens": 9_000,
               "output_tokens_details": {"reasoning_tokens": 4_000}},
        event_delay=0.01,
        text_chunks=20,
    )  # fmt: skip
    fields.update(overrides)
    return Reply(**fields)


_DEEP_TOOLS = ("web_search_preview", "mcp", "file_search", "code_interpreter")


def deep_research_refusal(body: Any) -> dict | None:
    """The 400 error a deep research model gives the request, or None if it takes it."""
    if not isinstance(body, dict) or "deep-research" not in str(body.get("model") or ""):
        return None
    kinds = [t.get("type") for t in body.get("tools") or [] if isinstance(t, dict)]
    error = {"type": "invalid_request_error", "param": "tools", "code": None}
    if any(kind not in _DEEP_TOOLS for kind in kinds):
        message = (
            "Deep research models only support the 'web_search_preview', "
            "'code_interpreter', 'mcp', and 'file_search' tools."
        )
        return {"error": {"message": message, **error}}
    if not {"web_search_preview", "mcp"} & set(kinds):
        message = (
            "Deep research models require at least one of 'web_search_preview' or 'mcp' tools."
        )
        return {"error": {"message": message, **error}}
    effort = (body.get("reasoning") or {}).get("effort")
    if effort not in (None, "medium"):
        message = (
            f"Unsupported value: 'reasoning.effort' does not support '{effort}' with this "
            "model. Supported values are: 'medium'."
        )
        return {"error": {"message": message, "type": "invalid_request_error",
                          "param": "reasoning.effort", "code": "unsupported_value"}}  # fmt: skip
    return None


# An answer found with one web search and cited: what the reference clients' tests
# (tests/test_sdk_client*.py, tests/test_inspector.py) ask the fake for.
SEARCHED = Reply(
    text="Python 3.14.0 was released on 2025-10-07 (https://www.python.org/downloads/).",
    searches=[
        {
            "query": "python 3.14 release date",
            "sources": [{"type": "url", "url": "https://www.python.org/downloads/"}],
        }
    ],
    citations=[{"url": "https://www.python.org/downloads/", "title": "Download Python"}],
)


@dataclass
class Recorded:
    """One request as the fake saw it.

    ``headers`` has lower-case keys; the Authorization value is replaced by
    ``"<redacted>"`` (presence only).  Use :meth:`authorized_with` to check the key.
    Times are ``time.monotonic()``.
    """

    index: int
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    raw_body: bytes
    received_at: float
    connection_id: int
    authorization_sha256: str | None = None
    reply: Reply | None = None
    finished_at: float | None = None
    client_disconnected_at: float | None = None
    status_sent: int | None = None
    events_sent: int = 0
    first_event_at: float | None = None  # when the first SSE event went out
    dropped_at: float | None = None  # when a drop fault closed the connection

    @property
    def has_authorization(self) -> bool:
        return self.authorization_sha256 is not None

    def authorized_with(self, api_key: str) -> bool:
        """True if the request carried ``Authorization: Bearer <api_key>``."""
        digest = hashlib.sha256(f"Bearer {api_key}".encode()).hexdigest()
        return digest == self.authorization_sha256


def _rand_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(24)}"


def _dump(obj: Any) -> bytes:
    text = json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
    try:
        return text.encode()
    except UnicodeEncodeError:  # a lone surrogate: sent as the API would, a \ud800 escape
        return json.dumps(obj, separators=(",", ":")).encode()


def _whole(value: Any) -> int:
    """A count as a gateway may send it (null, a string, negative) as the fake's own int."""
    return value if type(value) is int and value > 0 else 0


def _deep_merge(base: dict, override: dict) -> dict:
    out = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _split_text(text: str, n: int) -> list[str]:
    """Split text into at most n word-boundary chunks that join back to text."""
    if not text:
        return []
    tokens = re.findall(r"\s*\S+\s*|\s+", text)
    n = max(1, min(n, len(tokens)))
    per, extra = divmod(len(tokens), n)
    chunks, pos = [], 0
    for i in range(n):
        size = per + (1 if i < extra else 0)
        chunks.append("".join(tokens[pos : pos + size]))
        pos += size
    return chunks


def _annotation(text: str, citation: dict) -> dict:
    url, title = citation["url"], citation.get("title", citation["url"])
    start, end = citation.get("start_index"), citation.get("end_index")
    if start is None or end is None:
        for needle in (url, title):
            found = text.find(needle) if needle else -1
            if found >= 0:
                start, end = found, found + len(needle)
                break
        else:
            start, end = 0, len(text)
    return {
        "type": "url_citation",
        "start_index": start,
        "end_index": end,
        "title": title,
        "url": url,
    }


def _echo_tool(tool: Any) -> Any:
    """Echo a request tool the way the API does (web_search gets defaults filled)."""
    if not isinstance(tool, dict) or tool.get("type") not in (
        "web_search",
        "web_search_2025_08_26",
    ):
        return tool
    echoed = {
        "type": tool["type"],
        "filters": tool.get("filters"),
        "search_context_size": tool.get("search_context_size", "medium"),
        "user_location": tool.get("user_location")
        or {
            "type": "approximate",
            "city": None,
            "country": "US",
            "region": None,
            "timezone": None,
        },
    }
    if "external_web_access" in tool:
        echoed["external_web_access"] = tool["external_web_access"]
    return echoed


class _Plan:
    """Everything derived from one request + Reply: the items, events and bodies."""

    def __init__(self, req: dict, reply: Reply) -> None:
        self.req = req
        self.reply = reply
        requested = str(req.get("model") or "gpt-5.2")
        self.requested_model = requested
        self.model = reply.model or (
            requested if _DATED_SUFFIX.search(requested) else f"{requested}-2026-01-01"
        )
        include = req.get("include") or []
        self.include_sources = SOURCES_INCLUDE in include
        self.include_encrypted = "reasoning.encrypted_content" in include
        effort = (req.get("reasoning") or {}).get("effort")
        self.reasoning_model = bool(_REASONING_MODEL.match(requested))
        self.with_reasoning = (
            reply.reasoning
            if reply.reasoning is not None
            else self.reasoning_model and effort != "none"
        )
        stream_options = req.get("stream_options") or {}
        self.obfuscate = stream_options.get("include_obfuscation", True) is not False
        self.resp_id = _rand_id("resp")
        self.created_at = int(time.time())
        self.annotations = [_annotation(reply.text, c) for c in reply.citations]
        self.msg_id = _rand_id("msg")
        self.rs_id = _rand_id("rs")
        self.ws_ids = [_rand_id("ws") for _ in reply.searches]
        self.prior_tokens = 0  # a follow-up's earlier turns, billed again as input

    # -- objects ---------------------------------------------------------------

    def response(self, status: str, output: list, *, final: bool) -> dict:
        req = self.req
        reasoning = req.get("reasoning") or {}
        text_cfg = _deep_merge(
            {"format": {"type": "text"}, "verbosity": "medium"}, req.get("text") or {}
        )
        tier = req.get("service_tier") or "auto"
        if final and tier == "auto":
            tier = "default"
        return {
            "id": self.resp_id,
            "object": "response",
            "created_at": self.created_at,
            "status": status,
            "background": bool(req.get("background") or False),
            "billing": {"payer": "developer"},
            "completed_at": int(time.time()) if status == "completed" else None,
            "error": None,
            "frequency_penalty": 0.0,
            "incomplete_details": None,
            "instructions": req.get("instructions"),
            "max_output_tokens": req.get("max_output_tokens"),
            "max_tool_calls": req.get("max_tool_calls"),
            "model": self.model,
            "output": copy.deepcopy(output),
            "parallel_tool_calls": req.get("parallel_tool_calls") is not False,
            "presence_penalty": 0.0,
            "previous_response_id": req.get("previous_response_id"),
            "prompt_cache_key": req.get("prompt_cache_key"),
            "prompt_cache_retention": req.get("prompt_cache_retention"),
            "reasoning": {
                "effort": reasoning.get("effort") or ("medium" if self.reasoning_model else None),
                "summary": reasoning.get("summary"),
            },
            "safety_identifier": req.get("safety_identifier"),
            "service_tier": tier,
            "store": req.get("store") is not False,
            "temperature": req.get("temperature", 1.0),
            "text": text_cfg,
            "tool_choice": req.get("tool_choice", "auto"),
            "tools": [_echo_tool(t) for t in req.get("tools") or []],
            "top_logprobs": req.get("top_logprobs") or 0,
            "top_p": req.get("top_p", 1.0),
            "truncation": req.get("truncation") or "disabled",
            "usage": self.usage() if final else None,
            "user": req.get("user"),
            "metadata": req.get("metadata") or {},
        }

    def usage(self) -> dict:
        given, instructions = self.req.get("input", ""), str(self.req.get("instructions") or "")
        if isinstance(given, list):  # parts: images and files by what they are, not their base64
            prompt = input_tokens_of(given) + len(instructions) // 4
        else:
            prompt = len(json.dumps(given) + instructions) // 4
        input_tokens = 900 + prompt + 350 * len(self.reply.searches) + self.prior_tokens
        reasoning_tokens = 192 if self.with_reasoning else 0
        output_tokens = max(1, len(self.reply.text) // 4) + reasoning_tokens
        default = {
            "input_tokens": input_tokens,
            "input_tokens_details": {
                # Prompt caching works in 128-token increments past the first 1024.
                "cached_tokens": 1024 if input_tokens >= 1152 else 0,
                "cache_write_tokens": 0,
                # Writes by retention; their sum is cache_write_tokens (GPT-5.6 and later).
                "cache_write_tokens_details": {"ttl_30m_tokens": 0, "ttl_12h_tokens": 0},
            },
            "output_tokens": output_tokens,
            "output_tokens_details": {"reasoning_tokens": reasoning_tokens},
            "total_tokens": input_tokens + output_tokens,
        }
        if not self.reply.usage:
            return default
        merged = _deep_merge(default, self.reply.usage)
        if "total_tokens" not in self.reply.usage:
            merged["total_tokens"] = _whole(merged["input_tokens"]) + _whole(
                merged["output_tokens"]
            )
        return merged

    def reasoning_item(self, *, done: bool) -> dict:
        item: dict[str, Any] = {"id": self.rs_id, "type": "reasoning", "summary": []}
        if done and self.include_encrypted:
            item["encrypted_content"] = "gAAAAAB" + secrets.token_urlsafe(48)
        return item

    def search_item(self, i: int, *, done: bool) -> dict:
        search = self.reply.searches[i]
        if not done:
            # The API has not chosen the query yet when the item is first added.
            action: dict[str, Any] = {"type": "search"}
            status = "in_progress"
        elif "action" in search:
            action = copy.deepcopy(search["action"])
            status = search.get("status", "completed")
        else:
            query = search.get("query", "")
            action = {
                "type": "search",
                "query": query,
                "queries": list(search.get("queries") or [query]),
            }
            if self.include_sources:
                action["sources"] = copy.deepcopy(search.get("sources") or [])
            status = search.get("status", "completed")
        return {
            "id": self.ws_ids[i],
            "type": "web_search_call",
            "status": status,
            "action": action,
        }

    def message_item(self, *, done: bool) -> dict:
        content = []
        if done:
            content = [self.text_part(full=True)]
        status = "in_progress"
        if done:
            status = "incomplete" if self.reply.incomplete else "completed"
        return {
            "id": self.msg_id,
            "type": "message",
            "status": status,
            "content": content,
            "role": "assistant",
        }

    def text_part(self, *, full: bool) -> dict:
        return {
            "type": "output_text",
            "annotations": copy.deepcopy(self.annotations) if full else [],
            "logprobs": [],
            "text": self.reply.text if full else "",
        }

    def final_output(self) -> list:
        output = []
        if self.with_reasoning:
            output.append(self.reasoning_item(done=True))
        output += [self.search_item(i, done=True) for i in range(len(self.ws_ids))]
        output.append(self.message_item(done=True))
        return output

    def final_response(self) -> dict:
        status = "incomplete" if self.reply.incomplete else "completed"
        resp = self.response(status, self.final_output(), final=True)
        if self.reply.incomplete:
            resp["incomplete_details"] = {"reason": self.reply.incomplete_reason}
        return resp

    # -- stream ----------------------------------------------------------------

    def events(self) -> list[dict]:
        """The full SSE event list (with sequence numbers), honouring stream_error."""
        ev: list[dict] = []
        started = self.response("in_progress", [], final=False)
        ev.append({"type": "response.created", "response": started})
        ev.append({"type": "response.in_progress", "response": started})
        index = 0
        if self.with_reasoning:
            ev += self._item_events(index, self.reasoning_item(done=False), None)
            ev[-1]["item"] = self.reasoning_item(done=True)
            index += 1
        for i in range(len(self.ws_ids)):
            ref = {"item_id": self.ws_ids[i], "output_index": index}
            middle = [
                {"type": f"response.web_search_call.{phase}", **ref}
                for phase in ("in_progress", "searching", "completed")
            ]
            ev += self._item_events(index, self.search_item(i, done=False), middle)
            ev[-1]["item"] = self.search_item(i, done=True)
            index += 1
        ev += self._item_events(index, self.message_item(done=False), self._text_events(index))
        ev[-1]["item"] = self.message_item(done=True)
        final = self.final_response()
        kind = "response.incomplete" if self.reply.incomplete else "response.completed"
        ev.append({"type": kind, "response": final})
        if self.reply.stream_error is not None:
            ev = self._cut_with_error(ev, self.reply.stream_error)
        return [{"type": e["type"], "sequence_number": n, **e} for n, e in enumerate(ev)]

    @staticmethod
    def _item_events(index: int, item: dict, middle: list[dict] | None) -> list[dict]:
        return [
            {"type": "response.output_item.added", "output_index": index, "item": item},
            *(middle or []),
            {"type": "response.output_item.done", "output_index": index, "item": item},
        ]

    def _text_events(self, index: int) -> list[dict]:
        ref = {"item_id": self.msg_id, "output_index": index, "content_index": 0}
        ev: list[dict] = [
            {
                "type": "response.content_part.added",
                **ref,
                "part": self.text_part(full=False),
            }
        ]
        pending = list(enumerate(self.annotations))
        emitted = 0
        for chunk in _split_text(self.reply.text, self.reply.text_chunks):
            delta = {"type": "response.output_text.delta", **ref, "delta": chunk}
            delta["logprobs"] = []
            if self.obfuscate:
                delta["obfuscation"] = secrets.token_urlsafe(9)[: max(1, 12 - len(chunk))]
            ev.append(delta)
            emitted += len(chunk)
            ev += self._annotation_events(ref, pending, upto=emitted)
        ev += self._annotation_events(ref, pending, upto=None)
        ev.append(
            {
                "type": "response.output_text.done",
                **ref,
                "text": self.reply.text,
                "logprobs": [],
            }
        )
        ev.append(
            {
                "type": "response.content_part.done",
                **ref,
                "part": self.text_part(full=True),
            }
        )
        return ev

    @staticmethod
    def _annotation_events(
        ref: dict, pending: list[tuple[int, dict]], upto: int | None
    ) -> list[dict]:
        out = []
        for item in list(pending):
            i, ann = item
            if upto is None or ann["end_index"] <= upto:
                pending.remove(item)
                out.append(
                    {
                        "type": "response.output_text.annotation.added",
                        **ref,
                        "annotation_index": i,
                        "annotation": ann,
                    }
                )
        return out

    def _cut_with_error(self, ev: list[dict], spec: dict) -> list[dict]:
        after = int(spec.get("after_events", 2))
        kept = ev[:after]
        code = spec.get("code", "server_error")
        message = spec.get("message", _STREAM_ERROR_MESSAGE)
        err_type = spec.get("type", "server_error")
        param = spec.get("param")
        if spec.get("event", "error") == "response.failed":
            done_items = [e["item"] for e in kept if e["type"] == "response.output_item.done"]
            failed = self.response("failed", done_items, final=False)
            failed["error"] = {"code": code, "message": message}
            return [*kept, {"type": "response.failed", "response": failed}]
        if spec.get("shape", "nested") == "flat":
            error_event = {"type": "error", "code": code, "message": message}
            error_event["param"] = param
        else:
            error_event = {
                "type": "error",
                "error": {
                    "type": err_type,
                    "code": code,
                    "message": message,
                    "param": param,
                },
            }
        return [*kept, error_event]


_TERMINAL_EVENTS = {
    "response.completed": "completed",
    "response.incomplete": "incomplete",
    "response.failed": "failed",
}
_BACKGROUND_REFUSAL = (
    400,
    "invalid_request_error",
    "unsupported_parameter",
    "Background mode is not available for this organization.",
)


_WORK_AFTER = 2  # Reply.work_seconds falls after response.created and response.in_progress


class _BackgroundJob:
    """One background response: its events become available over time, client or not."""

    def __init__(self, plan: _Plan, reply: Reply) -> None:
        self.plan = plan
        self.reply = reply
        self.started = time.monotonic()
        self.events = plan.events()
        for event in self.events[:1]:
            event["response"]["status"] = "queued"
        self.cancelled_at: float | None = None
        self.resumes = 0
        self.window: str | None = None  # a discounted run's: see windowed()
        self.window_polls = 0
        self.polled = 0

    def windowed(self, window: str, polls: int) -> _BackgroundJob:
        """A discounted run: nothing happens until ``polls`` polls have seen it waiting."""
        self.window, self.window_polls = window, polls
        self.started = float("inf")  # no event is ready until it is released
        return self

    def poll(self) -> None:
        """One GET of a discounted run: past its polls, it has run (all its events at once)."""
        self.polled += 1
        if self.window and self.polled > self.window_polls and self.cancelled_at is None:
            self.started = time.monotonic() - 1e6

    def ready_at(self, n: int) -> float:
        working = self.reply.work_seconds if n >= _WORK_AFTER else 0.0
        return self.started + n * self.reply.event_delay + working

    def available(self, now: float | None = None) -> int:
        """How many events exist by ``now`` (a cancel stops the count)."""
        now = time.monotonic() if now is None else now
        if self.cancelled_at is not None:
            now = min(now, self.cancelled_at)
        count = 0
        while count < len(self.events) and self.ready_at(count) <= now:
            count += 1
        return count

    def terminal(self) -> str | None:
        if self.available() == len(self.events):
            return _TERMINAL_EVENTS.get(self.events[-1]["type"], "failed")
        return "cancelled" if self.cancelled_at is not None else None

    def status(self) -> str:
        done = self.terminal()
        if done:
            return done
        if self.window:  # waiting in its window: queued at first, then running
            return "in_progress" if self.polled > 1 else "queued"
        return "in_progress" if self.available() > 1 else "queued"

    def response(self) -> dict:
        status = self.status()
        last = self.events[self.available() - 1] if self.available() else None
        if status in ("completed", "incomplete", "failed") and last and "response" in last:
            return copy.deepcopy(last["response"])
        return self.plan.response(status, [], final=False)

    def cancel(self) -> dict:
        if self.terminal() is None:
            self.cancelled_at = time.monotonic()
        return self.response()


# Settings the real API refuses for a model, before anything is created or billed (HTTP 400,
# ``invalid_request_error``; messages as the API words them):
# * a ``-chat-latest`` gpt-5.x model (or its dated snapshot) takes reasoning effort ``medium``
#   only: ``Unsupported value: 'low' is not supported with the 'gpt-5.2-chat-latest' model.
#   Supported values are: 'medium'.``, param ``reasoning.effort``, code ``unsupported_value``;
# * gpt-5-chat-latest takes verbosity ``medium`` only (param ``text.verbosity``, same wording);
# * web_search cannot run with effort ``minimal``: ``The following tools cannot be used with
#   reasoning.effort 'minimal': web_search.``, param ``tools``, code null;
# * service_tier ``flex`` on a model without a flex tier (the gpt-4o and gpt-4.1 families, o1,
#   o3-mini, gpt-5-pro): ``Flex is not available for this model.``, param and code null (the
#   bodies reported from the API carry only message and type);
# * a service_tier the API does not know: ``Invalid value: 'x'. Supported values are: 'auto',
#   'default', 'fast', 'flex', and 'priority'.``, param ``service_tier``, code ``invalid_value``;
# * max_tool_calls below 1: ``Invalid 'max_tool_calls': integer below minimum value. Expected a
#   value >= 1, but got 0 instead.``, param ``max_tool_calls``, code ``integer_below_min_value``.
# A gateway or other Responses server that lacks a parameter answers as the API does for a
# model that takes no such parameter: :func:`unsupported_parameter`.
# * GPT-6 models take reasoning effort ``low`` to ``max``, and ``none`` only gpt-6-sol,
#   gpt-6-luna and gpt-6.1-terra; never ``minimal`` (their model pages): the others get
#   ``unsupported_value`` listing what the model takes, param ``reasoning.effort``;
# * gpt-4.1 and gpt-4o take no reasoning at all: ``Unsupported parameter: 'reasoning.effort'
#   is not supported with this model.``, code ``unsupported_parameter``.
_CHAT_LATEST = re.compile(r"^gpt-5\.\d+-chat(-latest|-\d{4}-\d{2}-\d{2})$")
_GPT6 = re.compile(r"^gpt-6(\.\d+)?-[a-z]+$")
_GPT6_WITH_NONE = ("gpt-6-sol", "gpt-6-luna", "gpt-6.1-terra")
_GPT6_EFFORTS = ["low", "medium", "high", "xhigh", "max"]
_NO_REASONING = re.compile(r"^(gpt-4\.1|gpt-4o)(-|$)")
_ONLY_MEDIUM_VERBOSITY = re.compile(r"^gpt-5-chat(-latest|-\d{4}-\d{2}-\d{2})$")


def _quoted_list(values: list[str]) -> str:
    """'a', 'b', and 'c' as the API lists supported values."""
    quoted = [f"'{value}'" for value in values]
    if len(quoted) < 3:
        return " and ".join(quoted)
    return ", ".join(quoted[:-1]) + ", and " + quoted[-1]


def _unsupported_value(value: str, model: str, supported: list[str], param: str) -> dict:
    return {
        "message": (
            f"Unsupported value: '{value}' is not supported with the '{model}' model. "
            f"Supported values are: {_quoted_list(supported)}."
        ),
        "type": "invalid_request_error",
        "param": param,
        "code": "unsupported_value",
    }


_NO_FLEX = re.compile(r"^(gpt-4o|gpt-4\.1|o1|o3-mini|gpt-5-pro)(-|$)")
_SERVICE_TIERS = ["auto", "default", "fast", "flex", "priority"]


def unsupported_parameter(param: str) -> Reply:
    """The 400 the API sends for a parameter the model takes no value of (``Unsupported
    parameter: 'x' is not supported with this model.``, code ``unsupported_parameter``)."""
    return Reply(
        status=400,
        error_type="invalid_request_error",
        error_param=param,
        error_code="unsupported_parameter",
        error_message=f"Unsupported parameter: '{param}' is not supported with this model.",
    )


def _refused_cost_control(body: dict, model: str) -> dict | None:
    tier, calls = body.get("service_tier"), body.get("max_tool_calls")
    if tier is not None and tier not in _SERVICE_TIERS:
        return {
            "message": f"Invalid value: '{tier}'. Supported values are: "
            f"{_quoted_list(_SERVICE_TIERS)}.",
            "type": "invalid_request_error",
            "param": "service_tier",
            "code": "invalid_value",
        }
    if tier == "flex" and _NO_FLEX.match(model):
        return {
            "message": "Flex is not available for this model.",
            "type": "invalid_request_error",
            "param": None,
            "code": None,
        }
    if type(calls) is int and calls < 1:
        return {
            "message": "Invalid 'max_tool_calls': integer below minimum value. "
            f"Expected a value >= 1, but got {calls} instead.",
            "type": "invalid_request_error",
            "param": "max_tool_calls",
            "code": "integer_below_min_value",
        }
    return None


def refused_setting(body: Any) -> dict | None:
    """The API's ``error`` object for a create whose settings the model refuses, else None."""
    if not isinstance(body, dict):
        return None
    model = str(body.get("model") or "")
    refused = _refused_cost_control(body, model)
    if refused:
        return refused
    effort = (body.get("reasoning") or {}).get("effort")
    verbosity = (body.get("text") or {}).get("verbosity")
    if effort is not None and effort != "medium" and _CHAT_LATEST.match(model):
        return _unsupported_value(effort, model, ["medium"], "reasoning.effort")
    if effort is not None and _GPT6.match(model):
        efforts = (["none"] if model in _GPT6_WITH_NONE else []) + _GPT6_EFFORTS
        if effort not in efforts:
            return _unsupported_value(effort, model, efforts, "reasoning.effort")
    if "reasoning" in body and _NO_REASONING.match(model):
        return {
            "message": "Unsupported parameter: 'reasoning.effort' is not supported with this "
            "model.",
            "type": "invalid_request_error",
            "param": "reasoning.effort",
            "code": "unsupported_parameter",
        }
    if verbosity is not None and verbosity != "medium" and _ONLY_MEDIUM_VERBOSITY.match(model):
        return _unsupported_value(verbosity, model, ["medium"], "text.verbosity")
    searching = [
        tool.get("type")
        for tool in body.get("tools") or ()
        if isinstance(tool, dict) and str(tool.get("type", "")).startswith("web_search")
    ]
    if effort == "minimal" and searching:
        return {
            "message": (
                "The following tools cannot be used with reasoning.effort 'minimal': "
                f"{', '.join(searching)}."
            ),
            "type": "invalid_request_error",
            "param": "tools",
            "code": None,
        }
    return None


# -- input parts: input_text, input_image, input_file (the SDK's Response*Param types) ----------

IMAGE_DETAILS = ("low", "high", "auto", "original")  # ImageDetail
FILE_DETAILS = ("auto", "low", "high")  # ResponseInputFileParam.detail
IMAGE_MIME = ("image/png", "image/jpeg", "image/webp", "image/gif")
_DATA_URL = re.compile(r"^data:([\w.+-]+/[\w.+-]+);base64,([A-Za-z0-9+/]*={0,2})$", re.S)
PDF_PAGE_TOKENS = 1_000  # what the fake bills a PDF page (its text and its page image)


def _bad(param: str, message: str, code: str | None = "invalid_value") -> dict:
    return {"message": message, "type": "invalid_request_error", "param": param, "code": code}


def _missing(param: str) -> dict:
    return _bad(param, f"Missing required parameter: '{param}'.", "missing_required_parameter")


def _decoded(url: str) -> tuple[str, bytes] | None:
    """(MIME type, bytes) of a base64 data URL, or None when it is not one."""
    import base64
    import binascii

    found = _DATA_URL.match(url)
    if not found:
        return None
    try:
        return found.group(1), base64.b64decode(found.group(2), validate=True)
    except (binascii.Error, ValueError):
        return None


def _image_problem(part: dict, where: str) -> dict | None:
    if "detail" not in part:
        return _missing(f"{where}.detail")
    if part["detail"] not in IMAGE_DETAILS:
        return _bad(
            f"{where}.detail",
            f"Invalid value: '{part['detail']}'. Supported values are: 'low', 'high', 'auto', "
            "and 'original'.",
        )
    given = [k for k in ("image_url", "file_id") if part.get(k) is not None]
    if len(given) != 1:
        return _bad(where, "Exactly one of 'image_url' or 'file_id' must be provided.", None)
    url = part.get("image_url")
    if url is None:
        return None
    if not isinstance(url, str) or not url.startswith(("https://", "http://", "data:")):
        return _bad(
            f"{where}.image_url",
            "Expected a valid URL, but got a value with an invalid format.",
            "invalid_value",
        )
    if url.startswith("data:"):
        decoded = _decoded(url)
        if decoded is None or decoded[0] not in IMAGE_MIME:
            mime = url[5:].partition(";")[0]
            return _bad(
                f"{where}.image_url",
                f"Invalid '{where}.image_url'. Expected a base64-encoded data URL with an image "
                "MIME type (e.g. 'data:image/png;base64,aW1nIGJ5dGVzIGhlcmU='), but got "
                f"{'unsupported MIME type ' + repr(mime) if decoded else 'an invalid value'}.",
            )
    return None


def _file_problem(part: dict, where: str) -> dict | None:
    if part.get("detail") is not None and part["detail"] not in FILE_DETAILS:
        return _bad(
            f"{where}.detail",
            f"Invalid value: '{part['detail']}'. Supported values are: 'auto', 'low', and 'high'.",
        )
    given = [k for k in ("file_data", "file_id", "file_url") if part.get(k) is not None]
    if len(given) != 1:
        return _bad(
            where, "Exactly one of 'file_data', 'file_id' or 'file_url' must be provided.", None
        )
    if "file_data" in given:
        if not part.get("filename"):
            return _missing(f"{where}.filename")
        if not isinstance(part["file_data"], str) or _decoded(part["file_data"]) is None:
            return _bad(
                f"{where}.file_data",
                f"Invalid '{where}.file_data'. Expected a base64-encoded data URL "
                "(e.g. 'data:application/pdf;base64,...').",
            )
    if "file_url" in given and not str(part["file_url"]).startswith(("https://", "http://")):
        return _bad(
            f"{where}.file_url", "Expected a valid URL, but got a value with an invalid format."
        )
    return None


def input_problem(body: Any) -> dict | None:
    """The API's ``error`` object for a malformed ``input`` (a message's content parts), else
    None. A string ``input`` is always well formed."""
    items = body.get("input") if isinstance(body, dict) else None
    if not isinstance(items, list):
        return None
    for i, item in enumerate(items):
        if not isinstance(item, dict) or item.get("role") not in (
            "user",
            "assistant",
            "system",
            "developer",
        ):
            return _missing(f"input[{i}].role")
        content = item.get("content")
        if isinstance(content, str):
            continue
        if not isinstance(content, list):
            return _missing(f"input[{i}].content")
        for j, part in enumerate(content):
            where = f"input[{i}].content[{j}]"
            kind = part.get("type") if isinstance(part, dict) else None
            if kind == "input_text":
                problem = None if isinstance(part.get("text"), str) else _missing(f"{where}.text")
            elif kind == "input_image":
                problem = _image_problem(part, where)
            elif kind == "input_file":
                problem = _file_problem(part, where)
            else:
                problem = _bad(
                    f"{where}.type",
                    f"Invalid value: '{kind}'. Supported values are: 'input_text', "
                    "'input_image', and 'input_file'.",
                )
            if problem:
                return problem
    return None


def _image_tokens(part: dict) -> int:
    """The tile formula (low: 85; else fit 2048, short side 768, 170 a 512-px tile + 85),
    from a PNG data URL's header; other images count as 765 (a 1024 x 1024 one)."""
    import math
    import struct

    if part.get("detail") == "low":
        return 85
    decoded = _decoded(str(part.get("image_url") or ""))
    if not decoded or decoded[0] != "image/png" or len(decoded[1]) < 24:
        return 765
    width, height = struct.unpack(">II", decoded[1][16:24])
    scale = min(1.0, 2048 / max(width, height, 1))
    width, height = width * scale, height * scale
    scale = min(1.0, 768 / max(min(width, height), 1))
    return 85 + 170 * math.ceil(width * scale / 512) * math.ceil(height * scale / 512)


def _pdf_pages(data: bytes) -> int:
    """The pages the API renders: every page object, those compressed in a stream (a PDF 1.5
    object stream, as pdfTeX writes them) too, its names in any spelling (/P#61ge is /Page, as
    a reader decodes it)."""
    import zlib

    page = re.compile(rb"/Type[\x00\s]*/Page(?![A-Za-z])")

    def count(plain: bytes) -> int:
        return len(
            page.findall(
                re.sub(rb"#([0-9A-Fa-f]{2})", lambda c: bytes.fromhex(c[1].decode()), plain)
            )
        )

    pages = count(data)
    starts = [found.end() for found in re.finditer(rb"stream\r?\n", data)]
    # Each stream from its own bytes only: from the start to the end of the file is quadratic.
    for start, end in zip(starts, [*starts[1:], len(data)], strict=False):
        try:
            pages += count(zlib.decompressobj().decompress(data[start:end]))
        except zlib.error:
            pass
    return pages


def input_tokens_of(given: Any) -> int:
    """The tokens of a request's ``input``: text by length, images by the tile formula, a PDF
    by its pages (PDF_PAGE_TOKENS each), another file by its decoded length."""
    if not isinstance(given, list):
        return len(json.dumps(given if given is not None else "")) // 4
    tokens = 0
    for item in given:
        content = item.get("content") if isinstance(item, dict) else None
        if isinstance(content, str):
            tokens += len(content) // 4
            continue
        for part in content or ():
            kind = part.get("type")
            if kind == "input_text":
                tokens += len(part.get("text") or "") // 4
            elif kind == "input_image":
                tokens += _image_tokens(part)
            elif kind == "input_file":
                decoded = _decoded(str(part.get("file_data") or ""))
                if decoded and decoded[0] == "application/pdf":
                    tokens += PDF_PAGE_TOKENS * max(1, _pdf_pages(decoded[1]))
                else:
                    tokens += len(decoded[1]) // 4 if decoded else PDF_PAGE_TOKENS
    return tokens


_WINDOWS = ("soonest", "2h", "8h")
_DISCOUNTED = ("2h", "8h")


def _window_error(message: str) -> dict:
    return {
        "message": message,
        "type": "invalid_request_error",
        "param": "background_options",
        "code": "invalid_value",
    }


def window_refusal(body: Any) -> dict | None:
    """The 400 error a create's ``background_options`` gets (None when it is taken): an
    unknown window; ``2h``/``8h`` without ``background: true``, with ``stream: true``, or with
    a service tier other than Standard (``default``/``auto``)."""
    if not isinstance(body, dict) or "background_options" not in body:
        return None
    options = body["background_options"]
    window = options.get("completion_window", "soonest") if isinstance(options, dict) else None
    if window not in _WINDOWS:
        return _window_error(
            f"Invalid value: {window!r}. Supported values are: 'soonest', '2h', and '8h'."
        )
    if window not in _DISCOUNTED:
        return None
    if body.get("background") is not True:
        return _window_error(f"The '{window}' completion window requires 'background': true.")
    if body.get("stream") is True:
        return _window_error(
            f"The '{window}' completion window cannot be used with 'stream': true; poll the "
            "response instead."
        )
    if body.get("service_tier") not in (None, "auto", "default"):
        return _window_error(
            f"The '{window}' completion window is only available with Standard processing "
            f"(service_tier 'default' or 'auto'), not {body.get('service_tier')!r}."
        )
    return None


def _window_of(body: dict) -> str | None:
    options = body.get("background_options")
    window = options.get("completion_window") if isinstance(options, dict) else None
    return window if window in _DISCOUNTED else None


def _wants_background(body: Any) -> bool:
    return isinstance(body, dict) and body.get("background") is True


def _error_body(reply: Reply, model: str) -> dict:
    err_type, code, message = _ERROR_DEFAULTS.get(
        reply.status,
        ("server_error" if reply.status >= 500 else "invalid_request_error", None, ""),
    )
    if reply.error_code == "insufficient_quota":
        err_type, code, message = _QUOTA_ERROR
    message = message or f"HTTP {reply.status}"
    return {
        "error": {
            "message": reply.error_message or message.replace("{model}", model),
            "type": reply.error_type or err_type,
            "param": reply.error_param,
            "code": reply.error_code if reply.error_code is not None else code,
        }
    }


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Each SSE event is a small write; with Nagle on, a reused connection waits ~40 ms per event.
    disable_nagle_algorithm = True
    server: _HTTPServer

    def setup(self) -> None:
        sock = self.request
        self.conn_id = self.server.fake._connection_opened(sock)
        if isinstance(sock, ssl.SSLSocket):
            # Handshake here (handler thread), not in the accept loop.
            try:
                sock.settimeout(10)
                sock.do_handshake()
                sock.settimeout(None)
            except BaseException:
                self.server.fake._connection_closed(sock)
                raise
        super().setup()

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.fake._connection_closed(self.request)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep test output clean (and never echo headers)

    def do_GET(self) -> None:
        self._dispatch()

    do_POST = do_PUT = do_PATCH = do_DELETE = do_GET

    # -- plumbing ----------------------------------------------------------------

    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("transfer-encoding", "").lower():
            parts = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(parts)
                parts.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("content-length") or 0)
        return self.rfile.read(length) if length else b""

    def _dispatch(self) -> None:
        fake = self.server.fake
        raw = self._read_body()
        headers = {k.lower(): v for k, v in self.headers.items()}
        authorization = headers.get("authorization", "")
        auth_digest = None
        if "authorization" in headers:
            auth_digest = hashlib.sha256(headers["authorization"].encode()).hexdigest()
            headers["authorization"] = "<redacted>"
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = None
        rec = fake._record(
            method=self.command,
            path=self.path,
            headers=headers,
            body=body,
            raw_body=raw,
            connection_id=self.conn_id,
            authorization_sha256=auth_digest,
        )
        self.rec = rec
        if fake.ignore_windows and isinstance(body, dict):  # recorded as sent, served without
            body = {k: v for k, v in body.items() if k not in ("background", "background_options")}
        try:
            path = urlsplit(self.path).path
            if not fake._accepts(authorization):
                self._send_unauthorized(authorization)
            elif self.command == "GET" and path.startswith("/v1/models"):
                self._serve_models(path)
            elif self.command == "POST" and path == "/v1/responses" and fake.retired_in(body):
                self._send_model_gone(str(body["model"]))
            elif self.command == "POST" and path == "/v1/responses" and input_problem(body):
                # A malformed input part: refused before anything is created, as the API does.
                error = input_problem(body)
                self._send_body(400, _dump({"error": error}), "application/json", {})
            elif self.command == "POST" and path == "/v1/responses" and refused_setting(body):
                # Refused before anything is created: no Reply is consumed.
                error = refused_setting(body)
                self._send_body(400, _dump({"error": error}), "application/json", {})
            elif self.command == "POST" and path == "/v1/responses" and fake.unknown_previous(body):
                self._send_previous_not_found(body["previous_response_id"])
            elif self.command == "POST" and path == "/v1/responses" and deep_research_refusal(body):
                self._send_body(400, _dump(deep_research_refusal(body)), "application/json", {})
            elif self.command == "POST" and path == "/v1/responses" and fake.refused_window(body):
                error = _error_body(unsupported_parameter("background_options"), "")
                self._send_body(400, _dump(error), "application/json", {})
            elif self.command == "POST" and path == "/v1/responses" and window_refusal(body):
                error = window_refusal(body)
                self._send_body(400, _dump({"error": error}), "application/json", {})
            elif self.command == "POST" and path == "/v1/responses" and _wants_background(body):
                self._create_background(body, rec)
            elif path.startswith("/v1/responses/") and self.command in ("GET", "POST"):
                self._serve_stored(path, urlsplit(self.path).query)
            elif self.command == "POST" and path == "/v1/responses":
                reply = fake._next_reply()
                rec.reply = reply
                if raw and body is None:
                    self._send_invalid_json()
                else:
                    self._serve_responses(body if isinstance(body, dict) else {}, reply)
            else:
                error = {
                    "message": f"Invalid URL ({self.command} {path})",
                    "type": "invalid_request_error",
                    "param": None,
                    "code": None,
                }
                self._send_body(404, _dump({"error": error}), "application/json", {})
        except (BrokenPipeError, ConnectionError, ssl.SSLError):
            self._mark_disconnected()
            self.close_connection = True
        finally:
            rec.finished_at = time.monotonic()
            fake._changed()

    # -- background mode -----------------------------------------------------------

    def _create_background(self, body: dict, rec: Recorded) -> None:
        fake = self.server.fake
        refusal = fake.refuse_background
        if refusal:
            spec = refusal if isinstance(refusal, dict) else {}
            status, err_type, code, message = _BACKGROUND_REFUSAL
            error = {
                "message": spec.get("message", message),
                "type": spec.get("type", err_type),
                "param": "background",
                "code": spec.get("code", code),
            }
            self._send_body(
                spec.get("status", status), _dump({"error": error}), "application/json", {}
            )
            return
        reply = fake._next_reply()
        rec.reply = reply
        if reply.status != 200 or reply.body is not None:
            self._serve_responses(body, reply)  # refused before anything was created
            return
        job = fake._add_job(_BackgroundJob(fake._plan(body, reply), reply))
        if _window_of(body):
            job.windowed(_window_of(body), fake.window_polls)
        if body.get("stream") is not True:
            data = _dump(job.response())
            self._send_body(200, data, "application/json", self._common_headers(reply))
            return
        self._stream_job(job, 0, reply.drop_after_events, reply.stall_after_events)

    def _serve_stored(self, path: str, query: str) -> None:
        """GET /v1/responses/{id} (JSON or stream) and POST /v1/responses/{id}/cancel."""
        fake = self.server.fake
        rest = path[len("/v1/responses/") :]
        response_id, _, action = rest.partition("/")
        job = fake._job(response_id)
        if job is None or action not in ("", "cancel") or (action == "") != (self.command == "GET"):
            found = job is not None
            error = {
                "message": f"Response with id '{response_id}' not found."
                if not found
                else f"Invalid URL ({self.command} {path})",
                "type": "invalid_request_error",
                "param": None,
                "code": None,
            }
            self._send_body(404, _dump({"error": error}), "application/json", {})
            return
        if action == "cancel":
            if job.window and fake.windows_end_before_cancel and job.cancelled_at is None:
                job.started = time.monotonic() - 1e6  # it has run: all its events are out
            self._send_body(200, _dump(job.cancel()), "application/json", {})
            return
        params = dict(pair.partition("=")[::2] for pair in query.split("&") if pair)
        if job.window and params.get("stream") != "true" and fake.failed_poll():
            error = {"message": "The server had an error.", "type": "server_error"}
            self._send_body(
                500,
                _dump({"error": {**error, "param": None, "code": None}}),
                "application/json",
                {},
            )
            return
        if params.get("stream") != "true":
            job.poll()
            self._send_body(200, _dump(job.response()), "application/json", {})
            return
        if job.window:
            error = {
                "message": f"Response '{response_id}' was created with a completion window "
                "and cannot be streamed; poll it instead.",
                "type": "invalid_request_error",
                "param": "stream",
                "code": "invalid_value",
            }
            self._send_body(400, _dump({"error": error}), "application/json", {})
            return
        after = int(params["starting_after"]) if params.get("starting_after") else -1
        drops = job.reply.resume_drops
        drop = drops[job.resumes] if job.resumes < len(drops) else None
        job.resumes += 1
        self._stream_job(job, after + 1, drop, None)

    def _stream_job(self, job: _BackgroundJob, first: int, drop: int | None, stall) -> None:
        """Streams a background response's events from ``first`` as they become available."""
        headers = {
            "content-type": "text/event-stream; charset=utf-8",
            **self._common_headers(None),
            "transfer-encoding": "chunked",
        }
        self._send_head(200, headers)
        for sent, n in enumerate(range(first, len(job.events))):
            if drop == sent:
                self._drop(job.reply)
                return
            if stall == sent and self._wait(job.reply.stall_seconds):
                return
            while job.available() <= n:
                if job.cancelled_at is not None:
                    self._chunk(b"")
                    return
                if self._wait(max(0.0, min(0.05, job.ready_at(n) - time.monotonic()))):
                    return
            ev = job.events[n]
            self._chunk(b"event: %s\ndata: %s\n\n" % (ev["type"].encode(), _dump(ev)))
            if self.rec.events_sent == 0:
                self.rec.first_event_at = time.monotonic()
            self.rec.events_sent += 1
        self._chunk(b"")

    def _send_previous_not_found(self, response_id: Any) -> None:
        error = {
            "message": f"Previous response with id '{response_id}' not found.",
            "type": "invalid_request_error",
            "param": "previous_response_id",
            "code": "previous_response_not_found",
        }
        self._send_body(400, _dump({"error": error}), "application/json", {})

    def _send_unauthorized(self, authorization: str) -> None:
        if authorization:
            message = (
                f"Incorrect API key provided: {_masked_key(authorization)}. You can find your "
                "API key at https://platform.openai.com/account/api-keys."
            )
        else:
            message = (
                "You didn't provide an API key. You need to provide your API key in an "
                "Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY)."
            )
        error = {
            "message": message,
            "type": "invalid_request_error",
            "param": None,
            "code": "invalid_api_key" if authorization else None,
        }
        self._send_body(401, _dump({"error": error}), "application/json", {})

    def _serve_models(self, path: str) -> None:
        """``GET /v1/models`` (a ``SyncPage[Model]`` list) and ``GET /v1/models/{id}``."""
        fake = self.server.fake
        models = [m for m in fake.models if not fake.retired(m)]
        dates = fake.shutdown_dates
        if path in ("/v1/models", "/v1/models/") and fake.models_answers:
            status, body = fake.models_answers.pop(0)
            self._send_body(status, _dump(body), "application/json", {})
            return
        if path in ("/v1/models", "/v1/models/"):
            data = [model_object(m, dates.get(m)) for m in models]
            body = {"object": "list", "data": data}
            self._send_body(200, _dump(body), "application/json", {})
            return
        model_id = path[len("/v1/models/") :]
        if model_id in models:
            body = model_object(model_id, dates.get(model_id))
            self._send_body(200, _dump(body), "application/json", {})
            return
        error = {
            "message": f"The model '{model_id}' does not exist",
            "type": "invalid_request_error",
            "param": "model",
            "code": "model_not_found",
        }
        self._send_body(404, _dump({"error": error}), "application/json", {})

    def _send_model_gone(self, model: str) -> None:
        """A create naming a model that has shut down: 404 model_not_found, as for a model the
        key cannot use."""
        error = {
            "message": f"The model `{model}` does not exist or you do not have access to it.",
            "type": "invalid_request_error",
            "param": None,
            "code": "model_not_found",
        }
        self._send_body(404, _dump({"error": error}), "application/json", {})

    def _send_invalid_json(self) -> None:
        error = {
            "message": "We could not parse the JSON body of your request. (HINT: This "
            "likely means you aren't using your HTTP library correctly.)",
            "type": "invalid_request_error",
            "param": None,
            "code": None,
        }
        self._send_body(400, _dump({"error": error}), "application/json", {})

    def _common_headers(self, reply: Reply | None) -> dict[str, str]:
        headers = {
            "x-request-id": "req_" + secrets.token_hex(16),
            "openai-version": "2020-10-01",
            "openai-processing-ms": "42",
        }
        if reply is not None:
            headers.update({k.lower(): str(v) for k, v in reply.headers.items()})
            if reply.close_connection:
                self.close_connection = True
        if self.close_connection:
            headers["connection"] = "close"
        return headers

    def _send_head(self, status: int, headers: dict[str, str]) -> None:
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        self.rec.status_sent = status

    def _send_body(self, status: int, data: bytes, ctype: str, headers: dict[str, str]) -> None:
        headers = {
            "content-type": ctype,
            **self._common_headers(None),
            **headers,
            "content-length": str(len(data)),
        }
        self._send_head(status, headers)
        self.wfile.write(data)

    def _serve_responses(self, req: dict, reply: Reply) -> None:
        ok = reply.status == 200 and reply.body is None
        plan = self.server.fake._plan(req, reply) if ok else _Plan(req, reply)
        streaming = req.get("stream") is True
        if reply.delay_before_headers > 0 and self._wait(reply.delay_before_headers):
            return
        if not streaming and reply.work_seconds > 0 and self._wait(reply.work_seconds):
            return
        stall = not streaming and reply.stall_after_events is not None
        if stall and self._wait(reply.stall_seconds):
            return
        headers = self._common_headers(reply)
        if reply.body is not None or reply.status != 200:
            if reply.body is None:
                data = _dump(_error_body(reply, plan.requested_model))
                ctype = "application/json"
            elif isinstance(reply.body, dict):
                data, ctype = _dump(reply.body), "application/json"
            else:
                data = reply.body.encode() if isinstance(reply.body, str) else reply.body
                ctype = "text/plain; charset=utf-8"
            self._send_body(reply.status, data, reply.content_type or ctype, headers)
            return
        if not streaming:
            if reply.drop_after_events is not None:
                self._drop(reply)
                return
            data = _dump(plan.final_response())
            if reply.malformed_after_events is not None:
                data = b"{not json"
            ctype = reply.content_type or "application/json"
            self._send_body(200, data, ctype, headers)
            return
        self._stream(plan, reply, headers)

    def _stream(self, plan: _Plan, reply: Reply, headers: dict[str, str]) -> None:
        headers = {
            "content-type": reply.content_type or "text/event-stream; charset=utf-8",
            **headers,
            "transfer-encoding": "chunked",
        }
        self._send_head(200, headers)
        events = plan.events()
        stalled = False
        for n in range(len(events) + 1):
            if reply.stall_after_events == n and not stalled:
                stalled = True
                if self._wait(reply.stall_seconds):
                    return
            if reply.drop_after_events == n:
                self._drop(reply)
                return
            if reply.malformed_after_events == n:
                self._chunk(b"event: response.output_text.delta\ndata: {not json\n\n")
                break
            if n == len(events):
                break
            if n == _WORK_AFTER and reply.work_seconds > 0 and self._wait(reply.work_seconds):
                return
            if n and reply.event_delay > 0:
                if self._wait(reply.event_delay):
                    return
            elif self._wait(0):
                return
            ev = events[n]
            self._chunk(b"event: %s\ndata: %s\n\n" % (ev["type"].encode(), _dump(ev)))
            if self.rec.events_sent == 0:
                self.rec.first_event_at = time.monotonic()
            self.rec.events_sent += 1
        self._chunk(b"")  # terminating zero-length chunk

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def _drop(self, reply: Reply) -> None:
        """Close the TCP connection mid-response without a terminating chunk."""
        self.close_connection = True
        self.rec.dropped_at = time.monotonic()
        sock = self.request
        try:
            if reply.drop_with_rst:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                sock.close()
            else:
                sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _mark_disconnected(self, when: float | None = None) -> None:
        rec = getattr(self, "rec", None)
        fake = self.server.fake
        if rec is not None and rec.client_disconnected_at is None and not fake._stopping.is_set():
            rec.client_disconnected_at = when or time.monotonic()
            fake._changed()

    def _wait(self, seconds: float) -> bool:
        """Sleep up to ``seconds`` while watching the client socket.

        Returns True (and sets close_connection) if the client hung up or the server
        is stopping.  select() wakes as soon as the peer's FIN/RST arrives, so the
        recorded time is within scheduling latency of the hang-up.
        """
        fake = self.server.fake
        sock = self.request
        deadline = time.monotonic() + seconds
        while True:
            if fake._stopping.is_set():
                self.close_connection = True
                return True
            remaining = deadline - time.monotonic()
            try:
                readable, _, _ = select.select([sock, fake._wake_r], [], [], max(0.0, remaining))
            except (OSError, ValueError):
                readable = [sock]
            now = time.monotonic()
            if fake._wake_r in readable:
                self.close_connection = True
                return True
            if sock in readable:
                if self._peer_closed():
                    self._mark_disconnected(now)
                    self.close_connection = True
                    return True
                time.sleep(0.001)  # sleep: unexpected client bytes; don't spin
            if remaining <= 0:
                return False

    def _peer_closed(self) -> bool:
        sock = self.request
        try:
            if isinstance(sock, ssl.SSLSocket):
                # SSLSocket.recv() rejects MSG_PEEK; mid-response the client sends no
                # application data, so a non-blocking 1-byte read is safe.
                sock.setblocking(False)
                try:
                    return sock.recv(1) == b""
                except ssl.SSLWantReadError:
                    return False
                finally:
                    sock.setblocking(True)
            return sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
        except BlockingIOError:
            return False
        except (OSError, ValueError):
            return True


class _HTTPServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # a burst of concurrent calls must not hit the kernel's 1 s retry
    allow_reuse_address = True

    def __init__(self, fake: FakeResponsesAPI, ssl_context: ssl.SSLContext | None):
        self.fake = fake
        self.ssl_context = ssl_context
        super().__init__(("127.0.0.1", 0), _Handler)

    def get_request(self) -> tuple[socket.socket, Any]:
        sock, addr = super().get_request()
        if self.ssl_context is not None:
            sock = self.ssl_context.wrap_socket(
                sock, server_side=True, do_handshake_on_connect=False
            )
        return sock, addr

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        self.fake._register_thread(threading.current_thread())
        super().process_request_thread(request, client_address)

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # resets, failed TLS handshakes etc. are expected in fault tests


class FakeResponsesAPI:
    """Fake ``/v1/responses`` server on 127.0.0.1 (see module docstring).

    ``tls=(certfile, keyfile)`` serves HTTPS (see :func:`make_tls_material`).
    Replies are taken FIFO from :meth:`enqueue`, else ``default`` is used.
    """

    def __init__(self, tls: tuple[str, str] | None = None) -> None:
        self.default = Reply()
        # GET /v1/models lists these; GET /v1/models/{id} finds them or answers 404.
        self.models: list[str] = list(DEFAULT_MODELS)
        # Each model's shutdown_date (see SHUTDOWN_DATES); one in the past retires the model.
        self.shutdown_dates: dict[str, str] = shutdown_dates_today()
        # (status, JSON body) GET /v1/models answers with first, one each, before its list: a
        # 500, or a gateway's odd list (entries that are no Model, dates in other shapes).
        self.models_answers: list[tuple[int, Any]] = []
        # When set, a request whose bearer key is not in it gets 401 invalid_api_key.
        self.api_keys: set[str] | None = None
        # When set, every background create is refused (see the module docstring).
        self.refuse_background: bool | dict = False
        # Completion windows: polls a discounted run waits for; a gateway lacking the parameter.
        self.window_polls = 2
        self.refuse_windows = False
        self.ignore_windows = False  # a gateway that drops background and its options unsaid
        self.windows_end_before_cancel = False  # a windowed run ends as its cancel comes
        # The GETs of windowed runs (1-based, counted over all of them) answered with a 500.
        self.failing_polls: set[int] = set()
        self._window_gets = 0
        self._jobs: dict[str, _BackgroundJob] = {}
        # Responses the API keeps for follow-ups: id -> tokens of the conversation so far.
        self.stored: dict[str, int] = {}
        self._tls = tls
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._queue: list[Reply] = []
        self._requests: list[Recorded] = []
        self._connections_opened = 0
        self._active: set[Any] = set()
        self._threads: list[threading.Thread] = []
        self._stopping = threading.Event()
        self._wake_r: socket.socket | None = None
        self._wake_w: socket.socket | None = None
        self._server: _HTTPServer | None = None
        self._serve_thread: threading.Thread | None = None
        self.base_url = ""
        self.port = 0

    # -- lifecycle -------------------------------------------------------------

    def start(self) -> FakeResponsesAPI:
        if self._server is not None:
            return self
        ctx = None
        if self._tls is not None:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(*self._tls)
        # Handlers select() on this socket pair too, so stop() wakes every stall at once (a
        # pair of sockets rather than a pipe: Windows select() takes sockets only).
        self._wake_r, self._wake_w = socket.socketpair()
        self._stopping.clear()
        self._server = _HTTPServer(self, ctx)
        self.port = self._server.server_address[1]
        scheme = "https" if ctx is not None else "http"
        self.base_url = f"{scheme}://127.0.0.1:{self.port}/v1"
        self._serve_thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="fake-responses-api",
            daemon=True,
        )
        self._serve_thread.start()
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        self._stopping.set()
        self._wake_w.send(b"x")
        server.shutdown()
        with self._lock:
            active = list(self._active)
            threads = list(self._threads)
        for sock in active:  # wakes handlers idling in keep-alive readline()
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        server.server_close()
        deadline = time.monotonic() + 2.0
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))
        if self._serve_thread is not None:
            self._serve_thread.join(1.0)
        if not any(t.is_alive() for t in threads):
            self._wake_r.close()
            self._wake_w.close()

    def __enter__(self) -> FakeResponsesAPI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- test API ----------------------------------------------------------------

    @property
    def origin(self) -> str:
        """``scheme://127.0.0.1:PORT`` (base_url without ``/v1``)."""
        return self.base_url.rsplit("/v1", 1)[0]

    def enqueue(self, *replies: Reply) -> None:
        for reply in replies:
            if not isinstance(reply, Reply):
                raise TypeError(f"expected Reply, got {type(reply).__name__}")
        with self._lock:
            self._queue.extend(replies)

    @property
    def requests(self) -> list[Recorded]:
        """Snapshot of recorded requests (the Recorded objects update in place)."""
        with self._lock:
            return list(self._requests)

    @property
    def connections_opened(self) -> int:
        with self._lock:
            return self._connections_opened

    def clear(self) -> None:
        """Forget queued replies, recorded requests and the connection count."""
        with self._lock:
            self._queue.clear()
            self._requests.clear()
            self._connections_opened = 0

    @property
    def queued(self) -> int:
        """How many enqueued replies no request has taken yet."""
        with self._lock:
            return len(self._queue)

    def wait_for_requests(self, n: int, timeout: float = 30.0) -> list[Recorded]:
        """Waits until n requests have come; returns them all. The timeout is a liveness bound
        only: a server's first request waits for the SDK's import, seconds on a busy machine."""
        with self._cond:
            if not self._cond.wait_for(lambda: len(self._requests) >= n, timeout):
                raise TimeoutError(
                    f"expected {n} request(s) within {timeout}s, got {len(self._requests)}"
                )
            return list(self._requests)

    def wait_for_disconnect(self, index: int, timeout: float = 5.0) -> float:
        """Wait until request ``index``'s client hung up; return that monotonic time."""

        def gone() -> bool:
            return (
                len(self._requests) > index
                and self._requests[index].client_disconnected_at is not None
            )

        with self._cond:
            if not self._cond.wait_for(gone, timeout):
                raise TimeoutError(f"request {index}: no client disconnect within {timeout}s")
            return self._requests[index].client_disconnected_at  # type: ignore[return-value]

    def wait_for_finished(self, index: int, timeout: float = 5.0) -> Recorded:
        """Wait until the fake finished handling request ``index``."""

        def done() -> bool:
            return len(self._requests) > index and self._requests[index].finished_at is not None

        with self._cond:
            if not self._cond.wait_for(done, timeout):
                raise TimeoutError(f"request {index} not finished within {timeout}s")
            return self._requests[index]

    # -- used by the handler -----------------------------------------------------

    def requests_to(self, method: str, path: str) -> list[Recorded]:
        """The recorded requests with this method whose path (query aside) starts with path."""
        return [
            r
            for r in self.requests
            if r.method == method and urlsplit(r.path).path.startswith(path)
        ]

    @property
    def creates(self) -> list[Recorded]:
        """Every ``POST /v1/responses``: what is billed."""
        return [r for r in self.requests_to("POST", "/v1/responses") if r.path == "/v1/responses"]

    @property
    def cancels(self) -> list[Recorded]:
        return [r for r in self.requests_to("POST", "/v1/responses/") if r.path.endswith("/cancel")]

    # Wait until ``predicate()`` is true (polled: it may read ``requests`` and the like): the
    # tests' one wait (tests/waiting.py), here for the tests that hold only the fake.
    wait_until = staticmethod(wait_until)

    @property
    def background_ids(self) -> list[str]:
        """The ids of the background responses created, oldest first."""
        with self._lock:
            return list(self._jobs)

    def background_status(self, response_id: str) -> str | None:
        job = self._job(response_id)
        return job.status() if job is not None else None

    def forget_background(self) -> None:
        """Forget every background response, as the API does once it expires."""
        with self._lock:
            self._jobs.clear()

    def _add_job(self, job: _BackgroundJob) -> _BackgroundJob:
        with self._lock:
            self._jobs[job.plan.resp_id] = job
        return job

    def _plan(self, req: dict, reply: Reply) -> _Plan:
        """The plan of a response the API creates: stored (unless ``store: false``) for
        follow-ups, and billed its previous response's turns."""
        plan = _Plan(req, reply)
        with self._lock:
            plan.prior_tokens = self.stored.get(req.get("previous_response_id"), 0)
        usage = plan.usage()
        if req.get("store") is not False:
            with self._lock:
                self.stored[plan.resp_id] = _whole(usage["input_tokens"]) + _whole(
                    usage["output_tokens"]
                )
        return plan

    def failed_poll(self) -> bool:
        """Counts a GET of a windowed run; True if ``failing_polls`` says it fails."""
        with self._lock:
            self._window_gets += 1
            return self._window_gets in self.failing_polls

    def refused_window(self, body: Any) -> bool:
        """With ``refuse_windows``: a create naming ``background_options`` is refused."""
        return self.refuse_windows and isinstance(body, dict) and "background_options" in body

    def retired(self, model: str) -> bool:
        """Whether the model's shutdown_date has passed (UTC), dated snapshots with it."""
        base = _DATED_SUFFIX.sub("", model)
        date = self.shutdown_dates.get(model) or self.shutdown_dates.get(base)
        return bool(date) and date <= time.strftime("%Y-%m-%d", time.gmtime())  # clock: utc

    def retired_in(self, body: Any) -> bool:
        """Whether a create names a model that has shut down."""
        return isinstance(body, dict) and self.retired(str(body.get("model") or ""))

    def unknown_previous(self, body: Any) -> bool:
        previous = body.get("previous_response_id") if isinstance(body, dict) else None
        with self._lock:
            return previous is not None and previous not in self.stored

    def _job(self, response_id: str) -> _BackgroundJob | None:
        with self._lock:
            return self._jobs.get(response_id)

    def _accepts(self, authorization: str) -> bool:
        if self.api_keys is None:
            return True
        return authorization.removeprefix("Bearer ") in self.api_keys

    def _next_reply(self) -> Reply:
        with self._lock:
            return self._queue.pop(0) if self._queue else self.default

    def _record(self, **kwargs: Any) -> Recorded:
        with self._cond:
            rec = Recorded(index=len(self._requests), received_at=time.monotonic(), **kwargs)
            self._requests.append(rec)
            self._cond.notify_all()
            return rec

    def _changed(self) -> None:
        with self._cond:
            self._cond.notify_all()

    def _connection_opened(self, sock: Any) -> int:
        with self._lock:
            self._connections_opened += 1
            self._active.add(sock)
            return self._connections_opened

    def _connection_closed(self, sock: Any) -> None:
        with self._lock:
            self._active.discard(sock)

    def _register_thread(self, thread: threading.Thread) -> None:
        with self._lock:
            self._threads = [t for t in self._threads if t.is_alive()]
            self._threads.append(thread)


# ------------------------------------------------------------------------------
# Forward proxy
# ------------------------------------------------------------------------------


class ForwardProxy:
    """Minimal HTTP forward proxy on 127.0.0.1.

    * ``CONNECT host:port`` -> ``200 Connection established`` and a byte tunnel.
    * Absolute-form requests (``POST http://host:port/path``) are re-sent upstream in
      origin form with ``Connection: close`` and the reply bytes are relayed as-is
      (one request per client connection).
    Either side hanging up closes both, so upstream sees a client cancel at once.
    ``seen`` lists ``"METHOD target"`` for every request received.
    """

    def __init__(self) -> None:
        self.seen: list[str] = []
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._stopping = threading.Event()
        self._listener: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> ForwardProxy:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        listener.settimeout(0.05)
        self._listener, self.port = listener, listener.getsockname()[1]
        self._stopping.clear()
        self._thread = threading.Thread(target=self._accept_loop, name="forward-proxy", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._listener is None:
            return
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(1.0)
        self._listener.close()
        self._listener = None
        with self._lock:
            for sock in list(self._sockets):
                self._close(sock)

    def __enter__(self) -> ForwardProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _accept_loop(self) -> None:
        assert self._listener is not None
        while not self._stopping.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conn.settimeout(None)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _track(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.add(sock)

    @staticmethod
    def _close(sock: socket.socket) -> None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        sock.close()

    def _serve(self, client: socket.socket) -> None:
        self._track(client)
        upstream = None
        try:
            buf = b""
            while b"\r\n\r\n" not in buf:
                data = client.recv(65536)
                if not data:
                    return
                buf += data
            head, rest = buf.split(b"\r\n\r\n", 1)
            lines = head.decode("latin-1").split("\r\n")
            method, target, version = lines[0].split(" ", 2)
            with self._lock:
                self.seen.append(f"{method} {target}")
            if method.upper() == "CONNECT":
                host, _, port = target.rpartition(":")
                upstream = self._connect(client, host.strip("[]"), int(port))
                if upstream is None:
                    return
                client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            else:
                parts = urlsplit(target)
                if parts.scheme != "http" or not parts.hostname:
                    client.sendall(
                        b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n"
                        b"connection: close\r\n\r\n"
                    )
                    return
                upstream = self._connect(client, parts.hostname, parts.port or 80)
                if upstream is None:
                    return
                path = parts.path or "/"
                if parts.query:
                    path += "?" + parts.query
                drop = ("proxy-connection", "proxy-authorization", "connection")
                kept = [
                    line for line in lines[1:] if line.split(":", 1)[0].strip().lower() not in drop
                ]
                new_head = "\r\n".join([f"{method} {path} {version}", *kept, "Connection: close"])
                upstream.sendall(new_head.encode("latin-1") + b"\r\n\r\n")
            if rest:
                upstream.sendall(rest)
            self._pump(client, upstream)
        except OSError:
            pass
        finally:
            self._close(client)
            if upstream is not None:
                self._close(upstream)
            with self._lock:
                self._sockets.discard(client)
                if upstream is not None:
                    self._sockets.discard(upstream)

    def _connect(self, client: socket.socket, host: str, port: int) -> Any:
        try:
            upstream = socket.create_connection((host, port), timeout=5)
        except OSError:
            client.sendall(
                b"HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
            )
            return None
        upstream.settimeout(None)
        upstream.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._track(upstream)
        return upstream

    def _pump(self, a: socket.socket, b: socket.socket) -> None:
        peer = {a: b, b: a}
        while not self._stopping.is_set():
            readable, _, _ = select.select([a, b], [], [], 0.05)
            for sock in readable:
                try:
                    data = sock.recv(65536)
                except OSError:
                    data = b""
                if not data:
                    return
                peer[sock].sendall(data)


# ------------------------------------------------------------------------------
# TLS material
# ------------------------------------------------------------------------------


def openssl_available() -> bool:
    return shutil.which("openssl") is not None


@dataclass(frozen=True)
class TLSMaterial:
    """Files made by :func:`make_tls_material`."""

    directory: str
    ca_cert: str
    ca_key: str
    server_cert: str
    server_key: str

    @property
    def server_pair(self) -> tuple[str, str]:
        """``(certfile, keyfile)`` for ``FakeResponsesAPI(tls=...)``."""
        return (self.server_cert, self.server_key)

    def client_ssl_context(self) -> ssl.SSLContext:
        """A client context trusting only the private CA (``httpx2.Client(verify=)``)."""
        return ssl.create_default_context(cafile=self.ca_cert)

    def cleanup(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)


def make_tls_material(directory: str | None = None) -> TLSMaterial:
    """Create a private CA and a 127.0.0.1/localhost server cert with ``openssl``.

    Files go to ``directory`` (default: a new temp dir).  Raises RuntimeError when
    the ``openssl`` binary is missing.
    """
    openssl = shutil.which("openssl")
    if openssl is None:
        raise RuntimeError("the openssl command-line tool is not installed")
    directory = directory or tempfile.mkdtemp(prefix="fake-upstream-tls-")
    os.makedirs(directory, exist_ok=True)

    def path(name: str) -> str:
        return os.path.join(directory, name)

    def run(*args: str) -> None:
        subprocess.run([openssl, *args], check=True, capture_output=True, cwd=directory)

    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    run(
        "req", "-x509", *ec, "-keyout", path("ca.key"), "-out", path("ca.pem"),
        "-days", "7", "-subj", "/CN=fake-upstream test CA",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        "-addext", "subjectKeyIdentifier=hash",
    )  # fmt: skip
    run(
        "req", *ec, "-keyout", path("server.key"), "-out", path("server.csr"),
        "-subj", "/CN=127.0.0.1",
    )  # fmt: skip
    with open(path("server.ext"), "w") as f:
        f.write(
            "basicConstraints=critical,CA:FALSE\n"
            "keyUsage=critical,digitalSignature,keyEncipherment\n"
            "extendedKeyUsage=serverAuth\n"
            "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
            "subjectKeyIdentifier=hash\n"
            "authorityKeyIdentifier=keyid:always\n"
        )
    run(
        "x509", "-req", "-in", path("server.csr"), "-CA", path("ca.pem"),
        "-CAkey", path("ca.key"), "-CAcreateserial", "-out", path("server.pem"),
        "-days", "7", "-extfile", path("server.ext"),
    )  # fmt: skip
    return TLSMaterial(
        directory=directory,
        ca_cert=path("ca.pem"),
        ca_key=path("ca.key"),
        server_cert=path("server.pem"),
        server_key=path("server.key"),
    )
