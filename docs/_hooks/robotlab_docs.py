"""MkDocs hooks for the RobotLab site (listed under ``hooks:`` in mkdocs.yml).

* ``on_config`` keeps the nav in step with the files: the "Django" section lists the
  ``docs/django/*.md`` pages that exist when the site is built (and is dropped when there are
  none), guides under ``docs/guides/`` that mkdocs.yml does not list are appended to "Guides",
  and every public ``robotlab`` module without a hand-written ``docs/api/<module>.md`` gets a
  generated API page (added by ``on_files``) at the end of "API reference". So the nav never
  points at a missing page, and a new page or module shows up without editing mkdocs.yml.
* ``on_page_content`` turns the reST roles found in docstrings (``:class:`~robotlab.Robot```)
  into optional cross-references, so API pages show a link (or plain code) instead of the role.
"""

from __future__ import annotations

import pkgutil
import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File

DJANGO_ORDER = ("index", "install", "installation", "quickstart", "settings", "local-models", "models", "admin", "jobs",
                "celery", "streaming", "websockets", "chat", "views", "scaffolding", "commands", "checks",
                "deployment")

_TESTING = {"FakeLLM": "fake", "FakeLLMExhausted": "fake", "FunctionLLM": "fake", "Step": "fake",
            "text": "fake", "tool_call": "fake", "tool_calls": "fake", "raise_": "fake",
            "DemoLLM": "demo", "FakeLLMServer": "server", "allow_real_requests": "guard",
            "block_real_requests": "guard"}

_DIRECTIVE = re.compile(r"^::: robotlab\.(\S+)$", re.MULTILINE)
_ROLE = re.compile(r":(?:py:)?(?:class|meth|func|data|attr|mod|exc|obj|const):<code>(~?)([^<]+)</code>")


def _django_pages(docs_dir: Path) -> list[str]:
    folder = docs_dir / "django"
    if not folder.is_dir():
        return []
    stems = {p.stem: p for p in folder.glob("*.md")}

    def rank(stem: str) -> tuple[int, str]:
        return (DJANGO_ORDER.index(stem) if stem in DJANGO_ORDER else len(DJANGO_ORDER), stem)

    return [f"django/{stems[s].name}" for s in sorted(stems, key=rank)]


def _public_modules() -> list[str]:
    """The importable, non-private modules and packages of ``robotlab``, and those of its packages.

    A package's modules are named with a dot (``tools.manifest``), as their pages are (``api/tools.manifest.md``).
    """
    root = Path(__file__).resolve().parents[2] / "robotlab"
    names = []
    for info in pkgutil.iter_modules([str(root)]):
        if info.name.startswith("_"):
            continue
        if info.ispkg and not (root / info.name / "__init__.py").is_file():
            continue  # an empty namespace directory, nothing to document yet
        names.append(info.name)
        if info.ispkg:
            names += [f"{info.name}.{sub.name}" for sub in pkgutil.iter_modules([str(root / info.name)])
                      if not sub.name.startswith("_") and not sub.ispkg]
    return sorted(names)


def _listed(entries: Any) -> set[str]:
    found: set[str] = set()
    for entry in entries or []:
        if isinstance(entry, str):
            found.add(entry)
        elif isinstance(entry, dict):
            for value in entry.values():
                found |= _listed(value) if isinstance(value, list) else {value} if isinstance(value, str) else set()
    return found


_generated: list[str] = []


def on_config(config: Any, **kwargs: Any) -> Any:
    docs_dir = Path(config["docs_dir"])
    pages = _django_pages(docs_dir)
    listed = _listed(config.get("nav"))
    extra_guides = sorted(f"guides/{p.name}" for p in (docs_dir / "guides").glob("*.md")
                          if f"guides/{p.name}" not in listed)
    written_api = {p.stem for p in (docs_dir / "api").glob("*.md")}
    written_api |= {match for p in (docs_dir / "api").glob("*.md")  # a module shown on a page under another name
                    for match in _DIRECTIVE.findall(p.read_text(encoding="utf-8"))}
    _generated[:] = [m for m in _public_modules() if m not in written_api]
    extra_api = [f"api/{p.name}" for p in sorted((docs_dir / "api").glob("*.md")) if f"api/{p.name}" not in listed]
    extra_api += [f"api/{m}.md" for m in _generated]
    nav = []
    for entry in config.get("nav") or []:
        if isinstance(entry, dict) and "Django" in entry:
            if pages:
                nav.append({"Django": pages})
            continue
        if isinstance(entry, dict) and "Guides" in entry:
            entry = {"Guides": [*entry["Guides"], *extra_guides]}
        if isinstance(entry, dict) and "API reference" in entry:
            entry = {"API reference": [*entry["API reference"],
                                       *({f"robotlab.{Path(p).stem}": p} for p in extra_api)]}
        nav.append(entry)
    config["nav"] = nav
    return config


def on_files(files: Any, config: Any, **kwargs: Any) -> Any:
    for module in _generated:
        content = (f"# `robotlab.{module}`\n\n"
                   f"This page is generated from the docstrings of `robotlab.{module}`.\n\n"
                   f"::: robotlab.{module}\n")
        files.append(File.generated(config, f"api/{module}.md", content=content))
    return files


def _exports() -> dict[str, str]:
    try:
        import robotlab

        return dict(robotlab._EXPORTS)
    except Exception:  # the site still builds, with fewer links
        return {}


_EXPORTED = _exports()


def _identifier(target: str, page_module: str | None) -> str:
    parts = target.strip("()").split(".")
    if parts[0] == "robotlab" and len(parts) >= 2:
        if parts[1] in _EXPORTED:
            return ".".join(["robotlab", _EXPORTED[parts[1]], *parts[1:]])
        if parts[1] == "testing" and len(parts) >= 3 and parts[2] in _TESTING:
            return ".".join(["robotlab", "testing", _TESTING[parts[2]], *parts[2:]])
        return ".".join(parts)
    if parts[0] in _EXPORTED:
        return ".".join(["robotlab", _EXPORTED[parts[0]], *parts])
    if page_module:
        return ".".join([page_module, *parts])
    return ".".join(parts)


def on_page_content(html: str, page: Any, **kwargs: Any) -> str:
    src = page.file.src_uri
    page_module = None
    if src.startswith("api/"):
        stem = src[len("api/"):].removesuffix(".md")
        page_module = f"robotlab.{stem}"

    def replace(match: re.Match[str]) -> str:
        short, target = match[1], match[2]
        shown = target.split(".")[-1] if short else target
        return (f'<autoref identifier="{_identifier(target, page_module)}" optional>'
                f"<code>{shown}</code></autoref>")

    html = _ROLE.sub(replace, html)
    return html.replace("::</p>", ":</p>")
