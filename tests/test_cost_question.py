"""The cost question (issue 41): budget.confirm_over_usd asks the person before a costly call,
through the client, in both eras, over the real program's pipes (and HTTP); a no sends nothing
upstream and spends nothing. Every message the server sends the client is checked with the
official SDK's wire models."""

from __future__ import annotations

import json
import sys

import pytest
from conftest import (
    META,
    MODERN,
    PRICES,
    Server,
    failure_of,
    run_cli,
    send_call,
    wait_until,
)
from fake_upstream import SEARCHED

v1 = pytest.importorskip("mcp_types._v2025_11_25")
v2 = pytest.importorskip("mcp_types._v2026_07_28")

SECRET = "s3cret-" + "0123456789abcdefghijklmnopqrstuvwxyz"
# Priced, so that the quote has a figure; any call of `answer` (a search at least: $0.025) is
# over $0.01, and none is over $1000.
ASK = PRICES + "budget:\n  confirm_over_usd: 0.01\n"
FORMS = {"elicitation": {"form": {}}}
ELICIT = "elicitation/create"


def creates(fake) -> list:
    return [r for r in fake.requests if r.method == "POST" and r.path == "/v1/responses"]


def handshake(spawn, fake, config: str = ASK, capabilities=FORMS, version="2025-11-25", **env):
    server = spawn(config=config, upstream=fake, env=env or None)
    reply = server.request(
        "initialize",
        {
            "protocolVersion": version,
            "capabilities": capabilities,
            "clientInfo": {"name": "pytest", "version": "0"},
        },
    )
    assert "result" in reply, reply
    server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    return server


def question(server: Server) -> dict:
    """The elicitation/create the server sends, checked against the SDK's wire model."""
    asked, _ = server.recv_until(lambda m: m.get("method") == "elicitation/create")
    v1.ElicitRequest.model_validate(asked)
    v1.JSONRPCRequest.model_validate(asked)
    return asked


def answer(server: Server, asked: dict, result: dict) -> None:
    v1.ElicitResult.model_validate(result)
    server.send({"jsonrpc": "2.0", "id": asked["id"], "result": result})


def reply_to(server: Server, request_id, timeout: float = 20.0) -> dict:
    reply, _ = server.recv_until(lambda m: m.get("id") == request_id, timeout)
    return reply


def choose(choice: str) -> dict:
    return {"action": "accept", "content": {"choice": choice}}


def not_run(reply: dict) -> dict:
    """An isError result saying the call was not run and nothing was spent."""
    result = reply["result"]
    assert result["isError"] is True, reply
    text = result["content"][0]["text"]
    assert text.startswith("not run: ") and "nothing was sent and nothing was spent" in text
    return result


# -- 2025-11-25: elicitation/create on the session ---------------------------------------------


def test_run_asks_names_tool_model_and_estimate_then_sends(spawn, fake):
    fake.enqueue(SEARCHED)
    server = handshake(spawn, fake)
    send_call(server, 7, "When was Python 3.14 released?")
    asked = question(server)
    params = asked["params"]
    assert params["mode"] == "form"
    assert params["message"].startswith("answer (gpt-6.1-terra) is estimated at $")
    assert "(up to $" in params["message"]
    choice = params["requestedSchema"]["properties"]["choice"]
    v1.TitledSingleSelectEnumSchema.model_validate(choice)
    values = [option["const"] for option in choice["oneOf"]]
    assert values == ["run", "run_discounted", "cancel"]
    assert "Run within 8 hours for $" in choice["oneOf"][1]["title"]
    assert creates(fake) == []  # nothing is sent while the person decides
    answer(server, asked, choose("run"))
    reply = reply_to(server, 7)
    result = reply["result"]
    assert "isError" not in result or result["isError"] is False
    confirm = result["_meta"]["confirm"]
    assert confirm["asked"] is True and confirm["choice"] == "run"
    assert confirm["estimate"]["worst_usd"] >= confirm["estimate"]["expected_usd"] > 0.01
    assert "window" not in confirm
    assert len(creates(fake)) == 1


@pytest.mark.parametrize(
    ("result", "said"),
    [
        (choose("cancel"), "the person chose cancel"),
        ({"action": "decline"}, "the person declined"),
        ({"action": "cancel"}, "the person dismissed the question"),
    ],
    ids=["cancel", "decline", "dismiss"],
)
def test_a_no_sends_nothing_and_spends_nothing(spawn, fake, tmp_path, result, said):
    fake.enqueue(SEARCHED)
    server = handshake(spawn, fake)
    send_call(server, 8, "q")
    answer(server, question(server), result)
    done = not_run(reply_to(server, 8))
    v1.CallToolResult.model_validate(done)
    assert said in done["content"][0]["text"]
    confirm = done["_meta"]["confirm"]
    assert confirm["asked"] is True and confirm["estimate"]["expected_usd"] > 0
    assert creates(fake) == []
    # The server goes on serving, and the no was booked at no cost.
    assert server.request("ping")["result"] == {}
    wait_until(lambda: usage_of(tmp_path)["total"]["calls"] == 1, 10, "the declined row")
    assert usage_of(tmp_path)["total"]["usd"] == 0


def test_a_second_answer_does_not_overturn_the_first(spawn, fake):
    fake.enqueue(SEARCHED)
    server = handshake(spawn, fake)
    send_call(server, 14, "q")
    asked = question(server)
    # Both in one write: the second is read before the asking call wakes to the first.
    lines = [{"jsonrpc": "2.0", "id": asked["id"], "result": choose(c)} for c in ("cancel", "run")]
    server.write(b"".join(json.dumps(line).encode() + b"\n" for line in lines))
    done = not_run(reply_to(server, 14))
    assert done["_meta"]["confirm"]["choice"] == "cancel"
    assert server.request("ping")["result"] == {}
    assert creates(fake) == []


def test_confirm_over_usd_without_the_ledger_is_a_config_error(tmp_path):
    """Its estimate reads the ledger: with state.path off, every call failed, saying to retry."""
    path = tmp_path / "config.yaml"
    path.write_text("state: {path: 'off'}\nbudget: {confirm_over_usd: 1}\n", encoding="utf-8")
    result = run_cli(tmp_path, "--show-config", "--config", str(path))
    assert result.returncode == 2
    assert "budget.confirm_over_usd (from " in result.stderr
    assert "needs the usage ledger, but state.path is off (from " in result.stderr
    # Off in the environment: the error says so (the config file has no state.path to fix).
    path.write_text("budget: {confirm_over_usd: 1}\n", encoding="utf-8")
    env = {"OPENAI_RESPONSES_MCP_STATE": " Off "}
    result = run_cli(tmp_path, "--show-config", "--config", str(path), env=env)
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result
    assert "state.path is off (from env OPENAI_RESPONSES_MCP_STATE)" in result.stderr


def usage_of(tmp_path) -> dict:
    """--usage --json on the state the test's servers share (tmp_path's HOME), once written."""
    return json.loads(run_cli(tmp_path, "--usage", "--json").stdout)


def test_no_answer_within_confirm_timeout_s_is_not_run(spawn, fake):
    fake.enqueue(SEARCHED)
    server = handshake(spawn, fake, ASK + "  confirm_timeout_s: 1\n")
    send_call(server, 9, "q")
    question(server)  # and never answered
    done = not_run(reply_to(server, 9))
    assert "no answer came within 1 s (budget.confirm_timeout_s)" in done["content"][0]["text"]
    assert done["_meta"]["confirm"]["choice"] == "timeout"
    assert creates(fake) == []


def discounted(spawn, fake):
    fake.enqueue(SEARCHED)
    server = handshake(spawn, fake)
    send_call(server, 10, "q")
    asked = question(server)
    assert "run within 8 hours for $" in asked["params"]["message"]
    answer(server, asked, choose("run_discounted"))
    return reply_to(server, 10)


def test_run_discounted_sets_the_calls_window(spawn, fake):
    result = discounted(spawn, fake)["result"]
    confirm = result["_meta"]["confirm"]
    assert confirm["choice"] == "run_discounted" and confirm["window"] == "8h"
    offered = confirm["estimate"]["discounted"]
    assert offered["window"] == "8h"
    assert offered["expected_usd"] < confirm["estimate"]["expected_usd"]


def test_run_discounted_sends_the_8h_completion_window(spawn, fake):
    discounted(spawn, fake)
    body = creates(fake)[0].body
    assert body["background"] is True
    assert body["background_options"]["completion_window"] == "8h"


def test_a_cache_hit_is_never_asked(spawn, fake):
    fake.enqueue(SEARCHED)
    server = handshake(spawn, fake, ANSWER_CACHE_TTL_S="3600")  # conftest turns it off
    send_call(server, 11, "same question")
    answer(server, question(server), choose("run"))
    assert "result" in reply_to(server, 11)
    send_call(server, 12, "same question")
    reply, before = server.recv_until(lambda m: m.get("id") == 12)
    assert [m for m in before if m.get("method") == "elicitation/create"] == []
    assert "result" in reply, reply
    assert reply["result"]["_meta"]["cache"]["hit"] is True
    assert "confirm" not in reply["result"]["_meta"]
    assert len(creates(fake)) == 1


