"""Tasks across --stateless instances: two real servers sharing MCP_TASK_SECRET and nothing
else. A task created on A is polled, collected and cancelled on B, which rebuilds it from
OpenAI's stored background response (the fake's GET /v1/responses/{id}); a tampered id is
refused; and the same behind nginx, which spreads one client's requests over both."""

from __future__ import annotations

import shutil

import pytest
from conftest import MODERN, Server, base_env, wait_until
from fake_upstream import Reply
from http_client import post, rpc, wait_listening
from test_http import behind_nginx
from test_tasks import check_ext_task
from test_tasks_wire import ANSWER_KEYS, call, meta

import openai_responses_mcp as orm

v1 = pytest.importorskip("mcp_types._v2025_11_25")
v2 = pytest.importorskip("mcp_types._v2026_07_28")

SECRET = "s3cret-" + "0123456789abcdefghijklmnopqrstuvwxyz"
SLOW = Reply(event_delay=0.25)  # a background response whose events take a few seconds
# A call becomes a task after 500 ms; a client without tasks is handed off after 1 s.
CONFIG = "server:\n  tasks:\n    immediate_ms: 500\nrequest:\n  handoff_after_s: 1\n"
# answer_quick runs discounted (issue 41): created unstreamed, so it is collected by polling.
CONFIG += "model_profiles:\n  answer_quick:\n    completion_window: 8h\n"


SHARED_FAKE = True  # `fake` is the module's `upstream`, emptied per test (conftest)


@pytest.fixture(scope="module")
def pair(upstream, tmp_path_factory):
    """Two --stateless instances with the same secret (tasks/get answers at 500 ms)."""
    started = []
    for name in ("a", "b"):
        home = tmp_path_factory.mktemp(name)
        (home / "config.yaml").write_text(CONFIG)
        env = base_env(home, OPENAI_BASE_URL=upstream.base_url, MCP_TASK_SECRET=SECRET)
        args = ["--config", str(home / "config.yaml"), "--http", "127.0.0.1:0", "--stateless"]
        server = Server(args, env, home)
        server.port = wait_listening(server)
        started.append(server)
    yield started
    for server in started:
        server.stop()


def modern(port: int, method: str, params: dict, request_id=1) -> tuple[int, dict]:
    headers = {"MCP-Protocol-Version": MODERN, "Mcp-Method": method}
    name = params.get("taskId") if method.startswith("tasks/") else params.get("name")
    if isinstance(name, str):
        headers["Mcp-Name"] = name
    response = post(port, rpc(method, params, request_id), headers=headers, timeout=30)
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        return response.status, [d for _, d in response.events() if "method" not in d][-1]
    return response.status, response.json()


def classic(port: int, method: str, params: dict, request_id=1) -> dict:
    headers = {"MCP-Protocol-Version": "2025-11-25"}
    response = post(port, rpc(method, params, request_id), headers=headers, timeout=30)
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        return [d for _, d in response.events() if "method" not in d][-1]
    return response.json()


def creates(fake) -> list:
    return [r for r in fake.requests if r.method == "POST" and r.path == "/v1/responses"]


def cancels(fake) -> list:
    return [r for r in fake.requests if r.path.endswith("/cancel")]


def get_until_done(port: int, task_id: str, timeout: float = 20.0) -> dict:
    def done() -> dict | None:
        status, reply = modern(port, "tasks/get", {"taskId": task_id, "_meta": meta()})
        assert status == 200, reply
        task = reply["result"]
        if task["status"] != "working":
            return task
        check_ext_task(task, "WorkingTask")
        return None

    return wait_until(done, timeout, f"task {task_id} to end")


def test_a_task_created_on_a_completes_on_b(pair, fake):
    a, b = pair
    fake.enqueue(SLOW)
    _, created = modern(a.port, "tools/call", call(_meta=meta()))
    result = created["result"]
    check_ext_task(result, "CreateTaskResult")
    assert result["resultType"] == "task" and result["taskId"].startswith("t1.")
    assert creates(fake)[0].body["background"] is True  # forced: any instance can follow it
    done = get_until_done(b.port, result["taskId"])
    check_ext_task(done, "CompletedTask")
    assert done["status"] == "completed" and done["taskId"] == result["taskId"]
    v2.CallToolResult.model_validate(done["result"])
    assert set(done["result"]["structuredContent"]) == ANSWER_KEYS
    assert len(creates(fake)) == 1  # B read the stored response; nothing was sent again
    assert any(r.method == "GET" and r.path.startswith("/v1/responses/") for r in fake.requests)
    assert get_until_done(a.port, result["taskId"])["status"] == "completed"


