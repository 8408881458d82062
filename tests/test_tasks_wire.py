"""Tasks end to end, against the real server over stdio and HTTP: the 2026-07-28 extension
(inline when quick, a task when slow, tasks/get, cancel, update, -32021, -32602), the 2025-11-25
experimental tasks (CreateTaskResult, tasks/get, result, list, cancel, status notifications),
the per-client limit and expiry. Every message is checked with the SDK's wire models and the
extension schema's required fields (tests/test_tasks.py)."""

from __future__ import annotations

import itertools
import json
import time

import pytest
from conftest import META, MODERN, Server, base_env, wait_until
from fake_upstream import Reply
from http_client import post, rpc, wait_listening
from test_tasks import check_ext_task

v1 = pytest.importorskip("mcp_types._v2025_11_25")
v2 = pytest.importorskip("mcp_types._v2026_07_28")

EXT = "io.modelcontextprotocol/tasks"
RELATED = "io.modelcontextprotocol/related-task"
ANSWER_KEYS = {"answer", "used_search", "citations", "model", "response_id"}
CONFIG = """\
server:
  tasks:
    immediate_ms: 1000
    poll_interval_ms: 100
    max_per_client: 3
"""
SLOW = 2.0  # seconds before the fake's headers: well past immediate_ms, even under load


def meta(tasks: bool = True) -> dict:
    caps = {"extensions": {EXT: {}}} if tasks else {}
    return {**META, "io.modelcontextprotocol/clientCapabilities": caps}


QUERIES = itertools.count()


def call(query=None, tool="answer", **params) -> dict:
    """A tools/call's params; each query differs, so no two calls share one request."""
    query = query or f"question {next(QUERIES)}"
    return {"name": tool, "arguments": {"query": query}, **params}


class Stdio:
    """One stdio server, both eras on its one pipe (initialized as 2025-11-25)."""

    name = "stdio"

    def __init__(self, server: Server):
        self.server = server
        self.notes: list = []

    def modern(self, method: str, params: dict, **headers) -> dict:
        return self.request(method, params)

    def classic(self, method: str, params: dict) -> dict:
        return self.request(method, params)

    def request(self, method: str, params: dict) -> dict:
        reply = self.server.request(method, params, timeout=20)
        return reply

    def notifications(self, timeout: float = 5.0) -> list:
        while True:
            try:
                self.notes.append(self.server.recv(timeout))
                timeout = 0.2
            except Exception:  # noqa: BLE001 - queue.Empty: nothing more came
                return self.notes


class Http:
    """One --http server: 2026-07-28 requests need no session; 2025-11-25 ones use one."""

    name = "http"

    def __init__(self, server: Server):
        self.port = server.port
        self.ids = 0
        init = {
            "protocolVersion": "2025-11-25",
            "capabilities": {"tasks": {}},
            "clientInfo": {"name": "pytest", "version": "0"},
        }
        reply = post(self.port, rpc("initialize", init), headers={"MCP-Protocol-Version": None})
        self.session = reply.headers["mcp-session-id"]
        self.last = None

    def _id(self) -> int:
        self.ids += 1
        return self.ids

    def modern(self, method: str, params: dict, **headers) -> dict:
        sent = {"MCP-Protocol-Version": MODERN, "Mcp-Method": method}
        name = params.get("taskId") if method.startswith("tasks/") else params.get("name")
        if isinstance(name, str):
            sent["Mcp-Name"] = name
        sent.update(headers)
        return self._reply(post(self.port, rpc(method, params, self._id()), headers=sent))

    def classic(self, method: str, params: dict) -> dict:
        sent = {"MCP-Protocol-Version": "2025-11-25"}
        return self._reply(post(self.port, rpc(method, params, self._id()), self.session, sent))

    def _reply(self, response) -> dict:
        self.last = response
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            replies = [data for _, data in response.events() if "method" not in data]
            return replies[-1]
        return response.json()


SHARED_FAKE = True  # `fake` is the module's `upstream`, emptied per test (conftest)


@pytest.fixture(scope="module")
def servers(upstream, tmp_path_factory):
    started: dict = {}

    def get(kind: str):
        if kind not in started:
            home = tmp_path_factory.mktemp(kind)
            (home / "config.yaml").write_text(CONFIG)
            args = ["--config", str(home / "config.yaml")]
            args += ["--http", "127.0.0.1:0"] if kind == "http" else ["--stdio"]
            server = Server(args, base_env(home, OPENAI_BASE_URL=upstream.base_url), home)
            if kind == "http":
                server.port = wait_listening(server)
                started[kind] = (server, Http(server))
                # openai loaded: a quick call answers well within immediate_ms, even under load
                started[kind][1].classic("tools/call", call("warm up"))
            else:
                server.initialize("2025-11-25")
                server.call("answer", {"query": "warm up"})  # openai loaded: calls are quick
                started[kind] = (server, Stdio(server))
        return started[kind][1]

    yield get
    for server, _ in started.values():
        server.stop()