def test_below_the_threshold_is_not_asked(spawn, fake):
    fake.enqueue(SEARCHED)
    server = handshake(spawn, fake, PRICES + "budget:\n  confirm_over_usd: 1000\n")
    send_call(server, 13, "q")
    reply, before = server.recv_until(lambda m: m.get("id") == 13)
    assert [m for m in before if m.get("method") == "elicitation/create"] == []
    assert "confirm" not in reply["result"]["_meta"]
    assert len(creates(fake)) == 1


def test_a_client_without_elicitation_runs_unasked_and_meta_says_so(spawn, fake):
    fake.enqueue(SEARCHED)
    server = handshake(spawn, fake, capabilities={})
    reply = server.call("answer", {"query": "q"})
    confirm = reply["result"]["_meta"]["confirm"]
    assert confirm["asked"] is False
    assert confirm["reason"] == "the client cannot be asked (no form elicitation)"
    # Nothing was offered, so no discounted figure is said to have been (docs/costly-runs.md).
    assert confirm["estimate"]["worst_usd"] > 0 and "discounted" not in confirm["estimate"]
    assert len(creates(fake)) == 1


def test_confirm_required_refuses_a_client_that_cannot_be_asked(spawn, fake):
    fake.enqueue(SEARCHED)
    config = ASK + "  confirm_required: true\n"
    server = handshake(spawn, fake, config, capabilities={"elicitation": {"url": {}}})
    done = not_run(server.call("answer", {"query": "q"}))
    text = done["content"][0]["text"]
    assert "budget.confirm_required refuses it" in text
    assert "over budget.confirm_over_usd ($0.01)" in text
    assert done["_meta"]["confirm"]["asked"] is False
    assert creates(fake) == []


def test_a_2025_06_18_client_gets_enum_with_enum_names(spawn, fake):
    server = handshake(spawn, fake, capabilities={"elicitation": {}}, version="2025-06-18")
    send_call(server, 14, "q")
    asked, _ = server.recv_until(lambda m: m.get("method") == "elicitation/create")
    v0 = pytest.importorskip("mcp_types._v2025_11_25")
    v0.LegacyTitledEnumSchema.model_validate(
        asked["params"]["requestedSchema"]["properties"]["choice"]
    )
    assert "mode" not in asked["params"]
    answer(server, asked, {"action": "decline"})
    not_run(reply_to(server, 14))
    assert creates(fake) == []


# -- 2026-07-28: input_required and a signed requestState --------------------------------------

CAPS = "io.modelcontextprotocol/clientCapabilities"


def modern_call(server: Server, arguments: dict, caps=FORMS, **params) -> dict:
    meta = {**META, CAPS: caps}
    reply = server.request(
        "tools/call", {"name": "answer", "arguments": arguments, "_meta": meta, **params}
    )
    if "result" in reply:
        v2.JSONRPCResultResponse.model_validate(reply)
    return reply


def asked_of(reply: dict) -> dict:
    """The input_required result, checked with the SDK's 2026-07-28 models."""
    result = reply["result"]
    v2.InputRequiredResult.model_validate(result)
    assert result["resultType"] == "input_required"
    for request in result["inputRequests"].values():
        if request["method"] == "elicitation/create":
            v2.ElicitRequestFormParams.model_validate(request["params"])
            choice = request["params"]["requestedSchema"]["properties"]["choice"]
            v2.TitledSingleSelectEnumSchema.model_validate(choice)
    return result


def modern_server(spawn, fake, config: str = ASK):
    return spawn(config=config, upstream=fake, env={"MCP_TASK_SECRET": SECRET})


def retry(server, first: dict, arguments: dict, responses: dict, state=None, caps=FORMS):
    state = first["requestState"] if state is None else state
    return modern_call(server, arguments, caps, inputResponses=responses, requestState=state)


def test_modern_run_asks_through_input_required_then_runs(spawn, fake):
    fake.enqueue(SEARCHED)
    server = modern_server(spawn, fake)
    args = {"query": "q"}
    first = asked_of(modern_call(server, args))
    request = first["inputRequests"]["confirm"]
    assert request["method"] == "elicitation/create"
    assert request["params"]["message"].startswith("answer (gpt-6.1-terra) is estimated at $")
    assert creates(fake) == []
    done = retry(server, first, args, {"confirm": choose("run")})["result"]
    v2.CallToolResult.model_validate(done)
    assert done["resultType"] == "complete" and done["_meta"]["confirm"]["choice"] == "run"
    assert len(creates(fake)) == 1


@pytest.mark.parametrize(
    "response", [choose("cancel"), {"action": "decline"}, {"action": "cancel"}]
)
def test_modern_no_sends_nothing(spawn, fake, response):
    server = modern_server(spawn, fake)
    first = asked_of(modern_call(server, {"query": "q"}))
    done = not_run(retry(server, first, {"query": "q"}, {"confirm": response}))
    v2.CallToolResult.model_validate(done)
    assert creates(fake) == []


def test_modern_client_without_elicitation_runs_unasked(spawn, fake):
    fake.enqueue(SEARCHED)
    server = modern_server(spawn, fake)
    result = modern_call(server, {"query": "q"}, caps={})["result"]
    assert result["resultType"] == "complete"
    assert result["_meta"]["confirm"]["asked"] is False
    assert "discounted" not in result["_meta"]["confirm"]["estimate"]
    assert len(creates(fake)) == 1


def refused(reply: dict, why: str) -> None:
    error = reply["error"]
    v2.JSONRPCErrorResponse.model_validate(reply)
    assert error["code"] == -32602
    assert error["message"].startswith("Invalid params: requestState refused (")
    assert why in error["message"]
    assert "nothing was sent and nothing was spent" in error["message"]


def mint(fields: dict, ttl_ms=600_000, now_ms=None) -> str:
    from openai_responses_mcp import arguments_hash, mint_task_id

    base = {
        "k": "q",
        "t": "answer",
        "u": "local",
        "a": arguments_hash({"query": "q"}),
        "w": "confirm",
    }
    return mint_task_id(SECRET, {**base, **fields}, ttl_ms, now_ms)


def test_modern_state_forged_altered_expired_rebound_is_refused(spawn, fake):
    import base64

    server = modern_server(spawn, fake)
    args, yes = {"query": "q"}, {"confirm": choose("run")}
    first = asked_of(modern_call(server, args))
    state = first["requestState"]
    version, body, mac = state.split(".")
    forged = f"{version}.{body}.{'A' * len(mac)}"
    refused(retry(server, first, args, yes, forged), "forged or altered")
    payload = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    payload["t"] = "answer_quick"
    altered = base64.urlsafe_b64encode(json.dumps(payload).encode()).rstrip(b"=").decode()
    refused(retry(server, first, args, yes, f"{version}.{altered}.{mac}"), "forged or altered")
    refused(retry(server, first, {"query": "other"}, yes), "it was given for other arguments")
    refused(retry(server, first, args, yes, mint({"u": "alice"})), "it was given to another user")
    refused(
        retry(server, first, args, yes, mint({"t": "answer_quick"})),
        "not a requestState of this tool",
    )
    refused(retry(server, first, args, yes, mint({"k": "x"})), "not a requestState of this tool")
    expired = mint({}, ttl_ms=1000, now_ms=1_000)
    refused(retry(server, first, args, yes, expired), "expired at 1970-01-01T00:00:02Z")
    # Without an answer in it too: the state's own expiry, not only the answer's read-once.
    refused(modern_call(server, args, FORMS, requestState=expired), "expired at 1970-01-01")
    assert creates(fake) == []
    # A state minted with the shared secret and bound right is honoured: the refusals above
    # were the bindings', not the key's.
    fake.enqueue(SEARCHED)
    assert "isError" not in retry(server, first, args, yes, mint({"o": "8h"}))["result"]
    assert len(creates(fake)) == 1


def test_modern_retry_dearer_than_what_was_agreed_is_asked_again(spawn, fake):
    """The state carries the worst case the person saw; a retry whose worst case has grown past
    it (the ledger, or a file, changed between the rounds) is asked again, nothing sent."""
    server = modern_server(spawn, fake)
    args, yes = {"query": "q"}, {"confirm": choose("run")}
    first = asked_of(modern_call(server, args))
    agreed = json.loads(
        __import__("base64").urlsafe_b64decode(first["requestState"].split(".")[1] + "==")
    )["q"]
    assert agreed > 0.01  # the worst case the form showed
    again = asked_of(retry(server, first, args, yes, mint({"q": agreed / 10})))
    assert "confirm" in again["inputRequests"]
    assert creates(fake) == []
    fake.enqueue(SEARCHED)
    done = retry(server, first, args, yes, mint({"q": agreed}))["result"]
    assert done["_meta"]["confirm"]["choice"] == "run" and len(creates(fake)) == 1


