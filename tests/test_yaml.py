"""Specification of the YAML subset accepted by parse_yaml, written as tests."""

import json
import math
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from openai_responses_mcp import ConfigError, parse_yaml


def load(text: str) -> object:
    return parse_yaml(text)[0]


def value_of(scalar: str) -> object:
    return load(f"k: {scalar}\n")["k"]


def error(text: str, source: str = "config.yaml") -> str:
    with pytest.raises(ConfigError) as info:
        parse_yaml(text, source)
    return str(info.value)


# --- scalars (YAML 1.2 core schema) ---------------------------------------------------------


@pytest.mark.parametrize(
    ("scalar", "expected"),
    [
        ("0", 0),
        ("42", 42),
        ("-7", -7),
        ("+3", 3),
        ("007", 7),
        ("0o17", 15),
        ("0x1F", 31),
        ("300000", 300000),
        ("1.5", 1.5),
        ("-0.25", -0.25),
        ("1e3", 1000.0),
        ("1.5E-2", 0.015),
        (".5", 0.5),
        ("1.", 1.0),
        (".inf", math.inf),
        ("-.Inf", -math.inf),
        ("+.INF", math.inf),
        ("true", True),
        ("True", True),
        ("TRUE", True),
        ("false", False),
        ("False", False),
        ("FALSE", False),
        ("null", None),
        ("Null", None),
        ("NULL", None),
        ("~", None),
        ("", None),
    ],
)
def test_typed_scalars(scalar: str, expected: object) -> None:
    got = value_of(scalar)
    assert got == expected and type(got) is type(expected)


@pytest.mark.parametrize(
    "scalar",
    [
        "yes", "no", "on", "off", "y", "n", "tRUE", "nULL", "1_000", "0b101", "0x", "1e", "1.2.3",
        "inf", "nan", "-0x1", "12:30", "1,000", "v1.2", "gpt-5.2", "Asia/Tokyo", "~/.config/x",
    ],
)  # fmt: skip
def test_other_plain_scalars_are_strings(scalar: str) -> None:
    assert value_of(scalar) == scalar


def test_nan() -> None:
    assert math.isnan(value_of(".nan")) and math.isnan(value_of(".NaN"))


def test_plain_strings_with_colons_and_unicode() -> None:
    assert value_of("https://api.openai.com/v1") == "https://api.openai.com/v1"
    assert value_of("a:b") == "a:b"
    assert value_of("日本語 テキスト") == "日本語 テキスト"
    assert load("日本語: 値\n") == {"日本語": "値"}


def test_plain_scalar_keeps_inner_spaces_and_brackets() -> None:
    assert value_of("hello   world") == "hello   world"
    assert value_of("a[0] {x} b,c") == "a[0] {x} b,c"
    assert value_of("50%") == "50%"
    assert value_of("-5x") == "-5x"
    assert value_of("a - b") == "a - b"


def test_huge_int_is_refused_not_crashing() -> None:
    assert "integer is too long" in error("k: " + "9" * 5000)


# --- strings & escapes ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("scalar", "expected"),
    [
        ('"123"', "123"),
        ('"true"', "true"),
        ('"null"', "null"),
        ('""', ""),
        ("''", ""),
        ("'123'", "123"),
        ('"a # not a comment"', "a # not a comment"),
        ("'a # not a comment'", "a # not a comment"),
        ('"key: value"', "key: value"),
        ('"  padded  "', "  padded  "),
        ("'it''s'", "it's"),
        ("'back\\slash \\n'", "back\\slash \\n"),
        ("'say \"hi\"'", 'say "hi"'),
        ('"it\'s"', "it's"),
        ('"日本語"', "日本語"),
    ],
)
def test_quoted_strings(scalar: str, expected: str) -> None:
    assert value_of(scalar) == expected


