"""Loading what a process's first model call needs before that call: for workers and servers.

``import robotlab`` stays fast by loading most of the library on first use, so a fresh process's first run pays
for it: the run loop's modules, httpx's connection machinery, the price table, an SSL context, robotlab's
background loop, and litellm (seconds) when a model goes through it. A process that knows its models ahead
(a Celery worker: :mod:`robotlab_django.workers.warm_up`) pays this at start instead:

* :func:`preload` imports and reads everything that needs no thread and no socket, so it is safe in a parent
  process before it forks its workers (they inherit it, copy-on-write);
* :func:`open_pools` starts robotlab's background loop and opens, on it, the connection pool of each model's
  direct client (the ``httpx.AsyncClient`` with its SSL context), which belongs to that process: call it in
  the process that runs the jobs, after any fork;
* :func:`warm_up` does both;
* :func:`rehearse` (:func:`arehearse`) runs one robot turn on a direct model, answered in memory: the code a
  first run executes has run once (imports done, caches filled, bytecode specialized by the interpreter), so the
  first real run costs about what a later one does;
* :func:`prepare` is what :func:`robotlab.build` does for a robot whose model goes to the direct client: the
  first such robot of a process pays :func:`preload` (and the process's SSL context) where it is built, so a
  server that builds its robots at start answers its first request without it; a robot that goes elsewhere
  (litellm, a fake, your own ``llm``) loads nothing at build.

Each takes ``(model, llm)`` pairs: a robot's ``model`` and its ``llm`` (``warm_up([(robot.model, robot.llm)])``).
Nothing is sent to any provider.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import sys
from collections.abc import Iterable
from typing import Any

from . import price_table, pricing
from ._litellm import load_litellm
from .litellm_client import LLMClient
from .quirks import quirks_for
from .transport import AutoLLM, routed_without_litellm
from .types import LLM

__all__ = ["arehearse", "open_pools", "prepare", "prepared", "preload", "rehearse", "warm_up", "worth_preparing"]

logger = logging.getLogger("robotlab")
_prepared = False
#: Models :func:`prepare` found going elsewhere than the direct client: not routed again at each build.
_declined: set[str] = set()

#: What a first direct run imports lazily: the run loop, httpx's pool and the async backend httpcore picks.
_MODULES = ("robotlab.robot.run", "robotlab.llm.direct", "httpcore", "anyio._backends._asyncio")


def _route(model: str, llm: LLM) -> tuple[str, Any]:
    """``("direct" | "litellm" | "other", client)`` for ``model`` on ``llm``; ``("", None)`` when it cannot go."""
    from .direct import OpenAICompatibleLLM

    try:
        if isinstance(llm, AutoLLM):
            return llm.route(model)
    except Exception:  # no key, no endpoint: its first run reports it, warming does not
        return "", None
    if isinstance(llm, OpenAICompatibleLLM):
        return "direct", llm
    if isinstance(llm, LLMClient):
        return "litellm", llm
    return "other", llm


def preload(models: Iterable[tuple[str, LLM]] = (), *, quirks: bool = False) -> list[str]:
    """Import and read what the first calls of ``models`` need, without starting a thread or opening a socket.

    The run loop's modules and httpx's are imported, the price table is read (unless litellm prices every
    model, :func:`robotlab.llm.pricing.litellm_decides`), and litellm is imported when one of ``models`` goes
    through it. ``quirks=True`` (requests that carry parameters, such as ``temperature``) also learns each
    direct model's parameter mapping from litellm (:mod:`robotlab.llm.quirks`), which imports litellm. Safe
    before a fork.

    Returns:
        What was loaded, in words (for a log line).
    """
    for name in _MODULES:
        importlib.import_module(name)
    routes = {model: _route(model, llm) for model, llm in models}
    notes = [f"{model}: {route}" for model, (route, _client) in routes.items() if route]
    learned = [(client.provider, model) for model, (route, client) in routes.items()
               if quirks and route == "direct" and getattr(client, "provider", None)]
    if learned or any(route == "litellm" for route, _client in routes.values()):
        load_litellm()
        notes.append("litellm imported")
    for provider, model in learned:
        quirks_for(provider, model.removeprefix(f"{provider}/"))  # as the direct client asks, cached
    if learned:
        notes.append("parameter quirks learned")
    if not pricing.litellm_decides():
        price_table.load()
        notes.append("price table read")
    return notes


def prepared() -> bool:
    """Whether :func:`prepare` loaded a direct model's first call in this process already."""
    return _prepared


def worth_preparing(model: str | None) -> bool:
    """Whether :func:`prepare` could still load something for ``model`` (its build asks before routing it)."""
    return not _prepared and model is not None and model not in _declined


