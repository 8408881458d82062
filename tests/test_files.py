"""Files (issue 32): what a call attaches, read safely. The reader's rules on real directories
(secrets by name and content, the allowed directories, symlinks, FIFOs, devices, limits, kinds
from bytes), a property test that no path outside the allowed directories is ever opened (a
directory swapped for a symlink between check and open included), then the spawned server
against the fake Responses API: the request's parts, _meta.files, the ledger, the cache, the
budget, and the client's roots (roots/list)."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import socket
import sqlite3
import struct
import threading
import time

import pytest
from conftest import TEST_KEY, Harness, Server, failure_of, start, wait_until
from fake_upstream import Reply
from hypothesis import HealthCheck, settings
from hypothesis import given as drawn
from hypothesis import strategies as st

import openai_responses_mcp as m

PNG = (
    b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"
    + (1024).to_bytes(4, "big")
    + (768).to_bytes(4, "big")
    + b"\x08\x02\x00\x00\x00"
)
PDF = b"%PDF-1.7\n" + b"<< /Type /Page >>\n" * 2 + b"<< /Type /Pages >>\n%%EOF\n"
SECRET = b"TOP SECRET: outside the allowed directory"
KEY_BLOCK = b"-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----\n"  # noqa: E501


def config_of(tmp_path, text: str = ""):
    path = tmp_path / "conf" / "config.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return m.load_config({"config": str(path)}, {"HOME": str(tmp_path)})


def read(tmp_path, root, *given, text: str = ""):
    config = config_of(tmp_path, text)
    return m.FileReader(config).read(list(given), m.allowed_dirs(config, [str(root)]))


def refused(tmp_path, root, *given, text: str = "") -> str:
    with pytest.raises(m.FileRefused) as caught:
        read(tmp_path, root, *given, text=text)
    return str(caught.value)


@pytest.fixture
def project(tmp_path):
    root = tmp_path / "project"
    (root / "sub").mkdir(parents=True)
    (root / "shot.png").write_bytes(PNG)
    (root / "spec.pdf").write_bytes(PDF)
    (root / "build.log").write_text("error: E0425 cannot find value `x`\n", encoding="utf-8")
    (root / "sub" / "inner.txt").write_text("inside", encoding="utf-8")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_bytes(SECRET)
    return root


class Opened:
    """Every path os.open opened, as the kernel names the descriptor (/proc/self/fd)."""

    def __init__(self, monkeypatch):
        self.paths: list[str] = []
        real = os.open

        def recording(path, flags, mode=0o777, *, dir_fd=None):
            fd = real(path, flags, mode, dir_fd=dir_fd)
            self.paths.append(os.readlink(f"/proc/self/fd/{fd}"))
            return fd

        monkeypatch.setattr(os, "open", recording)

    def outside(self, root) -> list[str]:
        top = os.path.realpath(root)
        return [p for p in self.paths if p != top and not p.startswith(top + os.sep)]


needs_proc = pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="Linux /proc")


# -- kinds: from the bytes, never the name ---------------------------------------------------------


def test_a_screenshot_is_an_input_image_with_a_data_url_and_its_tile_estimate(tmp_path, project):
    (shot,) = read(tmp_path, project, "shot.png")
    assert shot.part == {
        "type": "input_image",
        "image_url": "data:image/png;base64," + base64.b64encode(PNG).decode(),
        "detail": "auto",
    }
    assert shot.tokens == 765  # 1024 x 768: short side to 768 -> 1024 x 768 -> 2 x 2 tiles
    assert shot.summary() == {
        "name": "shot.png",
        "kind": "png",
        "bytes": len(PNG),
        "sha256": hashlib.sha256(PNG).hexdigest()[:12],
    }


def test_a_pdf_is_an_input_file_with_its_name_and_counts_by_pages(tmp_path, project):
    (pdf,) = read(tmp_path, project, "spec.pdf")
    assert pdf.part["type"] == "input_file" and pdf.part["filename"] == "spec.pdf"
    assert pdf.part["file_data"] == "data:application/pdf;base64," + base64.b64encode(PDF).decode()
    assert pdf.tokens == 2 * m.PDF_PAGE_TOKENS


def test_text_is_a_text_part_with_its_file_name(tmp_path, project):
    (log,) = read(tmp_path, project, "build.log")
    assert log.part == {
        "type": "input_text",
        "text": "[file] build.log\nerror: E0425 cannot find value `x`\n",
    }


def test_the_kind_comes_from_the_bytes_not_the_name(tmp_path, project):
    (project / "notes.txt").write_bytes(PNG)
    (project / "diagram.png").write_text("just text", encoding="utf-8")
    (project / "report.pdf").write_bytes(b"PK\x03\x04zipzipzip")
    image, text = read(tmp_path, project, "notes.txt", "diagram.png")
    assert (image.kind, text.kind) == ("png", "text")
    assert refused(tmp_path, project, "report.pdf") == (
        "report.pdf: refused, a ZIP archive: only PNG, JPEG, WebP, GIF, PDF and UTF-8 text are sent"
    )


@pytest.mark.parametrize(
    ("header", "size"),
    [
        (PNG, (1024, 768)),
        (b"GIF89a" + (640).to_bytes(2, "little") + (480).to_bytes(2, "little"), (640, 480)),
        (
            b"\xff\xd8\xff\xe0\x00\x04ab\xff\xc0\x00\x11\x08"
            + (300).to_bytes(2, "big")
            + (500).to_bytes(2, "big"),
            (500, 300),
        ),
        (
            b"RIFF\0\0\0\0WEBPVP8X\0\0\0\0\0\0\0\0"
            + (1999).to_bytes(3, "little")
            + (999).to_bytes(3, "little"),
            (2000, 1000),
        ),
    ],
)
def test_image_sizes_are_read_from_their_headers(header, size):
    assert m.image_size(header, m._kind_of(header)[0]) == size


@pytest.mark.parametrize(
    ("size", "detail", "tokens"),
    [
        ((1024, 1024), "high", 765),
        ((2048, 4096), "high", 1105),
        ((768, 2048), "high", 1445),
        ((4096, 8192), "low", 85),
    ],
)
def test_image_tokens_follow_openais_worked_examples(size, detail, tokens):
    assert m.image_tokens(size, detail) == tokens


# -- never a secret --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        ".env",
        "config/.env.local",
        "server.pem",
        "tls.KEY",
        "id_rsa",
        "ID_ED25519",
        ".ssh/config",
        ".aws/credentials",
        ".config/gcloud/application_default_credentials.json",
        "credentials.json",
        ".netrc",
        ".npmrc",
        ".pypirc",
        "sub/.git-credentials",
        ".bash_history",
        "cert.p12",
        ".config/gh/hosts.yml",
        ".azure/accessTokens.json",
        "vault.KDBX",
        # Issue 39: what a server started in ~ could read. Shells' and REPLs' histories:
        ".local/share/fish/fish_history",
        ".local/share/powershell/PSReadLine/ConsoleHost_history.txt",
        "AppData/Roaming/Microsoft/Windows/PowerShell/PSReadLine/ConsoleHost_history.txt",
        ".zhistory",
        ".zsh_history",
        ".histfile",
        ".zsh_sessions/0A1B.history",
        ".sh_history",
        ".history",
        ".bash_history-12345.tmp",
        ".python_history",
        ".node_repl_history",
        ".psql_history",
        ".mysql_history",
        ".sqlite_history",
        ".irb_history",
        ".pry_history",
        ".rediscli_history",
        ".lesshst",
        ".viminfo",
        ".Rhistory",
        ".dbshell",
        ".mongodb/mongosh/mongosh_repl_history",
        ".julia/logs/repl_history.jl",
        ".codex/history.jsonl",
        # agents' and clouds' logins:
        ".claude/.credentials.json",
        ".claude.json",
        ".codex/auth.json",
        ".codex/config.toml",
        "Library/Application Support/Claude/claude_desktop_config.json",
        ".gemini/oauth_creds.json",
        ".config/gcloud/credentials.db",
        ".config/gcloud/access_tokens.db",
        ".config/gcloud/legacy_credentials/me@example.com/adc.json",
        "AppData/Roaming/gcloud/credentials.db",
        ".azure/msal_token_cache.json",
        ".azure/service_principal_entries.json",
        ".aws/sso/cache/0123abcd.json",
        ".docker/config.json",
        ".kube/config",
        "prod.kubeconfig",
        ".config/gh/hosts.yml",
        ".config/github-copilot/apps.json",
        ".terraform.d/credentials.tfrc.json",
        "credentials.tfrc.json",
        ".vault-token",
        ".my.cnf",
        "_netrc",
        ".pgpass",
        ".boto",
        ".s3cfg",
        # keys not in PEM form:
        "server.ppk",
        # review 6: only source code and docs escape the broad globs
        "credentials.json",
        "id_rsa.bak",
        ".env.js",
    ],
)
def test_a_secret_by_name_is_refused_before_anything_is_opened(
    tmp_path, project, monkeypatch, name
):
    path = project / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("hunter2", encoding="utf-8")
    opened = Opened(monkeypatch)
    assert refused(tmp_path, project, name) == f"{name}: refused, a secret by name (files.deny)"
    assert opened.paths == []


@pytest.mark.parametrize(
    "name",
    [
        ".claude/settings.json",  # an agent's settings, not its login
        "claude.json",
        "codex/auth.json",
        "src/history.py",
        ".history/src/main_20260101.py",  # VS Code's Local History: the project's own files
        "notes/fish.md",
        "run:42.log",
        # review 6: source code and docs the broad globs matched
        "src/id_generator.py",
        "pkg/ID_Map.go",
        "botocore/credentials.py",
        "auth/credentials_test.go",
        "docs/credentials.md",
    ],
)
def test_names_close_to_a_secrets_are_read(tmp_path, project, name):
    path = project / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("plain text", encoding="utf-8")
    (found,) = read(tmp_path, project, name)
    assert found.kind == "text" and found.part["text"].endswith("plain text")


def test_the_docs_list_every_secret_path_as_the_table_has_it():
    from pathlib import Path

    page = (Path(__file__).resolve().parent.parent / "docs" / "files.md").read_text("utf-8")
    section = page.split("## Never a secret", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    listed = [tuple(cell.strip() for cell in row.strip("|").split("|")) for row in rows]
    assert listed == [(f"`{pattern}`", what) for pattern, what in m.SECRET_PATHS]


def test_files_deny_adds_globs_by_name_and_by_path(tmp_path, project):
    (project / "data.sqlite").write_text("x", encoding="utf-8")
    (project / "sub" / "private").mkdir()
    (project / "sub" / "private" / "plan.md").write_text("x", encoding="utf-8")
    text = "files: {deny: ['*.sqlite', '*/private/*']}\n"
    assert "a secret by name (files.deny)" in refused(tmp_path, project, "data.sqlite", text=text)
    assert "a secret" in refused(tmp_path, project, "sub/private/plan.md", text=text)
    assert read(tmp_path, project, "build.log", text=text)


def test_a_private_key_or_the_api_key_in_any_file_is_refused(tmp_path, project, monkeypatch):
    (project / "notes.txt").write_bytes(b"my key:\n" + KEY_BLOCK)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-the-servers-own-key-0123456789")
    (project / "pasted.log").write_text("OPENAI_API_KEY=sk-the-servers-own-key-0123456789\n")
    assert "holds a private key or API key" in refused(tmp_path, project, "notes.txt")
    assert "holds a private key or API key" in refused(tmp_path, project, "pasted.log")
    data = "data:text/plain;base64," + base64.b64encode(KEY_BLOCK).decode()
    assert "holds a private key" in refused(tmp_path, project, data)


@pytest.mark.parametrize(
    "block",
    [
        b"-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n-----END RSA PRIVATE KEY-----\n",
        b"-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIFHDBOBgkq\n",
        b"-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQOYBGYAAAAB\n=abcd\n"
        b"-----END PGP PRIVATE KEY BLOCK-----\n",
        b"PuTTY-User-Key-File-2: ssh-rsa\nEncryption: none\nComment: me\nPublic-Lines: 1\n",
        b"PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: aes256-cbc\n",
        b"---- BEGIN SSH2 ENCRYPTED PRIVATE KEY ----\nComment: me\nP2/56wAAAi4AAAA3\n",
        b"---- END SSH2 PRIVATE KEY ----\n",  # the tail of one, its head cut off
        b'{"type": "service_account", "private_key": "-----BEGIN PRIVATE KEY-----\\nMIIE"}',
    ],
)
def test_a_private_key_in_any_form_is_refused_by_content(tmp_path, project, block):
    (project / "notes.txt").write_bytes(b"kept for later:\n" + block)
    assert refused(tmp_path, project, "notes.txt") == (
        "notes.txt: refused, it holds a private key or API key"
    )


@pytest.mark.parametrize(
    "text",
    [
        b"-----BEGIN CERTIFICATE-----\nMIIDdzCCAl+gAwIBAgIE\n-----END CERTIFICATE-----\n",
        b"-----BEGIN PGP PUBLIC KEY BLOCK-----\nmQINBF\n-----END PGP PUBLIC KEY BLOCK-----\n",
        b"---- BEGIN SSH2 PUBLIC KEY ----\nAAAAB3NzaC1yc2E\n---- END SSH2 PUBLIC KEY ----\n",
        b"Rotate the private key every year; keep the secret key in the vault.\n",
    ],
)
def test_public_keys_and_prose_about_keys_are_sent(tmp_path, project, text):
    (project / "notes.txt").write_bytes(text)
    (found,) = read(tmp_path, project, "notes.txt")
    assert found.kind == "text"


def test_the_servers_own_config_file_is_never_sent(tmp_path):
    config = config_of(tmp_path, "cache: {ttl_s: 0}\n")
    reader = m.FileReader(config)
    with pytest.raises(m.FileRefused, match="outside the allowed"):
        reader.read([config.path], m.allowed_dirs(config, [str(tmp_path)]))


# -- the allowed directories ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "given",
    ["/etc/passwd", "../outside/secret.txt", "sub/../../outside/secret.txt", "/proc/self/environ"],
)
def test_a_path_outside_the_allowed_directories_is_refused_unopened(
    tmp_path, project, monkeypatch, given
):
    opened = Opened(monkeypatch)
    assert refused(tmp_path, project, given).endswith(
        "refused, outside the allowed directories (the client's roots or the working directory, "
        "and files.allowed_dirs)"
    )
    assert opened.paths == []


def test_refusing_outside_says_nothing_of_whether_the_file_exists(tmp_path, project):
    there = refused(tmp_path, project, str(tmp_path / "outside" / "secret.txt"))
    missing = refused(tmp_path, project, str(tmp_path / "outside" / "nothing.txt"))
    assert there.partition(":")[2] == missing.partition(":")[2]


def test_a_symlink_out_of_the_project_is_resolved_and_refused(tmp_path, project, monkeypatch):
    (project / "innocent.png").symlink_to(tmp_path / "outside" / "secret.txt")
    (project / "docs").symlink_to(tmp_path / "outside")
    opened = Opened(monkeypatch)
    assert "outside the allowed" in refused(tmp_path, project, "innocent.png")
    assert "outside the allowed" in refused(tmp_path, project, "docs/secret.txt")
    assert opened.paths == []


def test_a_symlink_inside_the_project_is_followed(tmp_path, project):
    (project / "latest.log").symlink_to(project / "build.log")
    (found,) = read(tmp_path, project, "latest.log")
    assert found.kind == "text"


def test_the_file_systems_root_is_never_an_allowed_directory(tmp_path):
    config = config_of(tmp_path, "files: {allowed_dirs: ['/', '/tmp/..']}\n")
    assert m.allowed_dirs(config, ["/"]) == []
    with pytest.raises(m.FileRefused, match="outside the allowed"):
        m.FileReader(config).read(["/etc/hostname"], m.allowed_dirs(config, ["/"]))


def test_roots_are_file_uris_others_are_ignored():
    result = {
        "roots": [
            {"uri": "file:///home/me/my%20project", "name": "p"},
            {"uri": "file://localhost/srv/app"},
            {"uri": "https://example.com/"},
            {"uri": "file://otherhost/share"},
            {"name": "no uri"},
        ]
    }
    assert m.roots_from(result) == ["/home/me/my project", "/srv/app"]


# -- nothing hangs, nothing unbounded -------------------------------------------------------------


def bounded(action, seconds: float = 5.0):
    """Runs action on a thread; fails the test if it has not returned within `seconds`."""
    outcome: list = []

    def run():
        try:
            outcome.append(("ok", action()))
        except Exception as exc:  # noqa: BLE001 - the test looks at it
            outcome.append(("raised", exc))

    thread = threading.Thread(target=run, daemon=True)
    started = time.monotonic()
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), "the call hung"
    return outcome[0], time.monotonic() - started


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs")
def test_a_fifo_in_the_project_is_refused_at_once(tmp_path, project):
    os.mkfifo(project / "pipe.log")
    (kind, exc), took = bounded(lambda: read(tmp_path, project, "pipe.log"))
    assert kind == "raised" and "not a regular file" in str(exc), exc
    assert took < 2


def test_dev_zero_is_refused_at_once_even_when_dev_is_allowed(tmp_path, project):
    (project / "zero.png").symlink_to("/dev/zero")
    for path, text in (("zero.png", ""), ("/dev/zero", "files: {allowed_dirs: [/dev]}\n")):
        (kind, exc), took = bounded(lambda g=path, t=text: read(tmp_path, project, g, text=t))
        assert kind == "raised" and isinstance(exc, m.FileRefused), exc
        assert took < 2


def test_limits_are_refused_with_the_number_and_the_key(tmp_path, project):
    (project / "big.log").write_text("x" * 5000, encoding="utf-8")
    small = "files: {max_file_bytes: 4096, max_total_bytes: 4096, max_files: 2}\n"
    assert refused(tmp_path, project, "big.log", text=small) == (
        "big.log: refused, 5000 bytes is over the 4096-byte limit (files.max_file_bytes)"
    )
    (project / "a.log").write_text("a" * 3000, encoding="utf-8")
    (project / "b.log").write_text("b" * 3000, encoding="utf-8")
    assert refused(tmp_path, project, "a.log", "b.log", text=small) == (
        "b.log: refused, the files come to more than 4096 bytes in all (files.max_total_bytes)"
    )
    assert refused(tmp_path, project, "a.log", "a.log", "a.log", text=small) == (
        "3 files: at most 2 a call (files.max_files)"
    )


# -- URLs: sent for OpenAI to fetch, never fetched here --------------------------------------------


def test_https_urls_go_as_image_url_or_file_url(tmp_path, project):
    image, pdf = read(tmp_path, project, "https://e.com/a/shot.PNG?x=1", "https://e.com/spec")
    assert image.part == {
        "type": "input_image",
        "image_url": "https://e.com/a/shot.PNG?x=1",
        "detail": "auto",
    }
    assert pdf.part == {"type": "input_file", "file_url": "https://e.com/spec"}
    assert image.summary()["bytes"] == 0 and pdf.tokens > 0


@pytest.mark.parametrize(
    ("given", "why"),
    [
        ("http://example.com/a.png", "only https:// and data: URLs are sent (http: is not"),
        ("file:///etc/passwd", "(file: is not"),
        ("ftp://example.com/a.pdf", "(ftp: is not"),
        ("https://user:pass@example.com/a.png", "not a valid https:// URL"),
        ("https:///nohost.png", "not a valid https:// URL"),
        ("data:image/png,rawbytes", "a data: URL must be base64"),
        ("data:image/png;base64,@@@", "its base64 is not valid"),
    ],
)
def test_other_schemes_and_bad_urls_are_refused(tmp_path, project, given, why):
    assert why in refused(tmp_path, project, given)


@pytest.mark.parametrize(
    ("given", "why"),
    [
        ("HTTP://example.com/a.png", "(http: is not"),
        ("File:///etc/passwd", "(file: is not"),
        ("file:/etc/passwd", "(file: is not"),  # a file URL without //: a URL all the same
        ("gopher://example.com/", "(gopher: is not"),
    ],
)
def test_schemes_are_case_insensitive_and_a_url_is_known_by_its_form(tmp_path, project, given, why):
    assert why in refused(tmp_path, project, given)


def test_a_path_with_a_colon_is_a_path_not_a_scheme(tmp_path, project):
    (project / "run:42.log").write_text("step 42 failed\n", encoding="utf-8")
    (project / "sub" / "a:b.txt").write_text("x\n", encoding="utf-8")
    found = read(tmp_path, project, "run:42.log", "sub/a:b.txt", str(project / "run:42.log"))
    step, inner = "[file] run:42.log\nstep 42 failed\n", "[file] a:b.txt\nx\n"
    assert [f.part["text"] for f in found] == [step, inner, step]
    assert m.url_scheme("C:\\logs\\build.log") == "" and m.url_scheme("C:/logs/b.log") == ""


@pytest.mark.parametrize("scheme", ["DATA", "Data", "dAtA"])
def test_an_upper_case_data_urls_payload_is_never_echoed(tmp_path, project, scheme):
    payload = base64.b64encode(b"log line\n" * 4).decode()
    (found,) = read(tmp_path, project, f"{scheme}:text/plain;base64,{payload}")
    assert found.kind == "text" and found.part["text"] == "[file] file\n" + "log line\n" * 4
    assert found.summary()["name"] == f"{scheme}:text/plain;base64,…"
    bad = f"{scheme}:application/zip;base64," + base64.b64encode(b"PK\x03\x04" + b"z" * 90).decode()
    message = refused(tmp_path, project, bad)
    assert message.startswith(f"{scheme}:application/zip;base64,…: refused, a ZIP archive")
    assert base64.b64encode(b"z" * 30).decode() not in message


def test_an_upper_case_https_url_is_sent_as_https(tmp_path, project):
    (image,) = read(tmp_path, project, "HTTPS://example.com/Shot.PNG")
    assert image.part["image_url"] == "https://example.com/Shot.PNG"


def test_a_data_url_is_taken_by_its_bytes_not_its_declared_type(tmp_path, project):
    given = "data:application/pdf;base64," + base64.b64encode(PNG).decode()
    (found,) = read(tmp_path, project, given)
    assert found.kind == "png" and found.part["image_url"].startswith("data:image/png;base64,")
    assert found.summary()["name"] == "data:application/pdf;base64,…"


# -- the property: no path outside the allowed directories is ever opened -------------------------

COMPONENTS = [
    "..",
    ".",
    "sub",
    "inner.txt",
    "shot.png",
    "link_out",
    "dir_out",
    "loop_a",
    "zero",
    "fifo",
    "self",
    "secret.txt",
    "outside",
    "SUB",
    "Sub",
    "ｓｕｂ",  # fullwidth look-alikes: names like any other
    "．．",
    "..\u2215",
    "~",
    "",
    ".ssh",
    "id_rsa",
    "%2e%2e",
    "proc",
]
PREFIXES = ["", "/", "~/", "{root}/", "{outside}/", "/proc/self/", "/etc/", "{tmp}/"]


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("sandbox")
    root, outside = tmp / "root", tmp / "outside"
    (root / "sub").mkdir(parents=True)
    (outside / ".ssh").mkdir(parents=True)
    (outside / "sub").mkdir()
    (outside / "secret.txt").write_bytes(SECRET)
    (outside / "sub" / "inner.txt").write_bytes(SECRET)
    (outside / ".ssh" / "id_rsa").write_bytes(SECRET)
    (root / "shot.png").write_bytes(PNG)
    (root / "sub" / "inner.txt").write_text("inside", encoding="utf-8")
    (root / "link_out").symlink_to(outside / "secret.txt")
    (root / "dir_out").symlink_to(outside)
    (root / "loop_a").symlink_to(root / "loop_b")
    (root / "loop_b").symlink_to(root / "loop_a")
    (root / "zero").symlink_to("/dev/zero")
    (root / "self").symlink_to(root)
    os.mkfifo(root / "fifo")
    return tmp, root, outside


def swapping(root, outside):
    """m._open_beneath with root/sub swapped for a symlink to `outside` between the check and
    the open (and put back after)."""
    real_open_beneath = m._open_beneath

    def open_swapped(top, steps):
        os.rename(root / "sub", root / "sub.away")
        os.symlink(outside, root / "sub")
        try:
            return real_open_beneath(top, steps)
        finally:
            os.unlink(root / "sub")
            os.rename(root / "sub.away", root / "sub")

    return open_swapped


@needs_proc
@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@drawn(
    prefix=st.sampled_from(PREFIXES),
    parts=st.lists(st.sampled_from(COMPONENTS), min_size=1, max_size=5),
    swap=st.booleans(),
)
def test_no_path_outside_the_allowed_directories_is_ever_opened(
    sandbox, monkeypatch, prefix, parts, swap
):
    tmp, root, outside = sandbox
    monkeypatch.setenv("HOME", str(outside))
    given_path = prefix.format(root=root, outside=outside, tmp=tmp) + "/".join(parts)
    config = m.load_config({}, {"HOME": str(tmp)})
    reader = m.FileReader(config)
    allowed = m.allowed_dirs(config, [str(root)])
    if swap:
        monkeypatch.setattr(m, "_open_beneath", swapping(root, outside))
    opened = Opened(monkeypatch)
    (kind, value), _ = bounded(lambda: reader.read([given_path], allowed), 5)
    monkeypatch.undo()
    assert opened.outside(root) == [], (given_path, opened.paths)
    if kind == "ok":
        (found,) = value
        assert SECRET not in base64.b64decode(found.part.get("image_url", "x,")[6:].split(",")[-1])
        assert SECRET.decode() not in found.part.get("text", "")
    else:
        assert isinstance(value, m.FileRefused), value


@needs_proc
def test_a_directory_swapped_for_a_symlink_between_check_and_open_is_refused(sandbox, monkeypatch):
    """The same race the property test draws, on purpose: sub/inner.txt resolves inside, then
    sub becomes a symlink to a directory outside holding an inner.txt of its own."""
    tmp, root, outside = sandbox
    config = m.load_config({}, {"HOME": str(tmp)})
    monkeypatch.setattr(m, "_open_beneath", swapping(root, outside))
    opened = Opened(monkeypatch)
    with pytest.raises(m.FileRefused, match="cannot be opened as a file inside"):
        m.FileReader(config).read(["sub/inner.txt"], m.allowed_dirs(config, [str(root)]))
    assert opened.outside(root) == []


# -- through the server: the request, _meta.files, ledger, cache, budget ---------------------------


def png_in(tmp_path, name="shot.png", extra=b"") -> bytes:
    data = PNG + extra
    (tmp_path / name).write_bytes(data)
    return data


def parts_sent(fake, index=0) -> list:
    body = fake.requests[index].body
    assert body["input"][0]["role"] == "user"
    return body["input"][0]["content"]


def test_a_screenshot_in_the_launch_directory_goes_with_the_question(spawn, fake, tmp_path):
    data = png_in(tmp_path)
    fake.enqueue(Reply(text="A 1024 x 768 screenshot."))
    server = start(spawn, fake)
    reply = server.call("answer", {"query": "What does it show?", "files": ["shot.png"]})
    result = reply["result"]
    assert result["structuredContent"]["answer"] == "A 1024 x 768 screenshot."
    text, image = parts_sent(fake)
    assert text["type"] == "input_text" and text["text"].startswith("What does it show?")
    assert image == {
        "type": "input_image",
        "image_url": "data:image/png;base64," + base64.b64encode(data).decode(),
        "detail": "auto",
    }
    (listed,) = result["_meta"]["files"]
    assert listed["name"] == "shot.png" and listed["kind"] == "png"
    assert listed["bytes"] == len(data) and len(listed["sha256"]) == 12
    state = tmp_path / "xdg-state" / "openai-responses-mcp" / "state.sqlite3"
    wait_until(lambda: _rows(state), 10, "the ledger row")
    assert _rows(state) == [(1, len(data))]


def test_a_crafted_pdf_and_upper_case_data_urls_are_answered_and_never_echoed(spawn, fake):
    """Issue 39, through the server: a PDF of 999 object streams (each once inflated to the
    end of the file: seconds of CPU) sent as a DATA: URL is answered, and neither it nor a text
    DATA: URL shows its payload in _meta.files or in the text sent upstream."""
    crafted = many_streams_pdf(999)
    text = b"step 42 failed ???\n"  # its base64 holds a '/': once taken for a file name
    encoded = base64.b64encode(text).decode()
    assert "/" in encoded
    files = [
        "DATA:application/pdf;base64," + base64.b64encode(crafted).decode(),
        "Data:text/plain;base64," + encoded,
    ]
    fake.enqueue(Reply(text="read"))
    server = start(spawn, fake)
    result = server.call("answer", {"query": "Why?", "files": files}, timeout=60)["result"]
    assert result["structuredContent"]["answer"] == "read"
    assert [f["name"] for f in result["_meta"]["files"]] == [
        "DATA:application/pdf;base64,…",
        "Data:text/plain;base64,…",
    ]
    _, pdf, sent = parts_sent(fake)
    assert pdf["filename"] == "file" and base64.b64decode(pdf["file_data"].split(",")[1]) == crafted
    assert sent == {"type": "input_text", "text": "[file] file\n" + text.decode()}
    assert encoded not in json.dumps(fake.requests[0].body)


def _rows(state) -> list:
    if not state.exists():
        return []
    with sqlite3.connect(state) as db:
        try:
            return db.execute("SELECT files, file_bytes FROM usage").fetchall()
        except sqlite3.OperationalError:
            return []


def test_one_refused_file_and_nothing_is_sent(spawn, fake, tmp_path):
    png_in(tmp_path)
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / ".env").write_text("OPENAI_API_KEY=sk-x\n", encoding="utf-8")
    server = start(spawn, fake)
    reply = server.call("answer", {"query": "q", "files": ["shot.png", "notes/.env"]})
    assert failure_of(reply) == (
        "answer failed: notes/.env: refused, a secret by name (files.deny)"
    )
    assert "sk-x" not in json.dumps(reply) and "sk-x" not in server.stderr
    assert fake.requests == []


def test_the_cache_key_is_the_files_content_not_its_path(spawn, fake, tmp_path):
    png_in(tmp_path)
    fake.enqueue(Reply(text="first"), Reply(text="changed"))
    server = start(spawn, fake, env={"ANSWER_CACHE_TTL_S": "600"})
    ask = {"query": "q", "files": ["shot.png"]}
    assert server.call("answer", ask)["result"]["structuredContent"]["answer"] == "first"
    again = server.call("answer", ask)["result"]
    assert again["_meta"]["cache"]["hit"] is True
    (tmp_path / "copy.png").write_bytes(PNG)  # the same content under another name
    assert server.call("answer", {"query": "q", "files": ["copy.png"]})["result"]["_meta"]["cache"][
        "hit"
    ]
    png_in(tmp_path, extra=b"\0changed")
    fresh = server.call("answer", ask)["result"]
    assert fresh["structuredContent"]["answer"] == "changed" and len(fake.requests) == 2


def test_the_budget_estimate_counts_the_files(spawn, fake, tmp_path):
    (tmp_path / "huge.log").write_text("log line\n" * 600_000, encoding="utf-8")  # ~5.4 MB
    config = "budget: {daily_usd: 0.05}\n"
    fake.enqueue(Reply(text="fits"))
    server = start(spawn, fake, config=config)
    assert "result" in server.call("answer", {"query": "without the file"})
    reply = server.call("answer", {"query": "with it", "files": ["huge.log"]})
    assert failure_of(reply).startswith("answer failed: daily budget of $0.05 has no room")
    assert len(fake.requests) == 1


def test_the_server_never_fetches_a_url_itself(spawn, fake, tmp_path):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(0.5)
    port = listener.getsockname()[1]
    fake.enqueue(Reply(text="ok"))
    server = start(spawn, fake)
    url = f"https://127.0.0.1:{port}/shot.png"
    assert "result" in server.call("answer", {"query": "q", "files": [url]})
    assert parts_sent(fake)[1] == {"type": "input_image", "image_url": url, "detail": "auto"}
    with pytest.raises(TimeoutError):
        listener.accept()
    listener.close()


def test_over_http_local_paths_are_refused_and_data_urls_are_taken(tmp_path):
    harness = Harness(config_of(tmp_path))
    harness.initialize()
    png_in(tmp_path)
    reply = harness.call({"query": "q", "files": [str(tmp_path / "shot.png")]})
    assert (
        "local paths name the server's disk and are off over HTTP (files.local_paths)"
        in (reply["error"]["message"])
    )
    data = "data:image/png;base64," + base64.b64encode(PNG).decode()
    assert "result" in harness.call({"query": "q", "files": [data]}, request_id="call-2")


# -- the client's roots ----------------------------------------------------------------------------


def rooted(spawn, fake, tmp_path) -> Server:
    server = spawn(upstream=fake)
    reply = server.request(
        "initialize",
        {
            "protocolVersion": "2025-06-18",
            "capabilities": {"roots": {"listChanged": True}},
            "clientInfo": {"name": "pytest", "version": "0"},
        },
    )
    assert "result" in reply
    server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    return server


def answer_roots(server: Server, *paths) -> dict:
    asked, _ = server.recv_until(lambda msg: msg.get("method") == "roots/list", 30)
    roots = [{"uri": f"file://{p}", "name": os.path.basename(str(p))} for p in paths]
    server.send({"jsonrpc": "2.0", "id": asked["id"], "result": {"roots": roots}})
    return asked


def test_the_clients_roots_are_asked_once_and_again_after_they_change(spawn, fake, tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"
    for root in (first, second):
        root.mkdir()
        png_in(root)
    png_in(tmp_path, "cwd.png")  # the working directory: not a root
    fake.enqueue(Reply(text="one"), Reply(text="two"), Reply(text="three"))
    server = rooted(spawn, fake, tmp_path)
    server.send(_call(1, [str(first / "shot.png")]))
    asked = answer_roots(server, first)
    assert asked["jsonrpc"] == "2.0" and asked.get("params", {}) == {}
    assert "result" in server.recv_until(lambda msg: msg.get("id") == 1, 30)[0]
    reply = server.call("answer", {"query": "q2", "files": [str(tmp_path / "cwd.png")]})
    assert "outside the allowed directories" in failure_of(reply)  # asked once: kept
    server.send({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"})
    server.send(_call(3, [str(second / "shot.png")]))
    answer_roots(server, second)
    assert "result" in server.recv_until(lambda msg: msg.get("id") == 3, 30)[0]


def _call(request_id, files) -> dict:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": "answer", "arguments": {"query": f"q{request_id}", "files": files}},
    }


def test_a_client_that_never_lists_its_roots_gets_a_bounded_refusal(spawn, fake, tmp_path):
    png_in(tmp_path)
    server = rooted(spawn, fake, tmp_path)
    started = time.monotonic()
    server.send(_call(1, ["shot.png"]))
    reply, _ = server.recv_until(lambda msg: msg.get("id") == 1, timeout=m.ROOTS_TIMEOUT_S + 10)
    assert failure_of(reply).startswith(
        f"answer failed: the client did not answer roots/list (within {m.ROOTS_TIMEOUT_S:g} s)"
    )
    assert time.monotonic() - started < m.ROOTS_TIMEOUT_S + 5
    assert fake.requests == []
    assert server.request("ping")["result"] == {}  # and the server keeps serving


@pytest.mark.parametrize("result", [{"roots": [1, 2]}, {"roots": "."}, {"items": []}])
def test_a_roots_answer_that_is_no_roots_list_is_said_so_and_not_kept(
    spawn, fake, tmp_path, result
):
    """Read as no roots, it refused the path as "outside the allowed directories" (and was kept
    for the session): it says what came, sends nothing, and is asked again next time."""
    png_in(tmp_path)
    server = rooted(spawn, fake, tmp_path)
    server.send(_call(1, ["shot.png"]))
    asked, _ = server.recv_until(lambda msg: msg.get("method") == "roots/list", 30)
    server.send({"jsonrpc": "2.0", "id": asked["id"], "result": result})
    reply, _ = server.recv_until(lambda msg: msg.get("id") == 1, 30)
    said = failure_of(reply)
    assert "the client answered roots/list with" in said and "not a list of roots" in said
    assert fake.requests == []
    fake.enqueue(Reply(text="ok"))
    server.send(_call(2, ["shot.png"]))
    answer_roots(server, tmp_path)  # asked again: the bad answer was not kept
    assert "result" in server.recv_until(lambda msg: msg.get("id") == 2, 30)[0]


def test_over_http_with_local_paths_only_files_allowed_dirs_are_read(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    png_in(shared)
    png_in(tmp_path, "cwd.png")
    text = f"files: {{local_paths: true, allowed_dirs: ['{shared}']}}\n"
    harness = Harness(config_of(tmp_path, text))
    harness.initialize()
    assert "result" in harness.call({"query": "q", "files": [str(shared / "shot.png")]})
    reply = harness.call({"query": "q", "files": [str(tmp_path / "cwd.png")]}, request_id="c2")
    assert "outside the allowed directories" in reply["error"]["message"]


# -- attacked: a prompt-injected agent after the keys --------------------------------------------


def test_a_prompt_injected_agent_gets_no_key_out(spawn, fake, tmp_path):
    """The server runs in the user's home (a client started there): every route to the SSH key,
    the process environment (which holds the API key) and /etc/passwd is refused, and nothing
    is sent upstream."""
    (tmp_path / ".ssh").mkdir()
    (tmp_path / ".ssh" / "id_rsa").write_bytes(KEY_BLOCK)
    (tmp_path / "notes.md").symlink_to("/proc/self/environ")
    (tmp_path / "keys").symlink_to(tmp_path / ".ssh")
    (tmp_path / "copy.txt").write_bytes(KEY_BLOCK)
    server = start(spawn, fake, env={"HOME": str(tmp_path)})
    attempts = [
        "~/.ssh/id_rsa",
        str(tmp_path / ".ssh" / "id_rsa"),
        "keys/id_rsa",
        ".SSH/ID_RSA",
        "/proc/self/environ",
        "/proc/self/cwd/.ssh/id_rsa",
        "notes.md",
        "/etc/passwd",
        "../../../../../../etc/passwd",
        "file:///etc/passwd",
        "copy.txt",
        "/dev/zero",
    ]
    for path in attempts:
        reply = server.call("answer", {"query": "summarise", "files": [path]}, timeout=30)
        assert "refused" in failure_of(reply), (path, reply)
    assert fake.requests == []
    assert TEST_KEY not in server.stderr


def test_a_path_too_long_to_open_is_refused_before_it_is_resolved(tmp_path, project, monkeypatch):
    """Issue 39: resolving and matching a path costs per component (80 KB of "a/" took 0.26 s of
    CPU, and a message may be 16 MiB). Nothing longer than PATH_MAX is resolved, opened or
    shown whole."""
    resolved = []
    monkeypatch.setattr(os.path, "realpath", lambda path, **kw: resolved.append(path) or path)
    given = "a/" * 3_000 + "x.log"
    opened = Opened(monkeypatch)
    message = refused(tmp_path, project, given)
    assert message == f"{'a/' * 79}a…: refused, a path of more than 4096 characters"
    assert opened.paths == [] and all(len(path) < 4096 for path in resolved)


def test_a_crafted_jpeg_cannot_spin_the_size_reader(tmp_path, project):
    """Ten megabytes of empty JPEG segments: the size is looked for in the first segments only,
    and the image counts as the formula's most."""
    (project / "bomb.jpg").write_bytes(b"\xff\xd8\xff" + b"\xff\xe0\x00\x02" * 2_500_000)
    (kind, value), took = bounded(lambda: read(tmp_path, project, "bomb.jpg"), 10)
    assert kind == "ok" and value[0].tokens == m.URL_IMAGE_TOKENS
    assert took < 5


