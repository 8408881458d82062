"""The command line: help, version, usage errors, --show-config, --model and the one-shot --ask."""

from __future__ import annotations

import json
import os
import re
import select
import subprocess
import sys
import time

import pytest
from conftest import PROGRAM, ROOT, SCRIPT, TEST_KEY, base_env, run_cli, show_config
from fake_upstream import DEFAULT_TEXT, Reply

import openai_responses_mcp as mcp

APP = "openai-responses-mcp"
OPENAI_IMPORT = re.compile(r"\|\s*openai(\.|\s*$)")


def ask(tmp_path, fake, *args, env=None):
    return run_cli(tmp_path, "--ask", *args, env={"OPENAI_BASE_URL": fake.base_url, **(env or {})})


def assert_usage_error(proc, *words: str) -> None:
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.startswith("usage: ")
    for word in words:
        assert word in proc.stderr


# -- help and version -------------------------------------------------------------------------


def test_help_prints_usage_on_stdout_and_exits_0(tmp_path):
    proc = run_cli(tmp_path, "--help")
    assert proc.returncode == 0
    assert proc.stdout.startswith("usage: ")
    for option in ("--stdio", "--config", "--show-config", "--debug", "--model", "--ask"):
        assert option in proc.stdout
    assert proc.stderr == ""


def test_no_arguments_prints_help_and_exits_0(tmp_path):
    proc = run_cli(tmp_path)
    assert proc.returncode == 0
    assert proc.stdout == run_cli(tmp_path, "--help").stdout


def test_version_prints_name_and_version(tmp_path):
    proc = run_cli(tmp_path, "--version")
    assert proc.returncode == 0
    assert proc.stdout == f"{APP} {mcp.__version__}\n"


def test_version_matches_semantic_versioning():
    assert re.fullmatch(r"\d+\.\d+\.\d+([-+.][0-9A-Za-z.+-]+)?", mcp.__version__)


# -- one flag table: parse_args, did-you-mean, --help and docs/cli.md (issue 40) -------------


def _label(row: dict) -> str:
    return f"{row['names'][0]} {row['metavar']}".strip()


def _docs_flag_rows() -> list[tuple[str, list[str]]]:
    """docs/cli.md's flag rows: (the form in its first backticks, every flag its cell names)."""
    text = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    rows = []
    for line in text.splitlines():
        if line.startswith("| `-"):
            cell = line[2:].split(" | ", 1)[0].replace("\\|", "|")
            rows.append((cell.split("`")[1], re.findall(r"`(--?[A-Za-z][\w-]*)", cell)))
    return rows


def test_docs_cli_has_a_row_for_every_flag_of_the_table_and_no_other():
    """Issue 40: --help omitted -h and -V; docs/cli.md and the table now agree both ways, the
    form (flag and metavar) of each row included."""
    rows = _docs_flag_rows()
    documented = {name for _, names in rows for name in names}
    assert documented == set(mcp.FLAGS), documented ^ set(mcp.FLAGS)
    assert {form for form, _ in rows} == {_label(row) for row in mcp.FLAG_TABLE}
    assert {"-h", "-V"} <= documented


@pytest.mark.parametrize("short", ["-h", "-V"])
def test_help_names_every_flag_short_forms_and_every_tool(tmp_path, short):
    """Issue 40: --help omitted answer_deep, -h and -V. Every FLAG_TABLE row is a line of the
    help (each name in it, in the usage too), and every tool of TOOL_TABLE is named."""
    proc = run_cli(tmp_path, short)
    assert proc.returncode == 0 and proc.stderr == ""
    if short == "-V":
        assert proc.stdout == run_cli(tmp_path, "--version").stdout
        return
    shown = proc.stdout
    assert shown == run_cli(tmp_path, "--help").stdout
    lines = [line + " " for line in shown.splitlines() if line.startswith("  -")]
    for row in mcp.FLAG_TABLE:
        short_first = ", ".join(sorted(row["names"], key=len))
        label = f"  {short_first} {row['metavar']}".rstrip() + " "  # then its help, or a newline
        assert any(line.startswith(label) for line in lines), row["names"]
        for name in row["names"]:
            assert re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", mcp.USAGE), name
    about = " ".join(shown.split("\n\n")[1].split())  # the paragraph after the usage
    tool_help = " ".join(shown.split("  --tool NAME")[1].split("\n\n")[0].split("\n  -")[0].split())
    for tool in mcp.TOOL_NAMES:
        for said in (about, tool_help):
            assert re.search(rf"\b{tool}\b", said), (tool, said)
    assert "answer_deep (when tools.answer_deep is on)" in tool_help


def test_every_other_name_for_a_flag_names_one_of_the_table():
    """FLAG_ALIASES (--query: --ask) must point at a flag parse_args knows."""
    assert set(mcp.FLAG_ALIASES.values()) <= set(mcp.FLAGS)
    assert not set(mcp.FLAG_ALIASES) & set(mcp.FLAGS)  # nor shadow one


@pytest.mark.parametrize(
    "row", [row for row in mcp.FLAG_TABLE if row["with"]], ids=lambda row: row["names"][0]
)
def test_what_a_flag_goes_with_in_its_help_is_what_parse_args_requires(row):
    name = row["names"][0]
    value = {"--since": "2026-11-01", "--tool": "answer"}.get(name, "5")  # a value it takes
    argv = [name] if row["kind"] in ("switch", "setting") else [name, value]
    with pytest.raises(mcp.UsageError) as caught:
        mcp.parse_args(argv)
    assert str(caught.value) == f"{name} goes with {row['with']}"


# -- usage errors -----------------------------------------------------------------------------


def test_unknown_option_prints_usage_on_stderr_and_exits_2(tmp_path):
    assert_usage_error(run_cli(tmp_path, "--stdio", "--frobnicate"), "--frobnicate")


def test_config_without_value_exits_2(tmp_path):
    assert_usage_error(run_cli(tmp_path, "--show-config", "--config"), "--config")


