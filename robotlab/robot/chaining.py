"""Changing a robot's settings, chained: the ``with_*`` methods and ``update``.

Each ``with_*`` method changes one thing and returns the robot, so calls chain::

    robot.with_model("openai/gpt-4o").with_temperature(0.2).with_params(seed=7)

:class:`Chaining` is a base of :class:`~robotlab.Robot`; it changes the robot's settings
(``config``), its conversation's instructions, its persona (template and its parameters) and the LLM
parameters it adds to every request.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self

if TYPE_CHECKING:
    from ..run_config import RunConfig
    from .conversation import Conversation
    from .persona import Persona

__all__ = ["Chaining"]


class Chaining:
    """The ``with_*`` methods and ``update`` of a robot (see :class:`~robotlab.Robot`)."""

    config: RunConfig
    conversation: Conversation
    persona: Persona
    _params: dict[str, Any]

    def _render(self, run_context: Mapping[str, Any] | None = None) -> None:
        raise NotImplementedError

    def with_model(self, model: str) -> Self:
        """Use ``model`` from now on."""
        self.config.set("model", model)
        return self

    def with_temperature(self, temperature: float) -> Self:
        """Set the temperature."""
        self.config.set("temperature", temperature)
        return self

    def with_instructions(self, instructions: str, *, replace: bool = True) -> Self:
        """Set the system prompt (``replace=False`` appends to the current one)."""
        current = self.conversation.instructions
        self.conversation.instructions = instructions if replace or not current else f"{current}\n\n{instructions}"
        return self

    def with_params(self, **params: object) -> Self:
        """Pass extra LLM parameters on every request (``max_tokens``, ``seed``, ...)."""
        self._params.update(params)
        return self

    def with_headers(self, **headers: str) -> Self:
        """Send extra HTTP headers to the provider."""
        self._params.setdefault("extra_headers", {}).update(headers)
        return self

    def with_schema(self, schema: object) -> Self:
        """Ask for structured output: a pydantic model class or a JSON schema dict."""
        return self.with_params(response_format=schema)

    def with_thinking(self, effort: str = "medium") -> Self:
        """Ask reasoning models to think (litellm's ``reasoning_effort``)."""
        return self.with_params(reasoning_effort=effort)

    def with_context(self, **context: object) -> Self:
        """Merge template parameters and re-render the template."""
        self.persona.update_context(context)
        self._render({})
        return self

    def with_template(self, template: str, **context: object) -> Self:
        """Switch to another template (re-applies its front matter)."""
        self.persona.switch_template(template)
        if context:
            self.persona.update_context(context)
        self._render()
        return self

    def update(self, *, template: str | None = None, context: Mapping[str, Any] | None = None,
               system_prompt: str | None = None, model: str | None = None, temperature: float | None = None,
               **params: object) -> Self:
        """Change several settings at once; extra keywords become LLM parameters.

        Args:
            template: Switch to this template (see :meth:`with_template`).
            context: Template parameters to merge.
            system_prompt: The new inline instructions.
            model: Use this model (see :meth:`with_model`).
            temperature: Set the temperature.
            params: LLM parameters (see :meth:`with_params`).
        """
        if context is not None:
            self.persona.update_context(context)
        if system_prompt is not None:
            self.persona.system_prompt = system_prompt
        if template is not None:
            self.with_template(template)
        else:
            self._render()
        if model is not None:
            self.with_model(model)
        if temperature is not None:
            self.with_temperature(temperature)
        if params:
            self.with_params(**params)
        return self