def test_a_person_has_at_most_four_questions_waiting(spawn, fake):
    """Each waiting question holds a call's server.max_calls slot: a fifth is not run at once,
    so a client that never answers cannot fill the server."""
    server = handshake(spawn, fake)
    for n in range(4):
        send_call(server, 30 + n, f"q{n}")
        question(server)
    send_call(server, 34, "q4")
    result = not_run(reply_to(server, 34))
    assert "4 questions already wait for this person's answer" in result["content"][0]["text"]
    assert creates(fake) == []


def test_modern_responses_without_a_state_are_asked_again(spawn, fake):
    """An answer the client makes up, with no requestState, runs nothing: it is asked."""
    server = modern_server(spawn, fake)
    reply = modern_call(server, {"query": "q"}, inputResponses={"confirm": choose("run")})
    asked_of(reply)
    assert creates(fake) == []


# -- 2026-07-28: roots through input_required --------------------------------------------------

ROOTS = {"roots": {}}


def two_dirs(tmp_path):
    """A root with a file in it, and a file outside it (both under the working directory)."""
    inside, outside = tmp_path / "project", tmp_path / "elsewhere"
    inside.mkdir()
    outside.mkdir()
    (inside / "notes.txt").write_text("inside the root\n")
    (outside / "other.txt").write_text("outside the root\n")
    return inside, str(inside / "notes.txt"), str(outside / "other.txt")


def roots_answer(directory) -> dict:
    result = {"roots": [{"uri": directory.as_uri(), "name": "project"}]}
    v2.ListRootsResult.model_validate(result)
    return {"roots": result}


def test_modern_roots_are_asked_and_paths_checked_against_them(spawn, fake, tmp_path):
    inside, allowed, outside = two_dirs(tmp_path)
    server = modern_server(spawn, fake, PRICES)
    fake.enqueue(SEARCHED)
    args = {"query": "q", "files": [allowed]}
    first = asked_of(modern_call(server, args, ROOTS))
    assert first["inputRequests"] == {"roots": {"method": "roots/list"}}
    done = retry(server, first, args, roots_answer(inside), caps=ROOTS)["result"]
    assert done["_meta"]["files"][0]["kind"] and len(creates(fake)) == 1
    args = {"query": "q", "files": [outside]}
    first = asked_of(modern_call(server, args, ROOTS))
    reply = retry(server, first, args, roots_answer(inside), caps=ROOTS)
    assert "refused" in reply["error"]["message"] and len(creates(fake)) == 1
    # A client that declares no roots: the working directory, as before (no round).
    fake.enqueue(SEARCHED)
    assert modern_call(server, args, {})["result"]["resultType"] == "complete"
    assert len(creates(fake)) == 2


def test_a_modern_roots_answer_that_is_no_roots_list_is_said_so(spawn, fake, tmp_path):
    """An error object (or anything but a ListRootsResult) where the roots should be: no roots
    were read, so not "outside the allowed directories", and nothing is sent."""
    _, allowed, _ = two_dirs(tmp_path)
    server = modern_server(spawn, fake, PRICES)
    args = {"query": "q", "files": [allowed]}
    first = asked_of(modern_call(server, args, ROOTS))
    error = {"roots": {"code": -32601, "message": "Method not found"}}
    reply = retry(server, first, args, error, caps=ROOTS)
    message = failure_of(reply)
    assert "answered roots/list with" in message and "not a list of roots" in message
    assert "outside" not in message and creates(fake) == []


@pytest.mark.parametrize(
    "listed",
    [[1, 2], [{"uri": 5}], [{"name": "project"}], ["sk-proj-AAAAAAAAAAAAAAAA"]],
    ids=["numbers", "uri", "no-uri", "a-key"],
)
def test_a_modern_roots_list_of_no_roots_is_said_so(spawn, fake, tmp_path, listed):
    """A list whose entries are no Root (an object with a string uri) was read as no roots,
    and the path refused as outside the allowed directories. What the message quotes of it
    is redacted as its data is: a key pasted there is not echoed."""
    _, allowed, _ = two_dirs(tmp_path)
    server = modern_server(spawn, fake, PRICES)
    args = {"query": "q", "files": [allowed]}
    first = asked_of(modern_call(server, args, ROOTS))
    reply = retry(server, first, args, {"roots": {"roots": listed}}, caps=ROOTS)
    message = failure_of(reply)
    assert "answered roots/list with" in message and "not a list of roots" in message
    assert "outside" not in message and creates(fake) == []
    assert "sk-proj" not in json.dumps(reply)


def test_modern_roots_survive_into_the_cost_question(spawn, fake, tmp_path):
    inside, _, outside = two_dirs(tmp_path)
    server = modern_server(spawn, fake)
    caps = {**ROOTS, **FORMS}
    args = {"query": "q", "files": [outside]}
    first = asked_of(modern_call(server, args, caps))
    assert list(first["inputRequests"]) == ["roots"]
    # The roots answered, the files are read and estimated: then the question, in round two.
    second = asked_of(retry(server, first, args, roots_answer(tmp_path), caps=caps))
    assert list(second["inputRequests"]) == ["confirm"]
    # The third round carries only the choice: the roots come from the signed state.
    fake.enqueue(SEARCHED)
    done = retry(server, second, args, {"confirm": choose("run")}, caps=caps)["result"]
    assert done["_meta"]["confirm"]["choice"] == "run" and len(creates(fake)) == 1
    # Roots answered as `inside` leave `outside` refused before any question is asked.
    first = asked_of(modern_call(server, args, caps))
    reply = retry(server, first, args, roots_answer(inside), caps=caps)
    assert "refused" in reply["error"]["message"] and len(creates(fake)) == 1


# -- 2026-07-28 over HTTP: another --stateless instance, another user ----------------------------


def http_modern(port: int, arguments: dict, headers=None, caps=FORMS, **params) -> dict:
    from http_client import post, rpc

    body = {"name": "answer", "arguments": arguments, "_meta": {**META, CAPS: caps}, **params}
    sent = {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": "answer"}
    response = post(port, rpc("tools/call", body), headers={**sent, **(headers or {})}, timeout=30)
    assert response.status in (200, 400), response
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        return [d for _, d in response.events() if "method" not in d][-1]
    return response.json()


def serve_http(spawn, fake, *flags: str, env=None, config: str = ASK):
    from http_client import wait_listening

    env = {"MCP_TASK_SECRET": SECRET, **(env or {})}
    server = spawn("--http", "127.0.0.1:0", *flags, config=config, env=env, upstream=fake)
    server.port = wait_listening(server)
    return server


def test_the_retry_may_land_on_another_stateless_instance(spawn, fake):
    a = serve_http(spawn, fake, "--stateless")
    b = serve_http(spawn, fake, "--stateless")
    args = {"query": "q"}
    first = asked_of(http_modern(a.port, args))
    fake.enqueue(SEARCHED)
    state = first["requestState"]
    done = http_modern(b.port, args, inputResponses={"confirm": choose("run")}, requestState=state)
    assert done["result"]["_meta"]["confirm"]["choice"] == "run", done
    assert len(creates(fake)) == 1


def test_another_users_retry_is_refused_over_http(spawn, fake, tmp_path):
    from test_state import SqliteState
    from test_users import add_user, bearer

    state = SqliteState(tmp_path / "shared" / "state.sqlite3")
    alice, bob = (bearer(add_user(tmp_path, state, name)) for name in ("alice", "bob"))
    server = serve_http(spawn, fake, "--stateless", env=state.env)
    args = {"query": "q"}
    first = asked_of(http_modern(server.port, args, alice))
    yes = {"inputResponses": {"confirm": choose("run")}, "requestState": first["requestState"]}
    refused(http_modern(server.port, args, bob, **yes), "it was given to another user")
    assert creates(fake) == []
    fake.enqueue(SEARCHED)
    assert http_modern(server.port, args, alice, **yes)["result"]["_meta"]["confirm"]["asked"]
    assert len(creates(fake)) == 1


def test_handshake_era_over_http_asks_on_the_calls_stream(spawn, fake):
    from http_client import ACCEPT_BOTH, open_stream, post, rpc

    server = serve_http(spawn, fake)
    init = {"protocolVersion": "2025-11-25", "capabilities": FORMS, "clientInfo": {"name": "p"}}
    reply = post(
        server.port, rpc("initialize", {**init, "clientInfo": {"name": "p", "version": "0"}})
    )
    session = reply.headers["mcp-session-id"]
    headers = {
        "Content-Type": "application/json",
        "Accept": ACCEPT_BOTH,
        "Mcp-Session-Id": session,
        "MCP-Protocol-Version": "2025-11-25",
    }
    fake.enqueue(SEARCHED)
    call = rpc("tools/call", {"name": "answer", "arguments": {"query": "q"}}, id=5)
    stream = open_stream(server.port, "POST", "/mcp", call, headers)
    asked = stream.next_message()
    assert asked["method"] == "elicitation/create"
    v1.ElicitRequest.model_validate(asked)
    assert creates(fake) == []
    answered = {"jsonrpc": "2.0", "id": asked["id"], "result": choose("run_discounted")}
    assert (
        post(server.port, answered, session, {"MCP-Protocol-Version": "2025-11-25"}).status == 202
    )
    done = stream.next_message(30)
    stream.close()
    assert done["id"] == 5 and done["result"]["_meta"]["confirm"]["window"] == "8h", done
    assert len(creates(fake)) == 1


def http_task_call(spawn, fake, config: str = ASK):
    """A 2025-11-25 session over Streamable HTTP that can be asked, and the event stream of
    its task-augmented tools/call (id 7): (server, session id, stream)."""
    from http_client import open_stream, post, rpc

    server = serve_http(spawn, fake, config=config)
    init = {"protocolVersion": "2025-11-25", "capabilities": FORMS}
    hello = rpc("initialize", {**init, "clientInfo": {"name": "p", "version": "0"}})
    session = post(server.port, hello).headers["mcp-session-id"]
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    headers |= {"Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"}
    call = {"name": "answer", "arguments": {"query": "q"}, "task": {"ttl": 60000}}
    stream = open_stream(server.port, "POST", "/mcp", rpc("tools/call", call, id=7), headers)
    return server, session, stream


def test_a_handshake_task_over_http_not_asked_replies_with_the_task_at_once(spawn, fake):
    fake.enqueue(SEARCHED)
    *_, stream = http_task_call(spawn, fake, PRICES + "budget:\n  confirm_over_usd: 1000\n")
    created = stream.next_message(30)
    stream.close()
    assert created["id"] == 7 and created["result"]["task"]["status"] == "working"
    v1.CreateTaskResult.model_validate(created["result"])


def test_a_handshake_task_over_http_cancelled_while_asked_sends_nothing(spawn, fake):
    from http_client import post

    server, session, stream = http_task_call(spawn, fake)
    assert stream.next_message()["method"] == "elicitation/create"
    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}}
    version = {"MCP-Protocol-Version": "2025-11-25"}
    assert post(server.port, cancel, session, version).status == 202
    ended = stream.next_message(30)
    stream.close()
    assert ended["id"] == 7 and "task" not in ended.get("result", {}), ended

    def tasks() -> list:
        listing = {"jsonrpc": "2.0", "id": 9, "method": "tasks/list"}
        listed = post(server.port, listing, session, version)
        body = listed.events()[-1][1] if listed.body.startswith(b"event") else listed.json()
        return body["result"]["tasks"]

    wait_until(lambda: tasks() == [], 10, "no task kept: none was given")
    assert creates(fake) == []


