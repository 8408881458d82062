"""Cost you can see and cap: dollars on every answer, budgets, and the Responses API's cost
controls per profile, against the fake Responses API through the spawned server."""

from __future__ import annotations

import json

import conftest
import pytest
from conftest import PRICES, failure_of, run_cli, send_call, wait_until
from fake_upstream import Reply

import openai_responses_mcp as m


def start(spawn, fake, config: str = PRICES, env: dict | None = None):
    return conftest.start(spawn, fake, config=config, env=env)


USAGE = {
    "input_tokens": 2000,
    "input_tokens_details": {"cached_tokens": 1024},
    "output_tokens": 500,
    "output_tokens_details": {"reasoning_tokens": 200},
}
SEARCHES = [{"query": "a", "sources": []}, {"query": "b", "sources": []}]
# (2000 - 1024) x $2 + 1024 x $0.50 + 500 x $10 (reasoning is inside output) per million,
# plus 2 searches x $25 per thousand.
EXPECTED = {
    "usd": 0.057464,
    "input_usd": 0.001952,
    "cached_input_usd": 0.000512,
    "cache_write_usd": 0.0,
    "output_usd": 0.005,
    "web_search_usd": 0.05,
    "prices": "config",
}


def meta_of(reply: dict) -> dict:
    assert "result" in reply, reply
    return reply["result"]["_meta"]


# -- Dollars on every answer ------------------------------------------------------------------


def test_cost_is_exact_arithmetic_over_the_configured_prices(spawn, fake):
    fake.enqueue(Reply(usage=USAGE, searches=SEARCHES))
    meta = meta_of(start(spawn, fake).call("answer", {"query": "q"}))
    assert meta["cost"] == pytest.approx(EXPECTED)
    assert meta["cost"]["prices"] == "config"


def test_builtin_prices_name_their_date(spawn, fake):
    fake.enqueue(Reply(usage=USAGE, searches=[]))
    meta = meta_of(start(spawn, fake, config="").call("answer", {"query": "q"}))
    input_rate, cached_rate, output_rate = m.BUILTIN_PRICES["gpt-6.1-terra"]  # answer's default
    expected = (976 * input_rate + 1024 * cached_rate + 500 * output_rate) / 1e6
    assert meta["cost"]["usd"] == pytest.approx(expected)
    assert meta["cost"]["prices"] == f"builtin {m.PRICES_DATE}"


def test_unknown_model_costs_null_with_one_warning_naming_the_key(spawn, fake):
    server = start(spawn, fake, config="model_profiles: {answer: {model: acme-7}}\n")
    for _ in range(2):
        fake.enqueue(Reply(searches=[]))
        cost = meta_of(server.call("answer", {"query": "q"}))["cost"]
        assert cost["usd"] is None and cost["prices"] is None
    server.close_stdin()
    server.wait()
    warnings = [line for line in server.stderr.splitlines() if "no price known" in line]
    assert len(warnings) == 1
    assert "pricing.models.acme-7" in warnings[0]


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("gpt-5.2", ((1.75, 0.175, 14.0), f"builtin {m.PRICES_DATE}")),
        ("gpt-5.2-2025-12-11", ((1.75, 0.175, 14.0), f"builtin {m.PRICES_DATE}")),
        ("gpt-5.2-pro", ((21.0, 21.0, 168.0), f"builtin {m.PRICES_DATE}")),
        ("gpt-5-mini-2025-08-07", ((0.25, 0.025, 2.0), f"builtin {m.PRICES_DATE}")),
        ("gpt-5.4-nano", ((0.2, 0.02, 1.25), f"builtin {m.PRICES_DATE}")),
        ("gpt-5.5-pro", ((30.0, 30.0, 180.0), f"builtin {m.PRICES_DATE}")),
        # Lowered on 2026-07-30 (their model pages): $2 / $12 and $0.20 / $1.20.
        ("gpt-5.6-terra", ((2.0, 0.2, 12.0), f"builtin {m.PRICES_DATE}")),
        ("gpt-5.6-luna-2026-07-01", ((0.2, 0.02, 1.2), f"builtin {m.PRICES_DATE}")),
        # Today's lineup, from each model page.
        ("gpt-6-luna", ((0.1, 0.01, 0.5), f"builtin {m.PRICES_DATE}")),
        ("gpt-6.1-terra", ((1.0, 0.05, 5.0), f"builtin {m.PRICES_DATE}")),
        ("gpt-6.1-sol", ((2.0, 0.1, 10.0), f"builtin {m.PRICES_DATE}")),
        ("gpt-6.2-sol", ((2.0, 0.1, 10.0), f"builtin {m.PRICES_DATE}")),
        ("gpt-6-sol", ((2.0, 0.2, 10.0), f"builtin {m.PRICES_DATE}")),
        ("gpt-6-astra", ((10.0, 1.0, 50.0), f"builtin {m.PRICES_DATE}")),
        ("acme-7", None),
    ],
)
def test_model_ids_match_their_entry_with_or_without_a_date(tmp_path, model, expected):
    pricing = m.Pricing(config_with(tmp_path, ""), m.Log())
    assert pricing.prices(model) == expected


def test_config_prices_win_and_match_as_prefixes_only_with_a_trailing_star(tmp_path):
    config = config_with(
        tmp_path,
        "pricing:\n  models:\n    acme*: {input: 1, cached_input: 1, output: 1}\n"
        "    acme-7*: {input: 7, cached_input: 7, output: 7}\n"
        "    acme-8: {input: 8, cached_input: 8, output: 8}\n"
        "    gpt-5.2: {input: 3, cached_input: 3, output: 3}\n",
    )
    pricing = m.Pricing(config, m.Log())
    assert pricing.prices("acme-7-turbo") == ((7.0, 7.0, 7.0), "config acme-7*")
    assert pricing.prices("acme-9") == ((1.0, 1.0, 1.0), "config acme*")
    assert pricing.prices("acme-8") == ((8.0, 8.0, 8.0), "config")
    # A key without `*` is its own id (and its snapshots') only.
    assert pricing.prices("acme-8-mini") == ((1.0, 1.0, 1.0), "config acme*")
    assert pricing.prices("gpt-5.2-2025-12-11") == ((3.0, 3.0, 3.0), "config")
    assert pricing.prices("gpt-5.2") == ((3.0, 3.0, 3.0), "config")


