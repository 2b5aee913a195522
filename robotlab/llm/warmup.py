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
* :func:`first_direct` names the first of them that goes to the direct client (the model a worker's
  rehearsal runs, :mod:`robotlab.robot.rehearsal`);
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

__all__ = ["first_direct", "open_pools", "prepare", "prepared", "preload", "warm_up", "worth_preparing"]

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


def first_direct(models: Iterable[tuple[str, LLM]]) -> str | None:
    """The first of ``models`` that goes to the direct client, else ``None`` (:mod:`robotlab.robot.rehearsal`)."""
    return next((model for model, llm in models if _route(model, llm)[0] == "direct"), None)
