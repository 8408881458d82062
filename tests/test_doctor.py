"""--doctor: one line per check with its fix, exit 1 on any failure, never the key.

Each failure mode is produced for real: the program is run against the fake upstream (which
answers GET /models and GET /models/{id} like the API), a closed port, and a TLS server whose
certificate is not trusted.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
from pathlib import Path

import openai
import pytest
from conftest import PROGRAM, SCRIPT, TEST_KEY, base_env, default_action, run_cli
from fake_upstream import (
    DEFAULT_MODELS,
    FakeResponsesAPI,
    Reply,
    make_tls_material,
    openssl_available,
)

import openai_responses_mcp as mcp

OK, FAIL, WARN, SKIP = "✓", "✗", "!", "-"


def doctor(tmp_path, *args: str, env: dict | None = None, config: str | None = None):
    if config is not None:
        path = tmp_path / "config.yaml"
        path.write_text(config, encoding="utf-8")
        args = (*args, "--config", str(path))
    proc = run_cli(
        tmp_path,
        "--doctor",
        *args,
        env={"PYTHONIOENCODING": "utf-8", **(env or {})},
        encoding="utf-8",
        timeout=60,
    )
    assert TEST_KEY not in proc.stdout + proc.stderr
    assert TEST_KEY[-8:] not in proc.stdout + proc.stderr
    return proc


def against(fake, **extra: str) -> dict:
    return {"OPENAI_BASE_URL": fake.base_url, **extra}


def line_with(proc, text: str) -> str:
    """The one output line holding `text` (with the fix line after it, if any)."""
    lines = proc.stdout.splitlines()
    for i, line in enumerate(lines):
        if text in line:
            after = lines[i + 1] if i + 1 < len(lines) else ""
            return line + ("\n" + after if after.startswith("    fix: ") else "")
    raise AssertionError(f"no line with {text!r} in:\n{proc.stdout}")


def assert_failed(proc, text: str, fix: str) -> None:
    found = line_with(proc, text)
    assert found.startswith(FAIL + " "), found
    assert "    fix: " in found and fix in found, found
    assert proc.returncode == 1
    assert proc.stdout.rstrip().endswith("check(s) failed.")


def cursor_entry(proc) -> dict:
    text = proc.stdout
    start = text.index("Cursor (")
    block = text[text.index("{", start) : text.rindex("}") + 1]
    return json.loads(block)["mcpServers"][mcp.CLIENT_NAME]


# -- everything in order --------------------------------------------------------------------


def test_the_shipped_example_config_is_checked_without_a_traceback(tmp_path, fake):
    """Issue 39: the example sets every key, `state.url: null` among them."""
    proc = doctor(tmp_path, env=against(fake), config=mcp.CONFIG_EXAMPLE)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == 0, proc.stdout
    assert "state.url = null (from " in proc.stdout


# One value of each type YAML can give a key: each key gets each its parser accepts.
VALUE_TYPES = (None, True, 3, 1.5, "x", ["x"], {"x": 3000})


def _nested(path: tuple, value) -> dict:
    for key in reversed(path):
        value = {key: value}
    return value


def test_every_value_a_key_accepts_is_checked_without_a_traceback(tmp_path, fake, monkeypatch):
    """Issue 39: --doctor never ends in a traceback on a config it accepts. In-process (one
    config per accepted key and value: a spawned program each would cost a minute)."""
    env = {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    for name, value in {
        **env,
        "OPENAI_API_KEY": TEST_KEY,
        "OPENAI_BASE_URL": fake.base_url,
    }.items():
        monkeypatch.setenv(name, value)
    path = tmp_path / "config.yaml"
    checked = []
    for key in mcp.SETTINGS:
        for value in VALUE_TYPES:
            path.write_text(json.dumps(_nested(key, value)), encoding="utf-8")
            try:
                mcp.load_config({"config": str(path)}, env)
            except mcp.ConfigError:
                continue
            out = io.StringIO()
            monkeypatch.setattr(sys, "stdout", out)
            status = mcp.run_doctor({"config": str(path)})
            assert status in (0, 1), (key, value)
            checked.append((key, value))
    assert (("state", "url"), None) in checked
    assert {type(value) for _, value in checked} == {type(v) for v in VALUE_TYPES}


def test_a_healthy_setup_passes_every_check_and_exits_0(tmp_path, fake):
    proc = doctor(tmp_path, env=against(fake))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stderr == ""
    assert line_with(proc, f"Python {'.'.join(map(str, sys.version_info[:3]))}").startswith(OK)
    assert f"openai {openai.__version__}" in proc.stdout
    assert line_with(proc, "OPENAI_API_KEY is set").startswith(OK)
    assert line_with(proc, f"base_url {fake.base_url} (from env OPENAI_BASE_URL)").startswith(OK)
    assert line_with(proc, "the API key is accepted").startswith(OK)
    models = {"answer": "gpt-6.1-terra", "answer_detailed": "gpt-6.2-sol"}
    models["answer_quick"] = "gpt-6-luna"
    for tool, model in models.items():  # answer_deep is off
        assert line_with(proc, f"{tool}: model {model} is available").startswith(OK)
    assert "answer_deep: model" not in proc.stdout
    # The retirement check lists answer_deep's model too: it is configured, if off.
    assert line_with(proc, "answer_deep: o4-mini-deep-research has no shutdown date").startswith(OK)
    assert "effort medium, verbosity medium" in proc.stdout
    assert proc.stdout.rstrip().endswith("All checks passed.")
    paths = [r.path for r in fake.requests]
    # The list once (the key check and the shutdown dates), one lookup per distinct model.
    lookups = [f"/v1/models/{model}" for model in models.values()]
    assert paths == ["/v1/models", *lookups]
    assert all(r.authorized_with(TEST_KEY) for r in fake.requests)
    assert not any(r.method == "POST" for r in fake.requests)  # nothing billed without --live


def test_each_value_is_shown_with_where_it_came_from(tmp_path, fake):
    proc = doctor(
        tmp_path,
        env=against(fake, MODEL_QUICK="gpt-5-mini"),
        config="policy:\n  max_citations: 5\n",
    )
    assert proc.returncode == 0, proc.stdout
    assert line_with(proc, f"config file {tmp_path / 'config.yaml'}").startswith(OK)
    assert f"policy.max_citations = 5 (from {tmp_path / 'config.yaml'}:2)" in proc.stdout
    assert 'model_profiles.answer_quick.model = "gpt-5-mini" (from env MODEL_QUICK)' in proc.stdout
    assert line_with(proc, "answer_quick: model gpt-5-mini is available").startswith(OK)


def test_the_client_lines_name_an_absolute_command_and_never_the_key(tmp_path, fake):
    proc = doctor(tmp_path, env=against(fake))
    entry = cursor_entry(proc)
    assert os.path.isabs(entry["command"]) and os.path.exists(entry["command"])
    assert entry["args"][-1] == "--stdio"
    # The key first, as a reference to the client's environment; then what is set here.
    assert next(iter(entry["env"].items())) == ("OPENAI_API_KEY", "${env:OPENAI_API_KEY}")
    assert entry["env"]["OPENAI_BASE_URL"] == fake.base_url
    claude = line_with(proc, "claude mcp add")
    assert "--transport stdio" in claude and f" -- {entry['command']}" in claude
    # The name before --env, which would otherwise take it as a second KEY=VALUE.
    assert claude.strip().startswith("claude mcp add openai-responses --")
    assert claude.index('--env OPENAI_API_KEY="$OPENAI_API_KEY" --env ') > 0
    codex = line_with(proc, "codex mcp add openai-responses ")
    assert codex.rstrip().endswith("--stdio")
    # Codex's `required = true`, which `codex mcp add` cannot set, under the same name.
    required = line_with(proc, "required = true")
    assert "[mcp_servers.openai-responses]" in required and "~/.codex/config.toml" in required


def test_the_client_setup_carries_the_variables_set_here_and_no_secret(tmp_path, fake):
    # What is set only in this shell (answer_deep on, debug, a model) would be lost when the
    # client starts the server with its own environment; a secret stays a reference.
    secret = "s" * 40
    proxy = "http://ann:hunter2@127.0.0.1:9"
    env = against(
        fake,
        MCP_ANSWER_DEEP="1",
        DEBUG="1",
        MODEL_QUICK="gpt-5-mini",
        MCP_TASK_SECRET=secret,
        HTTPS_PROXY=proxy,
        MAX_CITATIONS=" ",  # blank: not set
    )
    proc = doctor(tmp_path, env=env)
    entry = cursor_entry(proc)["env"]
    assert next(iter(entry)) == "OPENAI_API_KEY"
    assert entry["OPENAI_API_KEY"] == "${env:OPENAI_API_KEY}"
    assert (entry["MCP_ANSWER_DEEP"], entry["DEBUG"], entry["MODEL_QUICK"]) == (
        "1",
        "1",
        "gpt-5-mini",
    )
    assert entry["MCP_TASK_SECRET"] == "${env:MCP_TASK_SECRET}"
    assert entry["HTTPS_PROXY"] == "${env:HTTPS_PROXY}"
    assert not {"MAX_CITATIONS", "HOME", "PATH", "XDG_CONFIG_HOME"} & set(entry)
    assert secret not in proc.stdout and "hunter2" not in proc.stdout
    for client in ("claude mcp add", "codex mcp add"):
        line = line_with(proc, client)
        assert '--env OPENAI_API_KEY="$OPENAI_API_KEY" --env ' in line
        assert " --env MCP_ANSWER_DEEP=1 " in line and " --env DEBUG=1 " in line
        assert ' --env MCP_TASK_SECRET="$MCP_TASK_SECRET" ' in line
        assert " --env MAX_CITATIONS" not in line


def test_an_explicit_config_file_is_part_of_the_client_command(tmp_path, fake):
    proc = doctor(tmp_path, env=against(fake), config="policy:\n  max_citations: 4\n")
    assert cursor_entry(proc)["args"][-2:] == ["--config", str(tmp_path / "config.yaml")]


def test_a_model_from_the_command_line_is_shown_as_its_source(tmp_path, fake):
    proc = doctor(tmp_path, "--model", "gpt-5.1", env=against(fake))
    assert proc.returncode == 0, proc.stdout
    assert 'model_profiles.answer.model = "gpt-5.1" (from flag --model)' in proc.stdout


# -- failure modes ----------------------------------------------------------------------------


def test_no_key_fails_naming_the_variable_but_still_checks_the_endpoint(tmp_path, fake):
    proc = doctor(tmp_path, env=against(fake, OPENAI_API_KEY=""))
    assert_failed(proc, "no API key: set OPENAI_API_KEY", "export OPENAI_API_KEY=")
    assert line_with(proc, "is reachable").startswith(OK)
    assert line_with(proc, "key not checked").startswith(SKIP)


def test_a_key_named_by_api_key_env_is_the_one_checked(tmp_path, fake):
    proc = doctor(
        tmp_path,
        env=against(fake, OPENAI_API_KEY="", MY_KEY=TEST_KEY),
        config="openai:\n  api_key_env: MY_KEY\n",
    )
    assert proc.returncode == 0, proc.stdout
    assert line_with(proc, "MY_KEY is set").startswith(OK)
    env = cursor_entry(proc)["env"]
    assert next(iter(env.items())) == ("MY_KEY", "${env:MY_KEY}")
    assert "OPENAI_API_KEY" not in env


def test_a_key_with_a_smart_quote_is_named_without_showing_it(tmp_path, fake):
    proc = doctor(tmp_path, env=against(fake, OPENAI_API_KEY=TEST_KEY + "\u201d"))
    assert_failed(proc, "OPENAI_API_KEY contains a non-ASCII character", "OPENAI_API_KEY=")
    assert "U+201D); re-copy the key" in proc.stdout
    assert TEST_KEY[:12] not in proc.stdout


def test_a_wrong_key_is_rejected_with_401_and_nothing_of_it_is_shown(tmp_path, fake):
    fake.api_keys = {"sk-the-right-key-0123456789"}
    proc = doctor(tmp_path, env=against(fake))
    assert line_with(proc, "is reachable").startswith(OK)
    assert_failed(proc, "the API key was rejected (HTTP 401 invalid_api_key)", "api-keys")
    assert "Incorrect API key" not in proc.stdout  # the API echoes part of the key there
    assert "model" not in line_with(proc, "rejected")


def test_an_unreachable_url_names_it_and_the_precise_error(tmp_path):
    with socket.socket() as probe:  # a port that was free a moment ago: nothing listens
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    proc = doctor(tmp_path, env={"OPENAI_BASE_URL": url})
    assert_failed(proc, f"base_url {url} (from env OPENAI_BASE_URL) is not reachable", "port")
    assert "refused" in line_with(proc, "not reachable")
    assert "    network: " in proc.stdout
    assert line_with(proc, "key and models not checked").startswith(SKIP)


def test_a_proxy_password_is_hidden_in_the_network_line(tmp_path):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proxy = f"http://user:hunter2secret@127.0.0.1:{port}"
    env = {"OPENAI_BASE_URL": "http://example.invalid/v1", "NO_PROXY": "", "no_proxy": ""}
    env.update(HTTP_PROXY=proxy, http_proxy=proxy, ALL_PROXY="", all_proxy="")
    proc = doctor(tmp_path, env=env)
    assert proc.returncode == 1
    assert "hunter2secret" not in proc.stdout
    assert f"http_proxy=http://***@127.0.0.1:{port}" in proc.stdout.lower()


@pytest.fixture(scope="module")
def tls(tmp_path_factory):
    if not openssl_available():
        pytest.skip("the openssl command is not installed")
    return make_tls_material(str(tmp_path_factory.mktemp("tls")))


def test_an_untrusted_tls_certificate_is_named_with_ssl_cert_file_as_the_fix(tmp_path, tls):
    with FakeResponsesAPI(tls=tls.server_pair) as api:
        proc = doctor(tmp_path, env=against(api))
        assert_failed(proc, "is not trusted", "SSL_CERT_FILE")
        assert "CERTIFICATE_VERIFY_FAILED" in line_with(proc, "is not trusted")
        trusted = doctor(tmp_path, env=against(api, SSL_CERT_FILE=tls.ca_cert))
    assert trusted.returncode == 0, trusted.stdout
    assert f"SSL_CERT_FILE={tls.ca_cert}" in trusted.stdout


def test_a_base_url_without_the_version_path_is_named(tmp_path, fake):
    proc = doctor(tmp_path, env={"OPENAI_BASE_URL": fake.origin})
    assert_failed(proc, "answered HTTP 404 to GET /models", "https://api.openai.com/v1")
    assert "Invalid URL (GET /models)" in proc.stdout


def test_a_model_the_key_cannot_use_fails_naming_the_profile(tmp_path, fake):
    proc = doctor(tmp_path, env=against(fake, MODEL_DETAILED="gpt-9-imaginary"))
    assert_failed(
        proc,
        "answer_detailed: model gpt-9-imaginary (from env MODEL_DETAILED) is not available",
        "model_profiles.answer_detailed.model",
    )
    assert line_with(proc, "answer: model gpt-6.1-terra is available").startswith(OK)
    assert "/v1/models/gpt-9-imaginary" in [r.path for r in fake.requests]


@pytest.mark.parametrize(
    ("model", "effort", "fix"),
    [
        ("gpt-5.2", "minimal", "to low (gpt-5.2 accepts none, low, medium, high, xhigh)"),
        ("gpt-5", "none", "to low (gpt-5 accepts low, medium, high with web search)"),
        ("o3", "xhigh", "to high (o3 accepts low, medium, high)"),
        ("gpt-5.1-chat-latest", "low", "to medium (gpt-5.1-chat-latest accepts only medium)"),
        ("gpt-6.2-sol", "none", "to low (gpt-6.2-sol accepts low, medium, high, xhigh, max)"),
    ],
)
def test_an_effort_the_model_refuses_fails_with_the_accepted_ones(
    tmp_path, fake, model, effort, fix
):
    fake.models.append(model)
    proc = doctor(tmp_path, env=against(fake, MODEL_ANSWER=model, ANSWER_EFFORT=effort))
    assert_failed(
        proc,
        f"answer: model {model} does not accept reasoning_effort '{effort}'",
        f"fix: set ANSWER_EFFORT (model_profiles.answer.reasoning_effort) {fix}",
    )


def test_the_seeds_quick_model_fails_naming_the_quick_profiles_effort(tmp_path, fake):
    # Seed 001's example config: answer_quick on a chat model with effort low (the seed's
    # gpt-5.1-chat-latest has shut down; gpt-5.1-chat-latest takes only medium as well).
    fake.models.append("gpt-5.1-chat-latest")
    config = (
        "model_profiles:\n  answer_quick: {model: gpt-5.1-chat-latest, reasoning_effort: low}\n"
    )
    proc = doctor(tmp_path, env=against(fake), config=config)
    assert_failed(
        proc,
        "answer_quick: model gpt-5.1-chat-latest does not accept reasoning_effort 'low'",
        "fix: set model_profiles.answer_quick.reasoning_effort to medium "
        "(gpt-5.1-chat-latest accepts only medium)",
    )
    assert line_with(proc, "answer: model gpt-6.1-terra is available").startswith(OK)


def test_a_built_in_effort_the_model_refuses_is_adapted_with_a_warning(tmp_path, fake):
    # Only the model set: answer_quick's built-in effort low becomes medium, and doctor says so.
    fake.models.append("gpt-5.1-chat-latest")
    config = "model_profiles:\n  answer_quick: {model: gpt-5.1-chat-latest}\n"
    proc = doctor(tmp_path, env=against(fake), config=config)
    assert proc.returncode == 0, proc.stdout
    warned = line_with(proc, "model_profiles.answer_quick.reasoning_effort: gpt-5.1-chat-latest")
    assert warned.startswith(WARN) and "so medium is used (it accepts only medium)" in warned
    assert "(from default low, adapted to gpt-5.1-chat-latest)" in proc.stdout
    available = line_with(proc, "answer_quick: model gpt-5.1-chat-latest is available")
    assert available.startswith(OK) and "(effort medium, verbosity low)" in available


def test_effort_minimal_fails_because_web_search_cannot_run_with_it(tmp_path, fake):
    config = "model_profiles:\n  answer_quick: {model: gpt-5, reasoning_effort: minimal}\n"
    assert_failed(
        doctor(tmp_path, env=against(fake), config=config),
        "answer_quick: web search cannot run with reasoning_effort 'minimal'",
        "fix: set model_profiles.answer_quick.reasoning_effort to low "
        "(gpt-5 accepts low, medium, high with web search)",
    )


def test_a_verbosity_the_model_refuses_fails_with_the_accepted_ones(tmp_path, fake):
    fake.models.append("gpt-5-chat-latest")
    env = against(fake, MODEL_ANSWER="gpt-5-chat-latest", ANSWER_VERBOSITY="low")
    assert_failed(
        doctor(tmp_path, env=env),
        "answer: model gpt-5-chat-latest does not accept verbosity 'low'",
        "fix: set ANSWER_VERBOSITY (model_profiles.answer.verbosity) to medium "
        "(gpt-5-chat-latest accepts only medium)",
    )


def test_a_model_without_reasoning_is_not_held_to_an_effort(tmp_path, fake):
    proc = doctor(tmp_path, env=against(fake, MODEL_ANSWER="gpt-4.1", ANSWER_EFFORT="xhigh"))
    assert proc.returncode == 0, proc.stdout
    assert line_with(proc, "answer: model gpt-4.1 is available").rstrip().endswith("available")


def test_an_unwritable_debug_file_fails_with_the_reason(tmp_path, fake):
    blocker = tmp_path / "a-file"
    blocker.write_text("", encoding="utf-8")
    target = blocker / "debug.log"  # a file cannot hold files, not even for root
    proc = doctor(tmp_path, env=against(fake), config=f"server:\n  debug_file: {target}\n")
    assert_failed(proc, f"server.debug_file = {target}", "a folder you can write to")
    assert "not a directory" in line_with(proc, "is not writable")


def test_a_writable_debug_file_passes_and_is_not_created(tmp_path, fake):
    target = tmp_path / "logs" / "new" / "debug.log"
    proc = doctor(tmp_path, env=against(fake), config=f"server:\n  debug_file: {target}\n")
    assert proc.returncode == 0, proc.stdout
    assert line_with(proc, f"server.debug_file = {target} is writable").startswith(OK)
    assert not (tmp_path / "logs").exists()


def test_the_state_file_is_checked_at_its_default_place(tmp_path, fake):
    proc = doctor(tmp_path, env=against(fake, XDG_STATE_HOME=str(tmp_path / "state")))
    expected = tmp_path / "state" / "openai-responses-mcp" / "state.sqlite3"
    assert line_with(proc, f"state.path = {expected} is writable").startswith(OK)
    assert not expected.exists()


def test_a_relative_state_path_is_shown_absolute(tmp_path, fake):
    proc = doctor(tmp_path, env=against(fake), config="state: {path: 'here.db'}\n")
    assert line_with(proc, f"state.path = {tmp_path / 'here.db'} is writable").startswith(OK)


def test_a_spent_budget_is_a_warning_with_what_is_spent(tmp_path, fake):
    target = tmp_path / "state.sqlite3"
    state = mcp.StateStore(mcp._SqliteBackend(str(target)), mcp.Log())
    mcp.Ledger(state, "Asia/Tokyo").record(
        mcp.UsageRow("answer", "gpt-5.2", "ok", {"cost": {"usd": 1.25}})
    )
    state.close()
    config = f"state: {{path: '{target}'}}\nbudget: {{daily_usd: 1, monthly_usd: 100}}\n"
    proc = doctor(tmp_path, env=against(fake), config=config)
    assert proc.returncode == 0, proc.stdout  # worth a look, not a broken installation
    spent = line_with(proc, "budget.daily_usd $1.00 is spent ($1.25 today)")
    assert spent.startswith(WARN + " ") and "raise budget.daily_usd" in spent
    assert line_with(proc, "budget.monthly_usd $100.00: $1.25 spent this month").startswith(OK)


def test_a_budget_fails_a_model_it_cannot_count(tmp_path, fake):
    # Its calls are refused under a budget (fail closed), so the doctor fails it.
    fake.models.append("acme-7")
    config = "budget: {daily_usd: 5}\nmodel_profiles: {answer_quick: {model: acme-7}}\n"
    proc = doctor(tmp_path, env=against(fake), config=config)
    failed = line_with(proc, "budget: model acme-7 has no known price")
    assert failed.startswith(FAIL + " ")
    assert "calls are refused while budget.daily_usd is set" in failed
    assert "fix: set pricing.models.acme-7 to" in proc.stdout
    assert proc.returncode == 1
    assert line_with(proc, "budget.daily_usd $5.00: $0.00 spent today").startswith(OK)
    assert not (tmp_path / "xdg-state").exists()  # the check creates no state file


def test_a_per_user_budget_fails_a_model_it_cannot_count(tmp_path, fake):
    """Review 4, m2: "All checks passed" with an unpriced model under a per-user budget,
    while the server refused every call."""
    fake.models.append("acme-7")
    config = "budget: {per_user_daily_usd: 2}\nmodel_profiles: {answer_quick: {model: acme-7}}\n"
    proc = doctor(tmp_path, env=against(fake), config=config)
    failed = line_with(proc, "budget: model acme-7 has no known price")
    assert failed.startswith(FAIL + " ")
    assert "refused while budget.per_user_daily_usd is set" in failed
    assert proc.returncode == 1


def test_a_users_own_allowance_fails_a_model_it_cannot_count(tmp_path, fake):
    fake.models.append("acme-7")
    added = run_cli(tmp_path, "--user", "add", "ada", "--monthly-usd", "3")
    assert added.returncode == 0, added.stderr
    config = "model_profiles: {answer_quick: {model: acme-7}}\n"
    proc = doctor(tmp_path, env=against(fake), config=config)
    failed = line_with(proc, "budget: model acme-7 has no known price")
    assert "refused while ada's own allowance (--user add ada) is set" in failed
    assert proc.returncode == 1


def test_no_budget_is_a_skipped_line(tmp_path, fake):
    proc = doctor(tmp_path, env=against(fake))
    assert line_with(proc, "budget: none").startswith(SKIP + " ")


def test_an_unwritable_state_file_fails_and_off_skips_it(tmp_path, fake):
    blocker = tmp_path / "a-file"
    blocker.write_text("", encoding="utf-8")
    target = blocker / "state.sqlite3"
    proc = doctor(tmp_path, env=against(fake), config=f"state:\n  path: {target}\n")
    assert_failed(proc, f"state.path = {target}", "or set it to off")
    proc = doctor(tmp_path, env=against(fake), config="state:\n  path: off\n")
    assert line_with(proc, "state.path: off").startswith(SKIP)
    assert line_with(proc, "server.debug_file: off").startswith(SKIP)


def test_a_config_error_is_one_failed_check(tmp_path, fake):
    proc = doctor(tmp_path, env=against(fake), config="request:\n  max_retries: 99\n")
    assert_failed(proc, "request.max_retries = 99", "correct the key")


# -- HTTP settings ----------------------------------------------------------------------------


def test_a_weak_http_token_fails_and_a_strong_one_passes(tmp_path, fake):
    weak = doctor(tmp_path, env=against(fake, MCP_HTTP_TOKEN="letmein"))
    assert_failed(weak, "server.http.token (from env MCP_HTTP_TOKEN) is weak", "token_urlsafe")
    assert "letmein" not in weak.stdout
    strong = "Zx8-" + "q7Lk2mN9pR4sT6vW1yB3cD5fG8hJ0kM2"
    proc = doctor(tmp_path, env=against(fake, MCP_HTTP_TOKEN=strong))
    assert proc.returncode == 0, proc.stdout
    assert line_with(proc, "is strong (36 characters)").startswith(OK)
    assert strong not in proc.stdout


def test_trusted_proxies_holding_the_whole_internet_are_warned_of(tmp_path, fake):
    """0.0.0.0/0 lets any client write X-Forwarded-For and so pick whose allowance it spends;
    a proxy's own address is not warned of."""
    config = "server:\n  http:\n    trusted_proxies: [127.0.0.1, 0.0.0.0/0]\n"
    proc = doctor(tmp_path, env=against(fake), config=config)
    warned = line_with(proc, "server.http.trusted_proxies lists 0.0.0.0/0")
    assert warned.startswith(WARN + " ") and "fix: list each proxy's address" in warned, warned
    assert proc.returncode == 0, proc.stdout
    config = "server:\n  http:\n    trusted_proxies: [127.0.0.1, 10.0.0.0/8]\n"
    assert "trusted_proxies lists" not in doctor(tmp_path, env=against(fake), config=config).stdout


