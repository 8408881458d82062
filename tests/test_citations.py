"""The answer engine's pure parts: citations, the Sources section, the request body, retries.

Responses are plain dicts in the shape ``Response.to_dict()`` gives (see the SDK's
``openai/types/responses``); nothing here touches the network.
"""

from __future__ import annotations

import email.utils
import re
import statistics
import time

import httpx2
import pytest

import openai_responses_mcp as m

TODAY = "2026-01-14"
ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
WEATHER_API = {"type": "api", "name": "oai-weather"}


# -- building Responses API objects ------------------------------------------------------------


def cite(url: str, title: str | None = None) -> dict:
    note = {"type": "url_citation", "url": url, "start_index": 0, "end_index": 1}
    if title is not None:
        note["title"] = title
    return note


def message(text: str, *annotations: dict) -> dict:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": list(annotations)}],
    }


def url_source(url: str) -> dict:
    return {"type": "url", "url": url}


def web_search(*sources: dict) -> dict:
    return {
        "id": "ws_1",
        "type": "web_search_call",
        "status": "completed",
        "action": {"type": "search", "query": "q", "sources": list(sources)},
    }


def response(*output: dict, model: str = "gpt-5.2-2025-12-11", usage: dict | None = None):
    return {"id": "resp_abc", "object": "response", "model": model, "output": list(output),
            "usage": usage}  # fmt: skip


def urls(citations: list[dict]) -> list[str]:
    return [c["url"] for c in citations]


def sources_lines(answer: str) -> list[str]:
    """The lines after the last `Sources:` header."""
    lines = answer.split("\n")
    header = max(i for i, line in enumerate(lines) if line.strip().strip("*").startswith("Sources"))
    return [line for line in lines[header + 1 :] if line.strip()]


def make_config(tmp_path, yaml_text: str | None = None, **env: str) -> m.Config:
    cli = {}
    if yaml_text is not None:
        path = tmp_path / "config.yaml"
        path.write_text(yaml_text, encoding="utf-8")
        cli["config"] = str(path)
    return m.load_config(cli, {"XDG_CONFIG_HOME": str(tmp_path / "xdg"), **env})


# ============================================================================================
# collect_citations
# ============================================================================================


def test_url_citations_come_first_and_search_sources_are_then_ignored():
    resp = response(
        web_search(url_source("https://c.example/3")),
        message("text", cite("https://a.example/1", "A"), cite("https://b.example/2", "B")),
    )
    assert urls(m.collect_citations(resp, 10, TODAY)) == [
        "https://a.example/1",
        "https://b.example/2",
    ]


def test_url_citations_are_deduplicated_by_url_in_order_of_appearance():
    resp = response(
        message("one", cite("https://a.example/", "first A"), cite("https://b.example/", "B")),
        message("two", cite("https://a.example/", "second A"), cite("https://c.example/", "C")),
    )
    citations = m.collect_citations(resp, 10, TODAY)
    assert urls(citations) == ["https://a.example/", "https://b.example/", "https://c.example/"]
    assert citations[0]["title"] == "first A"


def test_search_sources_are_the_fallback_when_there_is_no_url_citation():
    resp = response(
        web_search(url_source("https://c.example/"), url_source("https://d.example/")),
        web_search(url_source("https://d.example/"), url_source("https://e.example/")),
        message("text"),
    )
    assert urls(m.collect_citations(resp, 10, TODAY)) == [
        "https://c.example/",
        "https://d.example/",
        "https://e.example/",
    ]


def test_no_search_and_no_annotation_gives_no_citations():
    assert m.collect_citations(response(message("HTTP 404 means not found.")), 3, TODAY) == []


def test_a_source_id_alone_becomes_a_citation():
    resp = response(web_search(WEATHER_API), message("Sunny."))
    assert urls(m.collect_citations(resp, 3, TODAY)) == ["oai-weather"]


def test_source_ids_are_kept_alongside_url_citations():
    resp = response(
        web_search(WEATHER_API, url_source("https://c.example/")),
        message("Sunny.", cite("https://www.jma.go.jp/", "JMA")),
    )
    assert sorted(urls(m.collect_citations(resp, 10, TODAY))) == [
        "https://www.jma.go.jp/",
        "oai-weather",
    ]