@pytest.fixture(params=["stdio", "http"])
def client(request, servers, fake):
    return servers(request.param)


def ext_get(client, task_id: str) -> dict:
    reply = client.modern("tasks/get", {"taskId": task_id, "_meta": meta()})
    assert "result" in reply, reply
    assert reply["result"]["resultType"] == "complete"
    return reply["result"]


def ext_wait(client, task_id: str, timeout: float = 15.0) -> dict:
    def done() -> dict | None:
        task = ext_get(client, task_id)
        return task if task["status"] != "working" else None

    return wait_until(done, timeout, f"task {task_id} to end")


def start_ext_task(client, fake, reply: Reply | None = None) -> dict:
    fake.enqueue(reply or Reply(delay_before_headers=SLOW))
    created = client.modern("tools/call", call(_meta=meta()))
    assert "result" in created, created
    result = created["result"]
    check_ext_task(result, "CreateTaskResult")
    assert result["resultType"] == "task" and result["status"] == "working"
    assert result["pollIntervalMs"] == 100 and result["ttlMs"] == 3_600_000
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"]
    return result


# -- the 2026-07-28 extension ----------------------------------------------------------------------


def test_discover_declares_the_extension(client):
    reply = client.modern("server/discover", {"_meta": meta()})
    v2.DiscoverResultResponse.model_validate(reply)
    assert reply["result"]["capabilities"]["extensions"] == {EXT: {}}


def test_a_quick_call_from_a_task_client_answers_inline(client, fake):
    reply = client.modern("tools/call", call(_meta=meta()))
    v2.CallToolResultResponse.model_validate(reply)
    assert reply["result"]["resultType"] == "complete"
    assert set(reply["result"]["structuredContent"]) == ANSWER_KEYS


def test_a_slow_call_becomes_a_task_that_completes_with_the_full_result(client, fake):
    created = start_ext_task(client, fake)
    working = ext_get(client, created["taskId"])
    check_ext_task(working, "WorkingTask")
    assert working["taskId"] == created["taskId"] and working["status"] == "working"
    done = ext_wait(client, created["taskId"])
    check_ext_task(done, "CompletedTask")
    assert done["status"] == "completed"
    inner = done["result"]
    v2.CallToolResult.model_validate(inner)
    assert set(inner["structuredContent"]) == ANSWER_KEYS
    assert json.loads(inner["content"][0]["text"]) == inner["structuredContent"]
    assert inner["_meta"]["response_id"].startswith("resp_")
    assert len([r for r in fake.requests if r.path.endswith("/responses")]) == 1


def test_a_call_without_the_extension_never_becomes_a_task(client, fake):
    fake.enqueue(Reply(delay_before_headers=SLOW))
    reply = client.modern("tools/call", call(_meta=meta(tasks=False)))
    v2.CallToolResultResponse.model_validate(reply)
    assert reply["result"]["resultType"] == "complete"
    assert set(reply["result"]["structuredContent"]) == ANSWER_KEYS


def test_tasks_requests_without_the_extension_are_32021(client, fake):
    created = start_ext_task(client, fake)
    for method in ("tasks/get", "tasks/cancel", "tasks/update"):
        reply = client.modern(method, {"taskId": created["taskId"], "_meta": meta(tasks=False)})
        v2.JSONRPCErrorResponse.model_validate(reply)
        assert reply["error"]["code"] == -32021
        v2.MissingRequiredClientCapabilityError.model_validate(reply)
        assert reply["error"]["data"]["requiredCapabilities"] == {"extensions": {EXT: {}}}
        if client.name == "http":
            assert client.last.status == 400
    ext_wait(client, created["taskId"])


@pytest.mark.parametrize("task_id", ["nope", "x-unknownunknownunknownunknown", "t1.e30.AAAA"])
def test_an_unknown_task_id_is_32602(client, task_id):
    reply = client.modern("tasks/get", {"taskId": task_id, "_meta": meta()})
    assert reply["error"]["code"] == -32602
    assert "unknown task id" in reply["error"]["message"]
    if client.name == "http":
        assert client.last.status == 400


