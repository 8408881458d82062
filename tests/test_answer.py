"""The answer engine end to end: the spawned server and the real openai SDK against the fake
Responses API (tests/fake_upstream.py). Nothing here touches the real network.
"""

from __future__ import annotations

import itertools
import json
import re
import socket
import threading
import time

import pytest
from conftest import (
    TEST_KEY,
    Server,
    base_env,
    cancel,
    failure_of,
    run_cli,
    send_call,
    start,
    wait_until,
)
from fake_upstream import (
    FakeResponsesAPI,
    ForwardProxy,
    Reply,
    make_tls_material,
    openssl_available,
    unsupported_parameter,
)

import openai_responses_mcp as m

TOOL_FAILED = -32001
DATED_LINE = re.compile(r"^- \S.*\(\d{4}-\d{2}-\d{2}\)$")
JMA = "https://www.jma.go.jp/bosai/forecast/#area_type=offices&area_code=130000"
TENKI = "https://tenki.jp/forecast/3/16/4410/13101/"
FAST_RETRY = {"retry-after-ms": "10"}
TIGHT = "request: {max_retries: 2, timeout_ms: 1000}\n"


def weather_reply(**overrides) -> Reply:
    """A "today's weather in Tokyo" answer: a search with an api source and url citations."""
    fields = dict(
        text=f"Tokyo today: sunny, high 12 C, low 3 C. See {JMA} and {TENKI}.",
        searches=[
            {
                "query": "Tokyo weather today",
                "sources": [{"type": "api", "name": "oai-weather"}, {"type": "url", "url": JMA}],
            }
        ],
        citations=[{"url": JMA, "title": "気象庁｜天気予報"}, {"url": TENKI, "title": "tenki.jp"}],
    )
    fields.update(overrides)
    return Reply(**fields)


def tokyo_today() -> str:
    """Today as the server counts it: its clock, in policy.timezone's default (Asia/Tokyo)."""
    return m.today_in(m.SETTINGS[("policy", "timezone")].default)


SHARED_FAKE = True  # `fake` is the module's `upstream`, emptied per test (conftest)


@pytest.fixture(scope="module")
def _running_servers(upstream, tmp_path_factory):
    servers: dict = {}

    def get(*args: str, config: str | None = None) -> Server:
        key = (args, config)
        if key not in servers:
            home = tmp_path_factory.mktemp("server")
            argv = list(args) or ["--stdio"]
            if config is not None:
                (home / "config.yaml").write_text(config, encoding="utf-8")
                argv += ["--config", str(home / "config.yaml")]
            env = base_env(home, OPENAI_BASE_URL=upstream.base_url)
            servers[key] = Server(argv, env, home)
            servers[key].initialize()
        server = servers[key]
        assert server.proc.poll() is None, server.stderr
        while not server.nothing_within(0):  # whatever an earlier test left unread
            server.recv(0.1)
        return server

    yield get
    for server in servers.values():
        server.stop()


@pytest.fixture
def running(_running_servers, fake):
    """running(*args, config=YAML): a server talking to `fake`, shared by every test of this
    module that asks for the same args and config (each start costs ~0.6 s: the openai import).
    Tests use their own request ids, so nothing one test leaves behind is mistaken by another.
    """
    return _running_servers


@pytest.fixture
def server(running):
    """The shared server with the default config."""
    return running()


_ids = itertools.count(1)


def new_id() -> str:
    return f"t{next(_ids)}"


def call_collecting(server: Server, query="q", timeout=20.0, **params) -> tuple[dict, list]:
    """Like server.call, and also returns every message received before the reply."""
    request_id = new_id()
    send_call(server, request_id, query, **params)
    return server.recv_until(lambda msg: msg.get("id") == request_id, timeout)


def sent_reply_for(server: Server, request_id) -> bool:
    return f'"id":{json.dumps(request_id)}'.encode() in bytes(server.reader.raw)


def answer_of(reply: dict) -> dict:
    assert "result" in reply, reply
    return json.loads(reply["result"]["content"][0]["text"])


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def sources_section(answer: str) -> list[str]:
    _, sep, tail = answer.rpartition("Sources:")
    assert sep, f"no Sources: section in {answer!r}"
    return [line.strip() for line in tail.split("\n") if line.strip()]


def progress_of(messages: list[dict], token) -> list[dict]:
    return [
        msg["params"]
        for msg in messages
        if msg.get("method") == "notifications/progress" and msg["params"]["progressToken"] == token
    ]


# ============================================================================================
# The definition of done (seed 001 §10)
# ============================================================================================


def test_stable_question_is_answered_without_search(server, fake):
    result = answer_of(server.call("answer", {"query": "What does HTTP 404 mean?"}))
    assert result["used_search"] is False
    assert result["citations"] == []
    assert "404" in result["answer"]
    assert "Sources:" not in result["answer"]


def test_current_question_is_answered_with_citations_and_dated_sources(server, fake):
    fake.enqueue(weather_reply())
    query = f"What is the weather in Tokyo today ({tokyo_today()})?"
    result = answer_of(server.call("answer", {"query": query}))
    assert result["used_search"] is True
    assert len(result["citations"]) >= 1
    assert {JMA, "oai-weather"} <= {c["url"] for c in result["citations"]}
    assert {c["published_at"] for c in result["citations"]} == {tokyo_today()}
    lines = sources_section(result["answer"])
    assert lines
    assert all(DATED_LINE.match(line) for line in lines), lines
    assert result["answer"].count("Sources:") == 1


def test_answer_is_also_structured_content_with_the_four_keys_and_its_response_id(server, fake):
    fake.enqueue(weather_reply())
    reply = server.call("answer", {"query": "Tokyo weather"})
    result = answer_of(reply)
    assert set(result) == {"answer", "used_search", "citations", "model", "response_id"}
    assert reply["result"]["structuredContent"] == result
    # The id is in what the model reads, not only in _meta (which Claude Code and Codex hide).
    assert result["response_id"] == reply["result"]["_meta"]["response_id"]
    assert result["response_id"] in fake.stored


def test_model_is_the_one_the_api_reports(server, fake):
    fake.enqueue(Reply(model="gpt-5.2-2025-12-11"))
    assert answer_of(server.call("answer", {"query": "q"}))["model"] == "gpt-5.2-2025-12-11"


def test_a_japanese_answers_出典_section_is_completed_not_doubled(server, fake):
    text = f"本日の東京は晴れ、最高気温12℃です。\n\n出典：\n- 気象庁 {JMA}\n\n※ 予報は変わります。"
    fake.enqueue(weather_reply(text=text))
    answer = answer_of(server.call("answer", {"query": "今日の東京の天気は？"}))["answer"]
    assert "Sources" not in answer
    assert answer == (
        f"本日の東京は晴れ、最高気温12℃です。\n\n出典：\n- 気象庁 {JMA} ({tokyo_today()})\n"
        f"- {TENKI} ({tokyo_today()})\n- oai-weather ({tokyo_today()})\n\n"
        "※ 予報は変わります。"
    )