def test_source_ids_are_kept_when_the_cap_is_reached():
    resp = response(
        web_search(WEATHER_API),
        message("x", *(cite(f"https://{n}.example/") for n in ("a", "b", "c"))),
    )
    citations = m.collect_citations(resp, 2, TODAY)
    assert len(citations) == 2
    assert "oai-weather" in urls(citations)
    assert "https://a.example/" in urls(citations)  # room is made from the end


@pytest.mark.parametrize("cap", [1, 3, 10])
def test_url_citations_are_capped_by_max_citations(cap):
    many = [cite(f"https://site{n}.example/") for n in range(12)]
    citations = m.collect_citations(response(message("x", *many)), cap, TODAY)
    assert urls(citations) == [f"https://site{n}.example/" for n in range(cap)]


def test_fallback_search_sources_are_capped_by_max_citations():
    resp = response(web_search(*(url_source(f"https://s{n}.example/") for n in range(8))))
    assert len(m.collect_citations(resp, 3, TODAY)) == 3


def test_citation_titles_come_from_the_annotation():
    resp = response(message("x", cite("https://www.jma.go.jp/", "気象庁｜天気予報")))
    assert m.collect_citations(resp, 3, TODAY)[0]["title"] == "気象庁｜天気予報"


def test_every_citation_has_a_string_title():
    """outputSchema types `title` as string, so it is never null, whatever the source."""
    resp = response(
        web_search(WEATHER_API),
        message("x", cite("https://no-title.example/page")),
    )
    fallback = response(web_search(url_source("https://d.example/doc")))
    for citation in m.collect_citations(resp, 5, TODAY) + m.collect_citations(fallback, 5, TODAY):
        assert isinstance(citation["title"], str)
        assert citation["title"]


def test_published_at_is_the_given_date():
    resp = response(
        web_search(WEATHER_API, url_source("https://c.example/")),
        message("x", cite("https://a.example/", "A")),
    )
    citations = m.collect_citations(resp, 5, TODAY)
    assert citations
    assert {c["published_at"] for c in citations} == {TODAY}
    assert all(ISO_DATE.match(c["published_at"]) for c in citations)
    assert all(set(c) <= {"url", "title", "published_at"} for c in citations)


# ============================================================================================
# shape_answer: used_search, model, the four keys
# ============================================================================================


def test_answer_has_exactly_the_four_contract_keys():
    shaped = m.shape_answer(response(message("x")), 3, TODAY)
    assert set(shaped) == {"answer", "used_search", "citations", "model"}


def test_stable_answer_does_not_use_search():
    text = "HTTP 404 means the server could not find the requested resource."
    shaped = m.shape_answer(response(message(text)), 3, TODAY)
    assert shaped == {
        "answer": text,
        "used_search": False,
        "citations": [],
        "model": "gpt-5.2-2025-12-11",
    }


def test_used_search_is_true_when_a_web_search_call_exists():
    shaped = m.shape_answer(response(web_search(), message("x")), 3, TODAY)
    assert shaped["used_search"] is True


def test_used_search_is_true_when_a_url_citation_exists():
    shaped = m.shape_answer(response(message("x", cite("https://a.example/"))), 3, TODAY)
    assert shaped["used_search"] is True


def test_model_is_the_model_the_api_reports():
    shaped = m.shape_answer(response(message("x"), model="o3-2025-04-16"), 3, TODAY)
    assert shaped["model"] == "o3-2025-04-16"


def test_answer_is_the_output_text_whatever_items_precede_it():
    reasoning = {"id": "rs_1", "type": "reasoning", "summary": []}
    shaped = m.shape_answer(response(reasoning, message("  The answer.  ")), 3, TODAY)
    assert shaped["answer"] == "The answer."


# ============================================================================================
# The Sources section
# ============================================================================================


def test_sources_section_is_appended_when_the_model_wrote_none():
    resp = response(
        web_search(WEATHER_API),
        message("Sunny in Tokyo.", cite("https://www.jma.go.jp/", "JMA")),
    )
    answer = m.shape_answer(resp, 3, TODAY)["answer"]
    assert answer.startswith("Sunny in Tokyo.")
    assert answer.count("Sources:") == 1
    assert sorted(sources_lines(answer)) == [
        f"- https://www.jma.go.jp/ ({TODAY})",
        f"- oai-weather ({TODAY})",
    ]