@pytest.mark.parametrize(
    ("key", "model", "builtin", "own"),
    [
        # Review 4, M2: a config key restating gpt-5's own price repriced every gpt-5.x...
        ("gpt-5", "gpt-5.6-sol", (5.0, 0.5, 30.0), "config"),
        ("gpt-5", "gpt-5-pro", (15.0, 15.0, 120.0), "config"),
        # ... and o3 repriced o3-deep-research from $1.40 to $0.28 a run.
        ("o3", "o3-deep-research", (10.0, 2.5, 40.0), "config"),
        # Even a key with `*` loses to the built-in exact id: the most specific price wins.
        # (and gpt-5 itself keeps its built-in price: `gpt-5*` names no id of its own).
        ("gpt-5*", "gpt-5.6-sol", (5.0, 0.5, 30.0), f"builtin {m.PRICES_DATE}"),
    ],
)
def test_a_config_key_is_no_prefix_of_a_builtin_model(tmp_path, key, model, builtin, own):
    config = config_with(
        tmp_path,
        f"pricing:\n  models:\n    {key}: {{input: 1.25, cached_input: 0.125, output: 10}}\n",
    )
    pricing = m.Pricing(config, m.Log())
    assert pricing.prices(model) == (builtin, f"builtin {m.PRICES_DATE}")
    assert pricing.prices(key.rstrip("*")) == ((1.25, 0.125, 10.0), own)


def test_a_star_alone_prices_any_model_without_a_price(tmp_path):
    config = config_with(
        tmp_path, "pricing:\n  models:\n    '*': {input: 4, cached_input: 4, output: 4}\n"
    )
    pricing = m.Pricing(config, m.Log())
    assert pricing.prices("openai/gpt-6.1-terra") == ((4.0, 4.0, 4.0), "config *")
    assert pricing.prices("gpt-6.1-terra") == (
        m.BUILTIN_PRICES["gpt-6.1-terra"],
        f"builtin {m.PRICES_DATE}",
    )


def test_flex_and_priority_scale_the_token_prices(tmp_path):
    pricing = m.Pricing(config_with(tmp_path, PRICES), m.Log())
    usage = {"input_tokens": 0, "cached_input_tokens": 0, "output_tokens": 1_000_000}
    assert pricing.cost("gpt-6.1-terra", usage, 0, "flex")["usd"] == 5.0
    assert pricing.cost("gpt-6.1-terra", usage, 0, "priority")["usd"] == 20.0
    assert pricing.cost("gpt-6.1-terra", usage, 0, "default")["usd"] == 10.0


def test_priority_on_gpt_5_5_costs_two_and_a_half_times_standard(tmp_path):
    # OpenAI lists gpt-5.5 priority at $12.50 / $1.25 / $75 per million: 2.5x, not 2x.
    pricing = m.Pricing(config_with(tmp_path, ""), m.Log())
    # (200K input tokens: under the long-context line of 272K.)
    usage = {"input_tokens": 200_000, "cached_input_tokens": 0, "output_tokens": 1_000_000}
    cost = pricing.cost("gpt-5.5-2026-04-23", usage, 0, "priority")
    assert cost["input_usd"] == 12.5 / 5 and cost["output_usd"] == 75.0
    assert cost["prices"] == f"builtin {m.PRICES_DATE} x2.5 (priority)"
    assert pricing.cost("gpt-5.4", usage, 0, "priority")["usd"] == (2.5 / 5 + 15.0) * 2
    # Fast mode is billed as priority, at the model's own priority rate.
    assert pricing.cost("gpt-5.5-2026-04-23", usage, 0, "fast")["usd"] == cost["usd"]


def test_fast_mode_is_billed_as_priority(tmp_path):
    pricing = m.Pricing(config_with(tmp_path, ""), m.Log())
    usage = {"input_tokens": 0, "cached_input_tokens": 0, "output_tokens": 1_000_000}
    assert pricing.cost("gpt-6.2-sol", usage, 0, "fast")["usd"] == 10.0 * 2
    assert pricing.cost("gpt-6.2-sol", usage, 0, "priority")["usd"] == 10.0 * 2
    assert pricing.cost("gpt-6.2-sol", usage, 0, "ultrafast")["usd"] == 10.0 * 3


def test_cache_writes_are_billed_by_retention_over_the_input_rate(tmp_path):
    # gpt-6.2-sol's page: cache writes $2.50 for 30 minutes, $5 for 12 hours ($2 input).
    pricing = m.Pricing(config_with(tmp_path, ""), m.Log())
    usage = {
        "input_tokens": 200_000,
        "cached_input_tokens": 50_000,
        "cache_write_tokens": 100_000,
        "cache_write_12h_tokens": 50_000,
        "output_tokens": 0,
    }
    cost = pricing.cost("gpt-6.2-sol", usage, 0)
    assert cost["input_usd"] == pytest.approx(0.1)  # the 50K neither read nor written
    assert cost["cached_input_usd"] == pytest.approx(0.005)
    assert cost["cache_write_usd"] == pytest.approx(0.05 * 2.5 + 0.05 * 5.0)
    assert cost["usd"] == pytest.approx(0.48)


def test_usage_meta_reads_cache_writes_in_the_apis_shape():
    response = {
        "usage": {
            "input_tokens": 5000,
            "input_tokens_details": {
                "cached_tokens": 1000,
                "cache_write_tokens": 3000,
                "cache_write_tokens_details": {"ttl_30m_tokens": 1000, "ttl_12h_tokens": 2000},
            },
            "output_tokens": 10,
        }
    }
    usage = m.usage_meta(response, 1.0, 1)["usage"]
    assert (usage["cache_write_tokens"], usage["cache_write_12h_tokens"]) == (3000, 2000)
    # Without the split, every write is a 30-minute one (the default retention).
    del response["usage"]["input_tokens_details"]["cache_write_tokens_details"]
    usage = m.usage_meta(response, 1.0, 1)["usage"]
    assert (usage["cache_write_tokens"], usage["cache_write_12h_tokens"]) == (3000, 0)


# -- Odd numbers from the API (review 4, M1 and m6) ------------------------------------------


