"""Tasks and handoffs: their settings, and the self-describing, tamper-proof task id."""

from __future__ import annotations

import base64
import json

import pytest
from conftest import run_cli, show_config
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import openai_responses_mcp as mcp
from openai_responses_mcp import ConfigError, TaskIdError, load_config, mint_task_id, open_task_id

SECRET = "k" * 16 + "0123456789abcdefXYZ"  # 35 printable characters
NOW = 1_800_000_000_000  # epoch ms, 2027-01-15
FIELDS = {
    "r": "resp_68a1b2c3d4e5f60718293a4b5c6d7e8f",
    "t": "answer_detailed",
    "k": "x",
    "d": "2027-01-15",
    "m": 3,
    "o": "gpt-5.2",
}


def load(tmp_path, env: dict | None = None, yaml: str | None = None) -> mcp.Config:
    cli = {}
    if yaml is not None:
        path = tmp_path / "config.yaml"
        path.write_text(yaml, encoding="utf-8")
        cli["config"] = str(path)
    return load_config(
        cli,
        {"XDG_CONFIG_HOME": str(tmp_path / "xdg"), "XDG_STATE_HOME": str(tmp_path), **(env or {})},
    )


def config_error(tmp_path, yaml: str, env: dict | None = None) -> str:
    with pytest.raises(ConfigError) as caught:
        load(tmp_path, env, yaml)
    message = str(caught.value)
    assert "\n" not in message
    return message


# -- settings --------------------------------------------------------------------------------


def test_the_task_settings_and_their_defaults(tmp_path):
    config = load(tmp_path)
    assert config.get("server", "tasks") == {
        "immediate_ms": 2000,
        "ttl_ms": 3_600_000,
        "poll_interval_ms": 5000,
        "max_per_client": 16,
        "max_open": 1000,
        "max_reply_bytes": 64 * 1024 * 1024,
        "secret": None,
    }
    assert config.get("request", "handoff_after_s") is None


@pytest.mark.parametrize(
    ("yaml", "key"),
    [
        ("server: {tasks: {immediate_ms: -1}}", "server.tasks.immediate_ms"),
        ("server: {tasks: {immediate_ms: 600001}}", "server.tasks.immediate_ms"),
        ("server: {tasks: {ttl_ms: 59999}}", "server.tasks.ttl_ms"),
        ("server: {tasks: {ttl_ms: 86400001}}", "server.tasks.ttl_ms"),
        ("server: {tasks: {poll_interval_ms: 99}}", "server.tasks.poll_interval_ms"),
        ("server: {tasks: {max_per_client: 0}}", "server.tasks.max_per_client"),
        ("server: {tasks: {max_per_client: 1.5}}", "server.tasks.max_per_client"),
        ("request: {handoff_after_s: 3601}", "request.handoff_after_s"),
        ("request: {handoff_after_s: -1}", "request.handoff_after_s"),
        ("request: {handoff_after_s: 'soon'}", "request.handoff_after_s"),
    ],
)
def test_an_out_of_range_task_setting_names_its_key(tmp_path, yaml, key):
    assert config_error(tmp_path, yaml + "\n").startswith(key)


def test_a_task_must_outlive_its_call(tmp_path):
    message = config_error(
        tmp_path, "request: {timeout_ms: 600000}\nserver: {tasks: {ttl_ms: 300000}}\n"
    )
    assert message.startswith("server.tasks.ttl_ms = 300000")
    assert "request.timeout_ms (600000)" in message
    config = load(tmp_path, yaml="request: {timeout_ms: 600000}\nserver: {tasks: {ttl_ms: 600000}}")
    assert config.get("server", "tasks", "ttl_ms") == 600_000


@pytest.mark.parametrize(
    "secret",
    ["short-but-printable", "x" * 31, "a" * 20 + " " + "b" * 20, "é" * 40, "tab\t" * 10],
    ids=["short", "31", "space", "non-ascii", "tab"],
)
def test_a_weak_secret_is_refused_without_being_shown(tmp_path, secret):
    message = config_error(tmp_path, "", env={"MCP_TASK_SECRET": secret})
    assert message.startswith("server.tasks.secret (from env MCP_TASK_SECRET)")
    assert "32 printable ASCII" in message
    assert secret.strip() not in message


