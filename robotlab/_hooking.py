"""The hook-driven half of :class:`~robotlab.Robot`: hook registration, the ``run`` and
``llm_generation`` families, learnings (``learn``), history compaction (``auto_compact``,
``compress_history``) and search (``search_history``), and delegation (``delegate``).

``Robot.arun`` runs inside the ``run`` family; the model conversation (tool loop included) runs
once per run inside ``llm_generation``, which first prepends the robot's learnings to the message
and compacts the history when ``auto_compact`` asks for it (the ``compaction`` family).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, Self, overload

from . import hooks as hook_system
from ._ruby import strip as ruby_strip
from ._runtime import get_loop, run_sync
from .delegation import DelegationFuture
from .errors import DependencyError
from .messages import TextMessage
from .result import RobotResult

if TYPE_CHECKING:
    from ._loop import RunState
    from .memory import Memory
    from .run_config import RunConfig
    from .text.history_search import HistoryResult

__all__ = ["DEFAULT_CONTEXT_WINDOW", "DEFAULT_COMPACT_THRESHOLD", "LEARNINGS_HEADER", "Hooking"]

logger = logging.getLogger("robotlab")

#: The first line of the learnings prepended to a run's message.
LEARNINGS_HEADER = "LEARNINGS FROM PREVIOUS RUNS:"
#: The context window assumed when the model's is unknown.
DEFAULT_CONTEXT_WINDOW = 200_000
#: The share of the context window that triggers ``auto_compact="context_window"``.
DEFAULT_COMPACT_THRESHOLD = 0.80


class Hooking:
    """Hooks, learnings and compaction for :class:`~robotlab.Robot` (see the module's docs)."""

    hooks: hook_system.HookRegistry

    if TYPE_CHECKING:  # provided by Robot
        name: str
        config: RunConfig
        _messages: list[dict[str, Any]]

        @property
        def memory(self) -> Memory: ...
        @property
        def run_memory(self) -> Memory: ...
        @property
        def messages(self) -> list[dict[str, Any]]: ...
        @property
        def model(self) -> str | None: ...
        def replace_messages(self, messages: Sequence[Any]) -> Any: ...
        def _request_messages(self) -> list[dict[str, Any]]: ...

    def _init_hooking(self) -> None:
        """Create the robot's hook registry and learnings (in ``Robot.__init__``)."""
        self.hooks = hook_system.HookRegistry()
        self._learnings: list[str] = []
        self._delegations: set[asyncio.Task[Any]] = set()

    def on(
        self, handler_class: type[hook_system.Hook], *, context: Mapping[str, Any] | None = None
    ) -> hook_system.Registration:
        """Register a :class:`~robotlab.Hook` subclass for this robot's runs, tool calls and learnings."""
        return self.hooks.on(handler_class, context=context)

    def _hook_scope(self) -> hook_system.HookScope:
        """The scope of this robot's run in progress, else the global registry and the robot's."""
        scope = hook_system.current_hook_scope()
        if scope is not None and any(registry is self.hooks for registry in scope.registries):
            return scope
        return hook_system.HookScope((hook_system.get_hooks(), self.hooks), ())

    # -- the run and llm_generation families ---------------------------------------------------------
    async def _run_hooked(
        self,
        message: Any,
        *,
        network: Any,
        task: Any,
        memory: Any,
        per_run_hooks: Any,
        execute: Callable[[hook_system.RunHookContext], Awaitable[RobotResult]],
    ) -> RobotResult:
        """Run ``execute`` inside the ``run`` family, with this run's hook scope set."""
        handlers = hook_system.normalize_hooks(per_run_hooks)
        context = hook_system.RunHookContext(
            robot=self, network=network, task=task, memory=memory, config=self.config, request=message
        )
        registries = (hook_system.get_hooks(), getattr(network, "hooks", None), self.hooks)
        with hook_system.with_hook_scope(registries, handlers):
            result = await hook_system.run(
                "run", context, lambda: execute(context), registries=registries, per_run_hooks=handlers
            )
        if not isinstance(result, RobotResult):
            raise TypeError(
                f"Robot '{self.name}': the run's hooks returned {result!r} instead of a RobotResult; "
                "an around_run hook must return the value of proceed()"
            )
        return result

    async def _generate(self, state: RunState, run_context: hook_system.RunHookContext | None) -> RobotResult:
        """Run the model conversation inside the ``llm_generation`` family.

        An ``around_llm_generation`` hook may skip the model by returning a :class:`RobotResult` or a
        reply string of its own.
        """
        scope = self._hook_scope()
        context = hook_system.LlmGenerationHookContext(
            robot=self,
            request=state.request_text,
            network=getattr(run_context, "network", None),
            task=getattr(run_context, "task", None),
            memory=run_context.memory if run_context is not None else self.run_memory,
            config=self.config,
            metadata=run_context.metadata if run_context is not None else hook_system.ExtensionState(),
        )

        async def generate() -> RobotResult:
            state.request_text = self.inject_learnings(state.request_text)
            await self._maybe_compact(scope)
            return await state.execute()

        result = await hook_system.run("llm_generation", context, generate, **scope._asdict())
        if isinstance(result, RobotResult):
            return result
        if isinstance(result, str):
            reply = TextMessage(role="assistant", content=result, stop_reason="stop")
            return RobotResult(robot_name=self.name, output=[reply], stop_reason="stop", model=state.model)
        raise TypeError(
            f"Robot '{self.name}': the llm_generation hooks returned {result!r} instead of a RobotResult or "
            "a reply string; an around_llm_generation hook must return the value of proceed()"
        )

    # -- learnings ---------------------------------------------------------------------------------
    @property
    def learnings(self) -> list[str]:
        """What the robot has learned, oldest first (a copy)."""
        return list(self._learnings)

    def learn(self, text: Any) -> Self:
        """Remember ``text`` for later runs (see :meth:`alearn`); returns the robot."""
        return run_sync(self.alearn(text))

    async def alearn(self, text: Any) -> Self:
        """Remember ``text``: later runs get it prepended to their message.

        Blank text (or ``None``) is ignored (no hooks fire). Learnings that ``text`` contains are
        replaced by it; text that a learning already contains (or equals) is not stored again. Runs
        inside the ``learn`` hook family; its ``on_learn`` hook fires whether or not the text was
        stored (``ctx.stored``).
        The list is also kept in the robot's memory under ``"learnings"``.
        """
        text = ruby_strip("" if text is None else str(text))
        if not text:
            return self
        context = hook_system.LearnHookContext(robot=self, text=text, learnings_before=tuple(self._learnings))
        scope = self._hook_scope()

        async def store() -> None:
            kept = [learned for learned in self._learnings if learned == text or learned not in text]
            if not any(text in learned for learned in kept):
                kept.append(text)
                context.stored = True
            if kept != self._learnings:
                self._learnings = kept
                self.memory.set("learnings", list(kept))
            await hook_system.call("on_learn", context, **scope._asdict())

        await hook_system.run("learn", context, store, **scope._asdict())
        return self

    def inject_learnings(self, message: str | None) -> str | None:
        """``message`` with the learnings prepended (unchanged without learnings or message)."""
        if not self._learnings or message is None:
            return message
        lines = "\n".join(f"- {learned}" for learned in self._learnings)
        return f"{LEARNINGS_HEADER}\n{lines}\n\n{message}"

    # -- compaction --------------------------------------------------------------------------------
    def compress_history(
        self,
        *,
        recent_turns: int = 3,
        keep_threshold: float = 0.6,
        drop_threshold: float = 0.2,
        summarizer: Callable[[str], Any] | None = None,
    ) -> Self:
        """Drop (or summarize) old turns unrelated to the recent ones; see
        :class:`~robotlab.HistoryCompressor`. Returns the robot."""
        from .text.compression import HistoryCompressor

        compressor = HistoryCompressor(
            messages=self.messages,
            recent_turns=recent_turns,
            keep_threshold=keep_threshold,
            drop_threshold=drop_threshold,
            summarizer=summarizer,
        )
        self.replace_messages(compressor())
        return self

    def _context_window(self) -> int:
        """The model's context window in tokens, as litellm knows it, else :data:`DEFAULT_CONTEXT_WINDOW`."""
        if self.model is None:
            return DEFAULT_CONTEXT_WINDOW
        try:
            from .llm import load_litellm

            info = load_litellm().get_model_info(self.model)
            window = info.get("max_input_tokens") or info.get("max_tokens")
            return int(window) if window else DEFAULT_CONTEXT_WINDOW
        except Exception:
            return DEFAULT_CONTEXT_WINDOW

    async def _maybe_compact(self, scope: hook_system.HookScope) -> None:
        """Compact the history before the model call when ``auto_compact`` asks for it.

        ``"context_window"``: when the estimated tokens of the instructions and history
        (characters / 4) reach
        ``compact_threshold`` (default 0.80) of the model's context window. A callable: always, by
        calling it with the robot. Either way inside the ``compaction`` family, whose
        ``on_compaction`` hooks may supply the new history instead.
        """
        mode = self.config.auto_compact
        if mode is None or mode == "none" or not self._messages:
            return
        if callable(mode):
            strategy = "custom"
        elif mode == "context_window":
            estimated = sum(len(str(m.get("content") or "")) for m in self._request_messages()) // 4
            threshold = self.config.compact_threshold
            share = DEFAULT_COMPACT_THRESHOLD if threshold is None else threshold
            if estimated < self._context_window() * share:
                return
            strategy = "context_window"
        else:
            logger.warning("[%s] auto_compact: unknown strategy %r; skipping compaction", self.name, mode)
            return
        context = hook_system.CompactionHookContext(
            robot=self, messages_before=tuple(self.messages), config=self.config, strategy=strategy
        )

        async def compact() -> None:
            await hook_system.call("on_compaction", context, **scope._asdict())
            if context.compacted_messages is not None:
                self.replace_messages(context.compacted_messages)
                return
            if callable(mode):
                outcome = mode(self)
                if inspect.isawaitable(outcome):
                    await outcome
            else:
                try:
                    self.compress_history()
                except DependencyError as exc:
                    logger.warning("[%s] auto_compact: %s; skipping compaction", self.name, exc)
                    return
            context.compacted_messages = self.messages

        await hook_system.run("compaction", context, compact, **scope._asdict())

    # -- history search ----------------------------------------------------------------------------
    def search_history(self, query: str, *, limit: int = 5) -> list[HistoryResult]:
        """The messages of :attr:`messages` most relevant to ``query``, best first (at most ``limit``);
        each hit's ``index`` is its position in :attr:`messages`. See :func:`robotlab.search_history`."""
        from .text.history_search import search_history

        return search_history(self._messages, query, limit=limit)

    # -- delegation --------------------------------------------------------------------------------
    @overload
    def delegate(self, *, to: Any, task: Any, async_: Literal[False] = False, **run_kwargs: Any) -> RobotResult: ...
    @overload
    def delegate(self, *, to: Any, task: Any, async_: Literal[True], **run_kwargs: Any) -> DelegationFuture: ...
    def delegate(
        self, *, to: Any, task: Any, async_: bool = False, **run_kwargs: Any
    ) -> RobotResult | DelegationFuture:
        """Have robot ``to`` run ``task`` (keyword arguments go to its ``run``) on this robot's behalf.

        Synchronous by default: returns the delegatee's :class:`~robotlab.RobotResult` with
        ``duration`` and ``delegated_by`` (this robot's name) set; inside a coroutine use
        :meth:`adelegate`. With ``async_=True`` it returns a :class:`~robotlab.DelegationFuture` at
        once: the run goes on as a task of the running event loop (or, called outside one, on
        RobotLab's background loop) and settles the future. Block on ``future.value(timeout=...)``
        from synchronous code, ``await future`` in a coroutine.
        """
        if not async_:
            return run_sync(self.adelegate(to=to, task=task, **run_kwargs))
        future = DelegationFuture(robot_name=str(to.name), delegated_by=self.name)
        work = self.adelegate(to=to, task=task, **run_kwargs)
        try:
            loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        job: asyncio.Task[Any] | concurrent.futures.Future[Any]
        if loop is not None:
            job = loop.create_task(work)
            self._delegations.add(job)
            job.add_done_callback(self._delegations.discard)
        else:
            job = asyncio.run_coroutine_threadsafe(work, get_loop())
        job.add_done_callback(lambda done: _settle(future, done))
        return future

    async def adelegate(self, *, to: Any, task: Any, **run_kwargs: Any) -> RobotResult:
        """:meth:`delegate`, awaited: the delegatee's result with ``duration`` and ``delegated_by`` set."""
        started = time.monotonic()
        result: RobotResult = await to.arun(task, **run_kwargs)
        result.duration = time.monotonic() - started
        result.delegated_by = self.name
        return result


def _settle(future: DelegationFuture, done: asyncio.Task[Any] | concurrent.futures.Future[Any]) -> None:
    """Settle ``future`` with the outcome of the finished delegated run ``done``."""
    if done.cancelled():
        future.reject(asyncio.CancelledError(f"Delegation to '{future.robot_name}' was cancelled"))
    elif (error := done.exception()) is not None:
        future.reject(error)
    else:
        future.resolve(done.result())
