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
