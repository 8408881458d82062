"""The stdio framing layer on its own: FrameReader, encode_message and decode_message."""

from __future__ import annotations

import itertools
import json
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from openai_responses_mcp import (
    _HEADER_LIMIT,
    BOM,
    PARSE_ERROR,
    FrameReader,
    decode_message,
    encode_message,
)

MAX = 4096
PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
PONG = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}


def framed(message, header: bytes = b"Content-Length", sep: bytes = b"\r\n") -> bytes:
    body = message if isinstance(message, bytes) else encode_message(message)
    return header + b": %d" % len(body) + sep + sep + body


def line(message) -> bytes:
    return encode_message(message) + b"\n"


def feed_all(reader: FrameReader, *chunks: bytes) -> list:
    frames = []
    for chunk in chunks:
        frames += reader.feed(chunk)
    return frames


def messages(frames) -> list:
    return [json.loads(f.body) for f in frames if f.kind == "message"]


def kinds(frames) -> list[str]:
    return [f.kind for f in frames]


# -- Content-Length frames -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "header", [b"Content-Length", b"content-length", b"CONTENT-LENGTH", b"cOnTeNt-LeNgTh"]
)
def test_content_length_header_name_is_case_insensitive(header):
    frames = FrameReader(MAX).feed(framed(PING, header))
    assert messages(frames) == [PING]
    assert frames[0].mode == "framed"


def test_extra_headers_such_as_content_type_are_ignored():
    body = encode_message(PING)
    data = (
        b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n"
        b"Content-Length: %d\r\nX-Other: 1\r\n\r\n" % len(body)
    ) + body
    assert messages(FrameReader(MAX).feed(data)) == [PING]


def test_lf_only_header_endings_are_accepted():
    assert messages(FrameReader(MAX).feed(framed(PING, sep=b"\n"))) == [PING]


def test_content_length_counts_utf8_bytes_not_characters():
    message = {"jsonrpc": "2.0", "id": 1, "method": "x", "params": {"q": "日本語 😀 é"}}
    body = encode_message(message)
    assert len(body) > len(body.decode("utf-8"))
    frames = FrameReader(MAX).feed(framed(body) + framed(PING))
    assert messages(frames) == [message, PING]


def test_frame_body_is_not_read_until_all_its_bytes_arrive():
    reader = FrameReader(MAX)
    data = framed(PING)
    assert reader.feed(data[:-1]) == []
    assert messages(reader.feed(data[-1:])) == [PING]


# -- Newline-delimited JSON ------------------------------------------------------------------------


def test_line_message_is_returned_in_line_mode():
    frames = FrameReader(MAX).feed(line(PING))
    assert messages(frames) == [PING]
    assert frames[0].mode == "line"


def test_line_message_with_crlf_ending_is_accepted():
    assert messages(FrameReader(MAX).feed(encode_message(PING) + b"\r\n")) == [PING]


def test_line_message_is_not_returned_before_its_newline():
    reader = FrameReader(MAX)
    assert reader.feed(encode_message(PING)) == []
    assert messages(reader.feed(b"\n")) == [PING]


def test_json_array_line_is_returned_as_a_message():
    """Batches are refused by the dispatcher, not lost by the reader."""
    assert messages(FrameReader(MAX).feed(b"[1, 2]\n")) == [[1, 2]]


def test_blank_lines_between_messages_are_skipped():
    frames = FrameReader(MAX).feed(b"\n\r\n  \n" + line(PING) + b"\n\n" + framed(PONG))
    assert kinds(frames) == ["message", "message"]


# -- Chunking --------------------------------------------------------------------------------------


def test_several_messages_in_one_feed_are_all_returned():
    data = line(PING) + framed(PONG) + line(PONG) + framed(PING)
    assert messages(FrameReader(MAX).feed(data)) == [PING, PONG, PONG, PING]


def test_message_fed_one_byte_at_a_time_is_returned_once():
    data = framed(PING) + line(PONG)
    frames = feed_all(FrameReader(MAX), *(data[i : i + 1] for i in range(len(data))))
    assert messages(frames) == [PING, PONG]


