"""A robot's persona: its instructions (template, template skills, AgentSkills, system prompt).

Every robot has one (``robot.persona``). It renders the instructions into the robot's conversation:
the template skills' bodies (depth first, nested skills first), then the template's body, then the
``system_prompt``. A template whose parameters are missing at build is rendered at the first run, with
that run's parameters. AgentSkills (``skills=`` ids found in the
:class:`~robotlab.agent_skill.AgentSkillCatalog`) are matched to each run's message and prepended for
that run only, their script tools added to the robot's tools. What the robot has learned is another
part (:class:`~robotlab.robot.learnings.Learnings`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from ..config import get_config
from ..errors import ConfigurationError
from ..run_config import RunConfig
from ..templates import Template
from ..tools.resolution import is_none_value

if TYPE_CHECKING:
    from ..agent_skill import AgentSkill, AgentSkillCatalog
    from ..tools import Tool
    from .conversation import Conversation

__all__ = ["FrontMatter", "Persona"]

logger = logging.getLogger("robotlab")


class _Named(Protocol):
    name: str


def skill_ids(metadata: Mapping[str, Any]) -> list[str]:
    """The ``skills`` of a template's front matter, as a list of ids."""
    value = metadata.get("skills")
    return [str(value)] if isinstance(value, str) else [str(s) for s in value or []]


@dataclass
class FrontMatter:
    """What the templates' front matter says about the robot: settings and extras (name, description)."""

    config: RunConfig = field(default_factory=RunConfig)
    robot_name: str | None = None
    description: str | None = None

    def under(self, config: RunConfig) -> RunConfig:
        """``config`` over these settings; front-matter MCP servers apply only when ``config`` names none."""
        if not is_none_value(config.get("mcp")):
            self.config.set("mcp", None)
        return self.config.merge(config)