def test_a_held_handshake_task_is_not_seen_before_it_is_given(spawn, fake):
    """While its question waits, a held task has not been given to the client: tasks/list
    does not show it, nor can tasks/cancel end it (which would leave its POST unanswered);
    once answered, the task the POST replies with is listed."""
    from http_client import post, rpc

    fake.enqueue(SEARCHED)
    server, session, stream = http_task_call(spawn, fake)
    version = {"MCP-Protocol-Version": "2025-11-25"}

    def ask(method: str, params: dict) -> dict:
        got = post(server.port, rpc(method, params, id=9), session, version)
        return got.events()[-1][1] if got.body.startswith(b"event") else got.json()

    asked = stream.next_message()
    assert asked["method"] == "elicitation/create"
    assert ask("tasks/list", {})["result"]["tasks"] == []
    answered = {"jsonrpc": "2.0", "id": asked["id"], "result": choose("run")}
    assert post(server.port, answered, session, version).status == 202
    created = stream.next_message(30)
    stream.close()
    task_id = created["result"]["task"]["taskId"]
    listed = ask("tasks/list", {})
    v1.ListTasksResult.model_validate(listed["result"])
    assert [t["taskId"] for t in listed["result"]["tasks"]] == [task_id]


@pytest.mark.parametrize("choice", ["run", "cancel"])
def test_a_handshake_task_over_http_asks_on_its_post_then_replies_with_the_task(
    spawn, fake, choice
):
    """A 2025-11-25 task over Streamable HTTP: its POST is the only stream the question can go
    on, so the task (the POST's reply) waits for the answer; the task then holds the result."""
    from http_client import post, rpc

    fake.enqueue(SEARCHED)
    server, session, stream = http_task_call(spawn, fake)
    version = {"MCP-Protocol-Version": "2025-11-25"}
    asked = stream.next_message()
    v1.ElicitRequest.model_validate(asked)
    assert creates(fake) == []
    answered = {"jsonrpc": "2.0", "id": asked["id"], "result": choose(choice)}
    assert post(server.port, answered, session, version).status == 202
    created = stream.next_message(30)
    stream.close()
    assert created["id"] == 7
    v1.CreateTaskResult.model_validate(created["result"])
    task_id = created["result"]["task"]["taskId"]
    got = post(server.port, rpc("tasks/result", {"taskId": task_id}, id=8), session, version)
    reply = got.events()[-1][1] if got.body.startswith(b"event") else got.json()
    if choice == "cancel":
        not_run(reply)
        assert creates(fake) == []
    else:
        assert reply["result"]["_meta"]["confirm"]["choice"] == "run"
        assert len(creates(fake)) == 1


# -- The official SDK client, in both eras, answering the form ---------------------------------


def sdk_call(tmp_path, fake, mode: str, choice: dict, config: str = ASK):
    """One call from the mcp SDK's Client (its elicitation_callback answers `choice`); returns
    (the result, the question's params as the callback saw them)."""
    from conftest import PROGRAM, base_env
    from mcp import StdioServerParameters

    (tmp_path / "config.yaml").write_text(config)
    params = StdioServerParameters(
        command=sys.executable,
        args=[*PROGRAM[1:], "--stdio", "--config", str(tmp_path / "config.yaml")],
        env={**base_env(tmp_path), "OPENAI_BASE_URL": fake.base_url},
        cwd=str(tmp_path),
    )
    return sdk_answers(params, mode, choice, timeout=30)


def sdk_answers(server, mode: str, choice: dict, timeout: float) -> tuple:
    """One `answer` call from the mcp SDK's Client to `server` (stdio parameters or an HTTP
    URL), its elicitation_callback answering `choice`: (the result, the question or None)."""
    import anyio
    import mcp_types
    from mcp import Client

    seen = {"asked": None}

    async def on_question(context, asked):
        seen["asked"] = asked
        return mcp_types.ElicitResult(**choice)

    async def main():
        with anyio.fail_after(timeout):
            async with Client(server, mode=mode, elicitation_callback=on_question) as client:
                seen["result"] = await client.call_tool("answer", {"query": "q"})

    anyio.run(main)
    return seen["result"], seen["asked"]


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_sdk_client_answers_run(tmp_path, fake, mode):
    fake.enqueue(SEARCHED)
    result, asked = sdk_call(tmp_path, fake, mode, choose("run"))
    assert asked.message.startswith("answer (gpt-6.1-terra) is estimated at $")
    assert result.is_error is False and result.meta["confirm"]["choice"] == "run"
    assert len(creates(fake)) == 1


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_sdk_client_answers_run_discounted(tmp_path, fake, mode):
    fake.enqueue(SEARCHED)
    result, asked = sdk_call(tmp_path, fake, mode, choose("run_discounted"))
    assert "run within 8 hours for $" in asked.message
    assert result.is_error is False and result.meta["confirm"]["window"] == "8h"
    (create,) = creates(fake)
    assert create.body["background_options"] == {"completion_window": "8h"}
    assert "x0.6 (8h window)" in result.meta["cost"]["prices"]


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
@pytest.mark.parametrize("answer", [choose("cancel"), {"action": "decline"}, {"action": "cancel"}])
def test_sdk_client_no_sends_nothing(tmp_path, fake, mode, answer):
    result, _ = sdk_call(tmp_path, fake, mode, answer)
    assert result.is_error is True
    assert "nothing was sent and nothing was spent" in result.content[0].text
    assert creates(fake) == []


def sdk_http_call(url: str, mode: str, choice: dict) -> tuple:
    """One call from the mcp SDK's Client over Streamable HTTP; (result, question or None)."""
    return sdk_answers(url, mode, choice, timeout=40)


@pytest.mark.parametrize(
    ("mode", "flags"),
    [("legacy", ()), ("2026-07-28", ()), ("2026-07-28", ("--stateless",))],
    ids=["2025-11-25", "2026-07-28", "2026-07-28-stateless"],
)
def test_sdk_client_over_http_gets_what_it_chose(spawn, fake, mode, flags):
    """As users meet it over HTTP: the SDK's client asked on the call's stream (the handshake
    era) or through input_required (2026-07-28, a --stateless server too) gets the discounted
    run it chose, at the discount; a decline sends nothing."""
    fake.window_polls = 0
    fake.enqueue(SEARCHED)
    server = serve_http(spawn, fake, *flags)
    url = f"http://127.0.0.1:{server.port}/mcp"
    result, asked = sdk_http_call(url, mode, choose("run_discounted"))
    assert "run within 8 hours for $" in asked.message
    assert result.is_error is False and result.meta["confirm"]["window"] == "8h"
    assert "x0.6 (8h window)" in result.meta["cost"]["prices"]
    (create,) = creates(fake)
    assert create.body["background_options"] == {"completion_window": "8h"}
    result, asked = sdk_http_call(url, mode, {"action": "decline"})
    assert asked is not None and result.is_error is True
    assert result.content[0].text.startswith("not run: the person declined")
    assert len(creates(fake)) == 1


