"""Invariants of the money path, as properties (hypothesis): whatever usage the API reports,
whatever prices the config sets, and however a call ends, the dollars add up."""

from __future__ import annotations

import math
import sqlite3

import pytest
from conftest import TEST_KEY, base_env, wait_until
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import openai_responses_mcp as m

FAST = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))

# A count as an API or a gateway may send it.
counts = st.one_of(
    st.integers(min_value=-(10**15), max_value=10**15),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
    st.sampled_from(["12", "-3", "1e400", " 7.5 ", "nan"]),
    st.none(),
    st.booleans(),
    st.lists(st.integers(), max_size=2),
)
details_in = st.fixed_dictionaries(
    {},
    optional={
        "cached_tokens": counts,
        "cache_write_tokens": counts,
        "cache_write_tokens_details": st.one_of(
            st.none(),
            st.fixed_dictionaries(
                {}, optional={"ttl_12h_tokens": counts, "ttl_30m_tokens": counts}
            ),
        ),
    },
)
usages = st.one_of(
    st.none(),
    st.text(max_size=5),
    st.fixed_dictionaries(
        {},
        optional={
            "input_tokens": counts,
            "input_tokens_details": st.one_of(st.none(), counts, details_in),
            "output_tokens": counts,
            "output_tokens_details": st.one_of(
                st.none(), st.fixed_dictionaries({}, optional={"reasoning_tokens": counts})
            ),
            "total_tokens": counts,
        },
    ),
)
models = st.sampled_from(
    [*m.BUILTIN_PRICES, "gpt-5.2-2025-12-11", "acme-7", "openai/gpt-6.1-terra"]
)
tiers = st.sampled_from([None, "default", "flex", "priority", "fast", "ultrafast", "auto", 7])
PARTS = ("input_usd", "cached_input_usd", "cache_write_usd", "output_usd", "web_search_usd")


@pytest.fixture(scope="module")
def pricing(tmp_path_factory):
    path = tmp_path_factory.mktemp("prices") / "config.yaml"
    path.write_text("pricing: {models: {'acme-*': {input: 3, cached_input: 1, output: 9}}}\n")
    return m.Pricing(m.load_config({"config": str(path)}, {"HOME": str(path.parent)}), m.Log())


@FAST
@given(usage=usages, model=models, tier=tiers, searches=st.integers(-5, 10**6))
def test_for_any_usage_the_cost_is_finite_non_negative_and_the_sum_of_its_parts(
    pricing, usage, model, tier, searches
):
    meta = m.usage_meta({"usage": usage, "model": model}, 0.1, 1)
    assert all(type(v) is int and 0 <= v <= m.USAGE_MAX_TOKENS for v in meta["usage"].values())
    for requested in (model, "gpt-6.1-terra"):
        cost = pricing.booked(model, requested, meta["usage"], searches, tier)
        if cost["usd"] is None:
            assert pricing.prices(model) is None and pricing.prices(requested) is None
            continue
        assert math.isfinite(cost["usd"]) and cost["usd"] >= 0
        assert all(math.isfinite(cost[p]) and cost[p] >= 0 for p in PARTS)
        # rel: at $2e7 one float step is ~4e-9, so a fixed abs bound alone fails on rounding
        assert cost["usd"] == pytest.approx(sum(cost[p] for p in PARTS), rel=1e-12, abs=1e-9)
        # Booked at no less than the requested model's price.
        floor = pricing.cost(requested, meta["usage"], searches, tier)["usd"]
        assert cost["usd"] >= floor


# -- the budget estimate: never below the bill (issue 39) ------------------------------------

ESTIMATE = settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
priced = st.sampled_from([*m.BUILTIN_PRICES, "gpt-5.5-2026-04-23", "acme-7"])
asked_tiers = st.sampled_from([None, "auto", "default", "flex", "priority", "fast", "ultrafast"])
# Up to 400K on each side, so that the two together cross the 272K line, or not, either way.
tokens = st.integers(0, 400_000)


@st.composite
def split(draw, total: int, retention_12h: bool) -> dict:
    """A usage's input of `total` tokens, as the API may split it: cached, written, the rest."""
    cached = draw(st.integers(0, total))
    written = draw(st.integers(0, total - cached))
    longer = draw(st.integers(0, written)) if retention_12h else 0
    return {
        "input_tokens": total,
        "cached_input_tokens": cached,
        "cache_write_tokens": written,
        "cache_write_12h_tokens": longer,
    }


@ESTIMATE
@given(
    model=priced,
    asked=asked_tiers,
    brought=tokens,
    besides=tokens,
    output=st.integers(0, 200_000),
    searches=st.integers(0, 60),
    data=st.data(),
)
def test_the_estimate_is_never_below_the_bill_for_the_same_usage(
    pricing, model, asked, brought, besides, output, searches, data
):
    """What a call brings (question, files) is known before it is sent; the rest (its output,
    searches, and the input it carries besides) the estimate takes from the tool's typical
    cost, billed as those calls were. Whatever the split of the input into cached and written
    tokens, on either side of the long-context line and at any tier the request may be billed
    at (a flex one is retried on default), the bill is within the estimate. The server asks no
    12-hour retention, so what it brings is written at the default one; the typical calls'
    part may have been written either way."""
    tiers = [asked, "default"] if asked == "flex" else [asked]
    billed_at = data.draw(st.sampled_from(tiers))
    own = data.draw(split(brought, retention_12h=False))
    rest = data.draw(split(besides, retention_12h=True))
    rest["output_tokens"] = output
    # The typical calls were billed at either tier too (flex with capacity, default without).
    typical = pricing.cost(model, rest, searches, data.draw(st.sampled_from(tiers)))["usd"]
    whole = {name: own.get(name, 0) + count for name, count in rest.items()}
    bill = pricing.cost(model, whole, searches, billed_at)["usd"]
    estimate = pricing.estimate(model, asked, brought, besides, typical)
    assert bill <= estimate + 1e-7  # each part of a cost is rounded to 1e-8