@pytest.mark.parametrize(
    ("escape", "char"),
    [
        ('\\"', '"'),
        ("\\\\", "\\"),
        ("\\n", "\n"),
        ("\\t", "\t"),
        ("\\r", "\r"),
        ("\\0", "\0"),
        ("\\/", "/"),
        ("\\u00e9", "é"),
        ("\\u65E5", "日"),
        ("\\U0001F600", "\U0001f600"),
        ("\\ud83d\\ude00", "\U0001f600"),
        ("\\x41", "A"),
        ("\\e", "\x1b"),
        ("\\ ", " "),
        ("\\_", "\xa0"),
    ],
)
def test_double_quoted_escapes(escape: str, char: str) -> None:
    assert value_of(f'"<{escape}>"') == f"<{char}>"


def test_quoted_keys() -> None:
    assert load('"a b": 1\n\'c:d\': 2\n"": 3\n') == {"a b": 1, "c:d": 2, "": 3}
    assert load('"x" : 1\n') == {"x": 1}


def test_keys_are_always_strings() -> None:
    assert load("1: a\ntrue: b\nnull: c\n") == {"1": "a", "true": "b", "null": "c"}


# --- comments ---------------------------------------------------------------------------------


def test_full_line_and_trailing_comments() -> None:
    text = "# top\n  # indented comment\na: 1 # one\nb: x   # two\n#c: 3\n"
    assert load(text) == {"a": 1, "b": "x"}


def test_hash_without_preceding_space_is_content() -> None:
    assert value_of("a#b") == "a#b"
    assert value_of("C#") == "C#"
    assert load("a#b: 1\n") == {"a#b": 1}


def test_hash_inside_quotes_is_content() -> None:
    assert value_of('"#x" # real comment') == "#x"
    assert value_of("'a #b'  # c") == "a #b"


def test_comment_after_key_with_nested_block() -> None:
    assert load("a:   # note\n  b: 1\n") == {"a": {"b": 1}}


def test_comment_after_flow_and_tab_before_comment() -> None:
    assert load("a: [1, 2] # c\nb: x\t# c\n") == {"a": [1, 2], "b": "x"}


def test_only_comments_and_blanks_is_empty() -> None:
    assert parse_yaml("") == ({}, {})
    assert parse_yaml("# nothing\n\n   \n# here\n") == ({}, {})


# --- documents, line endings ------------------------------------------------------------------


def test_bom_crlf_and_trailing_whitespace() -> None:
    assert load("\ufeffa: 1  \r\nb:\r\n  - x \t\r\n") == {"a": 1, "b": ["x"]}


def test_lone_cr_line_endings() -> None:
    assert load("a: 1\rb: 2\r") == {"a": 1, "b": 2}


def test_leading_document_marker() -> None:
    assert load("---\na: 1\n") == {"a": 1}
    assert load("# c\n--- # c\na: 1\n") == {"a": 1}
    assert load("---\n") == {}


def test_no_trailing_newline() -> None:
    assert load("a: 1") == {"a": 1}


def test_single_value_document() -> None:
    assert load("hello") == "hello"
    assert load("[1, 2]") == [1, 2]
    assert load("{a: 1}  # c") == {"a": 1}


# --- block mappings ---------------------------------------------------------------------------


def test_simple_mapping_keeps_order() -> None:
    got = load("b: 1\na: two\nc: 3.0\n")
    assert got == {"b": 1, "a": "two", "c": 3.0} and list(got) == ["b", "a", "c"]


def test_nested_mappings() -> None:
    assert load("a:\n  b:\n    c: 1\n  d: 2\ne: 3\n") == {"a": {"b": {"c": 1}, "d": 2}, "e": 3}


def test_any_consistent_indent_width() -> None:
    assert load("a:\n    b: 1\n    c:\n     d: 2\n") == {"a": {"b": 1, "c": {"d": 2}}}


def test_empty_value_is_none() -> None:
    assert load("a:\nb: 1\n") == {"a": None, "b": 1}
    assert load("a:\n") == {"a": None}
    assert load("a:\n  b:\nc:\n") == {"a": {"b": None}, "c": None}


