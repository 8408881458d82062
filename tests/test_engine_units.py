"""The answer engine's pure parts: citations, the Sources section, the request body, retries.

Responses are plain dicts in the shape ``Response.to_dict()`` gives (see the SDK's
``openai/types/responses``); nothing here touches the network.
"""

from __future__ import annotations

import email.utils
import json
import re
import statistics
import time

import httpx2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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
    return m.load_config(
        cli, {"XDG_CONFIG_HOME": str(tmp_path / "xdg"), "XDG_STATE_HOME": str(tmp_path), **env}
    )


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


UNSAFE_URLS = ["javascript:alert(1)", "data:text/html,<b>x</b>", "file:///etc/passwd",
               "JAVASCRIPT://%0aalert(1)", "ftp://files.example/x", "https:///no-host"]  # fmt: skip


@pytest.mark.parametrize("url", UNSAFE_URLS)
def test_url_citations_that_are_not_http_or_https_are_dropped(url):
    resp = response(message("x", cite(url, "evil"), cite("https://a.example/", "A")))
    assert urls(m.collect_citations(resp, 5, TODAY)) == ["https://a.example/"]


@pytest.mark.parametrize("url", UNSAFE_URLS)
def test_search_sources_that_are_not_http_or_https_are_dropped(url):
    resp = response(web_search(url_source(url), url_source("HTTPS://b.example/"), WEATHER_API))
    assert urls(m.collect_citations(resp, 5, TODAY)) == ["HTTPS://b.example/", "oai-weather"]


def test_a_dropped_url_never_reaches_the_sources_section():
    resp = response(web_search(url_source("javascript:alert(1)")), message("x"))
    shaped = m.shape_answer(resp, 3, TODAY)
    assert shaped["citations"] == []
    assert "javascript" not in shaped["answer"]
    assert shaped["used_search"] is True


# -- OpenAI's tracking parameter ---------------------------------------------------------------

TRACKED = "utm_source=openai"


@pytest.mark.parametrize(
    ("url", "clean"),
    [
        ("https://a.example/x?utm_source=openai", "https://a.example/x"),
        ("https://a.example/x?utm_source=openai#part", "https://a.example/x#part"),
        ("https://a.example/x?a=1&utm_source=openai&b=2#f", "https://a.example/x?a=1&b=2#f"),
        ("https://a.example/x?utm_source=openai&b=%20", "https://a.example/x?b=%20"),
        ("https://a.example/?q=1&utm_source=openai", "https://a.example/?q=1"),
        ("https://a.example/?utm_source=openai&utm_source=openai", "https://a.example/"),
        # Other sources, other values and look-alike keys are the page's own: kept.
        ("https://a.example/?utm_source=twitter", "https://a.example/?utm_source=twitter"),
        ("https://a.example/?utm_source=openai.com", "https://a.example/?utm_source=openai.com"),
        ("https://a.example/?xutm_source=openai", "https://a.example/?xutm_source=openai"),
        ("https://a.example/utm_source=openai", "https://a.example/utm_source=openai"),
        # A query is split at `&` only: these hold one other parameter each, not this one.
        (
            "https://a.example/page?utm_source=openai;id=42",
            "https://a.example/page?utm_source=openai;id=42",
        ),
        ("https://a.example/?utm_source=openai/", "https://a.example/?utm_source=openai/"),
        (
            "https://a.example/?id=1&utm_source=openai;x",
            "https://a.example/?id=1&utm_source=openai;x",
        ),
        ("https://a.example/?&utm_source=openai", "https://a.example/"),
    ],
)
def test_the_tracking_parameter_is_dropped_and_everything_else_kept(url, clean):
    assert m.without_tracking(url) == clean


def test_the_tracking_parameter_is_dropped_from_urls_in_text_and_nothing_else():
    text = (
        "See [the docs](https://a.example/p?utm_source=openai) and "
        "(https://b.example/?id=7&utm_source=openai). The tag utm_source=openai alone stays."
    )
    assert m.without_tracking(text) == (
        "See [the docs](https://a.example/p) and (https://b.example/?id=7). "
        "The tag utm_source=openai alone stays."
    )


# Other parameters, `utm_source` with other values among them: `openai;id=42` and `openai/`
# are not the tracking parameter (a query splits at `&`). In text a URL's last `;` or `.` is
# the sentence's, so `utm_source=openai;` there is left out as ambiguous.
params = st.lists(
    st.tuples(
        st.one_of(st.just("utm_source"), st.text("abcdefghijklmnopqrstuvwxyz_", min_size=1)),
        st.one_of(
            st.text("abcXYZ0123456789-._~%+;/", max_size=10),
            st.text(";/=a1", min_size=1, max_size=4).map(lambda tail: f"openai{tail}"),
        ),
    ),
    max_size=4,
).filter(lambda pairs: all(f"{k}={v}".rstrip(".,;:!?*_") != TRACKED for k, v in pairs))


@settings(max_examples=300, deadline=None)
@given(
    host=st.sampled_from(["a.example", "docs.python.org", "例え.jp", "[::1]:8080"]),
    path=st.text("abc/-._~%0123456789", max_size=20),
    pairs=params,
    spots=st.lists(st.integers(0, 4), max_size=3),
    fragment=st.one_of(st.none(), st.text("abc-_0123456789", max_size=8)),
    punctuation=st.sampled_from(["", ".", ")", ",", " (2026-01-14)"]),
)
def test_any_url_loses_only_the_tracking_parameter(host, path, pairs, spots, fragment, punctuation):
    def build(items):
        query = "&".join(items)
        return (
            f"https://{host}/{path}"
            + (f"?{query}" if query else "")
            + ("" if fragment is None else f"#{fragment}")
        )

    own = [f"{k}={v}" for k, v in pairs]
    tracked = list(own)
    for spot in sorted(spots, reverse=True):
        tracked.insert(min(spot, len(tracked)), TRACKED)
    clean = build(own)
    assert m.without_tracking(build(tracked)) == clean
    assert m.without_tracking(clean) == clean
    if "[" not in host:  # a URL in text ends at "]" (Markdown), so an IPv6 host is cut there
        assert m.without_tracking(f"- {build(tracked)}{punctuation}") == f"- {clean}{punctuation}"


def test_the_tracking_parameter_in_text_is_removed_only_as_a_whole_query_parameter():
    text = (
        "A https://a.example/page?utm_source=openai;id=42 B https://b.example/?utm_source=openai/ "
        "C https://c.example/x?utm_source=openai; D (https://d.example/?utm_source=openai)."
    )
    assert m.without_tracking(text) == (
        "A https://a.example/page?utm_source=openai;id=42 B https://b.example/?utm_source=openai/ "
        "C https://c.example/x; D (https://d.example/)."
    )