def test_a_secret_from_the_file_is_refused_without_being_shown(tmp_path):
    message = config_error(tmp_path, "server: {tasks: {secret: [hunter2-hunter2]}}\n")
    assert message.startswith('server.tasks.secret = "***" (from ')
    assert "hunter2" not in message


def test_the_secret_is_read_from_the_environment(tmp_path):
    config = load(tmp_path, {"MCP_TASK_SECRET": f"  {SECRET}  "})
    assert config.get("server", "tasks", "secret") == SECRET
    assert config.sources[("server", "tasks", "secret")] == "env MCP_TASK_SECRET"


def test_show_config_masks_the_secret(tmp_path):
    proc = run_cli(tmp_path, "--show-config", env={"MCP_TASK_SECRET": SECRET})
    shown = show_config(proc)
    assert shown["config"]["server"]["tasks"]["secret"] == "***"
    assert SECRET not in proc.stderr


def test_a_bad_task_setting_stops_start_up_with_exit_2_and_one_line(tmp_path):
    proc = run_cli(tmp_path, "--stdio", env={"MCP_TASK_SECRET": "too-short"})
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "server.tasks.secret" in lines[0]
    assert "too-short" not in proc.stderr
    assert proc.stdout == ""


def test_stateless_tasks_need_the_secret(tmp_path):
    plain = load(tmp_path)
    assert mcp.tasks_off_reason(plain, stateless=False) is None
    reason = mcp.tasks_off_reason(plain, stateless=True)
    assert "server.tasks.secret" in reason and "MCP_TASK_SECRET" in reason
    signed = load(tmp_path, {"MCP_TASK_SECRET": SECRET})
    assert mcp.tasks_off_reason(signed, stateless=True) is None


@pytest.mark.parametrize(
    ("name", "seconds"),
    [
        ("codex-mcp-client", 50),
        ("Codex-MCP-Client ", 50),
        ("claude-ai", 50),
        ("cursor-vscode", 240),
        ("claude-code", 0),
        ("Visual Studio Code", 0),
        ("something-new", 0),
        (None, 0),
        (42, 0),
    ],
)
def test_the_handoff_by_client_when_unset(tmp_path, name, seconds):
    assert mcp.handoff_after(load(tmp_path), name) == seconds


@pytest.mark.parametrize("configured", [0, 1, 120])
def test_a_configured_handoff_applies_to_every_client(tmp_path, configured):
    config = load(tmp_path, yaml=f"request: {{handoff_after_s: {configured}}}\n")
    for name in ("codex-mcp-client", "cursor-vscode", "something-new", None):
        assert mcp.handoff_after(config, name) == configured


# -- the task id -----------------------------------------------------------------------------


def mint(fields=FIELDS, ttl_ms=60_000, now_ms=NOW, secret=SECRET) -> str:
    return mint_task_id(secret, fields, ttl_ms, now_ms)


def refusal(task_id, now_ms=NOW + 1, secret=SECRET) -> str:
    with pytest.raises(TaskIdError) as caught:
        open_task_id(secret, task_id, now_ms)
    return caught.value.reason


def test_an_id_carries_its_fields_back():
    task_id = mint()
    opened = open_task_id(SECRET, task_id, NOW + 59_999)
    assert {key: opened[key] for key in FIELDS} == FIELDS
    assert opened["c"] == NOW and opened["e"] == NOW + 60_000