# -- A call that becomes a task asks before anything is sent -----------------------------------

TASKS_NOW = "server:\n  tasks:\n    immediate_ms: 0\n"


def test_modern_task_call_asks_first_then_becomes_a_task(spawn, fake):
    """2026-07-28 tasks extension: the first round is input_required, never a task; the retry
    with the answer is the call that may become one."""
    from fake_upstream import Reply

    server = modern_server(spawn, fake, ASK + TASKS_NOW)
    caps = {**FORMS, "extensions": {"io.modelcontextprotocol/tasks": {}}}
    args = {"query": "q"}
    first = asked_of(modern_call(server, args, caps))
    assert creates(fake) == []
    fake.enqueue(Reply(event_delay=0.2))
    then = retry(server, first, args, {"confirm": choose("run")}, caps=caps)["result"]
    assert then["resultType"] == "task", then
    from test_tasks import check_ext_task

    check_ext_task(then, "CreateTaskResult")
    fake.wait_for_requests(1)


def test_handshake_task_is_created_then_asks_before_sending(spawn, fake):
    """2025-11-25 task-augmented call over stdio: the task is the reply at once; its worker asks
    the person before anything is sent, and the task ends as they chose."""
    server = handshake(spawn, fake)
    send_call(server, 21, "q", task={"ttl": 60000})
    created = reply_to(server, 21)
    v1.CreateTaskResult.model_validate(created["result"])
    task_id = created["result"]["task"]["taskId"]
    answer(server, question(server), choose("cancel"))
    status, _ = server.recv_until(lambda m: m.get("method") == "notifications/tasks/status")
    assert status["params"]["taskId"] == task_id
    result = server.request("tasks/result", {"taskId": task_id})
    not_run(result)
    assert creates(fake) == []


def test_the_question_is_on_the_worst_case_not_the_expected(spawn, fake):
    """A first call of `answer` is expected at a search ($0.025) but may cost more (the prior's
    output tokens): over $0.10 only at worst, which is what asks."""
    server = handshake(spawn, fake, PRICES + "budget:\n  confirm_over_usd: 0.1\n")
    send_call(server, 31, "q")
    asked = question(server)
    answer(server, asked, choose("cancel"))
    estimate = not_run(reply_to(server, 31))["_meta"]["confirm"]["estimate"]
    assert estimate["expected_usd"] <= 0.1 < estimate["worst_usd"]


@pytest.mark.parametrize(("tier", "asked"), [("priority", True), ("flex", False)])
def test_the_prior_worst_case_is_at_the_profiles_tier(spawn, fake, tier, asked):
    """No call in the ledger yet: the prior's tokens (16,000 output at $10/M: $0.16, plus a
    $0.025 search) are at the tier's price, twice that at priority; flex may fall back to
    default, so it is quoted at Standard (the prior was at half, then taken twice)."""
    fake.enqueue(SEARCHED)
    config = PRICES + "budget:\n  confirm_over_usd: 0.25\n"
    config += f"model_profiles:\n  answer:\n    service_tier: {tier}\n"
    server = handshake(spawn, fake, config)
    send_call(server, 42, "q")
    first, _ = server.recv_until(lambda m: m.get("id") == 42 or m.get("method") == ELICIT)
    assert (first.get("method") == ELICIT) is asked, first


def test_another_models_calls_do_not_lower_the_prior_worst_case(spawn, fake, tmp_path):
    """The profile's model changed: the ledger's calls of the cheap one it had say nothing of
    the new one's worst case, which stays at its prior ($0.185, over $0.10): asked, not run
    unasked on the cheap model's figures (about $0.03)."""
    cheap = "    gpt-6-luna: {input: 0.05, cached_input: 0.01, output: 0.4}\n  web_search"
    prices = PRICES.replace("  web_search", cheap)
    fake.enqueue(SEARCHED)
    before = spawn(
        config=prices + "model_profiles:\n  answer:\n    model: gpt-6-luna\n", upstream=fake
    )
    before.initialize()
    send_call(before, 1, "q")
    assert reply_to(before, 1)["result"]["_meta"]["cost"]["usd"] < 0.05
    wait_until(lambda: usage_of(tmp_path)["total"]["calls"] == 1, 10, "its row")
    server = handshake(spawn, fake, prices + "budget:\n  confirm_over_usd: 0.1\n")
    send_call(server, 2, "q")
    first, _ = server.recv_until(lambda m: m.get("id") == 2 or m.get("method") == ELICIT)
    assert first.get("method") == ELICIT, first
    assert "(up to $0.19)" in first["params"]["message"], first["params"]["message"]
    assert len(creates(fake)) == 1


def test_a_call_cancelled_while_asked_stops_waiting_and_sends_nothing(spawn, fake, tmp_path):
    from conftest import cancel

    server = handshake(spawn, fake)  # budget.confirm_timeout_s: 300
    send_call(server, 41, "q")
    question(server)
    cancel(server, 41)
    # Its worker stops waiting for the answer at once: the declined row is written.
    wait_until(lambda: usage_of(tmp_path)["total"]["calls"] == 1, 10, "the cancelled call's row")
    assert server.request("ping")["result"] == {}
    assert creates(fake) == []


def test_the_message_says_the_days_spend_against_each_budget(spawn, fake, tmp_path):
    fake.enqueue(SEARCHED)
    server = handshake(spawn, fake, ASK + "  daily_usd: 5\n  monthly_usd: 50\n")
    send_call(server, 51, "q")
    asked = question(server)
    message = asked["params"]["message"]
    assert "Spent: $0.00 of the $5.00 daily budget spent today; " in message
    assert "$0.00 of the $50.00 monthly budget spent this month." in message
    assert reservations(tmp_path) == 0  # nothing is reserved while the person decides
    answer(server, asked, choose("run"))
    spent = reply_to(server, 51)["result"]["_meta"]["cost"]["usd"]
    send_call(server, 52, "another question")
    message = question(server)["params"]["message"]
    assert f"Spent: ${spent:.2f} of the $5.00 daily budget spent today" in message


@pytest.mark.parametrize("era", ["handshake", "modern"])
def test_a_call_no_budget_has_room_for_is_refused_not_asked(spawn, fake, tmp_path, era):
    """A yes could not run it (its cheapest choice, the discount's, is over what the budget
    has left): the budget's refusal comes at once, as admission's, and nothing is asked."""
    config = ASK + "  daily_usd: 0.02\n"  # any call of `answer` is $0.025 at least
    if era == "handshake":
        server = handshake(spawn, fake, config)
        send_call(server, 61, "q")
        reply, seen = server.recv_until(lambda m: m.get("id") == 61)
        assert not [m for m in seen if m.get("method") == ELICIT]
    else:
        reply = modern_call(modern_server(spawn, fake, config), {"query": "q"})
    assert "daily budget of $0.02 has no room for this call" in failure_of(reply)
    assert creates(fake) == [] and reservations(tmp_path) == 0
    wait_until(lambda: usage_of(tmp_path)["total"]["calls"] == 1, 10, "the refused row")


def test_questions_asked_together_at_a_budgets_margin_are_all_asked(spawn, fake, tmp_path):
    """Two calls at once, with room for either (nothing spent, nothing in flight): both are
    asked. The room check reserved, then gave back in a queued write, so each call's check saw
    the other's as "$0.03 held by calls in flight" and one was refused, unasked."""
    server = handshake(spawn, fake, ASK + "  daily_usd: 0.04\n")  # room for one $0.025 call
    calls = [
        {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {"name": "answer"}}
        for n in (71, 72)
    ]
    for n, call in enumerate(calls):
        call["params"]["arguments"] = {"query": f"q{n}"}
    server.write(b"".join(json.dumps(call).encode() + b"\n" for call in calls))  # together
    asked, refused = [], []
    while len(asked) + len(refused) < 2:
        message = server.recv(20)
        if message.get("method") == ELICIT:
            asked.append(message)
        elif "error" in message:
            refused.append(message["error"]["message"])
    assert refused == [] and len(asked) == 2
    assert reservations(tmp_path) == 0
    for each in asked:
        answer(server, each, choose("cancel"))
    replies = {}
    while len(replies) < 2:  # in either order
        message = server.recv(20)
        if message.get("id") in (71, 72):
            replies[message["id"]] = not_run(message)
    assert creates(fake) == []


def reservations(tmp_path) -> int:
    import sqlite3

    found = list((tmp_path / "xdg-state").rglob("state.sqlite3"))
    if not found:
        return 0
    with sqlite3.connect(found[0]) as conn:
        return conn.execute("SELECT COUNT(*) FROM reservations").fetchone()[0]


# -- Attacks on the cost question (review): each one a defect found, now fixed ----------------

WINDOW_TTL_MS = (8 * 3600 + 15 * 60) * 1000  # an 8h window and its margin