def test_the_tracking_parameter_is_left_in_code():
    span = "`curl https://a.example/?utm_source=openai`"
    block = "```sh\ncurl 'https://a.example/?utm_source=openai'\n```"
    tildes = "~~~\nhttps://a.example/?utm_source=openai\n~~~"
    text = f"See https://a.example/?utm_source=openai and {span}.\n\n{block}\n\n{tildes}\n"
    assert m.without_tracking(text) == text.replace("/?utm_source=openai and", "/ and", 1)
    # a lone backtick opens no span: the URL after it is text
    assert m.without_tracking("a ` b https://a.example/?utm_source=openai") == (
        "a ` b https://a.example/"
    )
    # nor does a span reach over a paragraph break
    assert m.without_tracking("`a\n\nhttps://a.example/?utm_source=openai `") == (
        "`a\n\nhttps://a.example/ `"
    )


@pytest.mark.parametrize(
    ("written", "shown"),
    [
        ("[click](javascript:alert(1))", "click"),
        ("![chart](data:image/svg+xml;base64,PHN2Zz4=)", "chart"),
        ("[x](JAVASCRIPT:alert(1) 'title')", "x"),
        ("[x](<javascript:alert(1)>)", "x"),
        ("[x](javascript&#58;alert(1))", "x"),  # an entity a renderer decodes
        ("[x](javascript\\:alert(1))", "x"),  # a Markdown escape it removes
        ("[see [1]](file:///etc/passwd)", "see [1]"),
        ("<javascript:alert(1)>", "javascript:alert(1)"),
        ("[x](mailto:a@b.example)", "x"),
        ("[x][1]\n\n[1]: javascript:alert(1)", "[x][1]\n\n"),
        # http(s) and relative links are links
        ("[docs](https://docs.python.org/3/)", "[docs](https://docs.python.org/3/)"),
        ("[part 2](#part-2)", "[part 2](#part-2)"),
        ("<https://a.example/>", "<https://a.example/>"),
        # code shows what it shows
        ("`[x](javascript:alert(1))`", "`[x](javascript:alert(1))`"),
        ("```js\n[x](javascript:void(0))\n```", "```js\n[x](javascript:void(0))\n```"),
        ("[x](`javascript:alert(1)`)", "[x](`javascript:alert(1)`)"),  # the span wins: no link
        ("[`run`](javascript:x()) and `[y](data:z)`", "`run` and `[y](data:z)`"),
    ],
)
def test_links_that_are_not_http_keep_their_text_and_lose_their_target(written, shown):
    assert m.defused_links(written) == shown


@pytest.mark.parametrize(
    "text",
    [
        "     ```\n[x](javascript:alert(1))\n     ```",  # indented: no fence, and no span
        "text\n\n    ```\n[x](javascript:alert(1))",
        "a ` b [x](javascript:alert(1))",  # a lone backtick opens no span
        "\\`[x](javascript:alert(1))`",  # nor does an escaped one
        "[click\nhere](javascript:alert(1))",  # a link's text may run over lines
        "[`code`](javascript:alert(1))",  # and hold a code span
        "`a` [x](javascript:alert(1)) `b`",
    ],
)
def test_what_a_renderer_shows_as_text_is_never_taken_for_code(text):
    assert "javascript" not in m.defused_links(text)


@pytest.mark.parametrize("name", ["javascript:alert(1)", "data:text/html,x", "oai weather\n- x",
                                  "https://a.example/", "", "x" * 65])  # fmt: skip
def test_a_search_source_name_that_is_not_an_id_is_dropped(name):
    resp = response(web_search({"type": "api", "name": name}, WEATHER_API), message("x"))
    shaped = m.shape_answer(resp, 3, TODAY)
    assert urls(shaped["citations"]) == ["oai-weather"]
    assert (name or "\x00") not in shaped["answer"]


def test_the_answer_text_keeps_the_text_of_a_javascript_link():
    resp = response(message("Run [this](javascript:alert(document.cookie)) now."))
    assert m.shape_answer(resp, 3, TODAY)["answer"] == "Run this now."


def test_citations_that_differ_only_by_the_tracking_parameter_are_one_source():
    resp = response(
        message(
            "text",
            cite("https://a.example/p?utm_source=openai", "A"),
            cite("https://a.example/p", "A again"),
            cite("https://b.example/?x=1&utm_source=openai", "B"),
        )
    )
    citations = m.collect_citations(resp, 10, TODAY)
    assert urls(citations) == ["https://a.example/p", "https://b.example/?x=1"]
    assert citations[0]["title"] == "A"


def test_search_sources_lose_the_tracking_parameter_and_their_duplicates():
    resp = response(
        web_search(url_source("https://c.example/?utm_source=openai")),
        web_search(url_source("https://c.example/"), url_source("https://d.example/#top")),
        message("text"),
    )
    assert urls(m.collect_citations(resp, 10, TODAY)) == [
        "https://c.example/",
        "https://d.example/#top",
    ]


def test_the_models_inline_sources_line_is_not_doubled_by_the_tracking_parameter():
    # The model wrote its own Sources line without the parameter; the citation carries it.
    text = "Python 3.14 is out.\n\nSources: https://www.python.org/downloads/ (2025-10-07)"
    resp = response(
        message(text, cite("https://www.python.org/downloads/?utm_source=openai", "Python"))
    )
    shaped = m.shape_answer(resp, 3, TODAY)
    assert shaped["answer"] == text
    assert shaped["citations"][0]["url"] == "https://www.python.org/downloads/"


def test_the_answer_text_loses_the_tracking_parameter_everywhere():
    text = (
        "Released ([python.org](https://www.python.org/downloads/?utm_source=openai)).\n\n"
        "Sources:\n- https://www.python.org/downloads/?utm_source=openai (2025-10-07)"
    )
    resp = response(
        message(text, cite("https://www.python.org/downloads/?utm_source=openai", "Python"))
    )
    shaped = m.shape_answer(resp, 3, TODAY)
    assert TRACKED not in shaped["answer"]
    assert shaped["answer"].count("https://www.python.org/downloads/") == 2
    assert shaped["answer"].endswith("Sources:\n- https://www.python.org/downloads/ (2025-10-07)")


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


@pytest.mark.parametrize("reported", ["", None])
def test_model_falls_back_to_the_profiles_model_when_the_api_reports_none(reported):
    shaped = m.shape_answer(response(message("x"), model=reported), 3, TODAY, model="gpt-5.2")
    assert shaped["model"] == "gpt-5.2"


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


