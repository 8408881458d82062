"""Introspection's limits are kept per source (issue 39): a flood of junk opaque tokens from
one client spends that client's allowance only, so another client's valid token (never seen
before, so not cached) still gets through; X-Forwarded-For counts only from a proxy listed in
server.http.trusted_proxies; an answer's odd `exp` is read, never a 500. The server is the real
program over --http; the issuer's introspection endpoint is test_oauth's fake, on 127.0.0.1."""

from __future__ import annotations

import http.client
import json
import os
import threading
import time

import pytest
from conftest import wait_until
from http_client import ACCEPT_BOTH, INIT_PARAMS, rpc, wait_listening
from test_oauth import INTROSPECTION_SECRET, SCOPE, Introspector, Issuer, auth_config

import openai_responses_mcp as m

pytest.importorskip("jwt")


def _bindable(address: str) -> bool:
    import socket

    try:
        with socket.socket() as sock:
            sock.bind((address, 0))
        return True
    except OSError:
        return False


# A second client address on this host: all of 127/8 is loopback on Linux; macOS has only
# 127.0.0.1 unless another is aliased.
SECOND_LOOPBACK = pytest.mark.skipif(
    not _bindable("127.0.0.2"), reason="127.0.0.2 is not an address of this host"
)


@pytest.fixture(scope="module")
def issuer():
    own = Issuer().start()
    yield own
    own.stop()


@pytest.fixture(scope="module")
def shared_introspector():
    own = Introspector(delay=0.005)
    yield own
    own.stop()


@pytest.fixture
def introspector(shared_introspector):
    """The module's introspection endpoint, its answers and counts cleared for each test."""
    shared_introspector.calls, shared_introspector.most = 0, 0
    shared_introspector.failing = 0
    shared_introspector.answers.clear()
    shared_introspector.hashes.clear()
    return shared_introspector


def serve(spawn, fake, issuer, introspector, listen="127.0.0.1:0", **http):
    public = "http://127.0.0.1:9" if listen.startswith("[::]") else None  # its tokens' audience
    config = auth_config(issuer.url, public, introspection_url=introspector.url)
    if http:
        config += "  http:\n" + "".join(f"    {k}: {json.dumps(v)}\n" for k, v in http.items())
    env = {"MCP_AUTH_CLIENT_ID": "mcp-server", "MCP_AUTH_CLIENT_SECRET": INTROSPECTION_SECRET}
    server = spawn("--http", listen, config=config, env=env, upstream=fake)
    server.port = wait_listening(server)
    server.resource = f"{public or f'http://127.0.0.1:{server.port}'}/mcp"
    return server


def initialize(port: int, token: str, source: str = "127.0.0.1", forwarded: str | None = None):
    """initialize with a bearer token, on a connection from `source` (any 127.x address is
    this host's loopback), with an X-Forwarded-For if given."""
    headers = {"Content-Type": "application/json", "Accept": ACCEPT_BOTH}
    headers["Authorization"] = f"Bearer {token}"
    if forwarded is not None:
        headers["X-Forwarded-For"] = forwarded
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10, source_address=(source, 0))
    try:
        conn.request("POST", "/mcp", json.dumps(rpc("initialize", INIT_PARAMS)), headers)
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


def valid(introspector, issuer, resource: str, name: str, **claims) -> str:
    """A new opaque token the fake issuer calls active, for user `name`."""
    token = f"opaque-{name}-{os.urandom(8).hex()}"
    answer = {"active": True, "sub": name, "aud": resource, "scope": SCOPE, "iss": issuer.url}
    answer["exp"] = int(time.time()) + 300
    introspector.answers[token] = {**answer, **claims}
    return token


class Flood:
    """Junk tokens from one client, as fast as one thread sends them, until stopped (at most
    `most` requests, so a failure cannot run on)."""

    def __init__(self, port: int, forwarded=lambda n: None, most: int = 4000):
        self.statuses: list[int] = []
        self._stop = threading.Event()

        def run():
            for n in range(most):
                if self._stop.is_set():
                    return
                junk = f"junk-{n}-{os.urandom(8).hex()}"
                self.statuses.append(initialize(port, junk, forwarded=forwarded(n)))

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()

    def refused(self) -> int:
        return self.statuses.count(503)

    def stop(self) -> list[int]:
        self._stop.set()
        self._thread.join(30)
        return self.statuses