def test_run_discounted_on_a_2025_task_keeps_the_task_for_the_window(spawn, fake):
    """The task is created before the choice, at the tool's own ttl (an hour): a person who
    chooses the 8h window must be able to collect the answer at its end, not find it gone."""
    server = handshake(spawn, fake)
    send_call(server, 61, "q", task={})
    created = reply_to(server, 61)["result"]["task"]
    assert created["ttl"] < WINDOW_TTL_MS
    fake.window_polls = 50  # the run stays queued while the task is looked at
    answer(server, question(server), choose("run_discounted"))
    fake.wait_for_requests(1)
    got = server.request("tasks/get", {"taskId": created["taskId"]})["result"]
    assert got["ttl"] >= WINDOW_TTL_MS, got
    server.request("tasks/cancel", {"taskId": created["taskId"]})


def test_run_discounted_on_an_extension_task_keeps_it_for_the_window(spawn, fake):
    server = modern_server(spawn, fake, ASK + TASKS_NOW)
    caps = {**FORMS, "extensions": {"io.modelcontextprotocol/tasks": {}}}
    args = {"query": "q"}
    first = asked_of(modern_call(server, args, caps))
    fake.window_polls = 50
    then = retry(server, first, args, {"confirm": choose("run_discounted")}, caps=caps)["result"]
    assert then["resultType"] == "task" and then["ttlMs"] >= WINDOW_TTL_MS, then


def test_a_requeststate_answered_run_runs_once(spawn, fake):
    """A yes is to one call: the same requestState and answer sent again (a replay, a
    client's blind retry) asks again instead of spending again."""
    server = modern_server(spawn, fake)
    args = {"query": "q", "fresh": True}  # no cache to absorb a replay
    first = asked_of(modern_call(server, args))
    yes = {"confirm": choose("run")}
    fake.enqueue(SEARCHED)
    assert retry(server, first, args, yes)["result"]["resultType"] == "complete"
    fake.enqueue(SEARCHED)
    refused(retry(server, first, args, yes), "it was answered already")
    assert len(creates(fake)) == 1


def test_an_answer_read_past_its_states_expiry_is_refused(tmp_path):
    """A state opened a moment before its expiry and read after it: the reads of other states
    prune the answered nonces past their expiry, so had it been read, a replay of it racing
    that pruning would run and be paid again."""
    import time

    from openai_responses_mcp import CostQuestion, Log, RpcError, load_config

    env = {"XDG_CONFIG_HOME": str(tmp_path), "XDG_STATE_HOME": str(tmp_path)}
    asker = CostQuestion(load_config({}, env), Log())
    now = round(time.time() * 1000)
    late = {"n": "late", "e": now - 1}
    with pytest.raises(RpcError, match="it expired at "):
        asker._read_once(late)
    asker._read_once({"n": "other", "e": now + 60_000})  # prunes what is past its expiry
    with pytest.raises(RpcError):
        asker._read_once(late)


def test_a_model_with_no_known_price_is_asked_not_run_unasked(spawn, fake):
    """Without a price its tokens cannot be estimated: the quote (its searches) is no worst
    case, so a call over the threshold at any real price must not slip through unasked."""
    config = "model_profiles:\n  answer:\n    model: gpt-unpriced-9\n"
    server = handshake(spawn, fake, config + "budget:\n  confirm_over_usd: 0.1\n")
    send_call(server, 71, "q")
    asked = question(server)
    assert "No price is known for gpt-unpriced-9" in asked["params"]["message"], asked
    answer(server, asked, choose("cancel"))
    not_run(reply_to(server, 71))
    assert creates(fake) == []


def test_end_of_input_while_asked_ends_the_question_at_once(spawn, fake):
    """Answers come on stdin: once it is closed none can come, so the call is not run and the
    server leaves, instead of waiting budget.confirm_timeout_s (300 s) for nobody."""
    server = handshake(spawn, fake)
    send_call(server, 81, "q")
    question(server)
    server.close_stdin()
    done = not_run(reply_to(server, 81, timeout=15))
    assert done["_meta"]["confirm"]["choice"] == "ended", done
    assert server.wait(15) == 0
    assert creates(fake) == []


def test_no_discount_is_quoted_or_offered_once_the_api_refused_a_window(spawn, fake):
    """After a refused window every call runs at soonest, billed in full: a quote at the
    profile's window, or an offer of one, would price it below what it is billed."""
    fake.refuse_windows = True
    window = "model_profiles:\n  answer:\n    model: gpt-6.1-terra\n    completion_window: 2h\n"
    server = handshake(spawn, fake, ASK + window)
    send_call(server, 91, "q")
    asked = question(server)
    answer(server, asked, choose("run_discounted"))
    done = reply_to(server, 91)["result"]
    assert "window" not in done["_meta"]  # refused: it ran at soonest, at full price
    # Quoted as admission estimates it: at full price until the API has taken a window.
    assert "window" not in done["_meta"]["confirm"]["estimate"]
    fake.enqueue(SEARCHED)
    send_call(server, 92, "another question")
    asked = question(server)
    values = [
        o["const"] for o in asked["params"]["requestedSchema"]["properties"]["choice"]["oneOf"]
    ]
    assert values == ["run", "cancel"], asked
    answer(server, asked, choose("run"))
    estimate = reply_to(server, 92)["result"]["_meta"]["confirm"]["estimate"]
    assert "window" not in estimate and "discounted" not in estimate, estimate


@pytest.mark.parametrize(
    "state",
    [42, None.__class__.__name__, "t1.x", "t1." + "A" * 5000, ["t1.a.b"], {"k": "q"}],
    ids=["number", "word", "truncated", "huge", "list", "object"],
)
def test_a_requeststate_that_is_none_of_ours_is_refused_in_a_line_about_it(spawn, fake, state):
    """Whatever the client sends as requestState, the refusal names a requestState (not a
    "task id"), in one line that echoes nothing of it; nothing is sent."""
    server = modern_server(spawn, fake)
    reply = modern_call(server, {"query": "q"}, requestState=state)
    refused(reply, "not a requestState of this server")
    message = reply["error"]["message"]
    assert "task id" not in message and "\n" not in message and len(message) < 300
    assert "AAAA" not in message and creates(fake) == []


def test_a_discount_offered_before_a_window_was_refused_is_not_run_at_full_price(spawn, fake):
    """The person chose the discounted run offered in round one; meanwhile the API refused a
    window, so it could only run at full price: not run, rather than billed above the figure
    they agreed to."""
    server = modern_server(spawn, fake)
    a, b = {"query": "a"}, {"query": "b"}
    first_a = asked_of(modern_call(server, a))
    first_b = asked_of(modern_call(server, b))
    fake.refuse_windows = True  # b's discounted run is refused: windows are off from now on
    done_b = retry(server, first_b, b, {"confirm": choose("run_discounted")})["result"]
    assert "window" not in done_b["_meta"], done_b
    sent = len(creates(fake))
    done_a = not_run(retry(server, first_a, a, {"confirm": choose("run_discounted")}))
    assert "the discounted run is not offered here" in done_a["content"][0]["text"]
    assert len(creates(fake)) == sent


def test_a_discount_chosen_after_a_window_was_refused_is_not_run_at_full_price(spawn, fake):
    """The handshake era: while one person decides, another call's window is refused; their
    choice of the discounted run can then only run at full price, so it is not run, nor does
    it join an identical call's request in flight at soonest (it would have its answer)."""
    from fake_upstream import Reply

    server = handshake(spawn, fake)
    send_call(server, 101, "a")
    asked_a = question(server)
    send_call(server, 103, "a")  # the same call, asked too: it will run at soonest
    asked_c = question(server)
    send_call(server, 102, "b")
    asked_b = question(server)
    fake.refuse_windows = True
    answer(server, asked_b, choose("run_discounted"))
    refused = reply_to(server, 102)["result"]  # its own window refused: not run in full either
    assert refused["content"][0]["text"].startswith("not run: the API refused "), refused
    fake.enqueue(Reply(event_delay=0.5))
    answer(server, asked_c, choose("run"))
    wait_until(lambda: len(creates(fake)) == 2, 10, "c's request in flight")
    answer(server, asked_a, choose("run_discounted"))
    done = not_run(reply_to(server, 101))
    assert "completion window" in done["content"][0]["text"], done
    assert "error" not in reply_to(server, 103, timeout=30)  # c answered, in full
    assert len(creates(fake)) == 2


def test_a_json_only_post_is_not_left_waiting_for_an_answer_it_cannot_carry(spawn, fake):
    """A client that takes only JSON on its POST cannot be sent the question there: the call
    is not run, at once, instead of the POST hanging for budget.confirm_timeout_s."""
    from http_client import post, rpc

    server = serve_http(spawn, fake)
    init = {"protocolVersion": "2025-11-25", "capabilities": FORMS, "clientInfo": INFO}
    session = post(server.port, rpc("initialize", init)).headers["mcp-session-id"]
    call = rpc("tools/call", {"name": "answer", "arguments": {"query": "q"}}, id=5)
    json_only = {"MCP-Protocol-Version": "2025-11-25", "Accept": "application/json"}
    response = post(server.port, call, session, json_only, timeout=20)
    assert response.status == 200 and response.headers["content-type"] == "application/json"
    done = not_run(response.json())
    assert "the client could not ask the person" in done["content"][0]["text"]
    assert creates(fake) == []