def test_whole_document_may_be_indented() -> None:
    assert load("  a: 1\n  b: 2\n") == {"a": 1, "b": 2}


def test_space_before_colon_and_tab_after_colon() -> None:
    assert load("a  : 1\nb:\t2\n") == {"a": 1, "b": 2}


def test_nested_scalar_on_next_line() -> None:
    assert load("a:\n  value\n") == {"a": "value"}


def test_blank_lines_and_comments_between_entries() -> None:
    assert load("a:\n\n  # c\n  b: 1\n\n\nc: 2\n") == {"a": {"b": 1}, "c": 2}


# --- block sequences --------------------------------------------------------------------------


def test_sequence_indented_under_key() -> None:
    assert load("a:\n  - x\n  - 1\n") == {"a": ["x", 1]}


def test_sequence_not_indented_under_key() -> None:
    assert load("a:\n- x\n- y\nb: 2\n") == {"a": ["x", "y"], "b": 2}


def test_top_level_sequence() -> None:
    assert load("- a\n- b\n") == ["a", "b"]


def test_sequence_of_mappings() -> None:
    text = "- name: x\n  n: 1\n- name: y\n  n: 2\n"
    assert load(text) == [{"name": "x", "n": 1}, {"name": "y", "n": 2}]


def test_sequence_item_mapping_with_wider_gap() -> None:
    assert load("-   a: 1\n    b: 2\n") == [{"a": 1, "b": 2}]


def test_nested_sequences() -> None:
    assert load("- - a\n  - b\n- - c\n") == [["a", "b"], ["c"]]
    assert load("-\n  - a\n") == [["a"]]


def test_empty_items_are_none() -> None:
    assert load("- \n-\n- x\n") == [None, None, "x"]
    assert load("- # comment\n- x\n") == [None, "x"]


def test_item_with_block_on_next_lines() -> None:
    assert load("-\n  a: 1\n  b: 2\n") == [{"a": 1, "b": 2}]


def test_sequence_under_key_inside_sequence_item() -> None:
    assert load("- a:\n  - x\n  b: 1\n- c\n") == [{"a": ["x"], "b": 1}, "c"]


def test_sequence_items_of_every_kind() -> None:
    text = '- plain\n- "quoted"\n- 3\n- [1, 2]\n- {a: b}\n- null\n'
    assert load(text) == ["plain", "quoted", 3, [1, 2], {"a": "b"}, None]


# --- flow collections -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("flow", "expected"),
    [
        ("[]", []),
        ("{}", {}),
        ("[ ]", []),
        ('["a", "b"]', ["a", "b"]),
        ("[jma.go.jp, tenki.jp]", ["jma.go.jp", "tenki.jp"]),
        ("[1, -2.5, true, null, ~, x y]", [1, -2.5, True, None, None, "x y"]),
        ("{ timeout_ms: 300000, max_retries: 3 }", {"timeout_ms": 300000, "max_retries": 3}),
        ("{a: 1,}", {"a": 1}),
        ("[1, 2,]", [1, 2]),
        ("{a: , b: 2}", {"a": None, "b": 2}),
        ("{a:}", {"a": None}),
        ('{"a":1, \'b\':2}', {"a": 1, "b": 2}),
        ("[http://x.y/z, a:b]", ["http://x.y/z", "a:b"]),
        ("['a,b', \"c]d\", 'e # f']", ["a,b", "c]d", "e # f"]),
        ("[a#b]", ["a#b"]),
        ("[日本, 語]", ["日本", "語"]),
        ("{ d: { recency_days: 60, domains: [] } }", {"d": {"recency_days": 60, "domains": []}}),
        ("[[1, [2]], {a: [3]}]", [[1, [2]], {"a": [3]}]),
    ],
)  # fmt: skip
def test_flow_collections(flow: str, expected: object) -> None:
    assert value_of(flow) == expected


def test_flow_keys_are_strings() -> None:
    assert value_of("{1: a, true: b}") == {"1": "a", "true": "b"}