def test_model_with_empty_value_exits_2(tmp_path):
    assert_usage_error(run_cli(tmp_path, "--show-config", "--model", ""), "--model")


def test_tool_without_ask_exits_2(tmp_path):
    assert_usage_error(run_cli(tmp_path, "--stdio", "--tool", "answer_quick"), "--tool")


def test_unknown_tool_for_ask_exits_2(tmp_path):
    assert_usage_error(run_cli(tmp_path, "--ask", "q", "--tool", "answer_slow"), "answer_quick")


def test_ask_and_stdio_together_exit_2(tmp_path):
    assert_usage_error(run_cli(tmp_path, "--ask", "q", "--stdio"), "--ask")


def test_options_without_an_action_exit_2(tmp_path):
    assert_usage_error(run_cli(tmp_path, "--model", "gpt-5-mini"), "--stdio")


# -- --show-config ----------------------------------------------------------------------------


def test_show_config_prints_json_to_stderr_and_nothing_to_stdout(tmp_path):
    shown = show_config(run_cli(tmp_path, "--show-config"))
    assert shown["version"] == mcp.__version__
    assert shown["system_policy_rev"] == mcp.SYSTEM_POLICY_REV
    assert shown["config"]["request"]["timeout_ms"] == 300_000
    assert set(shown["profiles"]) == {"answer", "answer_detailed", "answer_quick"}
    # Each tool has a model of its own.
    assert shown["profiles"]["answer_quick"]["model"] == "gpt-6-luna"
    assert shown["config"]["model_profiles"]["answer"]["model"] == "gpt-6.1-terra"
    assert shown["sources"]["request.timeout_ms"] == "default"


def test_show_config_never_prints_the_api_key(tmp_path):
    proc = run_cli(tmp_path, "--show-config", "--debug")
    assert proc.returncode == 0
    assert TEST_KEY not in proc.stderr + proc.stdout


def test_show_config_says_whether_the_api_key_is_set_never_what_it_is(tmp_path):
    shown = show_config(run_cli(tmp_path, "--show-config"))
    assert shown["api_key"] == "set (OPENAI_API_KEY)"
    assert TEST_KEY not in json.dumps(shown)
    unset = show_config(run_cli(tmp_path, "--show-config", env={"OPENAI_API_KEY": ""}))
    assert unset["api_key"] == "not set (OPENAI_API_KEY)"


def test_show_config_names_the_configured_key_variable(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text("openai:\n  api_key_env: TEAM_OPENAI_KEY\n", encoding="utf-8")
    proc = run_cli(tmp_path, "--show-config", "--config", str(path), env={"TEAM_OPENAI_KEY": "k"})
    assert show_config(proc)["api_key"] == "set (TEAM_OPENAI_KEY)"


def test_serving_without_an_api_key_warns_on_stderr_and_keeps_serving(spawn):
    server = spawn(env={"OPENAI_API_KEY": ""})
    assert server.initialize()["result"]["serverInfo"]["name"] == APP
    message = server.call("answer", {"query": "q"})["error"]["message"]
    assert message.startswith("answer failed: no API key: set OPENAI_API_KEY")
    server.close_stdin()
    assert server.wait() == 0
    (warning,) = [line for line in server.stderr.splitlines() if "warning" in line]
    assert warning.startswith(f"{APP}: warning: no API key: set OPENAI_API_KEY in the environment")


def test_serving_with_an_api_key_gives_no_key_warning(spawn):
    server = spawn()
    server.initialize()
    server.close_stdin()
    assert server.wait() == 0
    assert "API key" not in server.stderr


def test_show_config_with_stdio_prints_config_then_serves(spawn):
    server = spawn("--show-config", "--stdio")
    reply = server.initialize()
    assert reply["result"]["serverInfo"]["name"] == APP
    server.close_stdin()
    assert server.wait() == 0
    shown = json.loads(server.stderr[server.stderr.index("{") : server.stderr.rindex("}") + 1])
    assert shown["version"] == mcp.__version__
    assert "sources" in shown


# -- --model ----------------------------------------------------------------------------------


def test_model_flag_overrides_answer_model_in_show_config(tmp_path):
    shown = show_config(
        run_cli(tmp_path, "--show-config", "--model", "gpt-5-mini", env={"MODEL_ANSWER": "o3"})
    )
    assert shown["config"]["model_profiles"]["answer"]["model"] == "gpt-5-mini"
    assert shown["profiles"]["answer"]["model"] == "gpt-5-mini"
    assert shown["sources"]["model_profiles.answer.model"] == "flag --model"


def test_model_flag_is_the_model_the_upstream_receives(spawn, fake):
    server = spawn("--stdio", "--model", "gpt-5-mini", upstream=fake)
    server.initialize()
    reply = server.call("answer", {"query": "hi"})
    assert "result" in reply, reply
    assert fake.requests[0].body["model"] == "gpt-5-mini"


# -- --ask: one question from the command line ------------------------------------------------


def test_ask_prints_the_answer_json_on_stdout_and_exits_0(tmp_path, fake):
    proc = ask(tmp_path, fake, "What does HTTP 404 mean?")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["answer"].startswith(DEFAULT_TEXT)
    assert result["used_search"] is False
    assert result["citations"] == []
    assert result["model"].startswith("gpt-6.1-terra")
    (request,) = fake.requests
    assert request.body["input"].startswith("What does HTTP 404 mean?")
    assert request.authorized_with(TEST_KEY)


def test_ask_with_model_flag_sends_that_model(tmp_path, fake):
    proc = ask(tmp_path, fake, "hi", "--model", "gpt-5-nano")
    assert proc.returncode == 0, proc.stderr
    assert fake.requests[0].body["model"] == "gpt-5-nano"


def test_ask_with_tool_answer_quick_uses_the_quick_profile(tmp_path, fake):
    config = tmp_path / "config.yaml"
    config.write_text(
        "model_profiles:\n"
        "  answer: {model: gpt-5.2, reasoning_effort: high, verbosity: high}\n"
        "  answer_quick: {model: gpt-5-mini, reasoning_effort: medium, verbosity: low}\n",
        encoding="utf-8",
    )
    proc = ask(tmp_path, fake, "hi", "--tool", "answer_quick", "--config", str(config))
    assert proc.returncode == 0, proc.stderr
    body = fake.requests[0].body
    assert body["model"] == "gpt-5-mini"
    assert body["reasoning"] == {"effort": "medium"}
    assert body["text"] == {"verbosity": "low"}


def test_ask_in_a_completion_window_says_first_that_it_may_take_hours(tmp_path, fake):
    config = tmp_path / "config.yaml"
    config.write_text("model_profiles:\n  answer: {completion_window: 8h}\n", encoding="utf-8")
    fake.window_polls = 0
    proc = ask(tmp_path, fake, "hi", "--config", str(config))
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.splitlines()[0].endswith(
        "answer runs in the 8h window (model_profiles.answer.completion_window): the answer "
        "may take up to 8 hours; Ctrl-C cancels it"
    )
    assert fake.requests[0].body["background_options"] == {"completion_window": "8h"}


def test_ask_failure_prints_answer_failed_on_stderr_and_exits_1(tmp_path, fake):
    fake.enqueue(Reply(status=401))
    proc = ask(tmp_path, fake, "hi")
    assert proc.returncode == 1
    assert proc.stdout == ""
    line = proc.stderr.strip()
    assert line.startswith("answer failed: ")
    assert "\n" not in line
    assert "OPENAI_API_KEY" in line
    assert TEST_KEY not in proc.stderr


def test_ask_without_api_key_exits_1_naming_the_variable(tmp_path, fake):
    env = base_env(tmp_path, OPENAI_BASE_URL=fake.base_url)
    del env["OPENAI_API_KEY"]
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--ask", "hi"],
        capture_output=True,
        text=True,
        env=env,
        cwd=str(tmp_path),
        timeout=30,
    )
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert proc.stderr.startswith("answer failed: ")
    assert "OPENAI_API_KEY" in proc.stderr
    assert fake.requests == []