def test_sources_section_without_dates_is_completed_with_dates():
    text = "Sunny.\n\nSources:\n- https://a.example/\n- https://b.example/"
    resp = response(message(text, cite("https://a.example/"), cite("https://b.example/")))
    answer = m.shape_answer(resp, 3, TODAY)["answer"]
    assert answer.count("Sources:") == 1
    assert sources_lines(answer) == [
        f"- https://a.example/ ({TODAY})",
        f"- https://b.example/ ({TODAY})",
    ]


def test_sources_section_with_dates_is_left_as_written():
    text = "Sunny.\n\nSources:\n- https://a.example/ (2026-01-10)"
    resp = response(message(text, cite("https://a.example/")))
    assert m.shape_answer(resp, 3, TODAY)["answer"] == text


@pytest.mark.parametrize("header", ["Sources:", "**Sources:**", "## Sources", "sources:"])
def test_sources_header_the_model_wrote_is_never_duplicated(header):
    text = f"Sunny.\n\n{header}\n- https://a.example/ (2026-01-10)"
    answer = m.shape_answer(response(message(text, cite("https://a.example/"))), 3, TODAY)["answer"]
    assert sum("sources" in line.lower() for line in answer.split("\n")) == 1


def test_citations_missing_from_the_models_section_are_added_to_it():
    text = "Sunny.\n\nSources:\n- https://a.example/ (2026-01-10)"
    resp = response(web_search(WEATHER_API), message(text, cite("https://a.example/")))
    answer = m.shape_answer(resp, 3, TODAY)["answer"]
    assert answer.count("Sources:") == 1
    assert f"- oai-weather ({TODAY})" in sources_lines(answer)


def test_search_without_a_citable_source_still_ends_with_a_dated_sources_section():
    shaped = m.shape_answer(response(web_search(), message("Nothing found.")), 3, TODAY)
    assert shaped["citations"] == []
    lines = sources_lines(shaped["answer"])
    assert lines
    assert all(re.search(r"\d{4}-\d{2}-\d{2}", line) for line in lines)


def test_no_sources_section_without_search():
    shaped = m.shape_answer(response(message("HTTP 404 means not found.")), 3, TODAY)
    assert "Sources" not in shaped["answer"]


def test_ensure_sources_section_lists_each_citation_with_its_date():
    citations = [
        {"url": "oai-weather", "title": "api", "published_at": "2026-01-14"},
        {"url": "https://a.example/", "title": "A", "published_at": "2026-01-02"},
    ]
    answer = m.ensure_sources_section("Body.", citations, TODAY)
    assert answer.startswith("Body.")
    assert sources_lines(answer) == [
        "- oai-weather (2026-01-14)",
        "- https://a.example/ (2026-01-02)",
    ]


# ============================================================================================
# usage_meta
# ============================================================================================


def test_usage_meta_reports_tokens_response_id_searches_elapsed_and_attempts():
    usage = {
        "input_tokens": 1500,
        "input_tokens_details": {"cached_tokens": 1024},
        "output_tokens": 300,
        "output_tokens_details": {"reasoning_tokens": 192},
        "total_tokens": 1800,
    }
    resp = response(web_search(), web_search(), message("x"), usage=usage)
    assert m.usage_meta(resp, 1.25, 2) == {
        "response_id": "resp_abc",
        "usage": {
            "input_tokens": 1500,
            "cached_input_tokens": 1024,
            "output_tokens": 300,
            "reasoning_tokens": 192,
            "total_tokens": 1800,
        },
        "web_searches": 2,
        "elapsed_ms": 1250,
        "attempts": 2,
    }


def test_usage_meta_without_usage_reports_zero_tokens():
    meta = m.usage_meta(response(message("x")), 0.0, 1)
    assert set(meta["usage"].values()) == {0}
    assert meta["web_searches"] == 0


# ============================================================================================
# build_input
# ============================================================================================


def test_input_is_the_query_then_the_hints_then_today():
    text = m.build_input("What is new?", {"recency_days": 60, "max_results": 5}, TODAY, "UTC")
    lines = text.split("\n")
    assert lines[0] == "What is new?"
    hints = next(line for line in lines if "recency_days" in line)
    assert "recency_days=60" in hints
    assert "max_results=5" in hints
    assert "domains" not in text
    assert any(TODAY in line and "UTC" in line for line in lines[1:])