@pytest.mark.parametrize(
    ("value", "count"),
    [
        (None, 0),  # OpenAI-compatible gateways send null...
        ("500", 500),  # ... strings,
        (" 12.5 ", 13),  # fractions, rounded up (count more, never less),
        (2.0000001, 3),
        (-500, 0),  # negatives, which must never lower a cost,
        ("-3", 0),
        ("n/a", 0),
        (True, 0),
        (float("nan"), 0),
        ([1], 0),
        (10**30, m.USAGE_MAX_TOKENS),  # and counts no request has: capped, finite
        (float("inf"), m.USAGE_MAX_TOKENS),
        ("1e400", m.USAGE_MAX_TOKENS),
    ],
)
def test_a_token_count_is_read_as_a_whole_number_in_range(value, count):
    assert m.token_count(value) == count


@pytest.mark.parametrize(
    "usage",
    [
        None,
        "garbage",
        [],
        {"input_tokens": None, "output_tokens": None},
        {"input_tokens_details": None, "output_tokens_details": "x"},
        {"input_tokens_details": {"cache_write_tokens_details": []}},
    ],
)
def test_usage_of_any_shape_reads_as_counts(usage):
    counts = m.usage_meta({"usage": usage, "output": "not a list"}, 1.0, 1)["usage"]
    assert set(counts) == {
        "input_tokens",
        "cached_input_tokens",
        "cache_write_tokens",
        "cache_write_12h_tokens",
        "output_tokens",
        "reasoning_tokens",
        "total_tokens",
    }
    assert all(type(value) is int and value >= 0 for value in counts.values())


def test_negative_counts_never_lower_a_cost(tmp_path):
    pricing = m.Pricing(config_with(tmp_path, PRICES), m.Log())
    honest = {"input_tokens": 2000, "cached_input_tokens": 0, "output_tokens": 0}
    cost = pricing.cost("gpt-6.1-terra", honest, 0)["usd"]
    for lie in (
        {"output_tokens": -1_000_000},
        {"cached_input_tokens": -5000},
        {"cache_write_tokens": -3000},
        {"cache_write_12h_tokens": -3000, "cache_write_tokens": 0},
    ):
        odd = pricing.cost("gpt-6.1-terra", {**honest, **lie}, -4)
        assert odd["usd"] >= cost, lie
        assert all(odd[part] >= 0 for part in odd if part.endswith("_usd")), lie


ODD_USAGE = {
    "input_tokens": None,
    "input_tokens_details": {"cached_tokens": None, "cache_write_tokens": "0"},
    "output_tokens": "500",
    "output_tokens_details": {"reasoning_tokens": -7},
    "total_tokens": None,
}


def test_a_paid_answer_with_null_and_string_counts_is_answered_booked_and_released(
    spawn, fake, tmp_path
):
    """M1: a gateway's null or string count made a billed answer fail with "internal error
    (TypeError)", wrote no ledger row and kept the call's hold, so later calls were refused."""
    server = start(spawn, fake, config=PRICES + "budget: {daily_usd: 1}\n")
    fake.enqueue(Reply(usage=ODD_USAGE, searches=SEARCHES[:1]))
    meta = meta_of(server.call("answer", {"query": "q"}))
    assert meta["usage"]["output_tokens"] == 500 and meta["usage"]["input_tokens"] == 0
    # 500 output tokens at $10 a million, and one search at $25 a thousand.
    assert meta["cost"]["usd"] == pytest.approx(0.005 + 0.025)
    wait_until(lambda: rows_of(tmp_path, "outcome = 'ok'") == 1, 10, "the ledger row")
    assert rows_of(tmp_path, "usd > 0.0299 AND usd < 0.0301") == 1
    assert rows_of(tmp_path, "1 = 1", table="reservations") == 0  # the hold is given back


@pytest.mark.parametrize(
    "named",
    [
        "openai/gpt-6.1-terra",  # a gateway's name for it: no price of its own
        "gpt-6-luna",  # a cheaper model than the one admission reserved for
    ],
)
def test_a_response_naming_another_model_is_booked_at_the_requested_models_price(
    spawn, fake, tmp_path, named
):
    """M3: admission priced the requested model, the cost the model the response named: a
    response naming `openai/gpt-6.1-terra` was booked at $0, and four $0.70 calls passed a $1
    cap."""
    server = start(spawn, fake, config=PRICES + "budget: {daily_usd: 0.1}\n")
    usage = {"input_tokens": 0, "input_tokens_details": {"cached_tokens": 0}}
    usage |= {"output_tokens": 4000, "output_tokens_details": {"reasoning_tokens": 0}}
    costs = []
    for n in range(3):
        fake.enqueue(Reply(model=named, usage=usage, searches=[]))
        reply = server.call("answer", {"query": f"q{n}"})
        if "error" in reply:
            break
        costs.append(meta_of(reply)["cost"])
    # 4000 output tokens at gpt-6.1-terra's $10 a million (PRICES): $0.04 a call, so the third
    # has no room under $0.10.
    assert [cost["usd"] for cost in costs] == [pytest.approx(0.04)] * 2
    assert costs[0]["prices"] == "config, as gpt-6.1-terra (the model requested)"
    assert "budget of $0.10 has no room" in reply["error"]["message"]
    booked = f"model = '{named}' AND usd > 0.0399"
    wait_until(lambda: rows_of(tmp_path, booked) == 2, 10, "the two rows")


def rows_of(tmp_path, where: str, table: str = "usage") -> int:
    import sqlite3

    path = tmp_path / "xdg-state" / "openai-responses-mcp" / "state.sqlite3"
    try:
        with sqlite3.connect(path) as conn:
            return conn.execute(f"SELECT COUNT(*) FROM {table} WHERE {where}").fetchone()[0]
    except sqlite3.OperationalError:
        return 0


