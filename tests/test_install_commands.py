"""Every install command the project shows names the distribution ``pyproject.toml`` builds (issue 26, item 12).

The import names are ``robotlab`` and ``robotlab_django``, but the public index's ``robotlab`` is someone else's
placeholder (``0.0.0.dev0``, no extras): ``pip install "robotlab[django]"`` installs it and only warns. So every
``pip install`` (``uv add``, ``uv pip install``, ``pipx install``, ``poetry add``) in the README, the docs, the
packages' messages and scaffolds and the examples, and every ``NAME[extra]`` naming one of the project's extras, must
name the distribution in ``pyproject.toml``; a clone installs by path (``pip install -e ".[django]"``).
"""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
DISTRIBUTION: str = PROJECT["name"]
EXTRAS: set[str] = set(PROJECT["optional-dependencies"])

# Where the project tells someone what to install: its pages, its messages and templates, its examples and scripts.
SOURCES = sorted(
    [ROOT / "README.md", ROOT / "pyproject.toml"]
    + list((ROOT / "docs").rglob("*.md"))
    + [p for folder in ("robotlab", "robotlab_django", "examples", "scripts", "example_project")
       for p in (ROOT / folder).rglob("*") if p.is_file() and p.suffix in {".py", ".md", ".html", ".txt", ".toml",
                                                                            ".ini", ".cfg", ".yml", ""}
       or p.name.endswith("-tpl")]
)

COMMAND = re.compile(r"\b(?:uv\s+pip\s+install|pip3?\s+install|uv\s+add|pipx\s+install|poetry\s+add)\s+([^\n`]*)")
# A requirement naming one of this project's extras, wherever it stands: robotlab[django], "robotlab[django,test]"
WITH_EXTRAS = re.compile(r"(?<![\w.\-/])([A-Za-z0-9][A-Za-z0-9._\-]*)\[([a-z0-9_,\- ]+)\]")


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirements(arguments: str) -> list[str]:
    """The requirement words of one install command's arguments (options and paths dropped)."""
    text = arguments.split("#", 1)[0].strip().rstrip(")\\;,.:")
    try:
        words = shlex.split(text)
    except ValueError:  # an unbalanced quote: the command is cut by the prose around it
        words = text.replace('"', " ").replace("'", " ").split()
    found = []
    skip_next = False
    for word in words:
        if skip_next:
            skip_next = False
            continue
        if word in {"-r", "-c", "--requirement", "--constraint", "--index-url", "--extra-index-url", "--target",
                    "-t", "-i", "--find-links", "-f"}:
            skip_next = True
            continue
        if word.startswith(("-", ".", "/", "file:")) or word in {"&&", "||", "|", ";"}:
            continue
        if " @ " in word or "@" in word.split("[")[0]:
            word = word.split("@", 1)[0].strip()
        found.append(word.strip("\"'()"))
    return [word for word in found if re.match(r"[A-Za-z0-9]", word)]


def _ours(requirement: str) -> bool:
    """Whether a requirement means this project: its extras, or a name like the import names."""
    name = re.split(r"[\[<>=!~; @]", requirement, maxsplit=1)[0]
    listed = re.findall(r"\[([^\]]*)\]", requirement)
    extras = set(listed[0].replace(" ", "").split(",")) if listed else set()
    return _normal(name).replace("-", "").startswith("robotlab") or bool(extras) and extras <= EXTRAS


def _install_mentions(text: str) -> list[tuple[int, str]]:
    mentions: list[tuple[int, str]] = []
    for match in COMMAND.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        mentions += [(line, requirement) for requirement in _requirements(match.group(1)) if _ours(requirement)]
    for match in WITH_EXTRAS.finditer(text):
        extras = {extra.strip() for extra in match.group(2).split(",")}
        if extras <= EXTRAS and _normal(match.group(1)) not in {"project", "dependencies"}:
            mentions.append((text.count("\n", 0, match.start()) + 1, match.group(0)))
    return list(dict.fromkeys(mentions))  # a command's requirement is also a NAME[extra]: once each


def test_the_distribution_is_not_the_placeholder_on_the_index() -> None:
    # ``robotlab`` on the public index is a 1.2 kB placeholder of someone else's (0.0.0.dev0, no extras).
    assert _normal(DISTRIBUTION) != "robotlab"


def test_the_sources_are_found() -> None:
    names = {str(p.relative_to(ROOT)) for p in SOURCES}
    assert {"README.md", "docs/getting-started.md", "docs/django/installation.md", "docs/django/tutorial.md",
            "robotlab_django/scaffolding/scaffolds/pytest.ini-tpl",
            "robotlab_django/management/commands/robotlab_install.py"} <= names


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_install_command_names_the_distribution(path: Path) -> None:
    wrong = [f"{path.relative_to(ROOT)}:{line}: {requirement}"
             for line, requirement in _install_mentions(path.read_text(errors="replace"))
             if _normal(re.split(r"[\[<>=!~; @]", requirement, maxsplit=1)[0]) != _normal(DISTRIBUTION)]
    assert not wrong, f"install commands naming something other than {DISTRIBUTION!r}:\n" + "\n".join(wrong)


def test_the_checker_reads_commands_as_written() -> None:
    text = ('pip install "robotlab[django,test]"\n$ pip install -e ".[django]"  # a clone\n'
            "pip install acp-sdk\nadd `robotlab[postgres]` for PostgreSQL\n"
            f'pip install "{DISTRIBUTION}[django] @ file:///src/robotlab"\n')
    assert [requirement for _line, requirement in _install_mentions(text)] == [
        "robotlab[django,test]", f"{DISTRIBUTION}[django]", "robotlab[postgres]"]


def test_the_pages_say_how_to_install_from_a_clone() -> None:
    for page in ("docs/getting-started.md", "docs/django/installation.md"):
        text = (ROOT / page).read_text()
        assert 'pip install -e ".[django' in text, page