def test_a_sources_header_named_in_the_policy_file_is_completed_not_doubled(spawn, fake, tmp_path):
    policy = tmp_path / "policy.md"
    policy.write_text(m.POLICY_EXAMPLE, encoding="utf-8")
    config = f"policy:\n  system: {{source: file, path: '{policy}', merge: append}}\n"
    server = start(spawn, fake, config=config)
    fake.enqueue(weather_reply(text=f"晴れです。\n\n参考資料:\n- {JMA}\n- {TENKI}"))
    answer = answer_of(server.call("answer", {"query": "今日の東京の天気は？"}))["answer"]
    assert "Sources" not in answer
    assert sources_section(answer.replace("参考資料:", "Sources:")) == [
        f"- {JMA} ({tokyo_today()})",
        f"- {TENKI} ({tokyo_today()})",
        f"- oai-weather ({tokyo_today()})",
    ]


# ============================================================================================
# What is sent
# ============================================================================================


def test_request_is_one_streamed_call_with_web_search_and_the_builtin_policy(server, fake):
    answer_of(server.call("answer", {"query": "q"}))
    (rec,) = fake.requests
    assert (rec.method, rec.path) == ("POST", "/v1/responses")
    assert rec.authorized_with(TEST_KEY)
    body = rec.body
    assert body["stream"] is True
    assert body["model"] == "gpt-6.1-terra"
    assert body["instructions"] == m.SYSTEM_POLICY
    assert body["tools"] == [{"type": "web_search"}]
    assert body["include"] == ["web_search_call.action.sources"]
    assert body["text"] == {"verbosity": "medium"}
    assert body["reasoning"] == {"effort": "medium"}


def test_request_input_carries_the_query_the_default_hints_and_todays_date(server, fake):
    answer_of(server.call("answer", {"query": "Tokyo weather today?"}))
    text = fake.requests[0].body["input"]
    assert text.startswith("Tokyo weather today?")
    assert "recency_days=60" in text
    assert "max_results=5" in text
    assert "domains" not in text
    assert f"{tokyo_today()} (Asia/Tokyo)" in text


def test_request_input_date_follows_the_configured_time_zone(spawn, fake):
    server = start(spawn, fake, config="policy:\n  timezone: UTC\n")
    answer_of(server.call("answer", {"query": "q"}))
    assert f"{m.today_in('UTC')} (UTC)" in fake.requests[0].body["input"]


def test_call_hints_and_domains_are_sent_as_hints_and_as_the_domain_filter(server, fake):
    args = {"query": "q", "recency_days": 7, "max_results": 3, "domains": ["jma.go.jp", "tenki.jp"]}
    answer_of(server.call("answer", args))
    body = fake.requests[0].body
    assert "recency_days=7" in body["input"]
    assert "max_results=3" in body["input"]
    assert "jma.go.jp" in body["input"]
    assert body["tools"] == [
        {"type": "web_search", "filters": {"allowed_domains": ["jma.go.jp", "tenki.jp"]}}
    ]


def test_call_domains_are_normalised_before_they_are_sent(server, fake):
    domains = ["https://docs.python.org/3/", "bücher.de", "Docs.Python.org", "PEPS.python.org."]
    answer_of(server.call("answer", {"query": "q", "domains": domains}))
    (tool,) = fake.requests[0].body["tools"]
    assert tool["filters"]["allowed_domains"] == [
        "docs.python.org",
        "xn--bcher-kva.de",
        "peps.python.org",
    ]


def test_an_international_domain_is_sent_as_idna_2008_and_a_bad_one_refused(server, fake):
    answer_of(server.call("answer", {"query": "q", "domains": ["faß.de", "ΣΑΣ.gr"]}))
    (tool,) = fake.requests[0].body["tools"]
    assert tool["filters"]["allowed_domains"] == ["xn--fa-hia.de", "xn--mxa9ab.gr"]  # not fass.de
    fake.clear()
    reply = server.call("answer", {"query": "q", "domains": ["☃.net"]})
    assert reply["error"]["code"] == -32602
    assert "'domains' item \"☃.net\" is not a valid international" in reply["error"]["message"]
    assert fake.requests == []


@pytest.mark.parametrize(
    ("domain", "why"),
    [
        ("*.python.org", "has a wildcard"),
        ("python.org,pypi.org", "has a comma"),
        ("python org", "has a space"),
        ("a" * 64 + ".com", "longer than 63 characters"),
        (".".join(["abcdefghij"] * 24), "longer than 253 characters"),
    ],
    ids=["wildcard", "comma", "space", "long-label", "long-name"],
)
def test_bad_domain_is_refused_naming_it_before_any_request(server, fake, domain, why):
    reply = server.call("answer", {"query": "q", "domains": ["python.org", domain]})
    error = reply["error"]
    assert error["code"] == -32602
    assert error["message"].startswith(f"Invalid params: 'domains' item \"{domain[:10]}")
    assert why in error["message"]
    assert fake.requests == []


def test_domain_filter_switched_off_sends_domains_only_as_a_hint(spawn, fake):
    server = start(spawn, fake, config="search:\n  domain_filter: false\n")
    answer_of(server.call("answer", {"query": "q", "domains": ["jma.go.jp"]}))
    body = fake.requests[0].body
    assert body["tools"] == [{"type": "web_search"}]
    assert "jma.go.jp" in body["input"]


PROFILES = """\
model_profiles:
  answer: {model: gpt-5.2, reasoning_effort: low, verbosity: high}
  answer_detailed: {model: o3, reasoning_effort: high}
  answer_quick: {model: gpt-4.1-mini}
"""


def test_each_tool_sends_its_profiles_model_effort_and_verbosity(spawn, fake):
    server = start(spawn, fake, config=PROFILES)
    for tool in ("answer", "answer_detailed", "answer_quick"):
        answer_of(server.call(tool, {"query": tool}))
    sent = {
        rec.body["input"].split("\n")[0]: (
            rec.body["model"],
            rec.body.get("reasoning"),
            rec.body.get("text"),
        )
        for rec in fake.requests
    }
    assert sent == {
        "answer": ("gpt-5.2", {"effort": "low"}, {"verbosity": "high"}),
        "answer_detailed": ("o3", {"effort": "high"}, None),
        "answer_quick": ("gpt-4.1-mini", None, None),
    }


def test_by_default_quick_is_lighter_and_detailed_thinks_more_than_answer(server, fake):
    for tool in ("answer", "answer_quick", "answer_detailed"):
        answer_of(server.call(tool, {"query": tool}))
    sent = {
        rec.body["input"].split("\n")[0]: (
            rec.body["reasoning"],
            rec.body["text"],
            rec.body["tools"][0].get("search_context_size"),
            rec.body.get("background", False),
        )
        for rec in fake.creates
    }
    assert sent == {
        "answer": ({"effort": "medium"}, {"verbosity": "medium"}, None, False),
        "answer_quick": ({"effort": "low"}, {"verbosity": "low"}, "low", False),
        "answer_detailed": ({"effort": "high"}, {"verbosity": "medium"}, None, True),
    }
    models = {rec.body["input"].split("\n")[0]: rec.body["model"] for rec in fake.creates}
    # Each a model of its own: the cheapest, the balanced and the strongest everyday one.
    assert models == {
        "answer": "gpt-6.1-terra",
        "answer_quick": "gpt-6-luna",
        "answer_detailed": "gpt-6.2-sol",
    }