def test_mixed_framings_report_each_message_mode():
    frames = FrameReader(MAX).feed(framed(PING) + line(PING) + framed(PING))
    assert [f.mode for f in frames] == ["framed", "line", "framed"]


# -- Byte order mark -------------------------------------------------------------------------------


def test_bom_at_start_of_stream_is_skipped():
    assert kinds(FrameReader(MAX).feed(BOM + framed(PING))) == ["message"]


def test_bom_between_messages_is_skipped():
    frames = FrameReader(MAX).feed(line(PING) + BOM + line(PONG) + BOM + framed(PING))
    assert kinds(frames) == ["message"] * 3
    assert messages(frames) == [PING, PONG, PING]


@pytest.mark.parametrize("cut", [1, 2])
def test_bom_split_across_feeds_is_skipped(cut):
    reader = FrameReader(MAX)
    assert reader.feed(BOM[:cut]) == []
    frames = reader.feed(BOM[cut:] + line(PING))
    assert kinds(frames) == ["message"]


# -- Garbage and resynchronisation -----------------------------------------------------------------


def test_garbage_line_is_reported_and_the_next_message_is_returned():
    frames = FrameReader(MAX).feed(b"hello, this is not MCP\n" + framed(PING))
    assert kinds(frames) == ["garbage", "message"]
    assert messages(frames) == [PING]


def test_several_garbage_lines_are_skipped_before_a_line_message():
    data = b"Traceback (most recent call last):\n  oops\n\x00\x01\x02\n" + line(PING)
    frames = FrameReader(MAX).feed(data)
    assert "garbage" in kinds(frames)
    assert frames[-1].kind == "message"
    assert messages(frames) == [PING]


def test_header_block_broken_off_by_a_json_line_is_refused_and_yields_that_json_line():
    data = b"Content-Length: 40\r\n" + line(PING)
    frames = FrameReader(MAX).feed(data)
    assert kinds(frames) == ["invalid", "message"]
    assert "blank line" in frames[0].reason
    assert messages(frames) == [PING]


def test_header_lines_without_content_length_broken_off_are_garbage():
    frames = FrameReader(MAX).feed(b"Warning: odd\n" + line(PING))
    assert kinds(frames) == ["garbage", "message"]


def test_header_block_without_content_length_is_refused_and_its_body_skipped():
    data = b"Content-Type: application/json\r\n\r\n" + encode_message(PONG) + framed(PING)
    frames = FrameReader(MAX).feed(data)
    assert kinds(frames) == ["invalid", "message"]
    assert "without a Content-Length" in frames[0].reason
    assert messages(frames) == [PING]


@pytest.mark.parametrize(
    "value", [b"abc", b"-5", b"+5", b"1e3", b"", b"99999999999999999999", "²".encode()]
)
def test_invalid_content_length_is_refused_once_naming_the_value(value):
    data = b"Content-Length: " + value + b"\r\n\r\n" + framed(PING)
    frames = FrameReader(MAX).feed(data)
    assert kinds(frames) == ["invalid", "message"]
    assert "bad Content-Length" in frames[0].reason
    assert messages(frames) == [PING]