def test_long_prompts_are_billed_at_the_long_context_rate(tmp_path):
    # Over 272K input tokens: input and cache rates x2, output x1.5, for the whole request.
    pricing = m.Pricing(config_with(tmp_path, ""), m.Log())
    usage = {"input_tokens": 272_001, "cached_input_tokens": 0, "output_tokens": 1_000_000}
    cost = pricing.cost("gpt-6.1-terra", usage, 0)
    assert cost["input_usd"] == pytest.approx(272_001 * 1.0 * 2 / 1e6)
    assert cost["output_usd"] == 5.0 * 1.5
    assert "long context" in cost["prices"]
    usage["input_tokens"] = 272_000  # at the line: the short-context rate
    assert pricing.cost("gpt-6.1-terra", usage, 0)["output_usd"] == 5.0
    # A model whose page has no long-context rate keeps its one price.
    usage["input_tokens"] = 300_000
    assert pricing.cost("gpt-4.1", usage, 0)["output_usd"] == 8.0


def test_the_estimate_prices_what_a_call_brings_as_the_call_will_be_billed(tmp_path):
    """Issue 39: the budget estimate goes through the billing's own pricing: every token a call
    brings as a prompt-cache write (1.25 x input, never the cached discount), at the long-context
    rate over the line (the tool's typical cost too), at the request's tier."""
    pricing = m.Pricing(config_with(tmp_path, ""), m.Log())  # gpt-6.1-terra: $1 input
    estimate = pricing.estimate
    assert estimate("gpt-6.1-terra", None, 100_000) == pytest.approx(100_000 * 1.25 / 1e6)
    # Over 272K input tokens: the whole request at twice the input rate, 1.5 x the output's;
    # the typical part ($0.01 of output and searches) at the larger of the two.
    assert estimate("gpt-6.1-terra", None, 400_000, typical=0.01) == pytest.approx(
        400_000 * 1.25 * 2 / 1e6 + 0.01 * 2
    )
    # The line counts what the request carries besides (instructions, search results).
    assert estimate("gpt-6.1-terra", None, 200_000, 100_000) == pytest.approx(0.5)
    assert estimate("gpt-6.1-terra", None, 200_000, 72_000) == pytest.approx(0.25)
    # The same money as the cost of that usage, billed.
    written = {"input_tokens": 300_000, "cache_write_tokens": 300_000}
    for tier in (None, "priority", "fast", "ultrafast", "default"):
        billed = pricing.cost("gpt-5.5", written, 0, tier)["usd"]
        assert estimate("gpt-5.5", tier, 300_000) == pytest.approx(billed)
    assert estimate("gpt-6.1-terra", "priority", 100_000) == pytest.approx(0.25)
    assert estimate("gpt-5.5", "priority", 100_000) == pytest.approx(100_000 * 5 * 1.25 * 2.5 / 1e6)
    # Flex without capacity is retried on the default tier: its half price is not certain,
    # and the typical cost, of calls billed at flex, is twice as much on default.
    assert estimate("gpt-6.1-terra", "flex", 100_000) == pytest.approx(0.125)
    assert estimate("gpt-6.1-terra", "flex", 100_000, typical=0.01) == pytest.approx(0.145)
    assert estimate("gpt-6.1-terra", "priority", 0, typical=0.01) == pytest.approx(0.01)
    # A model billed at one rate whatever the length.
    assert estimate("gpt-4.1", None, 400_000, typical=0.01) == pytest.approx(1.01)
    assert estimate("acme-7", "priority", 400_000, typical=0.01) == 0.01  # no price: typical


def test_text_is_estimated_at_a_token_for_every_three_bytes():
    assert m.text_tokens("") == 1
    assert m.text_tokens("x" * 300) == 101
    assert m.text_tokens("日本" * 50) == 101  # 300 bytes of UTF-8


BIG_LOG = "2026-11-28 12:00:00 INFO worker: request served in 9 ms; nothing to report here\n"


def _large_log(tmp_path, megabytes: float) -> str:
    assert len(BIG_LOG) == 80
    (tmp_path / "big.log").write_text(BIG_LOG * int(megabytes * 1e6 / 80), encoding="utf-8")
    return "big.log"


def test_a_large_file_billed_at_the_long_context_rate_cannot_pass_a_budget(spawn, fake, tmp_path):
    """Issue 39: a 1.2 MB log (300K tokens as OpenAI counts it: over the long-context line)
    costs $0.60 on gpt-6.1-terra, twice the $1 input rate. The estimate priced its 400K
    estimated tokens at the base rate ($0.40, and a search), under a $0.45 budget: the call
    went through and spent $0.60. It is refused now, before anything is sent."""
    ask = {"query": "why does it fail?", "files": [_large_log(tmp_path, 1.2)]}
    budgeted = start(spawn, fake, config="budget: {daily_usd: 0.45}\n")
    message = failure_of(budgeted.call("answer", ask))
    assert message.startswith(
        "answer failed: daily budget of $0.45 has no room for this call ($0.00 spent today, "
        "$0.00 held by calls in flight, about $1.02 expected for this one; resets at 00:00 "
    ), message
    assert fake.creates == []
    # What it costs once sent: more than the budget the old estimate let it through.
    uncached = {"cached_tokens": 0}
    fake.enqueue(
        Reply(
            usage={"input_tokens": 300_000, "input_tokens_details": uncached, "output_tokens": 0},
            searches=[],
        )
    )
    unbudgeted = start(spawn, fake, config="state: {path: 'off'}\n")
    cost = meta_of(unbudgeted.call("answer", ask))["cost"]
    assert cost["usd"] == pytest.approx(0.60) and "long context" in cost["prices"]


def test_a_file_on_the_priority_tier_is_estimated_at_the_priority_rate(spawn, fake, tmp_path):
    """Issue 39: on service_tier priority the call is billed at twice the Standard rate, so the
    estimate prices its file so too: a 360 KB log (120K estimated tokens) is $0.30 at the
    priority rate as a cache write, over a $0.20 budget it would pass at the Standard rate
    ($0.15)."""
    ask = {"query": "why?", "files": [_large_log(tmp_path, 0.36)]}
    tier = "model_profiles: {answer: {service_tier: priority}}\n"
    budgeted = start(spawn, fake, config=tier + "budget: {daily_usd: 0.20}\n")
    message = failure_of(budgeted.call("answer", ask))
    assert message.startswith("answer failed: daily budget of $0.20 has no room"), message
    assert "about $0.31 expected for this one" in message
    assert fake.creates == []
    usage = {"input_tokens": 100_000, "input_tokens_details": {"cached_tokens": 0}}
    fake.enqueue(Reply(usage={**usage, "output_tokens": 2_000}, searches=[]))
    cost = meta_of(start(spawn, fake, config=tier).call("answer", ask))["cost"]
    assert fake.creates[0].body["service_tier"] == "priority"
    assert cost["usd"] == pytest.approx((100_000 * 1 + 2_000 * 5) * 2 / 1e6)  # $0.22
    assert cost["prices"].endswith("x2 (priority)")