# Ids minted by an earlier release (SECRET, NOW, a 60 s TTL): a task id outlives its process
# and travels between --stateless instances, so the kind letters it carries never change.
EARLIER_IDS = {
    mcp.TaskKind.EXTENSION: "t1.eyJjIjoxODAwMDAwMDAwMDAwLCJlIjoxODAwMDAwMDYwMDAwLCJrIjoieCIsIm4iOi"
    "JJazNqcFM1ZFJxVSIsInIiOiJyZXNwXzEiLCJ0IjoiYW5zd2VyIn0.EM2r23Rkzml3G54OICPGT7iLanB0VFK5i5MfqMQFlIA",
    mcp.TaskKind.HANDSHAKE: "t1.eyJjIjoxODAwMDAwMDAwMDAwLCJlIjoxODAwMDAwMDYwMDAwLCJrIjoicyIsIm4iOi"
    "JnUFAtYm1GU25TUSIsInIiOiJyZXNwXzEiLCJ0IjoiYW5zd2VyIn0.sivPOHIuLA6hxseKMz_7G0ggai4MAPW4weQXu5NLlC0",
    mcp.TaskKind.HANDOFF: "t1.eyJjIjoxODAwMDAwMDAwMDAwLCJlIjoxODAwMDAwMDYwMDAwLCJrIjoiaCIsIm4iOiJT"
    "d1NYeU85VjlPZyIsInIiOiJyZXNwXzEiLCJ0IjoiYW5zd2VyIn0.Yn7bU4Bkr1zz4N_5E94KI1Dxg9il33HQmpLUy1x2rzk",
}


@pytest.mark.parametrize("kind", sorted(EARLIER_IDS))
def test_an_id_made_by_an_earlier_release_still_opens_as_its_kind(kind):
    opened = open_task_id(SECRET, EARLIER_IDS[kind], NOW + 1)
    assert opened["k"] == kind and opened["r"] == "resp_1" and opened["t"] == "answer"
    assert {mcp.TaskKind.EXTENSION, mcp.TaskKind.HANDSHAKE, mcp.TaskKind.HANDOFF} == {"x", "s", "h"}


def test_an_id_is_url_and_header_safe_and_short_enough():
    task_id = mint()
    assert task_id.startswith("t1.")
    assert set(task_id) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.")
    assert len(task_id) < 400


def test_two_ids_for_the_same_response_differ():
    assert mint() != mint()


def test_the_payload_is_readable_but_the_secret_is_not_in_it():
    body = mint().split(".")[1]
    payload = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    assert payload["r"] == FIELDS["r"]
    assert SECRET not in json.dumps(payload)


def test_an_expired_id_is_refused_with_when():
    task_id = mint(ttl_ms=60_000)
    assert refusal(task_id, now_ms=NOW + 60_000) == "expired at 2027-01-15T08:01:00Z"


def test_an_id_signed_with_another_secret_is_refused():
    other = mint(secret="z" * 40)
    assert refusal(other).startswith("forged or altered")


def test_a_re_signed_payload_with_changed_fields_is_refused():
    version, body, mac = mint().split(".")
    payload = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    payload["e"] = NOW + 10**9  # a longer life, or another response id
    forged = base64.urlsafe_b64encode(json.dumps(payload).encode()).rstrip(b"=").decode()
    assert refusal(f"{version}.{forged}.{mac}").startswith("forged or altered")


@pytest.mark.parametrize(
    ("task_id", "reason"),
    [
        ("786512e2-9e0d-44bd-8f29-789f320fe840", "not a task id of this server"),
        ("", "not a task id of this server"),
        (None, "not a task id of this server"),
        (12, "not a task id of this server"),
        ("t1.abc", "not a task id of this server"),
        ("x1.abc.def", "not a task id of this server"),
        ("t1.é.def", "not a task id of this server"),
        ("t1." + "a" * 5000 + ".b", "not a task id of this server"),
        ("t2.abc.def", "task id version 't2' is not one this server reads"),
    ],
)
def test_what_is_not_one_of_our_ids_is_refused_with_a_reason(task_id, reason):
    assert refusal(task_id) == reason


def test_a_signed_but_unreadable_payload_is_refused():
    signed = "t1." + base64.urlsafe_b64encode(b"[1, 2]").rstrip(b"=").decode()
    assert refusal(f"{signed}.{mcp._task_mac(SECRET, signed)}") == "unreadable"
    signed = "t1.%%%"
    assert refusal(f"{signed}.{mcp._task_mac(SECRET, signed)}") == "unreadable"


ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.=+/ é"