def test_tools_without_a_profile_use_the_answer_profile_model_included(spawn, fake):
    """Seed 001: an omitted answer_detailed runs with answer's settings (issue 30), in its own
    background mode: `background` follows answer's only when set (issue 39)."""
    config = "model_profiles:\n  answer: {model: gpt-5-mini, verbosity: high}\n"
    server = start(spawn, fake, config=config)
    answer_of(server.call("answer_detailed", {"query": "q"}))
    assert fake.requests[0].body["model"] == "gpt-5-mini"
    assert fake.requests[0].body["text"] == {"verbosity": "high"}
    assert fake.requests[0].body["reasoning"] == {"effort": "medium"}
    assert fake.requests[0].body["background"] is True


# ============================================================================================
# Follow-ups: previous_response_id
# ============================================================================================


def test_a_follow_up_continues_from_the_earlier_answer_and_pays_for_its_turns(server, fake):
    first = server.call("answer", {"query": "What is HTTP 404?"})
    earlier = answer_of(first)["response_id"]
    follow = {"query": "And 410?", "previous_response_id": earlier}
    reply = server.call("answer_quick", follow)
    later = answer_of(reply)
    sent = fake.creates[1].body
    assert sent["previous_response_id"] == earlier
    assert sent["instructions"] == m.SYSTEM_POLICY  # not carried over by the API: sent again
    assert sent["input"].startswith("And 410?\n\n[hints]")
    assert later["response_id"] not in (None, earlier)
    first_usage = first["result"]["_meta"]["usage"]
    earlier_turns = first_usage["input_tokens"] + first_usage["output_tokens"]
    assert reply["result"]["_meta"]["usage"]["input_tokens"] > earlier_turns


def test_an_unknown_or_expired_previous_response_id_fails_once_naming_it(server, fake):
    reply = server.call("answer", {"query": "q", "previous_response_id": "resp_gone"})
    message = failure_of(reply)
    assert "previous_response_id is not known to the API (HTTP 400" in message
    assert "resp_gone" in message and "without previous_response_id" in message
    assert len(fake.creates) == 1  # not retried: the same id would fail the same way


@pytest.mark.parametrize(
    ("value", "why"),
    [
        (42, "must be a string"),
        ("", "1 to 256 characters"),
        ("resp_abc; DROP", "the response_id an earlier answer gave"),
    ],
)
def test_a_malformed_previous_response_id_is_refused_before_any_request(server, fake, value, why):
    reply = server.call("answer_detailed", {"query": "q", "previous_response_id": value})
    assert reply["error"]["code"] == -32602
    message = reply["error"]["message"]
    assert "'previous_response_id'" in message and why in message
    assert fake.creates == []


def test_unsafe_links_and_the_tracking_parameter_are_cleaned_and_code_is_left_alone(server, fake):
    code = "```sh\ncurl 'https://a.example/?utm_source=openai'\n```"
    text = (
        f"Click [here](javascript:alert(1)) or ![x](data:image/png;base64,AAAA). "
        f"See {TENKI}?utm_source=openai and `https://b.example/?utm_source=openai`.\n\n{code}"
    )
    sources = [{"type": "api", "name": "javascript:alert(1)"}, {"type": "url", "url": JMA}]
    fake.enqueue(weather_reply(text=text, searches=[{"query": "q", "sources": sources}]))
    answer = answer_of(server.call("answer", {"query": "Tokyo weather"}))
    shown = answer["answer"]
    assert shown.startswith(f"Click here or x. See {TENKI} and ")
    assert "`https://b.example/?utm_source=openai`" in shown and code in shown  # code as written
    assert "javascript" not in shown and "data:" not in shown
    assert all(c["url"].startswith("https://") for c in answer["citations"])


@pytest.mark.parametrize("query", ["\x00", "\u200b", " \u200b\ufeff\u2060 \n"])
def test_a_query_of_only_invisible_characters_is_refused_before_any_request(server, fake, query):
    reply = server.call("answer", {"query": query})
    assert reply["error"]["code"] == -32602
    assert "'query' must not be empty" in reply["error"]["message"]
    assert fake.creates == [] and fake.requests == []  # nothing sent, nothing billed
    assert "result" in server.call("answer", {"query": "q \u200b"})  # a question still is one


# ============================================================================================
# Results every client shows whole
# ============================================================================================

LONG_REPORT = "Summary first.\n\n" + "\n\n".join(
    f"## Finding {i}\n\n" + "A sentence of the report that goes on. " * 60 for i in range(30)
)  # about 72,000 characters


def initialized_as(spawn, fake, client: str, config: str | None = None) -> Server:
    server = spawn(config=config, upstream=fake)
    params = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": client}}
    assert "result" in server.request("initialize", params)
    server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    return server


@pytest.mark.parametrize(
    ("client", "config", "size"),
    [
        ("codex-mcp-client", None, 12_000),
        ("claude-code", None, 50_000),
        ("claude-code", "server: {result_max_chars_by_client: {claude-code: 20000}}\n", 20_000),
    ],
)
def test_a_long_answer_is_shortened_to_what_its_client_shows_whole(
    spawn, fake, client, config, size
):
    fake.enqueue(weather_reply(text=LONG_REPORT))
    reply = initialized_as(spawn, fake, client, config).call("answer", {"query": "report"})
    result = reply["result"]
    text = result["content"][0]["text"]
    assert size - 2_000 < len(text.encode("utf-8")) <= size
    answer = json.loads(text)  # still the answer's JSON, whole
    assert result["structuredContent"] == answer
    assert answer["answer"].startswith("Summary first.\n\n## Finding 0\n")
    assert answer["answer"].count("Sources:") == 1 and JMA in answer["answer"]
    assert f'previous_response_id "{answer["response_id"]}"' in answer["answer"]
    assert result["_meta"]["shortened"]["limit"] == size
    assert result["_meta"]["shortened"]["chars"] > len(LONG_REPORT)


def test_a_code_block_and_a_one_line_sources_section_are_cut_to_the_clients_size(spawn, fake):
    lines = "\n".join(f"print({i})  # 🇯🇵 e\u0301" for i in range(3000))
    sources = "Sources: " + ", ".join(f"https://s{i}.example/ (2026-01-01)" for i in range(900))
    text = f"Summary first.\n\n````markdown\n```python\n{lines}\n```\n````\n\n{sources}"
    fake.enqueue(weather_reply(text=text))
    reply = initialized_as(spawn, fake, "codex-mcp-client").call("answer", {"query": "code"})
    wire = reply["result"]["content"][0]["text"]
    assert len(wire.encode("utf-8")) <= 12_000
    shown = json.loads(wire)["answer"]
    kept = shown[: shown.index("\n\n[Shortened")]
    assert kept.startswith("Summary first.\n\n````markdown\n```python\nprint(0)")
    assert kept.endswith("\n````")  # closed by its own fence: the note is not read as code
    assert shown.count("````") == 2 and "Sources: https://s0.example/ (2026-01-01)" in shown
    assert shown.endswith("(the line above is shortened: see citations)")


def test_an_answer_within_the_clients_size_is_whole(spawn, fake):
    fake.enqueue(weather_reply(text=LONG_REPORT[:11_000]))
    reply = initialized_as(spawn, fake, "codex-mcp-client").call("answer", {"query": "report"})
    assert answer_of(reply)["answer"].startswith(LONG_REPORT[:11_000].rstrip())
    assert "shortened" not in reply["result"]["_meta"]


# ============================================================================================
# What a call cost: _meta
# ============================================================================================


