"""Prompt templates: Jinja2 files with YAML front matter.

``template="support"`` loads ``<template_path>/support.md`` (``prompts/`` by default)::

    ---
    description: Answers billing questions
    model: openai/gpt-4o-mini
    temperature: 0.2
    parameters:
      company: Acme      # a default
      tier: null         # required
    ---
    You answer billing questions for {{ company }} customers on the {{ tier }} plan.

Front-matter keys: the LLM parameters (``model``, ``temperature``, ``top_p``, ``top_k``,
``max_tokens``, ``presence_penalty``, ``frequency_penalty``, ``stop``), ``robot_name``,
``description``, ``tools``, ``mcp``, ``skills`` and ``parameters``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import ConfigurationError

__all__ = ["LLM_FIELDS", "Template", "split_front_matter", "template_dir"]

LLM_FIELDS = ("model", "temperature", "top_p", "top_k", "max_tokens", "presence_penalty", "frequency_penalty", "stop")
"""Front-matter keys that become LLM parameters."""

_SUFFIXES = (".md", ".md.j2", ".j2", ".txt", "")

if TYPE_CHECKING:
    import jinja2


@cache
def _env() -> jinja2.Environment:
    """The Jinja2 environment, built (and jinja2 imported) when the first template is parsed: not at import."""
    import jinja2

    return jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=False, autoescape=False)


def template_dir(template_path: str | Path | None = None) -> Path:
    """The directory templates are read from: the argument, else the configured path, else ``prompts``."""
    if template_path is None:
        from .config import get_config

        template_path = get_config().template_path or "prompts"
    return Path(template_path)


def split_front_matter(text: str, label: str) -> tuple[dict[str, Any], str]:
    """``(front matter, body)`` of a Markdown file; ``label`` names the file in errors ("Template 'x'")."""
    if not text.startswith("---"):
        return {}, text
    import yaml  # only files with front matter need it

    lines = text.split("\n")
    for index in range(1, len(lines)):
        if lines[index].strip() == "---":
            try:
                meta = yaml.safe_load("\n".join(lines[1:index])) or {}
            except yaml.YAMLError as exc:
                raise ConfigurationError(f"{label}: invalid YAML front matter: {exc}") from exc
            if not isinstance(meta, dict):
                raise ConfigurationError(f"{label}: front matter must be a mapping")
            return meta, "\n".join(lines[index + 1 :])
    raise ConfigurationError(f"{label}: front matter starts with '---' but has no closing '---'")


@dataclass
class Template:
    """A parsed template: its front matter and its Jinja2 body."""

    id: str
    path: Path
    metadata: dict[str, Any]
    body: str
    parameters: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def load(cls, template_id: str | Path, template_path: str | Path | None = None) -> Template:
        """Find and parse a template by id (a name under the template directory, or a path)."""
        directory = template_dir(template_path)
        candidates = [Path(template_id)] if Path(template_id).suffix and Path(template_id).is_file() else []
        candidates += [directory / f"{template_id}{suffix}" for suffix in _SUFFIXES]
        for candidate in candidates:
            if candidate.is_file():
                return cls.parse(candidate.read_text(), template_id=str(template_id), path=candidate)
        raise ConfigurationError(
            f"Template '{template_id}' not found: looked for {directory / str(template_id)}.md. "
            "Create it, or set template_path (ROBOT_LAB_TEMPLATE_PATH) to the directory holding your templates."
        )

    @classmethod
    def parse(cls, text: str, *, template_id: str = "<string>", path: Path | None = None) -> Template:
        """Parse template text with optional front matter."""
        meta, body = split_front_matter(text, f"Template '{template_id}'")
        params = meta.get("parameters") or {}
        if not isinstance(params, dict):
            raise ConfigurationError(f"Template '{template_id}': 'parameters' must be a mapping of name to default")
        import jinja2

        try:
            _env().parse(body)
        except jinja2.TemplateSyntaxError as exc:
            raise ConfigurationError(f"Template '{template_id}' line {exc.lineno}: {exc.message}") from exc
        return cls(id=template_id, path=path or Path(template_id), metadata=meta, body=body.strip(), parameters=params)

    def missing(self, context: Mapping[str, Any]) -> list[str]:
        """Required parameters (front-matter value ``null``) that ``context`` does not give."""
        return [name for name, default in self.parameters.items() if default is None and name not in context]

    def render(self, context: Mapping[str, Any] | None = None) -> str:
        """Render the body with the parameter defaults overlaid by ``context``."""
        values = {name: default for name, default in self.parameters.items() if default is not None}
        values.update(context or {})
        missing = self.missing(values)
        if missing:
            raise ConfigurationError(
                f"Template '{self.id}' is missing required parameters: {', '.join(missing)}. Pass them in "
                "build(context={...}) or as keyword arguments to run()."
            )
        import jinja2

        try:
            return _env().from_string(self.body).render(**values).strip()
        except jinja2.UndefinedError as exc:
            raise ConfigurationError(f"Template '{self.id}': {exc.message}. Pass it in context or run kwargs.") from exc
        except jinja2.TemplateError as exc:
            raise ConfigurationError(f"Template '{self.id}' failed to render: {exc}") from exc

    @property
    def llm_params(self) -> dict[str, Any]:
        """The LLM parameters set in the front matter (``None`` values dropped)."""
        return {k: self.metadata[k] for k in LLM_FIELDS if self.metadata.get(k) is not None}