# -- Sources sections the model wrote: Japanese answers, other headers, inline lines -------------

JMA = "https://www.jma.go.jp/bosai/forecast/#area_type=offices&area_code=130000"
TENKI = "https://tenki.jp/forecast/3/16/4410/13101/"
WEATHER_CITATIONS = [
    {"url": JMA, "title": "気象庁", "published_at": "2026-01-13"},
    {"url": "oai-weather", "title": "api", "published_at": TODAY},
]


def ensure(text: str, citations=WEATHER_CITATIONS, headers: tuple = ()) -> str:
    return m.ensure_sources_section(text, citations, TODAY, headers)


def test_japanese_section_under_出典_is_dated_and_completed_without_a_second_header():
    text = f"2026-01-14（JST）の東京都は晴れ、最高気温は10℃の見込みです。\n\n出典:\n- {JMA}"
    assert ensure(text) == (
        f"2026-01-14（JST）の東京都は晴れ、最高気温は10℃の見込みです。\n\n"
        f"出典:\n- {JMA} (2026-01-13)\n- oai-weather ({TODAY})"
    )


def test_full_width_colon_header_and_a_japanese_date_become_one_iso_date():
    text = f"東京は晴れです。\n\n出典：\n- 気象庁 {JMA}（2026年1月13日）\n- oai-weather"
    assert ensure(text) == (
        f"東京は晴れです。\n\n出典：\n- 気象庁 {JMA}（2026-01-13）\n- oai-weather ({TODAY})"
    )


def test_bold_参考文献_with_markdown_links_keeps_its_header():
    text = (
        "## 概要\nPython 3.14 は 2025-10-07 にリリースされました。\n\n**参考文献**\n"
        "1. [What's New In Python 3.14](https://docs.python.org/3/whatsnew/3.14.html)\n"
    )
    citations = [
        {"url": "https://docs.python.org/3/whatsnew/3.14.html", "title": "docs",
         "published_at": "2025-10-07"},
        {"url": "https://peps.python.org/pep-0745/", "title": "PEP 745", "published_at": TODAY},
    ]  # fmt: skip
    answer = ensure(text, citations)
    assert answer.splitlines()[3:] == [
        "**参考文献**",
        "1. [What's New In Python 3.14](https://docs.python.org/3/whatsnew/3.14.html) (2025-10-07)",
        f"- https://peps.python.org/pep-0745/ ({TODAY})",
    ]


def test_prose_after_the_section_gets_no_date_and_stays_after_it():
    text = (
        f"東京は晴れです。\n\n参考:\n- {JMA} (2026-01-13)\n\n"
        "※ 予報は変わることがあります。最新の情報を確認してください。"
    )
    assert ensure(text) == (
        f"東京は晴れです。\n\n参考:\n- {JMA} (2026-01-13)\n- oai-weather ({TODAY})\n\n"
        "※ 予報は変わることがあります。最新の情報を確認してください。"
    )


def test_a_heading_after_the_section_ends_it():
    text = f"晴れ。\n\n### 出典\n- {JMA}\n### 補足\n明日は雨です"
    assert ensure(text) == (
        f"晴れ。\n\n### 出典\n- {JMA} (2026-01-13)\n- oai-weather ({TODAY})\n### 補足\n明日は雨です"
    )


def test_inline_sources_line_is_dated_and_completed_on_its_line():
    text = f"東京は晴れです。\nSources: {JMA}"
    assert ensure(text) == (f"東京は晴れです。\nSources: {JMA} (2026-01-13), oai-weather ({TODAY})")


def test_inline_sources_line_with_its_dates_is_left_as_written():
    text = f"東京は晴れです。\n出典: {JMA} (2026-01-13)、oai-weather ({TODAY})"
    assert ensure(text) == text


def test_a_参考_note_in_the_middle_of_an_answer_is_not_a_sources_section():
    text = "設定は config.yaml に書きます。\n参考: 詳しくは README を読んでください。\n以上です。"
    answer = ensure(text)
    assert answer.startswith(text + "\n\nSources:\n")
    assert "詳しくは README を読んでください。\n" in answer  # the note got no date


def test_a_blank_line_after_the_header_and_bracketed_numbers_still_make_a_section():
    text = f"晴れ。\n\n出典:\n\n[1] {JMA}\n\n詳しくは https://www.data.jma.go.jp/ を参照。"
    assert ensure(text) == (
        f"晴れ。\n\n出典:\n\n[1] {JMA} (2026-01-13)\n- oai-weather ({TODAY})\n\n"
        "詳しくは https://www.data.jma.go.jp/ を参照。"
    )


def test_a_header_inside_a_code_block_is_not_a_sources_section():
    text = "例:\n```python\n# Sources\nprint('x')\n```"
    answer = ensure(text)
    assert answer.startswith(text + "\n\nSources:\n")


def test_a_date_inside_a_url_does_not_count_as_the_sources_date():
    url = "https://example.com/news/2025-12-01/release"
    citations = [{"url": url, "title": "news", "published_at": "2026-01-02"}]
    assert ensure(f"Body.\n\nSources:\n- {url}", citations).endswith(f"- {url} (2026-01-02)")


def test_a_url_that_merely_starts_with_a_citation_does_not_list_it():
    citations = [{"url": "https://a.example/", "title": "a", "published_at": TODAY}]
    answer = ensure("Body.\n\nSources:\n- https://a.example/page (2026-01-01)", citations)
    assert answer.endswith(f"- https://a.example/page (2026-01-01)\n- https://a.example/ ({TODAY})")


def test_a_header_the_policy_names_is_completed_rather_than_doubled():
    policy = "最後に「参考資料:」の見出しで情報源を挙げる。\n<!-- sources-header: 参考資料: -->"
    headers = m.sources_headers(policy)
    assert headers == ("参考資料",)
    assert m.sources_headers("<!-- Sources-Header: Further reading -->") == ("further reading",)
    text = f"晴れ。\n\n**Further reading:**\n- {JMA}"
    answer = ensure(text, headers=m.sources_headers("<!-- sources-header: Further reading -->"))
    assert "Sources" not in answer
    assert answer.endswith(f"- {JMA} (2026-01-13)\n- oai-weather ({TODAY})")