def test_result_meta_reports_usage_response_id_searches_and_elapsed_time(server, fake):
    usage = {
        "input_tokens": 1234,
        "output_tokens": 56,
        "output_tokens_details": {"reasoning_tokens": 7},
    }
    fake.enqueue(weather_reply(usage=usage, event_delay=0.01))
    started = time.monotonic()
    reply = server.call("answer", {"query": "Tokyo weather"})
    wall_ms = (time.monotonic() - started) * 1000
    meta = reply["result"]["_meta"]
    assert meta["usage"]["input_tokens"] == 1234
    assert meta["usage"]["output_tokens"] == 56
    assert meta["usage"]["reasoning_tokens"] == 7
    assert meta["usage"]["total_tokens"] == 1290
    assert meta["response_id"].startswith("resp_")
    assert meta["web_searches"] == 1
    stream_ms = 10 * (fake.requests[0].events_sent - 1)
    assert stream_ms <= meta["elapsed_ms"] <= wall_ms


# ============================================================================================
# Answers cut short (response.incomplete) and sources that are not web pages
# ============================================================================================


@pytest.mark.parametrize("reason", ["max_output_tokens", "content_filter"])
def test_an_answer_cut_short_is_flagged_in_meta_and_in_its_text(server, fake, reason):
    fake.enqueue(weather_reply(incomplete=True, incomplete_reason=reason))
    reply = server.call("answer", {"query": "Tokyo weather"})
    assert reply["result"]["_meta"]["incomplete"] == {"reason": reason}
    answer = answer_of(reply)
    assert answer["answer"].endswith(f"\n\n(answer cut short: {reason})")
    assert answer["answer"].startswith("Tokyo today: sunny")
    assert "Sources:" in answer["answer"]
    assert reply["result"]["structuredContent"] == answer


def test_a_complete_answer_is_not_flagged(server, fake):
    fake.enqueue(weather_reply())
    reply = server.call("answer", {"query": "Tokyo weather"})
    assert "incomplete" not in reply["result"]["_meta"]
    assert "cut short" not in answer_of(reply)["answer"]


def test_an_answer_cut_short_before_any_text_is_still_an_error(server, fake):
    fake.enqueue(Reply(text="", incomplete=True, incomplete_reason="max_output_tokens"))
    message = failure_of(server.call("answer", {"query": "q"}))
    assert "answer cut short: max_output_tokens" in message
    assert len(fake.requests) == 1


def test_citations_that_are_not_web_urls_never_reach_the_client(server, fake):
    fake.enqueue(
        Reply(
            text="See the page.",
            searches=[{"query": "q", "sources": [{"type": "url", "url": "data:text/html,x"}]}],
            citations=[
                {"url": "javascript:alert(1)", "title": "click"},
                {"url": JMA, "title": "JMA"},
            ],
        )
    )
    answer = answer_of(server.call("answer", {"query": "q"}))
    assert [c["url"] for c in answer["citations"]] == [JMA]
    assert "javascript:" not in answer["answer"]
    assert "data:" not in answer["answer"]


def test_openais_tracking_parameter_never_reaches_the_client(server, fake):
    # What the real web search hands back: every URL tagged; the model's own Sources line
    # written with one form, the annotations carrying the other.
    page = "https://docs.python.org/3.14/whatsnew/3.14.html?highlight=pep#summary"
    tagged = (
        "https://docs.python.org/3.14/whatsnew/3.14.html?highlight=pep&utm_source=openai#summary"
    )
    release = "https://www.python.org/downloads/release/python-3140/"
    fake.enqueue(
        Reply(
            text=(
                "Python 3.14 came out on 2025-10-07 "
                f"([python.org]({release}?utm_source=openai)).\n\n"
                f"Sources: {release} (2025-10-07), {tagged} (2025-10-07)"
            ),
            searches=[
                {
                    "query": "python 3.14 release",
                    "sources": [
                        {"type": "url", "url": f"{release}?utm_source=openai"},
                        {"type": "url", "url": tagged},
                    ],
                }
            ],
            citations=[
                {"url": f"{release}?utm_source=openai", "title": "Python 3.14.0"},
                {"url": release, "title": "Python 3.14.0 again"},
                {"url": tagged, "title": "What's new"},
            ],
        )
    )
    reply = server.call("answer", {"query": "When did Python 3.14 come out?"})
    answer = answer_of(reply)
    assert "utm_source" not in json.dumps(reply["result"])
    assert [c["url"] for c in answer["citations"]] == [release, page]
    assert answer["answer"].endswith(f"Sources: {release} (2025-10-07), {page} (2025-10-07)")
    assert answer["answer"].count(release) == 2  # the inline link and the one Sources entry


# ============================================================================================
# Failures: -32001, `answer failed: `, one line saying what happened and what to do
# ============================================================================================


def test_missing_api_key_names_the_variable(tmp_path, fake):
    env = base_env(tmp_path, OPENAI_BASE_URL=fake.base_url)
    del env["OPENAI_API_KEY"]
    server = Server(["--stdio"], env, tmp_path)
    try:
        server.initialize()
        message = failure_of(server.call("answer", {"query": "q"}))
    finally:
        server.stop()
    assert "OPENAI_API_KEY" in message
    assert fake.requests == []


SMART_QUOTED_KEY = "\u201csk-test-0123456789abcdefSECRET\u201d"  # pasted from a word processor


def test_non_ascii_api_key_is_named_before_any_request_never_shown(spawn, fake):
    server = start(spawn, fake, env={"OPENAI_API_KEY": SMART_QUOTED_KEY})
    message = failure_of(server.call("answer", {"query": "q"}))
    assert message == (
        "answer failed: OPENAI_API_KEY contains a non-ASCII character (position 1, U+201C); "
        "re-copy the key"
    )
    assert fake.requests == []
    server.close_stdin()
    server.wait()
    warning = next(line for line in server.stderr.splitlines() if "warning" in line)
    assert "OPENAI_API_KEY contains a non-ASCII character (position 1, U+201C)" in warning
    raw = bytes(server.reader.raw).decode("utf-8") + server.stderr
    assert "0123456789abcdef" not in raw


