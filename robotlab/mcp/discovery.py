"""ServerDiscovery: connect only the MCP servers a message is about (``mcp_discovery=True``).

Each server's topic text, ``"<name> <description>"``, is compared with the user's message by
stemmed term-frequency cosine similarity; servers scoring at least the threshold are kept.
Discovery can only narrow a run, never break one: whenever it cannot make a confident call it
returns every server::

    servers = [
        {"name": "filesystem", "description": "Read and write files", "transport": {...}},
        {"name": "github", "description": "GitHub repos and PRs", "transport": {...}},
    ]
    ServerDiscovery.select("list open pull requests", from_=servers)   # only the github entry
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .. import _ruby
from ..errors import DependencyError
from ..text import analysis as text_analysis

__all__ = ["ServerDiscovery"]


class ServerDiscovery:
    """Narrows a server list to the servers relevant to a query (module functions, as in RobotLab)."""

    DEFAULT_THRESHOLD = 0.05
    """Deliberately low: server descriptions are a sentence long, so scores are small even on topic."""

    @staticmethod
    def select(query: object, *, from_: Sequence[Any], threshold: float = DEFAULT_THRESHOLD) -> list[Any]:
        """The servers of ``from_`` whose score against ``query`` is at least ``threshold``.

        ``from_`` is returned unchanged (as a list) when it is empty, the query is blank, no
        server has a description, the stemmer is missing (its ``DependencyError`` is caught) or
        no server reaches the threshold.
        """
        servers = list(from_)
        if not servers or not _ruby.strip("" if query is None else str(query)):
            return servers
        if not ServerDiscovery.has_descriptions(servers):
            return servers
        try:
            text_analysis.require_classifier()
            matches = [s for s in servers if ServerDiscovery.score(query, s) >= threshold]
        except DependencyError:
            return servers
        return matches or servers

    @staticmethod
    def has_descriptions(servers: Sequence[Any]) -> bool:
        """Whether any server has a non-blank description (Ruby ``any_descriptions?``)."""
        return any(ServerDiscovery.description_for(s) for s in servers)

    @staticmethod
    def topic_text(server: object) -> str:
        """``"<name> <description>"``, stripped: the name takes part in the match."""
        name = server.get("name") if isinstance(server, Mapping) else getattr(server, "name", None)
        name_text = "" if name is None else str(name)
        return _ruby.strip(f"{name_text} {ServerDiscovery.description_for(server)}")

    @staticmethod
    def description_for(server: object) -> str:
        """The server's description, stripped (``""`` when it has none)."""
        description = (
            server.get("description") if isinstance(server, Mapping) else getattr(server, "description", None)
        )
        return "" if description is None else _ruby.strip(str(description))

    @staticmethod
    def score(query: object, server: object) -> float:
        """Term-frequency cosine similarity of ``query`` and the server's topic text, in [0.0, 1.0].

        Raises:
            DependencyError: the stemmer package is missing.
        """
        return text_analysis.tf_cosine_similarity(query, ServerDiscovery.topic_text(server))
