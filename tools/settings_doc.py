"""python -m tools.settings_doc [--check]: the documentation's settings tables, written from the
table of server/settings.py.

A document asks for a table with a line ``<!-- settings: GROUP; GROUP -->`` (groups as
server/settings.py names them, or ``ignored`` for the keys accepted and ignored); everything up
to the next ``<!-- end settings -->`` is rewritten. With --check nothing is written: it exits 1,
naming the documents that differ and the groups no document lists.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

from server.settings import GROUPS, IGNORED_KEYS, SETTINGS, Setting

ROOT = Path(__file__).resolve().parents[1]
IGNORED = "ignored"
_BLOCK = re.compile(r"(<!-- settings: (?P<groups>[^>]*?) -->\n)(?P<body>.*?)(<!-- end settings -->)", re.DOTALL)


def documents(root: Path = ROOT) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _default(setting: Setting[Any]) -> str:
    if setting.shown_default:
        return setting.shown_default
    if setting.default_text is not None:
        return f"`{setting.default_text}`"
    return "(required)" if setting.required else "(none)"


def _values(setting: Setting[Any]) -> str:
    return str(setting.check) if setting.check is not None else setting.kind.words


def table(groups: list[str]) -> str:
    """The markdown for ``groups``: one table of their settings, in the table's order, or the
    ignored keys as a list."""
    if groups == [IGNORED]:
        return ", ".join(f"`{key}`" for key in sorted(IGNORED_KEYS)) + "\n"
    unknown = [group for group in groups if group not in GROUPS]
    if unknown:
        raise ValueError(f"no settings group {', '.join(unknown)}; the groups are {', '.join(GROUPS)}")
    rows = ["| setting | default | values | what it does |", "| --- | --- | --- | --- |"]
    rows += [f"| `{s.name}` | {_cell(_default(s))} | {_cell(_values(s))} | {_cell(s.doc)} |"
             for s in SETTINGS if s.group in groups]
    return "\n".join(rows) + "\n"


def _groups(match: re.Match[str]) -> list[str]:
    return [group.strip() for group in match["groups"].split(";")]


def rewritten(text: str) -> str:
    """``text`` with each of its settings blocks written from the table."""
    return _BLOCK.sub(lambda m: m[1] + "\n" + table(_groups(m)) + "\n" + m[4], text)


def listed_groups(paths: list[Path]) -> set[str]:
    return {group for path in paths for m in _BLOCK.finditer(path.read_text(encoding="utf-8"))
            for group in _groups(m)}


def drift(root: Path = ROOT) -> list[str]:
    """What --check reports: documents whose tables differ from the table, and groups no
    document lists."""
    paths = documents(root)
    problems = [f"{path.relative_to(root)}: its settings tables differ from server/settings.py"
                for path in paths if rewritten(text := path.read_text(encoding="utf-8")) != text]
    missing = [group for group in (*GROUPS, IGNORED) if group not in listed_groups(paths)]
    problems += [f"no document lists the settings of {group}" for group in missing]
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.settings_doc",
        description="Write the documentation's settings tables from server/settings.py. With --check it "
                    "writes nothing and exits 1 when a table differs or a group of settings is listed nowhere.")
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    args = parser.parse_args(argv)
    if args.check:
        problems = drift()
        for problem in problems:
            print(problem, file=sys.stderr)
        return 1 if problems else 0
    for path in documents():
        text = path.read_text(encoding="utf-8")
        if (new := rewritten(text)) != text:
            path.write_text(new, encoding="utf-8")
            print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