@SECOND_LOOPBACK
def test_a_junk_flood_from_one_client_never_starves_anothers_valid_token(
    spawn, fake, issuer, introspector
):
    server = serve(spawn, fake, issuer, introspector)
    flood = Flood(server.port)
    try:
        wait_until(lambda: flood.refused() >= 20, 30, "the flood to spend its own allowance")
        for n in range(5):  # each never seen before: not cached, so introspected now
            token = valid(introspector, issuer, server.resource, f"user{n}")
            assert initialize(server.port, token, source="127.0.0.2") == 200
        assert flood.refused() > 20  # the flood goes on being refused meanwhile
    finally:
        statuses = flood.stop()
    assert set(statuses) <= {401, 503}


def test_behind_a_trusted_proxy_each_forwarded_client_has_its_own_allowance(
    spawn, fake, issuer, introspector
):
    server = serve(spawn, fake, issuer, introspector, trusted_proxies=["127.0.0.1"])
    flood = Flood(server.port, forwarded=lambda n: "10.0.0.1")
    try:
        wait_until(lambda: flood.refused() >= 20, 30, "the flood to spend its own allowance")
        for n in range(3):  # through the same proxy (127.0.0.1), for another client
            token = valid(introspector, issuer, server.resource, f"user{n}")
            assert initialize(server.port, token, forwarded="198.51.100.7, 10.0.0.2") == 200
    finally:
        flood.stop()


def _dual_stack() -> bool:
    import socket

    try:
        with socket.socket(socket.AF_INET6) as sock:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
            sock.bind(("::", 0))
        return True
    except OSError:
        return False


@pytest.mark.skipif(not _dual_stack(), reason="no dual-stack IPv6 socket on this host")
def test_a_dual_stack_listener_trusts_its_proxy_and_reads_forwarded_ports(
    spawn, fake, issuer, introspector
):
    """Listening on [::], the proxy on 127.0.0.1 is the peer ::ffff:127.0.0.1, still the
    127.0.0.1 that trusted_proxies lists; and a proxy that writes the client's port in
    X-Forwarded-For (192.0.2.7:4711, [2001:db8::7]:4711) still tells its clients apart.
    Either one missed puts every client behind the proxy on one allowance (issue 39)."""
    server = serve(spawn, fake, issuer, introspector, "[::]:0", trusted_proxies=["127.0.0.1"])
    flood = Flood(server.port, forwarded=lambda n: f"10.0.0.1:{1024 + n}")
    try:
        wait_until(lambda: flood.refused() >= 20, 30, "the flood to spend its own allowance")
        for n, forwarded in enumerate(["10.0.0.2:5678", "[2001:db8::7]:5678"]):
            token = valid(introspector, issuer, server.resource, f"user{n}")
            assert initialize(server.port, token, forwarded=forwarded) == 200
    finally:
        flood.stop()


def test_an_untrusted_x_forwarded_for_is_ignored_and_the_proxy_named(
    spawn, fake, issuer, introspector
):
    """A client writing a new X-Forwarded-For each time still spends one allowance; the log
    says once which setting would tell clients behind a proxy apart."""
    server = serve(spawn, fake, issuer, introspector)
    flood = Flood(server.port, forwarded=lambda n: f"10.1.{n // 250}.{n % 250}")
    try:
        wait_until(lambda: flood.refused() >= 5, 30, "the flood to spend its allowance")
    finally:
        flood.stop()
    assert server.stderr.count("server.http.trusted_proxies") == 1


def test_tokens_the_issuer_answers_with_an_error_spend_their_clients_allowance(
    spawn, fake, issuer, introspector
):
    """An issuer that answers some junk (say a 60 KB token) with 400 or 500: each such call
    gave its allowance back and was kept nowhere, so one client could have the issuer asked
    without end (and the server say so on stderr each time), where an issuer's rate limit on
    this server's credentials would lock every user out (issue 39)."""
    server = serve(spawn, fake, issuer, introspector)
    introspector.failing = 400
    started, sent = time.monotonic(), 100
    statuses = [initialize(server.port, f"junk-{n}-{os.urandom(4).hex()}") for n in range(sent)]
    elapsed = time.monotonic() - started
    assert set(statuses) == {503}
    allowed = m.INTROSPECTION_BURST + int(elapsed * m.INTROSPECTION_PER_S) + 1
    assert introspector.calls <= allowed < sent
    assert server.stderr.count("introspection endpoint failed") <= 1 + int(elapsed / 10)