def test_tasks_update_is_a_clear_error(client, fake):
    created = start_ext_task(client, fake)
    reply = client.modern("tasks/update", {"taskId": created["taskId"], "_meta": meta()})
    assert reply["error"]["code"] == -32602
    assert "never asks for input" in reply["error"]["message"]
    ext_wait(client, created["taskId"])


def test_tasks_cancel_acks_and_the_task_stays_cancelled(client, fake):
    created = start_ext_task(client, fake, Reply(delay_before_headers=30))
    wait_until(lambda: fake.requests, 5, "the request upstream")
    reply = client.modern("tasks/cancel", {"taskId": created["taskId"], "_meta": meta()})
    assert reply["result"] == {
        "resultType": "complete",
        "_meta": reply["result"]["_meta"],
    }
    v2.Result.model_validate(reply["result"])
    task = ext_get(client, created["taskId"])
    check_ext_task(task, "CancelledTask")
    assert task["status"] == "cancelled"
    wait_until(lambda: fake.requests[0].client_disconnected_at, 5, "the upstream hang-up")
    # cancelling again, finished or not, is still an ack
    again = client.modern("tasks/cancel", {"taskId": created["taskId"], "_meta": meta()})
    assert "result" in again


def test_a_failed_task_is_failed_with_the_32001_error(client, fake):
    created = start_ext_task(client, fake, Reply(status=401, delay_before_headers=SLOW))
    task = ext_wait(client, created["taskId"])
    check_ext_task(task, "FailedTask")
    assert task["status"] == "failed"
    assert task["error"]["code"] == -32001
    assert task["error"]["message"].startswith("answer failed: ")
    assert task["statusMessage"] == task["error"]["message"]


def test_an_mcp_name_that_is_not_the_task_id_is_32020(servers, fake):
    client = servers("http")
    created = start_ext_task(client, fake)
    reply = client.modern(
        "tasks/get", {"taskId": created["taskId"], "_meta": meta()}, **{"Mcp-Name": "other"}
    )
    assert client.last.status == 400 and reply["error"]["code"] == -32020
    ext_wait(client, created["taskId"])


# -- 2025-11-25 experimental tasks -----------------------------------------------------------------


def test_2025_tools_support_tasks_optionally(client):
    reply = client.classic("tools/list", {})
    tools = v1.ListToolsResult.model_validate(reply["result"]).tools
    assert [tool.execution.task_support for tool in tools] == ["optional"] * 3


def start_2025_task(client, fake, reply: Reply | None = None, ttl=60_000) -> dict:
    fake.enqueue(reply or Reply(delay_before_headers=1.5))  # a task at once however quick
    created = client.classic("tools/call", call(task={"ttl": ttl}))
    result = v1.CreateTaskResult.model_validate(created["result"])
    assert result.task.status == "working"
    assert created["result"]["task"]["ttl"] == max(ttl, 300_000)  # never below timeout_ms
    assert created["result"]["_meta"]["io.modelcontextprotocol/model-immediate-response"]
    return created["result"]["task"]


def test_a_2025_task_is_created_at_once_and_its_result_blocks_until_done(client, fake):
    task = start_2025_task(client, fake)
    got = client.classic("tasks/get", {"taskId": task["taskId"]})
    assert v1.GetTaskResult.model_validate(got["result"]).status == "working"
    listed = client.classic("tasks/list", {})
    ids = [t.task_id for t in v1.ListTasksResult.model_validate(listed["result"]).tasks]
    assert task["taskId"] in ids
    started = time.monotonic()
    reply = client.classic("tasks/result", {"taskId": task["taskId"]})
    assert time.monotonic() - started > 0.3  # it waited for the answer
    result = v1.CallToolResult.model_validate(reply["result"])
    assert set(result.structured_content) == ANSWER_KEYS
    assert reply["result"]["_meta"][RELATED] == {"taskId": task["taskId"]}
    v1.RelatedTaskMetadata.model_validate(reply["result"]["_meta"][RELATED])
    done = client.classic("tasks/get", {"taskId": task["taskId"]})
    assert v1.GetTaskResult.model_validate(done["result"]).status == "completed"
    terminal = client.classic("tasks/cancel", {"taskId": task["taskId"]})
    assert terminal["error"]["code"] == -32602
    assert "terminal status 'completed'" in terminal["error"]["message"]