@pytest.mark.parametrize(
    "header",
    ["Sources (accessed 2026-01-14):", "**Sources (as of 2026-01-14)**", "出典（2026-01-14 時点）:",
     "## References (web)", "参考リンク", "### 参考URL", "情報源：", "**引用元**"],
)  # fmt: skip
def test_a_header_with_an_aside_or_another_common_name_is_completed_not_doubled(header):
    answer = ensure(f"晴れ。\n\n{header}\n- {JMA}")
    assert answer == f"晴れ。\n\n{header}\n- {JMA} (2026-01-13)\n- oai-weather ({TODAY})"


def test_inline_sources_numbered_in_brackets_get_a_date_each():
    text = f"晴れ。\nSources: [1] {JMA} [2] oai-weather"
    assert ensure(text) == f"晴れ。\nSources: [1] {JMA} (2026-01-13) [2] oai-weather ({TODAY})"


@pytest.mark.parametrize(
    "text",
    ["Sources (see below) vary.\nMore.", "参考になれば幸いです。",
     "情報源によって異なります。\n以上"],
)  # fmt: skip
def test_a_header_word_starting_prose_is_not_a_sources_section(text):
    assert ensure(text).startswith(text + "\n\nSources:\n")


def test_an_empty_section_without_citations_still_carries_a_dated_line():
    answer = ensure("Nothing found.\n\n出典:", [])
    assert answer.count("出典") == 1 and "Sources" not in answer
    assert re.search(r"\(accessed \d{4}-\d{2}-\d{2}\)$", answer)


def test_policy_headers_reach_the_answer_through_shape_answer():
    text = f"晴れ。\n\nFurther reading\n- {JMA}"
    resp = response(message(text, cite(JMA)))
    shaped = m.shape_answer(resp, 3, TODAY, headers=("further reading",))
    assert "Sources" not in shaped["answer"]


# -- Property: any answer plus citations gives one section listing every citation once, dated --

HEADER_WORDS = ("source", "reference", "出典", "参考", "情報源", "引用元")
POOL = [
    "https://www.jma.go.jp/bosai/forecast/",
    "https://tenki.jp/forecast/3/16/4410/13101/?utm_source=openai",
    "https://en.wikipedia.org/wiki/Tokyo_(disambiguation)",
    "https://example.com/news/2025-12-01/release",
    "https://docs.python.org/3/whatsnew/3.14.html",
    "oai-weather",
]
EXTRA = "https://unrelated.example.org/page"
SENTENCES = [
    "東京都の天気は晴れ、最高気温は10℃の見込みです。",
    "Python 3.14 was released on 2025-10-07.",
    "結論: 互換性は保たれています。",
    "Note: the forecast may change.",
    "詳しくは公式ドキュメントを参照してください。",
    "The API returns 404 when the model is unknown.",
]
HEADERS = ["Sources:", "sources:", "出典:", "出典：", "参考:", "参考文献", "**Sources**",
           "**Sources:**", "**出典**：", "## Sources", "### 出典", "References:",
           "Sources (web):", "**Sources (as of 2026-01-14)**", "出典（公式）:", "参考リンク:",
           "### 参考URL", "情報源：", "**引用元**"]  # fmt: skip
ENTRY_FORMS = ["- {url}", "- {url} ({date})", "- [{title}]({url})", "* {title}: {url}（{jp}）",
               "1. {url} - {date}", "・{url}", "{url}", "- {title}\n  {url}",
               "[1] {url}"]  # fmt: skip
INLINE_FORMS = ["{url}", "{url} ({date})", "[{title}]({url})", "{url}（{jp}）"]

prose = st.one_of(
    st.sampled_from(SENTENCES),
    st.text(
        st.characters(codec="utf-8", exclude_categories=["Cs", "Cc"], exclude_characters="`~"),
        max_size=60,
    ).filter(lambda t: not any(w in t.lower() for w in HEADER_WORDS) and "http" not in t),
)
block = st.one_of(
    prose,
    st.lists(prose.map(lambda t: "- " + t), min_size=1, max_size=3).map("\n".join),
    st.just("```python\n# Sources of truth\nprint('出典:')\n```"),
    st.just("## 詳細"),
)
dates = st.dates(min_value=__import__("datetime").date(2020, 1, 1)).map(lambda d: d.isoformat())


@st.composite
def citation_lists(draw):
    chosen = draw(st.lists(st.sampled_from(POOL), unique=True, max_size=4))
    return [{"url": u, "title": "t", "published_at": draw(dates)} for u in chosen]


@st.composite
def model_sections(draw, citations):
    """A sources section as a model might write it: some citations, an extra source, forms."""
    listed = draw(st.lists(st.sampled_from([c["url"] for c in citations] + [EXTRA]), unique=True))
    header = draw(st.sampled_from(HEADERS))

    inline = bool(listed) and header.endswith((":", "：")) and draw(st.booleans())

    def entry(url):
        date = draw(dates)
        jp = f"{int(date[:4])}年{int(date[5:7])}月{int(date[8:])}日"
        form = draw(st.sampled_from(INLINE_FORMS if inline else ENTRY_FORMS))
        return form.format(url=url, date=date, jp=jp, title="題")

    entries = [entry(url) for url in listed]
    if inline:
        return f"{header} " + draw(st.sampled_from([", ", "、"])).join(entries)
    blank = [""] if draw(st.booleans()) else []  # some models leave a line after the header
    return "\n".join([header, *blank, *entries])


@st.composite
def answers(draw):
    citations = draw(citation_lists())
    parts = draw(st.lists(block, max_size=4))
    trailing = None
    if draw(st.booleans()):
        parts.append(draw(model_sections(citations)))
        if draw(st.booleans()):
            trailing = draw(st.sampled_from(SENTENCES[:2] + SENTENCES[3:]))
            parts.append(trailing)
    return "\n\n".join(parts), citations, trailing


def header_lines(answer: str) -> list[int]:
    """Lines outside code blocks that start with a sources header word."""
    found, fenced = [], False
    for index, line in enumerate(answer.split("\n")):
        if line.startswith("```"):
            fenced = not fenced
        bare = line.lstrip("#*_ ").lower()
        if not fenced and bare.startswith(HEADER_WORDS):
            found.append(index)
    return found


def dates_outside_urls(text: str) -> list[str]:
    return re.findall(r"(?<!\d)\d{4}-\d{2}-\d{2}(?!\d)", re.sub(r"https?://[^\s（]+", " ", text))


