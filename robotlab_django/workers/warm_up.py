"""A Celery worker's start-up: each worker process builds what its first job needs before it takes one.

A fresh process's first job would otherwise pay for everything loaded on first use: the robots' and networks'
modules, robotlab's run loop and httpx's connection machinery, the price table, robotlab's background loop and
the direct client's connection pool, and litellm (seconds) for a model that goes through it. So, unless
``ROBOTLAB["WORKER_WARM_UP"]`` is ``False``, two Celery signals (connected when :mod:`robotlab_django.tasks`,
which Celery imports at start, imports this module) do it at start:

* ``worker_init``, in the worker's main process before it forks its pool: every registered robot and network
  is resolved (its module imported) and built once to learn its models and LLM,
  :func:`robotlab.llm.warmup.preload` imports and reads what their first calls need, the channel layer is
  built, and each of the app's tables is read once, which fills Django's per-process caches of their models
  (the connection is closed after: the forked children inherit caches, no socket and no thread);
* ``worker_process_init``, in each pool process (and the solo pool's one): :func:`robotlab.llm.warmup.warm_up`
  opens the direct clients' connection pools on robotlab's background loop, where the jobs' robots run, the
  thread that loop hands checkpoint writes to opens its database connection, the channel layer (channels-redis)
  connects on that loop, the Celery result backend answers a ping, and a robot of the warm-up's own rehearses a
  streamed run on that loop, answered in memory (:func:`robotlab.robot.rehearsal.arehearse`: no global hook, span or
  request), after preparing what the main process did not (a pool started with ``spawn``).

Each logs one ``robotlab worker warm-up`` line (``INFO``) and :data:`WARMED` records it. A step that fails is
noted and the others run; a warm-up that fails is logged and skipped: it never keeps a worker from taking jobs,
and a pool process waits at most :data:`DATABASE_WAIT` seconds for what it opens. Building a factory's robot
sends nothing to any provider, and neither does the warm-up.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from celery import current_app
from celery.signals import worker_init, worker_process_init
from channels.layers import InMemoryChannelLayer
from django.apps import apps
from django.db import connections

from robotlab.llm import warmup
from robotlab.robot import rehearsal
from robotlab.runtime import get_loop
from robotlab_django import swappable
from robotlab_django.conf import app_settings
from robotlab_django.registry import registry
from robotlab_django.runs import step_writer
from robotlab_django.runs.runnables import build_network, build_robot
from robotlab_django.streaming.broadcast import get_layer

__all__ = ["DATABASE_WAIT", "WARMED", "WarmUp", "prepare", "warm"]

logger = logging.getLogger("robotlab_django")

#: Seconds a pool process's warm-up waits for each thing it opens (Celery gives the process 4 s to start).
DATABASE_WAIT = 1.5


@dataclass
class WarmUp:
    """What a process's warm-up did."""

    pid: int
    """The process that did it."""
    stage: str
    """``"prepare"`` (before the fork, no thread or socket) or ``"warm"`` (the process that runs the jobs)."""
    models: list[tuple[str, Any]] = field(default_factory=list)
    """The ``(model, llm)`` pairs of the registered robots and networks."""
    notes: list[str] = field(default_factory=list)
    """What was loaded, in words."""
    seconds: float = 0.0
    """How long it took."""


WARMED: dict[str, WarmUp] = {}
"""This process's warm-ups by stage (``"prepare"`` inherited from the main process after a fork)."""


def _robots(name: str, network: bool) -> list[Any]:
    if not network:
        return [build_robot(name)]
    built = build_network(name)
    return [task.robot for task in built.tasks.values() if hasattr(task.robot, "llm")]


def _models() -> tuple[list[tuple[str, Any]], bool]:
    """``(model, llm)`` of every registered robot and network's robot, and whether any sends parameters.

    Each is built once; one whose factory fails is skipped. Parameters (``temperature``...) need the direct
    client's per-model mapping, learned from litellm (:func:`robotlab.llm.warmup.preload`'s ``quirks``).
    """
    pairs: dict[tuple[str, int], tuple[str, Any]] = {}
    with_params = False
    names = [(name, False) for name in registry.names()] + [(name, True) for name in registry.network_names()]
    for name, network in names:
        try:
            robots = _robots(name, network)
        except Exception as exc:  # its first job reports it; the warm-up goes on with the others
            logger.info("robotlab worker warm-up: %s %r not built (%s: %s)", "network" if network else "robot",
                        name, type(exc).__name__, exc)
            continue
        for robot in robots:
            if robot.model:
                pairs.setdefault((robot.model, id(robot.llm)), (robot.model, robot.llm))
                with_params = with_params or bool(robot.llm_params)
    return list(pairs.values()), with_params


def _channel_layer() -> list[str]:
    """The channel layer a run streams through, built (its module imported; connections open on first use)."""
    layer = get_layer()
    return [f"channel layer: {type(layer).__name__}"] if layer is not None else []


def _read_tables() -> list[str]:
    """One read of each table a run writes: Django's per-process caches of their models' metadata and lookups.

    Every column is selected (each field caches the column it compiles to), and a run row with the rows a job
    reads with it. Its connection is closed after, so the pool processes forked next inherit none.
    """
    tables = dict.fromkeys([swappable.thread_model(), swappable.result_model(), swappable.event_model(),
                            swappable.step_model(), *apps.get_app_config("robotlab").get_models()])
    try:
        for table in tables:
            list(table._default_manager.filter(pk=0)[:1])
        list(swappable.result_model()._default_manager.select_related("parent", "thread").filter(pk=0)[:1])
    finally:
        connections.close_all()
    return [f"{len(tables)} tables read"]