def test_input_names_the_domains_when_given():
    hints = {"recency_days": 7, "max_results": 3, "domains": ["jma.go.jp", "tenki.jp"]}
    text = m.build_input("weather", hints, TODAY, "Asia/Tokyo")
    assert "jma.go.jp" in text
    assert "tenki.jp" in text


# ============================================================================================
# build_request
# ============================================================================================

PROFILES = """\
model_profiles:
  answer: {model: gpt-5.2, reasoning_effort: low, verbosity: high}
  answer_detailed: {model: o3, reasoning_effort: high}
  answer_quick: {model: gpt-4.1-mini}
"""


def test_request_model_follows_the_tools_profile(tmp_path):
    config = make_config(tmp_path, PROFILES)
    models = {t: m.build_request(t, {"query": "q"}, config, TODAY)["model"] for t in m.TOOL_NAMES}
    assert models == {"answer": "gpt-5.2", "answer_detailed": "o3", "answer_quick": "gpt-4.1-mini"}


def test_request_profiles_without_a_model_inherit_the_answer_model(tmp_path):
    config = make_config(tmp_path, "model_profiles:\n  answer: {model: gpt-5-mini}\n")
    for tool in m.TOOL_NAMES:
        assert m.build_request(tool, {"query": "q"}, config, TODAY)["model"] == "gpt-5-mini"


def test_request_effort_and_verbosity_come_from_the_profile(tmp_path):
    config = make_config(tmp_path, PROFILES)
    answer = m.build_request("answer", {"query": "q"}, config, TODAY)
    detailed = m.build_request("answer_detailed", {"query": "q"}, config, TODAY)
    assert answer["reasoning"] == {"effort": "low"}
    assert answer["text"] == {"verbosity": "high"}
    assert detailed["reasoning"] == {"effort": "high"}


def test_request_instructions_are_the_builtin_policy(tmp_path):
    request = m.build_request("answer", {"query": "q"}, make_config(tmp_path), TODAY)
    assert request["instructions"] == m.SYSTEM_POLICY
    assert "Sources:" in request["instructions"]


def test_request_input_has_default_hints_and_today_in_the_time_zone(tmp_path):
    request = m.build_request("answer", {"query": "Tokyo weather"}, make_config(tmp_path), TODAY)
    text = request["input"]
    assert text.startswith("Tokyo weather")
    assert "recency_days=60" in text
    assert "max_results=5" in text
    assert "domains" not in text
    assert TODAY in text
    assert "Asia/Tokyo" in text


def test_request_input_uses_the_configured_defaults_and_time_zone(tmp_path):
    yaml_text = (
        "search:\n  defaults: {recency_days: 30, max_results: 8}\npolicy:\n  timezone: UTC\n"
    )
    request = m.build_request("answer", {"query": "q"}, make_config(tmp_path, yaml_text), TODAY)
    assert "recency_days=30" in request["input"]
    assert "max_results=8" in request["input"]
    assert f"{TODAY} (UTC)" in request["input"]


def test_request_input_prefers_the_calls_own_hints(tmp_path):
    args = {"query": "q", "recency_days": 7, "max_results": 2, "domains": ["python.org"]}
    request = m.build_request("answer", args, make_config(tmp_path), TODAY)
    assert "recency_days=7" in request["input"]
    assert "max_results=2" in request["input"]
    assert "python.org" in request["input"]


def test_request_allows_web_search_and_asks_for_its_sources(tmp_path):
    request = m.build_request("answer", {"query": "q"}, make_config(tmp_path), TODAY)
    assert request["tools"] == [{"type": "web_search"}]
    assert request["include"] == ["web_search_call.action.sources"]


def test_request_domains_become_the_web_search_allowed_domains_filter(tmp_path):
    args = {"query": "q", "domains": ["jma.go.jp", "tenki.jp"]}
    request = m.build_request("answer", args, make_config(tmp_path), TODAY)
    assert request["tools"] == [
        {"type": "web_search", "filters": {"allowed_domains": ["jma.go.jp", "tenki.jp"]}}
    ]


