"""Discounted background runs (model_profiles.<tool>.completion_window, issue 41): the request
goes with background and background_options, unstreamed, and is polled to its end; it is priced
at the window's discount everywhere; a refusal falls back to soonest at full price, once.

The server is spawned for real against the fake Responses API, which refuses windows as the
API does (tests/test_fake_upstream.py) and keeps a windowed run queued for a few polls.
"""

from __future__ import annotations

import json
import threading

import pytest
from conftest import PRICES, TEST_KEY, base_env, cancel, send_call, start
from fake_upstream import Reply

import openai_responses_mcp as orm

USAGE = {"input_tokens": 10_000, "output_tokens": 2_000}
WINDOWED = PRICES + """\
model_profiles:
  answer:
    model: gpt-6.1-terra
  answer_detailed:
    model: gpt-6.1-terra
    completion_window: 8h
"""
KEY = "model_profiles.answer_detailed.completion_window"


def result_of(reply: dict) -> tuple[dict, dict]:
    assert "result" in reply, reply
    result = reply["result"]
    assert not result.get("isError"), result
    return json.loads(result["content"][0]["text"]), result["_meta"]


def polls(fake) -> list:
    return [r for r in fake.requests_to("GET", "/v1/responses/") if "stream=" not in r.path]


def test_an_8h_call_is_created_unstreamed_and_polled_to_its_discounted_answer(spawn, fake):
    fake.window_polls = 2
    fake.default = Reply(usage=USAGE)
    server = start(spawn, fake, config=WINDOWED)
    answer, meta = result_of(server.call("answer_detailed", {"query": "q"}))
    (create,) = fake.creates
    assert create.body["background"] is True
    assert create.body["background_options"] == {"completion_window": "8h"}
    assert create.body.get("stream") is not True
    assert len(polls(fake)) == 3  # queued, in progress, completed
    assert answer["answer"] and meta["window"] == "8h" and meta["background"] is True
    # The same usage at soonest, on the tool without a window: 40% less on every token part.
    soonest = result_of(server.call("answer", {"query": "q"}))[1]["cost"]
    cost = meta["cost"]
    for part in ("input_usd", "output_usd"):
        assert cost[part] == pytest.approx(soonest[part] * 0.6)
    assert cost["usd"] == pytest.approx(soonest["usd"] * 0.6)
    assert cost["prices"].endswith("x0.6 (8h window)")
