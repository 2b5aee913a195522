"""Every ```python block of the documentation runs.

Each page's blocks run in order, in one namespace, with a temporary working directory.
A block preceded by ``<!-- skip-run -->`` is not run (Django code, pseudo-code). The pages under
``docs/django/`` are Django project snippets (settings, URLconfs); their owner checks them in
``tests/robotlab_django/test_docs.py``, so they are not executed here.
A non-Python block with ``title="some/path"`` is written to that path first, so a page can
show a template or a config file and then use it.

The examples name real models (``openai/gpt-4o-mini``) and use the default litellm client;
they run offline against :class:`robotlab.testing.FakeLLMServer`, whose responder answers
plausibly: it calls the first tool when the user just spoke, fills structured-output schemas,
and otherwise replies with a short text. Functions named ``test_*`` that a block defines are
called right away, with the fixtures they ask for (``fake_llm``, ``fake_llm_server``,
``tmp_path``, ``monkeypatch`` and fixtures the page defines itself).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import os
import re
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import robotlab
from robotlab.config import PROVIDER_KEY_VARIABLES
from robotlab.testing import FakeLLM, FakeLLMServer
from robotlab.testing.server import call, reply

DOCS = Path(__file__).resolve().parent.parent / "docs"
PAGES = sorted(p for p in DOCS.rglob("*.md") if not {"_hooks", "django"} & set(p.relative_to(DOCS).parts))

FENCE = re.compile(
    r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>[^\n]*)\n(?P<body>.*?)^(?P=indent)(?P=fence)[ \t]*$",
    re.MULTILINE | re.DOTALL,
)
SKIP = "<!-- skip-run -->"
TITLE = re.compile(r'title="([^"]+)"')


@dataclass
class Block:
    page: Path
    line: int
    language: str
    title: str | None
    code: str
    skipped: bool


def blocks(page: Path) -> list[Block]:
    text = page.read_text()
    found = []
    for match in FENCE.finditer(text):
        info = match["info"].strip().lstrip("{").strip()
        language = info.split()[0].lstrip(".").lower() if info else ""
        title = TITLE.search(info)
        before = text[: match.start()].rstrip().splitlines()
        skipped = bool(before) and before[-1].strip() == SKIP
        body = textwrap.dedent(match["body"]) if match["indent"] else match["body"]
        found.append(Block(page, text.count("\n", 0, match.start()) + 1, language,
                           title[1] if title else None, body, skipped))
    return found


# -- the fake provider -------------------------------------------------------------------

_STRINGS = {"location": "Paris", "city": "Paris", "query": "refund policy", "expression": "6 * 7",
            "question": "Which plan are you on?", "sku": "A-100", "order_id": "A-1001", "email": "ada@example.com"}


def _value(name: str, schema: dict[str, Any]) -> Any:
    if "enum" in schema:
        return schema["enum"][0]
    if "default" in schema:
        return schema["default"]
    for option in schema.get("anyOf", []):
        if option.get("type") != "null":
            return _value(name, option)
    kind = schema.get("type")
    if kind == "integer":
        return 2
    if kind == "number":
        return 21.5
    if kind == "boolean":
        return True
    if kind == "array":
        return [_value(name, schema.get("items", {"type": "string"}))]
    if kind == "object":
        return _object(schema)
    return _STRINGS.get(name, "example")


def _object(schema: dict[str, Any], *, required_only: bool = False) -> dict[str, Any]:
    properties = schema.get("properties", {})
    names = schema.get("required", []) if required_only else list(properties)
    return {name: _value(name, properties.get(name, {})) for name in names}


def _text(content: Any) -> str:
    if isinstance(content, list):
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content or "")


def responder(body: dict[str, Any]) -> Any:
    messages = body.get("messages") or []
    last = messages[-1] if messages else {"role": "user", "content": ""}
    tools = body.get("tools") or []
    if tools and last.get("role") == "user":
        function = tools[0]["function"]
        arguments = _object(function.get("parameters") or {}, required_only=True)
        return call(function["name"], raw_arguments=json.dumps(arguments))
    response_format = body.get("response_format")
    if isinstance(response_format, dict) and response_format.get("type") == "json_schema":
        schema = response_format.get("json_schema", {}).get("schema", {})
        return reply(json.dumps(_object(schema)))
    if last.get("role") == "tool":
        results = []
        for message in reversed(messages):
            if message.get("role") != "tool":
                break
            results.append(_text(message.get("content"))[:200])
        return reply("Here is what I found: " + "; ".join(reversed(results)))
    return reply("Sure! Here is a short answer from the model.")


@pytest.fixture(scope="module")
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer(responder=responder) as fake:
        yield fake


@pytest.fixture
def environment(server: FakeLLMServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    saved = dict(os.environ)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    for name in [*PROVIDER_KEY_VARIABLES.values(), *[k for k in os.environ if k.startswith("ROBOT_LAB_")]]:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("ROBOT_LAB_LLM__API_BASE", server.base_url)
    monkeypatch.setenv("ROBOT_LAB_MODEL", "openai/gpt-4o-mini")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fake")
    robotlab.reload_config()
    try:
        yield work
    finally:
        os.environ.clear()
        os.environ.update(saved)
        monkeypatch.undo()
        robotlab.reload_config()


# -- running a page ----------------------------------------------------------------------

def _fixture_function(value: Any) -> Any:
    unwrap = getattr(value, "_get_wrapped_function", None)
    if callable(unwrap) and hasattr(value, "_fixture_function_marker"):
        return unwrap()
    return None


class _Fixtures:
    """Just enough fixture resolution to run the test functions a page shows."""

    def __init__(self, namespace: dict[str, Any], stack: contextlib.ExitStack, tmp_path: Path) -> None:
        self.namespace = namespace
        self.stack = stack
        self.tmp_path = tmp_path
        self.count = 0

    def value(self, name: str, cache: dict[str, Any]) -> Any:
        if name in cache:
            return cache[name]
        if name == "fake_llm":
            value: Any = FakeLLM()
        elif name == "fake_llm_server":
            value = self.stack.enter_context(FakeLLMServer())
        elif name == "tmp_path":
            self.count += 1
            value = self.tmp_path / f"test_{self.count}"
            value.mkdir()
        elif name == "monkeypatch":
            value = self.stack.enter_context(pytest.MonkeyPatch.context())
        elif (function := _fixture_function(self.namespace.get(name))) is not None:
            value = self.call(function, cache)
            if inspect.isgenerator(value):
                generator = value
                value = next(generator)
                self.stack.callback(lambda: next(generator, None))
        else:
            raise LookupError(f"the docs test cannot provide fixture {name!r}")
        cache[name] = value
        return value

    def call(self, function: Any, cache: dict[str, Any]) -> Any:
        kwargs = {name: self.value(name, cache) for name in inspect.signature(function).parameters}
        result = function(**kwargs)
        if inspect.iscoroutine(result):
            result = asyncio.run(result)
        return result


def _run_tests(namespace: dict[str, Any], before: dict[str, Any], tmp_path: Path) -> None:
    for name, value in list(namespace.items()):
        if not name.startswith("test_") or before.get(name) is value or not inspect.isfunction(value):
            continue
        with contextlib.ExitStack() as stack:
            _Fixtures(namespace, stack, tmp_path).call(value, {})


def _write(block: Block, work: Path) -> None:
    assert block.title is not None
    target = (work / block.title).resolve()
    assert work.resolve() in target.parents, f"{block.title} escapes the working directory"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(block.code)


def test_every_page_is_collected() -> None:
    names = {p.relative_to(DOCS).as_posix() for p in PAGES}
    assert {"index.md", "getting-started.md", "guides/robots.md", "guides/testing.md"} <= names


@pytest.mark.parametrize("page", PAGES, ids=[p.relative_to(DOCS).as_posix() for p in PAGES])
def test_page_examples_run(page: Path, environment: Path, tmp_path: Path) -> None:
    namespace: dict[str, Any] = {"__name__": f"docs_{page.stem.replace('-', '_')}"}
    for block in blocks(page):
        if block.skipped:
            continue
        if block.language in {"python", "py"}:
            before = dict(namespace)
            where = f"{page.relative_to(DOCS)}:{block.line}"
            try:
                exec(compile(block.code, where, "exec"), namespace)
                _run_tests(namespace, before, tmp_path)
            except BaseException as exc:
                raise AssertionError(f"the example at {where} failed: {type(exc).__name__}: {exc}") from exc
        elif block.title:
            _write(block, environment)