@pytest.mark.parametrize(
    ("exp", "status"),
    [(None, 200), ("soon", 200), ([1], 200), ("4102444800", 200), ("1000000000", 401)],
)
def test_an_odd_exp_in_an_introspection_answer_is_read_not_a_500(
    spawn, fake, issuer, introspector, exp, status
):
    server = serve(spawn, fake, issuer, introspector)
    token = valid(introspector, issuer, server.resource, "alice", exp=exp)
    for _ in range(3):
        assert initialize(server.port, token) == status
    assert introspector.calls == 1  # kept (by hash), not asked each time
    assert "internal error" not in server.stderr


# -- the pieces, in-process ----------------------------------------------------------------------


def asking(monkeypatch, answers: dict) -> m.Introspection:
    """An Introspection whose issuer is `answers` (token -> answer), counting the calls."""
    introspection = m.Introspection("http://127.0.0.1:9/i", "id", "secret")
    introspection.asked = []

    def ask(token):
        introspection.asked.append(token)
        return answers.get(token, {"active": False})

    monkeypatch.setattr(introspection, "_ask", ask)
    return introspection


def test_one_sources_junk_leaves_another_sources_allowance_whole(monkeypatch):
    introspection = asking(monkeypatch, {"good": {"active": True}})
    for n in range(m.INTROSPECTION_BURST):
        introspection.claims(f"junk{n}", "192.0.2.1")
    with pytest.raises(m.IntrospectionBusy):
        introspection.claims("junk-more", "192.0.2.1")
    assert introspection.claims("good", "192.0.2.2") == {"active": True}


def test_valid_tokens_give_their_allowance_back(monkeypatch):
    """Many people behind one address (a proxy not trusted) never run it dry themselves."""
    answers = {f"good{n}": {"active": True} for n in range(3 * m.INTROSPECTION_BURST)}
    introspection = asking(monkeypatch, answers)
    for token in answers:
        assert introspection.claims(token, "192.0.2.1")["active"] is True


def test_a_token_known_good_is_asked_about_again_whatever_its_sources_allowance(monkeypatch):
    monkeypatch.setattr(m, "INTROSPECTION_CACHE_S", 0.0)  # the cached answer lapses at once
    introspection = asking(monkeypatch, {"good": {"active": True}})
    assert introspection.claims("good", "192.0.2.1")["active"] is True
    for n in range(m.INTROSPECTION_BURST):
        introspection.claims(f"junk{n}", "192.0.2.1")
    with pytest.raises(m.IntrospectionBusy):
        introspection.claims("junk-more", "192.0.2.1")
    assert introspection.claims("good", "192.0.2.1")["active"] is True
    assert introspection.asked.count("good") == 2


def test_refused_junk_never_crowds_a_valid_answer_out_of_the_cache(monkeypatch):
    """Junk from many sources, each within its allowance, filled the one table of answers
    with refusals (kept 30 s): a valid token's answer was then not kept, and each of its
    requests went to the issuer again."""
    monkeypatch.setattr(m, "INTROSPECTION_CACHE_SIZE", 8)
    introspection = asking(monkeypatch, {"good": {"active": True}})
    for n in range(3 * m.INTROSPECTION_CACHE_SIZE):
        introspection.claims(f"junk{n}", f"10.0.{n}.1")
    for _ in range(3):
        assert introspection.claims("good", "192.0.2.1")["active"] is True
    assert introspection.asked.count("good") == 1
    assert introspection.claims("junk0", "10.0.0.1")["active"] is False  # refusals still kept
    assert introspection.asked.count("junk0") == 1


def test_a_token_no_longer_active_is_no_longer_known_good(monkeypatch):
    """Revoked at the issuer: asked about again, it spends its source's allowance as junk
    does (it kept skipping it for the rest of the hour)."""
    monkeypatch.setattr(m, "INTROSPECTION_CACHE_S", 0.0)
    monkeypatch.setattr(m, "INTROSPECTION_REFUSED_S", 0.0)
    answers = {"good": {"active": True}}
    introspection = asking(monkeypatch, answers)
    assert introspection.claims("good", "192.0.2.1")["active"] is True
    answers["good"] = {"active": False}
    assert introspection.claims("good", "192.0.2.1")["active"] is False
    for n in range(m.INTROSPECTION_BURST):
        introspection.claims(f"junk{n}", "192.0.2.1")
    with pytest.raises(m.IntrospectionBusy):
        introspection.claims("good", "192.0.2.1")


