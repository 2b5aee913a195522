"""Agent Skills: folders holding a ``SKILL.md``, matched to each request and injected for that run.

A skill bundle is a folder under the skills root (``~/.prompts/skills`` unless ``skills_path`` /
``ROBOT_LAB_SKILLS_PATH`` says otherwise)::

    check_style/
        SKILL.md          front matter (name, description, capabilities) + instructions
        scripts/
            lint.sh       an executable script, offered to the model as the tool "lint"

``SKILL.md`` starts with YAML front matter; ``name`` and ``description`` are required, and the
capability keys (``fs_read``, ``fs_write``, ``network``, ``timeout``, ``trust``) are optional::

    ---
    name: check_style
    description: Reviews Python code for PEP 8 style problems
    timeout: 10
    ---
    Point out each style problem with its line number, then show the fixed code.

A robot built with ``skills=["check_style"]`` whose ids are found in the
:class:`AgentSkillCatalog` holds them as pending skills. On each run it compares the message with
each skill's description (cosine similarity of their embeddings, at least
:data:`SIMILARITY_THRESHOLD`); a matching skill's instructions go before the system prompt and its
script tools join the robot's tools for that run only.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import ClassVar

from .errors import ConfigurationError
from .templates import split_front_matter
from .text.embeddings import Embedder, LexicalEmbedder, cosine_similarity
from .tools.script import Capabilities, ScriptTool

__all__ = ["DEFAULT_SKILLS_ROOT", "SIMILARITY_THRESHOLD", "AgentSkill", "AgentSkillCatalog", "skills_root"]

logger = logging.getLogger("robotlab")

#: The least cosine similarity between a message and a skill's description for the skill to apply.
SIMILARITY_THRESHOLD = 0.70
#: Where skill bundles live when ``skills_path`` is not configured.
DEFAULT_SKILLS_ROOT = "~/.prompts/skills"


def skills_root(path: str | Path | None = None) -> Path:
    """The skills directory: ``path``, else the configured ``skills_path``, else :data:`DEFAULT_SKILLS_ROOT`."""
    if path is None:
        from .config import get_config

        path = get_config().skills_path or DEFAULT_SKILLS_ROOT
    return Path(path).expanduser()


class AgentSkill:
    """One skill bundle, read from its ``SKILL.md``.

    Args:
        skill_md_path: The ``SKILL.md`` file.

    Raises:
        ConfigurationError: ``"SKILL.md at <path> missing 'name'"`` (or ``'description'``) when the front
            matter lacks one; also when the file cannot be read or its front matter is invalid YAML.

    Attributes:
        name: The front matter's ``name`` (the id robots list in ``skills=``).
        description: The front matter's ``description`` (what requests are matched against).
        path: The bundle's folder.
        metadata: The whole front matter.
        capabilities: The :class:`~robotlab.tools.script.Capabilities` the front matter declares.
        instructions: The body below the front matter, stripped.
    """

    def __init__(self, skill_md_path: str | Path) -> None:
        source = Path(skill_md_path)
        try:
            text = source.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigurationError(f"SKILL.md at {source} could not be read: {exc}") from exc
        meta, body = split_front_matter(text, f"SKILL.md at {source}")
        for key in ("name", "description"):
            if not str(meta.get(key) or "").strip():
                raise ConfigurationError(f"SKILL.md at {source} missing '{key}'")
        self.name = str(meta["name"]).strip()
        self.description = str(meta["description"]).strip()
        self.path = source.parent
        self.metadata = meta
        self.capabilities = Capabilities.from_front_matter(meta)
        self.instructions = body.strip()

    @cached_property
    def scripts(self) -> list[Path]:
        """The files in the bundle's ``scripts/`` folder, sorted."""
        folder = self.path / "scripts"
        return sorted(p for p in folder.iterdir() if p.is_file()) if folder.is_dir() else []

    @cached_property
    def script_tools(self) -> list[ScriptTool]:
        """A :class:`~robotlab.tools.script.ScriptTool` per executable script (others are skipped with a warning)."""
        tools = (ScriptTool.from_path(p, capabilities=self.capabilities, skill_dir=self.path) for p in self.scripts)
        return [t for t in tools if t is not None]

    def __repr__(self) -> str:
        return f"<AgentSkill {self.name!r} at {str(self.path)!r}>"


