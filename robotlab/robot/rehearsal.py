"""A rehearsal: one streamed robot turn answered in memory, so a process's first real run is not its slowest.

A fresh process runs everything for the first time in its first run, slower than later: what
:func:`robotlab.llm.warmup.preload` imports is only part of it (the interpreter specializes code as it runs it, and
libraries fill caches on first use). A worker that rehearses at start (:mod:`robotlab_django.workers.warm_up`)
takes its first job at about the cost of a later one: ``benchmarks/worker_first_job.py`` measured the first job
at 1.54x a later one without the rehearsal and 1.40x with it (medians of six runs each, 2 cores).

The rehearsal's robot is its own (none of the application's robots runs) and so is its direct client: its answer
comes from ``httpx.MockTransport``, in memory, and nothing is sent anywhere. It is streamed, as a worker's runs
are. No global hook runs for it (:func:`robotlab.hooks.without_global_hooks`) and it records no span or metric
(:func:`robotlab.telemetry.untraced`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

import httpx

from .. import hooks, telemetry
from ..llm.direct import OpenAICompatibleLLM
from ..llm.types import LLM
from ..llm.warmup import first_direct
from ..runtime import get_loop
from .core import Robot

__all__ = ["arehearse", "rehearse"]

#: The in-memory server's answer: one streamed chunk of text, then the usage and ``[DONE]``.
_ANSWER = (
    b'data: {"id":"rehearsal","object":"chat.completion.chunk","created":0,"model":"rehearsal","choices":'
    b'[{"index":0,"delta":{"role":"assistant","content":"Ready."},"finish_reason":null}]}\n\n'
    b'data: {"id":"rehearsal","object":"chat.completion.chunk","created":0,"model":"rehearsal","choices":'
    b'[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,'
    b'"total_tokens":2}}\n\n'
    b"data: [DONE]\n\n")


def _answer(request: httpx.Request) -> httpx.Response:
    return httpx.Response(200, content=_ANSWER, headers={"Content-Type": "text/event-stream"})


async def arehearse(models: Iterable[tuple[str, LLM]]) -> list[str]:
    """Run one robot turn on the running loop, on the first of ``models`` that goes to the direct client.

    ``models`` are ``(model, llm)`` pairs, a robot's ``model`` and ``llm``. Run it on the loop the models' runs
    use, after any fork.

    Returns:
        What was rehearsed, in words (nothing when none of ``models`` goes to the direct client).
    """
    model = first_direct(models)
    if model is None:
        return []
    # never connected to (the transport answers); a loopback address, which no test's real-request guard refuses
    llm = OpenAICompatibleLLM(api_base="http://127.0.0.1:9/v1")
    llm.use_client(httpx.AsyncClient(transport=httpx.MockTransport(_answer)))
    robot = Robot(name="robotlab-rehearsal", model=model, llm=llm, system_prompt="You answer briefly.")
    seen: list[object] = []
    try:
        with hooks.without_global_hooks(), telemetry.untraced():
            result = await robot.arun("Are you ready?", on_content=seen.append, on_event=seen.append)
    finally:
        await llm.aclose()
    return [f"rehearsed a run of {model} ({str(result.reply)!r})"]


def rehearse(models: Iterable[tuple[str, LLM]], timeout: float = 30.0) -> list[str]:
    """:func:`arehearse` on robotlab's background loop (where ``robot.run()`` runs), waited for ``timeout`` seconds."""
    return asyncio.run_coroutine_threadsafe(arehearse(list(models)), get_loop()).result(timeout)
