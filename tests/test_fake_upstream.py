"""The fake Responses API's rules for today's models, each checked through the real SDK: the
GPT-6 reasoning efforts, gpt-4.1's lack of reasoning, cache writes in usage, shutdown dates on
GET /v1/models, and a retired model's 404. The server's own tests rely on these rules."""

from __future__ import annotations

import datetime

import openai
import pytest
from conftest import TEST_KEY
from fake_upstream import SHUTDOWN_DATES, Reply


def client_for(fake):
    return openai.OpenAI(api_key=TEST_KEY, base_url=fake.base_url, max_retries=0)


def day(offset: int) -> str:
    return (
        datetime.datetime.now(datetime.timezone.utc).date() + datetime.timedelta(offset)
    ).isoformat()


@pytest.mark.parametrize(
    ("model", "effort", "accepted"),
    [
        ("gpt-6.1-terra", "none", True),
        ("gpt-6-luna", "none", True),
        ("gpt-6-sol", "none", True),
        ("gpt-6.2-sol", "none", False),
        ("gpt-6.1-sol", "none", False),
        ("gpt-6-astra", "none", False),
        ("gpt-6.2-sol", "max", True),
        ("gpt-6-luna", "low", True),
        ("gpt-6-luna", "minimal", False),
        ("gpt-6.1-terra", "minimal", False),
    ],
)
def test_gpt6_models_take_low_to_max_none_only_three_of_them_and_never_minimal(
    fake, model, effort, accepted
):
    client = client_for(fake)
    fake.enqueue(Reply(text="ok"))
    if accepted:
        reply = client.responses.create(model=model, input="hi", reasoning={"effort": effort})
        assert reply.output_text == "ok"
        return
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model=model, input="hi", reasoning={"effort": effort})
    takes = "'none', " if model in ("gpt-6-sol", "gpt-6-luna", "gpt-6.1-terra") else ""
    assert caught.value.body == {
        "message": (
            f"Unsupported value: '{effort}' is not supported with the '{model}' model. "
            f"Supported values are: {takes}'low', 'medium', 'high', 'xhigh', and 'max'."
        ),
        "type": "invalid_request_error",
        "param": "reasoning.effort",
        "code": "unsupported_value",
    }
    assert fake.queued == 1  # refused before anything was created


def test_gpt41_and_gpt4o_take_no_reasoning(fake):
    client = client_for(fake)
    for model in ("gpt-4.1", "gpt-4o-mini"):
        with pytest.raises(openai.BadRequestError) as caught:
            client.responses.create(model=model, input="hi", reasoning={"effort": "low"})
        assert (caught.value.code, caught.value.param) == (
            "unsupported_parameter",
            "reasoning.effort",
        )
    fake.enqueue(Reply(text="plain"))
    assert client.responses.create(model="gpt-4.1", input="hi").output_text == "plain"


def test_usage_reports_cache_writes_by_retention_in_the_sdks_shape(fake):
    client = client_for(fake)
    written = {"cache_write_tokens": 3000}
    written["cache_write_tokens_details"] = {"ttl_30m_tokens": 1000, "ttl_12h_tokens": 2000}
    fake.enqueue(Reply(usage={"input_tokens": 5000, "input_tokens_details": written}))
    details = client.responses.create(model="gpt-6.2-sol", input="hi").usage.input_tokens_details
    assert details.cache_write_tokens == 3000
    assert details.cache_write_tokens_details.ttl_30m_tokens == 1000
    assert details.cache_write_tokens_details.ttl_12h_tokens == 2000
    fake.enqueue(Reply())
    plain = client.responses.create(model="gpt-6-luna", input="hi").usage.input_tokens_details
    assert plain.cache_write_tokens == 0
    assert plain.cache_write_tokens_details.ttl_12h_tokens == 0


def test_models_carry_their_shutdown_date(fake):
    client = client_for(fake)
    fake.shutdown_dates["gpt-5.2"] = day(30)
    listed = {model.id: model.shutdown_date for model in client.models.list()}
    assert listed["gpt-5.2"] == day(30)
    # The deprecations page's dates, for each of its models not shut down yet (by the fake's
    # clock, UTC, OpenAI's), on any day this runs.
    for model, date in SHUTDOWN_DATES.items():
        assert listed.get(model, date) == date
        if model in fake.models:
            assert (model in listed) == (date > day(0)), model
    assert listed["gpt-6.1-terra"] is None  # none announced
    assert client.models.retrieve("gpt-5.2").shutdown_date == day(30)
    assert client.models.retrieve("gpt-6-luna").shutdown_date is None


def test_a_model_past_its_shutdown_date_is_gone(fake):
    client = client_for(fake)
    fake.models.append("gpt-5.2-retiring")
    fake.shutdown_dates["gpt-5.2-retiring"] = day(0)  # shut down today
    fake.enqueue(Reply(text="for the next request"))
    with pytest.raises(openai.NotFoundError) as caught:
        client.responses.create(model="gpt-5.2-retiring", input="hi")
    assert caught.value.code == "model_not_found"
    assert "gpt-5.2-retiring" in caught.value.message
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("gpt-5.2-retiring")
    assert "gpt-5.2-retiring" not in {model.id for model in client.models.list()}
    assert fake.queued == 1  # no Reply consumed
    fake.shutdown_dates["gpt-5.2-retiring"] = day(1)  # tomorrow: still served
    assert client.responses.create(model="gpt-5.2-retiring", input="hi").output_text == (
        "for the next request"
    )
