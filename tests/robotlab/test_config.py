from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import robotlab.config as config_module
from robotlab.config import Config, configure, get_config, reload_config
from robotlab.errors import ConfigurationError

KEY_VARIABLES = list(config_module.PROVIDER_KEY_VARIABLES.values())


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    extra = [name for names in config_module.PROVIDER_EXTRA_VARIABLES.values() for name in names]
    for name in [*KEY_VARIABLES, *extra, "ROBOT_LAB_MODEL", "ROBOT_LAB_ENV", "ROBOT_LAB_LLM__PROVIDER"]:
        monkeypatch.delenv(name, raising=False)
    reload_config()
    yield tmp_path
    monkeypatch.undo()
    reload_config()


def test_defaults() -> None:
    config = get_config()
    assert config.model is None
    assert config.tools == "none"
    assert config.mcp == "none"
    assert config.llm.request_timeout == 120.0
    assert config.llm.max_retries == 3
    assert config.environment == "development"
    assert config.is_development and not config.is_production


def test_env_prefix_and_nesting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROBOT_LAB_MODEL", "openai/gpt-4o-mini")
    monkeypatch.setenv("ROBOT_LAB_LLM__REQUEST_TIMEOUT", "30")
    config = reload_config()
    assert config.model == "openai/gpt-4o-mini"
    assert config.llm.request_timeout == 30.0