# -- the most specific price -----------------------------------------------------------------

keys = st.sampled_from(
    [
        "gpt-5",
        "gpt-5*",
        "gpt-5.2",
        "gpt-5.2*",
        "gpt-*",
        "*",
        "o3",
        "o3*",
        "acme",
        "acme-*",
        "acme-7",
    ]
)
ids = st.sampled_from(
    [
        "gpt-5",
        "gpt-5.6-sol",
        "gpt-5.2",
        "gpt-5.2-2025-12-11",
        "gpt-5.2-pro",
        "o3",
        "o3-deep-research",
        "acme",
        "acme-7",
        "acme-7-2026-01-01",
        "acme-9",
        "zeta",
    ]
)


def _most_specific(table: dict, model: str):
    """The spec, written as a ranking: exact id (config 0, built-in 1), the dated snapshot's
    model (config 2, built-in 3), then the longest `*` key (4, longer first)."""
    base = m._undated(model)
    ranked = []
    for n, name in enumerate((model, base) if base != model else (model,)):
        if name in table:
            ranked.append(((2 * n, 0), table[name], "config"))
        if name in m.BUILTIN_PRICES:
            ranked.append(((2 * n + 1, 0), m.BUILTIN_PRICES[name], f"builtin {m.PRICES_DATE}"))
    for key in table:
        if key.endswith("*") and model.startswith(key[:-1]):
            ranked.append(((4, -len(key)), table[key], f"config {key}"))
    return min(ranked, key=lambda r: r[0])[1:] if ranked else None


@FAST
@given(table=st.dictionaries(keys, st.tuples(*[st.floats(0, 100)] * 3), max_size=6), model=ids)
def test_for_any_pricing_config_the_price_used_is_the_most_specific(table, model):
    assert m.price_of(table, model) == _most_specific(table, model)


# -- the ledger and the holds -----------------------------------------------------------------


@pytest.fixture
def engine(tmp_path, fake, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", TEST_KEY)
    env = base_env(tmp_path, OPENAI_BASE_URL=fake.base_url)
    path = tmp_path / "config.yaml"
    path.write_text("budget: {daily_usd: 1e9}\ncache: {ttl_s: 0}\n", encoding="utf-8")
    config = m.load_config({"config": str(path)}, env)
    config.instructions = m.build_instructions(config)
    engine = m.build_engine(config, m.Log())
    yield engine
    engine.close()


def _state_file(tmp_path):
    return tmp_path / "xdg-state" / "openai-responses-mcp" / "state.sqlite3"


ENDINGS = st.sampled_from(["finished", "failed", "broken", "cancelled"])


@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
@given(runs=st.lists(st.tuples(ENDINGS, usages, models), min_size=1, max_size=4))
# A call over the budget of $1e9 is refused: a row of $0, and no hold either.
def test_the_ledger_holds_what_clients_were_shown_and_no_hold_survives_a_call(
    engine, tmp_path, monkeypatch, runs
):
    """And what a response complete when its call was cancelled cost (issue 39): billed all
    the same."""
    shown = []
    for n, (ending, usage, model) in enumerate(runs):
        call = m.Call(n, "answer")

        def attempt(client, request, call, run=None, ending=ending, usage=usage, model=model, n=n):
            if ending == "failed":
                raise ValueError("a malformed response")
            if ending == "broken":
                raise RuntimeError("a bug")
            if ending == "cancelled":
                call.cancelled.set()
            return {
                "id": f"resp_{n}",
                "model": model,
                "status": "completed",
                "usage": usage,
                "output": [
                    {"type": "message", "content": [{"type": "output_text", "text": "Yes."}]}
                ],
            }

        monkeypatch.setattr(engine.upstream, "_attempt", attempt)
        try:
            _, meta = engine.answer("answer", {"query": f"q{n} {len(shown)}"}, call)
        except m.Cancelled:
            requested = engine._config.profile("answer")["model"]
            shown.append(engine.pricing.booked(model, requested, m.usage_counts(usage), 0)["usd"])
            continue
        except (m.ToolError, RuntimeError):
            continue
        shown.append(meta["cost"]["usd"])
    wait_until(lambda: not engine.state.unwritten(), 20, "the ledger rows")
    with sqlite3.connect(_state_file(tmp_path)) as conn:
        (held,) = conn.execute("SELECT COUNT(*) FROM reservations").fetchone()
        total = conn.execute("SELECT COALESCE(SUM(usd), 0) FROM usage").fetchone()[0]
        conn.execute("DELETE FROM usage")
        conn.execute("DELETE FROM usage_daily")
        conn.execute("DELETE FROM usage_by_user")
        conn.execute("DELETE FROM spend_by_day")
    assert held == 0
    assert total == pytest.approx(sum(usd for usd in shown if usd is not None), abs=1e-6)