def test_a_follow_up_is_estimated_with_the_earlier_turns_it_carries(spawn, fake, tmp_path):
    """Issue 39: a follow-up is billed its earlier turns again as input. After an answer of
    250K input and 2K output tokens ($0.26 on gpt-6.1-terra), a follow-up carrying them and
    48K more is over the long-context line: $0.615. It was estimated from the tool's recent
    calls alone (about $0.26), so a $0.60 budget with $0.34 left let it through and ended
    at $0.875. The server knows what its own answer carries: the follow-up is refused."""
    uncached = {"cached_tokens": 0}
    server = start(spawn, fake, config="budget: {daily_usd: 0.60}\n")
    fake.enqueue(
        Reply(
            usage={
                "input_tokens": 250_000,
                "input_tokens_details": uncached,
                "output_tokens": 2_000,
            },
            searches=[],
        )
    )
    first = meta_of(server.call("answer", {"query": "why?"}))
    assert first["cost"]["usd"] == pytest.approx(0.26)
    # The tool's typical cost and input are read from the ledger's written rows.
    wait_until(lambda: rows_of(tmp_path, "outcome = 'ok'") == 1, 10, "the first row")
    ask = {"query": "and then?", "previous_response_id": first["response_id"]}
    message = failure_of(server.call("answer", ask))
    assert message.startswith("answer failed: daily budget of $0.60 has no room"), message
    # 252K tokens carried and the question, as cache writes at the long-context rate, and
    # the tool's typical cost (that answer's) at it too: $0.63 + $0.52.
    assert "about $1.15 expected for this one" in message
    assert len(fake.creates) == 1


def test_an_answer_cut_short_before_any_text_is_booked_against_the_budget(spawn, fake):
    """Issue 39: a response cut short before any text (its reasoning used up max_output_tokens)
    is an error to the client, but OpenAI bills its tokens and searches. Its row booked $0, so
    a $0.50 budget let call after call spend $0.52 each, and never refused one."""
    server = start(spawn, fake, config="budget: {daily_usd: 0.50}\n")
    usage = {"input_tokens": 10_000, "input_tokens_details": {"cached_tokens": 0}}
    fake.enqueue(
        Reply(
            text="",
            incomplete=True,
            usage={**usage, "output_tokens": 100_000},
            searches=[{"query": "a", "sources": []}],
        )
    )
    assert "answer cut short" in failure_of(server.call("answer", {"query": "q"}))
    # gpt-6.1-terra: 10K input at $1, 100K output (reasoning) at $5, a search at $0.01.
    message = failure_of(server.call("answer", {"query": "again"}))
    assert message.startswith("answer failed: daily budget of $0.50 reached ($0.52 spent today"), (
        message
    )
    assert len(fake.creates) == 1


def test_an_answer_cancelled_once_it_was_complete_is_booked(spawn, fake, tmp_path):
    """Issue 39: a cancel that comes after the response is complete (while the server reads
    the end of its body, up to a second when the upstream holds it open) cannot stop the
    bill: the call's row booked $0. It books the response's usage now, outcome `cancelled`."""
    server = start(spawn, fake, config="budget: {daily_usd: 5}\n")
    fake.enqueue(Reply(searches=[]))
    meta_of(server.call("answer", {"query": "how many events?"}))
    events = fake.creates[0].events_sent
    usage = {"input_tokens": 10_000, "input_tokens_details": {"cached_tokens": 0}}
    fake.enqueue(
        Reply(usage={**usage, "output_tokens": 100_000}, searches=[], stall_after_events=events)
    )
    send_call(server, "late", query="q")
    completed = lambda: len(fake.creates) == 2 and fake.creates[1].events_sent == events  # noqa: E731
    wait_until(completed, 10, "the response.completed event sent")
    conftest.cancel(server, "late")
    wait_until(lambda: rows_of(tmp_path, "outcome = 'cancelled'") == 1, 10, "the row")
    # gpt-6.1-terra: 10K input at $1, 100K output at $5.
    assert rows_of(tmp_path, "outcome = 'cancelled' AND usd BETWEEN 0.5099 AND 0.5101") == 1


def test_the_typical_cost_is_of_the_calls_model_where_several_share_the_state(
    spawn, fake, tmp_path
):
    """Issue 39: the tool's typical cost was the mean of its last calls, whatever their model:
    beside a server whose `answer` is gpt-6-luna ($0.10 input), gpt-6-astra's ($10) call that
    cost $0.35 counted as one of seven, about $0.05, and a second one was let through the
    $0.20 left of a $0.55 budget. It is the mean of the model's own calls now."""
    expensive = {"input_tokens": 20_000, "input_tokens_details": {"cached_tokens": 0}}
    luna = start(spawn, fake, config="model_profiles: {answer: {model: gpt-6-luna}}\n")
    astra = "model_profiles: {answer: {model: gpt-6-astra}}\nbudget: {daily_usd: 0.55}\n"
    astra = start(spawn, fake, config=astra)
    fake.enqueue(Reply(usage={**expensive, "output_tokens": 3_000}, searches=[]))
    assert meta_of(astra.call("answer", {"query": "q"}))["cost"]["usd"] == pytest.approx(0.35)
    for n in range(6):
        fake.enqueue(Reply(searches=[]))
        assert meta_of(luna.call("answer", {"query": f"q{n}"}))["cost"]["usd"] < 0.001
    wait_until(lambda: rows_of(tmp_path, "outcome = 'ok'") == 7, 10, "the rows written")
    message = failure_of(astra.call("answer", {"query": "again"}))
    assert "$0.35 spent today" in message and "about $0.35 expected" in message, message
    assert len(fake.creates) == 7