def test_request_configured_default_domains_become_the_filter(tmp_path):
    config = make_config(tmp_path, "search:\n  defaults:\n    domains: [docs.python.org]\n")
    request = m.build_request("answer", {"query": "q"}, config, TODAY)
    assert request["tools"][0]["filters"] == {"allowed_domains": ["docs.python.org"]}
    assert "docs.python.org" in request["input"]


def test_request_domain_filter_switched_off_keeps_only_the_hint(tmp_path):
    config = make_config(tmp_path, "search:\n  domain_filter: false\n")
    args = {"query": "q", "domains": ["jma.go.jp"]}
    request = m.build_request("answer", args, config, TODAY)
    assert request["tools"] == [{"type": "web_search"}]
    assert "jma.go.jp" in request["input"]


def test_request_body_carries_only_responses_api_fields(tmp_path):
    """request.timeout_ms bounds the client; it is not a body field."""
    request = m.build_request("answer", {"query": "q"}, make_config(tmp_path), TODAY)
    assert set(request) <= {"model", "instructions", "input", "tools", "include", "text",
                            "reasoning", "prompt_cache_key"}  # fmt: skip


@pytest.mark.parametrize(
    ("model", "verbosity", "reasoning"),
    [
        ("gpt-5.2", True, True),
        ("gpt-5-mini", True, True),
        ("gpt-5.1-codex", True, True),
        ("o3", False, True),
        ("o4-mini", False, True),
        ("o1", False, True),
        ("gpt-4.1", False, False),
        ("gpt-4.1-mini", False, False),
        ("gpt-4o", False, False),
    ],
)
def test_request_sends_verbosity_and_effort_only_to_models_that_take_them(
    tmp_path, model, verbosity, reasoning
):
    config = make_config(tmp_path, MODEL_ANSWER=model)
    request = m.build_request("answer", {"query": "q"}, config, TODAY)
    assert request["model"] == model
    assert ("text" in request) is verbosity
    assert ("reasoning" in request) is reasoning
    if verbosity:
        assert request["text"] == {"verbosity": "medium"}
    if reasoning:
        assert request["reasoning"] == {"effort": "medium"}


@pytest.mark.parametrize(
    ("model", "verbosity", "reasoning"),
    [
        ("gpt-5", True, True),
        ("gpt-5.2-chat-latest", True, True),
        ("o3", False, True),
        ("o4-mini", False, True),
        ("o3-deep-research", False, True),
        ("gpt-4.1", False, False),
        ("gpt-4o-mini", False, False),
        ("omni-moderation-latest", False, False),
        ("o", False, False),
    ],
)
def test_model_family_support(model, verbosity, reasoning):
    assert m.supports_verbosity(model) is verbosity
    assert m.supports_reasoning(model) is reasoning


# ============================================================================================
# Retry timing: _retry_after and backoff_delay
# ============================================================================================


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"retry-after-ms": "10"}, 0.01),
        ({"retry-after-ms": "1500"}, 1.5),
        ({"retry-after": "2"}, 2.0),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
        ({"retry-after-ms": "-5"}, 0.0),
    ],
)
def test_retry_after_reads_the_apis_headers(headers, seconds):
    assert m._retry_after(headers) == pytest.approx(seconds)


def test_retry_after_headers_are_case_insensitive():
    assert m._retry_after(httpx2.Headers({"Retry-After-Ms": "250"})) == pytest.approx(0.25)


def test_retry_after_accepts_an_http_date():
    when = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 25 <= m._retry_after({"retry-after": when}) <= 31


@pytest.mark.parametrize("headers", [None, {}, {"retry-after": "soon"}, {"retry-after-ms": "x"}])
def test_retry_after_is_none_when_the_api_asked_nothing_usable(headers):
    assert m._retry_after(headers) is None


def test_backoff_honours_retry_after():
    assert m.backoff_delay(1, 2.5) == 2.5
    assert m.backoff_delay(3, 0.01) == 0.01


def test_backoff_caps_a_huge_retry_after_at_a_minute():
    assert m.backoff_delay(1, 3600.0) == 60.0


def test_backoff_without_retry_after_is_jittered():
    samples = [m.backoff_delay(1, None) for _ in range(50)]
    assert all(0 < s <= 1.0 for s in samples)
    assert len(set(samples)) > 1


def test_backoff_without_retry_after_grows_with_each_retry():
    means = [statistics.mean(m.backoff_delay(r, None) for _ in range(200)) for r in (1, 2, 3, 4)]
    assert means == sorted(means)
    assert means[-1] > 2 * means[0]