@st.composite
def modified(draw) -> tuple[str, str]:
    """An id and a different string made from it by replacing, inserting, deleting or
    cutting characters anywhere (the signature's last character included)."""
    original = mint()
    text = original
    for _ in range(draw(st.integers(1, 3))):
        edit = draw(st.sampled_from(["replace", "insert", "delete", "truncate", "append"]))
        at = draw(st.integers(0, max(len(text) - 1, 0)))
        char = draw(st.sampled_from(ALPHABET))
        if edit == "replace" and text:
            text = text[:at] + char + text[at + 1 :]
        elif edit == "insert":
            text = text[:at] + char + text[at:]
        elif edit == "delete" and text:
            text = text[:at] + text[at + 1 :]
        elif edit == "truncate":
            text = text[:at]
        else:
            text += char
    return original, text


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(modified())
def test_any_modification_of_an_id_is_refused(pair):
    original, text = pair
    if text == original:
        return  # the edits cancelled out: the same id, rightly accepted
    with pytest.raises(TaskIdError):
        open_task_id(SECRET, text, NOW + 1)


B64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


@pytest.mark.parametrize("char", B64URL)
def test_changing_the_last_signature_character_is_refused_even_when_its_bits_are_ignored(char):
    # The last of 43 base64 characters carries 4 bits of the MAC and 2 that decoding ignores
    # (3 other characters decode to the same bytes): the id is compared as text, so none passes.
    task_id = mint()
    if char != task_id[-1]:
        with pytest.raises(TaskIdError):
            open_task_id(SECRET, task_id[:-1] + char, NOW + 1)


def test_the_iso_time_of_task_timestamps():
    assert mcp.iso_utc(NOW) == "2027-01-15T08:00:00Z"


# -- the wire shapes, checked against the SDK's models and the extension's schema -------------

# What schema/draft/schema.json of modelcontextprotocol/ext-tasks requires of each result.
EXT_TASK_REQUIRED = {"taskId", "status", "createdAt", "lastUpdatedAt", "ttlMs"}
EXT_REQUIRED = {
    "CreateTaskResult": EXT_TASK_REQUIRED | {"resultType"},
    "WorkingTask": EXT_TASK_REQUIRED,
    "CompletedTask": EXT_TASK_REQUIRED | {"result"},
    "FailedTask": EXT_TASK_REQUIRED | {"error"},
    "CancelledTask": EXT_TASK_REQUIRED,
}


def check_ext_task(view: dict, kind: str) -> None:
    assert EXT_REQUIRED[kind] <= set(view)
    assert view["status"] in ("working", "input_required", "completed", "failed", "cancelled")
    assert all(isinstance(view[key], str) for key in ("taskId", "createdAt", "lastUpdatedAt"))
    assert view["ttlMs"] is None or type(view["ttlMs"]) is int
    assert type(view.get("pollIntervalMs", 0)) is int
    assert not {"ttl", "pollInterval"} & set(view)


def view(shape: str, status: str = "working", message=None) -> dict:
    return mcp.task_view(shape, mint(), status, NOW, NOW + 2500, 3_600_000, 5000, message)


def test_the_extension_shape_of_each_status():
    created = {"resultType": "task", **view("extension", message="searching the web")}
    check_ext_task(created, "CreateTaskResult")
    assert created["statusMessage"] == "searching the web"
    assert created["createdAt"] == "2027-01-15T08:00:00Z"
    assert created["lastUpdatedAt"] == "2027-01-15T08:00:02Z"
    check_ext_task(view("extension"), "WorkingTask")
    result = {"content": [{"type": "text", "text": "{}"}], "resultType": "complete"}
    check_ext_task({**view("extension", "completed"), "result": result}, "CompletedTask")
    error = {"code": -32001, "message": "answer failed: x"}
    check_ext_task({**view("extension", "failed"), "error": error}, "FailedTask")
    check_ext_task(view("extension", "cancelled"), "CancelledTask")