def prepare(model: str | None, llm: LLM) -> bool:
    """:func:`preload` ``model`` on ``llm`` and build the SSL context, once per process, if it goes direct.

    :func:`robotlab.build` calls it. Nothing is loaded for a model that goes through litellm or another ``llm``
    (a fake, your own), for one that only litellm can route (another provider's prefix, a server's own id: litellm
    is never imported here), for one that cannot be sent yet (no key: its first run says so), and nothing more once
    a direct model was prepared: the modules, the price table and the SSL context serve every model.

    Returns:
        Whether the direct client's first call is prepared in this process.
    """
    global _prepared
    if _prepared or model is None:
        return _prepared
    auto, direct = isinstance(llm, AutoLLM), sys.modules.get(f"{__package__}.direct")
    if not auto and not (direct is not None and isinstance(llm, direct.OpenAICompatibleLLM)):
        return False  # a fake or your own LLM (an OpenAICompatibleLLM given means its module is loaded)
    # a model only litellm can route is declined: routing it would import litellm, at build
    if auto and "litellm" not in sys.modules and not routed_without_litellm(model):
        _declined.add(model)
        return False
    try:
        if _route(model, llm)[0] != "direct":
            if auto:
                _declined.add(model)
            return False
        preload([(model, llm)])
        from .direct import default_ssl_context

        default_ssl_context()
    except Exception:  # preparing never fails a build: the first run loads (and reports) it
        logger.debug("robotlab: preparing the first call of %s failed", model, exc_info=True)
        return False
    _prepared = True
    return True


async def _open(clients: list[Any]) -> None:
    for client in clients:
        client.open_pool()


def open_pools(models: Iterable[tuple[str, LLM]], timeout: float = 30.0) -> list[str]:
    """Open, on robotlab's background loop, the connection pool of each direct client ``models`` go to.

    Call it in the process that runs the models (its pools and loop are not inherited by a fork).

    Returns:
        The base URLs whose pools are open.
    """
    from ..runtime import get_loop
    from .direct import OpenAICompatibleLLM

    clients: dict[int, OpenAICompatibleLLM] = {}
    for model, llm in models:
        route, client = _route(model, llm)
        if route == "direct" and isinstance(client, OpenAICompatibleLLM):
            clients[id(client)] = client
    if clients:
        asyncio.run_coroutine_threadsafe(_open(list(clients.values())), get_loop()).result(timeout)
    return [client.api_base for client in clients.values()]


def warm_up(models: Iterable[tuple[str, LLM]], timeout: float = 30.0) -> list[str]:
    """:func:`preload`, then :func:`open_pools`: all a first call of ``models`` would load, loaded now."""
    pairs = list(models)
    notes = preload(pairs)
    notes.extend(f"pool open: {base}" for base in open_pools(pairs, timeout))
    return notes


#: The answer of :func:`rehearse`'s in-memory server: one streamed chunk of text, then the usage and ``[DONE]``.
_REHEARSAL_ANSWER = (
    b'data: {"id":"rehearsal","object":"chat.completion.chunk","created":0,"model":"rehearsal","choices":'
    b'[{"index":0,"delta":{"role":"assistant","content":"Ready."},"finish_reason":null}]}\n\n'
    b'data: {"id":"rehearsal","object":"chat.completion.chunk","created":0,"model":"rehearsal","choices":'
    b'[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,'
    b'"total_tokens":2}}\n\n'
    b"data: [DONE]\n\n")


async def _rehearse(model: str) -> str:
    """One streamed run of a robot on ``model``, its direct client answered by ``httpx.MockTransport``."""
    import httpx

    from .. import hooks, telemetry
    from ..robot import Robot
    from .direct import OpenAICompatibleLLM

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=_REHEARSAL_ANSWER, headers={"Content-Type": "text/event-stream"})

    # never connected to (the transport answers); a loopback address, which no test's real-request guard refuses
    llm = OpenAICompatibleLLM(api_base="http://127.0.0.1:9/v1")
    llm.use_client(httpx.AsyncClient(transport=httpx.MockTransport(answer)))
    robot = Robot(name="robotlab-rehearsal", model=model, llm=llm, system_prompt="You answer briefly.")
    seen: list[object] = []
    try:
        with hooks.without_global_hooks(), telemetry.untraced():
            result = await robot.arun("Are you ready?", on_content=seen.append, on_event=seen.append)
    finally:
        await llm.aclose()
    return str(result.reply)


async def arehearse(models: Iterable[tuple[str, LLM]]) -> list[str]:
    """Run one robot turn on the running loop, on the first of ``models`` that goes to the direct client.

    A fresh process runs everything for the first time in its first run, slower than later: what :func:`preload`
    imports is only part of it (the interpreter specializes code as it runs it, and libraries fill caches on
    first use). A worker that rehearses at start (:mod:`robotlab_django.workers.warm_up`) takes its first job
    at about the cost of a later one: ``benchmarks/worker_first_job.py`` measured the first job at 1.77x a
    later one without the rehearsal and 1.35x with it (2 cores).

    The rehearsal's robot is its own (none of ``models``' robots runs) and so is its direct client: its answer
    comes from ``httpx.MockTransport``, in memory, and nothing is sent anywhere. It is streamed, as a worker's
    runs are. No global hook runs for it (:func:`robotlab.hooks.without_global_hooks`) and it records no span or
    metric (:func:`robotlab.telemetry.untraced`). Run it on the loop the models' runs use, after any fork.

    Returns:
        What was rehearsed, in words (nothing when none of ``models`` goes to the direct client).
    """
    model = next((model for model, llm in models if _route(model, llm)[0] == "direct"), None)
    if model is None:
        return []
    reply = await _rehearse(model)
    return [f"rehearsed a run of {model} ({reply!r})"]


def rehearse(models: Iterable[tuple[str, LLM]], timeout: float = 30.0) -> list[str]:
    """:func:`arehearse` on robotlab's background loop (where ``robot.run()`` runs), waited for ``timeout`` seconds."""
    from ..runtime import get_loop

    return asyncio.run_coroutine_threadsafe(arehearse(list(models)), get_loop()).result(timeout)