def test_ask_with_empty_api_key_exits_1_naming_the_variable(tmp_path, fake):
    proc = ask(tmp_path, fake, "hi", env={"OPENAI_API_KEY": "  "})
    assert proc.returncode == 1
    assert "OPENAI_API_KEY" in proc.stderr
    assert fake.requests == []


def test_ask_with_empty_query_exits_2(tmp_path, fake):
    proc = ask(tmp_path, fake, "")
    assert proc.returncode == 2
    assert fake.requests == []


# -- what must not import openai --------------------------------------------------------------


@pytest.mark.parametrize("args", [["--help"], ["--version"], ["--show-config"]], ids=str)
def test_command_does_not_import_openai(tmp_path, args):
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", str(SCRIPT), *args],
        capture_output=True,
        text=True,
        env=base_env(tmp_path),
        cwd=str(tmp_path),
        timeout=30,
    )
    assert proc.returncode == 0, proc.stderr
    imported = [line for line in proc.stderr.splitlines() if OPENAI_IMPORT.search(line)]
    assert imported == []
    assert any(line.startswith("import time:") for line in proc.stderr.splitlines())


# -- what loads before the first answer (issue 34) --------------------------------------------

# Every optional dependency: the extras' drivers and `openai` itself. The test venv has them all
# installed (the "test" extra), so a start that imports one shows here.
OPTIONAL_MODULES = ("psycopg", "psycopg_binary", "psycopg_c", "jwt", "cryptography", "openai")

# Runs the server as the installed entry point does, and writes a marker on stderr right after
# the first bytes reach stdout (the answer to initialize): -X importtime lines before it are
# what the first answer paid for, in order, whatever the machine's load.
MARKED_ENTRY = """\
import os, sys
sys.path.insert(0, {root!r})
write = os.write
def marked(fd, data):
    done = write(fd, data)
    if fd == 1 and not getattr(marked, "seen", False):
        marked.seen = True
        write(2, b"-- initialize answered --\\n")
    return done
os.write = marked
from openai_responses_mcp import main
raise SystemExit(main())
"""


def imports_before_initialize(tmp_path, *args, **env) -> list[str]:
    """The top-level modules imported before initialize was answered, by -X importtime."""
    from conftest import ROOT

    entry = tmp_path / "entry.py"
    entry.write_text(MARKED_ENTRY.format(root=str(ROOT)), encoding="utf-8")
    message = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {}},
    }
    proc = subprocess.run(  # both pipes read at once: importtime fills stderr fast
        [sys.executable, "-X", "importtime", str(entry), "--stdio", *args],
        input=(json.dumps(message) + "\n").encode(),
        capture_output=True,
        env=base_env(tmp_path, **env),
        cwd=str(tmp_path),
        timeout=60,
    )
    reply = json.loads(proc.stdout.splitlines()[0])
    assert reply["result"]["serverInfo"]["name"] == "openai-responses-mcp"
    stderr = proc.stderr.decode()
    before, marker, _ = stderr.partition("-- initialize answered --")
    assert marker, stderr[-2000:]
    names = [line.rpartition("|")[2].strip() for line in before.splitlines()]
    assert "openai_responses_mcp" in names  # importtime was on: the list is real
    return [name for name in names if name.split(".")[0] in OPTIONAL_MODULES]


def test_the_test_environment_has_every_extra_installed():
    import importlib.util

    missing = [
        n for n in ("psycopg", "jwt", "cryptography", "openai") if not importlib.util.find_spec(n)
    ]
    assert missing == [], 'install the test extra: pip install -e ".[test]"'


def test_nothing_optional_loads_before_initialize_is_answered(tmp_path):
    assert imports_before_initialize(tmp_path) == []


def test_nothing_optional_loads_before_initialize_with_a_proxy_url_with_a_password(tmp_path):
    # The secret masker reads every URL it is given; only a PostgreSQL one is a driver's business.
    proxy = "http://user:pass@127.0.0.1:9"
    assert imports_before_initialize(tmp_path, HTTPS_PROXY=proxy, NO_PROXY="*") == []