# --- nesting ----------------------------------------------------------------------------------


def test_mixed_nesting() -> None:
    text = (
        "servers:\n"
        "  - name: a\n"
        "    ports: [80, 443]\n"
        "    env:\n"
        "      DEBUG: false\n"
        "    tags:\n"
        "      - x\n"
        "      - {k: v}\n"
        "  - name: b\n"
        "after: { n: [1, {m: 2}] }\n"
    )
    assert load(text) == {
        "servers": [
            {"name": "a", "ports": [80, 443], "env": {"DEBUG": False}, "tags": ["x", {"k": "v"}]},
            {"name": "b"},
        ],
        "after": {"n": [1, {"m": 2}]},
    }


def test_dedent_several_levels_at_once() -> None:
    assert load("a:\n  b:\n    c:\n      d: 1\ne: 2\n") == {"a": {"b": {"c": {"d": 1}}}, "e": 2}


def test_moderately_deep_nesting_is_fine() -> None:
    assert value_of("[" * 50 + "]" * 50) == eval("[" * 50 + "]" * 50)


# --- line map ---------------------------------------------------------------------------------


FULL_DOC = """\
# openai-responses-mcp configuration
openai:
  api_key_env: OPENAI_API_KEY
  base_url: https://api.openai.com/v1

request: { timeout_ms: 300000, max_retries: 3 }

model_profiles:
  answer:           # 必須・基準プロファイル
    model: gpt-5.2
    reasoning_effort: medium
    verbosity: medium
  answer_detailed:  # オプション・詳細分析用
    model: gpt-5.1-codex
    reasoning_effort: high
    verbosity: high
  answer_quick:
    model: "gpt-5.2-chat-latest"
    reasoning_effort: low
    verbosity: low

policy:
  max_citations: 3
  timezone: Asia/Tokyo
  system:
    source: file
    path: ~/.config/openai-responses-mcp/policy.md
    merge: append

search:
  defaults: { recency_days: 60, max_results: 5, domains: [] }

server: { debug: false, debug_file: null, show_config_on_start: false }
list_example:
  - jma.go.jp
  - "tenki.jp"   # quoted
  - { name: x, n: 1 }
"""

FULL_VALUE = {
    "openai": {"api_key_env": "OPENAI_API_KEY", "base_url": "https://api.openai.com/v1"},
    "request": {"timeout_ms": 300000, "max_retries": 3},
    "model_profiles": {
        "answer": {"model": "gpt-5.2", "reasoning_effort": "medium", "verbosity": "medium"},
        "answer_detailed": {
            "model": "gpt-5.1-codex",
            "reasoning_effort": "high",
            "verbosity": "high",
        },
        "answer_quick": {
            "model": "gpt-5.2-chat-latest",
            "reasoning_effort": "low",
            "verbosity": "low",
        },
    },
    "policy": {
        "max_citations": 3,
        "timezone": "Asia/Tokyo",
        "system": {
            "source": "file",
            "path": "~/.config/openai-responses-mcp/policy.md",
            "merge": "append",
        },
    },
    "search": {"defaults": {"recency_days": 60, "max_results": 5, "domains": []}},
    "server": {"debug": False, "debug_file": None, "show_config_on_start": False},
    "list_example": ["jma.go.jp", "tenki.jp", {"name": "x", "n": 1}],
}


def test_full_config_document() -> None:
    value, _ = parse_yaml(FULL_DOC, "config.yaml")
    assert value == FULL_VALUE
    assert json.dumps(value) == json.dumps(FULL_VALUE)  # same key order, same types


def test_full_config_document_with_crlf_and_bom() -> None:
    assert load("\ufeff" + FULL_DOC.replace("\n", "\r\n")) == FULL_VALUE


