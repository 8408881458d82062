"""--http as an OAuth 2.1 resource server (issue 26): server.auth.issuer.

Two kinds of authorization server, both real HTTP servers on 127.0.0.1:
- oidc-provider from npm (tests/oidc_server.mjs; .ci/node-tools.sh installs it), through which
  the MCP Python SDK's OAuth client signs in end to end: discovery, dynamic registration, PKCE,
  the token for our resource, then a tools/call;
- a small issuer of this file's own (metadata and JWKS served from keys the test holds), so
  tokens the real one would never issue can be signed: expired, for another audience or issuer,
  `alg: none`, HS256 keyed with the public key, without the scope, under a rotated key.
The server is always the real program, spawned with --http.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import http.server
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
from pathlib import Path

import pytest
from conftest import ROOT, wait_until
from fake_upstream import SEARCHED
from http_client import ACCEPT_BOTH, INIT_PARAMS, request, rpc, wait_listening

jwt = pytest.importorskip("jwt")
from cryptography.hazmat.primitives import serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec, rsa  # noqa: E402

SCOPE = "mcp:tools"
OAUTH_EXTRA = f"{sys.executable} -m pip install PyJWT cryptography"  # a file run by Python


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


# -- an issuer of our own ------------------------------------------------------------------------


class Issuer:
    """RFC 8414 metadata and a JWKS on 127.0.0.1, from keys this test holds and can rotate."""

    def __init__(self, port: int | None = None, path: str = "", oidc_only: bool = False):
        self.port = port or free_port()
        self.origin = f"http://127.0.0.1:{self.port}"
        self.url = self.origin + path  # with a path, like Keycloak's /realms/NAME
        # oidc_only: only OpenID Connect discovery (issuer + /.well-known/openid-configuration),
        # as Entra ID and Keycloak serve it; else only RFC 8414's form
        self.metadata_path = (
            f"{path}/.well-known/openid-configuration"
            if oidc_only
            else f"/.well-known/oauth-authorization-server{path}"
        )
        self.keys: dict[str, object] = {}  # kid -> private key
        self.jwks_fetches = 0
        self.add_key("k1")
        self.httpd = None

    def add_key(self, kid: str, kind: str = "rsa") -> None:
        if kind == "rsa":
            self.keys[kid] = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        else:
            self.keys[kid] = ec.generate_private_key(ec.SECP256R1())

    def jwks(self) -> dict:
        keys = []
        for kid, key in self.keys.items():
            jwk = json.loads(
                jwt.algorithms.get_default_algorithms()[self.alg(kid)].to_jwk(key.public_key())
            )
            keys.append({**jwk, "kid": kid, "use": "sig", "alg": self.alg(kid)})
        return {"keys": keys}

    def alg(self, kid: str) -> str:
        return "RS256" if isinstance(self.keys[kid], rsa.RSAPrivateKey) else "ES256"

    def start(self) -> Issuer:
        issuer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                if self.path == issuer.metadata_path:
                    body = {"issuer": issuer.url, "jwks_uri": f"{issuer.origin}/jwks"}
                elif self.path == "/jwks":
                    issuer.jwks_fetches += 1
                    body = issuer.jwks()
                else:
                    self.send_error(404)
                    return
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.httpd is not None:
            self.httpd.shutdown()
            self.httpd.server_close()

    def token(self, audience, kid: str = "k1", **claims) -> str:
        now = int(time.time())
        payload = {
            "iss": self.url,
            "sub": "alice",
            "aud": audience,
            "iat": now,
            "exp": now + 300,
            "scope": SCOPE,
            **claims,
        }
        payload = {name: value for name, value in payload.items() if value is not None}
        return jwt.encode(payload, self.keys[kid], algorithm=self.alg(kid), headers={"kid": kid})

    def public_pem(self, kid: str = "k1") -> bytes:
        return (
            self.keys[kid]
            .public_key()
            .public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )


@pytest.fixture
def issuer():
    own = Issuer().start()
    yield own
    own.stop()


def auth_config(issuer_url: str, public_url: str | None = None, **auth) -> str:
    settings = {"issuer": issuer_url, "scopes": [SCOPE], **auth}
    lines = "".join(f"    {key}: {json.dumps(value)}\n" for key, value in settings.items())
    public = f"  public_url: {json.dumps(public_url)}\n" if public_url else ""
    return f"server:\n{public}  auth:\n{lines}"


@pytest.fixture
def protected(spawn, fake):
    """Starts `--http 127.0.0.1:0` with OAuth from `issuer_url`; `.port` and `.resource` set."""

    def start(issuer_url: str, *args: str, **auth):
        server = spawn(
            "--http", "127.0.0.1:0", *args, config=auth_config(issuer_url, **auth), upstream=fake
        )
        server.port = wait_listening(server)
        server.resource = f"http://127.0.0.1:{server.port}/mcp"
        return server

    return start


def initialize(port: int, token: str | None, host: str | None = None):
    headers = {"Content-Type": "application/json", "Accept": ACCEPT_BOTH}
    if host is not None:
        headers["Host"] = host
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return request(port, "POST", "/mcp", rpc("initialize", INIT_PARAMS), headers)


def why(response) -> str:
    """A refusal's words: a JSON-RPC error's message (the request had an id), else "error"."""
    error = response.json()["error"]
    return error["message"] if isinstance(error, dict) else error


def wait_ready(server, token: str, timeout: float = 30.0):
    """The first answer that is not 503 (the server fetches the issuer's keys at start)."""
    return wait_until(
        lambda: (response := initialize(server.port, token)).status != 503 and response,
        timeout,
        "an answer other than 503",
    )


# -- metadata and challenges ---------------------------------------------------------------------


def test_protected_resource_metadata_names_the_resource_and_its_issuer(issuer, protected):
    server = protected(issuer.url)
    for path in (
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-protected-resource",
    ):
        response = request(server.port, "GET", path)
        assert response.status == 200, path
        assert response.json() == {
            "resource": server.resource,
            "authorization_servers": [issuer.url],
            "scopes_supported": [SCOPE],
            "bearer_methods_supported": ["header"],
            "resource_name": "openai-responses-mcp",
        }


def test_without_oauth_there_is_no_resource_metadata(spawn, fake):
    server = spawn("--http", "127.0.0.1:0", upstream=fake)
    port = wait_listening(server)
    assert request(port, "GET", "/.well-known/oauth-protected-resource/mcp").status == 404


def test_no_token_gets_401_pointing_at_the_metadata_with_the_scope(issuer, protected):
    server = protected(issuer.url)
    response = initialize(server.port, None)
    assert response.status == 401
    metadata = f"http://127.0.0.1:{server.port}/.well-known/oauth-protected-resource/mcp"
    assert response.headers["www-authenticate"] == (
        f'Bearer resource_metadata="{metadata}", scope="{SCOPE}"'
    )
    assert "sign in" in why(response)


def test_public_url_names_the_resource_clients_use(issuer, protected):
    """Behind a proxy: the resource, the metadata URL, and the Host the proxy passes on."""
    server = protected(issuer.url, public_url="https://mcp.example.com/team/")
    response = request(server.port, "GET", "/.well-known/oauth-protected-resource/team/mcp")
    assert response.json()["resource"] == "https://mcp.example.com/team/mcp"
    response = initialize(server.port, None, host="mcp.example.com")
    assert response.status == 401
    assert response.headers["www-authenticate"].startswith(
        'Bearer resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource'
        '/team/mcp"'
    )
    token = issuer.token("https://mcp.example.com/team/mcp")
    assert wait_ready(server, token).status == 200
    assert initialize(server.port, issuer.token(server.resource)).status == 401


@pytest.mark.parametrize("name", ["localhost", "LocalHost", "[::1]", "127.0.0.1"])
def test_without_public_url_the_resource_is_the_loopback_url_the_client_used(
    issuer, protected, name
):
    """Issue 31: a client that connected as localhost is told http://localhost:PORT/mcp (the
    MCP SDK refuses a resource that is not the URL it used), in the metadata and the 401, and
    a token for that resource is what opens /mcp through that name."""
    server = protected(issuer.url)
    host = f"{name}:{server.port}"
    resource = f"http://{name.lower()}:{server.port}/mcp"
    headers = {"Host": host}
    for path in (
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-protected-resource",
    ):
        response = request(server.port, "GET", path, headers=headers)
        assert response.status == 200, response.body
        assert response.json()["resource"] == resource
        assert "Host" in response.headers["vary"]
    response = initialize(server.port, None, host=host)
    metadata = resource.replace("/mcp", "/.well-known/oauth-protected-resource/mcp")
    assert response.headers["www-authenticate"].startswith(f'Bearer resource_metadata="{metadata}"')
    assert wait_ready(server, issuer.token(server.resource)).status == 200  # keys known
    assert initialize(server.port, issuer.token(resource), host=host).status == 200
    if name != "127.0.0.1":  # a token is for the URL it names, not for its loopback aliases
        refused = initialize(server.port, issuer.token(server.resource), host=host)
        assert refused.status == 401
        assert f"not {resource}" in why(refused)
        assert initialize(server.port, issuer.token(resource)).status == 401


@pytest.mark.parametrize(
    "host", ["localhost:1", "localhost", "localhost.:{port}", "127.0.0.2:{port}"]
)
def test_a_host_that_is_not_a_loopback_name_and_port_gets_the_default_resource(
    issuer, protected, host
):
    """A Host header that lies (another port, no port, a trailing dot, another loopback
    address) never puts a name of its choosing into the metadata: it is refused as a name of
    this server (421) or told the default resource."""
    server = protected(issuer.url)
    response = request(
        server.port,
        "GET",
        "/.well-known/oauth-protected-resource/mcp",
        headers={"Host": host.format(port=server.port)},
    )
    assert response.status in (200, 421), response.body
    if response.status == 200:
        assert response.json()["resource"] == server.resource


def test_a_valid_token_is_served_and_the_user_is_its_subject(issuer, protected):
    server = protected(issuer.url)
    response = wait_ready(server, issuer.token(server.resource))
    assert response.status == 200, response.body
    assert response.json()["result"]["serverInfo"]["name"] == "openai-responses-mcp"
    # with or without a trailing slash, as RFC 8707 resources are written both ways
    assert initialize(server.port, issuer.token(server.resource + "/")).status == 200
    assert initialize(server.port, issuer.token([server.resource, "other"])).status == 200


@pytest.mark.parametrize(
    ("claims", "reason"),
    [
        ({"exp": int(time.time()) - 3600}, "expired"),
        ({"nbf": int(time.time()) + 3600}, "not valid yet"),
        ({"iss": "http://127.0.0.1:1"}, "not issued by"),
        ({"exp": None}, "no exp claim"),
        ({"sub": None}, "no sub claim"),
    ],
)
def test_a_bad_token_gets_401_invalid_token(issuer, protected, claims, reason):
    server = protected(issuer.url)
    assert wait_ready(server, issuer.token(server.resource)).status == 200
    response = initialize(server.port, issuer.token(server.resource, **claims))
    assert response.status == 401, reason
    challenge = response.headers["www-authenticate"]
    assert challenge.startswith('Bearer resource_metadata="http://127.0.0.1:')
    assert 'error="invalid_token"' in challenge
    assert reason in why(response)


def test_an_issuer_with_a_path_and_only_openid_discovery_is_found(protected):
    """Keycloak's and Entra ID's shape: https://host/realms/team, and the keys found through
    /realms/team/.well-known/openid-configuration (no RFC 8414 document)."""
    issuer = Issuer(path="/realms/team", oidc_only=True).start()
    try:
        server = protected(issuer.url)
        assert wait_ready(server, issuer.token(server.resource)).status == 200
    finally:
        issuer.stop()


def test_a_token_for_another_audience_is_refused(issuer, protected):
    server = protected(issuer.url)
    assert wait_ready(server, issuer.token(server.resource)).status == 200
    for audience in ("http://127.0.0.1:1/mcp", "account", server.resource + "x"):
        response = initialize(server.port, issuer.token(audience))
        assert response.status == 401, audience
        assert "another audience" in why(response)


def test_server_auth_audience_accepts_tokens_that_name_no_resource(issuer, protected):
    """Clients that send no `resource` get the IdP's default audience: configure it."""
    server = protected(issuer.url, audience="api://openai-responses-mcp")
    good = issuer.token("api://openai-responses-mcp")
    assert wait_ready(server, good).status == 200
    assert initialize(server.port, issuer.token(server.resource)).status == 401


def unsigned(issuer: Issuer, audience: str, header: dict) -> str:
    now = int(time.time())
    claims = {"iss": issuer.url, "sub": "mallory", "aud": audience, "exp": now + 300}
    claims["scope"] = SCOPE
    return f"{b64(json.dumps(header).encode())}.{b64(json.dumps(claims).encode())}"


def test_alg_none_is_refused(issuer, protected):
    server = protected(issuer.url)
    assert wait_ready(server, issuer.token(server.resource)).status == 200
    for alg in ("none", "None", "NONE"):
        token = unsigned(issuer, server.resource, {"alg": alg, "kid": "k1"}) + "."
        response = initialize(server.port, token)
        assert response.status == 401
        assert "algorithm" in why(response)


def test_hs256_keyed_with_the_issuers_public_key_is_refused(issuer, protected):
    """The classic forgery: the public key (anyone can fetch it) used as an HMAC secret."""
    server = protected(issuer.url)
    assert wait_ready(server, issuer.token(server.resource)).status == 200
    for secret in (issuer.public_pem(), json.dumps(issuer.jwks()["keys"][0]).encode()):
        head = unsigned(issuer, server.resource, {"alg": "HS256", "kid": "k1", "typ": "JWT"})
        signature = b64(hmac.new(secret, head.encode(), hashlib.sha256).digest())
        response = initialize(server.port, f"{head}.{signature}")
        assert response.status == 401
        assert "algorithm 'HS256' is not accepted" in why(response)


def test_a_token_signed_by_another_key_is_refused(issuer, protected):
    server = protected(issuer.url)
    assert wait_ready(server, issuer.token(server.resource)).status == 200
    stranger = Issuer()
    stranger.url = issuer.url  # same claims, a key the issuer never published, same kid
    response = initialize(server.port, stranger.token(server.resource))
    assert response.status == 401
    assert "signature does not verify" in why(response)


def test_a_token_without_the_scope_gets_403_insufficient_scope(issuer, protected):
    server = protected(issuer.url)
    assert wait_ready(server, issuer.token(server.resource)).status == 200
    for scope in ({"scope": "openid profile"}, {"scope": None}):
        response = initialize(server.port, issuer.token(server.resource, **scope))
        assert response.status == 403
        challenge = response.headers["www-authenticate"]
        assert 'error="insufficient_scope"' in challenge
        assert f'scope="{SCOPE}"' in challenge
    # Entra ID and Okta put scopes in `scp`, as a string or a list
    assert (
        initialize(server.port, issuer.token(server.resource, scope=None, scp=SCOPE)).status == 200
    )
    scp = issuer.token(server.resource, scope=None, scp=[SCOPE, "x"])
    assert initialize(server.port, scp).status == 200


def test_the_shared_token_keeps_working_beside_oauth(issuer, spawn, fake):
    """MCP_HTTP_TOKEN (automation, one shared identity) is accepted as before; anything else
    must be the issuer's token."""
    shared = "shared-token-0123456789abcdef"
    env = {"MCP_HTTP_TOKEN": shared}
    server = spawn("--http", "127.0.0.1:0", config=auth_config(issuer.url), env=env, upstream=fake)
    server.port = wait_listening(server)
    assert initialize(server.port, shared).status == 200
    response = initialize(server.port, shared + "x")
    assert response.status == 401
    assert 'error="invalid_token"' in response.headers["www-authenticate"]
    resource = f"http://127.0.0.1:{server.port}/mcp"
    assert wait_ready(server, issuer.token(resource)).status == 200


def test_user_claim_names_the_user(issuer, protected):
    server = protected(issuer.url, user_claim="email")
    assert wait_ready(server, issuer.token(server.resource, email="a@example.com")).status == 200
    response = initialize(server.port, issuer.token(server.resource))
    assert response.status == 401
    assert "no email claim" in why(response)


def test_an_unknown_kid_fetches_the_keys_again_so_the_issuer_can_rotate(issuer, protected):
    server = protected(issuer.url)
    assert wait_ready(server, issuer.token(server.resource)).status == 200
    stranger = Issuer()
    stranger.url = issuer.url
    stranger.keys["k9"] = stranger.keys.pop("k1")
    # A stranger's unknown kid spends the refetch (or the start's fetch, moments ago, has).
    assert initialize(server.port, stranger.token(server.resource, kid="k9")).status in (401, 503)
    fetches = issuer.jwks_fetches
    issuer.add_key("k2", "ec")  # rotation: a new key, published after the server cached k1
    deadline = time.monotonic() + 30  # the refetch is rate-limited (10 s)
    waits = []
    while (
        response := initialize(server.port, issuer.token(server.resource, kid="k2"))
    ).status != 200:
        waits.append((response.status, "retry-after" in response.headers))
        assert time.monotonic() < deadline
        time.sleep(0.5)  # sleep: the refetch's 10 s are the point
    # Until then, never the 401 that sends a valid token's client to sign in again (issue 39).
    assert waits and set(waits) == {(503, True)}
    assert issuer.jwks_fetches > fetches
    # a flood of unknown kids does not become a flood of fetches
    fetches = issuer.jwks_fetches
    started = time.monotonic()
    for _ in range(20):
        status = initialize(server.port, stranger.token(server.resource, kid="k9")).status
        assert status in (401, 503)
    allowed = 1 + int((time.monotonic() - started) // 10)  # one per 10 s, however slow we are
    assert issuer.jwks_fetches - fetches <= allowed < 20


def test_an_unreachable_issuer_fails_closed_then_recovers(protected):
    """Issuer down at start: a warning, every token refused (503), served once it is up."""
    issuer = Issuer()  # not started yet
    server = protected(issuer.url)
    token = issuer.token(server.resource)
    response = initialize(server.port, token)
    assert response.status == 503
    assert "signing keys are not known yet" in why(response)
    assert "retry" in why(response)
    assert "cannot get the signing keys" in server.stderr
    issuer.start()
    try:
        assert wait_ready(server, token).status == 200
        assert "keys are known now" in server.stderr
    finally:
        issuer.stop()


def test_tokens_never_appear_in_logs_even_with_debug(issuer, protected):
    server = protected(issuer.url, "--debug")
    good = issuer.token(server.resource)
    assert wait_ready(server, good).status == 200
    logged = server.stderr.count("token refused (")
    bad = [
        issuer.token(server.resource, exp=int(time.time()) - 3600),
        issuer.token("http://elsewhere/mcp"),
        issuer.token(server.resource, scope="nope"),
        "not-a-jwt-" + "s3cr3t" * 5,
    ]
    for token in bad:
        response = initialize(server.port, token)
        assert response.status in (401, 403)
        assert token not in response.body.decode()
        assert token not in response.headers["www-authenticate"]
    # each refusal is logged (--debug) before its answer: wait for all of them
    wait_until(lambda: server.stderr.count("token refused (") >= logged + len(bad), 10, "logs")
    log = server.stderr
    assert "token refused" in log  # --debug says why
    for token in [good, *bad]:
        assert token not in log
        assert token.split(".")[-1] not in log  # not even the signature alone


# -- configuration -------------------------------------------------------------------------------


def run_config(tmp_path, config: str, *args, env=None):
    from conftest import PROGRAM, base_env

    path = tmp_path / "c.yaml"
    path.write_text(config, encoding="utf-8")
    return subprocess.run(
        [*PROGRAM, "--config", str(path), *args],
        env={**base_env(tmp_path), **(env or {})},
        capture_output=True,
        text=True,
        timeout=30,
    )


@pytest.mark.parametrize(
    ("config", "key"),
    [
        (auth_config("login.example.com"), "server.auth.issuer"),
        (auth_config("http://login.example.com/realms/x"), "server.auth.issuer"),
        (auth_config("https://login.example.com/?a=b"), "server.auth.issuer"),
        (auth_config("https://login.example.com", scopes="mcp"), "server.auth.scopes"),
        (auth_config("https://login.example.com", scopes=["a b"]), "server.auth.scopes"),
        (auth_config("https://login.example.com", user_claim=""), "server.auth.user_claim"),
        (auth_config("https://login.example.com", audience=7), "server.auth.audience"),
        ("server:\n  public_url: mcp.example.com\n", "server.public_url"),
    ],
)
def test_a_malformed_auth_setting_exits_2_naming_the_key(tmp_path, config, key):
    done = run_config(tmp_path, config, "--http", "127.0.0.1:0")
    assert done.returncode == 2, done.stderr
    assert key in done.stderr


def test_a_missing_oauth_extra_exits_2_with_the_install_command(tmp_path):
    hide = tmp_path / "hide"
    hide.mkdir()
    (hide / "sitecustomize.py").write_text("import sys\nsys.modules['jwt'] = None\n")
    done = run_config(
        tmp_path,
        auth_config("https://login.example.com"),
        "--http",
        "127.0.0.1:0",
        env={"PYTHONPATH": str(hide)},
    )
    assert done.returncode == 2, done.stderr
    assert "server.auth.issuer" in done.stderr
    assert OAUTH_EXTRA in done.stderr


@pytest.mark.parametrize("address", ["0.0.0.0:0", "[::]:0", "192.0.2.7:8080"])
def test_a_non_loopback_address_with_oauth_needs_public_url(tmp_path, address):
    """Issue 31: only a loopback address can name its resource from the client's Host."""
    done = run_config(tmp_path, auth_config("https://login.example.com"), "--http", address)
    assert done.returncode == 2, done.stderr
    assert "server.public_url must be set" in done.stderr


def test_doctor_says_a_non_loopback_address_with_oauth_needs_public_url(tmp_path, issuer):
    done = run_config(tmp_path, auth_config(issuer.url), "--doctor", "--http", "192.0.2.7:8080")
    assert done.returncode == 1
    assert "server.public_url must be set" in done.stdout
    done = run_config(tmp_path, auth_config(issuer.url), "--doctor", "--http", "127.0.0.1:0")
    assert "server.public_url must be set" not in done.stdout


def test_oauth_serves_a_non_loopback_address_without_a_shared_token(spawn, fake, issuer):
    """OAuth is authentication: an open address needs no MCP_HTTP_TOKEN besides it."""
    config = auth_config(issuer.url, public_url="https://mcp.example.com")
    server = spawn("--http", "0.0.0.0:0", config=config, upstream=fake)
    wait_until(lambda: "serving MCP on" in server.stderr or server.proc.poll(), 15, "serving")
    assert server.proc.poll() is None, server.stderr
    assert "for https://mcp.example.com/mcp" in server.stderr


# -- end to end: oidc-provider and the MCP Python SDK's OAuth client -----------------------------


def node_and_provider() -> tuple[str, str] | None:
    """[node, oidc-provider's node_modules] already on this machine: MCP_NODE and
    MCP_OIDC_PROVIDER (.ci/node-tools.sh exports them), .ci/node-tools.sh's .venv paths, or
    what `pytest -m agents` provisioned in AGENTS_CACHE (provisioned_node_and_provider)."""
    from test_agents import agents_cache

    arch = {"x86_64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(os.uname().machine, "x64")
    nodes = [os.environ.get("MCP_NODE", ""), shutil.which("node") or ""]
    nodes += [str(ROOT / f".venv/node22/node_modules/node-linux-{arch}/bin/node")]
    nodes += [str(agents_cache() / f"node22/node_modules/node-linux-{arch}/bin/node")]
    node = next((n for n in nodes if n and os.access(n, os.X_OK) and node_major(n) >= 22), None)
    places = [
        os.environ.get("MCP_OIDC_PROVIDER", ""),
        str(ROOT / ".venv/oidc-provider/node_modules"),
    ]
    places += [str(agents_cache() / f"oidc-provider-{OIDC_PROVIDER_VERSION}/node_modules")]
    modules = next((m for m in places if m and (Path(m) / "oidc-provider").is_dir()), None)
    return (node, modules) if node and modules else None


def node_major(node: str) -> int:
    try:
        said = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return 0
    found = re.match(r"v(\d+)\.", said.stdout)
    return int(found.group(1)) if found else 0


# One pin, .ci/node-tools.sh's: the version CI installs is the version `pytest -m agents` does.
OIDC_PROVIDER_VERSION = re.search(
    r"^OIDC_PROVIDER_VERSION=(\S+)", (ROOT / ".ci/node-tools.sh").read_text(), re.M
).group(1)


def provisioned_node_and_provider() -> tuple[str, str]:
    """Node >= 22 and oidc-provider for `pytest -m agents`, npm-installed into AGENTS_CACHE
    the first time (as the agents are; Debian's Node 20 will not run oidc-provider 9): the
    npm package node-linux-<arch>@22 is Node itself, so no system install is needed."""
    from test_agents import agents_cache

    found = node_and_provider()
    if found is not None:
        return found
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip("npm not found: the OAuth sign-in tests install Node 22 and oidc-provider")
    root = agents_cache()
    root.mkdir(parents=True, exist_ok=True)
    arch = {"x86_64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(os.uname().machine)
    assert arch, f"no Node 22 package for {os.uname().machine}"
    import fcntl

    with open(root / ".lock", "w") as lock:  # the agents' lock: one npm at a time
        fcntl.flock(lock, fcntl.LOCK_EX)
        node = shutil.which("node")
        if not node or node_major(node) < 22:
            node = str(root / f"node22/node_modules/node-linux-{arch}/bin/node")
            if node_major(node) < 22:
                npm_install(npm, root / "node22", f"node-linux-{arch}@22", None)
        prefix = root / f"oidc-provider-{OIDC_PROVIDER_VERSION}"
        if not (prefix / "node_modules/oidc-provider").is_dir():
            npm_install(npm, prefix, f"oidc-provider@{OIDC_PROVIDER_VERSION}", node)
    found = node_and_provider()
    assert found is not None, "Node 22 or oidc-provider is missing after npm install"
    return found


def npm_install(npm: str, prefix: Path, spec: str, node: str | None) -> None:
    shutil.rmtree(prefix, ignore_errors=True)  # absent, or an install cut short
    env = dict(os.environ)
    if node is not None:  # npm runs package scripts with the node on PATH: the new one
        env["PATH"] = f"{Path(node).parent}{os.pathsep}{env.get('PATH', '')}"
    command = [npm, "install", "--prefix", str(prefix), "--no-save", "--no-audit", "--no-fund"]
    done = subprocess.run(
        [*command, "--loglevel=error", spec], env=env, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, f"npm install {spec} failed:\n{done.stderr[-2000:]}"


INTROSPECTION_SECRET = "introspection-secret-0123456789"


@pytest.fixture(params=["jwt"])
def oidc_provider(request):
    """oidc-provider on 127.0.0.1, running tests/oidc_server.mjs, issuing access tokens in
    the format the param names (jwt, or opaque for introspection); yields its issuer URL."""
    if request.node.get_closest_marker("agents") is not None:  # pytest -m agents: provision
        node, modules = provisioned_node_and_provider()
    elif (found := node_and_provider()) is not None:
        node, modules = found
    else:
        pytest.skip(
            "needs Node >= 22 and oidc-provider: `pytest -m agents` installs them (into "
            "AGENTS_CACHE), as does `source .ci/node-tools.sh` (as .ci/run does)"
        )
    port = free_port()
    env = {"PORT": str(port), "MCP_OIDC_PROVIDER": modules, "OIDC_TOKEN_FORMAT": request.param}
    proc = subprocess.Popen(
        [node, str(ROOT / "tests/oidc_server.mjs")],
        env={**os.environ, **env, "OIDC_INTROSPECTION_SECRET": INTROSPECTION_SECRET},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        line = ""
        deadline = time.monotonic() + 30
        while not line.startswith("ready ") and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line and proc.poll() is not None:
                raise AssertionError("oidc-provider exited")
        assert line.startswith("ready "), line
        threading.Thread(target=proc.stdout.read, daemon=True).start()  # keep its pipe drained
        yield line.split()[1]
    finally:
        proc.terminate()
        proc.wait(10)


class MemoryStorage:
    def __init__(self):
        self.tokens = self.client = None

    async def get_tokens(self):
        return self.tokens

    async def set_tokens(self, tokens):
        self.tokens = tokens

    async def get_client_info(self):
        return self.client

    async def set_client_info(self, client_info):
        self.client = client_info


class HeadlessBrowser:
    """The SDK's redirect and callback handlers without a person: follows the authorization
    URL through oidc-provider's interactions (which log in and consent at once) until it
    redirects to our callback URL, whose code the callback handler returns."""

    def __init__(self, redirect_uri: str):
        self.redirect_uri, self.visited, self.result = redirect_uri, [], None

    async def redirect(self, url: str) -> None:
        import urllib.parse

        import httpx2

        async with httpx2.AsyncClient(follow_redirects=False, timeout=30) as browser:
            for _ in range(20):
                self.visited.append(url.split("?")[0])
                if url.startswith(self.redirect_uri):
                    query = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)
                    self.result = {name: values[0] for name, values in query.items()}
                    return
                response = await browser.get(url)
                assert response.status_code in (302, 303), (response.status_code, response.text)
                url = urllib.parse.urljoin(url, response.headers["location"])
        raise AssertionError(f"no redirect to the callback: {self.visited}")

    async def callback(self):
        from mcp.shared.auth import AuthorizationCodeResult

        assert "code" in self.result, self.result
        return AuthorizationCodeResult(
            code=self.result["code"], state=self.result.get("state"), iss=self.result.get("iss")
        )


def sdk_session(url: str, work, storage=None):
    """Runs `work(client)` in an MCP SDK client that signs in through OAuth."""
    import anyio
    from mcp import Client
    from mcp.client.auth import OAuthClientProvider
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client
    from mcp.shared.auth import OAuthClientMetadata

    redirect_uri = "http://localhost:3030/callback"
    browser = HeadlessBrowser(redirect_uri)
    storage = storage or MemoryStorage()
    auth = OAuthClientProvider(
        server_url=url,
        client_metadata=OAuthClientMetadata(
            client_name="pytest",
            redirect_uris=[redirect_uri],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
        ),
        storage=storage,
        redirect_handler=browser.redirect,
        callback_handler=browser.callback,
    )
    outcome = {}

    async def main():
        with anyio.fail_after(60):
            async with create_mcp_http_client(auth=auth) as http:
                transport = streamable_http_client(url, http_client=http)
                async with Client(transport, mode="legacy") as client:
                    outcome["value"] = await work(client)

    anyio.run(main)
    return outcome["value"], browser, storage


@pytest.mark.parametrize("name", ["127.0.0.1", "localhost"])
def test_the_sdk_signs_in_through_oidc_provider_and_calls_a_tool(
    oidc_provider, protected, fake, name
):
    """Discovery (RFC 9728, then RFC 8414/OIDC), dynamic registration, PKCE, a JWT for our
    resource (RFC 8707), then a tools/call: all through the SDK's OAuthClientProvider, which
    refuses metadata whose resource is not the URL it used: as localhost too (issue 31)."""
    server = protected(oidc_provider, "--debug")
    server.resource = f"http://{name}:{server.port}/mcp"
    fake.enqueue(SEARCHED)

    async def work(client):
        return await client.call_tool("answer", {"query": "When was Python 3.14 released?"})

    result, browser, storage = sdk_session(server.resource, work)
    assert result.is_error is False
    assert result.structured_content["used_search"] is True
    assert f"{oidc_provider}/auth" in browser.visited  # it signed in at the real server
    assert storage.client.client_id  # registered dynamically
    access = storage.tokens.access_token
    claims = jwt.decode(access, options={"verify_signature": False})
    assert claims["aud"] == server.resource
    assert claims["iss"] == oidc_provider
    assert claims["sub"] == "alice"
    assert SCOPE in claims["scope"].split()
    assert access not in server.stderr  # --debug and still no token in the log

    # The same tokens work again without signing in; the server checked each request.
    async def again(client):
        return (await client.list_tools()).tools

    tools, second, _ = sdk_session(server.resource, again, storage)
    assert [tool.name for tool in tools][:1] == ["answer"]
    assert second.visited == []


@pytest.mark.parametrize("oidc_provider", ["opaque"], indirect=True)
def test_opaque_tokens_are_checked_by_introspection(oidc_provider, spawn, fake):
    """RFC 7662: the SDK signs in as before; its token is opaque, so the server asks the
    issuer about it, as its own client with credentials from the environment."""
    config = auth_config(oidc_provider, introspection_url=f"{oidc_provider}/token/introspection")
    env = {"MCP_AUTH_CLIENT_ID": "mcp-server", "MCP_AUTH_CLIENT_SECRET": INTROSPECTION_SECRET}
    server = spawn("--http", "127.0.0.1:0", "--debug", config=config, env=env, upstream=fake)
    server.port = wait_listening(server)
    url = f"http://127.0.0.1:{server.port}/mcp"
    fake.enqueue(SEARCHED)

    async def work(client):
        return await client.call_tool("answer", {"query": "When was Python 3.14 released?"})

    result, _, storage = sdk_session(url, work)
    assert result.is_error is False
    access = storage.tokens.access_token
    assert access.count(".") != 2  # opaque: only the issuer can say what it is
    assert initialize(server.port, access + "x").status == 401  # not active
    assert initialize(server.port, access).status == 200
    assert access not in server.stderr
    assert INTROSPECTION_SECRET not in server.stderr


def test_introspection_needs_client_credentials(tmp_path):
    config = auth_config(
        "https://login.example.com", introspection_url="https://login.example.com/i"
    )
    done = run_config(tmp_path, config, "--http", "127.0.0.1:0")
    assert done.returncode == 2, done.stderr
    assert "MCP_AUTH_CLIENT_SECRET" in done.stderr


def test_show_config_masks_the_introspection_secret(tmp_path):
    done = run_config(
        tmp_path,
        auth_config("https://login.example.com", introspection_url="https://login.example.com/i"),
        "--show-config",
        env={"MCP_AUTH_CLIENT_ID": "mcp-server", "MCP_AUTH_CLIENT_SECRET": INTROSPECTION_SECRET},
    )
    assert done.returncode == 0, done.stderr
    assert INTROSPECTION_SECRET not in done.stdout + done.stderr
    assert '"client_secret": "***"' in done.stdout + done.stderr


# -- the pinned Claude Code signs in headless (pytest -m agents) ---------------------------------


class Terminal:
    """A program on a pseudo-terminal: `claude mcp login` insists on one to read the pasted
    redirect URL. Reads what it shows with the terminal's escape sequences dropped."""

    def __init__(self, command: list, env: dict, cwd: Path):
        import pty

        self.master, slave = pty.openpty()
        self.proc = subprocess.Popen(
            command, stdin=slave, stdout=slave, stderr=slave, env=env, cwd=cwd, close_fds=True
        )
        os.close(slave)
        self.shown = ""

    def wait_for(self, pattern: str, timeout: float = 60.0) -> re.Match:
        import select

        deadline = time.monotonic() + timeout
        while (found := re.search(pattern, self.text())) is None:
            assert time.monotonic() < deadline, f"no {pattern!r} in:\n{self.text()}"
            if select.select([self.master], [], [], 0.2)[0]:
                try:
                    self.shown += os.read(self.master, 65536).decode(errors="replace")
                except OSError:  # the program ended
                    assert re.search(pattern, self.text()), self.text()
        return found

    def text(self) -> str:
        return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r", "", self.shown)

    def type(self, line: str) -> None:
        os.write(self.master, (line + "\r").encode())

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
        os.close(self.master)


def follow_to(url: str, redirect_uri: str) -> str:
    """A browser without a person: follows the sign-in redirects (oidc_server.mjs logs in and
    consents at once) until they reach `redirect_uri`; returns that URL, code and all."""
    import urllib.parse

    import httpx2

    with httpx2.Client(follow_redirects=False, timeout=30) as browser:
        for _ in range(20):
            if url.startswith(redirect_uri):
                return url
            response = browser.get(url)
            assert response.status_code in (302, 303), (response.status_code, response.text)
            url = urllib.parse.urljoin(url, response.headers["location"])
    raise AssertionError(f"no redirect to {redirect_uri}")


def sign_in(command: list, env: dict, home, issuer: str, resource: str, prompt: str, done: str):
    """An agent's `mcp login --no-browser` on a terminal, the test playing the browser: the
    authorization URL it prints (asking for our resource) is followed to its redirect, which
    is typed back where the agent asks for it."""
    login = Terminal(command, env, home)
    try:
        url = login.wait_for(re.escape(issuer) + r"/auth\?[^\s\x1b]+").group(0)
        assert "resource=" + urllib.parse.quote(resource, safe="") in url
        redirect_uri = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)["redirect_uri"][0]
        login.wait_for(prompt)
        login.type(follow_to(url, redirect_uri))
        login.wait_for(done)
    finally:
        login.close()


@pytest.mark.agents
def test_claude_code_signs_in_headless_and_connects(oidc_provider, protected, tmp_path):
    """`claude mcp login NAME --no-browser` prints the authorization URL and reads the redirect
    URL back; in between, this test is the browser. Then `claude mcp list` connects with the
    token it got: discovery, registration, PKCE and the resource, all by Claude Code."""
    from test_agents import CLAUDE_CODE, agent_env, installed

    claude = str(installed(CLAUDE_CODE))
    server = protected(oidc_provider, "--debug")
    env = agent_env(tmp_path, DISABLE_AUTOUPDATER="1", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1")
    env["TERM"] = "xterm"  # the login prompt needs a terminal
    home = Path(env["HOME"])
    add = [claude, "mcp", "add", "--transport", "http", "responses", server.resource]
    done = subprocess.run(add, env=env, cwd=home, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    login = [claude, "mcp", "login", "responses", "--no-browser"]
    sign_in(
        login,
        env,
        home,
        oidc_provider,
        server.resource,
        "paste the redirect URL",
        'Authenticated with "responses"',
    )
    listed = subprocess.run(
        [claude, "mcp", "list"], env=env, cwd=home, capture_output=True, text=True, timeout=120
    )
    assert re.search(r"responses: .*Connected", listed.stdout), listed.stdout + listed.stderr
    assert "POST /mcp -> 200" in server.stderr  # with the token it signed in for


@pytest.mark.agents
def test_codex_signs_in_headless_and_its_token_is_accepted(oidc_provider, protected, tmp_path):
    """`codex mcp login NAME --no-browser` prints the authorization URL and reads the callback
    URL back; the access token it then stores (CODEX_HOME/.credentials.json) opens /mcp."""
    from test_agents import CODEX, agent_env, installed

    codex = str(installed(CODEX))
    server = protected(oidc_provider)
    env = agent_env(tmp_path)
    home = Path(env["HOME"])
    env.update(CODEX_HOME=str(home), TERM="xterm")
    (home / "config.toml").write_text(f'[mcp_servers.responses]\nurl = "{server.resource}"\n')
    login = [codex, "mcp", "login", "responses", "--no-browser"]
    sign_in(
        login,
        env,
        home,
        oidc_provider,
        server.resource,
        "Callback URL",
        "Successfully logged in to MCP server 'responses'",
    )
    stored = json.loads((home / ".credentials.json").read_text())
    (entry,) = [e for e in stored.values() if e.get("server_name") == "responses"]
    claims = jwt.decode(entry["access_token"], options={"verify_signature": False})
    assert claims["aud"] == server.resource and claims["sub"] == "alice"
    response = initialize(server.port, entry["access_token"])
    assert response.status == 200, response.body


# -- --doctor ------------------------------------------------------------------------------------


def test_doctor_says_whether_the_issuers_keys_can_be_fetched(tmp_path, issuer):
    done = run_config(tmp_path, auth_config(issuer.url), "--doctor")
    assert f"server.auth.issuer: 1 signing key(s) from {issuer.url}/jwks" in done.stdout
    down = Issuer()  # never started
    done = run_config(tmp_path, auth_config(down.url), "--doctor")
    assert done.returncode == 1
    assert f"server.auth.issuer: cannot get the signing keys of {down.url}" in done.stdout


# -- our own tokens stay home; introspection is bounded (issue 31) -------------------------------


class Introspector:
    """An RFC 7662 endpoint on 127.0.0.1 that answers after `delay` seconds: a token in
    `answers` gets its answer (a JSON object), any other is inactive. It records what it was
    sent: how many calls, the most at once, and each token's hash (this test's own fake, so
    it may keep them)."""

    def __init__(self, delay: float = 0.2):
        self.delay, self.calls, self.most, self._now = delay, 0, 0, 0
        self.failing = 0  # an HTTP status (400, 500) for tokens not in `answers`; 0: inactive
        self.hashes: list[str] = []
        self.answers: dict[str, dict] = {}
        self._lock = threading.Lock()
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"])).decode()
                token = urllib.parse.parse_qs(body)["token"][0]
                with owner._lock:
                    owner.calls += 1
                    owner._now += 1
                    owner.most = max(owner.most, owner._now)
                    owner.hashes.append(hashlib.sha256(token.encode()).hexdigest())
                time.sleep(owner.delay)  # sleep: the point: the introspector's set slowness
                with owner._lock:
                    owner._now -= 1
                if owner.failing and token not in owner.answers:
                    self.send_error(owner.failing)
                    return
                data = json.dumps(owner.answers.get(token, {"active": False})).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/introspect"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def sent(self, token: str) -> bool:
        return hashlib.sha256(token.encode()).hexdigest() in self.hashes

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def introspector():
    own = Introspector()
    yield own
    own.stop()


def add_user(tmp_path, env: dict, name: str) -> str:
    from conftest import run_cli

    done = run_cli(tmp_path, "--user", "add", name, env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()[-1]


def introspecting(spawn, fake, issuer, introspector, state_env: dict, shared: str):
    config = auth_config(issuer.url, introspection_url=introspector.url)
    env = {
        **state_env,
        "MCP_HTTP_TOKEN": shared,
        "MCP_AUTH_CLIENT_ID": "mcp-server",
        "MCP_AUTH_CLIENT_SECRET": INTROSPECTION_SECRET,
    }
    server = spawn("--http", "127.0.0.1:0", config=config, env=env, upstream=fake)
    server.port = wait_listening(server)
    return server


def test_our_tokens_are_never_introspected_and_a_refusal_is_asked_about_once(
    issuer, introspector, spawn, fake, tmp_path
):
    """A mistyped shared token and a revoked named token are refused here, never posted to
    the issuer; an opaque token the issuer refused is not asked about again at once."""
    state = {"OPENAI_RESPONSES_MCP_STATE": str(tmp_path / "state.sqlite3")}
    shared = "shared-token-0123456789abcdef"
    alice, bob = add_user(tmp_path, state, "alice"), add_user(tmp_path, state, "bob")
    from conftest import run_cli

    assert run_cli(tmp_path, "--user", "revoke", "bob", env=state).returncode == 0
    server = introspecting(spawn, fake, issuer, introspector, state, shared)
    assert initialize(server.port, alice).status == 200
    for ours in (shared[:-1] + "X", shared[:-1], "x" + shared, bob, bob + "x", alice[:-2]):
        assert initialize(server.port, ours).status == 401
        assert not introspector.sent(ours)
    assert introspector.calls == 0
    for _ in range(5):
        assert initialize(server.port, "an-opaque-token-of-the-issuers").status == 401
    assert introspector.calls == 1  # the refusal is kept (by hash)
    # A near miss of the shared token is refused in the same words as the issuer's refusal:
    # the answer tells a guesser nothing about how near they came.
    near, far = initialize(server.port, shared[:-1]), initialize(server.port, "far-" + shared[5:])
    assert (
        why(near) == why(far)
        and near.headers["www-authenticate"] == far.headers["www-authenticate"]
    )
    for secret in (shared, alice, bob, "an-opaque-token-of-the-issuers"):
        assert secret not in server.stderr


def test_a_flood_of_junk_tokens_makes_few_introspection_calls_few_at_once(
    issuer, introspector, spawn, fake, tmp_path
):
    state = {"OPENAI_RESPONSES_MCP_STATE": str(tmp_path / "state.sqlite3")}
    server = introspecting(
        spawn, fake, issuer, introspector, state, "shared-token-0123456789abcdef"
    )
    statuses, lock = [], threading.Lock()

    def junk(n: int) -> None:
        response = initialize(server.port, f"junk-{n}-{os.urandom(8).hex()}")
        with lock:
            statuses.append((response.status, response.headers.get("retry-after")))

    threads = [threading.Thread(target=junk, args=(n,)) for n in range(60)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(statuses) == 60
    assert {status for status, _ in statuses} <= {401, 503}
    assert all(retry for status, retry in statuses if status == 503)
    # 60 before (53 at once); at most the burst, plus what refills during the flood
    assert introspector.calls <= 30, introspector.calls
    assert introspector.most <= 4, introspector.most


@pytest.mark.parametrize("introspection", [False, True])
def test_a_named_token_during_a_state_outage_gets_503_with_oauth_too(
    issuer, introspector, spawn, fake, tmp_path, introspection
):
    """Not 401 invalid_token (which tells a client to throw its credential away), and never
    sent to the issuer: the state cannot say whose it is yet."""
    folder = tmp_path / "state.sqlite3"
    folder.mkdir()  # a folder where the file should be: the state cannot be read
    named = "ormcp_u_" + "N" * 43
    auth = {"introspection_url": introspector.url} if introspection else {}
    env = {
        "OPENAI_RESPONSES_MCP_STATE": str(folder),
        "MCP_AUTH_CLIENT_ID": "mcp-server",
        "MCP_AUTH_CLIENT_SECRET": INTROSPECTION_SECRET,
    }
    server = spawn(
        "--http", "127.0.0.1:0", config=auth_config(issuer.url, **auth), env=env, upstream=fake
    )
    server.port = wait_listening(server)
    # A named token from before the prefix (issue 39) looks like any opaque token: while the
    # users were never read, it cannot be told from the issuer's, so it waits too.
    for token in (named, "pre-prefix-named-token-" + "P" * 20):
        response = initialize(server.port, token)
        assert response.status == 503, response
        assert response.headers["retry-after"]
        assert "state is unavailable" in why(response)
    assert introspector.calls == 0
    assert wait_ready(server, issuer.token(f"http://127.0.0.1:{server.port}/mcp")).status == 200
