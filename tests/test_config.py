"""Configuration: defaults < YAML < environment < command line (issue 2, seed 001 §5, §8.1).

Unit tests call load_config(cli, env) with an explicit env dict and a temporary
XDG_CONFIG_HOME/HOME, so no user file is ever read. Where the behaviour belongs to the process
(exit codes, stderr, debug files) the real program is spawned.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import SCRIPT, TEST_KEY, base_env, run_cli, show_config
from fake_upstream import Reply

import openai_responses_mcp as mcp
from openai_responses_mcp import SETTINGS, ConfigError, deep_merge, load_config

APP = "openai-responses-mcp"


# -- helpers ---------------------------------------------------------------------------------


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    """A fake home directory, also in os.environ (expanduser reads it from there)."""
    path = tmp_path / "home"
    path.mkdir()
    monkeypatch.setenv("HOME", str(path))
    return path


@pytest.fixture
def env(tmp_path, home) -> dict:
    """A clean environment for load_config: only a private XDG_CONFIG_HOME and HOME."""
    return {"XDG_CONFIG_HOME": str(tmp_path / "xdg"), "HOME": str(home)}


def write(tmp_path: Path, text: str, name: str = "config.yaml") -> Path:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def load(tmp_path: Path, env: dict, yaml: str | None = None, **cli) -> mcp.Config:
    if yaml is not None:
        cli["config"] = str(write(tmp_path, yaml))
    return load_config(cli, env)


def config_error(tmp_path: Path, env: dict, yaml: str | None = None, **cli) -> str:
    """The ConfigError message load_config raises; it must be one line."""
    with pytest.raises(ConfigError) as caught:
        load(tmp_path, env, yaml, **cli)
    message = str(caught.value)
    assert "\n" not in message, message
    return message


def one_stderr_line(proc) -> str:
    """The single line a failed start-up prints."""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


# -- precedence: defaults < YAML < ENV < CLI --------------------------------------------------


def test_defaults_apply_when_nothing_is_set(tmp_path, env):
    config = load(tmp_path, env)
    assert config.get("request", "timeout_ms") == 300_000
    assert config.get("request", "max_retries") == 3
    assert config.get("model_profiles", "answer", "model") == "gpt-6.1-terra"
    assert config.get("policy", "max_citations") == 3
    assert config.get("search", "defaults") == {"recency_days": 60, "max_results": 5, "domains": []}
    assert config.get("server", "debug") is False
    assert set(config.sources.values()) == {"default"}


def test_yaml_overrides_defaults_and_is_sourced_by_file_and_line(tmp_path, env):
    config = load(
        tmp_path,
        env,
        "# comment\nrequest:\n  timeout_ms: 5000\npolicy:\n  max_citations: 7\n",
    )
    path = tmp_path / "config.yaml"
    assert config.get("request", "timeout_ms") == 5000
    assert config.get("policy", "max_citations") == 7
    assert config.sources[("request", "timeout_ms")] == f"{path}:3"
    assert config.sources[("policy", "max_citations")] == f"{path}:5"
    assert config.sources[("request", "max_retries")] == "default"


def test_env_overrides_yaml_for_each_key_it_sets(tmp_path, env):
    yaml = (
        "request: {timeout_ms: 5000, max_retries: 1}\nmodel_profiles: {answer: {model: m-yaml}}\n"
    )
    env.update(OPENAI_API_TIMEOUT="9000", MODEL_ANSWER="m-env")
    config = load(tmp_path, env, yaml)
    assert config.get("request", "timeout_ms") == 9000
    assert config.get("model_profiles", "answer", "model") == "m-env"
    assert config.get("request", "max_retries") == 1
    assert config.sources[("request", "timeout_ms")] == "env OPENAI_API_TIMEOUT"
    assert config.sources[("model_profiles", "answer", "model")] == "env MODEL_ANSWER"
    assert config.sources[("request", "max_retries")] == f"{tmp_path / 'config.yaml'}:1"


def test_model_flag_overrides_env_and_yaml(tmp_path, env):
    env["MODEL_ANSWER"] = "m-env"
    config = load(tmp_path, env, "model_profiles: {answer: {model: m-yaml}}\n", model="m-flag")
    assert config.get("model_profiles", "answer", "model") == "m-flag"
    assert config.sources[("model_profiles", "answer", "model")] == "flag --model"


def test_yaml_mappings_deep_merge_with_defaults(tmp_path, env):
    config = load(
        tmp_path,
        env,
        "request: {timeout_ms: 5000}\nmodel_profiles:\n  answer:\n    verbosity: low\n",
    )
    assert config.get("request") == {
        "timeout_ms": 5000,
        "max_retries": 3,
        "deep_timeout_ms": 3_600_000,
        "handoff_after_s": None,
    }
    assert config.get("model_profiles", "answer") == {
        "model": "gpt-6.1-terra",
        "reasoning_effort": "medium",
        "verbosity": "low",
        "background": False,
        "completion_window": "soonest",
    }


def test_yaml_list_replaces_the_default_list(tmp_path, env):
    config = load(tmp_path, env, "search:\n  defaults:\n    domains: [a.example, b.example]\n")
    assert config.get("search", "defaults", "domains") == ["a.example", "b.example"]
    assert config.get("search", "defaults", "max_results") == 5
    assert config.sources[("search", "defaults", "domains")] == f"{tmp_path / 'config.yaml'}:3"


def test_deep_merge_merges_dicts_and_replaces_lists():
    base = {"a": [1, 2], "b": {"x": 1, "y": [1]}, "c": 1}
    merged = deep_merge(base, {"a": [3], "b": {"y": [2, 3]}})
    assert merged == {"a": [3], "b": {"x": 1, "y": [2, 3]}, "c": 1}
    assert base == {"a": [1, 2], "b": {"x": 1, "y": [1]}, "c": 1}, "inputs are not modified"


def test_show_config_names_the_source_of_each_layer(tmp_path):
    path = write(tmp_path, "request:\n  timeout_ms: 5000\n")
    proc = run_cli(
        tmp_path,
        "--show-config",
        "--config",
        str(path),
        "--model",
        "m-flag",
        env={"OPENAI_MAX_RETRIES": "5"},
    )
    sources = show_config(proc)["sources"]
    assert sources["request.timeout_ms"] == f"{path}:2"
    assert sources["request.max_retries"] == "env OPENAI_MAX_RETRIES"
    assert sources["model_profiles.answer.model"] == "flag --model"
    assert sources["policy.max_citations"] == "default"


# -- where the YAML file is -------------------------------------------------------------------


def test_default_file_under_xdg_config_home_is_read(tmp_path, env):
    path = write(tmp_path, "policy: {max_citations: 6}\n", f"xdg/{APP}/config.yaml")
    config = load(tmp_path, env)
    assert config.get("policy", "max_citations") == 6
    assert config.path == str(path)
    assert config.sources[("policy", "max_citations")] == f"{path}:1"


def test_default_file_under_home_dot_config_when_xdg_config_home_is_unset(tmp_path, env, home):
    del env["XDG_CONFIG_HOME"]
    path = write(home, "policy: {max_citations: 8}\n", f".config/{APP}/config.yaml")
    config = load(tmp_path, env)
    assert config.get("policy", "max_citations") == 8
    assert config.path == str(path)


def test_cli_reads_home_dot_config_when_xdg_config_home_is_unset(tmp_path):
    home = tmp_path / "home"
    path = write(home, "policy: {max_citations: 9}\n", f".config/{APP}/config.yaml")
    process_env = base_env(tmp_path, HOME=str(home))
    del process_env["XDG_CONFIG_HOME"]
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--show-config"],
        capture_output=True,
        text=True,
        env=process_env,
        cwd=str(tmp_path),
        timeout=30,
    )
    shown = show_config(proc)
    assert shown["config"]["policy"]["max_citations"] == 9
    assert shown["config_file"] == str(path)


def test_missing_default_file_is_fine(tmp_path, env):
    config = load(tmp_path, env)
    assert config.path is None
    assert config.warnings == []


def test_missing_explicit_config_file_is_an_error_naming_the_path(tmp_path, env):
    missing = tmp_path / "nope" / "config.yaml"
    assert str(missing) in config_error(tmp_path, env, config=str(missing))


def test_cli_exits_2_with_one_line_when_explicit_config_file_is_missing(tmp_path):
    missing = tmp_path / "nope.yaml"
    proc = run_cli(tmp_path, "--show-config", "--config", str(missing))
    assert proc.returncode == 2
    assert str(missing) in one_stderr_line(proc)
    assert proc.stdout == ""


# -- environment variables (seed 001 §5.4 and the issue) ----------------------------------------
# OPENAI_API_KEY (via openai.api_key_env) and DEBUG are tested further down.

ENV_KEYS = [  # seed 001 §5.4, then the additions, then the module's own
    ("OPENAI_CHECK_RETIREMENTS", "false", ("openai", "check_retirements"), False),
    ("OPENAI_API_TIMEOUT", "45000", ("request", "timeout_ms"), 45000),
    ("OPENAI_MAX_RETRIES", "7", ("request", "max_retries"), 7),
    ("SEARCH_RECENCY_DAYS", "30", ("search", "defaults", "recency_days"), 30),
    ("SEARCH_MAX_RESULTS", "9", ("search", "defaults", "max_results"), 9),
    ("MAX_CITATIONS", "5", ("policy", "max_citations"), 5),
    ("MODEL_ANSWER", "gpt-5-mini", ("model_profiles", "answer", "model"), "gpt-5-mini"),
    ("ANSWER_EFFORT", "high", ("model_profiles", "answer", "reasoning_effort"), "high"),
    ("ANSWER_VERBOSITY", "low", ("model_profiles", "answer", "verbosity"), "low"),
    ("MODEL_DETAILED", "o3", ("model_profiles", "answer_detailed", "model"), "o3"),
    ("MODEL_QUICK", "gpt-5-nano", ("model_profiles", "answer_quick", "model"), "gpt-5-nano"),
    ("OPENAI_BASE_URL", "http://127.0.0.1:9/v1", ("openai", "base_url"), "http://127.0.0.1:9/v1"),
    ("MCP_LINE_MODE", "1", ("server", "line_mode"), True),
    ("MCP_TASK_SECRET", "s" * 32, ("server", "tasks", "secret"), "s" * 32),
    ("POLICY_TIMEZONE", "UTC", ("policy", "timezone"), "UTC"),
    ("SEARCH_DOMAIN_FILTER", "false", ("search", "domain_filter"), False),
    ("MCP_HTTP_TOKEN", "tok-0123456789abcdef", ("server", "http", "token"), "tok-0123456789abcdef"),
    ("MCP_HTTP_STATELESS", "1", ("server", "http", "stateless"), True),
    ("MCP_PROTOCOL_ERAS", "handshake", ("server", "protocol_eras"), "handshake"),
    ("ANSWER_CACHE_TTL_S", "0", ("cache", "ttl_s"), 0),
    ("OPENAI_RESPONSES_MCP_STATE", "off", ("state", "path"), "off"),
    (
        "OPENAI_RESPONSES_MCP_STATE_URL",
        "postgresql://u@h/db",
        ("state", "url"),
        "postgresql://u@h/db",
    ),
    ("BACKGROUND_ANSWER", "true", ("model_profiles", "answer", "background"), True),
    ("BACKGROUND_DETAILED", "off", ("model_profiles", "answer_detailed", "background"), False),
    ("BACKGROUND_QUICK", "1", ("model_profiles", "answer_quick", "background"), True),
    ("MCP_RESULT_MAX_CHARS", "20000", ("server", "result_max_chars"), 20000),
    ("MCP_ANSWER_DEEP", "1", ("tools", "answer_deep"), True),
    (
        "MODEL_DEEP",
        "o3-deep-research",
        ("model_profiles", "answer_deep", "model"),
        "o3-deep-research",
    ),
    ("MCP_HANDOFF_AFTER_S", "5", ("request", "handoff_after_s"), 5),
    ("MCP_AUTH_CLIENT_ID", "mcp-server", ("server", "auth", "client_id"), "mcp-server"),
    ("MCP_AUTH_CLIENT_SECRET", "s3cr3t", ("server", "auth", "client_secret"), "s3cr3t"),
]


@pytest.mark.parametrize(("name", "text", "path", "value"), ENV_KEYS, ids=[k[0] for k in ENV_KEYS])
def test_env_var_sets_its_key(tmp_path, env, name, text, path, value):
    env[name] = text
    config = load(tmp_path, env)
    assert config.get(*path) == value
    assert config.sources[path] == f"env {name}"


def test_every_env_var_of_the_settings_table_is_covered_here():
    """A new Setting.env must get a row in ENV_KEYS (and so a test)."""
    declared = {setting.env for setting in SETTINGS.values() if setting.env}
    assert declared == {row[0] for row in ENV_KEYS}


@pytest.mark.parametrize("blank", ["", "   "], ids=["empty", "spaces"])
def test_empty_env_values_are_ignored(tmp_path, env, blank):
    names = [k[0] for k in ENV_KEYS] + ["DEBUG"]
    env.update(dict.fromkeys(names, blank))
    config = load(tmp_path, env, "request: {timeout_ms: 5000}\n")
    assert config.get("request", "timeout_ms") == 5000
    assert config.get("model_profiles", "answer", "model") == "gpt-6.1-terra"
    assert config.get("server", "debug") is False
    assert not any(where.startswith("env ") for where in config.sources.values())


@pytest.mark.parametrize(
    ("text", "value"), [("1", True), ("true", True), ("0", False), ("false", False)]
)
def test_mcp_line_mode_reads_booleans(tmp_path, env, text, value):
    env["MCP_LINE_MODE"] = text
    assert load(tmp_path, env).get("server", "line_mode") is value


def test_api_key_is_read_from_the_variable_named_by_api_key_env(tmp_path, fake):
    path = write(tmp_path, "openai:\n  api_key_env: MY_SERVICE_KEY\n")
    proc = run_cli(
        tmp_path,
        "--ask",
        "ping?",
        "--config",
        str(path),
        env={"OPENAI_API_KEY": "", "MY_SERVICE_KEY": TEST_KEY, "OPENAI_BASE_URL": fake.base_url},
    )
    assert proc.returncode == 0, proc.stderr
    (request,) = fake.requests
    assert request.authorized_with(TEST_KEY)


# -- invalid values stop start-up -------------------------------------------------------------

INVALID_YAML = [
    ("request: {timeout_ms: fast}", "request.timeout_ms", "an integer from 1000 to 3600000"),
    ("request: {timeout_ms: 2.5}", "request.timeout_ms", "an integer from 1000 to 3600000"),
    ("request: {max_retries: 11}", "request.max_retries", "an integer from 0 to 10"),
    ("request: {max_retries: true}", "request.max_retries", "an integer from 0 to 10"),
    ("policy: {max_citations: 0}", "policy.max_citations", "an integer from 1 to 10"),
    ('policy: {max_citations: "3"}', "policy.max_citations", "an integer from 1 to 10"),
    (
        "model_profiles: {answer: {reasoning_effort: extreme}}",
        "model_profiles.answer.reasoning_effort",
        "one of none, minimal, low, medium, high, xhigh",
    ),
    (
        "model_profiles: {answer_quick: {verbosity: loud}}",
        "model_profiles.answer_quick.verbosity",
        "one of low, medium, high",
    ),
    ("model_profiles: {answer: {model: 5}}", "model_profiles.answer.model", "a non-empty string"),
    ('openai: {base_url: ""}', "openai.base_url", "a non-empty string"),
    ("server: {debug: yes}", "server.debug", "true or false"),
    ("search: {domain_filter: 1}", "search.domain_filter", "true or false"),
    ("search: {defaults: {domains: example.com}}", "search.defaults.domains", "a list of domain"),
    ("search: {defaults: {domains: [1]}}", "search.defaults.domains", "a list of domain names"),
    ('search: {defaults: {domains: [""]}}', "search.defaults.domains", 'item "" is empty'),
    ('search: {defaults: {domains: ["*"]}}', "search.defaults.domains", 'item "*" has a wildcard'),
    (
        'search: {defaults: {domains: ["a.example, b.example"]}}',
        "search.defaults.domains",
        "has a comma",
    ),
    ("openai: {base_url: api.openai.com/v1}", "openai.base_url", "an http:// or https:// URL"),
    ("openai: {base_url: 'ftp://example.com/v1'}", "openai.base_url", "an http:// or https://"),
    ("openai: {base_url: 'https:///v1'}", "openai.base_url", "an http:// or https:// URL"),
    ("openai: {base_url: 'http://gw:port/v1'}", "openai.base_url", "an http:// or https:// URL"),
    ("server: {max_message_bytes: 10}", "server.max_message_bytes", "an integer from 1024"),
    ("policy: {timezone: Mars/Olympus_Mons}", "policy.timezone", "IANA time zone"),
]


@pytest.mark.parametrize(("yaml", "key", "allowed"), INVALID_YAML, ids=[c[0] for c in INVALID_YAML])
def test_invalid_yaml_value_names_key_file_line_and_what_is_allowed(
    tmp_path, env, yaml, key, allowed
):
    message = config_error(tmp_path, env, "# settings\n" + yaml + "\n")
    assert key in message
    assert f"{tmp_path / 'config.yaml'}:2" in message
    assert allowed in message


INVALID_ENV = [
    ("OPENAI_API_TIMEOUT", "soon", "request.timeout_ms", "an integer from 1000 to 3600000"),
    ("OPENAI_API_TIMEOUT", "999", "request.timeout_ms", "an integer from 1000 to 3600000"),
    ("OPENAI_MAX_RETRIES", "-1", "request.max_retries", "an integer from 0 to 10"),
    ("MAX_CITATIONS", "11", "policy.max_citations", "an integer from 1 to 10"),
    ("SEARCH_RECENCY_DAYS", "0", "search.defaults.recency_days", "an integer from 1"),
    ("SEARCH_MAX_RESULTS", "lots", "search.defaults.max_results", "an integer from 1 to 50"),
    (
        "ANSWER_EFFORT",
        "maximum",
        "model_profiles.answer.reasoning_effort",
        "one of none, minimal, low, medium, high, xhigh, max",
    ),
    ("ANSWER_VERBOSITY", "verbose", "model_profiles.answer.verbosity", "one of low, medium, high"),
    ("SEARCH_DOMAIN_FILTER", "maybe", "search.domain_filter", "true or false"),
    ("MCP_LINE_MODE", "sometimes", "server.line_mode", "true or false"),
    ("POLICY_TIMEZONE", "Mars/Olympus_Mons", "policy.timezone", "IANA time zone"),
    ("OPENAI_BASE_URL", "api.openai.com/v1", "openai.base_url", "an http:// or https:// URL"),
]


@pytest.mark.parametrize(
    ("name", "text", "key", "allowed"), INVALID_ENV, ids=[f"{c[0]}={c[1]}" for c in INVALID_ENV]
)
def test_invalid_env_value_names_key_variable_and_what_is_allowed(
    tmp_path, env, name, text, key, allowed
):
    env[name] = text
    message = config_error(tmp_path, env)
    assert key in message
    assert f"env {name}" in message
    assert allowed in message


SECTIONS_OF_WRONG_TYPE = [
    ("server: true", "server"),
    ("request: 5", "request"),
    ("model_profiles: [1]", "model_profiles"),
    ("model_profiles: {answer_quick: gpt-5-mini}", "model_profiles.answer_quick"),
    ("search: {defaults: 5}", "search.defaults"),
    ("policy: {system: builtin}", "policy.system"),
]


@pytest.mark.parametrize(
    ("yaml", "key"), SECTIONS_OF_WRONG_TYPE, ids=[c[0] for c in SECTIONS_OF_WRONG_TYPE]
)
def test_section_that_is_not_a_mapping_is_refused_with_file_and_line(tmp_path, env, yaml, key):
    message = config_error(tmp_path, env, "# settings\n" + yaml + "\n")
    assert key in message
    assert f"{tmp_path / 'config.yaml'}:2" in message


@pytest.mark.parametrize(
    "yaml", ["server:", "request:", "model_profiles:\n  answer_quick:", "policy: {system: }"]
)
def test_empty_section_counts_as_absent(tmp_path, env, yaml):
    """A section whose keys are all commented out is null in YAML: it means "no settings"."""
    config = load(tmp_path, env, yaml + "\n  # everything commented out\n")
    assert config.get("server", "debug") is False
    assert config.get("request", "timeout_ms") == 300_000
    assert config.get("policy", "system", "source") == "builtin"
    assert config.profile("answer_quick") == {"model": "gpt-6-luna", **QUICK}
    assert config.warnings == []


def test_cli_exits_2_with_one_line_for_a_value_out_of_range(tmp_path):
    path = write(tmp_path, "request:\n  max_retries: 99\n")
    proc = run_cli(tmp_path, "--show-config", "--config", str(path))
    assert proc.returncode == 2
    line = one_stderr_line(proc)
    assert "request.max_retries" in line
    assert f"{path}:2" in line
    assert "an integer from 0 to 10" in line
    assert line.startswith("openai-responses-mcp: config error: ")
    assert proc.stdout == ""


# Each config error's one line, in process (the exit 2, the one stderr line, its prefix and an
# empty stdout are the spawned test's above). "{path}" stands for the config file's path.
BAD_SETTINGS = {
    "effort-from-env": (
        None,
        {"ANSWER_EFFORT": "turbo"},
        [
            "model_profiles.answer.reasoning_effort",
            "env ANSWER_EFFORT",
            "none, minimal, low, medium, high, xhigh",
        ],
    ),
    "timezone": ("policy:\n  timezone: Atlantis/Lost_City\n", {}, ["policy.timezone", "{path}:2"]),
    "location-country-name": (
        "search:\n  user_location:\n    country: Japan\n",
        {},
        ['search.user_location.country = "Japan"', "{path}:3"],
    ),
    "location-country-code": (
        "search:\n  user_location:\n    country: J1\n",
        {},
        ["must be a two-letter ISO country code", "{path}:3"],
    ),
    "location-timezone": (
        "search:\n  user_location:\n    timezone: Atlantis/Lost_City\n",
        {},
        ["search.user_location.timezone = 'Atlantis/Lost_City'", "{path}:3"],
    ),
    "base-url-without-scheme": (
        None,
        {"OPENAI_BASE_URL": "api.openai.com/v1"},
        [
            'openai.base_url = "api.openai.com/v1" '
            "(from env OPENAI_BASE_URL) must be an http:// or https:// URL"
        ],
    ),
    "empty-default-domain": (
        'search:\n  defaults:\n    domains: ["example.com", ""]\n',
        {},
        ['search.defaults.domains (from {path}:3): item "" is empty'],
    ),
    "bad-bool": ("server:\n  debug: on\n", {}, ["server.debug", "{path}:2", "true or false"]),
    "section-not-a-mapping": ("server: true\n", {}, ["server", "{path}:1"]),
}


@pytest.mark.parametrize(("yaml", "variables", "words"), BAD_SETTINGS.values(), ids=BAD_SETTINGS)
def test_a_bad_setting_is_one_config_error_line_naming_it(tmp_path, env, yaml, variables, words):
    message = config_error(tmp_path, {**env, **variables}, yaml)
    path = tmp_path / "config.yaml"
    for word in words:
        assert word.format(path=path) in message, message
    if "domains" in message:
        assert "a list of strings" not in message
    if "base_url" in message:
        assert message.startswith(words[0])


def test_a_two_letter_country_and_a_known_zone_are_accepted(tmp_path, env):
    path = write(tmp_path, "search:\n  user_location: {country: jp, timezone: UTC}\n")
    config = mcp.load_config({"config": str(path)}, env)
    assert config.get("search", "user_location", "country") == "jp"


@pytest.mark.parametrize(
    "url", ["http://127.0.0.1:8080/v1", "https://gw.example/openai/v1/", "http://[::1]:9/v1"]
)
def test_base_url_accepts_http_and_https_urls_with_a_host(tmp_path, env, url):
    env["OPENAI_BASE_URL"] = url
    assert load(tmp_path, env).get("openai", "base_url") == url


def test_default_domains_are_normalised_like_a_calls_domains(tmp_path, env):
    yaml = (
        "search:\n  defaults:\n    domains:\n"
        "      - https://docs.python.org/3/\n      - bücher.de\n      - Docs.Python.org\n"
    )
    config = load(tmp_path, env, yaml)
    assert config.get("search", "defaults", "domains") == ["docs.python.org", "xn--bcher-kva.de"]


# -- accepted values --------------------------------------------------------------------------


@pytest.mark.parametrize("effort", ["none", "minimal", "low", "medium", "high", "xhigh"])
def test_reasoning_effort_accepts(tmp_path, env, effort):
    config = load(
        tmp_path, env, f"model_profiles: {{answer_detailed: {{reasoning_effort: {effort}}}}}\n"
    )
    assert config.profile("answer_detailed")["reasoning_effort"] == effort
    env["ANSWER_EFFORT"] = effort
    assert load(tmp_path, env).profile("answer")["reasoning_effort"] == effort


@pytest.mark.parametrize("verbosity", ["low", "medium", "high"])
def test_verbosity_accepts(tmp_path, env, verbosity):
    config = load(tmp_path, env, f"model_profiles: {{answer_quick: {{verbosity: {verbosity}}}}}\n")
    assert config.profile("answer_quick")["verbosity"] == verbosity
    env["ANSWER_VERBOSITY"] = verbosity
    assert load(tmp_path, env).profile("answer")["verbosity"] == verbosity


# -- profiles ---------------------------------------------------------------------------------

ANSWER = "model_profiles:\n  answer: {model: gpt-5-mini, reasoning_effort: high, verbosity: low}\n"
# answer_quick's own defaults: lighter than answer's in every respect.
QUICK = {"reasoning_effort": "low", "verbosity": "low", "search_context_size": "low"}


def test_a_config_of_answer_alone_runs_every_tool_on_it(tmp_path, env):
    """Seed 001's minimal configuration: `answer` alone, and "every tool runs with this
    setting": the per-tool built-in defaults (gpt-6-luna, gpt-6.2-sol, effort low or high)
    are not models or settings the user chose. Background mode is how a long call survives,
    not part of the answer: answer_detailed keeps its own (issue 39)."""
    config = load(tmp_path, env, ANSWER)
    expected = {"model": "gpt-5-mini", "reasoning_effort": "high", "verbosity": "low"}
    for tool in ("answer", "answer_detailed", "answer_quick"):
        assert config.profile(tool) == expected, tool
    assert config.background("answer_detailed") is True
    assert config.background("answer") is config.background("answer_quick") is False
    assert config.profile_sources("answer_detailed")["background"] == "default"
    where = f"{tmp_path / 'config.yaml'}:2"
    assert config.profile_sources("answer")["model"] == where
    assert config.profile_sources("answer_quick") == {
        "model": f"inherited from answer ({where})",
        "reasoning_effort": f"inherited from answer ({where})",
        "verbosity": f"inherited from answer ({where})",
        "background": "inherited from answer (default)",
    }


# Seed 001 §5.3's example: every tool's profile set, no `background` key.
SEED_PROFILES = (
    "model_profiles:\n"
    "  answer: {model: gpt-5.2, reasoning_effort: medium, verbosity: medium}\n"
    "  answer_detailed: {model: gpt-5.1-codex, reasoning_effort: high, verbosity: high}\n"
    "  answer_quick: {model: gpt-5.2-chat-latest, reasoning_effort: low, verbosity: low}\n"
)


def test_the_seeds_example_keeps_answer_detailed_in_background_mode(tmp_path, env):
    """Issue 39: setting the models must not take background mode (resumes, the server-side
    cancel) from the slow tool; `background` follows `answer` only when the user sets it."""
    config = load(tmp_path, env, SEED_PROFILES)
    assert config.background("answer_detailed") is True
    assert config.background("answer") is config.background("answer_quick") is False


@pytest.mark.parametrize(
    ("yaml_extra", "env_extra", "expected"),
    [
        ("    background: false\n", {}, (False, False, False)),  # answer's, set: every tool
        ("", {"BACKGROUND_ANSWER": "1"}, (True, True, True)),
        ("", {"BACKGROUND_DETAILED": "off"}, (False, False, False)),  # the tool's own
        ("", {"BACKGROUND_QUICK": "on"}, (False, True, True)),
    ],
)
def test_background_follows_answer_only_where_the_user_sets_it(
    tmp_path, env, yaml_extra, env_extra, expected
):
    yaml_text = "model_profiles:\n  answer:\n    model: gpt-5.2\n" + yaml_extra
    config = load(tmp_path, env | env_extra, yaml_text)
    shown = tuple(config.background(t) for t in ("answer", "answer_quick", "answer_detailed"))
    assert shown == (expected[0], expected[1], expected[2])


def test_answers_background_off_reaches_every_tool_whatever_the_models(tmp_path, env):
    """The ZDR switch (docs/long-calls.md): one key, with or without a model set."""
    config = load(tmp_path, env | {"BACKGROUND_ANSWER": "false"}, "")
    assert not any(config.background(t) for t in ("answer", "answer_quick", "answer_detailed"))
    source = config.profile_sources("answer_detailed")["background"]
    assert source == "inherited from answer (env BACKGROUND_ANSWER)"


@pytest.mark.parametrize("answer", ["", "  answer: {background: true}\n"], ids=["default", "set"])
def test_answer_detailed_background_null_inherits_answers_as_documented(tmp_path, env, answer):
    """Issue 39: docs/configuration.md says `null` inherits `answer` (as answer_quick's does,
    in the shipped example), but answer_detailed's null was refused, and the server with it."""
    yaml_text = "model_profiles:\n" + answer + "  answer_detailed: {background: null}\n"
    config = load(tmp_path, env, yaml_text)
    assert config.background("answer_detailed") is config.background("answer") is bool(answer)
    source = config.profile_sources("answer_detailed")["background"]
    assert source.startswith("inherited from answer (")
    with pytest.raises(mcp.ConfigError, match=r"answer\.background = null .* true or false"):
        load(tmp_path, env, "model_profiles:\n  answer: {background: null}\n")  # no parent