@pytest.mark.parametrize(
    ("config", "key", "named"),
    [
        ("openai:\n  api_key_env: TEAM_OPENAI_KEY\n", None, "TEAM_OPENAI_KEY"),
        (
            "",
            "sk-test-0123\u00a0456789abcdef",
            "OPENAI_API_KEY contains a non-ASCII character (position 13, U+00A0)",
        ),
        (
            "",
            "sk-test-0123 456789abcdef\x07",
            "OPENAI_API_KEY contains a space or control character (position 13, U+0020)",
        ),
    ],
    ids=["configured-variable-unset", "non-ascii-anywhere", "space-or-control"],
)
def test_an_api_key_problem_is_named_before_any_request(
    tmp_path, monkeypatch, fake, config, key, named
):
    """The real dispatcher and engine in process: the message is theirs; the pipes are
    test_missing_api_key_names_the_variable's and the smart-quoted key's test's."""
    from test_upstream_faults import InProcess

    monkeypatch.setattr(m.AnswerEngine, "warm_up", lambda *_, **__: None)  # no openai import
    monkeypatch.delenv("TEAM_OPENAI_KEY", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", key or TEST_KEY)
    message = failure_of(InProcess(fake, tmp_path, config).call())
    assert named in message
    assert "base_url" not in message
    assert fake.requests == []


def test_rejected_key_says_to_set_a_valid_key(server, fake):
    fake.enqueue(Reply(status=401))
    message = failure_of(server.call("answer", {"query": "q"}))
    assert "401" in message
    assert "OPENAI_API_KEY" in message
    assert len(fake.requests) == 1


@pytest.mark.parametrize(
    "reply",
    [
        Reply(status=404),
        Reply(status=403, error_code="model_not_found", error_message="no access to model"),
    ],
    ids=["404", "403-model"],
)
def test_unavailable_model_names_the_model_and_the_setting(server, fake, reply):
    fake.enqueue(reply)
    message = failure_of(server.call("answer", {"query": "q"}))
    assert "'gpt-6.1-terra'" in message
    assert str(reply.status) in message
    assert "model_profiles.answer.model" in message
    assert len(fake.requests) == 1


def test_model_named_in_a_404_message_without_a_code_is_a_model_problem(server, fake):
    fake.enqueue(Reply(status=404, error_code="", error_message="Model gpt-6.1-terra not found"))
    message = failure_of(server.call("answer", {"query": "q"}))
    assert "model 'gpt-6.1-terra' is not available" in message
    assert "openai.base_url" not in message


# -- A setting the API refuses for the profile's model names the key to change ---------------

# Seed 001's example config, with its two models that have since shut down (gpt-5.1-codex on
# 2026-07-23, gpt-5.2-chat-latest on 2026-08-10) replaced by ones that behave alike.
SEED_PROFILES = """\
model_profiles:
  answer: {model: gpt-5.2, reasoning_effort: medium, verbosity: medium}
  answer_detailed: {model: gpt-5.2, reasoning_effort: high, verbosity: high}
  answer_quick: {model: gpt-5.1-chat-latest, reasoning_effort: low, verbosity: low}
"""


def test_the_seeds_quick_profile_fails_naming_the_key_and_what_the_model_accepts(running, fake):
    message = failure_of(running(config=SEED_PROFILES).call("answer_quick", {"query": "q"}))
    assert message == (
        "answer failed: the API refused reasoning_effort 'low' for gpt-5.1-chat-latest "
        "(HTTP 400): set model_profiles.answer_quick.reasoning_effort to medium "
        "(gpt-5.1-chat-latest accepts only medium)"
    )
    (create,) = fake.creates  # a 400 is not retried
    assert create.status_sent == 400


@pytest.mark.parametrize("tool", ["answer_quick", "answer_detailed"])
def test_a_built_in_effort_a_chat_latest_model_refuses_becomes_one_it_takes(running, fake, tool):
    # Only the tool's model set: its built-in effort (quick: low, detailed: high) would be
    # refused on every call, so it takes the model's one effort, medium.
    fake.enqueue(weather_reply())
    server = running(config=f"model_profiles:\n  {tool}: {{model: gpt-5.1-chat-latest}}\n")
    assert "result" in server.call(tool, {"query": "q"})
    assert fake.creates[-1].body["reasoning"] == {"effort": "medium"}


def test_a_refused_verbosity_names_the_environment_variable_that_set_it(spawn, fake):
    server = start(
        spawn, fake, env={"MODEL_ANSWER": "gpt-5-chat-latest", "ANSWER_VERBOSITY": "high"}
    )
    message = failure_of(server.call("answer", {"query": "q"}))
    assert message == (
        "answer failed: the API refused verbosity 'high' for gpt-5-chat-latest (HTTP 400): "
        "set ANSWER_VERBOSITY (model_profiles.answer.verbosity) to medium "
        "(gpt-5-chat-latest accepts only medium)"
    )


def test_effort_minimal_with_web_search_is_refused_naming_the_effort(running, fake):
    server = running(
        config="model_profiles:\n  answer: {model: gpt-5, reasoning_effort: minimal}\n"
    )
    message = failure_of(server.call("answer", {"query": "q"}))
    assert message == (
        "answer failed: the API refused web search with reasoning_effort 'minimal' for gpt-5 "
        "(HTTP 400): set model_profiles.answer.reasoning_effort to low "
        "(gpt-5 accepts low, medium, high with web search)"
    )


def test_the_accepted_values_come_from_the_apis_own_message(running, fake):
    # A model this module knows nothing of: the API's list is the one to believe.
    server = running(config="model_profiles:\n  answer: {model: gpt-7, reasoning_effort: xhigh}\n")
    fake.enqueue(
        Reply(
            status=400,
            error_code="unsupported_value",
            error_param="reasoning.effort",
            error_message=(
                "Unsupported value: 'xhigh' is not supported with the 'gpt-7-2027-01-01' model. "
                "Supported values are: 'low', 'medium', and 'high'."
            ),
        )
    )
    message = failure_of(server.call("answer", {"query": "q"}))
    assert message.endswith(
        "set model_profiles.answer.reasoning_effort to high (gpt-7 accepts low, medium, high)"
    )


def test_another_400_is_still_the_apis_own_words(server, fake):
    fake.enqueue(Reply(status=400, error_param="input", error_message="Input is too long."))
    message = failure_of(server.call("answer", {"query": "q"}))
    assert message == "answer failed: the API rejected the request (HTTP 400): Input is too long."


def test_flex_on_a_model_without_it_names_the_service_tier_key(running, fake):
    server = running(config="model_profiles:\n  answer: {model: gpt-4o, service_tier: flex}\n")
    message = failure_of(server.call("answer", {"query": "q"}))
    assert message == (
        "answer failed: the API refused service_tier 'flex' for gpt-4o (HTTP 400: Flex is not "
        "available for this model.): set model_profiles.answer.service_tier to default or null"
    )
    (create,) = fake.creates  # a 400 is not retried, flex or not
    assert (create.status_sent, create.body["service_tier"]) == (400, "flex")


def test_an_inherited_service_tier_names_the_answer_profile_that_set_it(running, fake):
    config = (
        "model_profiles:\n  answer: {service_tier: flex}\n  answer_quick: {model: gpt-4.1-mini}\n"
    )
    message = failure_of(running(config=config).call("answer_quick", {"query": "q"}))
    assert message.endswith(": set model_profiles.answer.service_tier to default or null")
    assert "service_tier 'flex' for gpt-4.1-mini" in message


def test_a_service_tier_outside_the_apis_list_names_the_key_and_the_values(running, fake):
    # A Responses server with fewer tiers than the config allows lists the ones it takes.
    server = running(config="model_profiles:\n  answer: {service_tier: priority}\n")
    fake.enqueue(
        Reply(
            status=400,
            error_param="service_tier",
            error_code="invalid_value",
            error_message=(
                "Invalid value: 'priority'. Supported values are: 'auto', 'default', and 'flex'."
            ),
        )
    )
    message = failure_of(server.call("answer", {"query": "q"}))
    assert message == (
        "answer failed: the API refused service_tier 'priority' for gpt-6.1-terra (HTTP 400): "
        "set model_profiles.answer.service_tier to default (gpt-6.1-terra accepts auto, default, "
        "flex)"
    )


def test_max_tool_calls_a_server_does_not_take_names_the_key_to_unset(running, fake):
    server = running(config="model_profiles:\n  answer: {max_tool_calls: 8}\n")
    fake.enqueue(unsupported_parameter("max_tool_calls"))
    message = failure_of(server.call("answer", {"query": "q"}))
    assert message == (
        "answer failed: the API refused max_tool_calls for gpt-6.1-terra, which takes no "
        "max_tool_calls (HTTP 400): set model_profiles.answer.max_tool_calls to null"
    )
    assert fake.creates[0].body["max_tool_calls"] == 8


def test_max_tool_calls_above_a_servers_limit_names_the_key_and_the_limit(running, fake):
    server = running(config="model_profiles:\n  answer_detailed: {max_tool_calls: 50}\n")
    fake.enqueue(
        Reply(
            status=400,
            error_param="max_tool_calls",
            error_code="integer_above_max_value",
            error_message=(
                "Invalid 'max_tool_calls': integer above maximum value. Expected a value <= 20, "
                "but got 50 instead."
            ),
        )
    )
    message = failure_of(server.call("answer_detailed", {"query": "q"}))
    assert message.endswith(
        "the API refused max_tool_calls 50 for gpt-6.2-sol (HTTP 400): set "
        "model_profiles.answer_detailed.max_tool_calls to 20 (gpt-6.2-sol accepts at most 20)"
    )


def test_the_fakes_flex_refusal_is_the_real_apis_error_as_the_sdk_raises_it(fake):
    import openai

    client = openai.OpenAI(api_key=TEST_KEY, base_url=fake.base_url, max_retries=0)
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model="gpt-4o", input="hi", service_tier="flex")
    assert caught.value.body == {
        "message": "Flex is not available for this model.",
        "type": "invalid_request_error",
        "param": None,
        "code": None,
    }
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model="gpt-5", input="hi", max_tool_calls=0)
    assert (caught.value.code, caught.value.param) == ("integer_below_min_value", "max_tool_calls")
    assert [c.status_sent for c in fake.creates] == [400, 400]  # nothing created