@pytest.mark.parametrize(
    ("path", "line"),
    [
        (("openai",), 2),
        (("openai", "base_url"), 4),
        (("request",), 6),
        (("request", "max_retries"), 6),
        (("model_profiles", "answer"), 9),
        (("model_profiles", "answer", "model"), 10),
        (("model_profiles", "answer_detailed", "verbosity"), 16),
        (("model_profiles", "answer_quick", "model"), 18),
        (("policy", "system", "path"), 27),
        (("search", "defaults", "domains"), 31),
        (("server", "debug_file"), 33),
        (("list_example",), 34),
        (("list_example", 1), 36),
        (("list_example", 2, "n"), 37),
    ],
)
def test_line_map_of_full_document(path: tuple, line: int) -> None:
    assert parse_yaml(FULL_DOC)[1][path] == line


def test_line_map_covers_every_key_of_full_document() -> None:
    def paths(value: object, prefix: tuple = ()) -> set[tuple]:
        found = set()
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, child in items:
            found.add((*prefix, key))
            if isinstance(child, (dict, list)):
                found |= paths(child, (*prefix, key))
        return found

    value, lines = parse_yaml(FULL_DOC)
    assert set(lines) == paths(value)


def test_line_map_sequence_items_and_sequence_item_mappings() -> None:
    _, lines = parse_yaml("a:\n  - x\n  -\n    b: 1\n    c:\n      - y\n")
    assert lines == {
        ("a",): 1,
        ("a", 0): 2,
        ("a", 1): 3,
        ("a", 1, "b"): 4,
        ("a", 1, "c"): 5,
        ("a", 1, "c", 0): 6,
    }


def test_line_map_counts_comments_blank_lines_and_marker() -> None:
    _, lines = parse_yaml("---\n# c\n\na:\n\n  b: 1\n")
    assert lines == {("a",): 4, ("a", "b"): 6}


