"""The fake Responses API's rules for today's models, each checked through the real SDK: the
GPT-6 reasoning efforts, gpt-4.1's lack of reasoning, cache writes in usage, shutdown dates on
GET /v1/models, and a retired model's 404. The server's own tests rely on these rules."""

from __future__ import annotations

import datetime

import openai
import pytest
from conftest import TEST_KEY
from fake_upstream import PDF_PAGE_TOKENS, Reply, shutdown_dates_today


def client_for(fake):
    return openai.OpenAI(api_key=TEST_KEY, base_url=fake.base_url, max_retries=0)


def day(offset: int) -> str:
    """A date `offset` days from the fake's today: UTC, as OpenAI retires models by it."""
    today = datetime.datetime.now(datetime.timezone.utc).date()  # clock: utc
    return (today + datetime.timedelta(offset)).isoformat()


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
    # The deprecations page's dates (as far ahead of today as they were of the day they were
    # read), for each of its models not shut down yet (by the fake's clock, UTC, OpenAI's).
    for model, date in shutdown_dates_today().items():
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


# -- input parts: input_image and input_file as the SDK's types define them (issue 32) -------------

PNG_1024x768 = (
    b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"
    + (1024).to_bytes(4, "big")
    + (768).to_bytes(4, "big")
    + b"\x08\x02\x00\x00\x00"
)
PDF_3_PAGES = b"%PDF-1.4\n" + b"".join(b"<< /Type /Page >>\n" for _ in range(3)) + b"/Type /Pages"


def data_url(mime: str, data: bytes) -> str:
    import base64

    return f"data:{mime};base64,{base64.b64encode(data).decode()}"


def with_parts(*parts) -> list:
    return [{"role": "user", "content": [{"type": "input_text", "text": "what is it?"}, *parts]}]


def refusal(fake, *parts) -> dict:
    fake.enqueue(Reply(text="unused"))
    with pytest.raises(openai.BadRequestError) as caught:
        client_for(fake).responses.create(model="gpt-6.1-terra", input=with_parts(*parts))
    assert fake.queued == 1, "a refused create consumes no Reply"
    return caught.value.body


def img(**fields) -> dict:
    return {"type": "input_image", **fields}


def fil(**fields) -> dict:
    return {"type": "input_file", **fields}


PDF_DATA = "data:application/pdf;base64,JVBERg=="


@pytest.mark.parametrize(
    ("part", "param", "code"),
    [
        (img(image_url="https://example.com/a.png"), "detail", "missing"),
        (img(image_url="https://e.com/a.png", detail="max"), "detail", "value"),
        (img(detail="auto"), "", None),
        (img(detail="low", image_url="https://e.com/a", file_id="file-1"), "", None),
        (img(detail="low", image_url="data:text/plain;base64,aGk="), "image_url", "value"),
        (img(detail="low", image_url="data:image/png;base64,@@"), "image_url", "value"),
        (fil(file_data=PDF_DATA), "filename", "missing"),
        (fil(filename="a.pdf", file_data="JVBERg=="), "file_data", "value"),
        (fil(filename="a.pdf"), "", None),
        (fil(file_url="ftp://e.com/a.pdf"), "file_url", "value"),
        (fil(file_url="https://e.com/a.pdf", detail="original"), "detail", "value"),
        ({"type": "input_video", "url": "https://e.com/a.mp4"}, "type", "value"),
    ],
)
def test_a_malformed_input_part_is_the_apis_400_naming_the_parameter(fake, part, param, code):
    body = refusal(fake, part)
    where = "input[0].content[1]"
    assert body["type"] == "invalid_request_error"
    assert body["param"] == (f"{where}.{param}" if param else where)
    assert (
        body["code"]
        == {
            "missing": "missing_required_parameter",
            "value": "invalid_value",
            None: None,
        }[code]
    )
    if code == "missing":
        assert body["message"] == f"Missing required parameter: '{where}.{param}'."


def test_well_formed_parts_are_taken_and_billed_by_what_they_are_not_their_base64(fake):
    client = client_for(fake)
    shot = data_url("image/png", PNG_1024x768 + b"\0" * 30_000)  # base64 of 40 KB: not tokens
    pdf = {
        "type": "input_file",
        "filename": "spec.pdf",
        "file_data": data_url("application/pdf", PDF_3_PAGES),
    }
    tokens = {}
    for name, parts in {
        "text": [],
        "low": [{"type": "input_image", "detail": "low", "image_url": shot}],
        "high": [{"type": "input_image", "detail": "high", "image_url": shot}],
        "pdf": [pdf],
        "url": [{"type": "input_file", "file_url": "https://example.com/spec.pdf"}],
    }.items():
        fake.enqueue(Reply(text="ok"))
        reply = client.responses.create(model="gpt-6.1-terra", input=with_parts(*parts))
        assert reply.output_text == "ok"
        tokens[name] = reply.usage.input_tokens
    assert tokens["low"] - tokens["text"] == 85
    assert tokens["high"] - tokens["text"] == 765  # 1024 x 768 -> 1024 x 768 -> 2 x 2 tiles
    assert tokens["pdf"] - tokens["text"] == 3_000  # three pages