def test_backoff_without_retry_after_is_capped():
    samples = [m.backoff_delay(r, None) for r in (8, 10, 20) for _ in range(50)]
    assert max(samples) <= 8.0
    assert min(samples) >= 1.0


# ============================================================================================
# failure_message: one line, what happened, what to do
# ============================================================================================

FAILURES = [
    ("auth", {"status": 401}, 1, ["OPENAI_API_KEY", "401", "set a valid key"]),
    ("model", {"status": 404}, 1, ["'gpt-5.2'", "404", "model_profiles.answer.model"]),
    ("model", {"status": 403}, 1, ["'gpt-5.2'", "403", "model_profiles.answer.model"]),
    ("quota", {"status": 429}, 1, ["quota", "insufficient_quota", "add credit"]),
    ("rate_limit", {"status": 429}, 3, ["429", "after 2 retries", "try again"]),
    ("server", {"status": 503}, 4, ["HTTP 503", "after 3 retries", "try again"]),
    ("rejected", {"status": 400, "detail": "Unsupported parameter: 'x'"}, 1,
     ["400", "Unsupported parameter: 'x'"]),
    ("timeout", {}, 1, ["300000 ms", "request.timeout_ms"]),
    ("connect", {}, 1, ["https://api.openai.com/v1", "openai.base_url", "HTTPS_PROXY"]),
    ("dropped", {}, 2, ["https://api.openai.com/v1", "dropped after 1 retry", "try again"]),
    ("forbidden", {"status": 403, "detail": "Country, region, or territory not supported"}, 1,
     ["403", "Country, region", "region"]),
    ("tls", {"detail": "CERTIFICATE_VERIFY_FAILED"}, 1,
     ["https://api.openai.com/v1", "certificate", "SSL_CERT_FILE"]),
    ("malformed", {"detail": "Expecting value"}, 1,
     ["https://api.openai.com/v1", "Expecting value", "openai.base_url"]),
    ("failed", {"detail": "server_error: boom"}, 1, ["boom"]),
    ("unexpected", {"detail": "weird"}, 1, ["weird"]),
]  # fmt: skip


@pytest.mark.parametrize(("kind", "facts", "tries", "expected"), FAILURES)
def test_failure_message_is_one_line_naming_what_to_do(tmp_path, kind, facts, tries, expected):
    failure = m.Failure(kind, False, **facts)
    text = m.failure_message(
        failure, tool="answer", model="gpt-5.2", config=make_config(tmp_path), tries=tries
    )
    assert "\n" not in text
    for part in expected:
        assert part in text


def test_failure_message_names_the_configured_key_variable(tmp_path):
    config = make_config(tmp_path, "openai:\n  api_key_env: TEAM_OPENAI_KEY\n")
    text = m.failure_message(
        m.Failure("auth", False, status=401), tool="answer", model="m", config=config, tries=1
    )
    assert "TEAM_OPENAI_KEY" in text


def test_failure_message_names_the_tools_own_profile(tmp_path):
    text = m.failure_message(
        m.Failure("model", False, status=404),
        tool="answer_quick",
        model="gpt-x",
        config=make_config(tmp_path),
        tries=1,
    )
    assert "model_profiles.answer_quick.model" in text


def test_failure_message_names_the_configured_timeout(tmp_path):
    config = make_config(tmp_path, "request: {timeout_ms: 1000}\n")
    text = m.failure_message(
        m.Failure("timeout", False), tool="answer", model="m", config=config, tries=1
    )
    assert "1000 ms" in text


def test_failure_message_mentions_no_retries_when_there_were_none(tmp_path):
    text = m.failure_message(
        m.Failure("rate_limit", True, status=429),
        tool="answer",
        model="m",
        config=make_config(tmp_path),
        tries=1,
    )
    assert "retries" not in text


def test_failure_message_folds_a_multiline_upstream_detail_into_one_line(tmp_path):
    failure = m.Failure("rejected", False, status=400, detail="first line\nsecond\r\nthird")
    text = m.failure_message(
        failure, tool="answer", model="m", config=make_config(tmp_path), tries=1
    )
    assert "\n" not in text
    assert "\r" not in text
    assert "first line second third" in text
