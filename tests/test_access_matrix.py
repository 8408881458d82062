"""Who gets what (issue 31): every kind of credential against every endpoint, with the state up
and down, on a loopback and a non-loopback (0.0.0.0) bind. Each cell's status is written here;
a change to any one of them fails the table's test.

One real server per configuration for the whole module (four in all), each with the shared
token, named users (alice active, bob revoked, boss an admin) and OAuth from an issuer of this
suite's own (tests/test_oauth.py). Traffic goes to 127.0.0.1 only."""

from __future__ import annotations

import time

import pytest
from conftest import Server, base_env, run_cli, wait_until
from http_client import ACCEPT_BOTH, INIT_PARAMS, open_session, open_stream, post, request, rpc

jwt = pytest.importorskip("jwt")
from test_oauth import Issuer, auth_config  # noqa: E402

SHARED = "shared-matrix-0123456789abcdef"
PUBLIC = "https://mcp.example.test"  # server.public_url: the resource tokens are for
AUDIENCE = PUBLIC + "/mcp"

# The endpoints, in the order of each row's statuses.
ENDPOINTS = (
    ("POST", "/mcp"),  # initialize
    ("GET", "/sse"),  # the legacy stream
    ("POST", "/messages"),  # the legacy stream's messages (no session named)
    ("GET", "/usage"),
    ("GET", "/.well-known/oauth-protected-resource/mcp"),
    ("GET", "/.well-known/oauth-protected-resource"),
)

# credential -> status per endpoint, the state up; the same on both binds.
UP = {
    "none": (401, 401, 401, 401, 200, 200),
    "shared": (200, 200, 400, 200, 200, 200),
    "named": (200, 200, 400, 200, 200, 200),
    "revoked": (401, 401, 401, 401, 200, 200),
    "rotated away": (401, 401, 401, 401, 200, 200),  # the old token, after --user rotate
    "rotated to": (200, 200, 400, 200, 200, 200),  # its new one
    "oauth": (200, 200, 400, 200, 200, 200),
    "oauth named alice": (200, 200, 400, 200, 200, 200),
    "wrong audience": (401, 401, 401, 401, 200, 200),
    "expired": (401, 401, 401, 401, 200, 200),
}
# The state down: named tokens, valid or revoked, cannot be told apart: 503 with Retry-After
# (never 401, which tells a client to throw its credential away; never served).
DOWN = {
    "none": (401, 401, 401, 401, 200, 200),
    "shared": (200, 200, 400, 200, 200, 200),
    "named": (503, 503, 503, 503, 200, 200),
    "revoked": (503, 503, 503, 503, 200, 200),
    "rotated away": (503, 503, 503, 503, 200, 200),
    "rotated to": (503, 503, 503, 503, 200, 200),
    "oauth": (200, 200, 400, 200, 200, 200),
    "oauth named alice": (200, 200, 400, 200, 200, 200),
    "wrong audience": (401, 401, 401, 401, 200, 200),
    "expired": (401, 401, 401, 401, 200, 200),
}
EXPECTED = {
    ("127.0.0.1", "up"): UP,
    ("0.0.0.0", "up"): UP,
    ("127.0.0.1", "down"): DOWN,
    ("0.0.0.0", "down"): DOWN,
}


@pytest.fixture(scope="module")
def world(tmp_path_factory, upstream):
    """The issuer, the users, the tokens, and the four servers."""
    tmp = tmp_path_factory.mktemp("matrix")
    issuer = Issuer().start()
    up = {"OPENAI_RESPONSES_MCP_STATE": str(tmp / "state.sqlite3")}
    down_path = tmp / "down.sqlite3"
    down_path.mkdir()  # a folder where the file should be: the state cannot be read
    down = {"OPENAI_RESPONSES_MCP_STATE": str(down_path)}

    def add(name: str) -> str:
        done = run_cli(tmp, "--user", "add", name, env=up)
        assert done.returncode == 0, done.stderr
        return done.stdout.splitlines()[-1]

    alice, bob, boss = add("alice"), add("bob"), add("boss")
    assert run_cli(tmp, "--user", "revoke", "bob", env=up).returncode == 0
    dana = add("dana")
    rotated = run_cli(tmp, "--user", "rotate", "dana", env=up)
    assert rotated.returncode == 0, rotated.stderr
    now = int(time.time())
    tokens = {
        "none": None,
        "shared": SHARED,
        "named": alice,
        "revoked": bob,
        "rotated away": dana,
        "rotated to": rotated.stdout.splitlines()[-1],
        "oauth": issuer.token(AUDIENCE, sub="carol", exp=now + 3600),
        "oauth named alice": issuer.token(AUDIENCE, sub="alice", exp=now + 3600),
        "oauth named boss": issuer.token(AUDIENCE, sub="boss", exp=now + 3600),
        "wrong audience": issuer.token("https://elsewhere.example/mcp", sub="carol"),
        "expired": issuer.token(AUDIENCE, sub="carol", iat=now - 7200, exp=now - 3600),
    }
    config = tmp / "config.yaml"
    config.write_text(auth_config(issuer.url, public_url=PUBLIC, admins=["boss"]))
    servers = {}
    for host in ("127.0.0.1", "0.0.0.0"):
        for state, env in (("up", up), ("down", down)):
            extra = {**env, "MCP_HTTP_TOKEN": SHARED, "OPENAI_BASE_URL": upstream.base_url}
            argv = ["--http", f"{host}:0", "--config", str(config)]
            servers[host, state] = Server(argv, base_env(tmp, **extra), tmp)
    try:
        for server in servers.values():
            server.port = listening_port(server)
            # the issuer's keys are fetched at start: 503 until then
            wait_until(
                lambda s=server: status(s.port, "GET", "/usage", tokens["oauth"]) != 503, 30, "keys"
            )
        yield {"servers": servers, "tokens": tokens, "boss": boss}
    finally:
        for server in servers.values():
            server.stop()
        issuer.stop()