def test_a_postgresql_state_url_is_the_one_start_that_loads_psycopg(tmp_path):
    # The control: the check above sees a driver when one is loaded (state.url is read and
    # checked at start, so a PostgreSQL URL pays for psycopg; nothing else does).
    (tmp_path / "config.yaml").write_text(
        "state:\n  url: postgresql://u:secret@127.0.0.1:9/db\n", encoding="utf-8"
    )
    loaded = imports_before_initialize(tmp_path, "--config", str(tmp_path / "config.yaml"))
    assert "psycopg.conninfo" in loaded
    assert not [name for name in loaded if name.split(".")[0] in ("jwt", "cryptography", "openai")]


def test_masking_a_value_that_is_no_postgresql_url_loads_no_driver(tmp_path):
    code = (
        "import sys, openai_responses_mcp as m\n"
        "assert m.url_secrets('') == ()\n"
        "assert m.pg_params('') is None and m.pg_params('http://u:p@h/') is None\n"
        "assert m.redact_url('http://u:p@proxy:3128') == 'http://***@proxy:3128'\n"
        "assert m.url_has_secret('http://u:p@proxy:3128')\n"
        "assert m.url_secrets('http://u:p@proxy:3128') == ('p',)\n"
        "print(sorted(n for n in sys.modules if n.startswith('psycopg')))\n"
    )
    from conftest import ROOT

    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=base_env(tmp_path, PYTHONPATH=str(ROOT)),
        timeout=30,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


# -- --print-example ----------------------------------------------------------------------------


def test_print_example_config_writes_the_shipped_config_example(tmp_path):
    from conftest import ROOT

    proc = run_cli(tmp_path, "--print-example", "config")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == (ROOT / "config.yaml.example").read_text(encoding="utf-8")


def test_print_example_policy_is_a_policy_file_that_appends_to_the_builtin_one(tmp_path):
    proc = run_cli(tmp_path, "--print-example", "policy")
    assert proc.returncode == 0, proc.stderr
    (tmp_path / "policy.md").write_text(proc.stdout, encoding="utf-8")
    policy = tmp_path / "policy.md"
    config_text = f"policy:\n  system: {{ source: file, path: '{policy}', merge: append }}\n"
    (tmp_path / "config.yaml").write_text(config_text, encoding="utf-8")
    config = mcp.load_config({"config": str(tmp_path / "config.yaml")}, base_env(tmp_path))
    assert config.instructions.startswith(mcp.SYSTEM_POLICY)
    assert "Team rules" in config.instructions
    assert mcp.sources_headers(config.instructions) == ("参考資料",)


def test_print_example_works_whatever_the_config_file_holds(tmp_path):
    (tmp_path / "bad.yaml").write_text("policy: [unclosed\n", encoding="utf-8")
    proc = run_cli(tmp_path, "--print-example", "policy", "--config", str(tmp_path / "bad.yaml"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == mcp.POLICY_EXAMPLE


def test_print_example_of_something_unknown_exits_2_naming_the_choices(tmp_path):
    proc = run_cli(tmp_path, "--print-example", "policy.md")
    assert_usage_error(proc, "--print-example takes config, policy or policy-replace")


def test_print_example_policy_replace_is_the_builtin_policy_to_edit(tmp_path):
    proc = run_cli(tmp_path, "--print-example", "policy-replace")
    assert proc.returncode == 0, proc.stderr
    policy = tmp_path / "policy.md"
    policy.write_text(proc.stdout, encoding="utf-8")
    config_text = f"policy:\n  system: {{ source: file, path: '{policy}', merge: replace }}\n"
    (tmp_path / "config.yaml").write_text(config_text, encoding="utf-8")
    config = mcp.load_config({"config": str(tmp_path / "config.yaml")}, base_env(tmp_path))
    assert config.instructions.endswith(mcp.SYSTEM_POLICY.strip())  # all of it, to edit
    assert config.instructions.startswith("<!--") and "merge: replace" in config.instructions
    assert mcp.sources_headers(config.instructions) == ()


# -- inert text: what upstream, clients and config files say reaches a terminal escaped --------

EVIL_MODEL = "gpt-x\x1b[2J\x1b]0;pwned\x07\u202eevil\x9b"  # clear screen, retitle, bidi, C1 CSI


def test_inert_json_text_stays_json_that_decodes_to_the_same_strings():
    text = json.dumps({"model": EVIL_MODEL, "answer": "é 中"}, ensure_ascii=False)
    shown = mcp.inert(text, json_text=True)
    assert json.loads(shown) == {"model": EVIL_MODEL, "answer": "é 中"}
    assert shown.isprintable() and "é 中" in shown


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("gpt-5.2", "gpt-5.2"),
        ("é 中 C:\\state \u00a0", "é 中 C:\\state \u00a0"),  # printable text stays as it is
        ("a\x1b[2Jb", "a\\x1b[2Jb"),
        ("a\nb\tc\rd\x00\x7f", "a\\x0ab\\x09c\\x0dd\\x00\\x7f"),
        ("\x9b31m", "\\x9b31m"),
        ("abc\u202edef\u2066\u2028", "abc\\u202edef\\u2066\\u2028"),
    ],
)
def test_inert_escapes_control_characters_and_nothing_else(text, shown):
    assert mcp.inert(text) == shown


def test_usage_shows_long_and_hostile_model_names_whole_escaped_and_aligned():
    row = {**mcp._usage_row_empty(), "calls": 3, "cache_hits": 1, "web_searches": 4, "usd": 0.5}
    long_name = "vendor/an-extremely-long-model-name-from-a-gateway-2026-01-01"
    report = {"since": None, "timezone": "UTC", "state_path": "/s", "total": row}
    report |= {"by_day": [{**row, "day": "2026-11-24"}], "by_tool": [{**row, "tool": "answer"}]}
    report["by_model"] = [{**row, "model": long_name}, {**row, "model": EVIL_MODEL}]
    text = mcp.format_usage(report)
    assert "\x1b" not in text and "\u202e" not in text and "\x9b" not in text
    assert long_name in text and mcp.inert(EVIL_MODEL) in text
    rows = [line for line in text.splitlines() if line.rstrip().endswith("0.5000")]
    assert len(rows) == 5  # a day, two models, a tool and the total
    assert len({line.index(" 3 ") for line in rows}) == 1  # the columns line up
    assert len({len(line) for line in rows}) == 1