INFO = {"name": "pytest", "version": "0"}


def test_a_2025_03_26_client_is_never_sent_elicitation(spawn, fake):
    """Elicitation came with 2025-06-18: a 2025-03-26 client that declares it anyway is not
    sent a request it does not know; it runs unasked, and _meta says why."""
    fake.enqueue(SEARCHED)
    server = handshake(spawn, fake, capabilities=FORMS, version="2025-03-26")
    reply = server.call("answer", {"query": "q"})
    assert reply["result"]["_meta"]["confirm"]["asked"] is False, reply
    assert len(creates(fake)) == 1


@pytest.mark.parametrize(
    ("refusal", "refused"),
    [
        ("refuse_windows", "the completion window"),
        ("refuse_background", "background mode"),
    ],
    ids=["window", "zdr"],
)
def test_a_discounted_run_whose_own_window_is_refused_is_not_run_at_full_price(
    spawn, fake, tmp_path, refusal, refused
):
    """The person chose "run within 8 hours for $X"; the API refuses the window (or, a
    zero-data-retention organization, the background mode it needs) on that very call, the
    first of the process to ask: falling back to soonest would bill them the full price they
    did not choose. Not run; the refused create cost nothing; windows are off from then on,
    so the next call is asked at the full price only."""
    setattr(fake, refusal, True)
    fake.enqueue(SEARCHED)
    server = handshake(spawn, fake)
    send_call(server, 121, "q")
    answer(server, question(server), choose("run_discounted"))
    done = reply_to(server, 121)["result"]
    assert done["isError"] is True, done
    said = done["content"][0]["text"]
    assert said.startswith(f"not run: the API refused {refused}"), said
    assert said.endswith("nothing ran and nothing was spent"), said
    assert done["_meta"]["confirm"]["choice"] == "run_discounted"
    (refused,) = creates(fake)  # the refused create alone: nothing went at full price
    assert refused.body["background_options"] == {"completion_window": "8h"}
    wait_until(lambda: usage_of(tmp_path)["total"]["calls"] == 1, 10, "the not-run row")
    assert usage_of(tmp_path)["total"]["usd"] == 0
    assert reservations(tmp_path) == 0
    # The operator is told what happened, and no key to set: every profile is at soonest.
    wait_until(lambda: "warning: the API refused" in server.stderr, 5, lambda: server.stderr)
    if refusal == "refuse_windows":
        assert "the cost question offers no discounted run" in server.stderr, server.stderr
    assert "completion_window" not in server.stderr, server.stderr
    send_call(server, 122, "again")
    asked = question(server)
    values = [
        o["const"] for o in asked["params"]["requestedSchema"]["properties"]["choice"]["oneOf"]
    ]
    assert values == ["run", "cancel"], asked


# -- Where the cost question meets discounted runs (issue 41, end to end) ----------------------


# answer_detailed on gpt-6.1-terra, whose every call bills 100,000 input and 20,000 output
# tokens: $0.40 at Standard, $0.28 in a 2h window, $0.24 in 8h (runs end at their first poll).
DETAILED_TERRA = "model_profiles:\n  answer_detailed:\n    model: gpt-6.1-terra\n"


def heavy_calls(fake) -> None:
    from fake_upstream import Reply

    fake.window_polls = 0
    details = {"cached_tokens": 0}
    fake.default = Reply(
        usage={"input_tokens": 100_000, "output_tokens": 20_000, "input_tokens_details": details}
    )


def test_a_windowed_profiles_billed_calls_are_not_discounted_again_in_the_quote(
    spawn, fake, tmp_path
):
    """The ledger books a windowed profile's calls at its discount already: the quote must not
    take that discount a second time, or a call dearer than confirm_over_usd runs unasked."""
    heavy_calls(fake)  # $0.40 at Standard; $0.24 at 8h
    window = DETAILED_TERRA
    window += "    completion_window: 8h\n"
    server = handshake(spawn, fake, PRICES + window + "budget:\n  confirm_over_usd: 0.2\n")
    # The first is quoted at Standard prices from the prior (up to about $0.19): not asked.
    send_call(server, 1, "q1", tool="answer_detailed")
    first = reply_to(server, 1, timeout=30)["result"]["_meta"]
    assert first["window"] == "8h" and first["cost"]["usd"] == pytest.approx(0.24)
    wait_until(lambda: usage_of(tmp_path)["total"]["calls"] == 1, 10, "its row")
    # The same again would cost $0.24, over $0.20: asked, quoted at least what it was billed.
    send_call(server, 2, "q2", tool="answer_detailed")
    asked, _ = server.recv_until(
        lambda m: m.get("id") == 2 or m.get("method") == "elicitation/create", 30
    )
    assert asked.get("method") == "elicitation/create", asked
    # `run` is in the profile's window, and the person is told it may take that long.
    assert "Run it within 8 hours, or cancel?" in asked["params"]["message"], asked
    run = asked["params"]["requestedSchema"]["properties"]["choice"]["oneOf"][0]
    assert run["const"] == "run" and run["title"].startswith("Run it within 8 hours: $"), run
    answer(server, asked, choose("cancel"))
    estimate = not_run(reply_to(server, 2))["_meta"]["confirm"]["estimate"]
    assert estimate["window"] == "8h" and estimate["worst_usd"] >= 0.24, estimate
    assert "discounted" not in estimate  # nothing is cheaper than 8h
    assert len(creates(fake)) == 1


def test_a_budget_with_room_at_the_discount_admits_the_discounted_run_it_offered(
    spawn, fake, tmp_path
):
    """The question offers the 8h run at its discount; admission must reserve that figure,
    not the tool's full price, or a budget with room for the offer refuses what it offered
    (once the API has taken an 8h window for the model: until then both are at full price)."""
    heavy_calls(fake)  # $0.40 at Standard; $0.24 at 8h
    profiles = DETAILED_TERRA
    profiles += "  answer_quick:\n    model: gpt-6.1-terra\n    completion_window: 8h\n"
    budget = "budget:\n  confirm_over_usd: 0.01\n  daily_usd: 0.95\n"
    server = handshake(spawn, fake, PRICES + profiles + budget)
    for n, tool in enumerate(["answer_quick", "answer_detailed"]):  # $0.24 in 8h, then $0.40
        send_call(server, n, f"q{n}", tool=tool)
        answer(server, question(server), choose("run"))
        assert "result" in reply_to(server, n, timeout=30)
    wait_until(lambda: usage_of(tmp_path)["total"]["calls"] == 2, 10, "both rows")
    # $0.64 spent of $0.95: another $0.40 has no room; $0.25 at the discount has.
    send_call(server, 3, "q3", tool="answer_detailed")
    asked = question(server)
    assert "run within 8 hours for $0.25" in asked["params"]["message"], asked
    answer(server, asked, choose("run"))
    assert "has no room for this call" in reply_to(server, 3)["error"]["message"]
    send_call(server, 4, "q4", tool="answer_detailed")
    answer(server, question(server), choose("run_discounted"))
    done = reply_to(server, 4, timeout=30)
    assert "result" in done, done
    assert done["result"]["_meta"]["window"] == "8h"
    assert done["result"]["_meta"]["cost"]["usd"] == pytest.approx(0.24)
    assert len(creates(fake)) == 3


def test_a_call_with_room_for_run_in_its_taken_window_is_asked(spawn, fake, tmp_path):
    """The profile's 2h window taken by the API, 8h not yet: `run` is at the 2h discount, the
    8h offer at full price (admission's figures). The check before asking took the offer's
    alone as the cheapest, so a call whose `run` fits was refused unasked."""
    heavy_calls(fake)  # $0.40 at Standard; $0.28 at 2h
    profiles = DETAILED_TERRA
    profiles += "    completion_window: 2h\n"
    budget = "budget:\n  confirm_over_usd: 0.01\n  daily_usd: 0.63\n"
    server = handshake(spawn, fake, PRICES + profiles + budget)
    send_call(server, 1, "q1", tool="answer_detailed")
    answer(server, question(server), choose("run"))
    assert reply_to(server, 1, timeout=30)["result"]["_meta"]["cost"]["usd"] == pytest.approx(0.28)
    wait_until(lambda: usage_of(tmp_path)["total"]["calls"] == 1, 10, "the first row")
    # $0.28 spent of $0.63: another $0.28 in 2h has room; $0.40 (8h, not yet taken) has not.
    send_call(server, 2, "q2", tool="answer_detailed")
    asked, _ = server.recv_until(lambda m: m.get("id") == 2 or m.get("method") == ELICIT)
    assert asked.get("method") == ELICIT, asked  # not refused unasked
    answer(server, asked, choose("run"))
    done = reply_to(server, 2, timeout=30)
    assert done["result"]["_meta"]["cost"]["usd"] == pytest.approx(0.28), done
    assert len(creates(fake)) == 2