def listening_port(server, timeout: float = 20.0) -> int:
    import re

    def port() -> int | None:
        found = re.search(r"serving MCP on http://[^ ]*?:(\d+)/mcp", server.stderr)
        assert found or server.proc.poll() is None, server.stderr
        return int(found.group(1)) if found else None

    return wait_until(port, timeout, lambda: f"listening:\n{server.stderr}")


def headers_for(token: str | None) -> dict:
    headers = {"Content-Type": "application/json", "Accept": ACCEPT_BOTH}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return headers


def status(port: int, method: str, path: str, token: str | None) -> int:
    return answer(port, method, path, token)[0]


def answer(port: int, method: str, path: str, token: str | None) -> tuple:
    """(status, headers) of one request; a stream (GET /sse) is closed once its head is in."""
    headers = headers_for(token)
    if path == "/sse":
        stream = open_stream(port, method, path, headers={**headers, "Accept": "text/event-stream"})
        try:
            return stream.status, {k.lower(): v for k, v in stream.response.getheaders()}
        finally:
            stream.conn.close()
    body = rpc("initialize", INIT_PARAMS) if path == "/mcp" else rpc("ping")
    reply = request(port, method, path, body if method == "POST" else None, headers)
    return reply.status, reply.headers


@pytest.mark.parametrize(("host", "state"), list(EXPECTED))
def test_the_access_matrix(world, host, state):
    port = world["servers"][host, state].port
    seen, refusals = {}, []
    for credential in EXPECTED[host, state]:
        row = []
        for method, path in ENDPOINTS:
            code, headers = answer(port, method, path, world["tokens"][credential])
            row.append(code)
            if code == 401 and "www-authenticate" not in headers:
                refusals.append(f"{credential} {path}: 401 without WWW-Authenticate")
            if code == 503 and "retry-after" not in headers:
                refusals.append(f"{credential} {path}: 503 without Retry-After")
        seen[credential] = tuple(row)
    assert seen == EXPECTED[host, state]
    assert refusals == []


# -- a colliding name is another person ----------------------------------------------------------


def spend_as(port: int, token: str) -> dict:
    reply = request(port, "GET", "/usage", headers=headers_for(token))
    assert reply.status == 200, reply
    return reply.json()["day"]


@pytest.fixture(scope="module")
def alice_spent(world, upstream):
    """Named alice makes one paid call on the state-up loopback server."""
    port = world["servers"]["127.0.0.1", "up"].port
    alice = world["tokens"]["named"]
    session = open_session(port, headers_for(alice))
    params = {"name": "answer", "arguments": {"query": "q"}}
    reply = post(port, rpc("tools/call", params), session, headers_for(alice), timeout=60)
    assert "result" in reply.json(), reply
    wait_until(lambda: spend_as(port, alice)["calls"] >= 1, 20, "alice's row")
    return port


def test_an_oauth_subject_named_like_a_user_sees_nothing_of_that_users(world, alice_spent):
    seen = spend_as(alice_spent, world["tokens"]["oauth named alice"])
    assert seen["calls"] == 0 and seen["usd"] == 0


def test_an_oauth_subject_named_like_an_admin_is_no_admin(world, alice_spent):
    seen = spend_as(alice_spent, world["tokens"]["oauth named boss"])
    assert seen["calls"] == 0 and [row["user"] for row in seen["by_user"]] != ["alice"]
    assert all(row["user"] != "alice" for row in seen["by_user"])


def test_the_named_admin_sees_the_team_and_alice_her_own(world, alice_spent):
    """The cells above are about the collision, not about /usage: the real ones still work."""
    team = spend_as(alice_spent, world["boss"])
    assert "alice" in [row["user"] for row in team["by_user"]]
    mine = spend_as(alice_spent, world["tokens"]["named"])
    assert mine["calls"] >= 1 and [row["user"] for row in mine["by_user"]] == ["alice"]