class AgentSkillCatalog:
    """The skill bundles under a root folder, found by name.

    The folder is scanned once, on the first :meth:`find` or :meth:`all`: each subfolder holding a
    ``SKILL.md`` is a bundle; a bad one is skipped with the warning
    ``"AgentSkillCatalog: <message>, skipping <folder>"``.

    Args:
        root: The folder to scan; the configured ``skills_path`` (``~/.prompts/skills``) by default.
        embedder: What :meth:`match` embeds with; a :class:`~robotlab.text.embeddings.LexicalEmbedder` (no
            model, shared words) by default. A :class:`~robotlab.text.embeddings.SentenceTransformerEmbedder`
            matches meaning.
    """

    _instance: ClassVar[AgentSkillCatalog | None] = None
    _instance_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, root: str | Path | None = None, *, embedder: Embedder | None = None) -> None:
        self.root = skills_root(root)
        self._embedder = embedder
        self._skills: dict[str, AgentSkill] = {}
        self._loaded = False
        self._lock = threading.Lock()
        self._vectors: dict[str, list[float]] = {}

    @classmethod
    def instance(cls) -> AgentSkillCatalog:
        """The shared catalog robots use, made on first use from the configured ``skills_path``."""
        with cls._instance_lock:
            if cls._instance is None:
                cls._instance = cls()
            return cls._instance

    @classmethod
    def reset(cls) -> None:
        """Forget the shared catalog, so the next :meth:`instance` rescans (the configured root too)."""
        with cls._instance_lock:
            cls._instance = None

    @property
    def embedder(self) -> Embedder:
        """The embedder :meth:`match` uses (settable)."""
        if self._embedder is None:
            self._embedder = LexicalEmbedder()
        return self._embedder

    @embedder.setter
    def embedder(self, embedder: Embedder) -> None:
        with self._lock:
            self._embedder = embedder
            self._vectors.clear()

    def _load(self) -> None:
        with self._lock:
            if self._loaded:
                return
            self._loaded = True
            if not self.root.is_dir():
                return
            for folder in sorted(p for p in self.root.iterdir() if p.is_dir()):
                skill_md = folder / "SKILL.md"
                if not skill_md.is_file():
                    continue
                try:
                    skill = AgentSkill(skill_md)
                except ConfigurationError as exc:
                    logger.warning("AgentSkillCatalog: %s, skipping %s", exc, folder.name)
                    continue
                if skill.name in self._skills:
                    logger.warning(
                        "AgentSkillCatalog: skill '%s' is already defined in %s, skipping %s",
                        skill.name, self._skills[skill.name].path.name, folder.name,
                    )
                    continue
                self._skills[skill.name] = skill

    def find(self, skill_id: str) -> AgentSkill | None:
        """The skill whose front-matter ``name`` is ``skill_id``, or ``None``."""
        self._load()
        return self._skills.get(str(skill_id))

    def all(self) -> list[AgentSkill]:
        """Every skill found, in folder order."""
        self._load()
        return list(self._skills.values())

    def match(
        self, message: str, skills: Sequence[AgentSkill], *, threshold: float = SIMILARITY_THRESHOLD
    ) -> list[AgentSkill]:
        """The ``skills`` whose description is at least ``threshold`` similar to ``message``, best first.

        The message is embedded as a query and each description as a passage (cached per description).
        Errors of the embedder propagate.
        """
        if not skills:
            return []
        embedder = self.embedder
        query = embedder.embed_query(message)
        missing = list(dict.fromkeys(s.description for s in skills if s.description not in self._vectors))
        if missing:
            vectors = embedder.embed_documents(missing)
            if len(vectors) != len(missing):
                raise ValueError(f"the embedder returned {len(vectors)} vectors for {len(missing)} descriptions")
            self._vectors.update(zip(missing, vectors, strict=True))
        scored = [(cosine_similarity(query, self._vectors[s.description]), s) for s in skills]
        return [skill for score, skill in sorted(scored, key=lambda pair: -pair[0]) if score >= threshold]

    def __repr__(self) -> str:
        return f"<AgentSkillCatalog {str(self.root)!r}>"