def test_files_layered_user_then_project_then_env(isolated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    user = isolated / "xdg" / "robotlab" / "robotlab.yml"
    user.parent.mkdir(parents=True)
    user.write_text("model: user/model\ntemplate_path: user_prompts\n")
    assert reload_config().model == "user/model"
    project = isolated / "config" / "robotlab.yml"
    project.parent.mkdir()
    project.write_text("defaults:\n  model: project/default\ntest:\n  model: project/test\n")
    config = reload_config()
    assert config.model == "project/default"
    assert config.template_path == "user_prompts"
    monkeypatch.setenv("ROBOT_LAB_ENV", "test")
    assert reload_config().model == "project/test"
    monkeypatch.setenv("ROBOT_LAB_MODEL", "env/model")
    assert reload_config().model == "env/model"


def test_the_seeds_file_names_are_read_and_ours_win(isolated: Path) -> None:
    seed_user = isolated / "xdg" / "robot_lab" / "robot_lab.yml"
    seed_user.parent.mkdir(parents=True)
    seed_user.write_text("model: seed-user/model\ntemplate_path: seed_prompts\nskills_path: seed_skills\n")
    assert reload_config().model == "seed-user/model"
    seed_project = isolated / "config" / "robot_lab.yml"
    seed_project.parent.mkdir()
    seed_project.write_text("model: seed-project/model\nmax_tool_rounds: 4\n")
    assert reload_config().model == "seed-project/model"
    ours_user = isolated / "xdg" / "robotlab" / "robotlab.yml"
    ours_user.parent.mkdir(parents=True)
    ours_user.write_text("template_path: our_prompts\n")
    (isolated / "config" / "robotlab.yml").write_text("model: our-project/model\n")
    config = reload_config()
    assert config.model == "our-project/model"  # ours over the seed's, in the same layer
    assert config.template_path == "our_prompts" and config.skills_path == "seed_skills"
    assert config.max_tool_rounds == 4  # the seed's project file still over both user files


@pytest.mark.parametrize(
    ("variables", "model"),
    [
        ({"AWS_ACCESS_KEY_ID": "AKIA", "AWS_SECRET_ACCESS_KEY": "s", "AWS_REGION": "us-east-1"},
         "bedrock/anthropic.claude-3-5-haiku-20241022-v1:0"),
        ({"GOOGLE_CLOUD_PROJECT": "proj", "GOOGLE_CLOUD_LOCATION": "us-central1"}, "vertex_ai/gemini-2.0-flash"),
        ({"GPUSTACK_API_KEY": "gk", "GPUSTACK_API_BASE": "http://127.0.0.1:9/v1", "GPUSTACK_MODEL": "qwen3"},
         "gpustack/qwen3"),
        ({"AWS_ACCESS_KEY_ID": "AKIA"}, None),  # a key id alone is not credentials
        ({"GPUSTACK_API_KEY": "gk"}, None),  # nor a key without a server and a model
    ],
)
def test_bedrock_vertex_and_gpustack_join_the_default_model_fallbacks(
    monkeypatch: pytest.MonkeyPatch, variables: dict[str, str], model: str | None
) -> None:
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    assert get_config().default_model() == model


def test_gpustack_models_go_to_its_server_with_its_key(monkeypatch: pytest.MonkeyPatch) -> None:
    from robotlab.llm.transport import choose_transport, resolve_endpoint

    monkeypatch.setenv("GPUSTACK_API_KEY", "gk")
    monkeypatch.setenv("GPUSTACK_API_BASE", "http://127.0.0.1:9/v1")
    endpoint = resolve_endpoint("gpustack/qwen3")
    assert endpoint is not None
    assert (endpoint.api_base, endpoint.api_key, endpoint.model) == ("http://127.0.0.1:9/v1", "gk", "qwen3")
    assert choose_transport("gpustack/qwen3", "auto") == "direct"


def test_invalid_yaml_file_is_a_configuration_error(isolated: Path) -> None:
    project = isolated / "config" / "robotlab.yml"
    project.parent.mkdir()
    project.write_text("model: [unclosed\n")
    with pytest.raises(ConfigurationError, match="Invalid YAML in"):
        reload_config()
    project.write_text("- a list\n")
    with pytest.raises(ConfigurationError, match="must hold a mapping"):
        reload_config()


def test_provider_key_fallback_picks_default_model(monkeypatch: pytest.MonkeyPatch) -> None:
    config = get_config()
    assert config.default_model() is None
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    assert config.default_model() == "openai/gpt-4o-mini"
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant")
    assert config.default_model().startswith("anthropic/")
    configure(llm={"provider": "openai"})
    assert config.default_model() == "openai/gpt-4o-mini"


def test_require_model_names_what_to_set() -> None:
    with pytest.raises(ConfigurationError, match="ROBOT_LAB_MODEL") as info:
        get_config().require_model()
    assert "OPENAI_API_KEY" in str(info.value)


def test_configure_overrides_and_rejects_unknown_names() -> None:
    configure(model="x/y", llm={"api_base": "http://127.0.0.1:9/v1"})
    assert get_config().model == "x/y"
    assert get_config().llm.api_base == "http://127.0.0.1:9/v1"
    assert get_config().llm.request_timeout == 120.0
    with pytest.raises(ConfigurationError, match="Unknown setting\\(s\\): modle"):
        configure(modle="x")


def test_module_attribute_access_reads_current_config() -> None:
    configure(model="a/b")
    assert config_module.model == "a/b"
    assert isinstance(get_config(), Config)


def test_configure_validates_values() -> None:
    with pytest.raises(ConfigurationError, match=r"Invalid setting: request_timeout"):
        configure(llm={"request_timeout": "abc"})
    with pytest.raises(ConfigurationError, match=r"Invalid setting: max_tool_rounds"):
        configure(max_tool_rounds="abc")
    assert configure(llm={"request_timeout": "30"}).llm.request_timeout == 30.0


def test_import_loads_no_settings_library_until_the_settings_are_read() -> None:
    import json
    import subprocess
    import sys

    code = (
        "import sys, json; import robotlab.config as c; before = [m for m in ('pydantic_settings', 'yaml') "
        "if m in sys.modules]; c.get_config(); after = [m for m in ('pydantic_settings', 'yaml') if m in sys.modules];"
        "print(json.dumps([before, after, c.Config.__name__]))"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert json.loads(out) == [[], ["pydantic_settings", "yaml"], "Config"]


def test_yaml_files_are_read_by_pydantic_settings_own_source() -> None:
    from pydantic_settings import YamlConfigSettingsSource

    from robotlab._settings import _YamlFile

    assert issubclass(_YamlFile, YamlConfigSettingsSource)