def test_an_open_bind_address_without_a_token_fails(tmp_path, fake):
    proc = doctor(tmp_path, "--http", "0.0.0.0:0", env=against(fake))
    assert_failed(proc, "--http 0.0.0.0:0: refusing to serve", "see the message above")


def test_a_port_in_use_fails_and_loopback_passes(tmp_path, fake):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proc = doctor(tmp_path, "--http", f"127.0.0.1:{port}", env=against(fake))
    assert_failed(proc, f"--http 127.0.0.1:{port}: cannot listen there", "pick a free port")
    free = doctor(tmp_path, "--http", "127.0.0.1:0", env=against(fake))
    assert line_with(free, "--http 127.0.0.1:0: loopback only").startswith(OK)


# -- --live -----------------------------------------------------------------------------------


def test_live_makes_one_answer_with_search_and_prints_its_cost(tmp_path, fake):
    fake.default = Reply(
        text="Python 3.14.1 is the latest release. https://www.python.org/downloads/",
        searches=[{"query": "python release", "sources": []}],
        citations=[{"url": "https://www.python.org/downloads/", "title": "Downloads"}],
        usage={"input_tokens": 1200, "output_tokens": 80},
    )  # for the profiles' trials too
    prices = (
        "pricing:\n  web_search_per_1k: 10\n"
        "  models:\n    gpt-6-luna: {input: 1.0, cached_input: 0.1, output: 10.0}\n"
    )
    cache = {"ANSWER_CACHE_TTL_S": "600"}  # the answer cache on, as it is by default
    proc = doctor(tmp_path, "--live", env=against(fake, **cache), config=prices)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    live = line_with(proc, "live answer (answer_quick")
    assert live.startswith(OK) and "with web search, 1 citation(s)" in live
    # 176 input × $1/M + 1,024 cached (the fake's default) × $0.1/M + 80 output × $10/M
    # + 1 search × $10/1k = $0.0110784
    assert live.endswith("cost: $0.0111"), live
    (post,) = [r for r in fake.creates if r.body.get("stream")]
    assert post.body["tools"][0]["type"] == "web_search"
    # Issue 39: a second run (same state, so the answer is in its cache) asks the API again.
    again = doctor(tmp_path, "--live", env=against(fake, **cache), config=prices)
    assert line_with(again, "live answer (answer_quick").endswith("cost: $0.0111"), again.stdout
    assert len([r for r in fake.creates if r.body.get("stream")]) == 2


