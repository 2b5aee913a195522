"""ServerDiscovery (seed 002/004): threshold 0.05, every fallback, and mcp_discovery=True on a robot."""

from __future__ import annotations

from typing import Any

import pytest

import robotlab
from robotlab import text_analysis
from robotlab.errors import DependencyError
from robotlab.mcp import ServerConfig, ServerDiscovery
from robotlab.testing import FakeLLM, text

SERVERS: list[dict[str, Any]] = [
    {
        "name": "filesystem",
        "description": "Read, write, and search local files and directories",
        "transport": {"type": "stdio", "command": "mcp-server-filesystem"},
    },
    {
        "name": "github",
        "description": "GitHub repos, issues, pull requests, code search",
        "transport": {"type": "stdio", "command": "mcp-server-github"},
    },
    {
        "name": "brew",
        "description": "Install, update, and manage macOS packages via Homebrew",
        "transport": {"type": "stdio", "command": "mcp-server-brew"},
    },
]


def names(servers: list[Any]) -> list[str]:
    return [s["name"] if isinstance(s, dict) else s.name for s in servers]


def test_default_threshold() -> None:
    assert ServerDiscovery.DEFAULT_THRESHOLD == 0.05


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("install imagemagick", ["brew"]),
        ("list open pull requests", ["github"]),
        ("read the files in my directory", ["filesystem"]),
        ("search", ["filesystem", "github"]),
    ],
)
def test_select_narrows_to_relevant_servers(query: str, expected: list[str]) -> None:
    assert names(ServerDiscovery.select(query, from_=SERVERS)) == expected


def test_select_accepts_server_configs() -> None:
    configs = [ServerConfig(**s) for s in SERVERS]
    assert names(ServerDiscovery.select("install imagemagick", from_=configs)) == ["brew"]


@pytest.mark.parametrize("query", ["", "   ", None, "\t\n"])
def test_blank_query_returns_all(query: Any) -> None:
    assert ServerDiscovery.select(query, from_=SERVERS) == SERVERS


def test_empty_list_returns_empty() -> None:
    assert ServerDiscovery.select("install imagemagick", from_=[]) == []


def test_no_descriptions_returns_all() -> None:
    bare = [{"name": "brew", "transport": {}}, {"name": "github", "description": "  ", "transport": {}}]
    assert ServerDiscovery.select("install brew packages", from_=bare) == bare


def test_nothing_over_threshold_returns_all() -> None:
    assert ServerDiscovery.select("hello there", from_=SERVERS) == SERVERS
    assert ServerDiscovery.select("install imagemagick", from_=SERVERS, threshold=0.9) == SERVERS


def test_threshold_is_inclusive() -> None:
    score = ServerDiscovery.score("install imagemagick", SERVERS[2])
    assert score > 0
    assert names(ServerDiscovery.select("install imagemagick", from_=SERVERS, threshold=score)) == ["brew"]


def test_missing_stemmer_returns_all(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing() -> None:
        raise DependencyError("no stemmer")

    monkeypatch.setattr(text_analysis, "require_classifier", missing)
    assert ServerDiscovery.select("install imagemagick", from_=SERVERS) == SERVERS


def test_topic_text_and_description_for() -> None:
    assert (
        ServerDiscovery.topic_text(SERVERS[2])
        == "brew Install, update, and manage macOS packages via Homebrew"
    )
    assert ServerDiscovery.topic_text({"name": "bare"}) == "bare"
    assert ServerDiscovery.description_for({"name": "bare"}) == ""
    assert ServerDiscovery.description_for(ServerConfig(**SERVERS[0])) == SERVERS[0]["description"]
    assert ServerDiscovery.has_descriptions(SERVERS)
    assert not ServerDiscovery.has_descriptions([{"name": "x"}])


def test_score_uses_tf_cosine_of_topic_text() -> None:
    expected = text_analysis.tf_cosine_similarity("pull requests", ServerDiscovery.topic_text(SERVERS[1]))
    assert ServerDiscovery.score("pull requests", SERVERS[1]) == expected
    assert 0.0 <= expected <= 1.0


def test_robot_discovery_connects_only_the_relevant_server(
    fixture_server: Any, stdio_config: dict[str, Any], caplog_robotlab: Any
) -> None:
    unrelated = {
        "name": "weather",
        "description": "Forecasts, rain and temperature for cities",
        "transport": {"type": "stdio", "command": "/nonexistent/weather-server"},
    }
    llm = FakeLLM([text("done"), text("again")])
    robot = robotlab.build(
        name="finder",
        llm=llm,
        mcp_discovery=True,
        mcp_servers=[ServerConfig.in_process(fixture_server), unrelated],
    )
    try:
        robot.run("add two integers with arithmetic")
        assert list(robot.mcp_clients) == ["fixture"]
        assert robot.failed_mcp_server_names == []  # the weather server was never tried
        assert "add" in [t["function"]["name"] for t in llm.requests[0].tools]
        robot.run("what is the temperature in Paris?")  # discovery only narrows the first run
        assert list(robot.mcp_clients) == ["fixture"]
        assert robot.failed_mcp_server_names == []
    finally:
        robot.disconnect()


def test_robot_without_discovery_connects_everything(fixture_server: Any) -> None:
    unrelated = {
        "name": "weather",
        "description": "Forecasts",
        "transport": {"type": "stdio", "command": "/nonexistent/weather"},
    }
    robot = robotlab.build(
        name="all",
        llm=FakeLLM([text("ok")]),
        mcp_servers=[ServerConfig.in_process(fixture_server), unrelated],
    )
    try:
        robot.run("add two integers")
        assert list(robot.mcp_clients) == ["fixture"]
        assert robot.failed_mcp_server_names == ["weather"]
    finally:
        robot.disconnect()