@pytest.mark.parametrize("where", ["env MODEL_ANSWER", "flag --model"])
def test_answers_model_from_the_environment_or_the_flag_reaches_every_tool(tmp_path, env, where):
    if where == "env MODEL_ANSWER":
        env["MODEL_ANSWER"] = "gpt-5.2"
        config = load(tmp_path, env, "")
    else:
        config = load(tmp_path, env, "", model="gpt-5.2")
    for tool in ("answer_detailed", "answer_quick"):
        assert config.profile(tool) == {
            "model": "gpt-5.2",
            "reasoning_effort": "medium",
            "verbosity": "medium",
        }
        assert config.profile_sources(tool)["model"] == f"inherited from answer ({where})"


def test_the_per_tool_defaults_apply_while_answers_model_is_not_set(tmp_path, env):
    """Setting answer's effort or verbosity (not its model) keeps each tool's own defaults."""
    env["ANSWER_EFFORT"] = "high"
    config = load(tmp_path, env, "model_profiles:\n  answer: {verbosity: low}\n")
    assert config.profile("answer_quick") == {"model": "gpt-6-luna", **QUICK}
    assert config.profile("answer_detailed")["model"] == "gpt-6.2-sol"
    assert config.background("answer_detailed") is True
    assert config.profile_sources("answer_quick")["model"] == "default"