def test_a_hostile_model_name_from_upstream_reaches_the_terminal_escaped(tmp_path, fake):
    fake.enqueue(Reply(model=EVIL_MODEL))
    asked = ask(tmp_path, fake, "q")
    assert asked.returncode == 0, asked.stderr
    warning = [line for line in asked.stderr.splitlines() if "no price known" in line]
    assert len(warning) == 1 and "pricing.models.gpt-x\\x1b[2J\\x1b]0;pwned\\x07" in warning[0]
    assert json.loads(asked.stdout)["model"] == EVIL_MODEL  # escaped as JSON, not altered
    usage = run_cli(tmp_path, "--usage")
    assert usage.returncode == 0, usage.stderr
    assert mcp.inert(EVIL_MODEL) in usage.stdout
    usage_json = run_cli(tmp_path, "--usage", "--json")
    assert json.loads(usage_json.stdout)["by_model"][0]["model"] == EVIL_MODEL
    for output in (asked.stderr, asked.stdout, usage.stdout, usage.stderr, usage_json.stdout):
        assert not re.search("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202e]", output), output


def test_log_and_doctor_lines_are_inert(capsys):
    import io

    mcp.Log().say(f"warning: no price known for model {EVIL_MODEL}")
    out = io.StringIO()
    mcp.Doctor(out).warn(f"budget: model {EVIL_MODEL} has no known price", "set it")
    for text in (capsys.readouterr().err, out.getvalue()):
        assert mcp.inert(EVIL_MODEL) in text
        assert all(line.isprintable() for line in text.splitlines())


# -- a terminal that talks back (issue 33): real pseudo-terminals -------------------------------

needs_pty = pytest.mark.skipif(not hasattr(os, "openpty"), reason="needs a pseudo-terminal")
DOCS_URL = "https://docs.python.org/3/whatsnew/"


def read_until(fd: int, want: bytes, timeout: float = 20.0) -> bytes:
    """Bytes from `fd` until `want` is among them, the end, or the timeout."""
    got = b""
    deadline = time.monotonic() + timeout
    while want not in got and time.monotonic() < deadline:
        if not select.select([fd], [], [], 0.1)[0]:
            continue
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # EIO: the terminal's last holder has gone
            break
        if not chunk:
            break
        got += chunk
    return got


@needs_pty
def test_stdio_on_a_terminal_says_at_once_on_stderr_what_it_waits_for(tmp_path):
    master, slave = os.openpty()
    proc = subprocess.Popen(
        [sys.executable, str(SCRIPT), "--stdio"],
        stdin=slave,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=base_env(tmp_path, TERM="dumb", NO_COLOR="1"),
        cwd=str(tmp_path),
    )
    os.close(slave)
    try:
        said = read_until(proc.stderr.fileno(), b"Ctrl-D", timeout=10).decode()
        assert "waiting for an MCP client" in said, said
        assert f"{APP} --ask" in said and f"{APP} --doctor" in said
        os.write(master, b"\x04")  # Ctrl-D: end of input, and the server ends
        out, _ = proc.communicate(timeout=20)
    finally:
        proc.kill() if proc.poll() is None else None
        os.close(master)
    assert out == b"" and proc.returncode == 0


def test_stdio_from_a_pipe_says_nothing_of_terminals(tmp_path):
    proc = run_cli(tmp_path, "--stdio", input="")
    assert proc.returncode == 0 and proc.stdout == ""
    assert "waiting for an MCP client" not in proc.stderr


def ask_on_a_terminal(tmp_path, fake, *args: str) -> str:
    """--ask with stdout on a real terminal: what the terminal shows."""
    master, slave = os.openpty()
    env = base_env(tmp_path, OPENAI_BASE_URL=fake.base_url, TERM="xterm-256color")
    proc = subprocess.Popen(
        [sys.executable, str(SCRIPT), "--ask", "What changed in Python?", *args],
        stdin=subprocess.DEVNULL,
        stdout=slave,
        stderr=subprocess.PIPE,
        env=env,
        cwd=str(tmp_path),
    )
    os.close(slave)
    try:
        shown = read_until(master, b"\x00never", timeout=30)
        assert proc.wait(timeout=20) == 0, proc.stderr.read()
    finally:
        proc.kill() if proc.poll() is None else None
        os.close(master)
    return shown.decode().replace("\r\n", "\n")


@needs_pty
def test_ask_on_a_terminal_prints_the_answer_its_sources_and_a_cost_line(tmp_path, fake):
    citation = {"url": DOCS_URL, "title": "What's New"}
    text = f"Python 3.15 is out.\x1b[31m See {DOCS_URL}."
    fake.enqueue(Reply(text=text, searches=[{"query": "python"}], citations=[citation]))
    shown = ask_on_a_terminal(tmp_path, fake)
    assert shown.startswith("Python 3.15 is out."), shown
    assert "\nSources:\n" in shown and DOCS_URL in shown
    assert "\x1b" not in shown  # text from upstream cannot drive the terminal
    last = shown.rstrip("\n").splitlines()[-1]
    assert last.startswith("-- gpt-6.1-terra") and "web search, 1 citation(s); cost: $" in last
    assert not shown.lstrip().startswith("{")


@needs_pty
def test_ask_with_json_prints_json_even_on_a_terminal(tmp_path, fake):
    shown = ask_on_a_terminal(tmp_path, fake, "--json")
    assert json.loads(shown)["answer"].startswith(DEFAULT_TEXT)