def test_the_searches_a_cancelled_call_had_made_are_booked(spawn, fake, tmp_path):
    """Issue 39: a web search is billed once done, whatever becomes of the response. A call
    cancelled while writing its answer, after two searches, booked $0; its row books the
    searches its stream showed done now ($0.01 each at the built-in price)."""
    server = start(spawn, fake, config="budget: {daily_usd: 5}\n")
    # created, in_progress, 5 events a search, the message's added and content_part.added,
    # then its first delta: the stall comes after it, so "writing the answer" is reported.
    fake.enqueue(Reply(searches=SEARCHES, reasoning=False, event_delay=0.25, stall_after_events=15))
    send_call(server, "slow", query="q", _meta={"progressToken": "p"})
    writing = lambda m: m.get("params", {}).get("message") == "writing the answer"  # noqa: E731
    server.recv_until(writing, timeout=20)
    conftest.cancel(server, "slow")
    wait_until(lambda: rows_of(tmp_path, "outcome = 'cancelled'") == 1, 10, "the row")
    booked = "outcome = 'cancelled' AND web_searches = 2 AND usd BETWEEN 0.0199 AND 0.0201"
    assert rows_of(tmp_path, booked) == 1


def test_the_searches_of_an_attempt_that_dropped_are_booked_with_the_answer(spawn, fake):
    """Issue 39: the stream of a first attempt dropped after its two searches were done (and
    billed); the retry searched twice again. The answer booked only the retry's two."""
    fake.enqueue(Reply(searches=SEARCHES, reasoning=False, drop_after_events=12))
    fake.enqueue(Reply(searches=SEARCHES, reasoning=False))
    meta = meta_of(start(spawn, fake).call("answer", {"query": "q"}))
    assert meta["attempts"] == 2
    assert meta["web_searches"] == 4
    assert meta["cost"]["web_search_usd"] == pytest.approx(4 * 25 / 1000)  # PRICES: $25 per 1K


def test_cache_writes_reach_the_answers_cost_through_the_server(spawn, fake):
    written = {"cached_tokens": 0, "cache_write_tokens": 1000}
    written["cache_write_tokens_details"] = {"ttl_30m_tokens": 0, "ttl_12h_tokens": 1000}
    usage = {"input_tokens": 2000, "input_tokens_details": written, "output_tokens": 0}
    fake.enqueue(Reply(usage=usage, searches=[]))
    meta = meta_of(start(spawn, fake).call("answer", {"query": "q"}))  # terra at $2 input
    assert meta["usage"]["cache_write_tokens"] == 1000
    assert meta["cost"]["cache_write_usd"] == pytest.approx(1000 * 2 * 2.5 / 1e6)
    assert meta["cost"]["input_usd"] == pytest.approx(1000 * 2 / 1e6)


def config_with(tmp_path, text: str):
    path = tmp_path / "config.yaml"
    path.write_text(text, encoding="utf-8")
    return m.load_config({"config": str(path)}, {"HOME": str(tmp_path)})


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        ("pricing:\n  models:\n    x: {input: 1, output: 2}\n", 3, "needs cached_input"),
        ("pricing:\n  models:\n    x: 5\n", 3, "must be a mapping"),
        (
            "pricing:\n  models:\n    ok: {input: 1, cached_input: 1, output: 1}\n"
            "    bad: {input: -1, cached_input: 1, output: 1}\n",
            4,
            "needs input: a number >= 0",
        ),
        (
            "pricing:\n  models:\n    x: {input: 1, cached_input: 1, output: 1, cost: 2}\n",
            3,
            "cost",
        ),
        ("pricing:\n  models: [gpt-5.2]\n", 2, "must be a mapping of model ids"),
    ],
)
def test_a_bad_price_table_is_refused_with_file_and_line(tmp_path, text, line, words):
    path = tmp_path / "config.yaml"
    path.write_text(text, encoding="utf-8")
    result = run_cli(tmp_path, "--show-config", "--config", str(path))
    assert result.returncode == 2
    assert f"config.yaml:{line}: pricing.models" in result.stderr
    assert words in result.stderr


# -- Budgets ------------------------------------------------------------------------------------


def test_a_spent_daily_budget_refuses_before_any_request(spawn, fake):
    config = PRICES + "budget: {daily_usd: 0.05}\n"
    server = start(spawn, fake, config=config)
    fake.enqueue(Reply(usage=USAGE, searches=SEARCHES))
    meta_of(server.call("answer", {"query": "first"}))  # $0.057464: over the line
    reply = server.call("answer", {"query": "second"})
    assert reply["error"]["message"] == (
        "answer failed: daily budget of $0.05 reached ($0.06 spent today; resets at 00:00 "
        "Asia/Tokyo): raise budget.daily_usd or wait"
    )
    assert len(fake.requests) == 1


def test_under_a_budget_a_model_without_a_price_is_refused_before_any_request(spawn, fake):
    config = "budget: {daily_usd: 5}\nmodel_profiles: {answer: {model: acme-7}}\n"
    server = start(spawn, fake, config=config)
    fake.enqueue(Reply(text="never served"))
    message = conftest.failure_of(server.call("answer", {"query": "q"}))
    assert message == (
        "answer failed: no price known for model 'acme-7', so budget.daily_usd cannot count "
        "its calls: set pricing.models.acme-7 to {input, cached_input, output} in USD per "
        "million tokens (see --doctor), or use a model with a price"
    )
    assert fake.requests == []
    # A model with a price is let through under the same budget.
    fake.clear()
    priced = start(spawn, fake, config="budget: {daily_usd: 5}\n")
    fake.enqueue(Reply(text="counted"))
    assert meta_of(priced.call("answer", {"query": "q"}))["cost"]["usd"] is not None


def test_the_budget_counts_every_process_sharing_the_ledger(spawn, fake):
    config = PRICES + "budget: {monthly_usd: 0.05}\n"
    fake.enqueue(Reply(usage=USAGE, searches=SEARCHES))
    meta_of(start(spawn, fake, config=config).call("answer", {"query": "first"}))
    reply = start(spawn, fake, config=config).call("answer", {"query": "second"})
    message = reply["error"]["message"]
    assert message.startswith("answer failed: monthly budget of $0.05 reached ($0.06 spent ")
    assert message.endswith("Asia/Tokyo): raise budget.monthly_usd or wait")
    assert len(fake.requests) == 1