def test_the_three_profiles_differ_by_default(tmp_path, env):
    config = load(tmp_path, env, "")
    assert config.profile("answer") == {
        "model": "gpt-6.1-terra",
        "reasoning_effort": "medium",
        "verbosity": "medium",
    }
    assert config.profile("answer_quick") == {"model": "gpt-6-luna", **QUICK}
    assert config.profile("answer_detailed") == {
        "model": "gpt-6.2-sol",
        "reasoning_effort": "high",
        "verbosity": "medium",
    }
    assert config.background("answer_detailed") is True
    assert config.background("answer") is config.background("answer_quick") is False


def test_a_built_in_setting_the_model_refuses_takes_the_nearest_it_accepts(tmp_path, env):
    yaml_text = (
        "model_profiles:\n  answer_quick: {model: gpt-5.2-pro}\n"
        "  answer_detailed: {model: gpt-5.2-pro}\n"
    )
    config = load(tmp_path, env, yaml_text)  # gpt-5.2-pro: medium, high, xhigh
    assert config.profile("answer_quick")["reasoning_effort"] == "medium"  # low: refused
    assert config.profile("answer_detailed")["reasoning_effort"] == "high"  # taken as is
    (warning,) = config.warnings
    assert warning.startswith("model_profiles.answer_quick.reasoning_effort: gpt-5.2-pro")
    source = config.sources[("model_profiles", "answer_quick", "reasoning_effort")]
    assert source == "default low, adapted to gpt-5.2-pro"
    assert load(tmp_path, env, "").warnings == []  # the defaults suit their own models