def test_a_task_created_on_a_is_cancelled_on_b_upstream(pair, fake):
    a, b = pair
    fake.enqueue(Reply(event_delay=2.0))
    _, created = modern(a.port, "tools/call", call(_meta=meta()))
    task_id = created["result"]["taskId"]
    status, ack = modern(b.port, "tasks/cancel", {"taskId": task_id, "_meta": meta()})
    assert status == 200 and ack["result"]["resultType"] == "complete"
    wait_until(lambda: cancels(fake), 10, "POST /responses/{id}/cancel")
    assert cancels(fake)[0].path.startswith("/v1/responses/resp_")
    _, got = modern(b.port, "tasks/get", {"taskId": task_id, "_meta": meta()})
    check_ext_task(got["result"], "CancelledTask")
    assert got["result"]["status"] == "cancelled"

    # A's own call sees its response cancelled upstream: its task is cancelled there too
    def status_on_a() -> str:
        return modern(a.port, "tasks/get", {"taskId": task_id, "_meta": meta()})[1]["result"][
            "status"
        ]

    wait_until(lambda: status_on_a() != "working", 15, "A's call to end")
    assert status_on_a() == "cancelled"


@pytest.mark.parametrize(
    "change, reason",
    [
        (lambda t: t[:-2] + ("AA" if not t.endswith("AA") else "BB"), "forged or altered"),
        (lambda t: t.replace("t1.", "t1.e", 1), "forged or altered"),
        (lambda t: "t2." + t[3:], "version"),
    ],
)
def test_a_tampered_id_is_refused_by_the_other_instance(pair, fake, change, reason):
    a, b = pair
    fake.enqueue(SLOW)
    _, created = modern(a.port, "tools/call", call(_meta=meta()))
    task_id = created["result"]["taskId"]
    status, reply = modern(b.port, "tasks/get", {"taskId": change(task_id), "_meta": meta()})
    assert status == 400 and reply["error"]["code"] == -32602
    assert reason in reply["error"]["message"]
    get_until_done(a.port, task_id)


def test_a_2025_task_created_on_a_is_got_and_collected_on_b(pair, fake):
    a, b = pair
    fake.enqueue(SLOW)
    created = classic(a.port, "tools/call", call(task={"ttl": 600_000}))
    task = v1.CreateTaskResult.model_validate(created["result"]).task
    assert task.task_id.startswith("t1.")
    got = classic(b.port, "tasks/get", {"taskId": task.task_id})
    assert v1.GetTaskResult.model_validate(got["result"]).task_id == task.task_id
    reply = classic(b.port, "tasks/result", {"taskId": task.task_id})
    result = v1.CallToolResult.model_validate(reply["result"])
    assert set(result.structured_content) == ANSWER_KEYS
    assert reply["result"]["_meta"]["io.modelcontextprotocol/related-task"] == {
        "taskId": task.task_id
    }
    assert classic(b.port, "tasks/list", {})["error"]["code"] == -32601  # not across instances


def test_initialize_under_stateless_offers_no_tasks_list(pair):
    a, _ = pair
    init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t"}}
    reply = classic(a.port, "initialize", init)
    assert reply["result"]["capabilities"]["tasks"] == {
        "cancel": {},
        "requests": {"tools": {"call": {}}},
    }


@pytest.mark.skipif(shutil.which("nginx") is None, reason="nginx is not installed")
def test_behind_nginx_a_task_is_created_and_served_by_either_instance(pair, fake, tmp_path):
    a, b = pair
    with behind_nginx(tmp_path, a.port, b.port) as port:
        fake.enqueue(SLOW)
        _, created = modern(port, "tools/call", call(_meta=meta()))
        done = get_until_done(port, created["result"]["taskId"])
        assert done["status"] == "completed"
        assert set(done["result"]["structuredContent"]) == ANSWER_KEYS
        assert len(creates(fake)) == 1


def test_a_handoff_made_on_a_is_collected_on_b(pair, fake):
    a, b = pair
    fake.enqueue(SLOW)
    _, first = modern(a.port, "tools/call", call(_meta=meta(tasks=False)))
    handoff = first["result"]["_meta"]["openai-responses-mcp/handoff"]
    assert handoff["status"] == "working" and handoff["id"].startswith("t1.")
    assert set(first["result"]["structuredContent"]) == ANSWER_KEYS
    for _ in range(30):
        arguments = {"id": handoff["id"], "wait_s": 5}
        _, reply = modern(
            b.port,
            "tools/call",
            call(tool="answer_result", _meta=meta(False)) | {"arguments": arguments},
        )
        status = reply["result"]["_meta"]["openai-responses-mcp/handoff"]["status"]
        if status == "completed":
            break
    assert status == "completed"
    v2.CallToolResult.model_validate(reply["result"])
    assert reply["result"]["resultType"] == "complete"
    assert reply["result"]["structuredContent"]["answer"].startswith("HTTP 404")
    assert len(creates(fake)) == 1