def test_json_with_ask_when_piped_is_the_same_json(tmp_path, fake):
    proc = ask(tmp_path, fake, "What does HTTP 404 mean?", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["answer"].startswith(DEFAULT_TEXT)


# -- words for people: a mistyped flag, an OS error, a bad DEBUG (issue 33) --------------------


@pytest.mark.parametrize(
    ("typed", "meant"),
    [
        ("--doctr", "--doctor"),
        ("--stdoi", "--stdio"),
        ("-stdio", "--stdio"),
        ("--query", "--ask"),  # issue 39: it said --user
        ("--question", "--ask"),
        ("--prompt", "--ask"),
    ],
)
def test_a_mistyped_flag_gets_did_you_mean(tmp_path, typed, meant):
    assert_usage_error(run_cli(tmp_path, typed), f"unknown option '{typed}'; did you mean {meant}?")


@pytest.mark.parametrize(
    ("typed", "meant"),
    [
        ("--versoin", "--version"),  # two neighbours swapped: one edit
        ("--http-tokn", "--http-token"),
        ("--print", "--print-example"),  # the one flag it begins
        ("--verbose", "--debug"),
        ("--attach", "--file"),
        ("--xyz", None),
        ("--querry", None),  # a far guess misleads more than none
    ],
)
def test_did_you_mean_suggests_what_a_person_meant_or_nothing(typed, meant):
    with pytest.raises(mcp.UsageError) as caught:
        mcp.parse_args([typed])
    said = str(caught.value)
    if meant is None:
        assert said.endswith("; --help lists the options"), said
    else:
        assert said.endswith(f"; did you mean {meant}?"), said


@pytest.mark.parametrize(
    ("typed", "meant"),
    [("\u2014ask", "--ask"), ("\u2013doctor", "--doctor"), ("\u2212\u2212jsno", "--json"),
     ("\u2014zzzz", None), ("\u2014", None)],
)  # fmt: skip
def test_a_flag_typed_with_a_typographic_dash_is_named(typed, meant):
    """Issue 39: "—ask" (a word processor's or chat app's dash for "--") got no suggestion, and
    after --ask it was told to quote its question."""
    for argv in ([typed], ["--ask", "q", typed]):
        with pytest.raises(mcp.UsageError) as caught:
            mcp.parse_args(argv)
        said = str(caught.value)
        if meant is None:
            assert "did you mean" not in said, said
        else:
            assert said.endswith(f"; did you mean {meant}? (it starts with a typographic dash, "
                                 "not two hyphens)"), said  # fmt: skip


@pytest.mark.parametrize("typed", ["--json=1", "--doctor=yes", "--stateless=true", "-h=1"])
def test_a_switch_given_a_value_is_told_it_takes_none(typed):
    """Issue 39: `--json=1` was "unknown option '--json'; did you mean --json?"."""
    with pytest.raises(mcp.UsageError) as caught:
        mcp.parse_args(["--ask", "q", typed])
    flag = typed.partition("=")[0]
    assert str(caught.value) == f"{flag} takes no value: give it alone, without '='"


def test_edit_distance_counts_a_swap_of_neighbours_as_one():
    assert mcp._edit_distance("--jsno", "--json") == 1
    assert mcp._edit_distance("--query", "--user") == 3
    assert mcp._edit_distance("", "abc") == 3


@pytest.mark.parametrize(
    "after", [["--json"], ["--doctor"], ["--debug"], ["--doctor", "--live"], ["\u2014json"]]
)
def test_ask_refuses_a_flag_as_its_question_before_anything_is_sent(tmp_path, fake, after):
    """Issue 39: `--ask --json` sent "--json" as a question, and billed it; so did `--ask —json`
    (a pasted command's "--" turned into an em dash)."""
    proc = ask(tmp_path, fake, *after)
    assert_usage_error(
        proc,
        f"--ask takes the question right after it, not the flag '{after[0]}'",
        '--ask="-x?" or --ask -- "-x?"',
    )
    assert fake.requests == []


@pytest.mark.parametrize("argv", [["--ask", "--", "-x?"], ["--ask=-x?"]], ids=["dashes", "equals"])
def test_a_question_starting_with_a_dash_goes_after_dashes_or_equals(tmp_path, fake, argv):
    proc = run_cli(tmp_path, *argv, "--json", env={"OPENAI_BASE_URL": fake.base_url})
    assert proc.returncode == 0, proc.stderr
    (create,) = fake.creates
    assert create.body["input"].startswith("-x?")


def test_an_unquoted_question_after_ask_is_told_to_use_quotes(tmp_path):
    proc = run_cli(tmp_path, "--ask", "what", "is", "new")
    assert_usage_error(proc, "unknown option 'is'", 'goes in quotes: --ask "..."')


def test_a_config_path_that_is_a_directory_is_said_in_words(tmp_path):
    proc = run_cli(tmp_path, "--show-config", "--config", str(tmp_path))
    assert proc.returncode == 2
    assert "it is a directory, not a file; point --config at a YAML file" in proc.stderr
    assert "Errno" not in proc.stderr


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_config_fifo_nobody_writes_to_is_refused_not_waited_on_forever(tmp_path):
    fifo = tmp_path / "config.yaml"
    os.mkfifo(fifo)
    proc = run_cli(tmp_path, "--show-config", "--config", str(fifo), timeout=20)
    assert proc.returncode == 2
    assert f"config file {fifo} is a FIFO that nothing wrote to" in proc.stderr


def test_os_errors_are_said_in_words():
    import errno

    said = mcp.os_error_words(PermissionError(errno.EACCES, "Permission denied", "/etc/x"))
    assert said == "permission denied (check its mode and owner)"
    assert mcp.os_error_words(OSError(errno.EIO, "Input/output error")) == "input/output error"


@pytest.mark.parametrize("word", ["maybe", "enabled", "y"])
def test_a_debug_variable_that_is_neither_a_switch_nor_a_path_is_an_error(tmp_path, word):
    proc = run_cli(tmp_path, "--show-config", env={"DEBUG": word})
    assert proc.returncode == 2
    assert f'DEBUG = "{word}" must be 1, true, yes or on' in proc.stderr
    assert not (tmp_path / word).exists()


def test_a_debug_variable_that_is_a_path_still_names_the_debug_file(tmp_path):
    proc = run_cli(tmp_path, "--show-config", env={"DEBUG": "debug.log"})
    assert proc.returncode == 0, proc.stderr
    assert '"debug_file": "debug.log"' in proc.stderr


def test_neither_a_mistyped_flags_value_nor_a_key_in_debug_is_echoed(tmp_path):
    proc = run_cli(tmp_path, "--http-tokn=hunter2-secret-token")
    assert_usage_error(proc, "unknown option '--http-tokn'; did you mean --http-token?")
    assert "hunter2" not in proc.stderr
    proc = run_cli(tmp_path, "--show-config", env={"DEBUG": "sk-" + "x" * 40})
    assert proc.returncode == 2 and "DEBUG = (hidden) must be" in proc.stderr
    assert "xxxx" not in proc.stderr


# -- --ask --file: the tools' `files` from the command line (issue 39) ------------------------


def test_ask_with_files_attaches_them_as_the_tools_files_do(tmp_path, fake):
    (tmp_path / "build.log").write_text("error: linker failed\n", encoding="utf-8")
    png = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + (64).to_bytes(4, "big") * 2 + b"\x08\x02\0\0\0"
    (tmp_path / "shot.png").write_bytes(png)
    proc = ask(tmp_path, fake, "Why?", "--file", "build.log", "--file=shot.png", "--json")
    assert proc.returncode == 0, proc.stderr
    (create,) = fake.creates
    question, log, image = create.body["input"][0]["content"]
    assert question["text"].startswith("Why?")
    assert log == {"type": "input_text", "text": "[file] build.log\nerror: linker failed\n"}
    assert image["type"] == "input_image"
    listed = json.loads(proc.stdout)["_meta"]["files"]
    assert [(f["name"], f["kind"]) for f in listed] == [("build.log", "text"), ("shot.png", "png")]


@pytest.mark.parametrize(
    ("name", "config", "said"),
    [
        ("notes/.env", "", "notes/.env: refused, a secret by name (files.deny)"),
        ("OUTSIDE", "", "OUTSIDE: refused, outside the allowed directories"),
        ("a.txt", "files:\n  max_files: 0\n", "1 files: at most 0 a call (files.max_files)"),
    ],
    ids=["secret", "outside", "limit"],
)
def test_ask_refuses_a_file_the_tools_refuse_and_sends_nothing(tmp_path, fake, name, config, said):
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / ".env").write_text("OPENAI_API_KEY=sk-x\n", encoding="utf-8")
    (tmp_path / "a.txt").write_text("a\n", encoding="utf-8")
    outside = tmp_path.parent / f"{tmp_path.name}-outside.txt"  # beside the working directory
    outside.write_text("outside\n", encoding="utf-8")
    said, name = said.replace("OUTSIDE", str(outside)), name.replace("OUTSIDE", str(outside))
    (tmp_path / "config.yaml").write_text(config, encoding="utf-8")
    proc = ask(tmp_path, fake, "q", "--file", name, "--config", str(tmp_path / "config.yaml"))
    assert proc.returncode == 1
    assert proc.stderr.strip().startswith(f"answer failed: {said}"), proc.stderr
    assert fake.requests == []
    assert "sk-x" not in proc.stderr + proc.stdout


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--show-config", "--file", "a.txt"], "--file goes with --ask"),
        (["--ask", "q", "--file", "--json"], "--file needs a path, not the flag '--json'"),
        (["--ask", "q", "--file"], "--file needs a path"),
    ],
)
def test_file_is_a_path_for_ask(tmp_path, args, said):
    assert_usage_error(run_cli(tmp_path, *args), said)