def test_a_setting_the_user_chose_is_never_adapted(tmp_path, env):
    yaml_text = "model_profiles:\n  answer_quick: {model: gpt-5.2-pro, reasoning_effort: low}\n"
    config = load(tmp_path, env, yaml_text)
    assert config.profile("answer_quick")["reasoning_effort"] == "low"  # the 400 names its key
    assert config.warnings == []


def test_null_in_another_profile_takes_answers_value(tmp_path, env):
    config = load(
        tmp_path,
        env,
        ANSWER
        + "  answer_quick: {reasoning_effort: null, verbosity: null, search_context_size: null}\n"
        + "  answer_detailed: {reasoning_effort: null}\n",
    )
    expected = {"reasoning_effort": "high", "verbosity": "low"}
    assert config.profile("answer_quick") == {"model": "gpt-5-mini", **expected}
    assert config.profile("answer_detailed") == {"model": "gpt-5-mini", **expected}


def test_null_has_nothing_to_inherit_in_answer_itself(tmp_path, env):
    message = config_error(tmp_path, env, "model_profiles:\n  answer: {reasoning_effort: null}\n")
    assert "model_profiles.answer.reasoning_effort" in message


def test_partial_profile_inherits_the_keys_it_lacks(tmp_path, env):
    """With answer's model set, each key a tool's profile does not set is answer's."""
    config = load(
        tmp_path,
        env,
        ANSWER + "  answer_detailed: {model: o3}\n  answer_quick: {verbosity: high}\n",
    )
    assert config.profile("answer_detailed") == {
        "model": "o3",
        "reasoning_effort": "high",
        "verbosity": "low",
    }
    assert config.profile("answer_quick") == {
        "model": "gpt-5-mini",
        "reasoning_effort": "high",
        "verbosity": "high",
    }