# --- errors -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "line", "phrase"),
    [
        # YAML features outside the subset
        ("a: &x 1\n", 1, "anchors ('&') are not supported"),
        ("a: 1\nb: *x\n", 2, "aliases ('*') are not supported"),
        ("a: !!str 1\n", 1, "tags ('!') are not supported"),
        ("a: !foo x\n", 1, "tags ('!') are not supported"),
        ("&x a: 1\n", 1, "anchors ('&') are not supported"),
        ("- &x a\n", 1, "anchors ('&') are not supported"),
        ("a: [*x]\n", 1, "aliases ('*') are not supported"),
        ("a: |\n  text\n", 1, "block scalars ('|') are not supported"),
        ("a: >-\n  text\n", 1, "block scalars ('>') are not supported"),
        ("? a\n: b\n", 1, "complex keys ('? ') are not supported"),
        ("x: 1\n? a\n", 2, "complex keys ('? ') are not supported"),
        ("a: {[1]: 2}\n", 1, "complex keys"),
        ("%YAML 1.2\n---\na: 1\n", 1, "directives ('%') are not supported"),
        ("a: '%x'\nb: %x\n", 2, "'%' cannot start an unquoted value; quote it"),
        ("a: @x\n", 1, "'@' cannot start an unquoted value; quote it"),
        ("a: [#x]\n", 1, "'#' cannot start an unquoted value; quote it"),
        # documents
        ("a: 1\n---\nb: 2\n", 2, "multiple documents ('---') are not supported"),
        ("---\n---\n", 2, "multiple documents ('---') are not supported"),
        ("a: 1\n...\n", 2, "document end marker '...' is not supported"),
        ("--- a: 1\n", 1, "content after '---' is not supported"),
        # indentation
        ("a:\n\tb: 1\n", 2, "tabs are not allowed in indentation; use spaces"),
        ("a:\n  \tb: 1\n", 2, "tabs are not allowed in indentation; use spaces"),
        ("-\ta\n", 1, "tabs are not allowed in indentation; use spaces"),
        ("a:\n    b: 1\n  c: 2\n", 3, "inconsistent indentation"),
        ("- a\n - b\n", 2, "unexpected indentation"),
        ("- a: 1\n b: 2\n", 2, "inconsistent indentation"),
        ("  a: 1\nb: 2\n", 2, "inconsistent indentation"),
        ("a: 1\n  b: 2\n", 2, "unexpected indentation; the line above already has a value"),
        ("- a: 1\n    b: 2\n", 2, "unexpected indentation"),
        ("a: [1]\n  - 2\n", 2, "unexpected indentation"),
        # structure
        ("a: 1\nb\n", 2, "expected 'key: value' but found no ':' after the key"),
        ("a: 1\nb # c: d\n", 2, "expected 'key: value' but found no ':' after the key"),
        ("b\na: 1\n", 1, "expected 'key: value' but found no ':' after the key"),
        ("a: 1\nb:2\n", 2, "expected 'key: value' but found no space after ':'; add one"),
        ("a: 1\n- b\n", 2, "expected 'key: value' but found a sequence item '- '"),
        ("- a\nb: 1\n", 2, "expected a sequence item '- ' but found a mapping or value line"),
        ("a:\n  - x\n  y: 1\n", 3, "expected a sequence item '- '"),
        ("a: - b\n", 1, "a sequence item '- ' is not allowed here"),
        ("a: b: c\n", 1, "unexpected ': ' inside an unquoted value"),
        ("a: b:\n", 1, "unexpected ': ' inside an unquoted value"),
        (": x\n", 1, "missing key before ':'"),
        ("a: 1\na: 2\n", 2, "duplicate key 'a' (first defined on line 1)"),
        ("x:\n  a: 1\n  b: 2\n  a: 3\n", 4, "duplicate key 'a' (first defined on line 2)"),
        ('a: 1\n"a": 2\n', 2, "duplicate key 'a'"),
        ("a: {b: 1, b: 2}\n", 1, "duplicate key 'b' (first defined on line 1)"),
        # multi-line values
        ("a: hello\n  world\n", 2, "multi-line values are not supported"),
        ("- hello\n  world\n", 2, "multi-line values are not supported"),
        ("a:\n  hello\n  world\n", 3, "multi-line values are not supported"),
        ('a: "hello\n  world"\n', 1, "unclosed double quote"),
        ("a: 'x\n", 1, "unclosed single quote"),
        ("'a: 1\n", 1, "unclosed single quote"),
        ('a: "x\\"\n', 1, "unclosed double quote"),
        ("a: [1, 2\n", 1, "unclosed '['; a flow collection must end on the same line"),
        ("a: {b: 1\n  , c: 2}\n", 1, "unclosed '{'"),
        ("a: [1, # c\n", 1, "unclosed '['"),
        # text after quotes / flows
        ('a: "x" y\n', 1, "unexpected text 'y' after the closing quote"),
        ('a: "x"# c\n', 1, "unexpected text '# c' after the closing quote"),
        ("a: 'x'y\n", 1, "unexpected text 'y' after the closing quote"),
        ('a: "x": 1\n', 1, "after the closing quote"),
        ("a: [1] x\n", 1, "unexpected text 'x' after the closing bracket"),
        ('"a" b: 1\n', 1, "unexpected text 'b: 1' after the closing quote"),
        # escapes
        ('a: "\\q"\n', 1, "invalid escape '\\\\q' in double-quoted string"),
        ('a: "\\u12"\n', 1, "invalid escape"),
        ('a: "\\xZZ"\n', 1, "invalid escape"),
        ('a: "\\UFFFFFFFF"\n', 1, "beyond U+10FFFF"),
        ('a: "\\ud83d"\n', 1, "unpaired surrogate"),
        # flow syntax
        ("a: [1 2, 3] x\n", 1, "unexpected text 'x' after the closing bracket"),
        ("a: [1, , 2]\n", 1, "unexpected ',' in flow collection"),
        ("a: [,]\n", 1, "unexpected ','"),
        ("a: {b}\n", 1, "expected ':' after key 'b' in flow mapping"),
        ("a: {b c: 1 d: 2}\n", 1, "in flow collection"),
        ("a: {: 1}\n", 1, "unexpected ':' in flow collection"),
        ("a: [1}\n", 1, "expected ',' or ']' in flow collection, found '}'"),
        ("a: {b: 1]\n", 1, "expected ',' or '}' in flow collection, found ']'"),
        ("a: ]\n", 1, "']' cannot start an unquoted value"),
        ("a: [b: 1]\n", 1, "in flow collection"),
        # depth
        ("a: " + "[" * 200 + "]" * 200 + "\n", 1, "nesting is deeper than 100 levels"),
        ("- " * 200 + "x\n", 1, "nesting is deeper than 100 levels"),
    ],
)
def test_refusals(text: str, line: int, phrase: str) -> None:
    message = error(text)
    assert message.startswith(f"config.yaml:{line}: "), message
    assert phrase in message, message
    assert "\n" not in message