def test_the_fakes_refusal_is_the_real_apis_error_as_the_sdk_raises_it(fake):
    import openai

    client = openai.OpenAI(api_key=TEST_KEY, base_url=fake.base_url, max_retries=0)
    fake.enqueue(Reply(text="For the next request."))
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(
            model="gpt-5.1-chat-latest",
            input="hi",
            reasoning={"effort": "low"},
            tools=[{"type": "web_search"}],
        )
    assert caught.value.status_code == 400
    assert caught.value.body == {
        "message": (
            "Unsupported value: 'low' is not supported with the 'gpt-5.1-chat-latest' model. "
            "Supported values are: 'medium'."
        ),
        "type": "invalid_request_error",
        "param": "reasoning.effort",
        "code": "unsupported_value",
    }
    assert (caught.value.code, caught.value.param) == ("unsupported_value", "reasoning.effort")
    # Refused before anything was created: the queued reply is the next request's.
    accepted = client.responses.create(model="gpt-5.1-chat-latest", input="hi")
    assert accepted.output_text == "For the next request."


def test_base_url_without_v1_is_reported_as_the_wrong_endpoint_not_the_model(spawn, fake):
    server = start(spawn, fake, env={"OPENAI_BASE_URL": fake.origin})
    message = failure_of(server.call("answer", {"query": "q"}))
    assert message == (
        f"answer failed: {fake.origin} returned 404 Invalid URL (POST /responses): check "
        "openai.base_url (from env OPENAI_BASE_URL); it usually ends in /v1"
    )
    (request,) = fake.requests
    assert request.path == "/responses"


def test_404_page_that_is_not_an_api_error_points_at_the_base_url(server, fake):
    page = "<!DOCTYPE html><html><body><h1>404 Not Found</h1></body></html>"
    fake.enqueue(Reply(status=404, body=page, content_type="text/html; charset=utf-8"))
    message = failure_of(server.call("answer", {"query": "q"}))
    assert f"{fake.base_url} returned 404 with no API error in the body" in message
    assert "check openai.base_url (from env OPENAI_BASE_URL)" in message
    assert "model" not in message
    assert "<html>" not in message


def test_other_403_says_the_key_was_refused_and_why(server, fake):
    fake.enqueue(Reply(status=403))  # the fake's default 403 is a region refusal
    message = failure_of(server.call("answer", {"query": "q"}))
    assert "403" in message
    assert "region" in message.lower()
    assert "model_profiles" not in message
    assert len(fake.requests) == 1


def test_rate_limit_is_retried_then_reported_after_the_retries(running, fake):
    fake.enqueue(*[Reply(status=429, headers=FAST_RETRY)] * 3)
    server = running(config=TIGHT)
    message = failure_of(server.call("answer", {"query": "q"}))
    assert "429" in message
    assert "rate limit" in message
    assert "after 2 retries" in message
    assert len(fake.requests) == 3


def test_exhausted_quota_is_not_retried(server, fake):
    fake.enqueue(Reply(status=429, error_code="insufficient_quota", headers=FAST_RETRY))
    message = failure_of(server.call("answer", {"query": "q"}))
    assert "quota" in message
    assert "rate limit" not in message
    assert len(fake.requests) == 1


def test_server_error_is_retried_and_the_retry_answers(server, fake):
    fake.enqueue(Reply(status=500, headers=FAST_RETRY), Reply())
    reply = server.call("answer", {"query": "q"})
    assert answer_of(reply)["used_search"] is False
    assert reply["result"]["_meta"]["attempts"] == 2
    assert len(fake.requests) == 2


def test_server_error_is_reported_when_the_retries_run_out(running, fake):
    fake.enqueue(*[Reply(status=500, headers=FAST_RETRY)] * 3)
    server = running(config=TIGHT)
    message = failure_of(server.call("answer", {"query": "q"}))
    assert "HTTP 500" in message
    assert "after 2 retries" in message
    assert "try again" in message
    assert len(fake.requests) == 3


@pytest.mark.parametrize(
    "reply",
    [Reply(stall_after_events=3), Reply(delay_before_headers=30)],
    ids=["stream-stalls", "no-headers"],
)
def test_stall_longer_than_timeout_ms_fails_the_call_without_retry(running, fake, reply):
    fake.enqueue(reply)
    server = running(config=TIGHT)
    started = time.monotonic()
    message = failure_of(server.call("answer", {"query": "q"}))
    elapsed = time.monotonic() - started
    print(f"timeout reported after {elapsed:.3f} s")
    assert "1000 ms" in message
    assert "request.timeout_ms" in message
    # Far below the fake's 30 s stall (the server's first call also pays for importing the SDK).
    assert 0.9 <= elapsed < 15
    assert len(fake.requests) == 1


def test_refused_connection_names_the_base_url(spawn):
    base_url = f"http://127.0.0.1:{closed_port()}/v1"
    server = spawn(env={"OPENAI_BASE_URL": base_url})
    server.initialize()
    message = failure_of(server.call("answer", {"query": "q"}))
    assert f"cannot connect to {base_url}" in message
    assert "openai.base_url" in message


@pytest.mark.parametrize("rst", [False, True], ids=["fin", "rst"])
def test_dropped_stream_is_retried_and_the_retry_answers(server, fake, rst):
    fake.enqueue(Reply(drop_after_events=3, drop_with_rst=rst), weather_reply())
    assert answer_of(server.call("answer", {"query": "q"}))["used_search"] is True
    assert len(fake.requests) == 2


def test_dropped_stream_is_reported_when_the_retries_run_out(running, fake):
    fake.enqueue(*[Reply(drop_after_events=3)] * 3)
    server = running(config=TIGHT)
    message = failure_of(server.call("answer", {"query": "q"}))
    assert "dropped" in message
    assert "after 2 retries" in message
    assert fake.base_url in message
    assert len(fake.requests) == 3