@pytest.mark.parametrize(
    "args",
    [["--ask", "q1", "--ask", "q2"], ["--ask=q1", "--ask", "q2"], ["--ask", "q", "--tool", "answer",
     "--tool", "answer_detailed"], ["--ask", "q", "--config", "a.yaml", "--config=b.yaml"]],
    ids=["ask", "ask-equals", "tool", "config"],
)  # fmt: skip
def test_a_flag_given_twice_is_refused_before_anything_is_sent(tmp_path, fake, args):
    """Issue 39: the last one won unsaid, so `--ask q1 --ask q2` billed q2 alone."""
    flag = [arg.partition("=")[0] for arg in args if arg.startswith("--")][-1]
    proc = run_cli(tmp_path, *args, env={"OPENAI_BASE_URL": fake.base_url})
    assert_usage_error(proc, f"{flag} given twice; give it once")
    assert fake.requests == []


def test_credentials_in_base_url_are_never_shown(tmp_path):
    """Issue 39: a gateway's `https://user:password@host/v1` was printed whole by --show-config,
    in --ask's error, by --doctor (its host) and in a config error naming the URL."""
    url = "http://gw-user:hunter2-pass@127.0.0.1:1/v1"  # a port nothing listens on
    for args in (["--show-config"], ["--ask", "q"], ["--doctor"]):
        proc = run_cli(tmp_path, *args, env={"OPENAI_BASE_URL": url})
        assert "hunter2" not in proc.stdout + proc.stderr, (args, proc.stdout + proc.stderr)
        assert "gw-user" not in proc.stdout + proc.stderr, args
        assert "Traceback" not in proc.stderr
    assert (
        "cannot connect to http://***@127.0.0.1"
        in run_cli(tmp_path, "--ask", "q", env={"OPENAI_BASE_URL": url}).stderr
    )
    for bad in ("gw-user:hunter2-pass@gateway/v1", "ftp://gw-user:hunter2-pass@gateway/v1"):
        proc = run_cli(tmp_path, "--show-config", env={"OPENAI_BASE_URL": bad})
        assert proc.returncode == 2 and "must be an http:// or https:// URL" in proc.stderr
        assert "hunter2" not in proc.stderr and "***@gateway/v1" in proc.stderr