def test_live_first_tries_each_profiles_settings_as_cheaply_as_a_request_gets(tmp_path, fake):
    proc = doctor(tmp_path, "--live", env=against(fake))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for tool, words in (
        ("answer", "effort medium, verbosity medium"),
        ("answer_detailed", "effort high, verbosity medium"),
        ("answer_quick", "effort low, verbosity low"),
    ):
        assert line_with(proc, f"{tool}: the API accepts its settings ({words})").startswith(OK)
    trials = [r.body for r in fake.creates if not r.body.get("stream")]
    assert [t["reasoning"]["effort"] for t in trials] == ["medium", "high", "low"]
    for trial in trials:
        assert trial["input"] == mcp.TRIAL_INPUT and "instructions" not in trial
        cheap = {k: trial[k] for k in ("max_output_tokens", "tool_choice", "store")}
        assert cheap == {"max_output_tokens": 16, "tool_choice": "none", "store": False}
        assert trial["tools"][0]["type"] == "web_search"
    assert trials[2]["tools"][0]["search_context_size"] == "low"
    assert "live answer (answer_quick" in proc.stdout  # then the one real answer


def test_live_names_the_key_for_a_setting_only_the_api_knows_it_refuses(tmp_path, fake):
    # A -chat-latest model newer than the built-in table: only the API's 400 tells.
    fake.models.append("gpt-5.9-chat-latest")
    proc = doctor(tmp_path, "--live", env=against(fake, MODEL_QUICK="gpt-5.9-chat-latest"))
    assert line_with(proc, "answer_quick: model gpt-5.9-chat-latest is available").startswith(OK)
    assert_failed(
        proc,
        "answer_quick: the API refused reasoning_effort 'low' for gpt-5.9-chat-latest (HTTP 400)",
        "fix: set model_profiles.answer_quick.reasoning_effort to medium "
        "(gpt-5.9-chat-latest accepts only medium)",
    )
    assert line_with(proc, "answer: the API accepts its settings").startswith(OK)
    assert line_with(proc, "live answer not tried").startswith(SKIP)
    assert not any(r.body.get("stream") for r in fake.creates)