def test_empty_profile_mapping_sets_nothing(tmp_path, env):
    config = load(tmp_path, env, ANSWER + "  answer_quick: {}\n")
    assert config.profile("answer_quick") == config.profile("answer")
    assert load(tmp_path, env, "model_profiles:\n  answer_quick: {}\n").profile("answer_quick") == {
        "model": "gpt-6-luna",
        **QUICK,
    }


def test_model_flag_is_answers_and_reaches_the_tools_the_user_left_unset(tmp_path, env):
    config = load(
        tmp_path, env, "model_profiles:\n  answer_detailed: {model: o3}\n", model="m-flag"
    )
    assert config.profile("answer")["model"] == "m-flag"
    assert config.profile("answer_quick")["model"] == "m-flag"
    assert config.profile("answer_detailed")["model"] == "o3"


def test_profile_env_var_sets_only_its_model(tmp_path, env):
    env["MODEL_QUICK"] = "gpt-5-nano"
    config = load(tmp_path, env, ANSWER)
    assert config.profile("answer_quick") == {
        "model": "gpt-5-nano",
        "reasoning_effort": "high",
        "verbosity": "low",
    }
    assert config.profile("answer_detailed")["model"] == "gpt-5-mini"
    alone = load(tmp_path, env, "")  # no answer model: the per-tool defaults
    assert alone.profile("answer_quick") == {"model": "gpt-5-nano", **QUICK}
    assert alone.profile("answer_detailed")["model"] == "gpt-6.2-sol"


