"""The documents kept true: ARCHITECTURE.md's layout names every module of the code and only
paths that exist, and every relative link of the documents reaches a file (and, for ``#anchor``
links, a heading of it). Reads files only; starts nothing."""

from __future__ import annotations

import re
from pathlib import Path

from tools import settings_doc

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("server", "protocol", "tools", "captures")
# The generated code is named as a whole: its modules are one per schema.
NAMED_AS_A_WHOLE = ("protocol/generated/",)
# A package's own __init__ and __main__ are named with the package folder.
PACKAGE_FILES = ("__init__.py", "__main__.py")

_FENCE = re.compile(r"^(```|~~~)")
# A row of a layout table names its path in its first cell; a package's heading names its folder.
_LAYOUT_PATH = re.compile(r"^\|\s*`([^`]+)`\s*\||^###\s+(\S+/):")
_LINK = re.compile(r"(?<!!)\[(?:[^\]]*)\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def documents() -> list[Path]:
    return [ROOT / "README.md", ROOT / "ARCHITECTURE.md", ROOT / "BENCHMARKS.md",
            *sorted((ROOT / "docs").glob("*.md"))]


def prose_lines(text: str) -> list[str]:
    """The lines of a markdown text outside fenced code blocks."""
    lines: list[str] = []
    fenced = False
    for line in text.splitlines():
        if _FENCE.match(line.strip()):
            fenced = not fenced
        elif not fenced:
            lines.append(line)
    return lines


def layout_paths(architecture: str) -> list[str]:
    """The paths named under '## Layout': the first cell of each table row, and the folder each
    package's heading names."""
    section = architecture.split("\n## Layout\n", 1)[1].split("\n## ", 1)[0]
    return [m.group(1) or m.group(2) for line in section.splitlines() if (m := _LAYOUT_PATH.match(line))]


def modules() -> list[str]:
    return sorted(str(path.relative_to(ROOT)) for package in PACKAGES
                  for path in (ROOT / package).rglob("*.py"))


def unnamed_modules(named: list[str], found: list[str]) -> list[str]:
    names = set(named)
    missing = []
    for module in found:
        folder = module.rsplit("/", 1)[0] + "/"
        if module in names or any(module.startswith(whole) for whole in NAMED_AS_A_WHOLE):
            continue
        if module.endswith(PACKAGE_FILES) and folder in names:
            continue
        missing.append(module)
    return missing


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: the rendered text lower-cased, punctuation dropped,
    spaces as dashes."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "")
    text = re.sub(r"[^\w\- ]", "", text.lower())
    return text.replace(" ", "-")


def anchors(document: Path) -> set[str]:
    found: set[str] = set()
    seen: dict[str, int] = {}
    for line in prose_lines(document.read_text(encoding="utf-8")):
        if m := _HEADING.match(line):
            base = slug(m.group(2))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
    return found


def broken_links(document: Path) -> list[str]:
    broken = []
    for line in prose_lines(document.read_text(encoding="utf-8")):
        for target in _LINK.findall(line):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                continue  # http:, https:, mailto:
            path, _, anchor = target.partition("#")
            linked = (document.parent / path).resolve() if path else document
            if not linked.exists():
                broken.append(f"{target}: no such file")
            elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
                broken.append(f"{target}: no such heading")
    return broken


def test_the_layout_names_every_module() -> None:
    named = layout_paths((ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8"))
    assert unnamed_modules(named, modules()) == []


def test_every_path_the_layout_names_exists() -> None:
    named = layout_paths((ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8"))
    assert len(named) > len(PACKAGES)
    assert [path for path in named if not (ROOT / path).exists()] == []


def test_every_relative_link_reaches_a_file_and_heading() -> None:
    assert {str(doc.relative_to(ROOT)): broken for doc in documents()
            if (broken := broken_links(doc))} == {}


def test_the_checks_see_what_is_wrong() -> None:
    """The helpers themselves: a module left out and a wrong anchor are found."""
    assert unnamed_modules(["server/"], ["server/__init__.py", "server/app.py"]) == ["server/app.py"]
    assert unnamed_modules(["tools/x/"], ["tools/x/__main__.py", "protocol/generated/a/b.py"]) == []
    assert slug("The controller: `python -m server`") == "the-controller-python--m-server"
    assert slug("Starting on a Kafka controller's directory") == "starting-on-a-kafka-controllers-directory"
    assert "walkthrough-a-controller-three-test-brokers-a-topic-and-a-failure" in anchors(ROOT / "README.md")


def test_the_settings_tables_are_written_from_the_settings_table() -> None:
    """docs/settings.md and the quorum's table in docs/quorum.md list what server/settings.py
    holds; `python -m tools.settings_doc` rewrites them."""
    assert settings_doc.drift() == []


def test_the_settings_check_sees_a_drifted_table_and_a_group_listed_nowhere(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text("no tables here\n", encoding="utf-8")
    fresh = settings_doc.rewritten("<!-- settings: the quorum -->\n<!-- end settings -->\n")
    assert "`controller.quorum.election.timeout.ms` | `1000` |" in fresh
    (tmp_path / "docs" / "quorum.md").write_text(fresh.replace("`1000`", "`900`", 1), encoding="utf-8")
    problems = settings_doc.drift(tmp_path)
    assert "docs/quorum.md: its settings tables differ from server/settings.py" in problems
    assert "no document lists the settings of the node" in problems
    assert "no document lists the settings of the quorum" not in problems