def test_error_uses_given_source_and_defaults_to_string() -> None:
    with pytest.raises(ConfigError, match=r"^<string>:1: "):
        parse_yaml("a: *x")
    assert error("a: *x", source="/etc/app.yaml").startswith("/etc/app.yaml:1: ")


def test_error_line_numbers_count_blank_and_comment_lines() -> None:
    assert error("# c\n\na: 1\n\n# c\na: 2\n").startswith("config.yaml:6: duplicate key 'a'")


def test_error_line_numbers_with_crlf_and_bom() -> None:
    assert error("\ufeffa: 1\r\n\r\nb: &x 2\r\n").startswith("config.yaml:3: anchors")


def test_key_in_message_is_quoted_safely() -> None:
    message = error('"a\\nb": 1\n"a\\nb": 2\n')
    assert "\n" not in message and "'a\\nb'" in message


def test_config_error_is_an_exception_with_plain_message() -> None:
    assert issubclass(ConfigError, Exception)
    assert str(ConfigError("f:1: x")) == "f:1: x"


# --- property tests ---------------------------------------------------------------------------

PROPERTY_SETTINGS = settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
RESERVED = {"true", "True", "TRUE", "false", "False", "FALSE", "null", "Null", "NULL"}
PLAIN_RE = re.compile(r"[^\W\d_][\w./:-]*(?: [\w./-]+)*")


def plain_ok(s: str) -> bool:
    """Whether the test-side dumper may write `s` unquoted (conservative on purpose)."""
    return bool(PLAIN_RE.fullmatch(s)) and s not in RESERVED and not s.endswith(":")


def dump_scalar(value: object, quoting: str) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return (".inf" if value > 0 else "-.inf") if math.isinf(value) else repr(value)
    assert isinstance(value, str)
    if quoting == "plain" and plain_ok(value) and ": " not in value:
        return value
    if quoting == "single" and "\n" not in value and "\r" not in value:
        return "'" + value.replace("'", "''") + "'"
    return json.dumps(value, ensure_ascii=quoting == "ascii")


def dump_key(key: str, quoting: str) -> str:
    return key if re.fullmatch(r"[A-Za-z_][\w-]*", key) else dump_scalar(key, quoting)


def dump_flow(value: object, quoting: str) -> str:
    if isinstance(value, dict):
        inner = ", ".join(
            f"{dump_key(k, quoting)}: {dump_flow(v, quoting)}" for k, v in value.items()
        )
        return "{" + inner + "}"
    if isinstance(value, list):
        return "[" + ", ".join(dump_flow(v, quoting) for v in value) + "]"
    return dump_scalar(value, quoting)


