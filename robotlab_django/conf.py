"""The app's settings: the only reader of ``settings.ROBOTLAB``.

Every key is optional. Each property of :data:`app_settings` reads the setting afresh, so
``override_settings`` and pytest-django's ``settings`` fixture work without a reset. Nothing here
validates: :mod:`robotlab_django.checks` reports bad values (``manage.py check``), and a property
returns what the user wrote. ``ROBOTLAB`` itself is treated as empty when it is not a dict.

API keys never belong here: litellm reads them from the environment (``OPENAI_API_KEY``, ...).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.apps import apps
from django.conf import ENVIRONMENT_VARIABLE, settings
from django.db import models
from django.utils.module_loading import import_string


@dataclass(frozen=True)
class Setting:
    """One documented key of ``ROBOTLAB``: its default, the types it accepts and what it does."""

    default: Any
    types: tuple[type, ...]
    doc: str
    choices: tuple[Any, ...] = ()
    nullable: bool = False


#: Every key of ``settings.ROBOTLAB``, with its default and documentation (docs/django/settings.md
#: is written from this table; a test keeps the two in step).
SETTINGS: dict[str, Setting] = {
    "DEFAULT_MODEL": Setting(
        None, (str,), "litellm model name for robots built by the app that set none themselves "
        "(neither in build() nor in their template); None leaves it to ROBOT_LAB_MODEL and the provider keys.",
        nullable=True),
    "LLM": Setting(
        None, (str,), "Dotted path to (or a callable) returning the LLM object that app-built robots send "
        "requests to when the caller passes none: 'robotlab.testing.DemoLLM' runs offline. None uses litellm.",
        nullable=True),
    "API_BASE": Setting(
        None, (str,), "Endpoint for the litellm client of app-built robots (a proxy, an OpenAI-compatible "
        "server, Ollama). None uses the provider's.", nullable=True),
    "REQUEST_TIMEOUT": Setting(
        None, (int, float), "Seconds per LLM request for app-built robots; None uses RobotLab's (120).",
        nullable=True),
    "LLM_MAX_RETRIES": Setting(
        None, (int,), "litellm retries per request for app-built robots; None uses RobotLab's (3).",
        nullable=True),
    "LLM_TRANSPORT": Setting(
        None, (str,), "How app-built robots reach the model: 'auto' (the direct client for OpenAI-compatible "
        "models, litellm for other providers and whenever litellm itself is configured), 'litellm' or 'direct'. "
        "None uses robotlab's llm_transport setting ('auto' unless configured).",
        choices=("auto", "litellm", "direct"), nullable=True),
    "MAX_TOOL_ROUNDS": Setting(
        None, (int,), "Tool calls allowed per run for app-built robots that set no max_tool_rounds.",
        nullable=True),
    "ROBOTS": Setting(
        {}, (dict,), "Extra robots by name: {'support': 'myapp.support.build'}; each value is a dotted path "
        "to a factory (a callable returning a Robot, or a class with a build classmethod)."),
    "NETWORKS": Setting(
        {}, (dict,), "Extra networks by name: {'support': 'myapp.support.support_network'}; each value is a dotted "
        "path to a factory (a callable returning a robotlab.Network, or a class with a build classmethod)."),
    "AUTODISCOVER": Setting(
        True, (bool,), "Import the robot modules (ROBOT_MODULES) of every installed app at startup."),
    "ROBOT_MODULES": Setting(
        ("robots",), (list, tuple), "Module names autodiscovered in each installed app; a package's "
        "submodules are imported too (those starting with '_' are skipped)."),
    "THREAD_MODEL": Setting(
        "robotlab.Thread", (str,), "'app_label.Model' of the thread model the services use "
        "(robotlab_install --models copies one into your app)."),
    "RESULT_MODEL": Setting(
        "robotlab.RobotResult", (str,), "'app_label.Model' of the robot result model the services use."),
    "EVENT_MODEL": Setting(
        "robotlab.RunEvent", (str,), "'app_label.Model' of the stream event model (events kept for replay)."),
    "STEP_MODEL": Setting(
        "robotlab.RunStep", (str,), "'app_label.Model' of the run step model (checkpointed LLM and tool calls); "
        "its result foreign key must point at RESULT_MODEL, else runs are not checkpointed."),
    "CHECKPOINT_STEPS": Setting(
        True, (bool,), "Store each completed LLM call and tool call of a run as a step; a run executed again "
        "after its worker was lost replays them instead of calling the model and the tools again."),
    "EXECUTOR": Setting(
        "thread", (str,), "How queued runs (admin re-run, RobotJob.enqueue) execute: 'thread' runs them in a "
        "background thread of this process once the transaction commits; 'sync' runs them at once; 'celery' "
        "sends robotlab_django.tasks.run_robot to a Celery worker once the transaction commits.",
        choices=("thread", "sync", "celery")),
    "DISTRIBUTED_NETWORKS": Setting(
        None, (bool,), "Run a network turn as one job per task, advanced by whichever worker finishes one "
        "(see docs/django/distributed-networks.md); None: on when EXECUTOR is 'celery', else the turn runs in "
        "one process.", nullable=True),
    "NETWORK_MEMORY_URL": Setting(
        None, (str,), "Redis URL of the memory the tasks of a distributed network turn share (one namespace per "
        "turn, so a task's memory.get(key, wait=...) wakes when a task on another worker sets the key); None: "
        "each task's process has the network's own in-process memory.", nullable=True),
    "TASK_QUEUE": Setting(
        "default", (str,), "Queue name given to jobs that name none (used by queue-based executors)."),
    "TASK_MAX_ATTEMPTS": Setting(
        3, (int,), "Times a run may be claimed (first run, redeliveries after a lost worker, re-queues by "
        "robotlab_requeue_stuck) before it is marked failed instead of running again."),
    "RUN_LEASE": Setting(
        900, (int, float), "Seconds a run may stay 'running' before robotlab_requeue_stuck treats its worker as "
        "lost; keep it above the longest run (and below the broker's visibility_timeout)."),
    "STREAM_FLUSH_INTERVAL": Setting(
        0.05, (int, float), "Seconds a run's coalesced text deltas wait for more before they are stored and "
        "sent to the thread's websocket group (a timer flushes them, not the next token)."),
    "STREAM_FLUSH_DELTAS": Setting(
        20, (int,), "Text deltas that make a coalesced batch go out before STREAM_FLUSH_INTERVAL."),
    "STREAM_PUBLISH_TIMEOUT": Setting(
        5.0, (int, float), "Seconds a flush waits for the channel layer to take a batch (a hung Redis) before it "
        "gives up on sending it live; the batch is stored either way and clients get it from the rows."),
    "MAX_MESSAGE_LENGTH": Setting(
        32_000, (int,), "Longest user message, in characters, the services accept (ValueError beyond)."),
    "MAX_ATTACHMENT_BYTES": Setting(
        10_485_760, (int,), "Most bytes of files one run's message may carry (the attachments stored with the "
        "run, e.g. ACP image and file parts); more raises ValueError (ACP: 413 invalid_input)."),
    "ADMIN_USAGE_DAYS": Setting(
        30, (int,), "Days shown by default on the admin usage page."),
    "ASK_TIMEOUT": Setting(
        86_400, (int, float), "Seconds a run may wait 'awaiting' an answer to its robot's question (AskUser); "
        "robotlab_requeue_stuck fails the runs parked longer (error_type 'AskTimeout')."),
    "CANCEL_POLL_INTERVAL": Setting(
        0.25, (int, float), "Seconds between a running run's checks of its row for a cancel (a streaming reply "
        "stops within this plus one chunk)."),
    "RETENTION_DAYS": Setting(
        None, (int,), "Default age in days for 'manage.py robotlab_prune' when --older-than is not given; "
        "None makes --older-than required.", nullable=True),
    "ERASE_ON_USER_DELETE": Setting(
        False, (bool,), "Deleting a user also erases their content (threads, results, events, steps) instead of "
        "only clearing the threads' owner; 'manage.py robotlab_erase --user NAME' erases without deleting."),
    "BUDGETS": Setting(
        {}, (dict,), "Daily budgets, enforced across worker processes (docs/django/budgets.md): USER_TOKENS and "
        "USER_COST per user per day, ROBOT_TOKENS and ROBOT_COST per robot per day (None or missing: no limit); "
        "RESERVE_TOKENS (default 4000) and RESERVE_COST (default 0.05) are what each run reserves before it "
        "starts, so concurrent runs never pass a limit by more than one reservation."),
}

#: The keys of ``ROBOTLAB["BUDGETS"]``: the daily limits and the per-run reservation defaults.
BUDGET_LIMITS = ("USER_TOKENS", "USER_COST", "ROBOT_TOKENS", "ROBOT_COST")
BUDGET_DEFAULTS = {"RESERVE_TOKENS": 4_000, "RESERVE_COST": 0.05}


class AppSettings:
    """Typed, always-fresh access to ``settings.ROBOTLAB`` (see :data:`SETTINGS`)."""

    @property
    def user_settings(self) -> Mapping[str, Any]:
        """``settings.ROBOTLAB`` when it is a dict, else ``{}`` (check ``robotlab.E001`` reports it)."""
        if not settings.configured:  # a robot module imported outside Django (a plain pytest run)
            return {}
        value = getattr(settings, "ROBOTLAB", {})
        return value if isinstance(value, Mapping) else {}

    @property
    def raw(self) -> Any:
        """``settings.ROBOTLAB`` exactly as written (``{}`` when missing)."""
        return getattr(settings, "ROBOTLAB", {})

    def get(self, key: str) -> Any:
        """The value of ``key``: the user's, else the default. An unknown key raises ``KeyError``."""
        default = SETTINGS[key].default
        value = self.user_settings.get(key, default)
        return dict(value) if isinstance(value, dict) else value

    DEFAULT_MODEL = property(lambda self: self.get("DEFAULT_MODEL"), doc=SETTINGS["DEFAULT_MODEL"].doc)
    LLM = property(lambda self: self.get("LLM"), doc=SETTINGS["LLM"].doc)
    API_BASE = property(lambda self: self.get("API_BASE"), doc=SETTINGS["API_BASE"].doc)
    REQUEST_TIMEOUT = property(lambda self: self.get("REQUEST_TIMEOUT"), doc=SETTINGS["REQUEST_TIMEOUT"].doc)
    LLM_MAX_RETRIES = property(lambda self: self.get("LLM_MAX_RETRIES"), doc=SETTINGS["LLM_MAX_RETRIES"].doc)
    LLM_TRANSPORT = property(lambda self: self.get("LLM_TRANSPORT"), doc=SETTINGS["LLM_TRANSPORT"].doc)
    MAX_TOOL_ROUNDS = property(lambda self: self.get("MAX_TOOL_ROUNDS"), doc=SETTINGS["MAX_TOOL_ROUNDS"].doc)
    ROBOTS = property(lambda self: self.get("ROBOTS"), doc=SETTINGS["ROBOTS"].doc)
    NETWORKS = property(lambda self: self.get("NETWORKS"), doc=SETTINGS["NETWORKS"].doc)
    AUTODISCOVER = property(lambda self: self.get("AUTODISCOVER"), doc=SETTINGS["AUTODISCOVER"].doc)
    ROBOT_MODULES = property(lambda self: tuple(self.get("ROBOT_MODULES")), doc=SETTINGS["ROBOT_MODULES"].doc)
    THREAD_MODEL = property(lambda self: self.get("THREAD_MODEL"), doc=SETTINGS["THREAD_MODEL"].doc)
    RESULT_MODEL = property(lambda self: self.get("RESULT_MODEL"), doc=SETTINGS["RESULT_MODEL"].doc)
    EVENT_MODEL = property(lambda self: self.get("EVENT_MODEL"), doc=SETTINGS["EVENT_MODEL"].doc)
    STEP_MODEL = property(lambda self: self.get("STEP_MODEL"), doc=SETTINGS["STEP_MODEL"].doc)
    CHECKPOINT_STEPS = property(lambda self: self.get("CHECKPOINT_STEPS"), doc=SETTINGS["CHECKPOINT_STEPS"].doc)
    EXECUTOR = property(lambda self: self.get("EXECUTOR"), doc=SETTINGS["EXECUTOR"].doc)
    DISTRIBUTED_NETWORKS = property(lambda self: self.get("DISTRIBUTED_NETWORKS"),
                                    doc=SETTINGS["DISTRIBUTED_NETWORKS"].doc)
    NETWORK_MEMORY_URL = property(lambda self: self.get("NETWORK_MEMORY_URL"), doc=SETTINGS["NETWORK_MEMORY_URL"].doc)
    TASK_QUEUE = property(lambda self: self.get("TASK_QUEUE"), doc=SETTINGS["TASK_QUEUE"].doc)
    TASK_MAX_ATTEMPTS = property(lambda self: self.get("TASK_MAX_ATTEMPTS"), doc=SETTINGS["TASK_MAX_ATTEMPTS"].doc)
    RUN_LEASE = property(lambda self: self.get("RUN_LEASE"), doc=SETTINGS["RUN_LEASE"].doc)
    STREAM_FLUSH_INTERVAL = property(lambda self: self.get("STREAM_FLUSH_INTERVAL"),
                                     doc=SETTINGS["STREAM_FLUSH_INTERVAL"].doc)
    STREAM_FLUSH_DELTAS = property(lambda self: self.get("STREAM_FLUSH_DELTAS"),
                                   doc=SETTINGS["STREAM_FLUSH_DELTAS"].doc)
    STREAM_PUBLISH_TIMEOUT = property(lambda self: self.get("STREAM_PUBLISH_TIMEOUT"),
                                      doc=SETTINGS["STREAM_PUBLISH_TIMEOUT"].doc)
    MAX_MESSAGE_LENGTH = property(lambda self: self.get("MAX_MESSAGE_LENGTH"),
                                  doc=SETTINGS["MAX_MESSAGE_LENGTH"].doc)
    MAX_ATTACHMENT_BYTES = property(lambda self: self.get("MAX_ATTACHMENT_BYTES"),
                                    doc=SETTINGS["MAX_ATTACHMENT_BYTES"].doc)
    ADMIN_USAGE_DAYS = property(lambda self: self.get("ADMIN_USAGE_DAYS"), doc=SETTINGS["ADMIN_USAGE_DAYS"].doc)
    ASK_TIMEOUT = property(lambda self: self.get("ASK_TIMEOUT"), doc=SETTINGS["ASK_TIMEOUT"].doc)
    CANCEL_POLL_INTERVAL = property(lambda self: self.get("CANCEL_POLL_INTERVAL"),
                                    doc=SETTINGS["CANCEL_POLL_INTERVAL"].doc)
    RETENTION_DAYS = property(lambda self: self.get("RETENTION_DAYS"), doc=SETTINGS["RETENTION_DAYS"].doc)
    ERASE_ON_USER_DELETE = property(lambda self: self.get("ERASE_ON_USER_DELETE"),
                                    doc=SETTINGS["ERASE_ON_USER_DELETE"].doc)

    # -- resolved values -----------------------------------------------------------------
    @property
    def BUDGETS(self) -> dict[str, Any]:  # noqa: N802 - named like the setting, as its siblings
        """``ROBOTLAB["BUDGETS"]`` with the reservation defaults filled in (every limit ``None`` when unset)."""
        value = self.get("BUDGETS")
        given = value if isinstance(value, dict) else {}
        return {**dict.fromkeys(BUDGET_LIMITS), **BUDGET_DEFAULTS, **given}

    def thread_model(self) -> type[models.Model]:
        """The model class named by ``THREAD_MODEL``."""
        return apps.get_model(self.THREAD_MODEL)

    def result_model(self) -> type[models.Model]:
        """The model class named by ``RESULT_MODEL``."""
        return apps.get_model(self.RESULT_MODEL)

    def event_model(self) -> type[models.Model]:
        """The model class named by ``EVENT_MODEL``."""
        return apps.get_model(self.EVENT_MODEL)

    def step_model(self) -> type[models.Model]:
        """The model class named by ``STEP_MODEL``."""
        return apps.get_model(self.STEP_MODEL)

    def llm_factory(self) -> Callable[[], Any] | None:
        """The callable named by ``LLM`` (imported when it is a dotted path), or ``None``."""
        value = self.LLM
        if value is None:
            return None
        found: Callable[[], Any] = import_string(value) if isinstance(value, str) else value
        return found

    def llm_client_options(self) -> dict[str, Any]:
        """Keyword arguments for :class:`robotlab.llm.AutoLLM` from the connection keys that are set."""
        options = {"api_base": self.API_BASE, "timeout": self.REQUEST_TIMEOUT, "num_retries": self.LLM_MAX_RETRIES,
                   "transport": self.LLM_TRANSPORT}
        return {key: value for key, value in options.items() if value is not None}

    def app_llm(self) -> Any:
        """The LLM of app-built robots.

        ``LLM()``, else the default transport (:class:`robotlab.llm.AutoLLM`) with the connection settings when any
        is set, else ``None`` (each robot's own).
        """
        factory = self.llm_factory()
        if factory is not None:
            return factory()
        if self.llm_client_options():
            from robotlab.llm import AutoLLM

            return AutoLLM(**self.llm_client_options())
        return None

    def uses_demo_llm(self) -> bool:
        """Whether app-built robots use RobotLab's offline demo model (or an LLM marked ``is_demo_model``).

        ``False`` when ``LLM`` names nothing importable.
        """
        try:
            factory = self.llm_factory()
        except ImportError:
            return False
        if factory is None:
            return False
        if getattr(factory, "is_demo_model", False):
            return True
        return getattr(factory, "__name__", "") == "DemoLLM" and str(getattr(factory, "__module__", "")).startswith(
            "robotlab.")

    # -- project values the scaffolding commands need --------------------------------------
    @property
    def project_root(self) -> Path:
        """Where new apps are created: ``settings.BASE_DIR`` when set, else the working directory."""
        base = getattr(settings, "BASE_DIR", None)
        return Path(base) if base is not None else Path.cwd()

    @property
    def settings_module(self) -> str | None:
        """The dotted name of the settings module (for a generated ``pytest.ini``)."""
        return getattr(settings, "SETTINGS_MODULE", None) or os.environ.get(ENVIRONMENT_VARIABLE) or None


#: The app's settings object.
app_settings = AppSettings()
