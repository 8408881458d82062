#!/usr/bin/env python3
"""Checks a release tag and prints its release notes: the CHANGELOG section of that version.

    python .github/release_notes.py v1.2.3 > release-notes.md

Exit 1, with one line on stderr, unless the tag is `v` + the module's `__version__` and
CHANGELOG.md has a non-empty `## [1.2.3]` section. Standard library only.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODULE = "openai_responses_mcp.py"


class ReleaseError(Exception):
    pass


def module_version(source: str) -> str:
    """The `__version__ = "…"` assignment's value (read, not imported)."""
    found = re.search(r'^__version__\s*=\s*["\']([^"\']+)["\']', source, re.MULTILINE)
    if not found:
        raise ReleaseError(f'{MODULE} has no __version__ = "…" line')
    return found.group(1)


def changelog_section(changelog: str, version: str) -> str:
    """The text under `## [version]` (heading excluded) up to the next `## ` heading."""
    heading = re.compile(rf"^## \[{re.escape(version)}\][^\n]*$", re.MULTILINE)
    found = heading.search(changelog)
    if not found:
        raise ReleaseError(f"CHANGELOG.md has no '## [{version}]' section: add one")
    rest = changelog[found.end() :]
    following = re.search(r"^## ", rest, re.MULTILINE)
    body = rest[: following.start()] if following else rest
    body = re.split(r"^\[[^\]]+\]:\s", body, maxsplit=1, flags=re.MULTILINE)[0]  # link refs
    body = body.strip()
    if not body:
        raise ReleaseError(f"CHANGELOG.md's '## [{version}]' section is empty")
    return body + "\n"


def release_notes(tag: str, root: Path = ROOT) -> str:
    version = module_version((root / MODULE).read_text(encoding="utf-8"))
    if tag != f"v{version}":
        raise ReleaseError(
            f"tag {tag!r} does not match __version__ {version!r} in {MODULE}: "
            f"tag v{version}, or change __version__"
        )
    return changelog_section((root / "CHANGELOG.md").read_text(encoding="utf-8"), version)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: release_notes.py TAG (like v1.2.3)", file=sys.stderr)
        return 2
    try:
        notes = release_notes(args[0])
    except (ReleaseError, OSError) as exc:
        print(f"release: {exc}", file=sys.stderr)
        return 1
    sys.stdout.write(notes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