def test_malformed_event_is_reported_naming_the_endpoint(server, fake):
    fake.enqueue(Reply(malformed_after_events=4))
    message = failure_of(server.call("answer", {"query": "q"}))
    assert "malformed" in message
    assert fake.base_url in message


@pytest.mark.parametrize(
    "stream_error",
    [
        {"event": "error"},
        {"event": "error", "shape": "flat"},
        {"event": "response.failed"},
    ],
    ids=["error-nested", "error-flat", "response-failed"],
)
def test_error_event_in_the_stream_is_reported_with_the_apis_message(server, fake, stream_error):
    spec = {**stream_error, "code": "invalid_prompt", "message": "Invalid prompt: flagged."}
    fake.enqueue(Reply(stream_error=spec))
    message = failure_of(server.call("answer", {"query": "q"}))
    assert "Invalid prompt: flagged." in message
    assert len(fake.requests) == 1


def test_server_error_event_in_the_stream_is_retried(server, fake):
    fake.enqueue(Reply(stream_error={"code": "server_error"}), Reply())
    assert answer_of(server.call("answer", {"query": "q"}))["used_search"] is False
    assert len(fake.requests) == 2


def test_error_data_has_only_the_message_without_debug(server, fake):
    fake.enqueue(Reply(status=401))
    reply = server.call("answer", {"query": "q"})
    failure_of(reply)
    assert set(reply["error"]["data"]) == {"message"}


def test_error_data_adds_status_type_and_name_with_debug(running, fake):
    fake.enqueue(Reply(status=401))
    server = running("--stdio", "--debug")
    reply = server.call("answer", {"query": "q"})
    failure_of(reply)
    data = reply["error"]["data"]
    assert str(data["status"]) == "401"
    assert data["type"] == "invalid_request_error"
    assert data["name"] == "AuthenticationError"


def test_api_key_never_appears_in_any_output(spawn, fake):
    echoed = f"Incorrect API key provided: {TEST_KEY}. You can find your API key at ..."
    fake.enqueue(Reply(status=401, error_message=echoed), weather_reply())
    server = start(spawn, fake, "--stdio", "--debug")
    failure_of(server.call("answer", {"query": "q"}))
    answer_of(server.call("answer", {"query": "q"}))
    server.close_stdin()
    assert server.wait() == 0
    everything = bytes(server.reader.raw).decode() + server.stderr
    assert TEST_KEY not in everything
    assert TEST_KEY[-12:] not in everything


def test_debug_log_has_the_request_summary_but_never_the_query(running, fake):
    server = running("--stdio", "--debug")
    answer_of(server.call("answer", {"query": "a particular question about zebra crossings"}))
    wait_until(lambda: "queryLen=43" in server.stderr, what="debug line for the call")
    assert "profile=answer model=gpt-6.1-terra" in server.stderr
    assert "request summary" in server.stderr
    assert "zebra" not in server.stderr


# ============================================================================================
# Retry timing
# ============================================================================================


def test_retry_waits_as_long_as_retry_after_ms_asks(server, fake):
    """600 ms is longer than the first exponential backoff (at most 500 ms) would be."""
    fake.enqueue(Reply(status=429, headers={"retry-after-ms": "600"}), Reply())
    answer_of(server.call("answer", {"query": "q"}))
    first, second = fake.requests
    gap = second.received_at - first.finished_at
    print(f"retry gap {gap * 1000:.0f} ms (asked 600 ms)")
    assert 0.6 <= gap < 2.0


# ============================================================================================
# Cancellation
# ============================================================================================


def stalled_call(server: Server, fake) -> str:
    """Starts a call whose stream goes silent; returns its id once the fake is stalling."""
    fake.enqueue(Reply(stall_after_events=3))
    request_id = new_id()
    send_call(server, request_id)
    (rec,) = fake.wait_for_requests(1)
    wait_until(lambda: rec.events_sent >= 3, what="stream stalled")
    time.sleep(0.05)  # sleep: unreported (issue 40): the worker now blocks reading the stream
    return request_id


def test_cancel_closes_the_upstream_connection_at_once(server, fake):
    request_id = stalled_call(server, fake)
    written = cancel(server, request_id)
    closed = fake.wait_for_disconnect(0, timeout=2)
    print(f"upstream closed {(closed - written) * 1000:.2f} ms after the cancel was written")
    # Sooner than the product's shortest poll (_POLL_S): the cancel itself shut the stream,
    # nothing that looks for it now and then did. The latency is bench.py's "cancel" figure.
    assert closed - written < m._POLL_S


def test_cancelled_call_gets_no_reply_and_is_not_retried(server, fake):
    request_id = stalled_call(server, fake)
    cancel(server, request_id)
    fake.wait_for_disconnect(0, timeout=2)
    assert server.nothing_within(0.5)
    assert server.request("ping")["result"] == {}  # still serving
    assert not sent_reply_for(server, request_id)
    assert len(fake.requests) == 1


def test_cancel_during_the_retry_wait_ends_it(spawn, fake):
    fake.enqueue(Reply(status=429, headers={"retry-after-ms": "30000"}))
    server = start(spawn, fake)
    send_call(server, "waiting", _meta={"progressToken": "w"})
    server.recv_until(
        lambda msg: (
            msg.get("method") == "notifications/progress"
            and "retr" in msg["params"].get("message", "")
        )
    )
    written = cancel(server, "waiting")
    server.close_stdin()  # the server exits once no call is left running
    assert server.wait(timeout=5) == 0
    print(f"server exited {time.monotonic() - written:.3f} s after the cancel")
    assert len(fake.requests) == 1
    assert not sent_reply_for(server, "waiting")


# ============================================================================================
# Progress
# ============================================================================================


def test_progress_notifications_follow_the_stream_and_stop_at_the_result(server, fake):
    fake.enqueue(weather_reply(event_delay=0.06))
    reply, before = call_collecting(server, _meta={"progressToken": "tok"})
    answer_of(reply)
    notices = progress_of(before, "tok")
    print([n["message"] for n in notices])
    assert len(notices) >= 2
    values = [n["progress"] for n in notices]
    assert values == sorted(set(values))
    messages = [n["message"] for n in notices]
    assert "searching the web" in messages
    assert "writing the answer" in messages
    assert server.nothing_within(0.5)  # no progress after the result


def test_no_progress_without_a_progress_token(server, fake):
    fake.enqueue(weather_reply(event_delay=0.02))
    reply, before = call_collecting(server)
    answer_of(reply)
    assert not any(msg.get("method") == "notifications/progress" for msg in before)


def test_heartbeat_progress_keeps_a_silent_call_alive(spawn, fake):
    fake.enqueue(Reply(stall_after_events=2, stall_seconds=2.0))
    server = start(spawn, fake, config="server: {progress_interval_s: 1}\n")
    reply, before = call_collecting(server, _meta={"progressToken": 5})
    answer_of(reply)
    notices = progress_of(before, 5)
    print([n["message"] for n in notices])
    assert any("still working" in n["message"] for n in notices)
    values = [n["progress"] for n in notices]
    assert values == sorted(set(values))


# ============================================================================================
# Concurrency and the shared client
# ============================================================================================


