"""Identity (issue 40): one value for an identity, parsed once from the string the state
stores, and the only code that makes, parses or shows that string."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import openai_responses_mcp as m

Identity = m.Identity
ISSUER = "https://login.example.com/realms/team"


@pytest.mark.parametrize(
    "key, kind, issuer, subject, label",
    [
        ("alice", "user", "", "alice", "user:alice"),
        (f"oauth:{ISSUER}#3f2a", "oauth", ISSUER, "3f2a", f"oauth:{ISSUER}#3f2a"),
        (f"oauth:{ISSUER}#a#b:c", "oauth", ISSUER, "a#b:c", f"oauth:{ISSUER}#a#b:c"),
        ("oauth:#carol", "oauth", "", "carol", "oauth:(issuer unknown)#carol"),
        ("shared", "shared", "", "", "shared (MCP_HTTP_TOKEN)"),
        ("local", "local", "", "", "local"),
        ("", "none", "", "", "(before users)"),
    ],
)  # fmt: skip
def test_each_kind_parses_and_keeps_its_stored_key(key, kind, issuer, subject, label):
    identity = Identity.parse(key)
    assert (identity.kind, identity.issuer, identity.subject) == (kind, issuer, subject)
    assert identity.key == key  # the stored form never changes
    assert identity.label == label
    assert Identity.parse(identity.key) == identity and hash(identity) == hash(Identity.parse(key))


def test_the_constructors_make_what_parse_reads():
    made = Identity.oauth(ISSUER + "/", "3f2a")  # the issuer without its trailing '/'
    assert made.key == f"oauth:{ISSUER}#3f2a" and made == Identity.parse(made.key)
    assert (made.issuer, made.subject) == (ISSUER, "3f2a")
    assert Identity.named("alice") == Identity.parse("alice")
    assert Identity.named("alice") != Identity.oauth(ISSUER, "alice")  # never the same person
    assert Identity.oauth(ISSUER, "shared") != Identity.SHARED
    assert Identity.SHARED.key == m.SHARED_USER and Identity.parse(m.LOCAL_USER).kind == "local"
    # The upgrade run without server.auth.issuer made every subject's key this (issue 39).
    unkeyed = Identity.oauth("", "carol")
    assert unkeyed.key == "oauth:#carol" and unkeyed.key.startswith(Identity.UNKEYED)
    for name in ("shared", "local", "", "oauth:x#y"):
        with pytest.raises(ValueError):
            Identity.named(name)


def test_a_by_user_row_shows_its_identity():
    assert Identity.of_row({"user": "(before users)", "kind": "none"}).label == "(before users)"
    assert Identity.of_row({"user": "bob", "kind": "user"}).label == "user:bob"
    assert Identity.of_row({"user": "oauth:#c", "kind": "oauth"}).label.startswith("oauth:(")


@pytest.mark.parametrize(
    "entry, key",
    [
        ("alice", "alice"),
        (" user:alice ", "alice"),
        ("shared", "shared"),
        (f"oauth:{ISSUER}/#a#b", f"oauth:{ISSUER}#a#b"),
    ],
)  # fmt: skip
def test_an_admin_entry_names_the_identity_the_state_stores(entry, key):
    assert Identity.admin_entry(entry) == Identity.parse(key)


@pytest.mark.parametrize(
    "entry, says",
    [
        ("oauth:login.example.com#a", "is not oauth:ISSUER#SUBJECT"),
        (f"oauth:{ISSUER}#", "is not oauth:ISSUER#SUBJECT"),
        (f"oauth:{ISSUER}", "is not oauth:ISSUER#SUBJECT"),
        ("user:local", "is not user:NAME"),
        ("user:bad name", "is not user:NAME"),
        ("user:", "is not user:NAME"),
    ],
)  # fmt: skip
def test_an_admin_entry_of_no_namespace_says_why(entry, says):
    with pytest.raises(ValueError, match=re.escape(says)):
        Identity.admin_entry(entry)


def test_no_code_outside_identity_slices_or_prefix_tests_an_identity():
    """A change to how identities are written touches Identity alone: no other code tests a
    string for OAUTH_PREFIX / USER_PREFIX or slices one off (issue 40)."""
    source = Path(m.__file__).read_text(encoding="utf-8")
    tree = ast.parse(source)
    (cls,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Identity"]
    inside = set(range(cls.lineno, cls.end_lineno + 1))
    found = []
    for node in ast.walk(tree):
        prefix = isinstance(node, ast.Name) and node.id in ("OAUTH_PREFIX", "USER_PREFIX")
        if prefix and isinstance(node.ctx, ast.Load) and node.lineno not in inside:
            found.append(node.lineno)
    assert not found, f"lines {found} use an identity prefix outside Identity"
    # ... nor spells a prefix out: "oauth:" and "user:" test or slice no string elsewhere.
    spelled = re.compile(r"""startswith\(\s*["'](?:oauth|user):|len\(\s*["'](?:oauth|user):""")
    lines = [n for n, line in enumerate(source.splitlines(), 1) if spelled.search(line)]
    assert not lines, f"lines {lines} test or slice an identity prefix outside Identity"


def test_a_name_of_another_kind_is_told_from_a_named_users():
    """--user limit refuses these with the config keys that set their allowance instead."""
    for text in ("oauth:https://login.example.com#3f2a", "user:alice", "shared", "Shared"):
        assert Identity.names_another_kind(text), text
    for text in ("alice", "local", "shared.team", "a@b.example"):
        assert not Identity.names_another_kind(text), text