def test_a_2025_task_status_notification_reaches_a_stdio_client(servers, fake):
    client = servers("stdio")
    task = start_2025_task(client, fake, Reply(delay_before_headers=0.5))
    client.notes.clear()
    status = "notifications/tasks/status"
    notes = [
        n
        for n in client.notifications()
        if n.get("method") == status and n["params"]["taskId"] == task["taskId"]
    ]
    assert notes, client.notes
    v1.TaskStatusNotification.model_validate(notes[-1])
    assert notes[-1]["params"]["status"] == "completed"


def test_a_failed_2025_task_gives_the_32001_error_from_tasks_result(client, fake):
    task = start_2025_task(client, fake, Reply(status=401, delay_before_headers=0.5))
    reply = client.classic("tasks/result", {"taskId": task["taskId"]})
    assert reply["error"]["code"] == -32001
    got = client.classic("tasks/get", {"taskId": task["taskId"]})
    assert got["result"]["status"] == "failed"
    assert got["result"]["statusMessage"].startswith("answer failed: ")


def test_cancelling_a_2025_task(client, fake):
    task = start_2025_task(client, fake, Reply(delay_before_headers=30))
    wait_until(lambda: fake.requests, 5, "the request upstream")
    reply = client.classic("tasks/cancel", {"taskId": task["taskId"]})
    cancelled = v1.CancelTaskResult.model_validate(reply["result"])
    assert cancelled.status == "cancelled"
    wait_until(lambda: fake.requests[0].client_disconnected_at, 5, "the upstream hang-up")
    assert client.classic("tasks/get", {"taskId": task["taskId"]})["result"]["status"] == (
        "cancelled"
    )
    result = client.classic("tasks/result", {"taskId": task["taskId"]})
    assert result["error"]["code"] == -32602 and "cancelled" in result["error"]["message"]


def test_a_2025_task_id_is_not_an_extension_task_id(client, fake):
    task = start_2025_task(client, fake, Reply())
    reply = client.modern("tasks/get", {"taskId": task["taskId"], "_meta": meta()})
    assert reply["error"]["code"] == -32602


def test_a_handshake_client_that_does_not_ask_for_a_task_answers_inline(client, fake):
    fake.enqueue(Reply(delay_before_headers=0.5))
    reply = client.classic("tools/call", call())
    assert set(reply["result"]["structuredContent"]) == ANSWER_KEYS


# -- bounds ----------------------------------------------------------------------------------------


def collect_all(client) -> None:
    """Collects what earlier tests left uncollected (2025-11-25 tasks, once the short ones
    still running have ended), which counts against the limit until its TTL."""

    def ended() -> bool:
        return all(
            t["status"] != "working" for t in client.classic("tasks/list", {})["result"]["tasks"]
        )

    wait_until(ended, 15, "earlier tests' tasks to end")
    for task in client.classic("tasks/list", {})["result"]["tasks"]:
        client.classic("tasks/result", {"taskId": task["taskId"]})


def test_the_per_client_limit_refuses_a_2025_task_with_a_clear_message(client, fake):
    collect_all(client)
    tasks = [start_2025_task(client, fake, Reply(delay_before_headers=30)) for _ in range(3)]
    reply = client.classic("tools/call", call(task={"ttl": 60_000}))  # refused before upstream
    assert reply["error"]["code"] == -32000
    assert "too many open tasks (3, server.tasks.max_per_client)" in reply["error"]["message"]
    if client.name == "http":
        assert client.last.status == 429
    # A task is the reply at once: cancelled before its request went out, its 30 s reply would
    # be left for the next call.
    wait_until(lambda: fake.queued == 0, 20, "the three tasks' requests")
    for task in tasks:
        client.classic("tasks/cancel", {"taskId": task["taskId"]})
    another = client.classic("tools/call", call("another", task={"ttl": 60_000}))
    # Its upstream request goes out after the reply: collected, it cannot take a later test's.
    client.classic("tasks/result", {"taskId": another["result"]["task"]["taskId"]})


def test_an_extension_call_at_the_per_client_limit_answers_inline(client, fake):
    """A call counts against the limit only once it becomes a task (issue 18): at the limit it
    is not refused, it answers inline, however long it takes."""
    collect_all(client)
    tasks = [start_ext_task(client, fake, Reply(delay_before_headers=30)) for _ in range(3)]
    fake.enqueue(Reply(delay_before_headers=SLOW))
    reply = client.modern("tools/call", call(_meta=meta()))
    assert reply["result"]["resultType"] == "complete", reply
    assert set(reply["result"]["structuredContent"]) == ANSWER_KEYS
    wait_until(lambda: fake.queued == 0, 20, "the three tasks' requests")  # as above
    for task in tasks:
        client.modern("tasks/cancel", {"taskId": task["taskId"], "_meta": meta()})
    another = client.modern("tools/call", call("another", _meta=meta()))  # room again
    if another["result"]["resultType"] == "task":  # collected, as above
        ext_wait(client, another["result"]["taskId"])


