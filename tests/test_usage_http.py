"""GET /usage on the shared HTTP server: today's and this month's spend from the ledger, as
JSON or as a small HTML page (checked in a real headless Chromium when one is installed)."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from conftest import wait_until
from http_client import open_session, post, request, rpc, wait_listening

TOKEN = "tok-0123456789abcdef-XYZ"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
PRICES = """\
pricing:
  models:
    gpt-6.1-terra: {input: 2, cached_input: 0.5, output: 10}
"""


@pytest.fixture
def served(spawn, fake):
    server = spawn(
        "--http",
        "127.0.0.1:0",
        config=PRICES,
        env={"MCP_HTTP_TOKEN": TOKEN, "ANSWER_CACHE_TTL_S": "600"},
        upstream=fake,
    )
    server.port = wait_listening(server)
    session = open_session(server.port, AUTH)
    for query in ("one", "two", "one"):  # the second "one" is a cache hit
        params = {"name": "answer", "arguments": {"query": query}}
        reply = post(server.port, rpc("tools/call", params, id=query), session, AUTH)
        assert reply.status == 200, reply

    def recorded() -> bool:  # the writer thread adds each row a moment after its reply
        return request(server.port, "GET", "/usage", headers=AUTH).json()["day"]["calls"] == 3

    wait_until(recorded, 20, "the ledger rows")
    return server


def test_usage_needs_the_token(served):
    assert request(served.port, "GET", "/usage").status == 401


def test_usage_answers_json_with_spend_by_model_and_tool(served):
    reply = request(served.port, "GET", "/usage", headers=AUTH)
    assert reply.status == 200
    assert reply.headers["content-type"] == "application/json"
    summary = reply.json()
    day = summary["day"]
    assert day["calls"] == 3
    assert day["cache_hit_rate"] == pytest.approx(1 / 3, abs=1e-4)
    assert day["usd"] > 0
    assert [row["tool"] for row in day["by_tool"]] == ["answer"]
    assert day["by_model"][0]["model"] == "gpt-6.1-terra-2026-01-01"
    assert summary["month"]["usd"] == pytest.approx(day["usd"])
    assert summary["in_flight"] == 0


def test_usage_answers_a_page_without_scripts_to_a_browser(served):
    reply = request(served.port, "GET", "/usage", headers={**AUTH, "Accept": "text/html"})
    assert reply.status == 200
    assert reply.headers["content-type"].startswith("text/html")
    page = reply.body.decode()
    assert "<script" not in page and "http://" not in page and "https://" not in page
    assert "default-src 'none'" in reply.headers["content-security-policy"]
    assert "gpt-6.1-terra-2026-01-01" in page


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(chromium() is None, reason="needs Debian's chromium (.ci/run installs it)")
def test_the_page_renders_in_headless_chromium(spawn, fake, tmp_path):
    # A loopback server needs no token, so the browser fetches /usage itself, with its own
    # Accept header; what is checked is what it renders (its DOM after layout).
    server = spawn(
        "--http", "127.0.0.1:0", config=PRICES, env={"ANSWER_CACHE_TTL_S": "600"}, upstream=fake
    )
    server.port = wait_listening(server)
    session = open_session(server.port)
    for query in ("one", "two", "one"):  # the second "one" is a cache hit
        params = {"name": "answer", "arguments": {"query": query}}
        assert post(server.port, rpc("tools/call", params, id=query), session).status == 200
    summary = lambda: request(server.port, "GET", "/usage").json()  # noqa: E731
    wait_until(lambda: summary()["day"]["calls"] == 3, 20, "the ledger rows")
    result = subprocess.run(
        [
            chromium(),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            # Nothing but our own server: background fetches would be refused on this network.
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--dump-dom",
            f"http://127.0.0.1:{server.port}/usage",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    dom = result.stdout
    assert "<h1>Spend</h1>" in dom
    assert "gpt-6.1-terra-2026-01-01" in dom
    assert "Today by tool" in dom and "This month by model" in dom
    assert "cache hit rate 33.3%" in dom


def test_usage_is_404_when_there_is_no_ledger(spawn, fake):
    server = spawn(
        "--http",
        "127.0.0.1:0",
        config="state: {path: 'off'}\n",
        env={"MCP_HTTP_TOKEN": TOKEN},
        upstream=fake,
    )
    server.port = wait_listening(server)
    reply = request(server.port, "GET", "/usage", headers=AUTH)
    assert reply.status == 404


def test_an_unreadable_ledger_is_said_not_shown_as_nothing_spent(spawn, fake, tmp_path):
    state = tmp_path / "xdg-state" / "openai-responses-mcp" / "state.sqlite3"
    state.parent.mkdir(parents=True)
    state.write_bytes(b"this is not a database" * 100)
    server = spawn("--http", "127.0.0.1:0", env={"MCP_HTTP_TOKEN": TOKEN}, upstream=fake)
    server.port = wait_listening(server)
    reply = request(server.port, "GET", "/usage", headers=AUTH)
    assert reply.status == 200
    summary = reply.json()
    assert summary["warning"].startswith("the usage ledger could not be read")
    assert summary["day"]["usd"] == 0
    page = request(server.port, "GET", "/usage", headers={**AUTH, "Accept": "text/html"})
    assert "the usage ledger could not be read" in page.body.decode()