def test_live_only_warns_when_a_gateway_refuses_what_only_the_trial_sends(tmp_path, fake):
    store = Reply(
        status=400,
        error_param="store",
        error_code="unsupported_parameter",
        error_message="Unsupported parameter: 'store'.",
    )
    fake.enqueue(store, store, store)  # the three profiles' trials; the live answer is served
    proc = doctor(tmp_path, "--live", env=against(fake))
    assert proc.returncode == 0, proc.stdout
    for tool in ("answer", "answer_detailed", "answer_quick"):  # answer_deep is off
        assert line_with(proc, f"{tool}: its settings could not be tried").startswith(WARN)
    assert "live answer (answer_quick" in proc.stdout


def test_live_prints_tokens_when_the_model_has_no_known_price(tmp_path, fake):
    fake.models = [*fake.models, "my-gateway-model"]
    fake.default = Reply(text="Python 3.14.1.", usage={"input_tokens": 1200, "output_tokens": 80})
    proc = doctor(tmp_path, "--live", env=against(fake, MODEL_QUICK="my-gateway-model"))
    live = line_with(proc, "live answer (answer_quick")
    assert "cost: 1200 input + 80 output tokens, 0 search(es)" in live.splitlines()[0], live


def test_live_is_skipped_after_a_failure(tmp_path, fake):
    proc = doctor(tmp_path, "--live", env=against(fake, MODEL_ANSWER="gpt-9-imaginary"))
    assert proc.returncode == 1
    assert line_with(proc, "live answer not tried").startswith(SKIP)
    assert not any(r.method == "POST" for r in fake.requests)


def test_live_goes_only_with_doctor(tmp_path):
    proc = run_cli(tmp_path, "--live")
    assert proc.returncode == 2 and "--live goes with --doctor" in proc.stderr


# -- pure parts -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "efforts"),
    [
        ("gpt-5.2", ("none", "low", "medium", "high", "xhigh")),
        ("gpt-5.2-2025-12-11", ("none", "low", "medium", "high", "xhigh")),
        ("gpt-5.2-pro", ("medium", "high", "xhigh")),
        ("gpt-5-mini", ("minimal", "low", "medium", "high")),
        ("gpt-5-pro", ("high",)),
        ("gpt-5.1-codex-max", ("none", "low", "medium", "high", "xhigh")),
        ("o4-mini", ("low", "medium", "high")),
        ("gpt-5.1-chat-latest", ("medium",)),
        ("gpt-5.4-mini", ("none", "low", "medium", "high", "xhigh")),
        ("gpt-5.5-2026-04-23", ("none", "low", "medium", "high", "xhigh")),
        ("gpt-5.5-pro", ("medium", "high", "xhigh")),
        ("gpt-7", None),
        ("my-gateway-model", None),
    ],
)
def test_model_efforts_by_longest_family(model, efforts):
    assert mcp.model_efforts(model) == efforts