# -- the API key never comes from YAML --------------------------------------------------------

YAML_KEY = "sk-proj-yamlSECRET0123456789abcdef"


def test_api_key_in_yaml_is_refused_without_echoing_it(tmp_path, env):
    message = config_error(tmp_path, env, f"openai:\n  api_key: {YAML_KEY}\n")
    assert "environment" in message
    assert f"{tmp_path / 'config.yaml'}:2" in message
    assert YAML_KEY not in message
    assert "yamlSECRET" not in message


def test_api_key_written_as_the_openai_section_is_refused_without_echoing_it(tmp_path, env):
    message = config_error(tmp_path, env, f"openai: {YAML_KEY}\n")
    assert "openai" in message
    assert "yamlSECRET" not in message


def test_cli_refuses_api_key_in_yaml_with_exit_2_and_does_not_print_it(tmp_path):
    path = write(tmp_path, f"openai: {{api_key: {YAML_KEY}}}\n")
    for args in (["--show-config"], ["--stdio"]):
        proc = run_cli(tmp_path, *args, "--config", str(path), input="")
        assert proc.returncode == 2
        line = one_stderr_line(proc)
        assert "environment" in line
        assert "yamlSECRET" not in proc.stderr + proc.stdout


# -- unknown keys warn and start-up continues -------------------------------------------------


def test_unknown_key_warns_with_a_close_suggestion(tmp_path, env):
    config = load(tmp_path, env, "request:\n  timeout: 5\n")
    (warning,) = config.warnings
    assert f"{tmp_path / 'config.yaml'}:2" in warning
    assert "request.timeout" in warning
    assert "did you mean request.timeout_ms?" in warning
    assert config.get("request", "timeout_ms") == 300_000