def test_a_pdfs_pages_in_a_compressed_object_stream_are_billed(fake):
    import zlib

    objects = zlib.compress(b"".join(b"<< /Type /Page >>\n" for _ in range(5)))
    pdf = b"%PDF-1.7\n<< /Type /ObjStm /N 5 >>\nstream\n" + objects + b"\nendstream\n%%EOF"
    part = {
        "type": "input_file",
        "filename": "p.pdf",
        "file_data": data_url("application/pdf", pdf),
    }
    fake.enqueue(Reply(text="ok"))
    reply = client_for(fake).responses.create(model="gpt-6.1-terra", input=with_parts(part))
    fake.enqueue(Reply(text="ok"))
    bare = client_for(fake).responses.create(model="gpt-6.1-terra", input=with_parts())
    assert reply.usage.input_tokens - bare.usage.input_tokens == 5 * PDF_PAGE_TOKENS


# -- completion windows (issue 41): refused as BackgroundOptions says, polled to their end ----


@pytest.mark.parametrize(
    ("settings", "words"),
    [
        ({}, "requires 'background': true"),
        ({"background": False}, "requires 'background': true"),
        ({"background": True, "stream": True}, "cannot be used with 'stream': true"),
        ({"background": True, "service_tier": "flex"}, "only available with Standard"),
        ({"background": True, "service_tier": "priority"}, "only available with Standard"),
    ],
)
def test_a_window_without_background_streamed_or_off_standard_is_refused(fake, settings, words):
    client = client_for(fake)
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(
            model="gpt-6.1-terra",
            input="hi",
            background_options={"completion_window": "8h"},
            **settings,
        )
    assert caught.value.body["param"] == "background_options"
    assert caught.value.body["type"] == "invalid_request_error"
    assert words in caught.value.body["message"]
    assert fake.background_ids == []  # nothing was created


def test_an_unknown_window_is_refused_and_soonest_streams_as_always(fake):
    client = client_for(fake)
    with pytest.raises(openai.BadRequestError) as caught:
        client.post(
            "/responses",
            body={
                "model": "gpt-6.1-terra",
                "input": "hi",
                "background": True,
                "background_options": {"completion_window": "1h"},
            },
            cast_to=object,
        )
    assert "Supported values are: 'soonest', '2h', and '8h'" in caught.value.body["message"]
    events = client.responses.create(
        model="gpt-6.1-terra",
        input="hi",
        background=True,
        stream=True,
        background_options={"completion_window": "soonest"},
    )
    assert [e.type for e in events][-1] == "response.completed"


def test_a_windowed_run_is_queued_then_in_progress_for_its_polls_then_completed(fake):
    fake.window_polls = 2
    client = client_for(fake)
    created = client.responses.create(
        model="gpt-6.1-terra",
        input="hi",
        background=True,
        background_options={"completion_window": "2h"},
    )
    assert created.status == "queued" and created.usage is None
    seen = [client.responses.retrieve(created.id).status for _ in range(2)]
    assert seen == ["queued", "in_progress"]
    done = client.responses.retrieve(created.id)
    assert done.status == "completed" and done.output_text and done.usage.output_tokens
    assert done.service_tier == "default"
    with pytest.raises(openai.BadRequestError) as caught:  # no stream to read it from
        for _ in client.responses.retrieve(created.id, stream=True):
            pass
    assert caught.value.body["param"] == "stream"


def test_a_windowed_run_is_cancelled_while_it_waits(fake):
    fake.window_polls = 100
    client = client_for(fake)
    created = client.responses.create(
        model="gpt-6.1-terra",
        input="hi",
        background=True,
        background_options={"completion_window": "8h"},
    )
    assert client.responses.cancel(created.id).status == "cancelled"
    assert client.responses.retrieve(created.id).status == "cancelled"


def test_a_gateway_without_the_parameter_refuses_any_window(fake):
    fake.refuse_windows = True
    client = client_for(fake)
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(
            model="gpt-6.1-terra",
            input="hi",
            background=True,
            background_options={"completion_window": "8h"},
        )
    assert caught.value.body["code"] == "unsupported_parameter"
    assert caught.value.body["param"] == "background_options"