def test_model_verbosities_are_all_three_unless_listed():
    assert mcp.model_verbosities("gpt-5-chat-latest") == ("medium",)
    assert mcp.model_verbosities("gpt-5.1-chat-latest") == ("low", "medium", "high")
    assert mcp.model_verbosities("gpt-5") == ("low", "medium", "high")


@pytest.mark.parametrize(
    ("token", "weak"),
    [
        ("short", True),
        ("a" * 40, True),
        ("abcdefgh12345678", True),
        ("Zx8-q7Lk2mN9pR4sT6vW1yB3cD5fG8hJ0kM2", False),
    ],
)
def test_token_weakness(token, weak):
    assert (mcp.token_weakness(token) is not None) is weak


def test_connection_errors_are_described_with_their_cause():
    def wrapped(inner: BaseException) -> BaseException:
        try:
            try:
                raise inner
            except BaseException as exc:
                raise openai.APIConnectionError(request=None) from exc  # type: ignore[arg-type]
        except openai.APIConnectionError as outer:
            return outer

    what, fix = mcp.describe_connection_error(
        wrapped(socket.gaierror(-2, "Name or service not known")), "https://api.example/v1"
    )
    assert what == "cannot resolve api.example ([Errno -2] Name or service not known)"
    assert "DNS" in fix
    what, fix = mcp.describe_connection_error(
        wrapped(ssl.SSLError("wrong version number")), "https://h:1/v1"
    )
    assert what.startswith("TLS handshake with h:1 failed")


def test_marks_fall_back_to_words_on_a_console_that_cannot_show_them():
    raw = io.BytesIO()
    out = io.TextIOWrapper(raw, encoding="cp1252")
    check = mcp.Doctor(out)
    check.ok("fine")
    check.fail("broken", "mend it")
    out.flush()
    assert raw.getvalue().decode("cp1252").splitlines() == [
        "ok fine",
        "FAIL broken",
        "    fix: mend it",
    ]


def test_the_fake_lists_and_retrieves_models_as_the_sdk_types_them(fake):
    client = openai.OpenAI(api_key=TEST_KEY, base_url=fake.base_url, max_retries=0)
    page = client.models.list()
    assert [m.id for m in page.data] == list(DEFAULT_MODELS)
    model = client.models.retrieve("gpt-5.2")
    assert isinstance(model, openai.types.Model) and model.object == "model"
    with pytest.raises(openai.NotFoundError) as caught:
        client.models.retrieve("gpt-nope")
    assert caught.value.code == "model_not_found"
    fake.api_keys = {"sk-other-key-000000000"}
    with pytest.raises(openai.AuthenticationError) as rejected:
        client.models.list()
    assert rejected.value.code == "invalid_api_key"
    assert TEST_KEY not in str(rejected.value)


