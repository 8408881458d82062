"""Upgrades without loss (issue 39). A state is built by the code of each earlier schema version,
taken from the git history (tests/upgrade_builder.py runs that code), on SQLite and PostgreSQL:
calls by each kind of identity, named users with allowances (one revoked), an OAuth subject,
and the response ids each was given. This version then opens it through every entry point (the
server over stdio and HTTP, --user, --usage, --doctor, --upgrade-state), and nothing is lost,
re-keyed or re-attributed. An upgrade that needs the OAuth issuer never runs without it; a
server that meets a store a newer version upgraded writes nothing to it.

The version before this one on SQLite runs in the README's line; the rest are slow (each
earlier version's module is compiled, and each entry point is a process)."""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import PRICES, run_cli, wait_until
from http_client import open_session, post, rpc, wait_listening
from test_oauth import Issuer
from test_users import ask, bearer, failure
from upgrade_builder import ALICE_DAILY, ALICE_MONTHLY, SPEND, TASK_SECRET

import openai_responses_mcp as m

ROOT = Path(__file__).resolve().parent.parent
BUILDER = Path(__file__).with_name("upgrade_builder.py")
CURRENT = m.STATE_SCHEMA_VERSION
PREVIOUS = CURRENT - 1
SUBJECTS_FROM = 4  # named users, and identities on rows, came with version 4
ENTRY_POINTS = ("stdio", "http", "user-list", "usage", "doctor", "upgrade-state")


def schema_commits() -> dict:
    """{version: the main-line commit that brought it}: each commit whose diff changes
    STATE_SCHEMA_VERSION (merges compared with their first parent); version 1, which had no
    version, is the commit before version 2's."""

    def git(*args: str) -> str:
        done = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True)
        return done.stdout if done.returncode == 0 else ""

    changed = ("-m", "-G^STATE_SCHEMA_VERSION = ", "--format=%H")
    log = git("log", "--first-parent", *changed, "--", "openai_responses_mcp.py")
    found = {}
    for commit in log.split():  # newest first: each version keeps its oldest commit
        text = git("show", f"{commit}:openai_responses_mcp.py")
        version = re.search(r"^STATE_SCHEMA_VERSION = (\d+)", text, re.M)
        if version:
            found[int(version[1])] = commit
    if 2 in found:
        found[1] = git("rev-parse", f"{found[2]}^1").strip()
    return found


@pytest.fixture(scope="module")
def commits() -> dict:
    found = schema_commits()
    missing = [v for v in range(1, CURRENT + 1) if v not in found]
    if missing:
        why = f"the git history lacks schema version(s) {missing} (a shallow clone?)"
        if os.environ.get("CI") == "true":  # CI clones whole: a missing version is a bug
            pytest.fail(why)
        pytest.skip(why)
    return found


@pytest.fixture(scope="module")
def issuer():
    own = Issuer().start()
    yield own
    own.stop()


class Store:
    """One copy of a built state: its environment for the program, and SQL on it."""

    def __init__(self, kind: str, where: str):
        self.kind, self.where = kind, where
        key = "OPENAI_RESPONSES_MCP_STATE" + ("_URL" if kind == "postgres" else "")
        self.env = {key: where}

    def execute(self, sql: str, params=()) -> None:
        if self.kind == "sqlite":
            with sqlite3.connect(self.where) as conn:
                conn.execute(sql, params)
            return
        import psycopg

        with psycopg.connect(self.where, autocommit=True) as conn:
            conn.execute(sql.replace("?", "%s"), params)

    def query(self, sql: str, params=()) -> list:
        if self.kind == "sqlite":
            with sqlite3.connect(self.where) as conn:
                return conn.execute(sql, params).fetchall()
        import psycopg

        with psycopg.connect(self.where, autocommit=True) as conn:
            return conn.execute(sql.replace("?", "%s"), params).fetchall()