def test_a_spent_budget_still_lets_a_call_join_an_identical_one_in_flight(spawn, fake):
    """Joining a request already made costs nothing, so the budget does not refuse it; only a
    call that would make a new request is refused."""
    # Room for two calls' estimates (a search's $0.025 each, and their questions' tokens).
    config = PRICES + "budget: {daily_usd: 0.051}\n"
    server = start(spawn, fake, config=config, env={"DEBUG": "1"})  # the join is a debug line
    fake.enqueue(
        Reply(stall_after_events=3, stall_seconds=5), Reply(usage=USAGE, searches=SEARCHES)
    )
    send_call(server, "slow", "slow question")
    fake.wait_for_requests(1, timeout=20)
    meta_of(server.call("answer", {"query": "spend"}))  # $0.057464: over the line
    send_call(server, "again", "slow question")
    wait_until(lambda: "joined an identical call" in server.stderr, 20, "the join")
    assert "budget" in server.call("answer", {"query": "new"})["error"]["message"]
    replies = {}
    while len(replies) < 2:
        message = server.recv(timeout=30)
        if message.get("id") in ("slow", "again"):
            replies[message["id"]] = message
    assert meta_of(replies["again"])["shared"] is True
    assert meta_of(replies["slow"])["cost"]["usd"] > 0
    assert len(fake.creates) == 2


def test_a_spent_budget_still_answers_from_the_cache(spawn, fake):
    """A cached answer costs nothing, so it reserves nothing and no budget refuses it."""
    config = PRICES + "budget: {daily_usd: 0.05}\n"
    server = start(spawn, fake, config=config, env={"ANSWER_CACHE_TTL_S": "600"})
    fake.enqueue(Reply(usage=USAGE, searches=SEARCHES))
    meta_of(server.call("answer", {"query": "spend"}))  # $0.057464: over the line
    again = meta_of(server.call("answer", {"query": "spend"}))
    assert again["cache"]["hit"] is True and again["cost"]["usd"] == 0
    assert "budget" in server.call("answer", {"query": "new"})["error"]["message"]
    assert len(fake.requests) == 1


def test_a_budget_without_the_ledger_is_a_config_error(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text("state: {path: 'off'}\nbudget: {daily_usd: 5}\n", encoding="utf-8")
    result = run_cli(tmp_path, "--show-config", "--config", str(path))
    assert result.returncode == 2
    assert "budget.daily_usd" in result.stderr and "state.path is off" in result.stderr


@pytest.mark.parametrize(
    ("amount", "shown"),
    [(5.03, "$5.03"), (0.057464, "$0.06"), (0.0039, "$0.0039"), (0.001, "$0.001"), (0, "$0.00")],
)
def test_dollars_under_a_cent_are_not_shown_as_zero(amount, shown):
    assert m.usd(amount) == shown


def test_a_daily_budget_counts_today_and_a_monthly_one_from_the_first_of_the_month(tmp_path):
    config = config_with(tmp_path, "budget: {daily_usd: 5, monthly_usd: 50}\n")
    periods = m.budgets(config, "2027-02-28")
    assert [(p.name, p.limit, p.since, p.words, p.resets) for p in periods] == [
        ("daily", 5, "2027-02-28", "today", "at 00:00"),
        ("monthly", 50, "2027-02-01", "this month", "on 2027-03-01 at 00:00"),
    ]
    assert m.budgets(config_with(tmp_path, ""), "2027-02-28") == []
    # A user's allowance: named as its config key, budget.per_user_daily_usd, its own limit first.
    (own,) = m.user_budgets(config, "2027-02-28", "ann", (2, None))
    assert (own.name, own.span, own.limit, own.user, own.per_user) == (
        "per_user_daily",
        "daily",
        2,
        "ann",
        True,
    )


def test_next_month_rolls_over_the_year():
    assert m._next_month("2026-12-31") == "2027-01-01"
    assert m._next_month("2026-11-23") == "2026-12-01"


# -- The Responses API's cost controls ------------------------------------------------------


CONTROLS = """\
model_profiles:
  answer:
    service_tier: flex
    max_output_tokens: 2000
    max_tool_calls: 3
    search_context_size: low
  answer_quick:
    service_tier: priority
search:
  user_location: {country: JP, city: Tokyo}
"""


def test_the_profile_controls_are_in_the_upstream_body(spawn, fake):
    server = start(spawn, fake, config=CONTROLS)
    meta_of(server.call("answer", {"query": "q"}))
    meta_of(server.call("answer", {"query": "another"}))
    meta_of(server.call("answer_quick", {"query": "q"}))
    first, second, quick = (rec.body for rec in fake.requests)
    assert first["service_tier"] == "flex"
    assert first["max_output_tokens"] == 2000
    assert first["max_tool_calls"] == 3
    assert first["tools"][0]["search_context_size"] == "low"
    assert first["tools"][0]["user_location"] == {
        "type": "approximate",
        "country": "JP",
        "city": "Tokyo",
        "timezone": "Asia/Tokyo",
    }
    assert first["prompt_cache_key"] == second["prompt_cache_key"] != quick["prompt_cache_key"]
    assert quick["service_tier"] == "priority"
    assert quick["max_output_tokens"] == 2000  # inherited from answer


def test_controls_left_unset_are_not_sent(spawn, fake):
    meta_of(start(spawn, fake, config="").call("answer", {"query": "q"}))
    body = fake.requests[0].body
    for name in ("service_tier", "max_output_tokens", "max_tool_calls"):
        assert name not in body
    assert body["tools"] == [{"type": "web_search"}]
    assert body["prompt_cache_key"].startswith("openai-responses-mcp/answer/")


def test_the_controls_fit_the_sdk_request_types():
    import typing

    from openai.types.responses import ServiceTier
    from openai.types.responses import response_create_params as params
    from openai.types.responses import web_search_tool_param as web

    fields = params.ResponseCreateParamsBase.__annotations__
    for name in ("service_tier", "max_output_tokens", "max_tool_calls", "prompt_cache_key"):
        assert name in fields
    assert {"search_context_size", "user_location"} <= set(web.WebSearchToolParam.__annotations__)
    tiers = typing.get_args(typing.get_args(ServiceTier)[0])
    assert set(m.SERVICE_TIERS) <= set(tiers)


def test_flex_without_capacity_is_retried_once_on_default(spawn, fake):
    fake.enqueue(
        Reply(status=429, error_code="resource_unavailable", error_message="Resource unavailable")
    )
    server = start(spawn, fake, config=CONTROLS)
    meta_of(server.call("answer", {"query": "q"}))
    assert [rec.body["service_tier"] for rec in fake.requests] == ["flex", "default"]


def test_a_flex_call_retried_on_default_is_estimated_at_the_default_rate(spawn, fake, tmp_path):
    """Issue 39: the tool's typical cost comes from calls billed at flex, half the Standard
    rate; a call retried on default without flex capacity costs twice that. A first call at
    flex cost $0.075, so the next was expected to cost about as much, let through the $0.125
    left of a $0.20 budget, retried on default and billed $0.15. It is refused now."""
    config = "model_profiles: {answer: {service_tier: flex}}\nbudget: {daily_usd: 0.20}\n"
    server = start(spawn, fake, config=config)
    usage = {"input_tokens": 100_000, "input_tokens_details": {"cached_tokens": 0}}
    fake.enqueue(Reply(usage={**usage, "output_tokens": 10_000}, searches=[]))
    assert meta_of(server.call("answer", {"query": "q"}))["cost"]["usd"] == pytest.approx(0.075)
    wait_until(lambda: rows_of(tmp_path, "outcome = 'ok'") == 1, 10, "the first row")
    message = failure_of(server.call("answer", {"query": "again"}))
    assert "has no room for this call ($0.07 spent today" in message, message
    assert "about $0.15 expected" in message, message
    assert len(fake.creates) == 1


def test_usage_json_with_no_ledger_yet_is_empty(tmp_path):
    result = run_cli(tmp_path, "--usage", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["total"]["calls"] == 0 and report["by_day"] == []


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--since", "2026-01-01"], "--since goes with --usage"),
        (["--usage", "--since", "yesterday"], "--since takes a date"),
        (["--usage", "--stdio"], "cannot be combined"),
    ],
)
def test_usage_flags_are_checked(tmp_path, args, words):
    result = run_cli(tmp_path, *args)
    assert result.returncode == 2
    assert words in result.stderr