def test_garbage_without_newline_is_dropped_once_it_outgrows_the_header_limit():
    reader = FrameReader(MAX)
    frames = feed_all(reader, *[b"x" * 1000] * (_HEADER_LIMIT // 1000 + 2))
    assert kinds(frames) == ["garbage"]
    assert len(reader._buffer) < _HEADER_LIMIT
    frames = reader.feed(b"still garbage\n" + line(PING))
    assert messages(frames) == [PING]


# -- Size limit ------------------------------------------------------------------------------------


def test_line_message_of_exactly_the_limit_is_accepted():
    message = {"p": "x" * (MAX - 8)}
    body = encode_message(message)
    assert len(body) == MAX
    assert messages(FrameReader(MAX).feed(body + b"\n")) == [message]


def test_oversized_line_is_reported_with_its_size_and_skipped():
    body = encode_message({"p": "x" * (MAX - 7)})
    frames = FrameReader(MAX).feed(body + b"\n" + line(PING))
    assert kinds(frames) == ["oversized", "message"]
    assert frames[0].size == MAX + 1
    assert frames[0].mode == "line"
    assert messages(frames) == [PING]


def test_oversized_framed_message_is_reported_with_its_length_and_skipped():
    body = encode_message({"p": "x" * MAX})
    frames = FrameReader(MAX).feed(framed(body) + framed(PING))
    assert kinds(frames) == ["oversized", "message"]
    assert frames[0].size == len(body)
    assert frames[0].mode == "framed"
    assert messages(frames) == [PING]


def test_oversized_line_is_never_buffered_whole():
    reader = FrameReader(MAX)
    chunk = 1000
    body = b'{"p":"' + b"x" * (3 * MAX) + b'"}'
    frames, peak = [], 0
    for i in range(0, len(body), chunk):
        frames += reader.feed(body[i : i + chunk])
        peak = max(peak, len(reader._buffer))
    frames += reader.feed(b"\n" + line(PING))
    assert peak <= MAX + chunk
    assert kinds(frames) == ["oversized", "message"]
    assert messages(frames) == [PING]


def test_oversized_framed_body_is_never_buffered():
    reader = FrameReader(MAX)
    chunk = 1000
    body = b'{"p":"' + b"x" * (3 * MAX) + b'"}'
    frames = reader.feed(b"Content-Length: %d\r\n\r\n" % len(body))
    peak = 0
    for i in range(0, len(body), chunk):
        frames += reader.feed(body[i : i + chunk])
        peak = max(peak, len(reader._buffer))
    frames += reader.feed(framed(PING))
    assert peak == 0
    assert kinds(frames) == ["oversized", "message"]
    assert messages(frames) == [PING]


def test_oversized_message_and_the_next_one_in_a_single_feed_resynchronise():
    big_line = encode_message({"p": "y" * 2 * MAX}) + b"\n"
    big_frame = framed({"p": "z" * 2 * MAX})
    frames = FrameReader(MAX).feed(big_frame + line(PING) + big_line + framed(PONG))
    assert kinds(frames) == ["oversized", "message", "oversized", "message"]
    assert messages(frames) == [PING, PONG]


# -- encode_message --------------------------------------------------------------------------------


def test_encode_is_compact_utf8():
    body = encode_message({"a": [1, 2], "b": "日本 é"})
    assert body == '{"a":[1,2],"b":"日本 é"}'.encode()


def test_encode_falls_back_to_ascii_escapes_for_a_lone_surrogate():
    body = encode_message({"text": "ok \ud800 é"})
    body.decode("ascii")
    assert json.loads(body) == {"text": "ok \ud800 é"}


@pytest.mark.parametrize("text", ["a\nb", "a\r\nb", "\u2028\u2029\x85", "\ud800\n"])
def test_encode_never_contains_a_raw_newline(text):
    body = encode_message({"text": text})
    assert b"\n" not in body
    assert b"\r" not in body
    assert json.loads(body) == {"text": text}


# -- decode_message --------------------------------------------------------------------------------


def test_decode_returns_the_message_and_no_error():
    assert decode_message(encode_message(PING)) == (PING, None)


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(b"{not json}", id="invalid-json"),
        pytest.param(b'{"a": 1', id="truncated"),
        pytest.param(b'{"a": "\xff\xfe"}', id="invalid-utf8"),
        pytest.param(b"[" * 100_000 + b"]" * 100_000, id="deeply-nested"),
        pytest.param(b"", id="empty"),
    ],
)
def test_decode_failure_is_a_parse_error_with_null_id(body):
    message, error = decode_message(body)
    assert message is None
    assert error["jsonrpc"] == "2.0"
    assert error["id"] is None
    assert error["error"]["code"] == PARSE_ERROR
    assert error["error"]["message"].startswith("Parse error")


# -- Properties ------------------------------------------------------------------------------------

PROPERTY = settings(max_examples=200, deadline=None)

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=30)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
rpc_messages = st.fixed_dictionaries(
    {"jsonrpc": st.just("2.0"), "id": st.integers(0, 10**6) | st.text(max_size=10)},
    optional={"method": st.text(max_size=20), "params": json_values},
)
framings = st.sampled_from(["line", "crlf-line", "framed", "lf-framed"])
separators = st.sampled_from([b"", b"\n", b"\r\n", BOM, b"\n" + BOM])