def test_a_stateless_server_says_why_a_handshake_client_is_not_asked(spawn, fake):
    """Under --stateless a 2025-11-25 call's session is its request's own: the question cannot
    be asked however the client declared forms, and the refusal must not blame the client
    ("no form elicitation") for what the server's mode decides."""
    from http_client import post, rpc

    server = spawn(
        "--http",
        "127.0.0.1:0",
        "--stateless",
        config=ASK + "  confirm_required: true\n",
        env={"MCP_TASK_SECRET": SECRET},
        upstream=fake,
    )
    from http_client import wait_listening

    server.port = wait_listening(server)
    init = {"protocolVersion": "2025-11-25", "capabilities": FORMS, "clientInfo": INFO}
    session = post(server.port, rpc("initialize", init)).headers.get("mcp-session-id")
    call = rpc("tools/call", {"name": "answer", "arguments": {"query": "q"}}, id=5)
    response = post(server.port, call, session, {"MCP-Protocol-Version": "2025-11-25"}, timeout=20)
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        reply = [d for _, d in response.events() if "method" not in d][-1]
    else:
        reply = response.json()
    done = not_run(reply)
    v1.CallToolResult.model_validate(done)
    text = done["content"][0]["text"]
    assert "no form elicitation" not in text, text
    assert "a --stateless server asks only 2026-07-28 clients" in text
    assert done["_meta"]["confirm"]["reason"].startswith(
        "the client cannot be asked (a --stateless"
    )
    assert creates(fake) == []


def engine_in_process(fake, tmp_path, monkeypatch, config: str):
    """The real engine in this process, on the fake upstream and tmp_path's state (as the
    spawned servers' and --usage's), for a race a test must land at an exact point."""
    from conftest import TEST_KEY, base_env

    import openai_responses_mcp as m

    monkeypatch.setenv("OPENAI_API_KEY", TEST_KEY)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    for name in ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "https_proxy", "http_proxy"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "config.yaml").write_text(config, encoding="utf-8")
    env = base_env(tmp_path, OPENAI_BASE_URL=fake.base_url)
    return m.build_engine(m.load_config({"config": str(tmp_path / "config.yaml")}, env), m.Log())


@pytest.mark.parametrize("off", ["windows_off", "off"], ids=["window", "zdr"])
def test_a_discount_chosen_is_not_sent_in_full_when_another_call_closed_windows_meanwhile(
    fake, tmp_path, monkeypatch, off
):
    """Two discounted runs chosen at once: the API refuses the first's window (or background
    mode) while the second is between its check (AnswerEngine._check_window_open) and its
    request, which then went out at soonest, billed in full (seen with 16 at once over stdio).
    Driven in this process to land the refusal exactly there, in admission."""
    import openai_responses_mcp as m

    engine = engine_in_process(fake, tmp_path, monkeypatch, ASK)
    admit = engine.spending.admit

    def refused_meanwhile(*args, **kwargs):
        setattr(engine.upstream.background, off, True)  # the other call's refusal lands
        return admit(*args, **kwargs)

    monkeypatch.setattr(engine.spending, "admit", refused_meanwhile)
    fake.enqueue(SEARCHED)
    call = m.Call("c1", "answer")
    call.window = "8h"  # the person chose run_discounted
    with pytest.raises(m.NotRun, match="cannot run in a completion window now"):
        engine.answer("answer", {"query": "q"}, call)
    assert creates(fake) == []
    engine.close()
    total = usage_of(tmp_path)["total"]
    assert total["calls"] == 1 and total["usd"] == 0, total  # its row: not run, at no cost
    assert reservations(tmp_path) == 0


@pytest.mark.parametrize("refusal", ["refuse_windows", "refuse_background"], ids=["window", "zdr"])
def test_a_run_agreed_at_its_profiles_window_discount_is_not_run_in_full_when_refused(
    spawn, fake, tmp_path, refusal
):
    """Once the API took the profile's 8h window, the question quotes `Run it within 8 hours`
    at its discount ($0.24, up to $0.24). The API then refuses the window (a gateway in
    front, an organization turned zero-data-retention): falling back to soonest billed $0.40,
    above the figure the person agreed to. Not run; the operator is warned as before."""
    heavy_calls(fake)  # $0.40 at Standard; $0.24 at 8h
    profile = DETAILED_TERRA
    server = handshake(spawn, fake, ASK + profile + "    completion_window: 8h\n")
    send_call(server, 1, "q1", tool="answer_detailed")
    answer(server, question(server), choose("run"))
    assert reply_to(server, 1, timeout=30)["result"]["_meta"]["cost"]["usd"] == pytest.approx(0.24)
    wait_until(lambda: usage_of(tmp_path)["total"]["calls"] == 1, 10, "its row")
    setattr(fake, refusal, True)
    send_call(server, 2, "q2", tool="answer_detailed")
    asked = question(server)
    assert "estimated at $0.24 (up to $0.24). Run it within 8 hours" in asked["params"]["message"]
    answer(server, asked, choose("run"))
    done = reply_to(server, 2, timeout=30)["result"]
    assert done["isError"] is True, done
    assert done["content"][0]["text"].startswith("not run: the API refused "), done
    assert done["_meta"]["confirm"]["choice"] == "run"
    assert all(r.body.get("background_options") for r in creates(fake))  # none at soonest
    wait_until(lambda: usage_of(tmp_path)["total"]["calls"] == 2, 10, "both rows")
    assert usage_of(tmp_path)["total"]["usd"] == pytest.approx(0.24)
    assert reservations(tmp_path) == 0
    wait_until(lambda: "warning: the API refused" in server.stderr, 5, lambda: server.stderr)


def test_an_unasked_identical_call_does_not_share_the_request_of_one_agreed_at_the_discount(
    fake, tmp_path, monkeypatch
):
    """Two identical calls of a windowed profile in flight at once: one the person agreed to
    at the window's discount (not run if the window is refused), one nobody was asked about
    (run at soonest then). Sharing one request, the unasked one would end "not run" on the
    agreed one's terms: each makes its own. Driven in this process to hold the agreed one's
    request while the other comes."""
    import threading

    import openai_responses_mcp as m

    profile = "model_profiles:\n  answer:\n    completion_window: 8h\n"
    engine = engine_in_process(fake, tmp_path, monkeypatch, PRICES + profile)
    fake.refuse_windows = True
    held, go = threading.Event(), threading.Event()
    request = engine.upstream.request

    def holding(tool, body, call, *args, **kwargs):
        if call.window is not None:  # the agreed one's request waits until the other is done
            held.set()
            go.wait(20)
        return request(tool, body, call, *args, **kwargs)

    monkeypatch.setattr(engine.upstream, "request", holding)
    agreed, unasked = m.Call("a", "answer"), m.Call("b", "answer")
    agreed.window = "8h"  # as CostQuestion sets it for a run quoted at the profile's discount
    ended: dict = {}

    def run(call):
        try:
            ended[call.id] = engine.answer("answer", {"query": "q"}, call)
        except m.ToolError as exc:
            ended[call.id] = exc

    threads = [threading.Thread(target=run, args=(c,)) for c in (agreed, unasked)]
    threads[0].start()
    assert held.wait(20)
    threads[1].start()
    threads[1].join(20)
    go.set()
    threads[0].join(20)
    engine.close()
    assert isinstance(ended.get("b"), tuple), ended.get("b")  # answered, at soonest
    assert isinstance(ended["a"], m.NotRun), ended["a"]


def test_identical_agreed_calls_sharing_a_refused_request_each_keep_their_own_confirm(
    fake, tmp_path, monkeypatch
):
    """Two identical calls, each agreed at the discount, share one request, and so its NotRun
    when the API refuses the window: each reply's _meta.confirm is its own person's (with
    cache.share_across_users, another user's), not whichever call ended last."""
    import threading

    import openai_responses_mcp as m

    engine = engine_in_process(fake, tmp_path, monkeypatch, ASK)
    fake.refuse_windows = True
    held, go = threading.Event(), threading.Event()
    request = engine.upstream.request

    def holding(*args, **kwargs):  # the request waits until the other call has joined it
        held.set()
        go.wait(20)
        return request(*args, **kwargs)

    monkeypatch.setattr(engine.upstream, "request", holding)
    calls = {name: m.Call(name, "answer") for name in ("a", "b")}
    ended: dict = {}

    def run(name):
        calls[name].window = "8h"  # as CostQuestion sets it for run_discounted
        try:
            engine.answer("answer", {"query": "q"}, calls[name], lambda quote: {"who": name})
        except m.ToolError as exc:
            ended[name] = exc

    threads = {name: threading.Thread(target=run, args=(name,)) for name in calls}
    threads["a"].start()
    assert held.wait(20)
    threads["b"].start()
    wait_until(lambda: getattr(calls["b"], "upstream", None) is not None, 20, "b joined")
    go.set()
    for thread in threads.values():
        thread.join(20)
    engine.close()
    assert len(creates(fake)) == 1  # one request, shared
    assert ended["a"].meta == {"who": "a"} and ended["b"].meta == {"who": "b"}