@settings(max_examples=300, deadline=None)
@given(answers())
def test_any_answer_gets_one_sources_section_listing_every_citation_with_one_date(case):
    text, citations, trailing = case
    answer = m.ensure_sources_section(text, citations, TODAY)
    headers = header_lines(answer)
    assert len(headers) == 1, answer
    section = "\n".join(answer.split("\n")[headers[0] :])
    items = re.split(r"\n|[,、]\s*(?=https?://|\[|oai-)", section)
    for citation in citations:
        url = citation["url"]
        naming = [i for i in items if re.search(rf"{re.escape(url)}(?![\w/?=.-])", i)]
        assert len(naming) == 1, (url, answer)
        item = naming[0]
        if item.lstrip("*-・1. ") == "題":  # the title line of a two-line entry
            item = items[items.index(item) + 1]
        assert len(dates_outside_urls(item)) == 1, (item, answer)
    if trailing is not None:
        assert answer.endswith("\n\n" + trailing)
    assert m.ensure_sources_section(answer, citations, TODAY) == answer


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300), citation_lists())
def test_any_text_ends_up_with_every_citation_dated(text, citations):
    answer = m.ensure_sources_section(text, citations, TODAY)
    assert answer.startswith(text.rstrip())
    for citation in citations:
        lines = [line for line in answer.split("\n") if citation["url"] in line]
        assert lines and all(dates_outside_urls(line) for line in lines), answer


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
            "cache_write_tokens": 0,
            "cache_write_12h_tokens": 0,
            "output_tokens": 300,
            "reasoning_tokens": 192,
            "total_tokens": 1800,
        },
        "web_searches": 2,
        "elapsed_ms": 1250,
        "attempts": 2,
    }


def test_only_search_actions_count_as_billed_searches():
    opened = {**web_search(), "action": {"type": "open_page", "url": "https://a.example/"}}
    found = {**web_search(), "action": {"type": "find_in_page", "url": "https://a.example/"}}
    bare = {"type": "web_search_call", "id": "ws_1", "status": "completed"}  # no action given
    meta = m.usage_meta(response(web_search(), opened, found, bare, message("x")), 1.0, 1)
    assert meta["web_searches"] == 2  # the search, and the call of unknown action (errs high)


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
# fit_answer: results every client shows whole
# ============================================================================================

SOURCES_TAIL = "Sources:\n- https://a.example/ (2026-01-01)\n- https://b.example/ (2026-01-02)"
LOREM = "Lorem ipsum dolor sit amet, consectetur adipiscing elit. " * 30


def report(sections: int, paragraph: str = LOREM, tail: str = SOURCES_TAIL) -> dict:
    body = "\n\n".join(f"## Part {i}\n\n{paragraph}" for i in range(sections))
    return {
        "answer": f"The short answer first.\n\n{body}\n\n{tail}",
        "used_search": True,
        "citations": [{"url": "https://a.example/", "title": None, "published_at": "2026-01-01"}],
        "model": "gpt-5.2",
        "response_id": "resp_abc",
    }


REST = {"tool": "answer_detailed", "response_id": "resp_abc"}


def test_an_answer_that_fits_is_returned_untouched():
    answer = report(3)
    assert m.fit_answer(answer, 50_000, REST) == (answer, {})


def test_a_long_answer_keeps_its_start_and_sources_and_says_how_to_get_the_rest():
    answer = report(60)
    fitted, shortened = m.fit_answer(answer, 12_000, REST)
    text = fitted["answer"]
    assert m.result_size(fitted) <= 12_000
    assert json.loads(json.dumps(fitted, ensure_ascii=False)) == fitted
    assert text.startswith("The short answer first.\n\n## Part 0\n\n")
    assert text.endswith(SOURCES_TAIL)
    before_note = text[: text.index("[Shortened")].rstrip()
    assert before_note.endswith(LOREM.strip())  # whole sections only: cut before a heading
    next_part = before_note.count("## Part ")
    assert f"from the section 'Part {next_part}'" in text
    assert 'call answer_detailed with previous_response_id "resp_abc"' in text
    assert {k: v for k, v in fitted.items() if k != "answer"} == {
        k: v for k, v in answer.items() if k != "answer"
    }
    assert shortened == {"chars": len(answer["answer"]), "shown_chars": len(text), "limit": 12_000}


def test_without_headings_the_cut_is_at_a_paragraph_and_without_an_id_it_says_ask_again():
    answer = report(1, paragraph="\n\n".join([LOREM] * 40))
    fitted, _ = m.fit_answer(answer, 12_000, {"tool": "answer", "response_id": None})
    text = fitted["answer"]
    assert m.result_size(fitted) <= 12_000
    assert text[: text.index("\n\n[Shortened")].endswith(LOREM.strip())
    assert "ask again with a narrower question" in text and text.endswith(SOURCES_TAIL)


def test_an_answer_without_sources_is_not_said_to_keep_them():
    answer = report(60, tail="")
    fitted, _ = m.fit_answer(answer, 12_000, REST)
    assert "[Shortened by the server" in fitted["answer"]
    assert "sources section" not in fitted["answer"]
    assert fitted["answer"].endswith('".]')  # the note ends the answer: nothing follows it


def test_dense_japanese_text_counts_three_bytes_a_character():
    paragraph = "東京の天気は晴れです。" * 100  # 1,100 characters, 3,300 bytes
    answer = report(30, paragraph=paragraph, tail="出典:\n- https://a.example/ (2026-01-01)")
    assert len(json.dumps(answer, ensure_ascii=False)) < 50_000 < m.result_size(answer)
    fitted, shortened = m.fit_answer(answer, 50_000, REST)
    assert shortened and m.result_size(fitted) <= 50_000
    assert fitted["answer"].endswith("出典:\n- https://a.example/ (2026-01-01)")


def test_a_sources_section_too_long_for_half_the_room_keeps_its_first_entries():
    many = "Sources:\n" + "\n".join(f"- https://s{i}.example/page (2026-01-01)" for i in range(900))
    fitted, _ = m.fit_answer(report(20, tail=many), 12_000, REST)
    text = fitted["answer"]
    assert m.result_size(fitted) <= 12_000
    assert "- https://s0.example/page (2026-01-01)" in text
    assert "more lines of sources left out" in text


def test_one_paragraph_longer_than_the_room_is_cut_at_a_line_or_a_character():
    fitted, _ = m.fit_answer(report(1, paragraph="x" * 40_000), 12_000, REST)
    assert m.result_size(fitted) <= 12_000
    assert fitted["answer"].startswith("The short answer first.")


def test_a_cut_inside_a_code_block_closes_it_before_the_note():
    code = "```json\n" + "\n".join(f'  "key{i}": "value {i}",' for i in range(3000)) + "\n```"
    fitted, _ = m.fit_answer(report(1, paragraph=code), 12_000, REST)
    text = fitted["answer"]
    assert m.result_size(fitted) <= 12_000
    kept = text[: text.index("\n\n[Shortened")]
    assert kept.count("```") == 2 and kept.endswith("\n```")  # the note is not read as code
    assert text.endswith(SOURCES_TAIL)