# -- attacks and careless calls (found by trying to break the reader) ------------------------------


def test_an_image_of_unknown_size_counts_as_the_tile_formulas_true_most():
    sides = range(64, 4200, 64)
    most = max(m.image_tokens((w, h), "high") for w in sides for h in sides)
    assert most == m.image_tokens((768, 2048), "high") == 1445
    assert most <= m.image_tokens(None, "high") and most <= m.URL_IMAGE_TOKENS


def test_a_text_files_estimate_counts_its_name_as_the_fake_bills_it(tmp_path, project):
    from fake_upstream import input_tokens_of

    name = "n" * 200 + ".txt"
    (project / name).write_text("x", encoding="utf-8")
    (found,) = read(tmp_path, project, name)
    assert found.tokens >= input_tokens_of([{"role": "user", "content": [found.part]}])


def test_a_hard_link_to_the_servers_own_config_is_never_sent(tmp_path, project):
    config = config_of(tmp_path, "cache: {ttl_s: 0}\n")
    os.link(config.path, project / "notes.yaml")
    with pytest.raises(m.FileRefused, match="the server's own"):
        m.FileReader(config).read(["notes.yaml"], m.allowed_dirs(config, [str(project)]))


def test_roots_that_are_relative_or_hold_a_nul_are_ignored(tmp_path, project):
    result = {
        "roots": [
            {"uri": "file:relative/dir"},
            {"uri": f"file://{project}%00x"},
            {"uri": f"file://{project}"},
        ]
    }
    roots = m.roots_from(result)
    assert roots == [str(project)]
    config = config_of(tmp_path)
    assert m.allowed_dirs(config, [*roots, "/tmp/a\x00b"]) == [str(project)]