def _step(notes: list[str], what: str, step: Callable[[], list[str]]) -> None:
    """``step()``'s notes added to ``notes``; a step that fails adds why instead (the others still run)."""
    try:
        notes.extend(step())
    except Exception as exc:
        notes.append(f"{what} skipped ({type(exc).__name__}: {exc})")


def prepare(*, read_tables: bool = True) -> WarmUp:
    """Build every registered robot and network once and preload what their first calls need (fork-safe).

    Each step runs even when another fails. ``read_tables=False`` leaves the database alone (a pool process
    preparing for itself must answer its parent within Celery's ``worker_proc_alive_timeout``).
    """
    started = time.perf_counter()
    models, with_params = _models()
    notes: list[str] = []
    _step(notes, "preload", lambda: warmup.preload(models, quirks=with_params))
    _step(notes, "channel layer", _channel_layer)
    if read_tables:
        _step(notes, "tables", _read_tables)
    done = WarmUp(os.getpid(), "prepare", models, notes)
    done.seconds = time.perf_counter() - started
    WARMED["prepare"] = done
    return done


def _read_steps() -> None:
    swappable.step_model()._default_manager.filter(pk=0).exists()


async def _open_step_writer() -> None:
    """Start the step writer and open its database connection (it keeps it while steps come)."""
    await asyncio.wrap_future(step_writer.submit(_read_steps))


def _connections(models: list[tuple[str, Any]]) -> dict[str, tuple[str, str, Callable[[], Coroutine[Any, Any, Any]]]]:
    """What a job would open or run first: ``{what: (note when done, note while going on, coroutine function)}``.

    The database connection of the thread robotlab's loop hands checkpoint writes to (the process's step writer,
    :mod:`~robotlab_django.runs.step_writer`, started here); the channel layer's on that loop, where runs publish
    (channels-redis: a member no group has is dropped; a worker's first job would otherwise connect while it
    streams, about 10 ms of it, ``benchmarks/worker_first_job.py``); the Celery result backend's, where a job's
    result goes (a Redis backend answers a ping); and a rehearsal of a run on that loop
    (:func:`robotlab.robot.rehearsal.arehearse`: a robot of its own on one of ``models``, answered in memory; its
    notes replace the first one).
    """
    opening: dict[str, tuple[str, str, Callable[[], Coroutine[Any, Any, Any]]]] = {
        "database": ("database connection open", "database connection still opening",
                     _open_step_writer)}
    layer = get_layer()
    if layer is not None and not isinstance(layer, InMemoryChannelLayer):
        opening["channel layer"] = ("channel layer connected", "channel layer still connecting",
                                    lambda: layer.group_discard("robotlab-warm-up", "robotlab-warm-up"))
    ping = getattr(getattr(current_app.backend, "client", None), "ping", None)
    if callable(ping):
        opening["result backend"] = ("result backend connected", "result backend still connecting",
                                     lambda: asyncio.to_thread(ping))
    opening["rehearsal"] = ("nothing to rehearse", "rehearsal still running", lambda: rehearsal.arehearse(models))
    return opening


def _connect(models: list[tuple[str, Any]]) -> list[str]:
    """Open :func:`_connections` side by side on robotlab's loop; a note for each.

    Waited for :data:`DATABASE_WAIT` seconds in all: past that they go on in the background, so a slow or
    unreachable service never holds a pool process past Celery's ``worker_proc_alive_timeout`` (4 s).
    """
    started = {what: (done, pending, asyncio.run_coroutine_threadsafe(opening(), get_loop()))
               for what, (done, pending, opening) in _connections(models).items()}
    concurrent.futures.wait([future for _done, _pending, future in started.values()], timeout=DATABASE_WAIT)
    notes = []
    for what, (done, pending, future) in started.items():
        error = future.exception() if future.done() else None
        if not future.done():
            notes.append(pending)
        elif error is not None:
            notes.append(f"{what} skipped ({type(error).__name__}: {error})")
        else:
            result = future.result()
            notes.extend(result if isinstance(result, list) and result else [done])
    return notes


def warm() -> WarmUp:
    """Prepare unless this process inherited it, then open the direct clients' pools and :func:`_connect`."""
    started = time.perf_counter()
    prepared = WARMED.get("prepare") or prepare(read_tables=False)
    here: list[str] = []
    _step(here, "pools", lambda: warmup.warm_up(prepared.models, timeout=DATABASE_WAIT))
    _step(here, "connections", lambda: _connect(prepared.models))
    notes = [*prepared.notes, *(note for note in here if note not in prepared.notes)]
    done = WarmUp(os.getpid(), "warm", prepared.models, notes)
    done.seconds = time.perf_counter() - started
    WARMED["warm"] = done
    return done


def _run(stage: str) -> None:
    if not app_settings.WORKER_WARM_UP:
        return
    try:
        done = prepare() if stage == "prepare" else warm()
    except Exception:  # never keeps the worker from its jobs
        logger.warning("robotlab worker warm-up (%s) failed in process %s", stage, os.getpid(), exc_info=True)
        return
    prepared = WARMED["prepare"]
    before = f"prepared in process {prepared.pid} in {prepared.seconds * 1000:.0f} ms"
    logger.info("robotlab worker warm-up (%s) in process %s: %.0f ms (%s); %s", stage, done.pid,
                done.seconds * 1000, before, "; ".join(done.notes) or "nothing to load")


@worker_init.connect
def _prepare_worker(**kwargs: object) -> None:
    """In the worker's main process, before its pool forks: :func:`prepare`."""
    _run("prepare")


@worker_process_init.connect
def _warm_process(**kwargs: object) -> None:
    """In each pool process, before its first job: :func:`warm`."""
    _run("warm")