def kept_body(text: str) -> str:
    """What a shortened answer kept of its body: everything before the server's note."""
    return text[: text.index("\n\n[Shortened")]


def left_out(text: str) -> tuple[int, int]:
    """(characters left out, of how many), as the server's note says."""
    found = re.search(r"([\d,]+) of ([\d,]+) characters left out", text)
    return int(found[1].replace(",", "")), int(found[2].replace(",", ""))


def test_prose_after_the_sources_section_is_body_counted_as_left_out_not_sources():
    after = "\n\n".join(f"## Afterword {i}\n\n{LOREM}" for i in range(40))  # ~70,000 chars
    answer = {**report(0), "answer": f"The short answer first.\n\n{SOURCES_TAIL}\n\n{after}"}
    fitted, _ = m.fit_answer(answer, 12_000, REST)
    text = fitted["answer"]
    assert m.result_size(fitted) <= 12_000 and text.endswith(SOURCES_TAIL)
    assert "more lines of sources" not in text  # the prose is not taken for sources
    gone, total = left_out(text)
    assert total == len("The short answer first.\n\n") + len(after.rstrip())
    assert gone == total - len(kept_body(text))  # the cut as it is, not a seventh of it
    assert kept_body(text).startswith("The short answer first.\n\n## Afterword 0\n\n")


@pytest.mark.parametrize("fence", ["````", "~~~", "~~~~~", "```"])
def test_a_cut_inside_a_code_block_closes_it_with_its_own_fence(fence):
    inner = "```python\nprint(1)\n```\n" if fence != "```" else ""  # a shorter fence is code
    lines = "\n".join(f'  "key{i}": "value {i}",' for i in range(3000))
    code = f"{fence}markdown\n{inner}{lines}\n{fence}"
    fitted, _ = m.fit_answer(report(1, paragraph=code), 12_000, REST)
    text = fitted["answer"]
    assert m.result_size(fitted) <= 12_000 and text.endswith(SOURCES_TAIL)
    kept = kept_body(text)
    assert kept.endswith(f"\n{fence}")
    assert m._fences(kept.split("\n"))[1] is None  # the note after it is not read as code


def test_a_tilde_fence_is_not_closed_by_backticks_nor_a_longer_fence_by_a_shorter_one():
    assert m._fences(["~~~", "```", "x"])[1] == "~~~"
    assert m._fences(["````", "```", "x"])[1] == "````"
    assert m._fences(["````", "`````"])[1] is None
    assert m._fences(["```", "~~~"])[1] == "```"
    assert m._fences(["``` not a fence ` info"])[1] is None  # backticks in its info string


def test_a_sources_section_on_one_long_line_is_cut_and_the_body_keeps_its_room():
    inline = "Sources: " + ", ".join(f"https://s{i}.example/page (2026-01-01)" for i in range(2500))
    fitted, _ = m.fit_answer(report(20, tail=inline), 12_000, REST)
    text = fitted["answer"]
    assert m.result_size(fitted) <= 12_000
    assert text.startswith("The short answer first.\n\n## Part 0\n\n" + LOREM.strip())
    assert "Sources: https://s0.example/page (2026-01-01)" in text
    assert text.endswith(m._CUT_SOURCES)


def test_one_long_source_line_after_its_header_is_dropped_and_counted():
    tail = "Sources:\n- https://a.example/ " + "(a long description) " * 3000
    fitted, _ = m.fit_answer(report(20, tail=tail), 12_000, REST)
    text = fitted["answer"]
    assert m.result_size(fitted) <= 12_000 and "## Part 0" in text
    assert text.endswith("Sources:\n- … 1 more lines of sources left out (see citations)")


# Units a reader sees as one character: a flag, a joined family, a skin tone, a subdivision
# flag (tags), an accented letter (e + combining acute), a Hangul syllable in jamo, a keycap.
ENGLAND = "🏴\U000e0067\U000e0062\U000e0065\U000e006e\U000e0067\U000e007f"
CLUSTERS = ["🇯🇵", "👨\u200d👩\u200d👧", "👍🏽", ENGLAND, "e\u0301", "\u1100\u1161\u11a8",
            "1\ufe0f\u20e3", "a", "日"]  # fmt: skip


@pytest.mark.parametrize("cluster", CLUSTERS[:7])
def test_a_giant_line_is_cut_between_whole_characters(cluster):
    line = cluster * (60_000 // len(cluster.encode()))
    answer = {**report(0), "answer": f"{line}\n\n{SOURCES_TAIL}"}
    fitted, _ = m.fit_answer(answer, 12_000, REST)
    kept = kept_body(fitted["answer"])
    assert m.result_size(fitted) <= 12_000
    assert kept and kept == cluster * (len(kept) // len(cluster))  # whole units only


@pytest.mark.parametrize("line", ["a" + "\u0301" * 100_000, "🇯🇵" * 50_000, "x\u200d" * 60_000])
def test_a_giant_line_of_one_cluster_is_shortened_in_one_pass(line):
    started = time.monotonic()
    fitted, _ = m.fit_answer({**report(0), "answer": line}, 12_000, REST)
    assert m.result_size(fitted) <= 12_000
    assert time.monotonic() - started < 10  # a walk back per cut point took 25-50 s


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(CLUSTERS), min_size=1, max_size=40), st.data())
def test_a_grapheme_safe_offset_is_always_between_whole_units(units, data):
    text = "".join(units)
    bounds = {0, *(len("".join(units[: i + 1])) for i in range(len(units)))}
    offset = data.draw(st.integers(0, len(text)))
    safe = m._grapheme_safe(text, offset)
    assert safe <= offset and safe in bounds
    assert safe == max(b for b in bounds if b <= offset) or units[0] == "🇯🇵"


@pytest.mark.parametrize(
    ("yaml_text", "client", "size"),
    [
        (None, "codex-mcp-client", 12_000),
        (None, "Claude-Code", 50_000),
        (None, "some-editor", 50_000),
        (None, None, 50_000),
        ("server: {result_max_chars: 30000}\n", "claude-code", 30_000),  # the default caps all
        ("server: {result_max_chars: 30000}\n", "codex-mcp-client", 12_000),
        ("server: {result_max_chars_by_client: {codex-mcp-client: 20000}}\n",
         "codex-mcp-client", 20_000),
    ],
)  # fmt: skip
def test_result_size_by_client(tmp_path, yaml_text, client, size):
    assert m.result_chars(make_config(tmp_path, yaml_text), client) == size