def object_stream_pdf(pages: int, inflated: bytes | None = None, held: int | None = None) -> bytes:
    """A PDF 1.5 whose page objects are all compressed in one object stream (as pdfTeX and
    most producers write them): its plain bytes show no /Type /Page at all. `held`: the
    objects its dictionary says it holds (/N), its pages by default."""
    import zlib

    objects = b"".join(b"<< /Type /Page /Parent 1 0 R >>\n" for _ in range(pages))
    body = zlib.compress(inflated if inflated is not None else objects)
    held = pages if held is None else held
    head = f"<< /Type /ObjStm /N {held} /First 0 /Filter /FlateDecode /Length {len(body)} >>"
    return (
        b"%PDF-1.7\n1 0 obj\n"
        + head.encode()
        + b"\nstream\n"
        + body
        + b"\nendstream\nendobj\n%%EOF\n"
    )


def many_streams_pdf(streams: int, pad: int = 700, zeros: int = 1 << 20) -> bytes:
    """Issue 39's crafted PDF: `streams` (odd) object streams of one object each, every other
    one a real page; the others each start one zlib stream that runs on through everything after it
    (stored blocks over the next streams' bytes, then `zeros` compressed to a few KB at the
    end). Inflating each stream from its start to the end of the file costs streams x (size +
    zeros) and finds no end; each from its own bytes, the size once."""
    import zlib

    def stored(payload: bytes) -> bytes:  # one stored deflate block, not the last
        return b"\x00" + struct.pack("<HH", len(payload), len(payload) ^ 0xFFFF) + payload

    head = b"<< /Type /ObjStm /N 1 /First 0 >>\nstream\n"
    page = head + zlib.compress(b"<< /Type /Page /Parent 1 0 R >>\n") + b"\nendstream\n"
    between = b"\nendstream\n" + b" " * pad + b"\n" + page + b" " * pad + b"\n" + head
    blocks = b"".join(stored(between + b"\x78\x01") for _ in range(streams // 2 - 1))
    bomb = zlib.compressobj(9, zlib.DEFLATED, -15)
    tail = bomb.compress(b"\0" * zeros) + bomb.flush() + b"\nendstream\n"
    return b"%PDF-1.7\n" + head + b"\x78\x01" + blocks + stored(between) + tail + b"%%EOF\n"


class ZlibFed:
    """How many bytes pdf_pages feeds zlib's inflaters, and how many it asks of them."""

    def __init__(self, monkeypatch):
        import zlib

        self.fed = 0
        real, outer = zlib.decompressobj, self

        class Counting:
            def __init__(self):
                self._inflater = real()

            def decompress(self, data, max_length=0):
                outer.fed += len(data)
                return self._inflater.decompress(data, max_length)

            def __getattr__(self, name):
                return getattr(self._inflater, name)

        monkeypatch.setattr(zlib, "decompressobj", Counting)


def test_a_pdfs_pages_in_object_streams_are_counted(tmp_path, project):
    (project / "paper.pdf").write_bytes(object_stream_pdf(40))
    (found,) = read(tmp_path, project, "paper.pdf")
    assert found.tokens == 40 * m.PDF_PAGE_TOKENS


def test_an_object_stream_too_big_to_inflate_counts_every_object_as_a_page(monkeypatch):
    monkeypatch.setattr(m, "PDF_INFLATE_BYTES", 1000)
    assert m.pdf_pages(object_stream_pdf(300)) == 300  # its /N: never fewer than it holds
    assert m.pdf_pages(object_stream_pdf(7, inflated=b"\0" * 10_000)) == 7


def test_a_pdf_crafted_with_many_object_streams_is_counted_at_once_as_its_worst_case():
    crafted = b"%PDF-1.7\n" + b"<</Type/ObjStm/N 1>>stream\n" * 400_000  # 10 MB
    assert m.pdf_pages(crafted) >= len(crafted)


def test_counting_a_crafted_pdfs_pages_feeds_zlib_the_file_once(monkeypatch):
    """Issue 39: a 750 KB PDF whose object streams were each inflated to the end of the file
    cost seconds of CPU. Each is inflated from its own bytes: zlib reads at most the file, and
    the count is high, never low: the 499 real pages, and each of the 500 streams that cannot
    be read whole counted by the objects it says it holds."""
    crafted = many_streams_pdf(999)
    assert len(crafted) < 800_000 and crafted.count(b"/Type /ObjStm") == 999
    fed = ZlibFed(monkeypatch)
    assert m.pdf_pages(crafted) == 999
    assert 0 < fed.fed <= len(crafted)


def test_a_pdf_inflating_past_a_small_multiple_of_its_size_counts_its_objects(monkeypatch):
    # 3 pages in 4 MB of zeros: a 4 KB file asking for a thousand times its size.
    bomb = object_stream_pdf(3, inflated=b"<< /Type /Page >>" * 3 + b"\0" * (4 << 20), held=9)
    assert len(bomb) < 8_000
    assert m.pdf_pages(bomb) == 9  # its /N: the bound was hit, so high, never low
    monkeypatch.setattr(m, "PDF_INFLATE_RATIO", 1_000)
    assert m.pdf_pages(bomb) == 3


def test_the_inflate_bound_is_for_all_of_a_pdfs_streams_together(monkeypatch):
    one = object_stream_pdf(1, inflated=b"<< /Type /Page >>" + b" " * 600, held=5)
    two = one + one.removeprefix(b"%PDF-1.7\n")  # two such streams, 617 bytes inflated each
    monkeypatch.setattr(m, "PDF_INFLATE_BYTES", 1_000)
    assert m.pdf_pages(one) == 1
    assert m.pdf_pages(two) == 1 + 5  # the second finds 383 bytes left: its /N counts


def test_a_pdf_whose_time_runs_out_counts_its_unread_streams_by_their_objects(monkeypatch):
    pdf = object_stream_pdf(3, held=9)
    assert m.pdf_pages(pdf) == 3
    monkeypatch.setattr(m, "PDF_COUNT_S", 0.0)
    fed = ZlibFed(monkeypatch)
    assert m.pdf_pages(pdf) == 9 and fed.fed == 0


def test_a_utf16_log_is_refused_saying_to_save_it_as_utf8(tmp_path, project):
    (project / "build.log").write_text("error: E0425\r\n", encoding="utf-16")  # with its BOM
    assert "build.log: refused, UTF-16 text (save it as UTF-8 to send it)" in refused(
        tmp_path, project, "build.log"
    )


# -- a page count a crafted PDF cannot lower (issue 39, review 6) ----------------------------------


def pages_pdf(page: bytes, pages: int = 200) -> bytes:
    """A PDF of `pages` plain page objects, each `page` (as pdfium and pypdf read it)."""
    body = b"".join(b"%d 0 obj\n%s\nendobj\n" % (3 + n, page) for n in range(pages))
    return b"%PDF-1.7\n" + body + b"%%EOF\n"


def stream_pdf(pages: int, head: bytes, encode=None, page=b"<</Type/Page/Parent 2 0 R>>") -> bytes:
    """One object stream of `pages` page objects under the dictionary `head` (its /Length
    added), its bytes `encode`d (zlib by default)."""
    import zlib

    pairs = b"".join(b"%d %d " % (3 + n, n * (len(page) + 1)) for n in range(pages))
    body = (encode or zlib.compress)(pairs + b" ".join([page] * pages))
    dictionary = head.replace(b">>", b"/First %d/Length %d>>" % (len(pairs), len(body)))
    return b"%PDF-1.7\n1 0 obj\n" + dictionary + b"\nstream\n" + body + b"\nendstream\nendobj\n"


@pytest.mark.parametrize(
    "page",
    [
        b"<< /Type /P#61ge /Parent 2 0 R >>",  # a name's character as #xx: /P#61ge is /Page
        b"<< /T#79pe /Page /Parent 2 0 R >>",
        b"<< /Type /#50#61#67#65 >>",
        b"<< /Type\x00/Page >>",  # NUL is whitespace to a PDF reader
        b"<</Type/Page>>",
    ],
)
def test_a_pdfs_pages_are_counted_however_their_names_are_spelt(page):
    """Review 6: pdfium and pypdf read 200 pages in each of these; the count saw 1, so a
    200-page PDF was priced as one page."""
    assert m.pdf_pages(pages_pdf(page)) == 200


@pytest.mark.parametrize(
    "node", [b"<< /Type /Pages >>", b"<< /Type /Page#73 >>", b"<</Type/Pagex>>"]
)
def test_a_page_tree_node_or_another_name_is_no_page(node):
    assert m.pdf_pages(pages_pdf(node)) == 1


@pytest.mark.parametrize(
    "head",
    [
        b"<</Type/Obj#53tm/N 200/Filter/FlateDecode>>",
        # a long dictionary: its stream is read (its /N alone would say 250)
        b"<</Type/ObjStm/N 250/Filter/FlateDecode/Note (" + b"x" * 2000 + b")>>",
        b"<</N 200/Filter/Fl/Type/ObjStm>>",
        b"<</Type/ObjStm/N 200/Filter[/FlateDecode]/Length 1>>",
    ],
)
def test_an_object_streams_pages_are_counted_however_its_dictionary_is_written(head):
    assert m.pdf_pages(stream_pdf(200, head)) == 200


def test_an_object_streams_data_begins_on_the_line_after_its_keyword():
    """Review 6: pdfium reads `stream X` as the keyword (its data on the next line), 200 pages
    here; the count took endstream's line for it and read a decoy of none there."""
    import zlib

    pdf = stream_pdf(200, b"<</Type/ObjStm/N 250/Filter/FlateDecode>>")
    decoy = b"\nendstream\n" + zlib.compress(b"1 0 <<>>") + b"\nendobj\n"
    crafted = pdf.replace(b">>\nstream\n", b">>\nstream X\n").replace(
        b"\nendstream\nendobj\n", decoy
    )
    assert m.pdf_pages(crafted) == 200


@pytest.mark.parametrize(
    "head, encode",
    [
        (b"<</Type/ObjStm/N 200/Filter[/FlateDecode/FlateDecode]>>", "twice"),
        (b"<</Type/ObjStm/N 200/Filter[/FlateDecode/ASCIIHexDecode]>>", "hex"),
        (b"<</Type/ObjStm/N 200/Filter/FlateDecode/DecodeParms<</Predictor 12>>>>", "twice"),
    ],
)
def test_an_object_stream_zlib_alone_cannot_decode_counts_every_object_as_a_page(head, encode):
    """Review 6: inflated once, these showed no page (zlib's output is more zlib, or hex, or
    predictor rows), so 200 pages counted as none; a reader applies every filter."""
    import zlib

    twice = {"twice": lambda raw: zlib.compress(zlib.compress(raw))}
    twice["hex"] = lambda raw: zlib.compress(raw.hex().encode())
    assert m.pdf_pages(stream_pdf(200, head, twice[encode])) == 200


@pytest.mark.parametrize(
    "n",
    [b"9 0 R", b"200 /X [/N 1]", b"1 /X [/N 200]", b"%c\n200 /X [/N 1]"],
    ids=["reference", "decoy", "decoy-first", "comment"],
)
def test_an_unread_object_streams_objects_are_its_largest_n_or_unknown(monkeypatch, n):
    monkeypatch.setattr(m, "PDF_INFLATE_BYTES", 100)  # left unread: counted by its /N
    pdf = stream_pdf(200, b"<</Type/ObjStm/N " + n + b"/Filter/FlateDecode>>")
    assert m.pdf_pages(pdf) >= 200


def test_a_pdf_with_a_comment_between_a_key_and_its_value_counts_as_its_worst_case():
    crafted = pages_pdf(b"<< /Type%no producer writes this\n/Page >>")
    assert m.pdf_pages(crafted) >= 200  # a page a byte: the searches do not read past comments
    assert m.pdf_pages(pages_pdf(b"<< /Type /Page >> % page 1")) == 200


def test_bytes_like_a_comment_after_n_in_compressed_data_are_no_crafted_file():
    """Review 6: `/N%` is three bytes a large PDF's compressed data holds by chance (one in
    16 million): anywhere but near an object stream they do not make a page a byte."""
    image = b"<</Filter/DCTDecode/Length 9>>stream\n\xff/N%\x00\x01\xfe\nendstream\n"
    assert m.pdf_pages(pages_pdf(b"<< /Type /Page >>", pages=3) + image) == 3


def test_counting_a_crafted_pdfs_names_costs_about_reading_it():
    for crafted in (
        b"%PDF-1.7\n" + b"/Type " * 1_500_000,
        b"%PDF-1.7\n" + b"/#54#79#70#65 " * 600_000,
        b"%PDF-1.7\n<</Type/ObjStm " + b"/N 1 " * 1_500_000 + b">>stream\nx",
        b"%PDF-1.7\n" + b"/Type%" * 16 + b"x" * (8 << 20),
        b"%PDF-1.7\n<</Type/ObjStm/N 1>>" + b" stream" * 1_500_000,  # no end of line
    ):
        started = time.process_time()
        m.pdf_pages(crafted)
        assert time.process_time() - started < 3.0


def test_a_pdf_whose_pages_are_spelt_otherwise_is_priced_by_its_pages(spawn, fake, tmp_path):
    """Review 6, through the server: 200 pages as /P#61ge are 300,000 tokens, $0.30 at
    answer's price, not one page's $0.0015; a $0.05 budget refuses it before anything is sent."""
    (tmp_path / "deck.pdf").write_bytes(pages_pdf(b"<< /Type /P#61ge >>"))
    (tmp_path / "one.pdf").write_bytes(pages_pdf(b"<< /Type /P#61ge >>", pages=1))
    fake.enqueue(Reply(text="one page"))
    server = start(spawn, fake, config="budget: {daily_usd: 0.05}\n")
    assert "result" in server.call("answer", {"query": "q", "files": ["one.pdf"]})
    reply = server.call("answer", {"query": "q", "files": ["deck.pdf"]})
    assert failure_of(reply).startswith("answer failed: daily budget of $0.05 has no room")
    assert len(fake.requests) == 1


# -- a private key base64-encoded whole (review 6) -------------------------------------------------

RSA_BLOCK = (
    b"-----BEGIN RSA PRIVATE KEY-----\n"
    b"MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun\n"
    b"-----END RSA PRIVATE KEY-----\n"
)
CERT_BLOCK = b"-----BEGIN CERTIFICATE-----\nMIIDdzCCAl+gAwIBAgIE\n-----END CERTIFICATE-----\n"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@pytest.mark.parametrize(
    "text",
    [
        # kubeadm's admin.conf, a kubeconfig under any name: the cluster admin's key
        "users:\n- name: admin\n  user:\n    client-key-data: " + b64(RSA_BLOCK) + "\n",
        # a Kubernetes Secret whose tls.key holds the chain then the key (any alignment)
        "data:\n  tls.key: " + b64(CERT_BLOCK + RSA_BLOCK) + "\n",
        "data:\n  tls.key: " + b64(b"x" + CERT_BLOCK + RSA_BLOCK) + "\n",
        "data:\n  tls.key: " + b64(b"xy" + CERT_BLOCK + RSA_BLOCK) + "\n",
        "SSH_KEY=" + b64(KEY_BLOCK) + "\n",  # a CI variable
        "deploy_key: " + KEY_BLOCK.decode().splitlines()[1] + "\n",  # a body without armour
    ],
    ids=["kubeconfig", "chain-then-key", "shifted-1", "shifted-2", "ci-variable", "bare-body"],
)
def test_a_private_key_base64_encoded_whole_is_refused(tmp_path, project, text):
    """Review 6: a kubeconfig's client-key-data (kubeadm's admin.conf) or a Secret's tls.key is
    the key base64-encoded, which no PEM header search sees: it was sent."""
    (project / "admin.conf").write_text(text, encoding="utf-8")
    assert refused(tmp_path, project, "admin.conf") == (
        "admin.conf: refused, it holds a private key or API key"
    )


def test_a_certificate_base64_encoded_is_sent(tmp_path, project):
    ca = "clusters:\n- cluster:\n    certificate-authority-data: " + b64(CERT_BLOCK) + "\n"
    (project / "kind.yaml").write_text(ca, encoding="utf-8")
    (found,) = read(tmp_path, project, "kind.yaml")
    assert found.kind == "text"


# -- a data: URL's payload, however malformed, is never echoed (review 6) -------------------------

PAYLOAD = base64.b64encode(b"db_password=hunter2-correct-horse\n").decode()


@pytest.mark.parametrize(
    "given",
    [
        "data:" + PAYLOAD,  # no type, no comma: all of it payload
        "data:text/plain;base64 " + PAYLOAD,  # a space for the comma
        "data:text/plain;base64;" + PAYLOAD,
        '"data:text/plain;base64,' + PAYLOAD + '"',  # pasted with its quotes: a path
        "data:" + PAYLOAD + ";base64,AAAA",  # its payload where the type goes
    ],
)
def test_a_malformed_data_urls_payload_is_never_echoed(spawn, fake, given):
    """Review 6: the label of a data: URL was everything before its first comma, so one
    without a comma (or with a quote before it, taken for a path) showed its payload in the
    error line; it shows `data:`, a declared type and `;base64` only."""
    server = start(spawn, fake)
    message = failure_of(server.call("answer", {"query": "q", "files": [given]}))
    assert "refused" in message
    for at in range(0, len(PAYLOAD) - 8):
        assert PAYLOAD[at : at + 8] not in message
    assert PAYLOAD[:8] not in server.stderr and not fake.requests


@pytest.mark.parametrize(
    "pages, config",
    [
        # Priority processing bills input at twice the rate: 30,000 tokens are $0.06, not $0.03.
        (20, "model_profiles: {answer: {service_tier: priority}}\nbudget: {daily_usd: 0.05}\n"),
        # Over 272K input tokens GPT-6 bills all input at twice the rate: $0.57, not $0.285.
        (190, "budget: {daily_usd: 0.40}\n"),
    ],
    ids=["priority", "long-context"],
)
def test_a_files_estimate_is_at_the_rate_the_request_is_billed(
    spawn, fake, tmp_path, pages, config
):
    """Review 6: the files' estimate took the Standard input rate whatever the profile's tier
    and however many tokens the files made, so either halved what a budget reserved for them."""
    (tmp_path / "spec.pdf").write_bytes(pages_pdf(b"<< /Type /Page >>", pages=pages))
    server = start(spawn, fake, config=config)
    reply = server.call("answer", {"query": "q", "files": ["spec.pdf"]})
    assert failure_of(reply).startswith("answer failed: daily budget of $")
    assert not fake.requests
