"""bench/smoke.py, the live smoke test, proved against the fake Responses API.

The real run needs a real key and makes billed calls, so nothing runs it automatically; these
tests run the script itself, as a user would, with OPENAI_BASE_URL pointing at the fake.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys

from conftest import ROOT, TEST_KEY, base_env
from fake_upstream import Reply

SMOKE = ROOT / "bench" / "smoke.py"
WEATHER = Reply(
    text="Tokyo: sunny, high 10°C ([jma.go.jp](https://www.jma.go.jp/)).",
    searches=[{"query": "Tokyo weather", "sources": [{"type": "url", "url": "https://www.jma.go.jp/"}]}],
    citations=[{"url": "https://www.jma.go.jp/", "title": "JMA"}],
)  # fmt: skip


def run_smoke(tmp_path, fake=None, *args: str, env: dict | None = None, timeout: float = 120):
    extra = {"OPENAI_BASE_URL": fake.base_url} if fake is not None else {}
    return subprocess.run(
        [sys.executable, str(SMOKE), *args],
        capture_output=True,
        text=True,
        env=base_env(tmp_path, **extra, **(env or {})),
        cwd=str(tmp_path),
        timeout=timeout,
    )


def table_rows(stdout: str) -> dict[str, list[str]]:
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("tool "))
    return {line.split()[0]: line.split() for line in lines[start + 1 : start + 4]}


def load_smoke():
    spec = importlib.util.spec_from_file_location("smoke", SMOKE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_smoke_runs_all_three_tools_and_prints_model_citations_latency_and_cost(tmp_path, fake):
    fake.default = WEATHER
    proc = run_smoke(tmp_path, fake)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "initialize: openai-responses-mcp" in proc.stdout
    assert "tools/list: answer, answer_detailed, answer_quick" in proc.stdout
    rows = table_rows(proc.stdout)
    assert list(rows) == ["answer", "answer_detailed", "answer_quick"]
    models = {"answer": "gpt-6.1-terra", "answer_detailed": "gpt-6.2-sol"}
    models["answer_quick"] = "gpt-6-luna"
    for tool, row in rows.items():
        assert row[1] == f"{models[tool]}-2026-01-01"  # the model the upstream reported
        assert row[2] == "1"  # citations
        assert row[3].endswith("s") and float(row[3][:-1]) >= 0  # latency
        assert row[4].startswith("$") and float(row[4][1:]) > 0  # cost from _meta.cost.usd
    assert proc.stdout.rstrip().endswith("smoke: OK, all three tools answered")
    for row in rows.values():
        assert row[5] == "1" and int(row[6]) > 0  # searches, output tokens
    # Side by side with answer, as ratios.
    for tool in ("answer_detailed", "answer_quick"):
        line = next(x for x in proc.stdout.splitlines() if x.startswith(f"{tool} vs answer: "))
        assert re.search(r"\d+\.\d\dx the latency, \d+\.\d\dx the cost$", line), line
    assert sorted(r.body["model"] for r in fake.creates) == sorted(models.values())
    assert all(r.authorized_with(TEST_KEY) for r in fake.requests)
    assert TEST_KEY not in proc.stdout + proc.stderr


def test_smoke_adds_answer_deep_side_by_side_only_when_it_is_turned_on(tmp_path, fake):
    fake.default = WEATHER
    proc = run_smoke(tmp_path, fake, env={"MCP_ANSWER_DEEP": "1"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "answer_deep is on: called too" in proc.stdout
    lines = proc.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("tool "))
    deep = lines[start + 4].split()
    assert deep[0] == "answer_deep" and deep[4].startswith("$")  # its latency and cost too
    assert re.search(r"^answer_deep vs answer: \d+\.\d\dx the latency", proc.stdout, re.M)
    assert proc.stdout.rstrip().endswith("smoke: OK, all four tools answered")
    models = sorted(r.body["model"] for r in fake.creates)
    assert models == ["gpt-6-luna", "gpt-6.1-terra", "gpt-6.2-sol", "o4-mini-deep-research"]


def test_smoke_waits_for_every_answer_however_slow(tmp_path, fake):
    fake.enqueue(WEATHER, Reply(text="Slow.", event_delay=0.5), WEATHER)
    proc = run_smoke(tmp_path, fake)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert len(table_rows(proc.stdout)) == 3
    assert all(r.finished_at is not None for r in fake.wait_for_requests(3))


def test_smoke_asks_the_api_every_time_even_with_the_answer_cache_on(tmp_path, fake):
    """A second run within cache.ttl_s must still reach the API, not the answer cache."""
    fake.default = WEATHER
    for _ in range(2):
        proc = run_smoke(tmp_path, fake, env={"ANSWER_CACHE_TTL_S": "600"})
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "$0.0000" not in proc.stdout
    assert len(fake.requests) == 6
    assert {r.body["model"] for r in fake.requests} == {
        "gpt-6-luna",
        "gpt-6.1-terra",
        "gpt-6.2-sol",
    }


def test_smoke_without_a_key_is_not_run_and_says_so(tmp_path, fake):
    proc = run_smoke(tmp_path, fake, env={"OPENAI_API_KEY": ""})
    assert proc.returncode == 2
    assert "not run: OPENAI_API_KEY is not set" in proc.stdout
    assert fake.requests == []


def test_smoke_fails_naming_the_tool_whose_call_failed(tmp_path, fake):
    fake.default = Reply(status=401)
    proc = run_smoke(tmp_path, fake, env={"OPENAI_MAX_RETRIES": "0"})
    assert proc.returncode == 1
    assert "smoke: FAILED: answer" in proc.stdout
    assert "OPENAI_API_KEY" in proc.stdout  # the server's one-line reason is shown


def test_smoke_fails_when_the_server_cannot_start(tmp_path):
    proc = run_smoke(tmp_path, None, "--command", f"{sys.executable} -c 'import sys; sys.exit(3)'")
    assert proc.returncode == 1
    assert "smoke: FAILED: the server exited (status 3)" in proc.stdout


def test_smoke_cost_is_dollars_when_the_server_reports_them_else_tokens():
    smoke = load_smoke()
    assert smoke.cost_text({"cost": {"usd": 0.01234}, "usage": {"total_tokens": 9}}) == "$0.0123"
    assert smoke.cost_text({"usage": {"total_tokens": 1234}}) == "1234 tokens"
    assert smoke.cost_text({}) == "unknown"


def test_smoke_compares_each_tool_with_answer_by_ratio():
    smoke = load_smoke()
    rows = [
        {"tool": "answer", "latency_s": 4.0, "usd": 0.02},
        {"tool": "answer_detailed", "latency_s": 10.0, "usd": 0.05},
        {"tool": "answer_quick", "latency_s": 2.0, "usd": None},
    ]
    assert smoke.comparisons(rows) == [
        "answer_detailed vs answer: 2.50x the latency, 2.50x the cost",
        "answer_quick vs answer: 0.50x the latency",
    ]


SHORT_SOAK = ("--calls", "40", "--seconds", "20", "--no-abuse")


def test_a_short_soak_runs_against_the_module_as_it_is_built_now():
    """bench/soak.py builds the server's parts itself (Dispatcher, build_engine): a change to
    how they are built must reach it, or .ci/run's soak step is the first to find out."""
    run = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "soak.py"), *SHORT_SOAK],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=str(ROOT),
    )
    assert run.returncode == 0 and run.stdout.rstrip().endswith("soak: OK"), run.stderr[-2000:]
