"""A version's parts applied to a freshly built robot, and the hash of the prompt the code gave.

:func:`apply` replaces what the version sets and keeps the code's rest: the prompt (template text whose
front matter sets model settings, rendered with the robot's template parameters) replaces the template and
system prompt; ``model``, ``params``, ``tools`` (names of the code's tools to keep) and the budgets override.
"""

from __future__ import annotations

import hashlib
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from robotlab.budget import Budget
from robotlab.run_config import FIELDS, RunConfig
from robotlab.templates import Template
from robotlab_django.models import RobotVersion

if TYPE_CHECKING:
    from robotlab.robot import Robot

__all__ = ["apply", "prompt_hash", "settings_of"]


def prompt_hash(robot: Robot) -> str:
    """SHA-256 (hex) of ``robot``'s instructions and model: what tells two code versions apart."""
    text = f"{robot.instructions or ''}\x00{robot.model or ''}"
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def settings_of(version: RobotVersion) -> dict[str, Any]:
    """The version's parts other than the prompt, as plain values (what the admin's diff compares)."""
    return {"model": version.model or None, "params": dict(version.params or {}),
            "tools": None if version.tools is None else list(version.tools),
            "token_budget": version.token_budget,
            "cost_budget": None if version.cost_budget is None else str(Decimal(version.cost_budget).normalize())}


def _apply_prompt(robot: Robot, version: RobotVersion) -> None:
    template = Template.parse(version.prompt, template_id=str(version))
    robot.config = robot.config.merge(RunConfig.from_front_matter(template.metadata))
    rendered = template.render(robot.persona.template_context())
    robot.persona.template = None  # the version's text replaces the code's template and system prompt
    robot.update(system_prompt=rendered)


def apply(robot: Robot, version: RobotVersion) -> Robot:
    """Put ``version``'s parts on ``robot`` (a :class:`robotlab.Robot` just built from its code); returns it.

    Raises:
        robotlab.ConfigurationError: the version's prompt is not a valid template, or lacks parameters.
    """
    if version.prompt:
        _apply_prompt(robot, version)
    if version.model:
        robot.with_model(version.model)
    extra = {}
    for name, value in (version.params or {}).items():
        if name in FIELDS:
            robot.config.set(name, value)
        else:
            extra[name] = value
    if extra:
        robot.with_params(**extra)
    if version.tools is not None:
        keep = set(version.tools)
        robot.local_tools[:] = [tool for tool in robot.local_tools if tool.name in keep]
    if version.token_budget is not None:
        robot.config.set("token_budget", int(version.token_budget))
    if version.cost_budget is not None:
        robot.config.set("cost_budget", float(version.cost_budget))
    if version.token_budget is not None or version.cost_budget is not None:
        robot.budget = Budget(robot_name=robot.name, token_budget=robot.config.token_budget,
                              cost_budget=robot.config.cost_budget)
    return robot