def test_credentials_in_the_issuers_urls_are_never_shown(tmp_path):
    """Issue 39: --show-config printed server.auth.issuer and introspection_url whole."""
    config = tmp_path / "config.yaml"
    config.write_text(
        "server:\n  auth:\n    audience: mcp\n"
        "    issuer: https://gw-user:hunter2-pass@login.example.com/realms/x\n"
        "    introspection_url: https://gw-user:hunter2-pass@login.example.com/introspect\n"
    )
    env = {"MCP_AUTH_CLIENT_ID": "mcp", "MCP_AUTH_CLIENT_SECRET": "client-secret-0123456789"}
    proc = run_cli(tmp_path, "--show-config", "--config", str(config), env=env)
    auth = show_config(proc)["config"]["server"]["auth"]
    assert auth["issuer"] == "https://***@login.example.com/realms/x"
    assert auth["introspection_url"] == "https://***@login.example.com/introspect"
    assert "hunter2" not in proc.stderr and "gw-user" not in proc.stderr


def test_a_state_url_without_a_scheme_is_refused_without_being_echoed(tmp_path):
    """Issue 39: `user:password@host/db` (its scheme forgotten) was echoed whole in the error."""
    for bad in ("gw-user:hunter2-pass@db.example/ledger", "hunter2-pass"):
        proc = run_cli(tmp_path, "--show-config", env={"OPENAI_RESPONSES_MCP_STATE_URL": bad})
        assert proc.returncode == 2 and "must be a PostgreSQL URL" in proc.stderr, proc.stderr
        assert "hunter2" not in proc.stderr


def test_a_ca_bundle_that_cannot_be_read_is_one_line_from_ask_and_a_tool_call(
    tmp_path, fake, spawn
):
    """Issue 39: SSL_CERT_FILE naming a missing file was a traceback from --ask, and an
    "internal error ... report it" from a tools/call, at the client's first request."""
    env = {"OPENAI_BASE_URL": fake.base_url, "SSL_CERT_FILE": str(tmp_path / "missing.pem")}
    proc = run_cli(tmp_path, "--ask", "q", env=env)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    said = f"SSL_CERT_FILE={tmp_path / 'missing.pem'} cannot be used as a CA bundle"
    assert line.startswith(f"answer failed: {said}") and "or unset it" in line, line
    server = spawn(env=env)
    server.initialize()
    reply = server.call("answer", {"query": "q"})
    assert reply["error"]["message"].startswith(f"answer failed: {said}"), reply
    assert server.request("ping")["result"] == {}
    assert fake.requests == []


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are POSIX")
def test_a_debug_file_that_is_a_fifo_nobody_reads_is_said_not_waited_on(tmp_path, fake):
    """Issue 39: `--debug FIFO` blocked in open() before anything ran (--ask, or a server
    before its initialize), with a FIFO nothing read."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    proc = ask(tmp_path, fake, "q", "--debug", str(fifo))  # run_cli's timeout: 30 s
    assert proc.returncode == 0, proc.stderr
    assert f"cannot open debug file {fifo}: it is a fifo that nothing reads" in proc.stderr.lower()
    assert len(fake.creates) == 1


@pytest.mark.parametrize(
    "args", [["--doctor"], ["--print-example", "config"], ["--version"], ["--ask", "q", "--json"]]
)
def test_a_reader_that_left_is_no_traceback(tmp_path, fake, args):
    """Issue 39: `--doctor | head -1` ended in a BrokenPipeError traceback (or, for output that
    fit in the pipe, Python's "Exception ignored" at exit)."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before a byte is written
    env = base_env(tmp_path, OPENAI_BASE_URL=fake.base_url)
    try:
        proc = subprocess.run(
            [*PROGRAM, *args], stdout=write_end, stderr=subprocess.PIPE, text=True, env=env,
            cwd=str(tmp_path), timeout=30,
        )  # fmt: skip
    finally:
        os.close(write_end)
    assert "Traceback" not in proc.stderr and "BrokenPipeError" not in proc.stderr, proc.stderr
    assert proc.returncode == 1


def test_what_stdout_cannot_show_is_escaped_not_a_traceback_after_the_answer_is_paid(
    tmp_path, fake
):
    """Issue 39: with a stdout that cannot show a character of the answer (a Windows pipe's
    cp1252, PYTHONIOENCODING=ascii), --ask ended in a UnicodeEncodeError traceback once the
    call was made and billed, and the answer was lost; --usage likewise for a model's name."""
    fake.enqueue(Reply(text="Café → 東京"))
    env = {"PYTHONIOENCODING": "ascii"}
    proc = ask(tmp_path, fake, "q", "--model", "gpt-café", env=env)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stdout.isascii() and json.loads(proc.stdout)["answer"] == "Café → 東京"
    for args in (["--usage"], ["--usage", "--json"]):
        proc = run_cli(tmp_path, *args, env=env)
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert "gpt-caf\\u00e9" in proc.stdout  # the JSON, escaped
    assert "gpt-caf?" in run_cli(tmp_path, "--usage", env=env).stdout  # the table, replaced


@pytest.mark.skipif(not os.path.exists("/dev/stdout"), reason="no /dev/stdout here")
@pytest.mark.parametrize("how", ["flag", "env"])
def test_a_debug_file_that_is_stdout_keeps_stdio_to_the_protocol(spawn, fake, how):
    """Issue 39: `--stdio --debug /dev/stdout` (or DEBUG=/proc/self/fd/1) put debug lines on
    stdout, among the MCP messages a client reads."""
    env = {"OPENAI_BASE_URL": fake.base_url}
    if how == "env":
        server = spawn(env={**env, "DEBUG": "/dev/stdout"})
    else:
        server = spawn("--stdio", "--debug", "/dev/stdout", env=env)
    server.initialize()  # each line of stdout is parsed as JSON: a debug line fails here
    assert "answer" in json.loads(
        server.call("answer", {"query": "q"})["result"]["content"][0]["text"]
    )
    assert server.request("ping")["result"] == {}
    assert "debug file /dev/stdout is this server's stdout" in server.stderr
    assert "[debug " in server.stderr  # debug goes on, to stderr