class Built:
    """A state an earlier version's code built; copies of it for each entry point."""

    def __init__(self, kind: str, version: int, where: str, tokens: dict, cluster=None):
        self.kind, self.version, self.where = kind, version, where
        self.tokens, self.cluster = tokens, cluster

    def copy(self, folder: Path) -> Store:
        if self.kind == "sqlite":
            folder.mkdir(parents=True, exist_ok=True)
            shutil.copy(self.where, folder / "state.sqlite3")
            return Store("sqlite", str(folder / "state.sqlite3"))
        import psycopg

        name = f"c{os.getpid()}_{time.monotonic_ns()}"
        template = self.where.rsplit("/", 1)[1]
        with psycopg.connect(self.cluster.url(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name} TEMPLATE {template}")
        return Store("postgres", self.cluster.url(name))


def old_env(home: Path) -> dict:
    """The environment an earlier version's code runs in: its own home, and what Python needs
    to start (SYSTEMROOT on Windows)."""
    kept = {name: os.environ[name] for name in ("PATH", "SYSTEMROOT") if name in os.environ}
    return {**kept, "HOME": str(home), "USERPROFILE": str(home)}


def run_old(old_dir: Path, spec: dict, home: Path) -> dict:
    """Runs the builder with an earlier version's module: its JSON output."""
    env = {
        **old_env(home),
        "XDG_STATE_HOME": str(home / "state"),
        "XDG_CONFIG_HOME": str(home / "config"),
    }
    done = subprocess.run(
        [sys.executable, str(BUILDER), str(old_dir), json.dumps(spec)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1]) if done.stdout.strip() else {}


@pytest.fixture(scope="module")
def build(commits, issuer, tmp_path_factory, request):
    """build(kind, version): the state that version's code built (made once per module)."""
    made: dict = {}

    def old_module(version: int) -> Path:
        folder = tmp_path_factory.mktemp(f"schema{version}")
        text = subprocess.run(
            ["git", "-C", str(ROOT), "show", f"{commits[version]}:openai_responses_mcp.py"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        (folder / "openai_responses_mcp.py").write_text(text, encoding="utf-8")
        return folder

    def get(kind: str, version: int) -> Built:
        if (kind, version) not in made:
            folder = old_module(version)
            spec = {"version": version, "issuer": issuer.url}
            cluster = None
            if kind == "sqlite":
                where = str(folder / "state.sqlite3")
                spec["path"] = where
            else:
                cluster = request.getfixturevalue("postgres")
                where = spec["url"] = cluster.fresh_database()
            out = run_old(folder, spec, folder)
            made[kind, version] = Built(kind, version, where, out.get("tokens", {}), cluster)
            made[kind, version].tasks = out.get("tasks", {})
            made[kind, version].folder = folder
        return made[kind, version]

    get.module = old_module
    return get


# -- What must hold after the upgrade ---------------------------------------------------------


def expected_spend(version: int, issuer_url: str) -> dict:
    """{identity: dollars} as this version files them."""
    if version < SUBJECTS_FROM:
        return {"": SPEND["local"]}  # rows from before users have no identity
    carol = m.Identity.oauth(issuer_url, "carol").key
    return {(carol if who == "carol" else who): usd for who, usd in SPEND.items()}


def check_store(store: Store, version: int, issuer_url: str) -> None:
    """Nothing lost, re-keyed or re-attributed."""
    assert store.query("SELECT version FROM schema_version") == [(CURRENT,)]
    spend = expected_spend(version, issuer_url)
    # (the entry point's own calls are refused: rows of $0 beside them)
    ok = "SUM(CASE WHEN outcome = 'ok' THEN 1 ELSE 0 END)"
    rows = store.query(f"SELECT user_name, SUM(usd), {ok} FROM usage GROUP BY user_name")
    found = {name: (usd, calls) for name, usd, calls in rows if (usd, calls) != (0, 0)}
    assert found == {name: (usd, 1) for name, usd in spend.items()}
    assert store.query("SELECT SUM(usd) FROM usage_daily") == [(sum(spend.values()),)]
    unkeyed = "SELECT COUNT(*) FROM usage WHERE user_name IN ('carol', 'oauth:#carol')"
    assert store.query(unkeyed) == [(0,)]
    if version < SUBJECTS_FROM:
        assert store.query("SELECT COUNT(*) FROM users") == [(0,)]
        return
    by_user = store.query("SELECT user_name, SUM(usd) FROM usage_by_user GROUP BY user_name")
    assert dict(by_user) == spend
    users = store.query(
        "SELECT name, daily_usd, monthly_usd, revoked_at IS NULL FROM users ORDER BY name"
    )
    assert users == [("alice", ALICE_DAILY, ALICE_MONTHLY, True), ("bob", None, None, False)]
    owners = store.query("SELECT response_id, user_name FROM response_owners")
    assert sorted(owners) == sorted((f"resp_{name.rpartition('#')[2]}", name) for name in spend)


def config_of(tmp_path: Path, issuer_url: str | None, budget: str = "") -> list:
    """--config with the --http server's settings: the OAuth issuer (None: none)."""
    text = PRICES + "policy:\n  timezone: UTC\n"
    if issuer_url:
        text += f"server:\n  auth:\n    issuer: {json.dumps(issuer_url)}\n"
    text += f"budget:\n{budget}" if budget else ""
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / f"config-{time.monotonic_ns()}.yaml"
    path.write_text(text, encoding="utf-8")
    return ["--config", str(path)]


# -- Each entry point: opens the store as an operator would, and shows what it read -----------


def open_with(entry: str, built: Built, store: Store, tmp_path: Path, issuer, spawn, fake):
    version, url = built.version, issuer.url
    total = sum(expected_spend(version, url).values())
    env = {**store.env, "XDG_STATE_HOME": str(tmp_path / "home")}
    if entry in ("user-list", "usage", "doctor", "upgrade-state"):
        args = {
            "user-list": ("--user", "list", "--json"),
            "usage": ("--usage", "--json", "--since", "2000-01-01"),
            "doctor": ("--doctor",),
            "upgrade-state": ("--upgrade-state",),
        }[entry]
        env["OPENAI_BASE_URL"] = fake.base_url
        done = run_cli(tmp_path, *config_of(tmp_path, url), *args, env=env, timeout=60)
        if entry == "doctor":
            assert f"state: schema {CURRENT}" in done.stdout, done.stdout + done.stderr
            return
        assert done.returncode == 0, done.stderr
        if entry == "usage":
            report = json.loads(done.stdout)
            assert report["total"]["usd"] == pytest.approx(total)
        elif entry == "user-list":
            names = [u["name"] for u in json.loads(done.stdout)["users"]]
            assert names == ([] if version < SUBJECTS_FROM else ["alice", "bob"])
        else:
            assert f"schema {version}, now schema {CURRENT}" in done.stdout, done.stdout
        return
    if entry == "stdio":  # a budget just under the day's spend: all of it counts
        budget = f"  daily_usd: {total - 0.01}\n"
        server = spawn("--stdio", "--config", config_of(tmp_path, url, budget)[1], env=env)
        server.initialize()
        reply = server.call("answer", {"query": "q"}, timeout=30)
        assert f"({m.usd(total)} spent today" in failure(reply), reply
        return
    # HTTP, with OAuth from the issuer: each user's allowance holds their spend from before,
    # and the response ids they were given are still theirs.
    config = config_of(tmp_path, url, "  per_user_daily_usd: 1.0\n")[1]
    server = spawn("--http", "127.0.0.1:0", "--config", config, env=env, upstream=fake)
    port = wait_listening(server)
    resource = f"http://127.0.0.1:{port}/mcp"
    carol = bearer(issuer.token(resource, sub="carol"))
    wait_until(lambda: post(port, rpc("ping", {}), headers=carol).status != 503, 20, "keys")
    asking = [(carol, "resp_carol", f"{m.Identity.oauth(url, 'carol').key}'s daily allowance")]
    if version >= SUBJECTS_FROM:
        alice = bearer(built.tokens["alice"])
        asking.append((alice, "resp_alice", "alice's daily allowance"))
    for auth, response_id, words in asking:
        session = open_session(port, auth)
        message = failure(ask(port, auth, session, {"query": "q"} | prev(response_id)))
        if version < SUBJECTS_FROM:  # no one was given an id then
            assert "previous_response_id not found" in message, message
        else:
            assert f"{words} of " in message and " reached (" in message, message


def prev(response_id: str) -> dict:
    return {"previous_response_id": response_id}


def upgraded_through_every_entry_point(kind, version, build, issuer, spawn, fake, tmp_path):
    built = build(kind, version)
    for entry in ENTRY_POINTS:
        store = built.copy(tmp_path / entry)
        open_with(entry, built, store, tmp_path / entry, issuer, spawn, fake)
        check_store(store, version, issuer.url)
    check_tasks(built, store)


def check_tasks(built: Built, store: Store) -> None:
    """Task ids are signed, not stored: one the earlier version signed opens here, and names
    the user the upgraded store files that user's rows under (an OAuth subject's names its
    bare `sub`: docs/upgrade.md says to let tasks end before the upgrade to 7)."""
    stored = {name for (name,) in store.query("SELECT DISTINCT user_name FROM usage")}
    for who, task_id in built.tasks.items():
        fields = m.open_task_id(TASK_SECRET, task_id)
        assert (fields["r"], fields["k"]) == (f"resp_{who}", "h")
        if who != "carol" and built.version >= SUBJECTS_FROM:
            assert fields["u"] == who and who in stored, (who, fields)


def test_the_previous_schema_on_sqlite_upgrades_through_every_entry_point(
    build, issuer, spawn, fake, tmp_path
):
    upgraded_through_every_entry_point("sqlite", PREVIOUS, build, issuer, spawn, fake, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
@pytest.mark.parametrize("version", range(1, CURRENT + 1))
def test_every_earlier_schema_upgrades_through_every_entry_point(
    kind, version, build, issuer, spawn, fake, tmp_path
):
    if kind == "sqlite" and version == PREVIOUS:
        pytest.skip("the README's line runs it (above)")
    if kind == "postgres" and version == 1:
        pytest.skip("version 1 had no PostgreSQL backend")
    upgraded_through_every_entry_point(kind, version, build, issuer, spawn, fake, tmp_path)


# -- An upgrade that needs configuration never runs without it ------------------------------


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.slow)])
def test_an_upgrade_that_needs_the_issuer_is_refused_without_it(
    kind, build, issuer, spawn, fake, tmp_path
):
    """The step to 7 files OAuth subjects under their issuer. Run where the server's config is
    not (--user list or --usage as docs/teams.md says, a stdio server on the same file), it
    made every subject oauth:#<sub> for good; now each entry point changes nothing and says,
    on one line, what to run."""
    store = build(kind, PREVIOUS).copy(tmp_path / "store")
    env = {**store.env, "XDG_STATE_HOME": str(tmp_path / "home"), "OPENAI_BASE_URL": fake.base_url}
    plain = config_of(tmp_path, None)
    for args in (("--user", "list"), ("--usage",), ("--upgrade-state",)):
        done = run_cli(tmp_path, *plain, *args, env=env)
        assert done.returncode == 1, done.stderr
        (line,) = done.stderr.splitlines()
        assert "--config FILE --upgrade-state" in line and "server.auth.issuer" in line, line
        assert "nothing was changed" in line and "delete" not in line, line
    doctor = run_cli(tmp_path, *plain, "--doctor", env=env)
    assert doctor.returncode == 1
    assert "--upgrade-state" in next(x for x in doctor.stdout.splitlines() if "state:" in x)
    budget = config_of(tmp_path, None, "  daily_usd: 100\n")
    server = spawn("--stdio", *budget, env=env, upstream=fake)
    server.initialize()
    message = failure(server.call("answer", {"query": "q"}, timeout=30))
    assert "the state" in message and "--upgrade-state" in message, message
    assert not [r for r in fake.requests if r.path == "/v1/responses"]
    server.close_stdin()
    server.wait()
    assert store.query("SELECT version FROM schema_version") == [(PREVIOUS,)]
    assert store.query("SELECT COUNT(*) FROM usage WHERE user_name = 'carol'") == [(1,)]
    assert store.query("SELECT COUNT(*) FROM usage WHERE user_name LIKE 'oauth:%%'") == [(0,)]
    # With the --http server's config, the upgrade runs, whole.
    done = run_cli(tmp_path, *config_of(tmp_path, issuer.url), "--upgrade-state", env=env)
    assert done.returncode == 0, done.stderr
    check_store(store, PREVIOUS, issuer.url)


def test_without_the_issuer_a_store_with_subjects_stays_as_it_was(tmp_path):
    """The same refusal on a store made here by hand (no git history needed: the mutation
    check's copy of the tree has none)."""
    store = Store("sqlite", str(tmp_path / "state.sqlite3"))
    with sqlite3.connect(store.where) as conn:
        for statement in m._schema(False):
            conn.execute(statement)
        conn.execute("INSERT INTO schema_version (version) VALUES (?)", (PREVIOUS,))
        conn.execute(
            "INSERT INTO usage (at, day, tool, model, outcome, usd, user_name) "
            "VALUES (0, '2026-11-26', 'answer', 'm', 'ok', 1.0, 'carol')"
        )
    done = run_cli(tmp_path, "--user", "list", env=store.env)
    assert done.returncode == 1 and "--upgrade-state" in done.stderr, done.stderr
    assert store.query("SELECT version FROM schema_version") == [(PREVIOUS,)]
    assert store.query("SELECT user_name FROM usage") == [("carol",)]


BUGGY = 7  # version 7 as first released upgraded without the issuer (issue 39)


def test_subjects_an_earlier_upgrade_left_without_their_issuer_are_reported_and_filed(
    build, commits, issuer, fake, tmp_path
):
    """A store version 7's first release upgraded without the issuer (its subjects became
    oauth:#<sub>, so their allowances and conversations no longer found them): --doctor says
    so, and --upgrade-state with the --http server's config files them under its issuer."""
    store = build("sqlite", BUGGY - 1).copy(tmp_path / "store")
    buggy = build.module(BUGGY)
    run_old(buggy, {"version": BUGGY, "path": store.where, "open_only": True}, buggy)
    assert store.query("SELECT COUNT(*) FROM usage WHERE user_name = 'oauth:#carol'") == [(1,)]
    env = {**store.env, "XDG_STATE_HOME": str(tmp_path / "home"), "OPENAI_BASE_URL": fake.base_url}
    doctor = run_cli(tmp_path, *config_of(tmp_path, None), "--doctor", env=env)
    (line,) = [x for x in doctor.stdout.splitlines() if "oauth:#<sub>" in x]
    assert "allowances" in line and "--upgrade-state" in doctor.stdout, doctor.stdout
    done = run_cli(tmp_path, *config_of(tmp_path, issuer.url), "--upgrade-state", env=env)
    assert done.returncode == 0, done.stderr
    assert "1 OAuth subject(s) filed without their issuer (oauth:#<sub>" in done.stdout
    assert f"are now filed under {issuer.url}" in done.stdout, done.stdout
    check_store(store, BUGGY - 1, issuer.url)
    doctor = run_cli(tmp_path, *config_of(tmp_path, None), "--doctor", env=env)
    assert f"state: schema {CURRENT}" in doctor.stdout and "oauth:#" not in doctor.stdout


# -- An older server that meets a newer schema writes nothing ---------------------------------


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_a_server_that_meets_a_newer_schema_writes_nothing_and_says_so(
    kind, spawn, fake, tmp_path, request
):
    """This version is the older host of the next upgrade: once another host has upgraded the
    store, every transaction of this one finds it newer, and refuses (its rows would be of the
    old shape). Calls then get a tool error (stdio, and HTTP calls already admitted), and new
    HTTP calls 503 with Retry-After; not one row is written."""
    if kind == "sqlite":
        store = Store("sqlite", str(tmp_path / "state.sqlite3"))
    else:
        store = Store("postgres", request.getfixturevalue("postgres").fresh_database())
    env = {**store.env, "XDG_STATE_HOME": str(tmp_path / "home")}
    budget = config_of(tmp_path, None, "  daily_usd: 100\n")[1]
    stdio = spawn("--stdio", "--config", budget, env=env, upstream=fake)
    stdio.initialize()
    # With a token the server reads no users in the background (it does every 2 s without
    # one): such a read after the upgrade below would have "four" refused at admission.
    token = "upgrade-test-token-0123456789"
    http_env = {**env, "MCP_HTTP_TOKEN": token}
    http = spawn("--http", "127.0.0.1:0", "--config", budget, env=http_env, upstream=fake)
    port, auth = wait_listening(http), bearer(token)
    session = open_session(port, auth)
    assert "result" in stdio.call("answer", {"query": "one"}, timeout=30)
    assert "result" in ask(port, auth, session, {"query": "two"})
    # Each call writes its row and its response's owner, in batches as they come: the upgrade
    # lands after the last, else that batch finds it first and "four" is refused with a 503.
    counted = "SELECT (SELECT COUNT(*) FROM usage), (SELECT COUNT(*) FROM response_owners)"
    wait_until(lambda: store.query(counted) == [(2, 2)], 20, "both calls' writes")
    store.execute("UPDATE schema_version SET version = ?", (CURRENT + 1,))
    newer = f"upgraded to schema {CURRENT + 1} by a newer"
    for message in (
        failure(ask(port, auth, session, {"query": "four"})),
        failure(stdio.call("answer", {"query": "three"}, timeout=30)),
    ):
        assert "the state" in message and newer in message, message
    params = {"name": "answer", "arguments": {"query": "five"}}
    refused = post(port, rpc("tools/call", params, id=5), session, auth)
    assert refused.status == 503 and refused.headers.get("retry-after"), refused
    assert newer in refused.json()["error"]["message"]
    assert len([r for r in fake.requests if r.path == "/v1/responses"]) == 2
    stdio.close_stdin()
    stdio.wait()
    http.stop()
    assert store.query("SELECT COUNT(*) FROM usage") == [(2,)]


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.slow)])
def test_rows_a_host_of_the_previous_release_wrote_after_the_upgrade_are_refiled(
    kind, build, issuer, fake, tmp_path
):
    """A rolling upgrade: a host of the previous release, connected before another host
    upgraded the store, goes on writing subjects under their bare name (its schema check was
    at connect). --doctor reports them; --upgrade-state files them under the issuer, so the
    subject's allowance counts that spend again."""
    built = build(kind, PREVIOUS)
    store = built.copy(tmp_path / "store")
    spec = {"version": PREVIOUS, "rolling": True, "issuer": None}
    spec.update({"url": store.where} if kind == "postgres" else {"path": store.where})
    old = subprocess.Popen(
        [sys.executable, str(BUILDER), str(built.folder), json.dumps(spec)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=old_env(tmp_path),
    )
    try:
        assert old.stdout.readline().strip() == "ready"
        env = {**store.env, "XDG_STATE_HOME": str(tmp_path / "home")}
        env["OPENAI_BASE_URL"] = fake.base_url
        server_config = config_of(tmp_path, issuer.url)
        upgraded = run_cli(tmp_path, *server_config, "--upgrade-state", env=env)
        assert upgraded.returncode == 0, upgraded.stderr
        old.stdin.write("upgraded\n")
        old.stdin.flush()
        assert json.loads(old.stdout.readline()) == {"unwritten": 0}
    finally:
        old.stdin.close()
        old.wait(30)
    assert store.query("SELECT COUNT(*) FROM usage WHERE user_name = 'carol'") == [(1,)]
    doctor = run_cli(tmp_path, *config_of(tmp_path, None), "--doctor", env=env)
    (line,) = [x for x in doctor.stdout.splitlines() if "filed without their issuer" in x]
    assert "1 OAuth subject(s)" in line and "bare name" in line, line
    done = run_cli(tmp_path, *server_config, "--upgrade-state", env=env)
    assert done.returncode == 0 and "1 OAuth subject(s) filed" in done.stdout, done.stdout
    carol = m.Identity.oauth(issuer.url, "carol").key
    spent = store.query(
        "SELECT SUM(usd), SUM(calls) FROM usage_by_user WHERE user_name = ?", (carol,)
    )
    assert spent == [(2 * SPEND["carol"], 2)]
    assert store.query("SELECT COUNT(*) FROM usage WHERE user_name = 'carol'") == [(0,)]


# -- A store whose version row is damaged: refused, never guessed -----------------------------


@pytest.mark.parametrize("damage", ["'abc'", "-1", None])
def test_a_store_whose_version_is_missing_or_not_a_version_is_refused_and_left_alone(
    damage, spawn, fake, tmp_path
):
    """A version row that is gone, negative or not a number (a hand edit, a bad restore): taken
    for version 1, every step ran again (the day's totals summed twice, or a failure that said
    to delete the file); a word, a traceback. Now each entry point refuses on one line saying
    which table to set back, a budgeted call is refused before it spends, and nothing moves."""
    store = Store("sqlite", str(tmp_path / "state.sqlite3"))
    env = {**store.env, "XDG_STATE_HOME": str(tmp_path / "home"), "OPENAI_BASE_URL": fake.base_url}
    assert run_cli(tmp_path, "--upgrade-state", env=env).returncode == 0
    store.execute(
        "INSERT INTO usage (at, day, tool, model, outcome, usd, user_name, writer_schema) "
        "VALUES (0, '2026-11-26', 'answer', 'm', 'ok', 1.0, 'local', ?)",
        (CURRENT,),
    )
    store.execute(
        "INSERT INTO usage_daily (day, tool, model, usd, calls) "
        "VALUES ('2026-11-26', 'answer', 'm', 1.0, 1)"
    )
    if damage is None:
        store.execute("DELETE FROM schema_version")
    else:
        store.execute(f"UPDATE schema_version SET version = {damage}")
    before = store.query("SELECT * FROM schema_version")
    for args in (("--upgrade-state",), ("--usage",), ("--user", "list")):
        done = run_cli(tmp_path, *args, env=env)
        assert done.returncode == 1, done.stderr
        (line,) = done.stderr.splitlines()
        assert "schema_version" in line and "writer_schema" in line, line
        assert "delete" not in line, line
    budget = config_of(tmp_path, None, "  daily_usd: 100\n")
    server = spawn("--stdio", *budget, env=env, upstream=fake)
    server.initialize()
    message = failure(server.call("answer", {"query": "q"}, timeout=30))
    assert "schema_version" in message, message
    assert not [r for r in fake.requests if r.path == "/v1/responses"]
    server.close_stdin()
    server.wait()
    assert store.query("SELECT * FROM schema_version") == before
    assert store.query("SELECT SUM(usd), SUM(calls) FROM usage_daily") == [(1.0, 1)]


# -- A team's store: its upgrade finishes, whatever the number of subjects --------------------


def subjects_store(store: Store, subjects: int, version: int = 6) -> None:
    """A store of `version` made by hand: `subjects` OAuth subjects under their bare sub (as
    before 7), each with a call, a day's sum, a response id and a reservation; the named user
    alice with the same."""
    postgres = store.kind == "postgres"
    for statement in m._schema(postgres):
        store.execute(statement)
    store.execute("INSERT INTO schema_version (version) VALUES (?)", (version,))
    store.execute("INSERT INTO users (name, token_sha256, created_at) VALUES ('alice', 'x', 0)")
    for name in ("alice", *(f"sub{n}" for n in range(subjects))):
        store.execute(
            "INSERT INTO usage (at, day, tool, model, outcome, usd, user_name, writer_schema) "
            "VALUES (0, '2026-11-26', 'answer', 'm', 'ok', 0.5, ?, 6)",
            (name,),
        )
        store.execute(
            "INSERT INTO usage_by_user (day, user_name, calls, usd) "
            "VALUES ('2026-11-26', ?, 1, 0.5)",
            (name,),
        )
        store.execute(
            "INSERT INTO response_owners (response_id, user_name, at) VALUES (?, ?, 0)",
            (f"resp_{name}", name),
        )
        store.execute(
            "INSERT INTO reservations (id, at, expires_at, usd, user_name) "
            "VALUES (?, 0, 1, 0.5, ?)",
            (f"r_{name}", name),
        )


def filed_as_expected(store: Store, subjects: int, issuer_url: str) -> None:
    expected = {"alice", *(m.Identity.oauth(issuer_url, f"sub{n}").key for n in range(subjects))}
    for table in m._IDENTITY_COLUMNS:
        names = store.query(f"SELECT user_name FROM {table}")
        assert sorted(n for (n,) in names) == sorted(expected), table
    assert store.query("SELECT SUM(usd), SUM(calls) FROM usage_by_user") == [
        (0.5 * (subjects + 1), subjects + 1)
    ]
    owners = store.query("SELECT response_id, user_name FROM response_owners")
    assert all(rid == f"resp_{name.rpartition('#')[2]}" for rid, name in owners)


def test_an_upgrade_makes_as_many_statements_for_many_subjects_as_for_a_few(tmp_path):
    """The step to 7 moved each subject's rows with statements of its own: each read the whole
    ledger, so a team's store (thousands of subjects, a ledger of 90 days) took minutes on
    SQLite, holding the file's write lock, and never finished on PostgreSQL (it was cut off
    after 5 s). Now it makes one statement per table, however many subjects there are."""

    def statements(subjects: int) -> int:
        store = Store("sqlite", str(tmp_path / f"state{subjects}.sqlite3"))
        subjects_store(store, subjects)
        backend = m._SqliteBackend(store.where)
        backend.oauth_issuer = "https://idp.example/"
        conn = backend.connect()
        made: list = []
        writes = ("UPDATE", "INSERT", "DELETE")
        conn.set_trace_callback(lambda s: made.append(s) if s.startswith(writes) else None)
        try:
            m._ensure_schema(backend, conn)
        finally:
            conn.close()
        filed_as_expected(store, subjects, "https://idp.example")
        return len(made)

    assert statements(30) == statements(2)


def test_an_upgrade_longer_than_a_check_finishes_on_postgresql(postgres, tmp_path):
    """An upgrade was bounded as a budget check is (2 s a statement, 5 s in all), so a large
    store's never finished and every host went on refusing. Here moving the ledger's rows
    takes about 6 s (a trigger that waits 0.1 s a row stands for a large ledger); the upgrade
    finishes, whole."""
    store = Store("postgres", postgres.fresh_database())
    subjects = 60
    subjects_store(store, subjects)
    store.execute(
        "CREATE FUNCTION slow_row() RETURNS trigger LANGUAGE plpgsql AS "
        "$$ BEGIN PERFORM pg_sleep(0.1); RETURN NEW; END $$"  # sleep: a slow row, in SQL
    )
    store.execute(
        "CREATE TRIGGER slow BEFORE UPDATE ON usage FOR EACH ROW EXECUTE FUNCTION slow_row()"
    )
    issuer_url = "https://idp.example"
    env = {**store.env, "XDG_STATE_HOME": str(tmp_path / "home")}
    done = run_cli(
        tmp_path, *config_of(tmp_path, issuer_url), "--upgrade-state", env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "schema 6, now schema 7" in done.stdout, done.stdout
    filed_as_expected(store, subjects, issuer_url)


def test_subjects_an_upgrade_filed_under_a_mistyped_issuer_are_named_and_filed_again(
    tmp_path,
):
    """An upgrade with a typo in server.auth.issuer filed every subject under it for good: the
    right config's --upgrade-state found nothing to do, and --doctor said nothing. --doctor now
    names the other issuer and the command; --from-issuer files its subjects under this one,
    folding into what they spent since, and leaves the named user alice (whose name a subject
    of the mistyped issuer also has) as she was."""
    store = Store("sqlite", str(tmp_path / "state.sqlite3"))
    subjects_store(store, 2)
    env = {**store.env, "XDG_STATE_HOME": str(tmp_path / "home")}
    typo, right = "https://idp.exmaple", "https://idp.example"
    done = run_cli(tmp_path, *config_of(tmp_path, typo + "/"), "--upgrade-state", env=env)
    assert done.returncode == 0, done.stderr
    # Since then, with the right issuer: sub0 spent again; a subject of the typo named alice.
    store.execute(
        "INSERT INTO usage_by_user (day, user_name, calls, usd) VALUES ('2026-11-26', ?, 1, 2)",
        (m.Identity.oauth(right, "sub0").key,),
    )
    store.execute(
        "INSERT INTO usage (at, day, tool, model, outcome, usd, user_name) "
        "VALUES (0, '2026-11-26', 'answer', 'm', 'ok', 0.25, ?)",
        (m.Identity.oauth(typo, "alice").key,),
    )
    longer = m.Identity.oauth(
        typo + ".org", "sub1"
    ).key  # another issuer, its URL the typo's and more
    store.execute(
        "INSERT INTO usage (at, day, tool, model, outcome, usd, user_name) "
        "VALUES (0, '2026-11-26', 'answer', 'm', 'ok', 0.125, ?)",
        (longer,),
    )
    again = run_cli(tmp_path, *config_of(tmp_path, right), "--upgrade-state", env=env)
    assert again.returncode == 0 and "OAuth" not in again.stdout, again.stdout
    doctor = run_cli(tmp_path, *config_of(tmp_path, right), "--doctor", env=env)
    (line,) = [x for x in doctor.stdout.splitlines() if "another issuer" in x]
    assert f"{typo} (3)" in line and right in line, line
    assert f"--upgrade-state --from-issuer {typo} " in doctor.stdout, doctor.stdout
    fixed = run_cli(
        tmp_path, *config_of(tmp_path, right), "--upgrade-state", "--from-issuer", typo, env=env
    )
    assert fixed.returncode == 0, fixed.stderr
    assert f"3 OAuth subject(s) of {typo} are now filed under {right}" in fixed.stdout
    assert store.query("SELECT COUNT(*) FROM usage WHERE user_name LIKE '%exmaple#%'") == [(0,)]
    by_user = dict(store.query("SELECT user_name, SUM(usd) FROM usage_by_user GROUP BY 1"))
    assert by_user == {
        "alice": 0.5,
        m.Identity.oauth(right, "sub0").key: 2.5,
        m.Identity.oauth(right, "sub1").key: 0.5,
    }
    spent = dict(store.query("SELECT user_name, SUM(usd) FROM usage GROUP BY 1"))
    assert spent["alice"] == 0.5 and spent[m.Identity.oauth(right, "alice").key] == 0.25
    assert spent[longer] == 0.125
    owners = store.query("SELECT response_id, user_name FROM response_owners ORDER BY 1")
    assert owners == [
        ("resp_alice", "alice"),
        ("resp_sub0", m.Identity.oauth(right, "sub0").key),
        ("resp_sub1", m.Identity.oauth(right, "sub1").key),
    ]
    doctor = run_cli(tmp_path, *config_of(tmp_path, right), "--doctor", env=env)
    (line,) = [x for x in doctor.stdout.splitlines() if "another issuer" in x]
    assert line.endswith(f": {typo}.org (1); they count under this one only if filed under it")


def test_spend_a_refused_store_could_not_take_is_reported_in_dollars_at_exit(fake, tmp_path):
    """With neither a budget nor the cache, a server learns that the store is newer at its
    first write, after the call was answered: its row stays in memory and is lost at exit.
    The exit's warning says how much spend no ledger holds, not only how many rows."""
    store = Store("sqlite", str(tmp_path / "state.sqlite3"))
    env = {**store.env, "XDG_STATE_HOME": str(tmp_path / "home"), "OPENAI_BASE_URL": fake.base_url}
    assert run_cli(tmp_path, "--upgrade-state", env=env).returncode == 0
    store.execute("UPDATE schema_version SET version = ?", (CURRENT + 1,))
    config = tmp_path / "config.yaml"
    config.write_text(PRICES + "cache:\n  ttl_s: 0\n", encoding="utf-8")
    done = run_cli(tmp_path, "--ask", "q", "--json", "--config", str(config), env=env)
    assert done.returncode == 0, done.stderr
    cost = json.loads(done.stdout)["_meta"]["cost"]["usd"]
    assert cost > 0
    lost = f"1 usage row(s) could not be written before exit ({m.usd(cost)} of spend"
    assert lost in done.stderr, done.stderr
    assert store.query("SELECT COUNT(*) FROM usage") == [(0,)]


def test_a_name_an_older_host_wrote_for_a_subject_is_not_given_to_a_new_user(tmp_path):
    """A host of an older release, serving after another upgraded the store, writes the OAuth
    subject sub0 under its bare name. `--user add sub0` then made that spend (and sub0's
    conversations) the new named user's, for good. It is refused, saying to run
    --upgrade-state with the server's config first; after that the name is free, with nothing
    spent."""
    store = Store("sqlite", str(tmp_path / "state.sqlite3"))
    subjects_store(store, 2, version=CURRENT)  # bare subjects in a version 7 store
    env = {**store.env, "XDG_STATE_HOME": str(tmp_path / "home")}
    refused = run_cli(tmp_path, "--user", "add", "sub0", env=env)
    assert refused.returncode == 2, refused.stderr
    (line,) = refused.stderr.splitlines()
    assert "'sub0'" in line and "--config FILE --upgrade-state" in line, line
    assert store.query("SELECT name FROM users") == [("alice",)]
    upgraded = run_cli(
        tmp_path, *config_of(tmp_path, "https://idp.example"), "--upgrade-state", env=env
    )
    assert upgraded.returncode == 0, upgraded.stderr
    added = run_cli(tmp_path, "--user", "add", "sub0", env=env)
    assert added.returncode == 0, added.stderr
    assert store.query("SELECT COUNT(*) FROM usage_by_user WHERE user_name = 'sub0'") == [(0,)]
    # A revoked user added again keeps its history, as before.
    assert run_cli(tmp_path, "--user", "revoke", "alice", env=env).returncode == 0
    assert run_cli(tmp_path, "--user", "add", "alice", env=env).returncode == 0


def test_a_newer_store_is_refused_without_waiting_for_the_newer_hosts(postgres):
    """An older host opening a store a newer version upgraded took the schema lock whole
    before it looked at the version: behind a long transaction of a newer host (a report) it
    waited, holding up every other transaction of theirs meanwhile, and failed with "lock not
    available" instead of saying to upgrade. It now refuses at once, taking no lock."""
    import psycopg

    url = postgres.fresh_database()
    backend = m._PostgresBackend(url)
    conn = backend.connect()
    for statement in m._schema(postgres=True):
        conn.execute(statement)
    conn.execute("INSERT INTO schema_version (version) VALUES (%s)", (CURRENT + 1,))
    newer = psycopg.connect(url, autocommit=True)
    try:
        newer.execute("BEGIN")  # a newer host's long report: the schema lock, shared
        newer.execute("SELECT pg_advisory_xact_lock_shared(%s)", (m._LOCK_SCHEMA,))
        with pytest.raises(m.StateRefused, match=f"upgraded to schema {CURRENT + 1}"):
            m._ensure_schema(backend, conn)
        waiting = "SELECT COUNT(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
        assert newer.execute(waiting).fetchone() == (0,)
    finally:
        newer.close()
        conn.close()


def test_a_server_refused_by_its_store_serves_again_once_it_is_upgraded(spawn, fake, tmp_path):
    """A stdio server without a budget or the cache, refused by a store whose upgrade needs the
    issuer (it learns it at its first write, that call answered), answers again once
    --upgrade-state has upgraded the store (the writer, trying its row again, finds it), and
    the spend of the call answered before is written then, not lost."""
    store = Store("sqlite", str(tmp_path / "state.sqlite3"))
    subjects_store(store, 1)
    env = {**store.env, "XDG_STATE_HOME": str(tmp_path / "home")}
    config = tmp_path / "config.yaml"
    config.write_text(PRICES + "cache:\n  ttl_s: 0\n", encoding="utf-8")
    server = spawn("--stdio", "--config", str(config), env=env, upstream=fake)
    server.initialize()

    answered = []

    def refused() -> bool:
        reply = server.call("answer", {"query": "q"}, timeout=30)
        failed = "error" in reply or bool(reply["result"].get("isError"))
        answered.extend([] if failed else [reply])
        return failed

    wait_until(refused, 20, "the refusal")  # the first call finds it (its row is refused)
    message = failure(server.call("answer", {"query": "q"}, timeout=30))
    assert "--upgrade-state" in message, message
    upgraded = run_cli(
        tmp_path, *config_of(tmp_path, "https://idp.example"), "--upgrade-state", env=env
    )
    assert upgraded.returncode == 0, upgraded.stderr
    wait_until(lambda: not refused(), 20, "a call answered once the store is upgraded")
    server.close_stdin()
    server.wait()
    # Every call answered has its row, the one answered before the refusal was known too.
    ours = "SELECT COUNT(*) FROM usage WHERE outcome = 'ok' AND writer_schema = ?"
    assert store.query(ours, (CURRENT,)) == [(len(answered),)]


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_an_upgrade_behind_another_says_so(kind, tmp_path, request):
    """--upgrade-state while another process holds the schema (an upgrade of a large store)
    failed with "database is locked" or "canceling statement due to statement timeout". It
    says another process holds the schema lock, and to run it again once that is done; the
    store is left as it was."""
    if kind == "sqlite":
        store = Store("sqlite", str(tmp_path / "state.sqlite3"))
    else:
        store = Store("postgres", request.getfixturevalue("postgres").fresh_database())
    subjects_store(store, 1)
    if kind == "sqlite":
        holder = sqlite3.connect(store.where, isolation_level=None)
        holder.execute("PRAGMA journal_mode=WAL")  # as this version keeps its files
        holder.execute("BEGIN IMMEDIATE")  # the file's write lock, as an upgrade holds it
    else:
        import psycopg

        holder = psycopg.connect(store.where, autocommit=True)
        holder.execute("SELECT pg_advisory_lock(%s)", (m._LOCK_SCHEMA,))
    try:
        env = {**store.env, "XDG_STATE_HOME": str(tmp_path / "home")}
        config = config_of(tmp_path, "https://idp.example")
        done = run_cli(tmp_path, *config, "--upgrade-state", env=env, timeout=60)
    finally:
        holder.close()
    assert done.returncode == 1, done.stdout
    (line,) = done.stderr.splitlines()
    assert "another process holds its schema lock" in line and "run it again" in line, line
    assert store.query("SELECT version FROM schema_version") == [(6,)]
