"""Every knob is documented: each config key, environment variable and flag is in the README."""

import re

import pytest
from conftest import ROOT

import openai_responses_mcp as orm

README = (ROOT / "README.md").read_text(encoding="utf-8")
EXAMPLE = (ROOT / "config.yaml.example").read_text(encoding="utf-8")


@pytest.mark.parametrize("path", [".".join(p) for p in orm.SETTINGS], ids=str)
def test_every_config_key_is_in_the_readme_reference(path):
    assert f"`{path}`" in README


@pytest.mark.parametrize(
    "env", sorted({s.env for s in orm.SETTINGS.values() if s.env} | {"DEBUG", "OPENAI_API_KEY"})
)
def test_every_environment_variable_is_in_the_readme(env):
    assert f"`{env}" in README


def test_every_command_line_flag_is_in_the_readme():
    flags = set(re.findall(r"(--[a-z][a-z-]+)", orm.USAGE))
    assert flags, "the usage text lists the flags"
    for flag in flags:
        assert f"`{flag}" in README, flag


def test_every_config_key_appears_in_the_example_file():
    parsed, _ = orm.parse_yaml(EXAMPLE, "config.yaml.example")
    flat = orm._flatten(parsed)
    missing = [".".join(p) for p in orm.SETTINGS if p not in flat]
    assert not missing


def test_the_example_file_is_a_valid_config(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text(EXAMPLE, encoding="utf-8")
    config = orm.load_config({"config": str(path)}, {"HOME": str(tmp_path)})
    assert not config.warnings
    assert config.profile("answer")["model"] == "gpt-5.2"


def test_ci_runs_the_readme_test_line():
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    marker = README.index("<!-- test-command")
    line = next(s for s in README[marker:].splitlines() if s.startswith("python3 "))
    assert "pytest" in line
    assert "test-command" in ci and 'bash -c "$test_line"' in ci


def test_the_changelog_keeps_an_unreleased_section():
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert "## [Unreleased]" in changelog


def test_the_example_file_is_the_copy_shipped_in_the_module():
    assert orm.CONFIG_EXAMPLE == EXAMPLE, (
        "config.yaml.example and CONFIG_EXAMPLE in openai_responses_mcp.py differ; "
        "edit one and copy it to the other"
    )


def test_the_example_file_tells_the_truth_about_the_defaults():
    parsed, _ = orm.parse_yaml(EXAMPLE, "config.yaml.example")
    wrong = {
        ".".join(path): (value, orm.SETTINGS[path].default)
        for path, value in orm._flatten(parsed).items()
        if value != orm.SETTINGS[path].default
    }
    assert wrong == {}
    assert "these are the defaults" in EXAMPLE


def test_the_example_profiles_inherit_from_answer_as_the_defaults_do(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text(EXAMPLE, encoding="utf-8")
    shown = orm.load_config({"config": str(path)}, {"HOME": str(tmp_path)}).describe()
    defaults = orm.load_config(
        {}, {"XDG_CONFIG_HOME": str(tmp_path / "none"), "HOME": str(tmp_path)}
    ).describe()
    assert shown["profiles"] == defaults["profiles"]


def test_the_readme_documents_the_policy_example_and_its_sources_header():
    assert "--print-example policy" in README
    assert "<!-- sources-header:" in README
    assert "merge: append" in README and "merge: replace" in README


def test_the_package_metadata_names_an_author_and_the_project_urls():
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["authors"] and all(a.get("name") for a in project["authors"])
    assert {"Homepage", "Repository", "Issues", "Changelog"} <= set(project["urls"])
    assert all(url.startswith("https://") for url in project["urls"].values())


def test_the_readme_says_how_to_verify_pin_and_report_an_installation():
    verify = README[README.index("## Verify your installation") :]
    verify = verify[: verify.index("\n## ")]
    assert "bench/smoke.py" in verify and "OPENAI_API_KEY" in verify
    assert '--pip-args "-c' in verify and "constraints.txt" in verify
    assert "--show-config" in verify
    assert (ROOT / "bench" / "smoke.py").exists()


def test_the_readme_says_where_and_why_it_differs_from_the_original():
    section = README[README.index("## Where this differs from the original") :]
    section = section[: section.index("\n## ")]
    for topic in ("Argument validation", "Protocol version", "Message size", "Error messages",
                  "HTTP", "why"):  # fmt: skip
        assert topic in section, topic
