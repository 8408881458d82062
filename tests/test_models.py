"""Today's models: each tool's default on the GPT-6 lineup, and a profile's settings sent to
every model (a model newer than the tables included), a refusal of a default adapted once and
remembered for that model, a refusal of the user's own value failing with the key's name."""

from __future__ import annotations

import conftest
import pytest
from fake_upstream import Reply, unsupported_parameter

import openai_responses_mcp as m


def body_of_call(spawn, fake, tool: str, config: str = "") -> dict:
    fake.enqueue(Reply(text="ok"))
    server = conftest.start(spawn, fake, config=config)
    reply = server.call(tool, {"query": "q"})
    assert "result" in reply, reply
    return fake.creates[-1].body


@pytest.mark.parametrize(
    ("tool", "model", "effort", "verbosity", "background"),
    [
        ("answer_quick", "gpt-6-luna", "low", "low", None),
        ("answer", "gpt-6.1-terra", "medium", "medium", None),
        ("answer_detailed", "gpt-6.2-sol", "high", "medium", True),
    ],
)
def test_each_tool_defaults_to_its_place_in_the_gpt6_lineup(
    spawn, fake, tool, model, effort, verbosity, background
):
    body = body_of_call(spawn, fake, tool)
    assert body["model"] == model
    assert body["reasoning"] == {"effort": effort}
    assert body["text"] == {"verbosity": verbosity}
    assert body.get("background") is background


def test_the_three_defaults_are_cheapest_balanced_strongest_by_their_prices():
    price = {row["name"]: m.BUILTIN_PRICES[row["model"]] for row in m.TOOL_TABLE}
    assert price["answer_quick"] < price["answer"] < price["answer_detailed"]
    # answer_deep stays on a deep research model: none has a documented successor.
    assert m.is_deep_research(m._row("answer_deep")["model"])


def test_an_unknown_model_gets_the_profiles_settings(spawn, fake):
    """Not decided from the name: a model newer than the tables gets effort and verbosity."""
    config = "model_profiles:\n  answer_quick: {model: gpt-7-nova}\n"
    body = body_of_call(spawn, fake, "answer_quick", config)
    assert body["reasoning"] == {"effort": "low"}
    assert body["text"] == {"verbosity": "low"}


@pytest.mark.parametrize(
    ("model", "sent"),
    [("gpt-4.1", False), ("gpt-4o-mini", False), ("gpt-6.1-terra", True)],
)
def test_the_known_exceptions_take_no_reasoning(spawn, fake, model, sent):
    config = f"model_profiles:\n  answer: {{model: {model}}}\n"
    assert ("reasoning" in body_of_call(spawn, fake, "answer", config)) is sent


def test_a_refused_default_is_adapted_once_with_a_warning_and_remembered(spawn, fake):
    config = "model_profiles:\n  answer_quick: {model: gpt-7-nova}\n"
    server = conftest.start(spawn, fake, config=config)
    fake.enqueue(unsupported_parameter("reasoning.effort"), Reply(text="first"))
    assert server.call("answer_quick", {"query": "q"})["result"]["structuredContent"][
        "answer"
    ].startswith("first")
    refused, adapted = fake.creates
    assert refused.body["reasoning"] == {"effort": "low"}
    assert "reasoning" not in adapted.body and adapted.body["text"] == {"verbosity": "low"}
    # Remembered for the model: the next call does not send it again.
    fake.enqueue(Reply(text="second"))
    server.call("answer_quick", {"query": "q2"})
    assert "reasoning" not in fake.creates[-1].body
    assert len(fake.creates) == 3
    warnings = [line for line in server.stderr.splitlines() if "takes no reasoning_effort" in line]
    assert len(warnings) == 1
    assert "model_profiles.answer_quick.reasoning_effort" in warnings[0]
    assert "gpt-7-nova" in warnings[0]


def test_a_refused_default_value_becomes_the_nearest_the_model_lists(spawn, fake):
    config = "model_profiles:\n  answer_detailed: {model: gpt-7-nova, background: false}\n"
    server = conftest.start(spawn, fake, config=config)
    refusal = Reply(
        status=400,
        error_param="reasoning.effort",
        error_code="unsupported_value",
        error_message="Unsupported value: 'high' is not supported with the 'gpt-7-nova' model. "
        "Supported values are: 'low', 'medium', and 'max'.",
    )
    fake.enqueue(refusal, Reply(text="ok"))
    assert "result" in server.call("answer_detailed", {"query": "q"})
    assert [c.body["reasoning"]["effort"] for c in fake.creates] == ["high", "medium"]
    assert "model_profiles.answer_detailed.reasoning_effort" in server.stderr


# Seed 001's example profile on a model that takes no reasoning or verbosity (a gateway's
# alias, a fine-tune, an older model): its user cannot change the model, only what is sent.
GATEWAY = (
    "model_profiles:\n  answer: {model: acme-llm-2, reasoning_effort: medium, verbosity: medium}\n"
)


def refused_value(value: str, model: str, supported: str) -> Reply:
    return Reply(
        status=400,
        error_param="reasoning.effort",
        error_code="unsupported_value",
        error_message=f"Unsupported value: '{value}' is not supported with the '{model}' model. "
        f"Supported values are: {supported}.",
    )


