"""The release workflow's pieces: the tag check and release notes script, and the workflows."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys

import pytest
from conftest import ROOT

import openai_responses_mcp as mcp

SCRIPT = ROOT / ".github" / "release_notes.py"
WORKFLOWS = ROOT / ".github" / "workflows"

spec = importlib.util.spec_from_file_location("release_notes", SCRIPT)
notes = importlib.util.module_from_spec(spec)
spec.loader.exec_module(notes)

CHANGELOG = """\
# Changelog

## [Unreleased]

### Added
- something not released yet

## [1.2.0] - 2026-12-01

### Added
- `--doctor`.

### Fixed
- a bug.

## [1.1.0] - 2026-11-01

- older.

[1.2.0]: https://example.invalid/compare/v1.1.0...v1.2.0
"""


def project(tmp_path, version: str = "1.2.0", changelog: str = CHANGELOG):
    (tmp_path / "openai_responses_mcp.py").write_text(
        f'"""doc"""\n\n__version__ = "{version}"\n', encoding="utf-8"
    )
    (tmp_path / "CHANGELOG.md").write_text(changelog, encoding="utf-8")
    return tmp_path


def test_the_notes_are_the_versions_section_without_its_heading(tmp_path):
    text = notes.release_notes("v1.2.0", project(tmp_path))
    assert text == "### Added\n- `--doctor`.\n\n### Fixed\n- a bug.\n"


def test_the_last_section_stops_before_link_references(tmp_path):
    assert notes.release_notes("v1.1.0", project(tmp_path, "1.1.0")) == "- older.\n"


@pytest.mark.parametrize("tag", ["1.2.0", "v1.2.1", "v1.2", "release-1.2.0"])
def test_a_tag_that_is_not_v_plus_the_version_fails(tmp_path, tag):
    with pytest.raises(notes.ReleaseError, match=r"does not match __version__ '1\.2\.0'"):
        notes.release_notes(tag, project(tmp_path))


def test_a_version_without_a_changelog_section_fails(tmp_path):
    with pytest.raises(notes.ReleaseError, match=r"no '## \[1.3.0\]' section"):
        notes.release_notes("v1.3.0", project(tmp_path, "1.3.0"))


def test_an_empty_section_fails(tmp_path):
    changelog = "## [1.2.0] - 2026-12-01\n\n## [1.1.0]\n- x\n"
    with pytest.raises(notes.ReleaseError, match="is empty"):
        notes.release_notes("v1.2.0", project(tmp_path, changelog=changelog))


def test_the_script_on_this_repository_checks_the_real_version(tmp_path):
    """Run as the workflow runs it: stdout is the notes, or exit 1 with one line."""
    tag = f"v{mcp.__version__}"
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), tag], capture_output=True, text=True, timeout=30
    )
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    if f"## [{mcp.__version__}]" in changelog:
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.strip()
    else:
        assert proc.returncode == 1
        assert proc.stderr.startswith("release: CHANGELOG.md has no")
        assert proc.stdout == ""
    wrong = subprocess.run(
        [sys.executable, str(SCRIPT), "v0.0.0-nope"], capture_output=True, text=True, timeout=30
    )
    assert wrong.returncode == 1 and "does not match __version__" in wrong.stderr


def test_the_release_workflow_publishes_with_trusted_publishing_only():
    text = (WORKFLOWS / "release.yml").read_text(encoding="utf-8")
    assert 'tags: ["v*"]' in text
    assert "pypa/gh-action-pypi-publish@release/v1" in text
    assert "id-token: write" in text and "name: pypi" in text
    assert "password" not in text and "secrets." not in text  # no stored token
    assert "python .github/release_notes.py" in text and "twine check" in text
    assert "--notes-file release-notes.md" in text


def test_ci_covers_three_systems_and_every_supported_python():
    text = (WORKFLOWS / "ci.yml").read_text(encoding="utf-8")
    assert "os: [ubuntu-latest, macos-latest, windows-latest]" in text
    assert 'python: ["3.10", "3.11", "3.12", "3.13", "3.14"]' in text
    assert "bench/soak.py --quick" in text
    assert "<!-- test-command" in text  # runs the README's line, not a copy of it


def test_the_python_classifiers_and_range_are_the_versions_ci_tests():
    ci = (WORKFLOWS / "ci.yml").read_text(encoding="utf-8")
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    tested = re.search(r"python: \[(.*)\]", ci).group(1).replace('"', "").split(", ")
    classified = re.findall(r"Programming Language :: Python :: (3\.\d+)", pyproject)
    assert classified == tested
    assert f'requires-python = ">={tested[0]}"' in pyproject


def test_ci_also_tests_the_lowest_openai_the_package_declares():
    ci = (WORKFLOWS / "ci.yml").read_text(encoding="utf-8")
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    floor = re.search(r'"openai>=([0-9.]+),', pyproject).group(1)
    assert f"openai=={floor}.*" in ci and "PIP_CONSTRAINT" in ci
    assert f"startswith('{floor}.')" in ci


# -- whose home the metadata names (issue 39) -------------------------------------------------

# The TypeScript project seed 001 describes (its package.json's repository): another project,
# whose URLs this package once gave as its home page, repository and issue tracker.
OTHER_PROJECT = re.compile(r"github\.com/uchimanajet7/openai-responses-mcp", re.IGNORECASE)
URL = re.compile(r"https?://[^\s\"'<>)\]]+")


def shipped_text_files() -> list:
    """What the package, its page and its release carry: the metadata, the module (its
    --version and --help), the README, the docs, the changelog and the workflows."""
    files = [ROOT / name for name in ("pyproject.toml", "openai_responses_mcp.py", "README.md")]
    files += [ROOT / "CHANGELOG.md", ROOT / "CONTRIBUTING.md", ROOT / "config.yaml.example"]
    files += sorted((ROOT / "docs").glob("*.md")) + sorted(
        path for path in (ROOT / ".github").rglob("*") if path.suffix in (".py", ".yml", ".md")
    )
    return files


def test_no_url_presents_another_project_as_this_ones_home():
    found = [
        f"{path.relative_to(ROOT)}: {url}"
        for path in shipped_text_files()
        for url in URL.findall(path.read_text(encoding="utf-8"))
        if OTHER_PROJECT.search(url)
    ]
    assert found == []
    assert OTHER_PROJECT.search("https://github.com/uchimanajet7/openai-responses-mcp/issues")


def test_the_project_urls_are_this_projects_or_absent():
    """Until the project has a home of its own, pyproject.toml names none; the release guide
    says what to fill in before the first release."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    section = re.search(r"(?ms)^\[project\.urls\]\n(.*?)(?=^\[)", text)
    for url in URL.findall(section.group(1) if section else ""):
        assert not OTHER_PROJECT.search(url), url
    guide = (ROOT / "docs" / "development.md").read_text(encoding="utf-8")
    before = guide.split("### Before the first release", 1)[1].split("\n### ", 1)[0]
    assert "[project.urls]" in before and "Security" in before, before