def test_result_size_default_from_the_environment(tmp_path):
    config = make_config(tmp_path, MCP_RESULT_MAX_CHARS="8000")
    assert m.result_chars(config, "claude-code") == 8000


@pytest.mark.parametrize(
    "yaml_text",
    [
        "server: {result_max_chars_by_client: {codex: 10}}\n",
        "server: {result_max_chars_by_client: {codex: many}}\n",
        "server: {result_max_chars_by_client: [codex]}\n",
    ],
)
def test_a_bad_result_size_table_is_refused_at_start_up(tmp_path, yaml_text):
    with pytest.raises(m.ConfigError, match=r"result_max_chars_by_client .* must be a mapping"):
        make_config(tmp_path, yaml_text)


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
    models = {
        t: m.build_request(t, {"query": "q"}, config, TODAY)["model"]
        for t in m.enabled_tools(config)
    }
    assert models == {"answer": "gpt-5.2", "answer_detailed": "o3", "answer_quick": "gpt-4.1-mini"}


def test_each_profile_has_a_model_of_its_own(tmp_path):
    config = make_config(tmp_path, "model_profiles:\n  answer: {reasoning_effort: high}\n")
    models = {
        tool: m.build_request(tool, {"query": "q"}, config, TODAY)["model"]
        for tool in m.enabled_tools(config)
    }
    assert models == {
        "answer": "gpt-6.1-terra",
        "answer_detailed": "gpt-6.2-sol",
        "answer_quick": "gpt-6-luna",
    }


def test_answers_model_alone_is_every_tools_model(tmp_path):
    """Seed 001's minimal configuration: the tools the user did not set run on answer's."""
    config = make_config(tmp_path, "model_profiles:\n  answer: {model: gpt-5-mini}\n")
    models = {
        tool: m.build_request(tool, {"query": "q"}, config, TODAY)["model"]
        for tool in m.enabled_tools(config)
    }
    assert set(models.values()) == {"gpt-5-mini"}


def test_request_effort_and_verbosity_come_from_the_profile(tmp_path):
    config = make_config(tmp_path, PROFILES)
    answer = m.build_request("answer", {"query": "q"}, config, TODAY)
    detailed = m.build_request("answer_detailed", {"query": "q"}, config, TODAY)
    assert answer["reasoning"] == {"effort": "low"}
    assert answer["text"] == {"verbosity": "high"}
    assert detailed["reasoning"] == {"effort": "high"}


def test_a_follow_up_request_names_its_previous_response_and_keys_apart(tmp_path):
    config = make_config(tmp_path)
    alone = m.build_request("answer", {"query": "q"}, config, TODAY)
    follow_args = {"query": "q", "previous_response_id": "resp_1"}
    follow = m.build_request("answer", follow_args, config, TODAY)
    assert "previous_response_id" not in alone
    assert follow["previous_response_id"] == "resp_1"
    keys = {
        m.answer_key("answer", args, request, TODAY, 3)
        for args, request in [
            ({"query": "q"}, alone),
            (follow_args, follow),
            ({"query": "q", "previous_response_id": "resp_2"},
             m.build_request("answer", {"query": "q", "previous_response_id": "resp_2"}, config,
                             TODAY)),
        ]
    }  # fmt: skip
    assert len(keys) == 3  # the cache and single-flight never mix a follow-up with another


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
        # Not decided from the name: a model the tables do not know gets both (a refusal is
        # adapted where it comes back).
        ("gpt-6.1-terra", True, True),
        ("gpt-7-nova", True, True),
        ("omni-moderation-latest", True, True),
        ("o", True, True),
    ],
)
def test_model_family_support(model, verbosity, reasoning):
    assert m.supports_verbosity(model) is verbosity
    assert m.supports_reasoning(model) is reasoning


# ============================================================================================
# Answers cut short: response.incomplete with text
# ============================================================================================


def incomplete(resp: dict, reason: str) -> dict:
    return {**resp, "status": "incomplete", "incomplete_details": {"reason": reason}}


@pytest.mark.parametrize("reason", ["max_output_tokens", "content_filter"])
def test_an_answer_cut_short_says_so_at_its_end(reason):
    shaped = m.shape_answer(incomplete(response(message("HTTP 404 means")), reason), 3, TODAY)
    assert shaped["answer"] == f"HTTP 404 means\n\n(answer cut short: {reason})"


def test_the_cut_short_note_follows_the_sources_section_and_is_not_a_source():
    resp = incomplete(
        response(web_search(), message("Sunny in", cite("https://a.example/"))), "max_output_tokens"
    )
    answer = m.shape_answer(resp, 3, TODAY)["answer"]
    assert answer == (
        f"Sunny in\n\nSources:\n- https://a.example/ ({TODAY})"
        "\n\n(answer cut short: max_output_tokens)"
    )


def test_a_complete_answer_has_no_note_and_no_incomplete_meta():
    resp = {**response(message("x")), "status": "completed", "incomplete_details": None}
    assert m.shape_answer(resp, 3, TODAY)["answer"] == "x"
    assert "incomplete" not in m.usage_meta(resp, 0.0, 1)


def test_usage_meta_flags_an_answer_cut_short_with_the_reason():
    resp = incomplete(response(message("x")), "content_filter")
    assert m.usage_meta(resp, 0.0, 1)["incomplete"] == {"reason": "content_filter"}


@pytest.mark.parametrize("details", [None, {}, "odd"])
def test_incomplete_without_a_reason_says_unknown(details):
    resp = {**response(message("x")), "status": "incomplete", "incomplete_details": details}
    assert m.incomplete_reason(resp) == "unknown"


# ============================================================================================
# classify_failure: what a 404 means
# ============================================================================================


def not_found(body) -> Exception:
    import openai

    request = httpx2.Request("POST", "https://gw.example/responses")
    text = body if isinstance(body, str) else None
    reply = httpx2.Response(404, request=request, text=text, json=None if text else body)
    return openai.NotFoundError("Error code: 404", response=reply, body=body)


def api_error(message: str, code: str | None) -> dict:
    return {"error": {"message": message, "type": "invalid_request_error", "param": None,
                      "code": code}}  # fmt: skip