def test_a_collected_task_frees_its_place(client, fake):
    collect_all(client)
    for _ in range(4):
        created = start_ext_task(client, fake, Reply(delay_before_headers=SLOW))
        assert ext_wait(client, created["taskId"])["status"] == "completed"


def test_a_2025_task_expires_after_its_ttl(tmp_path, upstream):
    """The ttl a client asks for is granted down to request.timeout_ms; then the task is gone."""
    upstream.clear()
    # 4 s: the task must still be there when its result is asked for, after a first call (the
    # server starts warm, with openai imported; cold, the import took over 5 s once under load).
    (tmp_path / "c.yaml").write_text("request:\n  timeout_ms: 4000\n")
    env = base_env(tmp_path, OPENAI_BASE_URL=upstream.base_url)
    server = Server(["--stdio", "--config", str(tmp_path / "c.yaml")], env, tmp_path)
    try:
        server.initialize("2025-11-25")
        created = server.request("tools/call", call(task={"ttl": 1}))["result"]["task"]
        started = time.monotonic()  # after the task was made: a lower bound on its age
        assert created["ttl"] == 4000
        reply = server.request("tasks/result", {"taskId": created["taskId"]})
        assert "result" in reply
        time.sleep(max(0.0, 4.2 - (time.monotonic() - started)))  # sleep: the point: past ttl
        gone = server.request("tasks/get", {"taskId": created["taskId"]})
        assert gone["error"]["code"] == -32602 and "unknown task id" in gone["error"]["message"]
        assert server.request("tasks/list", {})["result"]["tasks"] == []
    finally:
        server.stop()


def test_a_task_still_working_at_its_expiry_is_cancelled_and_forgotten(monkeypatch):
    import openai_responses_mcp as mcp

    clock = [1_000_000]
    monkeypatch.setattr(mcp, "now_ms", lambda: clock[0])
    table = mcp.TaskTable(2, mcp.Log())
    call = mcp.Call(1, "answer")
    task = mcp.Task("s-1", "s", call, "client", 60_000, "gpt-5.2")
    table.add(task)
    clock[0] += 59_999
    assert table.get("s-1") is task and not call.cancelled.is_set()
    clock[0] += 1
    assert table.get("s-1") is None
    assert call.cancelled.is_set() and task.status == "cancelled"
    assert len(table) == 0


def test_only_a_clients_latest_collected_tasks_are_kept(monkeypatch):
    import openai_responses_mcp as mcp

    table = mcp.TaskTable(2, mcp.Log())
    tasks = []
    for n in range(5):
        task = mcp.Task(f"s-{n}", "s", mcp.Call(n, "answer"), "client", 60_000, "m")
        table.add(task)
        task.finish({"jsonrpc": "2.0", "id": n, "result": {"content": []}})
        task.collected = True
        tasks.append(task)
    other = mcp.Task("s-other", "s", mcp.Call(9, "answer"), "someone else", 60_000, "m")
    table.add(other)
    assert table.get("s-other") is other
    kept = [t.id for t in tasks if table.get(t.id) is not None]
    assert kept == ["s-2", "s-3", "s-4"]  # two collected ones plus the newest


def test_a_2025_task_can_be_answered_from_the_cache(tmp_path, upstream):
    upstream.clear()
    env = base_env(tmp_path, OPENAI_BASE_URL=upstream.base_url, ANSWER_CACHE_TTL_S="600")
    server = Server(["--stdio"], env, tmp_path)
    try:
        server.initialize("2025-11-25")
        server.request("tools/call", call("cached question"))  # fills the cache
        created = server.request("tools/call", call("cached question", task={"ttl": 60_000}))
        task = v1.CreateTaskResult.model_validate(created["result"]).task
        reply = server.request("tasks/result", {"taskId": task.task_id})
        assert set(reply["result"]["structuredContent"]) == ANSWER_KEYS
        assert reply["result"]["_meta"]["cache"]["hit"] is True
        rest = []
        while not server.nothing_within(0.3):
            rest.append(server.recv(0.1))
        assert [m for m in rest if m.get("id") == created["id"]] == []  # no inline reply too
        assert len([r for r in upstream.requests if r.path == "/v1/responses"]) == 1
    finally:
        server.stop()