def test_a_parameter_the_model_takes_none_of_is_left_out_whoever_set_it(spawn, fake):
    """Issue 30: the user's own effort and verbosity, refused as unsupported parameters, are
    left out for that model, each with one warning naming its key; never a failure telling
    the user to change a model they cannot change."""
    server = conftest.start(spawn, fake, config=GATEWAY)
    fake.enqueue(
        unsupported_parameter("reasoning.effort"),
        unsupported_parameter("text.verbosity"),
        Reply(text="first"),
    )
    reply = server.call("answer", {"query": "q"})
    assert "result" in reply, (reply, server.stderr)
    assert reply["result"]["structuredContent"]["answer"].startswith("first"), reply
    first, second, third = (create.body for create in fake.creates)
    assert first["reasoning"] == {"effort": "medium"} and first["text"] == {"verbosity": "medium"}
    assert "reasoning" not in second and second["text"] == {"verbosity": "medium"}
    assert "reasoning" not in third and "text" not in third
    # Remembered for the model, answer_quick's (which inherits answer's) included; said once.
    fake.enqueue(Reply(text="again"), Reply(text="quick"))
    server.call("answer", {"query": "q2"})
    server.call("answer_quick", {"query": "q3"})
    assert all("reasoning" not in c.body and "text" not in c.body for c in fake.creates[3:])
    assert len(fake.creates) == 5
    warnings = [line for line in server.stderr.splitlines() if "acme-llm-2 takes no" in line]
    assert len(warnings) == 2, server.stderr
    assert "model_profiles.answer.reasoning_effort ('medium')" in warnings[0]
    assert "model_profiles.answer.verbosity ('medium')" in warnings[1]
    assert ".model to" not in server.stderr and ".answer.model" not in server.stderr


def test_a_value_the_user_set_that_the_model_refuses_fails_naming_that_key(spawn, fake):
    config = "model_profiles:\n  answer: {model: gpt-7-nova, reasoning_effort: high}\n"
    server = conftest.start(spawn, fake, config=config)
    fake.enqueue(refused_value("high", "gpt-7-nova", "'low' and 'medium'"), Reply(text="no"))
    message = conftest.failure_of(server.call("answer", {"query": "q"}))
    assert message == (
        "answer failed: the API refused reasoning_effort 'high' for gpt-7-nova (HTTP 400): set "
        "model_profiles.answer.reasoning_effort to medium (gpt-7-nova accepts low, medium)"
    )
    assert len(fake.creates) == 1


def test_an_adapted_default_never_replaces_a_value_the_user_set_for_another_tool(spawn, fake):
    """Issue 30 m1: answer_quick's built-in low, refused by gpt-7-nova, is sent as medium for
    answer_quick only; answer_detailed's low, which the user set, stays theirs and fails
    naming its key (it was sent as medium, silently)."""
    config = (
        "model_profiles:\n  answer_quick: {model: gpt-7-nova}\n"
        "  answer_detailed: {model: gpt-7-nova, reasoning_effort: low, background: false}\n"
    )
    server = conftest.start(spawn, fake, config=config)
    fake.enqueue(refused_value("low", "gpt-7-nova", "'medium' and 'high'"), Reply(text="ok"))
    assert "result" in server.call("answer_quick", {"query": "q"})
    assert [c.body["reasoning"]["effort"] for c in fake.creates] == ["low", "medium"]
    fake.enqueue(refused_value("low", "gpt-7-nova", "'medium' and 'high'"), Reply(text="no"))
    message = conftest.failure_of(server.call("answer_detailed", {"query": "q"}))
    assert fake.creates[2].body["reasoning"] == {"effort": "low"}
    assert "set model_profiles.answer_detailed.reasoning_effort to medium" in message
    assert len(fake.creates) == 3


def test_a_value_the_tables_know_the_model_takes_is_not_dropped_on_one_400(spawn, fake):
    """Issue 30 m1: gpt-6.1-terra takes effort medium; one stray 400 fails that call (naming
    no model to change) and the next call sends medium again."""
    server = conftest.start(spawn, fake)
    fake.enqueue(unsupported_parameter("reasoning.effort"), Reply(text="next"))
    message = conftest.failure_of(server.call("answer", {"query": "q"}))
    assert "known to take reasoning_effort 'medium'" in message
    assert ".model" not in message
    assert len(fake.creates) == 1
    assert "result" in server.call("answer", {"query": "q2"})
    assert fake.creates[1].body["reasoning"] == {"effort": "medium"}


@pytest.mark.parametrize(
    ("model", "accepted"),
    [
        ("gpt-6-luna", ("none", "low", "medium", "high", "xhigh", "max")),
        ("gpt-6.1-terra", ("none", "low", "medium", "high", "xhigh", "max")),
        ("gpt-6-sol", ("none", "low", "medium", "high", "xhigh", "max")),
        ("gpt-6.2-sol", ("low", "medium", "high", "xhigh", "max")),
        ("gpt-6.1-sol", ("low", "medium", "high", "xhigh", "max")),
        ("gpt-6-astra", ("low", "medium", "high", "xhigh", "max")),
        ("o4-mini-deep-research", ("medium",)),
    ],
)
def test_the_gpt6_effort_rules_are_known(model, accepted):
    assert m.model_efforts(model) == accepted


def test_none_on_a_gpt6_model_without_it_is_caught_by_the_doctor(tmp_path, fake):
    path = tmp_path / "config.yaml"
    path.write_text("model_profiles:\n  answer_detailed: {reasoning_effort: none}\n")
    proc = conftest.run_cli(
        tmp_path, "--doctor", "--config", str(path), env={"OPENAI_BASE_URL": fake.base_url}
    )
    assert "answer_detailed: model gpt-6.2-sol does not accept reasoning_effort 'none'" in (
        proc.stdout
    )
    assert "set model_profiles.answer_detailed.reasoning_effort to low" in proc.stdout
    assert proc.returncode == 1