class Persona:
    """Template, skills and system prompt of one robot, rendered into its conversation's instructions.

    Args:
        owner: The robot (its ``name`` labels warnings).
        conversation: Where the rendered instructions go.
        template: A template id.
        system_prompt: Instructions appended after the template's.
        context: Template parameters (a dict, or a callable returning one).
        skills: Skill ids (AgentSkills and template skills).
    """

    def __init__(
        self,
        owner: _Named,
        conversation: Conversation,
        *,
        template: str | None = None,
        system_prompt: str | None = None,
        context: Mapping[str, Any] | Callable[..., Mapping[str, Any]] | None = None,
        skills: Sequence[str] | str | None = None,
    ) -> None:
        self._owner = owner
        self._conversation = conversation
        self.template = template
        self.system_prompt = system_prompt
        self.context = context
        self.skills = [str(s) for s in ([skills] if isinstance(skills, str) else list(skills or []))]
        self.agent_skills: list[AgentSkill] = []  # pending AgentSkills, matched to each run's message
        self._catalog: AgentSkillCatalog | None = None
        self._skill_templates: list[Template] | None = None  # template skills, expanded depth first
        self._template: Template | None = None
        self._pending = False
        self._skill_runs = 0  # runs in progress with AgentSkills injected, and the instructions before them
        self._skill_base: str | None = None

    def check_run_parameters(self, names: Sequence[str]) -> None:
        """Raise unless a template or template skill can take a run's parameters ``names``.

        Raises:
            ConfigurationError: ``"Unknown run option(s): ..."`` for a robot without templates.
        """
        if not self.template and not self._skill_templates:
            raise ConfigurationError(
                f"Unknown run option(s): {', '.join(sorted(names))}. Keyword arguments of run() are "
                f"template parameters, and robot '{self._owner.name}' has no template."
            )

    @property
    def needs_render(self) -> bool:
        """Whether the template still waits for its parameters (rendered at the next run)."""
        return bool(self.template and self._template is not None
                    and (self._conversation.instructions is None or self._pending))

    def template_context(self) -> dict[str, Any]:
        """The build-time template parameters (a callable ``context`` is called)."""
        context = self.context
        if callable(context):
            context = context()
        return dict(context or {})

    def update_context(self, context: Mapping[str, Any]) -> None:
        """Merge ``context`` into the build-time template parameters."""
        self.context = {**self.template_context(), **context}

    def switch_template(self, template: str) -> None:
        """Use template ``template`` from the next :meth:`render` on (its front matter is read again)."""
        self.template = template
        self._template = None

    def render(self, run_context: Mapping[str, Any] | None = None) -> FrontMatter | None:
        """Render the instructions into the conversation; returns the front matter when templates were (re)loaded.

        ``run_context`` (a run's parameters) renders the template even with parameters missing.
        """
        parts: list[str] = []
        front: FrontMatter | None = None
        if self.template and self._template is None:
            self._template = Template.load(self.template, get_config().template_path)
            self.skills += [s for s in skill_ids(self._template.metadata) if s not in self.skills]
            self._skill_templates = None
        if self._skill_templates is None:
            self._expand_skills()
            front = self._front_matter([*(self._skill_templates or []), *([self._template] if self.template
                                                                          and self._template else [])])
        values = {**self.template_context(), **(run_context or {})}
        for skill in self._skill_templates or []:  # a skill missing parameters is left out, like RobotLab's
            if not skill.missing({**{k: v for k, v in skill.parameters.items() if v is not None}, **values}):
                parts.append(skill.render(values))
        self._pending = False
        if self.template and self._template is not None:
            if run_context is not None or not self._template.missing(
                {**{k: v for k, v in self._template.parameters.items() if v is not None}, **values}
            ):
                parts.append(self._template.render(values))
            else:
                self._pending = True
        if self.system_prompt:
            parts.append(self.system_prompt)
        self._conversation.instructions = "\n\n".join(parts) if parts else None
        return front

    def _expand_skills(self) -> None:
        """Split :attr:`skills` into AgentSkills (found in the catalog) and template skills, depth first."""
        self.agent_skills, self._skill_templates = [], []
        if not self.skills:
            return
        from ..agent_skill import AgentSkillCatalog

        catalog = self._catalog = AgentSkillCatalog.instance()
        template_path = get_config().template_path
        visited = {str(self.template)} if self.template else set()
        templates: list[Template] = []

        def expand(ids: list[str]) -> None:
            for skill_id in ids:
                if skill_id in visited:
                    logger.warning("Robot '%s': skill cycle detected at '%s', skipping", self._owner.name, skill_id)
                    continue
                visited.add(skill_id)
                agent_skill = catalog.find(skill_id)
                if agent_skill is not None:
                    self.agent_skills.append(agent_skill)
                    continue
                template = Template.load(skill_id, template_path)
                expand(skill_ids(template.metadata))  # nested skills first
                templates.append(template)

        expand(list(self.skills))
        self._skill_templates = templates

    @staticmethod
    def _front_matter(templates: Sequence[Template]) -> FrontMatter:
        """Skill templates' then the template's front matter, the last one winning."""
        front = FrontMatter()
        for template in templates:
            front.config = front.config.merge(RunConfig.from_front_matter(template.metadata))
            front.robot_name = str(template.metadata.get("robot_name") or "") or front.robot_name
            front.description = str(template.metadata.get("description") or "") or front.description
        return front

    # -- AgentSkills -----------------------------------------------------------------------
    async def inject_agent_skills(self, message: object, tools: list[Tool]) -> list[Tool] | None:
        """Match the pending AgentSkills to ``message``.

        Prepend the matches' instructions and add their script tools to ``tools``. Returns the tools added (for
        :meth:`restore_agent_skills`), ``None`` when nothing matched.

        Overlapping runs of one robot all restore the instructions from before the first of them.
        """
        if not self.agent_skills or self._catalog is None:
            return None
        try:
            matched = await asyncio.to_thread(
                self._catalog.match, "" if message is None else str(message), self.agent_skills
            )
        except Exception as exc:
            logger.warning("Robot '%s': AgentSkill embedding failed: %s", self._owner.name, exc)
            return None
        if not matched:
            return None
        conversation = self._conversation
        if self._skill_runs == 0:
            self._skill_base = conversation.instructions
        self._skill_runs += 1
        skill_text = "\n\n".join(skill.instructions for skill in matched)
        conversation.instructions = "\n\n".join(part for part in (skill_text, self._skill_base or "") if part) or None
        added: list[Tool] = [tool for skill in matched for tool in skill.script_tools]
        tools.extend(added)
        return added

    def restore_agent_skills(self, added: list[Tool] | None, tools: list[Tool]) -> None:
        """Undo :meth:`inject_agent_skills`: take ``added`` out of ``tools``, restore the instructions."""
        if added is None:
            return
        for tool in added:  # one occurrence each: an overlapping run may have added the same tool
            index = next((i for i, t in enumerate(tools) if t is tool), None)
            if index is not None:
                del tools[index]
        self._skill_runs -= 1
        if self._skill_runs == 0:
            self._conversation.instructions = self._skill_base
