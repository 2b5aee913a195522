from __future__ import annotations

import pytest

from robotlab.run_config import RunConfig


def test_unknown_field_message() -> None:
    with pytest.raises(ValueError, match="Unknown RunConfig field: modle"):
        RunConfig(modle="x")


def test_none_deletes_and_zero_is_kept() -> None:
    config = RunConfig(temperature=0.0, max_tokens=0, model="m")
    assert config.to_dict() == {"temperature": 0.0, "max_tokens": 0, "model": "m"}
    config.set("model", None)
    assert not config.has("model")
    assert config.temperature == 0.0


def test_merge_is_new_and_other_wins() -> None:
    base = RunConfig(model="a", temperature=0.5)
    merged = base.merge({"model": "b", "temperature": None})
    assert merged == RunConfig(model="b", temperature=0.5)
    assert base.model == "a"
    assert RunConfig().is_empty and not merged.is_empty


def test_json_dict_drops_callbacks_and_bus() -> None:
    config = RunConfig(model="m", on_content=print, bus=object())
    assert config.to_json_dict() == {"model": "m"}
    assert config.to_json() == '{"model": "m"}'


def test_from_front_matter_keeps_llm_and_tool_fields() -> None:
    config = RunConfig.from_front_matter({"model": "m", "temperature": 0, "tools": ["a"], "description": "x"})
    assert config.to_dict() == {"model": "m", "temperature": 0, "tools": ["a"]}


def test_field_categories_are_class_constants_in_the_seeds_order() -> None:
    assert RunConfig.LLM_FIELDS == ("model", "temperature", "top_p", "top_k", "max_tokens",
                                    "presence_penalty", "frequency_penalty", "stop")
    assert RunConfig.TOOL_FIELDS == ("mcp", "tools")
    assert RunConfig.CALLBACK_FIELDS == ("on_tool_call", "on_tool_result", "on_content")
    assert RunConfig.INFRA_FIELDS == ("bus", "enable_cache", "max_tool_rounds", "token_budget", "cost_budget",
                                      "ractor_pool_size", "max_concurrent_robots", "doom_loop_threshold",
                                      "auto_compact", "compact_threshold", "max_tools")
    assert (*RunConfig.LLM_FIELDS, *RunConfig.TOOL_FIELDS, *RunConfig.CALLBACK_FIELDS,
                                *RunConfig.INFRA_FIELDS) == RunConfig.FIELDS
    assert RunConfig.NON_SERIALIZABLE_FIELDS == ("on_tool_call", "on_tool_result", "on_content", "bus", "auto_compact")


def test_assigning_a_field_sets_it_and_none_clears_it() -> None:
    config = RunConfig(max_tokens=100, token_budget=50)
    assert config.max_tokens == 100
    config.max_tokens = None
    assert not config.has("max_tokens") and config.to_dict() == {"token_budget": 50}
    config.max_concurrent_robots = 4
    assert config.get("max_concurrent_robots") == 4
    with pytest.raises(ValueError, match="^Unknown RunConfig field: colour$"):
        config.colour = "red"
