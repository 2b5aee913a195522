"""robotlab.llm.warmup in fresh processes: what a first call loads, loaded ahead, and no request sent."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from robotlab.llm import warmup
from robotlab.llm.direct import OpenAICompatibleLLM
from robotlab.testing import FakeLLM
from robotlab.testing.server import FakeLLMServer

CODE = """
import json, sys
from robotlab.runtime import get_loop
from robotlab.llm import AutoLLM, price_table, quirks, warmup

llm = AutoLLM(api_base={base!r}, api_key="sk-fake")
before = warmup.preload([("openai/gpt-4o-mini", llm)], quirks={quirks})
imported = "litellm" in sys.modules
pools = warmup.open_pools([("openai/gpt-4o-mini", llm)])
route, client = llm.route("openai/gpt-4o-mini")
print(json.dumps({{"notes": before, "pools": pools, "litellm": imported, "table": price_table._table is not None,
                  "pool": client._clients.get(get_loop()) is not None,
                  "quirks": ("openai", "gpt-4o-mini") in quirks._cache, "run": "robotlab.robot.run" in sys.modules}}))
"""


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as running:
        yield running


def fresh(server: FakeLLMServer, quirks: bool) -> Any:
    done = subprocess.run([sys.executable, "-c", CODE.format(base=server.base_url, quirks=quirks)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_direct_model_is_warmed_without_litellm(server: FakeLLMServer) -> None:
    done = fresh(server, quirks=False)
    assert done["notes"] == ["openai/gpt-4o-mini: direct", "price table read"]
    assert done["litellm"] is False and done["table"] is True and done["run"] is True
    assert done["pools"] == [server.base_url] and done["pool"] is True
    assert done["quirks"] is False
    assert server.requests == []


def test_requests_with_parameters_learn_their_mapping_ahead(server: FakeLLMServer) -> None:
    done = fresh(server, quirks=True)
    assert "parameter quirks learned" in done["notes"] and done["quirks"] is True
    assert done["litellm"] is True  # the mapping is litellm's
    assert server.requests == []


BUILD = """
import json, sys
import robotlab
from robotlab.testing import FakeLLM, text

robotlab.configure(llm={{"api_base": {base!r}, "api_key": "sk-fake"}})
robotlab.build(name="fake", model="openai/gpt-4o-mini", llm=FakeLLM([text("Hi.")]))
fake = sorted(name for name in ("httpx", "robotlab.llm.direct") if name in sys.modules)
robotlab.build(name="elsewhere", model="anthropic/claude-3-5-sonnet-20240620")  # goes through litellm
from robotlab.llm import warmup
elsewhere = [warmup.prepared(), warmup.worth_preparing("anthropic/claude-3-5-sonnet-20240620"),
             "litellm" in sys.modules]
robot = robotlab.build(name="first", model="openai/gpt-4o-mini")
from robotlab.llm import price_table, warmup
from robotlab.llm.direct import default_ssl_context
built = {{"httpx": "httpx" in sys.modules, "table": price_table._table is not None, "prepared": warmup.prepared(),
          "ssl": default_ssl_context.cache_info().currsize}}
result = robot.run("Hi")
from robotlab.runtime import get_loop
route, client = robot.llm.route("openai/gpt-4o-mini")
pool = client._clients[get_loop()]._transport._pool
print(json.dumps({{"fake": fake, "elsewhere": elsewhere, "built": built, "reply": result.reply,
                  "transport": result.transport, "shared_ssl": pool._ssl_context is default_ssl_context(),
                  "litellm": "litellm" in sys.modules}}))
"""


def test_build_prepares_a_direct_models_first_call_and_nothing_for_a_fake(server: FakeLLMServer) -> None:
    server.default = "Hello there"
    done = subprocess.run([sys.executable, "-c", BUILD.format(base=server.base_url)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    facts = json.loads(done.stdout.strip().splitlines()[-1])
    assert facts["fake"] == []  # a robot on a fake loads no HTTP client
    assert facts["elsewhere"] == [False, False, False]  # nothing loaded, litellm not imported, not routed again
    assert facts["built"] == {"httpx": True, "table": True, "prepared": True, "ssl": 1}
    assert facts["transport"] == "direct" and facts["reply"]
    assert facts["shared_ssl"] is True and facts["litellm"] is False
    assert len(server.requests) == 1


def test_first_direct_names_the_first_model_that_goes_to_the_direct_client() -> None:
    direct = OpenAICompatibleLLM(api_base="http://127.0.0.1:9/v1", api_key="sk-fake")
    models = [("openai/gpt-4o", FakeLLM(["never"])), ("openai/gpt-4o-mini", direct), ("openai/o1", direct)]
    assert warmup.first_direct(models) == "openai/gpt-4o-mini"
    assert warmup.first_direct(models[:1]) is None