@pytest.mark.parametrize(
    ("body", "kind"),
    [
        (api_error("The model `gpt-9` does not exist or you do not have access to it.",
                   "model_not_found"), "model"),
        (api_error("Model gpt-9 not found", None), "model"),
        (api_error("Invalid URL (POST /responses)", None), "endpoint"),
        (api_error("Unknown request URL: POST /v1. Please check the URL for typos", "unknown_url"),
         "endpoint"),
        ("<html><body>404 Not Found</body></html>", "endpoint"),
        ("404 page not found", "endpoint"),
        (None, "endpoint"),
        ({"detail": "Not Found"}, "endpoint"),
        (api_error("No such deployment", None), "rejected"),
    ],
    ids=["model_not_found", "names-model", "invalid-url", "unknown-url", "html", "text", "empty",
         "other-json", "other-message"],
)  # fmt: skip
def test_a_404_is_classified_by_its_body(body, kind):
    failure = m.classify_failure(not_found(body))
    assert failure.kind == kind
    assert failure.status == 404
    assert failure.retryable is False


@pytest.mark.parametrize("status", [400, 404])
def test_a_previous_response_the_api_does_not_know_is_its_own_failure(status, tmp_path):
    import openai

    body = {"error": {"message": "Previous response with id 'resp_x' not found.",
                      "type": "invalid_request_error", "param": "previous_response_id",
                      "code": "previous_response_not_found"}}  # fmt: skip
    request = httpx2.Request("POST", "https://api.example/v1/responses")
    reply = httpx2.Response(status, request=request, json=body)
    failure = m.classify_failure(openai.APIStatusError("refused", response=reply, body=body))
    assert (failure.kind, failure.retryable) == ("previous_response", False)
    text = m.failure_message(
        failure, tool="answer", model="gpt-5.2", config=make_config(tmp_path), tries=1
    )
    assert text.startswith(f"previous_response_id is not known to the API (HTTP {status}: ")
    assert "resp_x" in text


def test_endpoint_message_names_the_base_url_its_source_and_the_v1_hint(tmp_path):
    config = make_config(tmp_path, OPENAI_BASE_URL="https://gw.example")
    failure = m.Failure("endpoint", False, status=404, detail="Invalid URL (POST /responses)")
    text = m.failure_message(failure, tool="answer", model="gpt-5.2", config=config, tries=1)
    assert text == (
        "https://gw.example returned 404 Invalid URL (POST /responses): check openai.base_url "
        "(from env OPENAI_BASE_URL); it usually ends in /v1"
    )


def test_endpoint_message_for_a_v1_url_asks_whether_it_is_a_responses_api(tmp_path):
    config = make_config(tmp_path, "openai:\n  base_url: https://gw.example/v1\n")
    failure = m.Failure("endpoint", False, status=404)
    text = m.failure_message(failure, tool="answer", model="gpt-5.2", config=config, tries=1)
    assert text.startswith("https://gw.example/v1 returned 404 with no API error in the body")
    assert f"(from {tmp_path / 'config.yaml'}:2)" in text
    assert "model" not in text.replace("openai.base_url", "")


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


# -- refused_setting: a 400 on a profile setting names the key and what the model accepts --


@pytest.mark.parametrize(
    ("message", "values"),
    [
        ("Unsupported value: 'low' is not supported with the 'gpt-5.2-chat-latest' model. "
         "Supported values are: 'medium'.", ("medium",)),
        ("Unsupported value: 'minimal' is not supported with the 'gpt-5.1' model. Supported "
         "values are: 'none', 'low', 'medium', and 'high'.", ("none", "low", "medium", "high")),
        ("Unsupported value: 'reasoning_effort' does not support 'high' with this model. "
         "Supported values are: 'medium'.", ("medium",)),
        ("Unsupported parameter: 'reasoning.effort' is not supported with this model.", ()),
    ],
)  # fmt: skip
def test_the_values_an_unsupported_value_message_lists(message, values):
    assert m._supported_values(message) == values


def refusal(param, detail="", code="unsupported_value", status=400):
    return m.Failure("rejected", False, status=status, param=param, detail=detail, code=code)


def test_a_refused_setting_without_a_list_falls_back_on_the_models_known_values(tmp_path):
    config = make_config(
        tmp_path, "model_profiles:\n  answer: {model: o3, reasoning_effort: xhigh}\n"
    )
    what, fix = m.refused_setting(refusal("reasoning.effort"), "answer", config)
    assert what == "the API refused reasoning_effort 'xhigh' for o3 (HTTP 400)"
    assert (
        fix == "set model_profiles.answer.reasoning_effort to high (o3 accepts low, medium, high)"
    )


def test_a_refused_parameter_the_model_is_known_to_take_never_names_the_model(tmp_path):
    """Only a parameter the tables know the model takes is left to fail (any other is left out
    and retried); its fix is never "change the model", which a gateway's user cannot do."""
    config = make_config(tmp_path, "model_profiles:\n  answer_quick: {model: gpt-6.1-terra}\n")
    what, fix = m.refused_setting(
        refusal("reasoning.effort", code="unsupported_parameter"), "answer_quick", config
    )
    assert "known to take reasoning_effort 'low'" in what
    assert ".model" not in fix and "openai.base_url" in fix


def test_a_refused_web_search_tool_names_the_model(tmp_path):
    config = make_config(tmp_path, "model_profiles:\n  answer: {model: gpt-4.1-nano}\n")
    what, fix = m.refused_setting(
        refusal("tools", "Hosted tool 'web_search' is not supported with gpt-4.1-nano.", None),
        "answer",
        config,
    )
    assert "web_search tool for gpt-4.1-nano" in what
    assert fix == "set model_profiles.answer.model to a model that can search the web"


@pytest.mark.parametrize(
    "failure",
    [refusal("input", "Input is too long."), refusal(None, "Invalid request."),
     refusal("reasoning.effort", status=422)],
)  # fmt: skip
def test_other_refusals_are_not_taken_for_a_refused_setting(tmp_path, failure):
    assert m.refused_setting(failure, "answer", make_config(tmp_path)) is None


@pytest.mark.parametrize(
    ("key", "value", "accepted", "best"),
    [
        ("reasoning_effort", "low", ["medium"], "medium"),
        ("reasoning_effort", "xhigh", ["low", "medium", "high"], "high"),
        ("reasoning_effort", "none", ["minimal", "low", "medium"], "low"),  # never minimal
        ("reasoning_effort", "minimal", ["none", "low", "medium"], "low"),
        ("verbosity", "high", ["medium"], "medium"),
        ("search_context_size", "high", ["low", "medium"], "medium"),
    ],
)
def test_the_fix_suggests_the_accepted_value_nearest_the_refused_one(
    tmp_path, key, value, accepted, best
):
    fix = m.setting_fix(make_config(tmp_path), "answer_quick", key, value, "x", accepted)
    assert fix.startswith(f"set model_profiles.answer_quick.{key} to {best} (x accepts ")


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