def encode_stream(items: list) -> bytes:
    out = b""
    for message, framing, separator in items:
        if framing == "line":
            out += line(message)
        elif framing == "crlf-line":
            out += encode_message(message) + b"\r\n"
        elif framing == "framed":
            out += framed(message)
        else:
            out += framed(message, sep=b"\n")
        out += separator
    return out


def split_at(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    edges = [0, *points, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(edges)]


@PROPERTY
@given(
    items=st.lists(st.tuples(rpc_messages, framings, separators), min_size=1, max_size=6),
    cuts=st.lists(st.integers(0, 10**6), max_size=20),
)
def test_any_split_of_a_valid_stream_yields_the_same_messages(items, cuts):
    data = encode_stream(items)
    frames = feed_all(FrameReader(1 << 20), *split_at(data, cuts))
    assert kinds(frames) == ["message"] * len(items)
    assert messages(frames) == [message for message, _, _ in items]


# Garbage lines: never start with '{' or '[', never blank, never ':'-free-and-header-like
# followed by a blank line (every garbage line is followed directly by the next line).
GARBAGE_FIRST = "abcXYZ019 !\"#$%&'()*+,-./;<=>?@\\]^_`|}~:"
GARBAGE_REST = GARBAGE_FIRST + "{[\t"
garbage_lines = st.builds(
    lambda first, rest: (first + rest).encode() + b"\n",
    st.sampled_from(GARBAGE_FIRST.replace(" ", "")),
    st.text(GARBAGE_REST, max_size=60),
)


@PROPERTY
@given(
    garbage=st.lists(garbage_lines, min_size=1, max_size=8),
    message=rpc_messages,
    framing=framings,
    cuts=st.lists(st.integers(0, 10**6), max_size=8),
)
def test_garbage_lines_never_stop_the_next_message(garbage, message, framing, cuts):
    data = b"".join(garbage) + encode_stream([(message, framing, b"")])
    frames = feed_all(FrameReader(1 << 20), *split_at(data, cuts))
    assert messages(frames)[-1:] == [message]
    assert frames[-1].kind == "message"


@PROPERTY
@given(
    chunks=st.lists(
        st.binary(max_size=300)
        | st.sampled_from([b"Content-Length: 5\r\n\r\n", b"\n", BOM, b"{", b"[", b"\r\n\r\n"]),
        max_size=30,
    )
)
def test_arbitrary_bytes_never_raise_never_hang_and_stay_bounded(chunks):
    limit = 1024
    reader = FrameReader(limit)
    outcome: dict = {}

    def run() -> None:
        frames, peak = [], 0
        try:
            for chunk in chunks:
                frames += reader.feed(chunk)
                peak = max(peak, len(reader._buffer))
        except Exception as exc:  # noqa: BLE001 - re-raised in the test's thread
            outcome["error"] = exc
        outcome.update(frames=frames, peak=peak)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(10)
    assert not worker.is_alive(), "FrameReader.feed did not return"
    if "error" in outcome:
        raise outcome["error"]
    assert {f.kind for f in outcome["frames"]} <= {"message", "garbage", "oversized", "invalid"}
    assert all(len(f.body) <= limit for f in outcome["frames"])
    assert outcome["peak"] <= limit + _HEADER_LIMIT + 300


# -- One bad frame never glues the next ones together ----------------------------------------------

PING_BODY = encode_message(PING)
BAD_HEADERS = {
    "negative": b"Content-Length: -2\r\n\r\n",
    "plus-sign": b"Content-Length: +2\r\n\r\n",
    "space-before-colon": b"Content-Length : 2\r\n\r\n",
    "no-content-length": b"Content-Type: application/json\r\n\r\n",
    "two-lengths": b"Content-Length: 2\r\nContent-Length: 3\r\n\r\n",
}


@pytest.mark.parametrize("header", BAD_HEADERS.values(), ids=BAD_HEADERS.keys())
def test_bad_header_is_refused_once_and_its_body_does_not_swallow_later_frames(header):
    data = header + encode_message(PONG) + framed(PING) + framed(PONG)
    frames = FrameReader(MAX).feed(data)
    assert kinds(frames) == ["invalid", "message", "message"]
    assert frames[0].reason
    assert messages(frames) == [PING, PONG]
    assert [f.mode for f in frames[1:]] == ["framed", "framed"]


@pytest.mark.parametrize("header", BAD_HEADERS.values(), ids=BAD_HEADERS.keys())
def test_bad_header_then_frames_arriving_later_resynchronise(header):
    """A client that waits for the error before it sends its next frame."""
    reader = FrameReader(MAX)
    frames = reader.feed(header + encode_message(PONG))
    assert kinds(frames) == ["invalid"]
    assert messages(reader.feed(framed(PING)) + reader.feed(framed(PONG))) == [PING, PONG]


def test_space_before_the_colon_is_named_in_the_reason():
    frames = FrameReader(MAX).feed(BAD_HEADERS["space-before-colon"] + framed(PING))
    assert "no space before the colon" in frames[0].reason


@pytest.mark.parametrize("short_by", [1, 5, len(PING_BODY) - 1, len(PING_BODY)])
def test_too_small_length_is_refused_once_and_the_next_frame_is_returned(short_by):
    header = b"Content-Length: %d\r\n\r\n" % (len(PING_BODY) - short_by)
    frames = FrameReader(MAX).feed(header + PING_BODY + framed(PONG) + framed(PING))
    assert messages(frames) == [PONG, PING]
    refused = [f for f in frames if f.kind != "message"]
    assert len(refused) == 1
    assert refused[0].kind == "invalid"
    assert "shorter" in refused[0].reason


@pytest.mark.parametrize("long_by", [1, 10, 30])
def test_too_large_length_is_refused_once_and_the_next_frame_is_returned(long_by):
    header = b"Content-Length: %d\r\n\r\n" % (len(PING_BODY) + long_by)
    frames = FrameReader(MAX).feed(header + PING_BODY + framed(PONG) + framed(PING))
    assert kinds(frames) == ["invalid", "message", "message"]
    assert "Content-Length" in frames[0].reason
    assert messages(frames) == [PONG, PING]


@pytest.mark.parametrize("long_by", [100, 5000, 3_000_000])
@pytest.mark.parametrize("then", ["framed", "line"])
def test_a_length_too_large_by_far_is_refused_when_the_next_message_arrives(long_by, then):
    """The client waits for each answer: the frames after it must not fill the missing bytes."""
    reader = FrameReader(1 << 22)
    header = b"Content-Length: %d\r\n\r\n" % (len(PING_BODY) + long_by)
    ending = b"\n" if then == "line" else b""  # a line client ends what it writes with one
    assert reader.feed(header + PING_BODY + ending) == []  # the rest of the body may be coming
    after = reader.feed(framed(PONG) if then == "framed" else line(PONG))
    assert kinds(after) == ["invalid", "message"]
    assert f"Content-Length {len(PING_BODY) + long_by} is longer" in after[0].reason
    assert messages(after) == [PONG] and after[1].mode == then
    assert messages(reader.feed(framed(PING))) == [PING]


@pytest.mark.parametrize("then", ["framed", "line"])
def test_a_length_that_ends_exactly_at_the_next_messages_end_is_refused(then):
    """The body then ends with `}` like a message, but holds one message and more."""
    follow = framed(PONG) if then == "framed" else b"\n" + line(PONG)[:-1]
    data = b"Content-Length: %d\r\n\r\n" % (len(PING_BODY) + len(follow)) + PING_BODY + follow
    frames = FrameReader(MAX).feed(data + b"\n" + line(PING))
    assert kinds(frames) == ["invalid", "message", "message"]
    assert "is longer than the message it holds" in frames[0].reason
    assert messages(frames) == [PONG, PING]


def test_a_pending_body_holding_content_length_text_is_not_cut():
    """Only a whole message before the header or line counts, not text inside a string."""
    inner = {"jsonrpc": "2.0", "id": 3, "method": "x",
             "params": {"q": '}\nContent-Length: 5\r\n\r\n{}\n{"a": 1}'}}  # fmt: skip
    pretty = json.dumps(inner, indent=2).encode()  # a body with newlines of its own
    for body in (encode_message(inner), pretty):
        data = b"Content-Length: %d\r\n\r\n" % len(body) + body
        assert messages(feed_all(FrameReader(MAX), *split_at(data, range(0, len(data), 7)))) == [
            inner
        ]


def test_json_running_into_a_header_is_refused_and_the_frame_kept():
    frames = FrameReader(MAX).feed(b'{"jsonrpc":' + framed(PING))
    assert kinds(frames) == ["invalid", "message"]
    assert messages(frames) == [PING]


def test_a_json_line_mentioning_content_length_is_one_message():
    message = {"jsonrpc": "2.0", "id": 1, "method": "x", "params": {"q": "Content-Length: 40"}}
    frames = FrameReader(MAX).feed(line(message) + line(PING))
    assert messages(frames) == [message, PING]


def test_garbage_running_into_a_header_stops_at_the_header():
    frames = FrameReader(MAX).feed(b"npm WARN odd" + framed(PING))
    assert kinds(frames) == ["garbage", "message"]
    assert messages(frames) == [PING]


def test_junk_header_block_then_a_json_line_yields_the_json_line():
    """An NDJSON client behind a wrapper that printed a header-like line."""
    frames = FrameReader(MAX).feed(b"Note: starting\n\n" + line(PING))
    assert kinds(frames) == ["invalid", "message"]
    assert messages(frames) == [PING]


@pytest.mark.parametrize("text", [b"42", b'"hello"', b"null", b"true", b"-1.5"])
def test_a_json_line_that_is_not_an_object_is_a_message(text):
    frames = FrameReader(MAX).feed(text + b"\n" + line(PING))
    assert kinds(frames) == ["message", "message"]
    assert frames[0].body == text
    assert frames[0].mode == "line"


@pytest.mark.parametrize("text", [b"nope", b"true story", b"42 is the answer", b"-- note"])
def test_text_that_only_starts_like_json_is_garbage(text):
    assert kinds(FrameReader(MAX).feed(text + b"\n" + line(PING))) == ["garbage", "message"]


def test_framed_message_reports_its_content_length():
    frames = FrameReader(MAX).feed(framed(PING))
    assert frames[0].size == len(PING_BODY)


# After any garbage or bad frame, the next valid message is read. Garbage never contains a
# whole `Content-Length` header name: bytes that make a valid header ARE a frame.
random_garbage = st.binary(max_size=200).filter(lambda b: b"ength" not in b.lower())
bad_header_frames = st.builds(
    lambda header, message: header + encode_message(message),
    st.sampled_from(list(BAD_HEADERS.values())),
    rpc_messages,
)
wrong_length_frames = st.builds(
    lambda message, delta: (
        b"Content-Length: %d\r\n\r\n" % max(0, len(encode_message(message)) + delta)
        + encode_message(message)
    ),
    rpc_messages,
    st.integers(-200, 12).filter(bool) | st.integers(13, 100_000),
)
scalar_lines = st.sampled_from([b"42\n", b'"hello"\n', b"null\n", b"true\n", b"[]\n"])
bad_inputs = (
    st.builds(lambda b: b + b"\n", random_garbage)
    | bad_header_frames
    | wrong_length_frames
    | scalar_lines
)


@PROPERTY
@given(
    bad=st.lists(bad_inputs, min_size=1, max_size=3),
    message=rpc_messages,
    framing=st.sampled_from(["line", "framed"]),
    cuts=st.lists(st.integers(0, 10**6), max_size=8),
)
def test_after_any_bad_input_the_next_valid_message_is_read(bad, message, framing, cuts):
    marker = {**message, "id": "next-valid"}
    valid = line(marker) if framing == "line" else framed(marker)
    # A line client ends what it writes with a newline; a framed client does not.
    data = b"".join(item + b"\n" if framing == "line" else item for item in bad) + valid
    frames = feed_all(FrameReader(1 << 20), *split_at(data, cuts))
    assert frames[-1].kind == "message"
    assert json.loads(frames[-1].body) == marker
    assert frames[-1].mode == framing
