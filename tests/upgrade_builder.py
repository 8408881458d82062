"""Builds a state with the code of an earlier schema version (issue 39): run as
`python upgrade_builder.py OLD_DIR SPEC_JSON`, where OLD_DIR holds that version's
openai_responses_mcp.py (from the git history) and SPEC names the store and the version. That
code's own classes write what it supports: calls in the ledger by each kind of identity, named
users with their allowances, one of them revoked, and the response ids each was given. Prints
the tokens it made, as JSON. Never imports this version's module."""

from __future__ import annotations

import inspect
import json
import sys

# What each identity spent (a call each, today); what each is given; the allowances.
SPEND = {"local": 0.5, "alice": 0.25, "bob": 0.125, "carol": 1.0, "shared": 0.0625}
ALICE_DAILY, ALICE_MONTHLY = 0.25, 20.0
TASK_SECRET = "upgrade-matrix-task-secret-0123456789abcdef"  # server.tasks.secret


def main() -> None:
    old_dir, spec = sys.argv[1], json.loads(sys.argv[2])
    sys.path.insert(0, old_dir)
    import openai_responses_mcp as old

    assert old.__file__.startswith(old_dir), old.__file__
    version = spec["version"]
    if version == 1:  # one SQLite file, no backends yet
        state = old.StateFile(spec["path"], old.Log())
    else:
        url = spec.get("url")
        backend = old._PostgresBackend(url) if url else old._SqliteBackend(spec["path"])
        if hasattr(backend, "oauth_issuer"):
            backend.oauth_issuer = spec.get("issuer")  # None: what --user list ran with
        state = old.StateStore(backend, old.Log(), "UTC")
    if spec.get("open_only"):  # what this code's --user list does to a store: opens it
        old.UserDirectory(state).listing()
        state.close()
        return
    ledger = old.Ledger(state, "UTC")
    if spec.get("rolling"):
        rolling(old, state, ledger)
        return
    named = "user" in inspect.signature(old.UsageRow).parameters
    tokens, tasks = {}, {}
    if named:
        users = old.UserDirectory(state)
        prefix = getattr(old, "NAMED_TOKEN_PREFIX", "")  # version 7 added it
        tokens["alice"] = prefix + "alice-token-0123456789abcdef"
        tokens["bob"] = prefix + "bob-token-0123456789abcdef"
        users.add("alice", tokens["alice"], ALICE_DAILY, ALICE_MONTHLY)
        users.add("bob", tokens["bob"], None, None)
        users.revoke("bob")
    for who, usd in SPEND.items():
        if not named and who != "local":
            continue
        meta = {"cost": {"usd": usd}, "web_searches": 1, "usage": {"input_tokens": 10}}
        identity = who
        if who == "carol" and hasattr(old, "Identity"):  # since issue 40
            identity = old.Identity.oauth(spec["issuer"], "carol").key
        elif who == "carol" and hasattr(old, "oauth_identity"):  # version 7 files subjects
            identity = old.oauth_identity(spec["issuer"], "carol")
        extra = {"user": identity} if named else {}
        ledger.record(old.UsageRow("answer", "gpt-5", "ok", meta, **extra))
        if named:
            old.ResponseOwners(state).add(f"resp_{who}", identity)
        # Its task id, signed as that version's LongCalls signs one (not in the state: any
        # instance with the secret follows it), with the user it names.
        fields = {"r": f"resp_{who}", "t": "answer", "k": "h", "o": "gpt-5", "u": identity}
        tasks[who] = old.mint_task_id(TASK_SECRET, fields, 3_600_000)
    state.close()
    print(json.dumps({"tokens": tokens, "tasks": tasks}))


def rolling(old, state, ledger) -> None:
    """A host that keeps serving while another upgrades the store: its writer's connection is
    open (it wrote a call), and it goes on writing after a line on stdin says the store was
    upgraded under it; the subject carol's call goes in as this version writes it."""
    import time

    ledger.record(old.UsageRow("answer", "gpt-5", "ok", {"cost": {"usd": 0.0}}))
    deadline = time.monotonic() + 30
    while state.unwritten():
        assert time.monotonic() < deadline, "the first row was not written"
        time.sleep(0.01)  # sleep: polls this old code's queue, which has no wait of its own
    print("ready", flush=True)
    sys.stdin.readline()
    meta = {"cost": {"usd": SPEND["carol"]}, "web_searches": 1}
    ledger.record(old.UsageRow("answer", "gpt-5", "ok", meta, user="carol"))
    state.close()
    print(json.dumps({"unwritten": len(state.unwritten())}), flush=True)


if __name__ == "__main__":
    main()