def test_the_command_is_this_installations_script_beside_its_python(monkeypatch, tmp_path):
    bin_dir = tmp_path / "venv" / ("Scripts" if os.name == "nt" else "bin")
    bin_dir.mkdir(parents=True)
    script = bin_dir / ("openai-responses-mcp" + (".exe" if os.name == "nt" else ""))
    script.write_text("", encoding="utf-8")
    monkeypatch.setattr(sys, "executable", str(bin_dir / "python"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert mcp.client_command()[0] == [str(script)]
    script.unlink()
    assert mcp.client_command()[0] == [str(bin_dir / "python"), os.path.abspath(mcp.__file__)]


def test_credentials_in_the_base_url_are_masked_on_every_line(tmp_path, fake):
    url = fake.base_url.replace("http://", "http://gateway-user:gw-pass-1234@")
    proc = doctor(tmp_path, env={"OPENAI_BASE_URL": url})
    assert "gw-pass-1234" not in proc.stdout and "gateway-user" not in proc.stdout
    assert f"base_url http://***@127.0.0.1:{fake.port}/v1" in proc.stdout


def test_a_doctor_line_masks_a_urls_credentials_but_not_sshs_git_user():
    """`uvx --from git+ssh://git@github.com/…` runs as printed; a password or token does not
    appear (issue 39)."""
    out = io.StringIO()
    said = mcp.Doctor(out)
    said.line("uvx --from git+ssh://git@github.com/a/b.git openai-responses-mcp --stdio")
    said.line("git+https://git:ghp_SECRET@github.com/a/b.git https://ann:pw@gw/v1 ssh://ann@h/r")
    assert out.getvalue().splitlines() == [
        "uvx --from git+ssh://git@github.com/a/b.git openai-responses-mcp --stdio",
        "git+https://***@github.com/a/b.git https://***@gw/v1 ssh://***@h/r",
    ]


def test_live_tries_no_deep_research_run_even_when_answer_deep_is_on(tmp_path, fake):
    # A deep research run is billed by the searches it decides to make: no trial of it.
    proc = doctor(tmp_path, "--live", env=against(fake, MCP_ANSWER_DEEP="1"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "answer_deep: not tried (its settings are checked at start-up)" in proc.stdout
    assert line_with(proc, "answer_quick: the API accepts its settings").startswith(OK)
    assert not any("deep-research" in r.body.get("model", "") for r in fake.creates)


# -- this installation: lines that survive a cache clean, extras by the installer's own command


HOME = "/home/ann"
UVX_ENV = f"{HOME}/.cache/uv/archive-v0/jCGp4QQ3v8ur68Q0"
PIPX_ENV = f"{HOME}/.local/share/pipx/venvs/openai-responses-mcp"
UV_TOOL_ENV = f"{HOME}/.local/share/uv/tools/openai-responses-mcp"
SYSTEM = "/usr"
SCRIPT_FILE = f"{HOME}/project/openai_responses_mcp.py"


def kind(prefix: str, *, argv0: str = "", markers: tuple = (), executable: str = "") -> str:
    """install_kind on made-up paths: `markers` are the files that exist."""
    return mcp.install_kind(
        executable or f"{prefix}/bin/python",
        prefix,
        SYSTEM,
        SCRIPT_FILE,
        argv0 or f"{prefix}/bin/openai-responses-mcp",
        exists=lambda path: path in markers,
    )


def test_each_installer_is_told_apart_by_its_paths():
    assert kind(UVX_ENV) == "uvx"
    # A cache set elsewhere (UV_CACHE_DIR), and uv's newer bucket names.
    assert kind("/tmp/c/environments-v2/openai-responses-mcp-3f2a") == "uvx"
    assert kind("/tmp/c/builds-v0/.tmpAbc") == "uvx"
    assert kind(UVX_ENV, argv0=SCRIPT_FILE) == "uv-run"  # `uv run openai_responses_mcp.py`
    assert kind(PIPX_ENV, markers=(f"{PIPX_ENV}/pipx_metadata.json",)) == "pipx"
    assert kind(UV_TOOL_ENV, markers=(f"{UV_TOOL_ENV}/uv-receipt.toml",)) == "uv-tool"
    assert kind(f"{HOME}/.local/openai-responses-mcp") == "venv"
    assert kind(SYSTEM) == "pip"
    assert kind(SYSTEM, argv0=SCRIPT_FILE) == "file"
    assert kind(f"{HOME}/venv", argv0=SCRIPT_FILE) == "file"  # the file, whatever Python
    # Windows paths.
    cache = r"C:\Users\ann\AppData\Local\uv\cache\archive-v0\Xy12"
    assert kind(cache, executable=cache + r"\Scripts\python.exe") == "uvx"
    # A directory merely named like a bucket's prefix is not uv's cache.
    assert kind(f"{HOME}/archive-v0-notes/venv") == "venv"


def test_the_install_the_extra_command_is_the_installers_own():
    python = "/home/ann/my venv/bin/python"
    said = {k: mcp.extra_command("postgres", k, python) for k in ("pipx", "uvx", "uv-tool")}
    assert said == {
        "pipx": "pipx inject openai-responses-mcp 'psycopg[binary]'",
        "uvx": "uvx --with 'psycopg[binary]' openai-responses-mcp",
        "uv-tool": "uv tool install --with 'psycopg[binary]' openai-responses-mcp",
    }
    assert mcp.extra_command("postgres", "venv", python) == (
        "'/home/ann/my venv/bin/python' -m pip install 'openai-responses-mcp[postgres]'"
    )
    assert mcp.extra_command("oauth", "file", python) == (
        "'/home/ann/my venv/bin/python' -m pip install PyJWT cryptography"
    )
    assert (
        mcp.extra_command("oauth", "pipx") == "pipx inject openai-responses-mcp PyJWT cryptography"
    )
    assert mcp.extra_command("oauth", "uvx") == (
        "uvx --with PyJWT --with cryptography openai-responses-mcp"
    )
    assert mcp.extra_command("postgres", "uv-run").startswith("uv run --with 'psycopg[binary]' /")
    assert mcp.shell_quote(r"C:\Program Files\x\python.exe", windows=True) == (
        r'"C:\Program Files\x\python.exe"'
    )


def test_under_uvx_the_client_lines_run_uvx_not_the_cache(monkeypatch):
    monkeypatch.setattr(mcp.sys, "prefix", UVX_ENV)
    monkeypatch.setattr(mcp.sys, "executable", f"{UVX_ENV}/bin/python")
    monkeypatch.setattr(mcp.sys, "argv", [f"{UVX_ENV}/bin/openai-responses-mcp", "--doctor"])
    command = mcp.client_command()[0]
    assert command[-1] == "openai-responses-mcp" and os.path.basename(command[0]) == "uvx"
    assert not any("archive-v0" in part for part in command)
    # Under uvx with the driver added, the line adds it too.
    config = mcp.load_config({}, {"OPENAI_RESPONSES_MCP_STATE_URL": "postgresql://u@h/d"})
    assert mcp.client_command(config)[0][1:] == [
        "--with",
        "psycopg[binary]",
        "openai-responses-mcp",
    ]


def test_under_uvx_from_a_path_or_git_the_lines_say_where_from(monkeypatch):
    """`uvx --from . openai-responses-mcp --doctor`: a line without `--from` would run the
    index's release, or fail (issue 39)."""
    monkeypatch.setattr(mcp.sys, "prefix", UVX_ENV)
    monkeypatch.setattr(mcp.sys, "executable", f"{UVX_ENV}/bin/python")
    monkeypatch.setattr(mcp.sys, "argv", [f"{UVX_ENV}/bin/openai-responses-mcp", "--doctor"])
    monkeypatch.setattr(mcp, "install_source", lambda: f"{HOME}/src/openai responses")
    config = mcp.load_config({}, {"OPENAI_RESPONSES_MCP_STATE_URL": "postgresql://u@h/d"})
    assert mcp.client_command(config)[0][1:] == [
        "--from", f"{HOME}/src/openai responses", "--with", "psycopg[binary]", APP_NAME,
    ]  # fmt: skip
    assert mcp.extra_command("postgres", "uvx") == (
        f"uvx --from '{HOME}/src/openai responses' --with 'psycopg[binary]' {APP_NAME}"
    )
    monkeypatch.setattr(mcp, "install_source", lambda: None)  # from the index
    assert mcp.client_command()[0][1:] == [APP_NAME]


APP_NAME = mcp.SERVER_NAME


@pytest.mark.parametrize(
    ("record", "source"),
    [
        ({"url": "file:///home/ann/src/my%20mcp", "dir_info": {}}, "/home/ann/src/my mcp"),
        ({"url": "file:///tmp/w/openai_responses_mcp-1.0-py3-none-any.whl",
          "archive_info": {}}, "/tmp/w/openai_responses_mcp-1.0-py3-none-any.whl"),
        ({"url": "https://github.com/a/b.git",
          "vcs_info": {"vcs": "git", "commit_id": "0" * 40, "requested_revision": "v1.2"}},
         "git+https://github.com/a/b.git@v1.2"),
        ({"url": "ssh://git@github.com/a/b.git", "vcs_info": {"vcs": "git", "commit_id": "1" * 40}},
         "git+ssh://git@github.com/a/b.git"),
        ({"url": "https://github.com/a/b.git", "subdirectory": "server",
          "vcs_info": {"vcs": "git", "commit_id": "1" * 40}},
         "git+https://github.com/a/b.git#subdirectory=server"),
        ({"url": "https://example.com/x.tar.gz", "archive_info": {}}, "https://example.com/x.tar.gz"),
        ({"dir_info": {}}, None),
        # A folder named with a literal %20: decoded once, as its URL was encoded once.
        ({"url": "file:///home/ann/src/a%2520b", "dir_info": {}}, "/home/ann/src/a%20b"),
        # Credentials never go into a printed line, but for ssh's git user and ${VARIABLE}s.
        ({"url": "https://ann:ghp_SECRET@github.com/a/b.git",
          "vcs_info": {"vcs": "git", "commit_id": "1" * 40, "requested_revision": "main"}},
         "git+https://github.com/a/b.git@main"),
        ({"url": "https://ghp_SECRET@github.com/a/b.git", "vcs_info": {"vcs": "git"}},
         "git+https://github.com/a/b.git"),
        ({"url": "https://ann:pw@example.com/x.tar.gz", "archive_info": {}},
         "https://example.com/x.tar.gz"),
        ({"url": "https://${GIT_USER}:${GIT_TOKEN}@example.com/b.git", "vcs_info": {}},
         "git+https://${GIT_USER}:${GIT_TOKEN}@example.com/b.git"),
        ({"url": "ssh://deploy@host/b.git", "vcs_info": {}}, "git+ssh://deploy@host/b.git"),
        ({"url": "ssh://deploy:pw@host/b.git", "vcs_info": {}}, "git+ssh://host/b.git"),
    ],
)  # fmt: skip
def test_where_uvx_took_this_copy_from_is_read_from_pep_610s_record(record, source):
    assert mcp.direct_url_source(record) == source


def test_an_installed_module_run_with_dash_m_is_its_installations_not_a_copied_file():
    site = f"{HOME}/venv/lib/python3.11/site-packages"
    installed = f"{site}/openai_responses_mcp.py"
    said = mcp.install_kind(
        f"{HOME}/venv/bin/python", f"{HOME}/venv", SYSTEM, installed, installed,
        exists=lambda _path: False, site_dirs=(site,),
    )  # fmt: skip
    assert said == "venv"
    copied = mcp.install_kind(
        f"{HOME}/venv/bin/python", f"{HOME}/venv", SYSTEM, SCRIPT_FILE, SCRIPT_FILE,
        exists=lambda _path: False, site_dirs=(site,),
    )  # fmt: skip
    assert copied == "file"


def test_a_file_run_by_python_is_added_as_python_running_its_loader_on_the_file(tmp_path, fake):
    """A real spawn: the tests run the module file with this Python. Its folder is not put
    on the module path (no PYTHONPATH): the loader is given the file."""
    entry = cursor_entry(doctor(tmp_path, env=against(fake)))
    script = os.path.abspath(mcp.__file__)
    loader = ["-c", mcp.DROPIN_LOADER, script, "--stdio"]
    assert [entry["command"], *entry["args"]] == [sys.executable, *loader]
    assert "PYTHONPATH" not in entry["env"]


# -- a copied file: started from cached bytecode, by lines that run as printed (issue 39) -----

INITIALIZE = {
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {},
               "clientInfo": {"name": "pytest", "version": "0"}},
}  # fmt: skip


# A folder named with what a shell, a JSON string or a module path could misread: os.pathsep
# (PYTHONPATH would read two folders), quotes, `$`, `~`, a space and non-ASCII.
AWKWARD = "my proj:ect $HOME 'q' ~ é"


def doctor_of_a_copy(tmp_path, fake, name: str = "project", **env: str):
    """--doctor of the module copied alone into tmp_path/name, run as a person runs it
    (`python3 …/openai_responses_mcp.py --doctor`): the file itself, so a cold start."""
    folder = tmp_path / name
    folder.mkdir(exist_ok=True)
    shutil.copy2(SCRIPT, folder / SCRIPT.name)
    proc = subprocess.run(
        [sys.executable, str(folder / SCRIPT.name), "--doctor"],
        capture_output=True, encoding="utf-8", timeout=120, cwd=str(tmp_path),
        env=base_env(tmp_path, cold=True, PYTHONIOENCODING="utf-8", **against(fake), **env),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return folder, proc


def read_as_bash_does(line: str, env: dict) -> list[str]:
    """A printed line's words as a person's shell reads them: quotes, `$VARIABLE`s."""
    said = subprocess.run(
        ["bash", "-c", 'printf "%s\\0" ' + line], env=env, capture_output=True, check=True
    )
    return said.stdout.decode().split("\0")[:-1]


def what_each_client_runs(proc, env: dict) -> dict[str, tuple[list[str], dict]]:
    """(command, environment) that Claude Code, Codex and Cursor get from --doctor's lines."""
    runs = {}
    for client in ("claude", "codex"):
        words = read_as_bash_does(line_with(proc, f"{client} mcp add ").strip(), env)
        cut = words.index("--")
        pairs = [words[i + 1] for i in range(cut) if words[i] == "--env"]
        runs[client] = words[cut + 1 :], dict(pair.split("=", 1) for pair in pairs)
    entry = cursor_entry(proc)
    variables = {
        name: env[value[6:-1]] if value.startswith("${env:") else value
        for name, value in entry["env"].items()
    }
    runs["cursor"] = [entry["command"], *entry["args"]], variables
    return runs


def start_as_a_client(command: list[str], variables: dict, cwd: Path, log: Path) -> dict:
    """Starts `command` with only `variables` and PATH (a client's environment, with bytecode
    writing off, as some machines set it, and Python's import log on), sends initialize: the
    reply, the server's resident memory then, its import log and its exit status on SIGTERM."""
    env = {"PATH": os.environ["PATH"], "PYTHONDONTWRITEBYTECODE": "1", "PYTHONVERBOSE": "1"}
    with open(log, "wb") as stderr:
        proc = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
            env={**env, **variables}, cwd=str(cwd),
        )  # fmt: skip
        try:
            proc.stdin.write(json.dumps(INITIALIZE).encode() + b"\n")
            proc.stdin.flush()
            reply = json.loads(proc.stdout.readline())
            status = Path(f"/proc/{proc.pid}/status").read_text()
            rss = next(int(r.split()[1]) for r in status.splitlines() if r.startswith("VmRSS:"))
            proc.send_signal(signal.SIGTERM)
            code = proc.wait(30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
            proc.stdin.close()
            proc.stdout.close()
    return {"reply": reply, "rss_mib": rss / 1024, "log": log.read_text(), "exit": code}


# Modules the server imports before `initialize` (or its first statement does), named as a
# project's own files often are: found first on the module path, each would stop the server.
DECOYS = (
    "json.py", "types.py", "enum.py", "threading.py", "re.py", "contextlib.py",
    "sitecustomize.py", "openai/__init__.py",
)  # fmt: skip


def plant_decoys(folder: Path, *more: str) -> None:
    for name in (*DECOYS, *more):
        (folder / name).parent.mkdir(exist_ok=True)
        (folder / name).write_text(f"raise SystemExit('the decoy {name} was imported')\n")


def assert_each_line_starts_it_from(proc, cache: Path, tmp_path, variables: dict) -> None:
    """Every client's line runs as printed and reads the copy's cached bytecode, with decoy
    modules beside the copy (a project's files, added after --doctor) and in the client's
    working folder: neither is on the module path. The server holds at most 60 MiB after
    `initialize`."""
    key = {"OPENAI_API_KEY": TEST_KEY, "PATH": os.environ["PATH"]}
    runs = what_each_client_runs(proc, key)
    assert runs["claude"] == runs["codex"] == runs["cursor"], runs
    command, env = runs["cursor"]
    script = command[3]
    assert command == [sys.executable, "-c", mcp.DROPIN_LOADER, script, "--stdio"]
    assert {k: v for k, v in env.items() if k.startswith("PYTHON")} == variables
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    plant_decoys(elsewhere, SCRIPT.name)
    plant_decoys(Path(script).parent)
    seen = start_as_a_client(command, env, elsewhere, tmp_path / "imports.log")
    assert seen["reply"]["result"]["serverInfo"]["name"] == mcp.SERVER_NAME, seen
    assert f"code object from {str(cache)!r}" in seen["log"]  # read, not compiled
    assert seen["rss_mib"] <= 60, seen["rss_mib"]
    assert seen["exit"] == 0  # SIGTERM: a clean stop, as the script's
    # The file run by the loader is the script: its flags, output and exit statuses.
    client = {"PATH": os.environ["PATH"], **env}
    version = f"{mcp.SERVER_NAME} {mcp.__version__}\n"
    for args, code, said in ((["--version"], 0, version), (["--stdioo"], 2, "")):
        ran = subprocess.run(
            [*command[:-1], *args], capture_output=True, text=True, env=client, timeout=60
        )
        assert (ran.returncode, ran.stdout) == (code, said), ran.stderr
    assert "--stdioo" in ran.stderr  # the usage error names the option


def test_a_copied_files_doctor_caches_its_bytecode_and_each_client_starts_it_from_there(
    tmp_path, fake
):
    folder, proc = doctor_of_a_copy(tmp_path, fake, AWKWARD)
    cache = folder / "__pycache__" / f"{SCRIPT.stem}.{sys.implementation.cache_tag}.pyc"
    assert cache.is_file()
    assert line_with(proc, f"bytecode cached at {cache}").startswith(OK)
    assert line_with(proc, "the client line starts the server").startswith(OK)
    assert_each_line_starts_it_from(proc, cache, tmp_path, {})


def test_a_copied_file_with_no_writable_pycache_is_cached_under_the_users_cache(tmp_path, fake):
    """Where __pycache__ beside the file cannot be made (a read-only folder; here a file in
    its place, which stops root too), PYTHONPYCACHEPREFIX puts the bytecode in the user's
    cache: the standard library's with it, which the doctor's own start of the line caches."""
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "__pycache__").write_text("")
    prefix = tmp_path / "cache" / mcp.SERVER_NAME / "pycache"
    folder, proc = doctor_of_a_copy(tmp_path, fake, XDG_CACHE_HOME=str(tmp_path / "cache"))
    tag = sys.implementation.cache_tag
    cache = Path(f"{prefix}{folder}") / f"{SCRIPT.stem}.{tag}.pyc"
    assert cache.is_file()
    assert line_with(proc, f"bytecode cached at {cache} (under PYTHONPYCACHEPREFIX").startswith(OK)
    assert_each_line_starts_it_from(proc, cache, tmp_path, {"PYTHONPYCACHEPREFIX": str(prefix)})
    log = (tmp_path / "imports.log").read_text().splitlines()
    compiled = [line for line in log if re.fullmatch(r"# code object from [^']*\.py", line)]
    assert compiled == []  # nothing compiled at the start: all cached by the doctor's own start


def test_a_client_line_that_does_not_start_the_server_is_named_with_its_error():
    said = mcp._first_start([sys.executable, "-c", "raise SystemExit('no module named x')"], {})
    assert said == "exit status 1: no module named x"
    quiet = [sys.executable, "-c", "import sys; sys.stdin.read(); print('{}')"]
    assert mcp._first_start(quiet, {}) == "exit status 0"  # no `initialize` answered
    assert mcp._first_start([sys.executable, "-c", "import json, sys; print(json.dumps("
                             "{'id': 1, 'result': {'serverInfo': {}}}))"], {}) is None  # fmt: skip


def test_a_copied_file_with_no_cache_writable_anywhere_is_started_as_the_file(tmp_path):
    """Neither __pycache__ beside it nor the user's cache can be made (a file in the place of
    each): the plain line, compiled at every start, and no variable naming a cache."""
    script = tmp_path / "openai_responses_mcp.py"
    script.write_text("")
    (tmp_path / "__pycache__").write_text("")
    (tmp_path / "cache").write_text("")
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache"), "HOME": str(tmp_path)}
    said = mcp.dropin_launch(str(script), "/usr/bin/python3", env)
    assert said == (["/usr/bin/python3", str(script)], [], None)


def test_the_loader_is_one_word_for_every_shell_and_config_file():
    """Quoted as one word by POSIX shells (single quotes), Windows' (double quotes: nothing
    in it that cmd or PowerShell expands) and JSON/TOML strings: none of their specials."""
    assert not set(mcp.DROPIN_LOADER) & set("\"'$`%!^&|<>\\\n")
    assert mcp.shell_quote(mcp.DROPIN_LOADER, windows=True) == f'"{mcp.DROPIN_LOADER}"'


def test_a_copied_file_renamed_is_loaded_by_its_path_unless_no_loader_takes_its_name(tmp_path):
    """A name that is not a module's (a dash) is no matter to the loader, given the path;
    a name without .py is, and the file itself is started."""
    script = tmp_path / "openai-responses-mcp.py"
    script.write_text("")
    command, variables, cached = mcp.dropin_launch(str(script), "/usr/bin/python3", {})
    assert command == ["/usr/bin/python3", "-c", mcp.DROPIN_LOADER, str(script)]
    assert (variables, os.path.isfile(cached)) == ([], True)
    bare = tmp_path / "ormcp"
    bare.write_text("")
    command, variables, cached = mcp.dropin_launch(str(bare), "/usr/bin/python3", {})
    assert (command, variables, cached) == (["/usr/bin/python3", str(bare)], [], None)


def test_bytecode_is_compiled_again_only_when_the_file_changed(tmp_path):
    script = tmp_path / "m.py"
    script.write_text("x = 1\n")
    target = mcp.write_bytecode(str(script), None)
    written = os.stat(target).st_mtime_ns
    assert mcp.write_bytecode(str(script), None) == target
    assert os.stat(target).st_mtime_ns == written  # fresh: left as it was
    script.write_text("x = 22\n")
    assert mcp.write_bytecode(str(script), None) == target
    assert os.stat(target).st_mtime_ns != written


def test_a_newer_file_copied_over_with_the_same_size_and_mtime_runs_its_own_code(tmp_path):
    """`cp -p`, or archives with fixed timestamps: a header of mtime and size would still
    match and the old bytecode would run; the source's hash does not (issue 39)."""
    script = tmp_path / "m.py"
    script.write_text("import sys\nsys.exit(1)\n")
    os.utime(script, (1_700_000_000, 1_700_000_000))
    mcp.write_bytecode(str(script), None)
    script.write_text("import sys\nsys.exit(2)\n")  # the same size
    os.utime(script, (1_700_000_000, 1_700_000_000))
    started = [sys.executable, "-c", mcp.DROPIN_LOADER, str(script)]
    assert subprocess.run(started, env={"PYTHONDONTWRITEBYTECODE": "1"}).returncode == 2
    mcp.write_bytecode(str(script), None)  # --doctor run again compiles it again
    assert subprocess.run(started, env={"PYTHONDONTWRITEBYTECODE": "1"}).returncode == 2
    loaded = subprocess.run(started, env={"PYTHONVERBOSE": "1"}, capture_output=True, text=True)
    assert f"code object from '{tmp_path / '__pycache__' / 'm.'}" in loaded.stderr  # cached


@pytest.mark.parametrize("bundle", ["missing.pem", "garbage.pem", "."], ids=str)
def test_a_ca_bundle_that_cannot_be_read_fails_naming_it_not_a_traceback(tmp_path, fake, bundle):
    """Issue 39: SSL_CERT_FILE naming no PEM bundle (missing, not PEM, a directory) ended
    --doctor in a traceback: the HTTP client reads it to build its TLS context, even for
    http://. The check says so, with the fix, and asks the endpoint nothing."""
    (tmp_path / "garbage.pem").write_text("not a certificate\n")
    proc = doctor(tmp_path, env=against(fake, SSL_CERT_FILE=str(tmp_path / bundle)))
    assert "Traceback" not in proc.stderr, proc.stderr
    assert_failed(proc, f"SSL_CERT_FILE={tmp_path / bundle} cannot be used as a CA bundle", "PEM")
    assert fake.requests == []


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are POSIX")
def test_a_fifo_nobody_reads_as_a_written_file_fails_rather_than_hangs(tmp_path, fake):
    """Issue 39: --doctor opened state.path and the debug file to append, and a FIFO nothing
    reads blocked that open, and --doctor, forever."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    config = f"server:\n  debug: true\n  debug_file: {fifo}\nstate:\n  path: {fifo}\n"
    proc = doctor(tmp_path, env=against(fake), config=config)  # its timeout: 60 s
    assert_failed(proc, f"server.debug_file = {fifo}", "a folder you can write to")
    assert "it is a FIFO that nothing reads" in line_with(proc, "is not writable")
    assert line_with(proc, f"state.path = {fifo}").startswith(FAIL)


@pytest.mark.parametrize("kind", ["device", "text"])
def test_a_state_path_that_cannot_hold_a_database_fails(tmp_path, fake, kind):
    """Issue 39: /dev/null and a file that is no SQLite database passed as "writable", then
    every call warned that the state could not be read or written."""
    target = tmp_path / "notes.txt"
    target.write_text("my notes\n", encoding="utf-8")
    path = os.devnull if kind == "device" else str(target)
    proc = doctor(tmp_path, env=against(fake), config=f"state:\n  path: {path}\n")
    assert_failed(proc, f"state.path = {path} (from ", "or set it to off")
    said = "not a regular file" if kind == "device" else "not an SQLite database"
    assert said in line_with(proc, "cannot hold the state")
    assert target.read_text(encoding="utf-8") == "my notes\n"  # and nothing written to it


@pytest.mark.skipif(os.name == "nt", reason="SIGINT to a child is POSIX")
def test_ctrl_c_while_the_endpoint_keeps_it_waiting_is_one_line(tmp_path):
    """Issue 39: Ctrl-C on a --doctor waiting (up to 15 s) for an endpoint that accepts the
    connection and never answers ended in a KeyboardInterrupt traceback."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)
        silent.settimeout(30)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/v1"
        env = base_env(tmp_path, cold=True, OPENAI_BASE_URL=url)  # the signal reaches it
        proc = subprocess.Popen(
            [*PROGRAM, "--doctor"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=env, cwd=str(tmp_path), preexec_fn=default_action("SIGINT"),
        )  # fmt: skip
        try:
            connection, _ = silent.accept()  # it asks GET /models, and waits
            proc.send_signal(signal.SIGINT)
            _, stderr = proc.communicate(timeout=30)
            connection.close()
        finally:
            proc.kill() if proc.poll() is None else None
    assert proc.returncode == 130, stderr
    assert stderr.strip().splitlines() == [f"{mcp.SERVER_NAME}: interrupted"], stderr


@pytest.mark.parametrize("key", ["daily_usd", "per_user_monthly_usd"])
def test_live_under_a_budget_makes_only_the_call_the_budget_admits(tmp_path, fake, key):
    """Issue 39: the profiles' trials went straight to the API, one billed request a profile:
    a budget with no room for any call did not stop them, and the ledger never counted them.
    Under a budget only the live answer is made, admitted (here refused) and counted."""
    config = f"budget:\n  {key}: 0.0001\n"
    proc = doctor(tmp_path, "--live", env=against(fake), config=config)
    assert line_with(proc, "profiles' settings not tried: under budget.").startswith(SKIP)
    assert "has no room for this call" in line_with(proc, "live answer (answer_quick")
    assert fake.creates == []


def test_the_cost_question_and_completion_windows_are_described(tmp_path, fake):
    """(issue 41) What budget.confirm_over_usd and a completion window will do, and
    budget.confirm_required alone, which does nothing, warned."""
    config = "budget: {confirm_over_usd: 1.5, confirm_required: true}\n"
    config += "model_profiles: {answer_detailed: {completion_window: 8h}}\n"
    proc = doctor(tmp_path, env=against(fake), config=config)
    asked = line_with(proc, "budget.confirm_over_usd $1.50: a call that may cost more asks")
    assert asked.startswith(OK + " ") and "other clients' are refused" in asked
    window = line_with(proc, "model_profiles.answer_detailed.completion_window 8h: runs in")
    assert window.startswith(OK + " ") and "at 40% off its tokens" in window
    proc = doctor(tmp_path, env=against(fake), config="budget: {confirm_required: true}\n")
    alone = line_with(proc, "budget.confirm_required does nothing")
    assert alone.startswith(WARN + " ") and "set budget.confirm_over_usd" in proc.stdout
    assert proc.returncode == 0, proc.stdout
    # A window on answer_deep while it is off (docs/costly-runs.md's example alone) is warned.
    config = "model_profiles: {answer_deep: {completion_window: 8h}}\n"
    proc = doctor(tmp_path, env=against(fake), config=config)
    off = line_with(proc, "model_profiles.answer_deep.completion_window 8h does nothing")
    assert off.startswith(WARN + " ") and "set tools.answer_deep: true" in proc.stdout
    proc = doctor(tmp_path, env=against(fake), config=config + "tools: {answer_deep: true}\n")
    assert line_with(proc, "model_profiles.answer_deep.completion_window 8h: runs in")


def test_a_window_on_a_tool_turned_off_by_the_environment_names_the_variable(tmp_path, fake):
    """(issue 41) MCP_ANSWER_DEEP=0 overrides the file's tools.answer_deep: true: the fix names
    the variable, not the file's key, which is set already and would change nothing."""
    config = "tools: {answer_deep: true}\nmodel_profiles: {answer_deep: {completion_window: 2h}}\n"
    proc = doctor(tmp_path, env=against(fake, MCP_ANSWER_DEEP="0"), config=config)
    off = line_with(proc, "model_profiles.answer_deep.completion_window 2h does nothing")
    assert off.startswith(WARN + " ") and "from env MCP_ANSWER_DEEP" in off, off
    assert "fix: set MCP_ANSWER_DEEP=true" in off and "set tools.answer_deep" not in off, off
