from __future__ import annotations

from pathlib import Path

import pytest

from robotlab.errors import ConfigurationError
from robotlab.templates import Template

SUPPORT = """---
description: Answers billing questions
model: openai/gpt-4o-mini
temperature: 0.0
max_tokens: 0
parameters:
  company: Acme
  tier: null
---
You help {{ company }} customers on the {{ tier }} plan.
"""


def test_parse_front_matter_parameters_and_render(tmp_path: Path) -> None:
    (tmp_path / "support.md").write_text(SUPPORT)
    template = Template.load("support", tmp_path)
    assert template.metadata["description"] == "Answers billing questions"
    assert template.parameters == {"company": "Acme", "tier": None}
    assert template.missing({}) == ["tier"]
    assert template.render({"tier": "gold"}) == "You help Acme customers on the gold plan."
    assert template.render({"tier": "gold", "company": "Initech"}).startswith("You help Initech")


def test_llm_params_keep_zero_values() -> None:
    template = Template.parse(SUPPORT, template_id="support")
    assert template.llm_params == {"model": "openai/gpt-4o-mini", "temperature": 0.0, "max_tokens": 0}


def test_missing_required_parameter_names_it() -> None:
    template = Template.parse(SUPPORT, template_id="support")
    with pytest.raises(ConfigurationError, match=r"Template 'support' is missing required parameters: tier\."):
        template.render({})


def test_undefined_variable_in_body_is_a_clear_error() -> None:
    template = Template.parse("Hello {{ name }}", template_id="hi")
    with pytest.raises(ConfigurationError, match="Template 'hi': 'name' is undefined"):
        template.render({})


def test_missing_template_says_where_it_looked(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match=r"Template 'nope' not found: looked for .*nope\.md"):
        Template.load("nope", tmp_path)


def test_broken_template_syntax_names_the_line() -> None:
    with pytest.raises(ConfigurationError, match=r"Template 'bad' line 2: "):
        Template.parse("ok\n{% if %}", template_id="bad")


def test_broken_front_matter() -> None:
    with pytest.raises(ConfigurationError, match="no closing '---'"):
        Template.parse("---\nmodel: x\n", template_id="open")
    with pytest.raises(ConfigurationError, match="invalid YAML front matter"):
        Template.parse("---\nmodel: [x\n---\nbody", template_id="yaml")
    with pytest.raises(ConfigurationError, match="'parameters' must be a mapping"):
        Template.parse("---\nparameters: [a]\n---\nbody", template_id="params")


def test_template_without_front_matter() -> None:
    template = Template.parse("Just text, {{ '{{' }} kept", template_id="plain")
    assert template.metadata == {}
    assert template.render() == "Just text, {{ kept"