def test_unknown_key_far_from_any_setting_warns_without_suggestion(tmp_path, env):
    config = load(tmp_path, env, "colour: blue\n")
    (warning,) = config.warnings
    assert "colour" in warning
    assert "did you mean" not in warning


@pytest.mark.parametrize("key", ["background", "verbosity", "search_context_size"])
def test_a_key_answer_deep_has_not_is_not_sent_to_answers(tmp_path, env, key):
    """Issue 39: answer_deep.background (a ZDR user turning it off) suggested
    model_profiles.answer.background, which would change every other tool instead."""
    config = load(tmp_path, env, f"model_profiles:\n  answer_deep:\n    {key}: low\n")
    (warning,) = config.warnings
    assert f"unknown key model_profiles.answer_deep.{key} (answer_deep has none: it" in warning
    assert "did you mean" not in warning


def test_cli_prints_unknown_key_warning_to_stderr_and_starts(tmp_path):
    path = write(tmp_path, "request: {timeout: 5}\n")
    proc = run_cli(tmp_path, "--show-config", "--config", str(path))
    assert proc.returncode == 0
    first = proc.stderr.splitlines()[0]
    assert "warning" in first
    assert "did you mean request.timeout_ms?" in first
    assert show_config(proc)["config"]["request"]["timeout_ms"] == 300_000


# -- YAML syntax errors -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("yaml", "line"),
    [
        ("request:\n  timeout_ms: [1000\n", 2),
        ("server:\n\tdebug: true\n", 2),
        ("a: 1\nb: &anchor 2\n", 2),
        ("a: 1\na: 2\n", 2),
    ],
    ids=["unclosed-flow", "tab-indent", "anchor", "duplicate-key"],
)
def test_cli_reports_yaml_syntax_error_as_path_line_and_exits_2(tmp_path, yaml, line):
    path = write(tmp_path, yaml)
    proc = run_cli(tmp_path, "--show-config", "--config", str(path))
    assert proc.returncode == 2
    assert f"{path}:{line}: " in one_stderr_line(proc)
    assert proc.stdout == ""


# -- policy.system: instructions from a file ---------------------------------------------------

POLICY_TEXT = "Answer like a ship's captain."


def policy_yaml(tmp_path: Path, merge: str | None) -> str:
    path = write(tmp_path, POLICY_TEXT + "\n", "policy.md")
    merge_line = f", merge: {merge}" if merge else ""
    return f"policy:\n  system: {{source: file, path: {json.dumps(str(path))}{merge_line}}}\n"


def test_builtin_policy_is_the_default(tmp_path, env):
    assert load(tmp_path, env).instructions == mcp.SYSTEM_POLICY


@pytest.mark.parametrize("merge", ["replace", None], ids=["replace", "default-merge"])
def test_policy_file_replace_uses_the_file_only(tmp_path, env, merge):
    instructions = load(tmp_path, env, policy_yaml(tmp_path, merge)).instructions
    assert instructions.strip() == POLICY_TEXT


def test_policy_file_prepend_puts_the_file_before_the_builtin_policy(tmp_path, env):
    instructions = load(tmp_path, env, policy_yaml(tmp_path, "prepend")).instructions
    assert instructions.startswith(POLICY_TEXT)
    assert mcp.SYSTEM_POLICY.strip() in instructions
    assert instructions.index(POLICY_TEXT) < instructions.index(mcp.SYSTEM_POLICY.strip())


def test_policy_file_append_puts_the_file_after_the_builtin_policy(tmp_path, env):
    instructions = load(tmp_path, env, policy_yaml(tmp_path, "append")).instructions
    assert instructions.startswith(mcp.SYSTEM_POLICY.strip())
    assert instructions.rstrip().endswith(POLICY_TEXT)


def test_policy_merge_must_be_replace_prepend_or_append(tmp_path, env):
    message = config_error(tmp_path, env, policy_yaml(tmp_path, "interleave"))
    assert "policy.system.merge" in message
    assert "replace, prepend, append" in message


def test_missing_policy_file_is_an_error_naming_the_path(tmp_path, env):
    missing = tmp_path / "gone" / "policy.md"
    yaml = f"policy:\n  system:\n    source: file\n    path: {json.dumps(str(missing))}\n"
    message = config_error(tmp_path, env, yaml)
    assert str(missing) in message
    assert f"{tmp_path / 'config.yaml'}:4" in message


def test_policy_source_file_without_path_is_an_error(tmp_path, env):
    message = config_error(tmp_path, env, "policy:\n  system:\n    source: file\n")
    assert "policy.system.path" in message


# -- debug: one decision at start-up, CLI > DEBUG env > YAML --------------------------------------


@pytest.mark.parametrize(
    ("flag", "debug_env", "yaml", "on", "file", "source"),
    [
        (None, None, None, False, None, "default"),
        (None, None, "server: {debug: true}", True, None, "yaml"),
        (None, None, "server: {debug: true, debug_file: y.log}", True, "y.log", "yaml"),
        (None, "1", None, True, None, "env DEBUG"),
        (None, "true", None, True, None, "env DEBUG"),
        (None, "1", "server: {debug: false}", True, None, "env DEBUG"),
        (None, "0", "server: {debug: true}", False, None, "env DEBUG"),
        (None, "false", "server: {debug: true}", False, None, "env DEBUG"),
        (None, "/tmp/env-debug.log", None, True, "/tmp/env-debug.log", "env DEBUG"),
        (True, None, None, True, None, "flag --debug"),
        (True, "0", "server: {debug: false}", True, None, "flag --debug"),
        ("flag.log", "/tmp/env-debug.log", None, True, "flag.log", "flag --debug"),
    ],
    ids=[
        "off-by-default",
        "yaml-on",
        "yaml-file",
        "env-1",
        "env-true",
        "env-beats-yaml-off",
        "env-0-beats-yaml-on",
        "env-false-beats-yaml-on",
        "env-path",
        "flag",
        "flag-beats-env-0",
        "flag-path-beats-env-path",
    ],
)
def test_debug_decision(tmp_path, env, flag, debug_env, yaml, on, file, source):
    if debug_env is not None:
        env["DEBUG"] = debug_env
    config = load(tmp_path, env, yaml, debug=flag)
    assert config.get("server", "debug") is on
    assert config.get("server", "debug_file") == file
    where = config.sources[("server", "debug")]
    if source == "yaml":
        assert where == f"{tmp_path / 'config.yaml'}:1"
    else:
        assert where == source