# -- docs/cost.md's examples, computed from the built-in prices (review 4, m7) ----------------

COST_MD = conftest.SCRIPT.parent / "docs" / "cost.md"


def _builtin_usd(model: str, tokens_in: int, cached: int, out: int, searches: int) -> float:
    rates = m.BUILTIN_PRICES[model]
    search = m.SETTINGS[("pricing", "web_search_per_1k")].default / 1000
    return ((tokens_in - cached) * rates[0] + cached * rates[1] + out * rates[2]) / 1e6 + (
        searches * search
    )


def test_the_typical_answers_table_is_what_the_builtin_prices_give():
    import re

    text = COST_MD.read_text(encoding="utf-8")
    rows = re.findall(
        r"^\| `(\w+)` \(([\w.-]+),[^|]*\| ([\d,]+) \(([\d,]+)\) / ([\d,]+), (\d+) searche?s? "
        r"\| \$([\d.]+) \|$",
        text,
        re.M,
    )
    assert [row[0] for row in rows] == ["answer_quick", "answer", "answer_detailed"]
    for tool, model, tokens_in, cached, out, searches, shown in rows:
        assert model == m.SETTINGS[("model_profiles", tool, "model")].default
        counts = [int(value.replace(",", "")) for value in (tokens_in, cached, out, searches)]
        assert f"{_builtin_usd(model, *counts):.2f}" == shown, tool


def test_the_deep_research_example_is_what_the_builtin_prices_give():
    import re

    text = " ".join(COST_MD.read_text(encoding="utf-8").split())
    found = re.search(
        r"A run of ([\d,]+) tokens in, ([\d,]+) out and (\d+) searches is about \$([\d.]+) with "
        r"([\w-]+) and \$([\d.]+) with ([\w-]+);",
        text,
    )
    assert found, "the deep research example is gone from docs/cost.md"
    tokens_in, out, searches = (int(found[n].replace(",", "")) for n in (1, 2, 3))
    for shown, model in ((found[4], found[5]), (found[6], found[7])):
        usd = _builtin_usd(model, tokens_in, 0, out, searches)
        assert f"{usd:.{len(shown.split('.')[1])}f}" == shown, model


def test_the_estimate_example_is_what_the_estimate_and_the_bill_give(tmp_path):
    """docs/cost.md's large-log example (issue 39), from the built-in prices: the estimate the
    server makes for it, and what OpenAI bills for it."""
    import re

    text = " ".join(COST_MD.read_text(encoding="utf-8").split())
    found = re.search(
        r"a ([\d.]+) MB log asked about with `(\w+)` \(([\w.-]+), \$(\d+) per million input "
        r"tokens\) counts as ([\d,]+) tokens: \$([\d.]+) × 1\.25 × 2 = \$([\d.]+), plus twice "
        r"one search's \$([\d.]+), is about \$([\d.]+) expected, .* OpenAI would count such a "
        r"log as about ([\d,]+) tokens, billed at the long-context rate: \$([\d.]+)\.",
        text,
    )
    assert found, "the large-log example is gone from docs/cost.md"
    megabytes, tool, model, rate, counted, base, doubled, search, expected, billed, usd = (
        found.groups()
    )
    assert model == m.SETTINGS[("model_profiles", tool, "model")].default
    assert float(rate) == m.BUILTIN_PRICES[model][0]
    tokens = int(counted.replace(",", ""))
    assert tokens == float(megabytes) * 1e6 / m.TEXT_BYTES_PER_TOKEN
    assert float(search) == m.SETTINGS[("pricing", "web_search_per_1k")].default / 1000
    assert f"{tokens * float(rate) / 1e6:.2f}" == base
    pricing = m.Pricing(config_with(tmp_path, ""), m.Log())
    assert f"{pricing.estimate(model, None, tokens):.2f}" == doubled
    assert f"{pricing.estimate(model, None, tokens, typical=float(search)):.2f}" == expected
    bill = {"input_tokens": int(billed.replace(",", ""))}
    assert f"{pricing.cost(model, bill, 0)['usd']:.2f}" == usd