def dump_block(value: object, indent: int, step: int, quoting: str, seq_under_key: int) -> list:
    """Block-style lines for a non-empty dict or list; empty ones and scalars go inline."""
    pad = " " * indent
    lines = []
    if isinstance(value, dict):
        for key, child in value.items():
            head = f"{pad}{dump_key(key, quoting)}:"
            if isinstance(child, (dict, list)) and child:
                deeper = indent + (seq_under_key if isinstance(child, list) else step)
                lines.append(head)
                lines += dump_block(child, deeper, step, quoting, seq_under_key)
            else:
                lines.append(f"{head} {dump_flow(child, quoting)}")
    else:
        for child in value:
            if isinstance(child, (dict, list)) and child:
                # Compact form: the first line of the nested block shares the '- ' line.
                inner = dump_block(child, indent + 2, step, quoting, seq_under_key)
                lines.append(f"{pad}- {inner[0][indent + 2 :]}")
                lines += inner[1:]
            else:
                lines.append(f"{pad}- {dump_flow(child, quoting)}")
    return lines


texts = st.one_of(
    st.text(max_size=12),
    st.from_regex(r"[a-z][a-z0-9_./-]{0,10}", fullmatch=True),
    st.sampled_from(
        ["yes", "no", "on", "123", "1.5", "a#b", "a #b", "a: b", "https://x.y/z", "日本語",
         "'", '"', "\\", "{", "[a]", "- x", "? x", "&a", "*a", "!t", "|", ">", "%", "@", ",",
         "#", " x", "x ", "\t", "~", "", "null", "True", "a:", "---", "..."]
    ),
)  # fmt: skip
keys = st.one_of(st.from_regex(r"[A-Za-z_][A-Za-z0-9_-]{0,8}", fullmatch=True), texts)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    texts,
)
values = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(keys, children, max_size=4)
    ),
    max_leaves=12,
)
quotings = st.sampled_from(["plain", "single", "double", "ascii"])


@PROPERTY_SETTINGS
@given(
    value=st.one_of(st.dictionaries(keys, values, min_size=1, max_size=5), values),
    step=st.integers(1, 4),
    quoting=quotings,
    seq_under_key=st.sampled_from([0, 2]),
    comments=st.booleans(),
)
def test_block_dump_round_trips(
    value: object, step: int, quoting: str, seq_under_key: int, comments: bool
) -> None:
    if isinstance(value, (dict, list)) and value:
        lines = dump_block(value, 0, step, quoting, seq_under_key)
    else:
        lines = [dump_flow(value, quoting)]
    if comments:
        lines = ["# generated", ""] + [f"{line}  # note" for line in lines]
    text = "\n".join(lines) + "\n"
    parsed, where = parse_yaml(text, "gen.yaml")
    assert parsed == value, text
    assert all(1 <= n <= len(lines) for n in where.values())


@PROPERTY_SETTINGS
@given(value=values, quoting=quotings, as_key=st.booleans())
def test_flow_dump_round_trips(value: object, quoting: str, as_key: bool) -> None:
    text = dump_flow(value, quoting)
    if as_key:
        assert parse_yaml(f"key: {text}  # c\n")[0] == {"key": value}, text
    else:
        assert parse_yaml(text)[0] == value, text


FRAGMENTS = [
    ":", ": ", "- ", "-", "  ", " ", "#", " #", '"', "'", "{", "}", "[", "]", ",", "\t", "&", "*",
    "|", ">", "!", "?", "? ", "%", "@", "\\", "\\u", "\\x4", "\n", "\r\n", "\r", "---", "...",
    "a", "key", "日本", "1", "-1.5e3", ".inf", "true", "null", "~", "\ufeff", "x: y", "''", "\0",
]  # fmt: skip
yamlish = st.lists(st.sampled_from(FRAGMENTS), max_size=40).map("".join)


@settings(PROPERTY_SETTINGS, max_examples=500)
@given(st.one_of(st.text(), yamlish))
def test_any_text_parses_or_raises_config_error_with_line(text: str) -> None:
    try:
        parse_yaml(text, "fuzz.yaml")
    except ConfigError as exc:
        message = str(exc)
        match = re.match(r"fuzz\.yaml:(\d+): \S", message)
        assert match, message
        assert 1 <= int(match.group(1)) <= text.count("\n") + text.count("\r") + 1
        assert "\n" not in message and "\r" not in message