def slow_issuer(monkeypatch):
    """An Introspection whose issuer holds each `slow...` token's call until `release` is set
    (`started` counts the calls begun) and calls only `good` active."""
    introspection = m.Introspection("http://127.0.0.1:9/i", "id", "secret")
    release, started = threading.Event(), threading.Semaphore(0)

    def ask(token):
        if token.startswith("slow"):
            started.release()
            release.wait(10)
        return {"active": token == "good"}

    monkeypatch.setattr(introspection, "_ask", ask)
    return introspection, release, started


def test_a_token_known_good_is_asked_about_while_junk_holds_every_call(monkeypatch):
    """A slow issuer and junk from several sources at once (each within its share) fill the
    calls at once; a token active in the last hour still gets a call, at once."""
    monkeypatch.setattr(m, "INTROSPECTION_CACHE_S", 0.0)
    monkeypatch.setattr(m, "FETCH_TIMEOUT_S", 1.0)  # the wait for a call, before a 503
    introspection, release, started = slow_issuer(monkeypatch)
    assert introspection.claims("good", "192.0.2.9")["active"] is True
    at_once = m.INTROSPECTION_SOURCE_AT_ONCE
    slow = [
        threading.Thread(target=introspection.claims, args=(f"slow{n}", f"10.0.0.{n // at_once}"))
        for n in range(m.INTROSPECTION_CONCURRENCY)
    ]
    for thread in slow:
        thread.start()
    try:
        for _ in slow:
            assert started.acquire(timeout=10)
        assert introspection.claims("good", "192.0.2.9")["active"] is True
    finally:
        release.set()
        for thread in slow:
            thread.join(10)


def test_one_source_holds_at_most_its_share_of_the_calls_at_once(monkeypatch):
    """A slow issuer: one source's unknown tokens past INTROSPECTION_SOURCE_AT_ONCE are
    refused at once (never queued for a slot, holding their connections), and another source
    still gets a slot."""
    introspection, release, started = slow_issuer(monkeypatch)
    slow = [
        threading.Thread(target=introspection.claims, args=(f"slow{n}", "192.0.2.1"))
        for n in range(m.INTROSPECTION_SOURCE_AT_ONCE)
    ]
    for thread in slow:
        thread.start()
    try:
        for _ in slow:
            assert started.acquire(timeout=10)
        with pytest.raises(m.IntrospectionBusy, match="at once"):
            introspection.claims("one-more", "192.0.2.1")
        assert introspection.claims("good", "192.0.2.2")["active"] is True
    finally:
        release.set()
        for thread in slow:
            thread.join(10)
    assert introspection.claims("later", "192.0.2.1") == {"active": False}


def test_the_table_of_sources_is_bounded():
    allowances = m.SourceAllowances(2, 0.0, 100)
    for n in range(1000):
        allowances.take(f"10.0.{n // 256}.{n % 256}")
    assert len(allowances) <= 100


@pytest.mark.parametrize(
    ("peer", "forwarded", "trusted", "source"),
    [
        ("127.0.0.1", "10.0.0.1", [], "127.0.0.1"),  # not a trusted proxy: ignored
        ("127.0.0.1", "10.0.0.1", ["127.0.0.1"], "10.0.0.1"),
        ("127.0.0.1", "6.6.6.6, 10.0.0.1", ["127.0.0.1"], "10.0.0.1"),  # what the proxy saw
        ("127.0.0.1", "10.0.0.1, 10.9.0.1", ["127.0.0.1", "10.9.0.0/16"], "10.0.0.1"),
        ("127.0.0.1", "not-an-address", ["127.0.0.1"], "127.0.0.1"),
        ("192.0.2.9", "10.0.0.1", ["127.0.0.1"], "192.0.2.9"),
        ("2001:db8::1", "", [], "2001:db8::/64"),  # one host's /64 is one source
        ("2001:db8::ffff:1", "", [], "2001:db8::/64"),
        ("::ffff:192.0.2.4", "", [], "192.0.2.4"),
        # What proxies write: a port, brackets, a mapped address; a dual-stack peer.
        ("127.0.0.1", "10.0.0.1:4711", ["127.0.0.1"], "10.0.0.1"),
        ("127.0.0.1", "[2001:db8::7]:4711", ["127.0.0.1"], "2001:db8::/64"),
        ("127.0.0.1", "6.6.6.6, [2001:db8::7]", ["127.0.0.1"], "2001:db8::/64"),
        ("127.0.0.1", " ::ffff:10.0.0.3 ", ["127.0.0.1"], "10.0.0.3"),
        ("::ffff:127.0.0.1", "10.0.0.1", ["127.0.0.1"], "10.0.0.1"),
        ("127.0.0.1", "10.0.0.1", ["::ffff:127.0.0.1"], "10.0.0.1"),
        ("::ffff:192.0.2.9", "10.0.0.1", ["127.0.0.1"], "192.0.2.9"),
    ],
)
def test_client_source(peer, forwarded, trusted, source):
    assert m.client_source(peer, forwarded, m.trusted_networks(trusted)) == source


