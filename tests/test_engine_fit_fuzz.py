"""Any answer, any client size: never over it. The answer-fitting fuzz test (issue 33: a file
of its own, so that `--dist loadfile` runs its examples beside the other engine units rather than
after them); its fixed cases are in tests/test_engine_units.py. The README's test line draws 150
answers; `.ci/run` draws 1,200 more (`pytest -m slow`), and a failure either finds is replayed
first by the other (Hypothesis keeps it in .hypothesis/)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from test_engine_units import CLUSTERS, LOREM, REST, left_out, report

import openai_responses_mcp as m

# -- Any answer, any client size: never over it ------------------------------------------------

WORDS = ["Lorem", "ipsum", "東京の天気", "\"quoted\"", "back\\slash", "tab\there", "\x01", "é",
         "https://x.example/?a=1", "`code`", "**bold**", "#tag"]  # fmt: skip
FENCES = ["```", "````", "~~~", "~~~~"]


def giant_line(draw) -> str:
    unit = draw(st.sampled_from(CLUSTERS))
    return unit * draw(st.integers(1, 20_000 // len(unit.encode())))


@st.composite
def body_blocks(draw):
    kind = draw(st.sampled_from(["heading", "paragraph", "code", "giant", "long"]))
    if kind == "heading":
        return "## " + " ".join(draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=4)))
    if kind == "paragraph":
        return " ".join(draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=60)))
    if kind == "giant":
        return giant_line(draw)
    if kind == "long":
        return "\n\n".join([LOREM] * draw(st.integers(1, 30)))
    fence = draw(st.sampled_from(FENCES))
    inner = "```\nnested\n```\n" if fence != "```" else "~~~\n"
    lines = "\n".join(f"line {i} {draw(st.sampled_from(WORDS))}" for i in range(300))
    lines = "\n".join([lines] * draw(st.integers(1, 4)))
    return f"{fence}text\n{inner}{lines}" + (f"\n{fence}" if draw(st.booleans()) else "")


@st.composite
def sources_tails(draw):
    count = draw(st.integers(1, 3000))
    kind = draw(st.sampled_from(["none", "list", "inline", "giant entry"]))
    if kind == "none":
        return ""
    if kind == "list":
        entries = (f"- https://s{i}.example/p (2026-01-01)" for i in range(count))
        return "Sources:\n" + "\n".join(entries)
    if kind == "inline":
        return "Sources: " + ", ".join(f"https://s{i}.example/p (2026-01-01)" for i in range(count))
    return "Sources:\n- https://a.example/ " + giant_line(draw)


@st.composite
def long_answers(draw):
    blocks = draw(st.lists(body_blocks(), min_size=1, max_size=6))
    tail = draw(sources_tails())
    after = draw(st.lists(body_blocks(), max_size=2)) if tail else []
    after = ["## Afterword", *after] if after else []  # a heading ends the sources section
    text = "\n\n".join([*blocks, tail, *after] if tail else blocks)
    body = "\n\n".join(p for p in ("\n\n".join(blocks).rstrip(), "\n\n".join(after).strip()) if p)
    if m._fences("\n\n".join(blocks).split("\n"))[1] and tail:  # an open block: all is code
        body = text.rstrip()
    return {**report(0), "answer": text}, body, draw(st.integers(2_000, 30_000))


def fuzzed(examples: int):
    """The property below, drawn `examples` times. Shrinking examples this big takes minutes: a
    failure is reported as found."""
    return settings(
        max_examples=examples,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
        phases=[Phase.explicit, Phase.reuse, Phase.generate],
    )


@fuzzed(150)
@given(long_answers())
def test_any_answer_fits_its_clients_size_with_whole_characters_and_closed_code(case):
    fits_whole(*case)


@pytest.mark.slow
@fuzzed(1200)
@given(long_answers())
def test_any_answer_fits_its_clients_size_over_a_long_run(case):
    fits_whole(*case)


def fits_whole(answer, body, limit) -> None:
    fitted, shortened = m.fit_answer(answer, limit, REST)
    assert m.result_size(fitted) <= limit
    if not shortened:
        assert fitted == answer
        return
    text = fitted["answer"]
    kept = text[: text.index("[Shortened")].rstrip()
    assert m._fences(kept.split("\n"))[1] is None  # the note is never read as code
    fence = m._fences(kept.split("\n")[:-1])[1]
    added = fence and kept.endswith("\n" + fence)  # a closing fence: the server's, or the body's
    start = kept[: -len(fence) - 1] if added else kept
    assert body.startswith(start)
    assert m._grapheme_safe(body, len(start)) == len(start)
    gone, total = left_out(text)
    assert total == len(body) and gone in (total - len(start), total - len(kept))