def test_a_handoff_collected_on_b_is_shortened_to_the_size_of_the_client_that_made_it(pair, fake):
    a, b = pair
    report = "Summary.\n\n" + "\n\n".join(f"## Part {i}\n\n" + "Words. " * 300 for i in range(20))
    fake.enqueue(Reply(text=report, event_delay=0.25))
    codex = {**meta(False), "io.modelcontextprotocol/clientInfo": {"name": "codex-mcp-client"}}
    _, first = modern(a.port, "tools/call", call(_meta=codex))
    handoff = first["result"]["_meta"]["openai-responses-mcp/handoff"]
    for _ in range(30):
        params = call(tool="answer_result", _meta=codex) | {"arguments": {"id": handoff["id"]}}
        _, reply = modern(b.port, "tools/call", params)
        if reply["result"]["_meta"]["openai-responses-mcp/handoff"]["status"] == "completed":
            break
    text = reply["result"]["content"][0]["text"]
    assert len(text.encode("utf-8")) <= 12_000 < len(report)  # Codex's size, not B's default
    assert "[Shortened by the server" in reply["result"]["structuredContent"]["answer"]
    assert reply["result"]["_meta"]["shortened"]["limit"] == 12_000


def test_stateless_without_a_secret_offers_no_tasks_and_says_why(upstream, tmp_path):
    env = base_env(tmp_path, OPENAI_BASE_URL=upstream.base_url)
    server = Server(["--http", "127.0.0.1:0", "--stateless"], env, tmp_path)
    try:
        port = wait_listening(server)
        assert "tasks and handoffs are off with --stateless" in server.stderr
        _, reply = modern(port, "server/discover", {"_meta": meta()})
        assert "extensions" not in reply["result"]["capabilities"]
        init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t"}}
        assert "tasks" not in classic(port, "initialize", init)["result"]["capabilities"]
        upstream.enqueue(Reply(delay_before_headers=2.5))
        _, answered = modern(port, "tools/call", call(_meta=meta()))
        assert answered["result"]["resultType"] == "complete"  # inline, however long
    finally:
        server.stop()


def streamed_reads(fake) -> list:
    return [r for r in fake.requests_to("GET", "/v1/responses/") if "stream=true" in r.path]


def test_a_discounted_task_created_on_a_is_collected_on_b_by_polling(pair, fake):
    a, b = pair
    fake.window_polls = 3
    _, created = modern(a.port, "tools/call", call(tool="answer_quick", _meta=meta()))
    task_id = created["result"]["taskId"]
    (create,) = creates(fake)
    assert create.body["background_options"] == {"completion_window": "8h"}
    done = get_until_done(b.port, task_id)
    assert done["status"] == "completed" and done["result"]["_meta"]["window"] == "8h"
    assert done["result"]["_meta"]["cost"]["prices"].endswith("x0.6 (8h window)")
    assert streamed_reads(fake) == []  # it has no stream: B polled it
    assert len(creates(fake)) == 1


def test_a_discounted_handoff_made_on_a_is_collected_on_b_by_polling(pair, fake):
    a, b = pair
    fake.window_polls = 3
    _, first = modern(a.port, "tools/call", call(tool="answer_quick", _meta=meta(tasks=False)))
    handoff = first["result"]["_meta"]["openai-responses-mcp/handoff"]
    arguments = {"id": handoff["id"], "wait_s": 5}
    params = call(tool="answer_result", _meta=meta(False)) | {"arguments": arguments}

    def collected() -> dict | None:
        result = modern(b.port, "tools/call", params)[1]["result"]
        done = result["_meta"]["openai-responses-mcp/handoff"]["status"] == "completed"
        return result if done else None

    result = wait_until(collected, 40, "the handed-off answer on B")
    assert result["structuredContent"]["answer"] and result["_meta"]["window"] == "8h"
    assert streamed_reads(fake) == [] and len(creates(fake)) == 1


def test_a_task_in_a_window_this_version_does_not_know_is_refused_not_cancelled(
    pair, fake, monkeypatch
):
    """A task id a newer server signed, with a completion window this one does not know: its
    response has no stream, and trying to read one would end in cancelling it upstream: the
    id is refused, and the run left to the instance that knows it."""
    a, b = pair
    monkeypatch.setattr(fake, "window_polls", 1000)  # the module's fake: put back after
    _, created = modern(a.port, "tools/call", call(tool="answer_quick", _meta=meta()))
    task_id = created["result"]["taskId"]
    fields = orm.open_task_id(SECRET, task_id)
    newer = {k: v for k, v in fields.items() if k not in ("c", "e", "n")} | {"w": "24h"}
    newer_id = orm.mint_task_id(SECRET, newer, fields["e"] - fields["c"], fields["c"])
    status, reply = modern(b.port, "tasks/get", {"taskId": newer_id, "_meta": meta()})
    assert status == 400 and "newer version" in reply["error"]["message"], reply
    assert "24h" in reply["error"]["message"]
    status, _ = modern(a.port, "tasks/get", {"taskId": task_id, "_meta": meta()})
    assert status == 200 and cancels(fake) == []
    modern(a.port, "tasks/cancel", {"taskId": task_id, "_meta": meta()})
    wait_until(lambda: cancels(fake), 10, "A's cancel upstream")