@pytest.mark.parametrize(
    "entry, wide",
    [
        ("0.0.0.0/0", True), ("::/0", True), ("::ffff:0:0/96", True), ("2000::/3", True),
        ("1.0.0.0/7", True), ("1.0.0.0/8", False), ("203.0.113.0/24", False),
        ("127.0.0.1", False), ("10.0.0.0/8", False), ("fc00::/7", False), ("2001:db8::/16", False),
        ("0.0.0.0/1", True), ("128.0.0.0/1", True), ("::ffff:0:0/97", True), ("240.0.0.0/4", False),
        # 6to4 and NAT64 hold the IPv4 internet: judged by the IPv4 range they hold
        ("2002::/16", True), ("2002::/20", True), ("2002:a00::/24", False),
        ("64:ff9b::/96", True), ("64:ff9b::/64", True), ("64:ff9b::a00:0/104", False),
        ("64:ff9b::cb00:7100/120", False),
    ],
)  # fmt: skip
def test_trusted_proxies_wider_than_anyones_proxies_are_named(entry, wide):
    """A range no operator's proxies fill, with public addresses in it: any client there may
    write X-Forwarded-For (issue 39's limits would be at its mercy). Private ranges are not."""
    networks = m.trusted_networks(["127.0.0.1", entry])
    assert bool(m.too_wide(networks)) is wide
    assert ("lists " in m.too_wide_warning(networks)) is wide


def test_the_whole_internet_is_warned_of_whatever_pythons_is_private_says(monkeypatch):
    """Python 3.10's is_private of a network is its first and last addresses': 0.0.0.0/0
    (0.0.0.0 and 255.255.255.255) was "private" there, and so not warned of."""
    import ipaddress

    def first_and_last(network):
        return network.network_address.is_private and network.broadcast_address.is_private

    monkeypatch.setattr(ipaddress._BaseNetwork, "is_private", property(first_and_last))
    assert ipaddress.ip_network("0.0.0.0/0").is_private  # as on Python 3.10
    for entry in ("0.0.0.0/0", "::ffff:0:0/96", "0.0.0.0/1", "192.0.0.0/2"):
        assert m.too_wide(m.trusted_networks([entry])), entry


def test_the_warning_is_one_line_counting_what_it_does_not_name():
    entries = ["0.0.0.0/1", "128.0.0.0/1", "::/1", "8000::/1", " 10.0.0.0/7 ", "10.0.0.0/8"]
    warning = m.too_wide_warning(m.trusted_networks(entries))
    assert "lists 0.0.0.0/1, 128.0.0.0/1, ::/1 (and 2 more), which" in warning, warning
    assert "\n" not in warning and len(warning) < 300, warning


def test_a_server_trusting_every_address_says_so_once_at_start(spawn, fake, issuer, introspector):
    server = serve(spawn, fake, issuer, introspector, trusted_proxies=["0.0.0.0/0"])
    wait_until(lambda: "holds public addresses" in server.stderr, 10, "the warning")
    assert server.stderr.count("trusted_proxies lists 0.0.0.0/0") == 1, server.stderr


def test_a_bad_trusted_proxy_is_refused_naming_the_key():
    with pytest.raises(m.ConfigError, match=r"server\.http\.trusted_proxies"):
        m.trusted_networks(["10.0.0.0/33"])


def test_a_bad_trusted_proxy_in_the_config_exits_2_naming_the_key(tmp_path):
    from conftest import run_cli

    config = tmp_path / "config.yaml"
    config.write_text("server:\n  http:\n    trusted_proxies: [nginx.local]\n")
    done = run_cli(tmp_path, "--show-config", "--config", str(config))
    assert done.returncode == 2, done.stderr
    assert "server.http.trusted_proxies: 'nginx.local' is not an address" in done.stderr