def test_twenty_concurrent_calls_each_get_their_own_answer(server, fake):
    fake.enqueue(*[Reply(text=f"answer number {n}", event_delay=0.01) for n in range(20)])
    ids = {new_id(): f"question {n}" for n in range(20)}
    for request_id, query in ids.items():
        send_call(server, request_id, query)
    replies = {}
    while len(replies) < len(ids):
        msg = server.recv(timeout=15)
        if msg.get("id") in ids:
            replies[msg["id"]] = msg
    # Replies are handed out in arrival order, so look up which text each query was given.
    text_for = {rec.body["input"].split("\n")[0]: rec.reply.text for rec in fake.requests}
    for request_id, query in ids.items():
        assert answer_of(replies[request_id])["answer"] == text_for[query]
    # The fake notes a request's end just after its last byte: the reply can come first.
    wait_until(lambda: all(rec.finished_at for rec in fake.requests), 10, "the fake's notes")
    spans = [(rec.received_at, rec.finished_at) for rec in fake.requests]
    overlap = max(sum(1 for s, e in spans if s <= t < e) for t, _ in spans)
    print(f"{overlap} of 20 requests in flight at once")
    assert overlap > 1


def test_sequential_calls_reuse_one_connection(spawn, fake):
    server = start(spawn, fake)
    for _ in range(3):
        answer_of(server.call("answer", {"query": "q"}))
    assert len(fake.requests) == 3
    assert fake.connections_opened == 1
    assert len({rec.connection_id for rec in fake.requests}) == 1


# ============================================================================================
# --ask, the one-shot command
# ============================================================================================


def test_ask_prints_the_answer_json(tmp_path, fake):
    fake.enqueue(weather_reply())
    done = run_cli(tmp_path, "--ask", "Tokyo weather?", env={"OPENAI_BASE_URL": fake.base_url})
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)
    assert printed["used_search"] is True
    assert printed["citations"]
    assert printed["_meta"]["response_id"].startswith("resp_")
    assert TEST_KEY not in done.stdout + done.stderr


def test_ask_failure_goes_to_stderr_with_exit_status_1(tmp_path, fake):
    fake.enqueue(Reply(status=401))
    done = run_cli(tmp_path, "--ask", "q", env={"OPENAI_BASE_URL": fake.base_url})
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.startswith("answer failed: ")
    assert "OPENAI_API_KEY" in done.stderr


def test_ask_tool_uses_that_tools_profile(tmp_path, fake):
    config = tmp_path / "c.yaml"
    config.write_text(PROFILES, encoding="utf-8")
    done = run_cli(
        tmp_path,
        "--ask", "q", "--tool", "answer_quick", "--config", str(config),
        env={"OPENAI_BASE_URL": fake.base_url},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert fake.requests[0].body["model"] == "gpt-4.1-mini"


# ============================================================================================
# Networks: a proxy and a private CA. httpx2 (the SDK's HTTP client) reads HTTP_PROXY,
# HTTPS_PROXY, ALL_PROXY and NO_PROXY through urllib, and SSL_CERT_FILE / SSL_CERT_DIR.
# ============================================================================================


def proxied(proxy: ForwardProxy, **extra: str) -> dict:
    """Both spellings: urllib lets a lower-case variable win, even an empty one."""
    env = {"NO_PROXY": "", "no_proxy": "", "ALL_PROXY": "", "all_proxy": ""}
    for name in ("HTTP_PROXY", "HTTPS_PROXY"):
        env[name] = env[name.lower()] = proxy.url
    return {**env, **extra}


@pytest.fixture(scope="module")
def tls(tmp_path_factory):
    if not openssl_available():
        pytest.skip("the openssl command is not installed")
    return make_tls_material(str(tmp_path_factory.mktemp("tls")))


@pytest.fixture
def tls_fake(tls):
    with FakeResponsesAPI(tls=tls.server_pair) as api:
        yield api


def test_calls_go_through_the_http_proxy(spawn, fake):
    with ForwardProxy() as proxy:
        server = start(spawn, fake, env=proxied(proxy))
        assert answer_of(server.call("answer", {"query": "q"}))["used_search"] is False
    assert f"POST {fake.base_url}/responses" in proxy.seen
    assert len(fake.requests) == 1


def test_https_calls_tunnel_through_the_proxy(spawn, tls, tls_fake):
    with ForwardProxy() as proxy:
        server = start(spawn, tls_fake, env=proxied(proxy, SSL_CERT_FILE=tls.ca_cert))
        assert answer_of(server.call("answer", {"query": "q"}))["used_search"] is False
    assert f"CONNECT 127.0.0.1:{tls_fake.port}" in proxy.seen
    assert len(tls_fake.requests) == 1


def test_private_ca_from_ssl_cert_file_is_trusted(spawn, tls, tls_fake):
    tls_fake.enqueue(weather_reply())
    server = start(spawn, tls_fake, env={"SSL_CERT_FILE": tls.ca_cert})
    assert answer_of(server.call("answer", {"query": "q"}))["used_search"] is True
    assert tls_fake.base_url.startswith("https://")


def test_untrusted_certificate_fails_naming_the_tls_problem_and_ssl_cert_file(spawn, tls_fake):
    server = start(spawn, tls_fake)
    message = failure_of(server.call("answer", {"query": "q"}))
    print(message)
    assert tls_fake.base_url in message
    assert "certificate" in message.lower()
    assert "SSL_CERT_FILE" in message
    assert tls_fake.requests == []


# ============================================================================================
# Hard cases found in review
# ============================================================================================


def test_an_upstream_message_echoing_the_key_is_redacted_in_the_error(server, fake):
    fake.enqueue(Reply(status=400, error_message=f"Received API Key = {TEST_KEY}"))
    reply = server.call("answer", {"query": "q"})
    message = failure_of(reply)
    assert "400" in message and "[redacted]" in message
    assert TEST_KEY not in json.dumps(reply)
    assert TEST_KEY[-8:] not in server.stderr


def test_a_malformed_completed_response_is_reported_as_malformed(tmp_path, monkeypatch):
    config = m.load_config({}, {"XDG_CONFIG_HOME": str(tmp_path), "XDG_STATE_HOME": str(tmp_path)})
    engine = m.build_engine(config, m.Log())
    monkeypatch.setenv("OPENAI_API_KEY", TEST_KEY)
    malformed = {"output": ["oops"]}
    monkeypatch.setattr(engine.upstream, "_attempt", lambda client, request, call: malformed)
    with pytest.raises(m.ToolError) as caught:
        engine.answer("answer", {"query": "q"}, m.Call(1, "answer"))
    assert caught.value.message.startswith("malformed response from")


def test_the_background_warm_up_starts_once_however_many_sessions_initialize(tmp_path, monkeypatch):
    config = m.load_config({}, {"XDG_CONFIG_HOME": str(tmp_path), "XDG_STATE_HOME": str(tmp_path)})
    engine = m.build_engine(config, m.Log())
    started = []
    monkeypatch.setattr(engine.upstream, "_warm", lambda: started.append(1))
    before = set(threading.enumerate())
    for _ in range(3):
        engine.warm_up(delay=0)
    wait_until(lambda: started, what="the warm-up")
    # Each warm-up runs on a timer thread: once every one started here has ended, a second
    # warm-up, had one been started, would have been counted.
    wait_until(
        lambda: all(t in before for t in threading.enumerate() if isinstance(t, threading.Timer)),
        what="the warm-up timers' end",
    )
    assert started == [1]