def run_session(server, query: str) -> None:
    server.initialize()
    reply = server.call("answer", {"query": query})
    assert "result" in reply, reply
    server.close_stdin()
    assert server.wait() == 0


def test_debug_lines_go_to_stderr_and_are_appended_to_the_flag_file(spawn, fake, tmp_path):
    log = tmp_path / "debug.log"
    log.write_text("earlier line\n", encoding="utf-8")
    server = spawn("--stdio", "--debug", str(log), upstream=fake)
    query = "What changed in Python 3.13?"
    run_session(server, query)
    text = log.read_text(encoding="utf-8")
    assert text.startswith("earlier line\n")
    debug_lines = [line for line in text.splitlines()[1:] if line.startswith("[debug")]
    assert any(f"queryLen={len(query)}" in line for line in debug_lines)
    for line in debug_lines:
        assert line in server.stderr


def test_debug_env_path_turns_debug_on_with_a_file(spawn, fake, tmp_path):
    log = tmp_path / "env-debug.log"
    server = spawn("--stdio", env={"DEBUG": str(log)}, upstream=fake)
    run_session(server, "hello")
    assert "queryLen=5" in log.read_text(encoding="utf-8")
    assert "queryLen=5" in server.stderr


def test_debug_from_yaml_writes_the_yaml_debug_file(spawn, fake, tmp_path):
    log = tmp_path / "yaml-debug.log"
    server = spawn(
        "--stdio",
        config=f"server:\n  debug: true\n  debug_file: {json.dumps(str(log))}\n",
        upstream=fake,
    )
    run_session(server, "hello")
    assert "queryLen=5" in log.read_text(encoding="utf-8")


def test_debug_env_0_overrides_yaml_debug_true(spawn, fake, tmp_path):
    server = spawn("--stdio", config="server: {debug: true}\n", env={"DEBUG": "0"}, upstream=fake)
    run_session(server, "hello")
    assert "[debug" not in server.stderr
    assert "queryLen" not in server.stderr


def test_no_debug_lines_without_debug(spawn, fake):
    server = spawn("--stdio", upstream=fake)
    run_session(server, "hello")
    assert "[debug" not in server.stderr


def test_the_log_masks_every_secret_it_was_given_whatever_its_shape(tmp_path, capsys):
    """Not only what looks like an OpenAI key: the HTTP token, the tasks secret and every form
    of the database password (main() hands them over), on stderr and in the debug file."""
    token, password = "tok-0123456789abcdef-XYZ", "p/ss w0rd-long"
    log = mcp.Log(True, str(tmp_path / "debug.log"), (token, password))
    log.say(f"refused {token!r}; state: password {password} rejected")
    log.debug("state", f"connect with {password}")
    written = capsys.readouterr().err + (tmp_path / "debug.log").read_text(encoding="utf-8")
    assert token not in written and password not in written
    assert written.count("[redacted]") == 6  # three each, on stderr and in the file


def test_debug_session_never_shows_the_api_key_the_query_or_the_instructions(spawn, fake, tmp_path):
    """A whole session with debug on: a good call and a 401 whose body echoes the key."""
    log = tmp_path / "debug.log"
    query = "Where is the Zorblax-7c1e observatory?"
    server = spawn("--stdio", "--debug", str(log), upstream=fake)
    server.initialize()
    assert "result" in server.call("answer", {"query": query})
    fake.enqueue(Reply(status=401, error_message=f"Incorrect API key provided: {TEST_KEY}."))
    failed = server.call("answer", {"query": query})
    assert failed["error"]["code"] == -32001
    assert failed["error"]["message"].startswith("answer failed: ")
    server.close_stdin()
    assert server.wait() == 0

    debug_text = log.read_text(encoding="utf-8")
    assert f"queryLen={len(query)}" in debug_text
    assert "status=401" in debug_text
    outputs = {
        "stdout": server.reader.raw.decode("utf-8"),
        "stderr": server.stderr,
        "debug file": debug_text,
    }
    policy_line = mcp.SYSTEM_POLICY.splitlines()[0]
    for where, text in outputs.items():
        assert TEST_KEY not in text, where
        assert TEST_KEY.removeprefix("sk-") not in text, where
        assert "Zorblax-7c1e" not in text, where
        assert policy_line not in text, where


@pytest.mark.skipif(os.name == "nt", reason="XDG directories are not read on Windows")
def test_a_relative_xdg_directory_is_ignored_as_the_xdg_spec_says(tmp_path):
    """Issue 39: XDG_STATE_HOME=state put the state (the ledger budgets count) in whatever
    folder the client started the server in, one ledger per folder; XDG_CONFIG_HOME=conf read
    a config from there. Relative ones are ignored: $HOME's defaults apply."""
    home = tmp_path / "home"
    env = {"HOME": str(home), "XDG_STATE_HOME": "state", "XDG_CONFIG_HOME": "conf"}
    (tmp_path / "conf" / mcp.SERVER_NAME).mkdir(parents=True)
    (tmp_path / "conf" / mcp.SERVER_NAME / "config.yaml").write_text("policy: {max_citations: 9}\n")
    shown = show_config(run_cli(tmp_path, "--show-config", env=env))
    expected = home / ".local" / "state" / mcp.SERVER_NAME / "state.sqlite3"
    assert shown["state"] == f"state file {expected}"
    assert shown["config_file"] is None and shown["config"]["policy"]["max_citations"] == 3


@pytest.mark.skipif(os.name == "nt", reason="a POSIX environment holds bytes, not text")
@pytest.mark.parametrize("how", ["env", "flag"])
def test_a_value_in_bytes_that_are_not_utf8_is_a_config_error(tmp_path, fake, how):
    """Issue 39: `--model $'m\\xff'` (or MODEL_ANSWER so) was a UnicodeEncodeError traceback
    at the request, and an "internal error" from a tool call."""
    env = {"OPENAI_BASE_URL": fake.base_url}
    args = ["--ask", "q"]
    if how == "env":
        env["MODEL_ANSWER"] = "gpt-5\udcff"  # the byte 0xff, as Python decodes it from argv
    else:
        args += ["--model", "gpt-5\udcff"]
    proc = run_cli(tmp_path, *args, env=env)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "model_profiles.answer.model (from " in proc.stderr
    assert "holds bytes that are not UTF-8" in proc.stderr
    assert fake.requests == []