def test_the_2025_11_25_shape_validates_with_the_sdk_models():
    v1 = pytest.importorskip("mcp_types._v2025_11_25")
    working = view("2025-11-25", message="searching the web")
    task = v1.Task.model_validate(working)
    assert (task.ttl, task.poll_interval, task.status) == (3_600_000, 5000, "working")
    assert not {"ttlMs", "pollIntervalMs", "resultType"} & set(working)
    v1.CreateTaskResult.model_validate({"task": working})
    v1.GetTaskResult.model_validate(view("2025-11-25", "completed"))
    v1.CancelTaskResult.model_validate(view("2025-11-25", "cancelled", "cancelled by request"))
    v1.ListTasksResult.model_validate({"tasks": [working, view("2025-11-25", "failed")]})
    v1.TaskStatusNotification.model_validate(
        {"jsonrpc": "2.0", "method": "notifications/tasks/status", "params": working}
    )
    v1.RelatedTaskMetadata.model_validate({"taskId": working["taskId"]})


def test_an_unlimited_ttl_is_null_in_both_shapes():
    v1 = pytest.importorskip("mcp_types._v2025_11_25")
    for shape, key in (("extension", "ttlMs"), ("2025-11-25", "ttl")):
        written = mcp.task_view(shape, "t", "working", NOW, NOW, None, 5000)
        assert written[key] is None
    assert v1.Task.model_validate(written).ttl is None


@pytest.mark.parametrize(
    ("params", "declared"),
    [
        ({"_meta": {"io.modelcontextprotocol/clientCapabilities": {"extensions": {
            "io.modelcontextprotocol/tasks": {}}}}}, True),
        ({"_meta": {"io.modelcontextprotocol/clientCapabilities": {"extensions": {
            "io.modelcontextprotocol/tasks": {}, "io.modelcontextprotocol/skills": {}}}}}, True),
        ({"_meta": {"io.modelcontextprotocol/clientCapabilities": {"extensions": {
            "io.modelcontextprotocol/tasks": True}}}}, False),
        ({"_meta": {"io.modelcontextprotocol/clientCapabilities": {"extensions": {}}}}, False),
        ({"_meta": {"io.modelcontextprotocol/clientCapabilities": {"tasks": {}}}}, False),
        ({"_meta": {"io.modelcontextprotocol/clientCapabilities": []}}, False),
        ({"_meta": None}, False),
        ({"task": {"ttl": 60000}}, False),
        ({}, False),
        (None, False),
    ],
)  # fmt: skip
def test_only_a_request_that_declares_the_extension_may_get_a_task(params, declared):
    assert mcp.tasks_extension_declared(params) is declared


def test_the_missing_extension_error_fits_the_2026_schema():
    v2 = pytest.importorskip("mcp_types._v2026_07_28")
    error = mcp.missing_tasks_extension()
    reply = mcp.rpc_error(7, error.code, error.message, error.data)
    parsed = v2.MissingRequiredClientCapabilityError.model_validate(reply)
    assert parsed.error.code == -32021
    assert parsed.error.data.required_capabilities.extensions == {
        "io.modelcontextprotocol/tasks": {}
    }
    assert "io.modelcontextprotocol/tasks" in error.message


def test_the_handoff_answer_fits_the_output_schema_and_says_how_to_collect_it():
    jsonschema = pytest.importorskip("jsonschema")
    handoff_id = mint(fields={**FIELDS, "k": "h"})
    answer = mcp.handoff_answer(handoff_id, "gpt-5.2", 50, 3_600_000)
    jsonschema.validate(answer, mcp.OUTPUT_SCHEMA)
    assert set(answer) == {*mcp.OUTPUT_SCHEMA["required"], "response_id"}
    assert answer["response_id"] is None  # nothing to follow up yet
    assert f'{{"id": "{handoff_id}", "wait_s": 30}}' in answer["answer"]
    assert "answer_result" in answer["answer"] and "60 minutes" in answer["answer"]
    assert answer["model"] == "gpt-5.2" and answer["citations"] == []
