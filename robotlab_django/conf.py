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

from robotlab.llm.transport import TRANSPORTS


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
        choices=TRANSPORTS, nullable=True),
    "MAX_TOOL_ROUNDS": Setting(
        None, (int,), "Tool calls allowed per run for app-built robots that set no max_tool_rounds.",
        nullable=True),
    "ROBOTS": Setting(
        {}, (dict,), "Extra robots by name: {'support': 'myapp.support.build'}; each value is a dotted path "
        "to a factory (a callable returning a Robot, or a class with a build classmethod), or a dict of the "
        "robot's options: {'support': {'factory': 'myapp.support.build', 'on_busy': 'reject'}} ('factory' left "
        "out: options of a robot registered in code). on_busy: what a message does while the thread's reply "
        "runs: 'enqueue' (the default), 'reject', 'interrupt' or 'steer'."),
    "NETWORKS": Setting(
        {}, (dict,), "Extra networks by name: {'support': 'myapp.support.support_network'}; each value is a dotted "
        "path to a factory (a callable returning a robotlab.Network, or a class with a build classmethod), or "
        "a dict of options as for ROBOTS ('factory', 'on_busy')."),
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
    "SPAN_MODEL": Setting(
        "robotlab.RunSpan", (str,), "'app_label.Model' of the span model (the stored OpenTelemetry spans of runs, "
        "TRACES); its result foreign key must point at RESULT_MODEL, else no span is stored."),
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
    "NETWORK_INLINE_TASKS": Setting(
        True, (bool,), "A job of a distributed network turn that leaves exactly one task ready runs that task itself "
        "(the turn's first task, the task that joins parallel branches, the next link of a chain) instead of "
        "sending it through the broker; parallel tasks are always sent, one message each."),
    "NETWORK_MEMORY_URL": Setting(
        None, (str,), "Redis URL of the memory the tasks of a distributed network turn share (one namespace per "
        "turn, so a task's memory.get(key, wait=...) wakes when a task on another worker sets the key); None: "
        "each task's process has the network's own in-process memory.", nullable=True),
    "TASK_QUEUE": Setting(
        "default", (str,), "Queue name given to jobs that name none (used by queue-based executors)."),
    "TASK_MAX_ATTEMPTS": Setting(
        3, (int,), "Times a run may be claimed (first run, redeliveries after a lost worker, re-queues by "
        "robotlab_requeue_stuck) before it is marked failed instead of running again."),
    "WORKER_WAIT_HINT": Setting(
        10, (int, float), "Seconds a run may wait 'queued' under the celery executor before the chat page says that "
        "no worker has picked it up (and how to start one); None never says it.", nullable=True),
    "RUN_LEASE": Setting(
        900, (int, float), "Seconds a run may stay 'running' before robotlab_requeue_stuck treats its worker as "
        "lost; keep it above the longest run (and below the broker's visibility_timeout)."),
    "WORKER_WARM_UP": Setting(
        True, (bool,), "Celery worker processes build what a first job needs when they start (the robots' and "
        "networks' modules and models, the price table, the channel layer, litellm when a model goes through it, "
        "the direct client's connection pool), so the first job costs what a later one does "
        "(robotlab_django.workers.warm_up)."),
    "STREAM_FLUSH_INTERVAL": Setting(
        0.05, (int, float), "Seconds a run's coalesced text deltas wait for more before they are stored and "
        "sent to the thread's websocket group (a timer flushes them, not the next token)."),
    "STREAM_FLUSH_DELTAS": Setting(
        20, (int,), "Text deltas that make a coalesced batch go out before STREAM_FLUSH_INTERVAL."),
    "GROUP_PREFIX": Setting(
        None, (str,), "Prefix of the app's channel-layer group names (<prefix>.thread.<pk>); None derives one from "
        "SECRET_KEY, unique to the project. Redis pub/sub ignores the database number: two projects sharing a Redis "
        "must differ here (or in the channel layer's prefix).", nullable=True),
    "STREAM_PUBLISH_TIMEOUT": Setting(
        5.0, (int, float), "Seconds a flush waits for the channel layer to take a batch (a hung Redis) before it "
        "gives up on sending it live; the batch is stored either way and clients get it from the rows."),
    "MAX_MESSAGE_LENGTH": Setting(
        32_000, (int,), "Longest user message, in characters, the services accept (ValueError beyond)."),
    "MAX_ATTACHMENT_BYTES": Setting(
        10_485_760, (int,), "Most bytes of files one run's message may carry (the attachments stored with the "
        "run, e.g. ACP image and file parts); more raises ValueError (ACP: 413 invalid_input)."),
    "MAX_ATTACHMENTS": Setting(
        20, (int,), "Most files one run's message may carry, whatever their size (ACP and A2A file parts, "
        "attachments= of the services); more raises ValueError (ACP: 422 invalid_input, A2A: InvalidParams)."),
    "CONTENT_SECURITY_POLICY": Setting(
        None, (str,), "The Content-Security-Policy header of the chat pages; None sends the app's strict one "
        "(everything from the site itself, images also from data: and blob:, the websocket from the page's host, "
        "no inline script), '' sends none.", nullable=True),
    "ADMIN_USAGE_DAYS": Setting(
        30, (int,), "Days shown by default on the admin usage page."),
    "RUN_RATE_LIMIT": Setting(
        30, (int,), "Runs one user may queue through the chat socket and form, ACP and A2A in any RUN_RATE_PERIOD "
        "seconds, on all their threads together (an anonymous visitor: per thread); one more is refused in the "
        "door's own form (an error frame, HTTP 429 with Retry-After, a JSON-RPC error) and queues nothing. None: no "
        "limit.", nullable=True),
    "RUN_RATE_PERIOD": Setting(
        60, (int, float), "Seconds of the window RUN_RATE_LIMIT counts a user's queued runs in."),
    "API_TOKEN_DAYS": Setting(
        90, (int,), "Days an API token from 'manage.py robotlab_token' is valid (its --days overrides it); requests "
        "with an expired token get 401. None: new tokens never expire. A user's tokens are revoked when their "
        "password changes.", nullable=True),
    "A2A_PUSH_URLS": Setting((), (list, tuple), "URL prefixes A2A push-notification webhooks must start with; () off."),
    "A2A_PUSH_PRIVATE": Setting(False, (bool,), "Allow A2A webhooks on loopback, private or link-local hosts."),
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
        "every model call reserves its estimate before it is sent (its prompt's tokens plus max_tokens, or "
        "RESERVE_TOKENS, default 4000, when the call sets none; RESERVE_COST, default 0.05, per call) and is "
        "refused when that does not fit, so concurrent runs pass a limit only by the calls' estimate errors; "
        "RESERVATION_TTL (default 3600 s) releases a reservation whose run died."),
    "INSTRUMENT": Setting(
        None, (bool,), "Emit the core's OpenTelemetry GenAI spans and metrics of every run (robotlab.configure("
        "instrument=...)); False turns them off in this process; None leaves it to robotlab's instrument setting "
        "(ROBOT_LAB_INSTRUMENT, on unless configured).", nullable=True),
    "TRACES": Setting(
        True, (bool,), "Keep the spans of the app's runs in the database (SPAN_MODEL, pruned and erased with the "
        "runs), beside any exporter of the project's own tracer provider; installs an OpenTelemetry SDK tracer "
        "provider when the project set none (needs opentelemetry-sdk; see docs/django/tracing.md)."),
    "ONLINE_EVALS": Setting(
        {}, (dict,), "Online evals by robot name: {'support': {'rate': 0.1, 'evaluators': [{'kind': 'judge', "
        "'robot': 'grader', 'rubric': '...'}]}}: that share (0-1) of the robot's completed runs, chosen by a hash of "
        "each run's id, is scored in the background by the evaluators (the specs of eval cases' expectations), off "
        "the run's path (a Celery task under the celery executor, else a thread of this process); each score is "
        "stored with its run and version, and the admin's usage page shows the rolling score per version."),
}

#: What a message does while its thread's reply runs (``ROBOTLAB["ROBOTS"][name]["on_busy"]``, or the robot's
#: registration): wait behind it, be refused, stop it, or join its conversation (:mod:`robotlab_django.runs.busy`).
ON_BUSY_POLICIES = ("enqueue", "reject", "interrupt", "steer")
#: The keys of a robot's (or network's) dict in ``ROBOTLAB["ROBOTS"]`` (``["NETWORKS"]``).
ROBOT_OPTIONS = ("factory", "on_busy")

#: The keys of ``ROBOTLAB["BUDGETS"]``: the daily limits and the per-call reservation defaults.
BUDGET_LIMITS = ("USER_TOKENS", "USER_COST", "ROBOT_TOKENS", "ROBOT_COST")
BUDGET_DEFAULTS = {"RESERVE_TOKENS": 4_000, "RESERVE_COST": 0.05, "RESERVATION_TTL": 3_600}


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
    SPAN_MODEL = property(lambda self: self.get("SPAN_MODEL"), doc=SETTINGS["SPAN_MODEL"].doc)
    CHECKPOINT_STEPS = property(lambda self: self.get("CHECKPOINT_STEPS"), doc=SETTINGS["CHECKPOINT_STEPS"].doc)
    EXECUTOR = property(lambda self: self.get("EXECUTOR"), doc=SETTINGS["EXECUTOR"].doc)
    DISTRIBUTED_NETWORKS = property(lambda self: self.get("DISTRIBUTED_NETWORKS"),
                                    doc=SETTINGS["DISTRIBUTED_NETWORKS"].doc)
    NETWORK_INLINE_TASKS = property(lambda self: self.get("NETWORK_INLINE_TASKS"),
                                    doc=SETTINGS["NETWORK_INLINE_TASKS"].doc)
    NETWORK_MEMORY_URL = property(lambda self: self.get("NETWORK_MEMORY_URL"), doc=SETTINGS["NETWORK_MEMORY_URL"].doc)
    TASK_QUEUE = property(lambda self: self.get("TASK_QUEUE"), doc=SETTINGS["TASK_QUEUE"].doc)
    TASK_MAX_ATTEMPTS = property(lambda self: self.get("TASK_MAX_ATTEMPTS"), doc=SETTINGS["TASK_MAX_ATTEMPTS"].doc)
    WORKER_WAIT_HINT = property(lambda self: self.get("WORKER_WAIT_HINT"), doc=SETTINGS["WORKER_WAIT_HINT"].doc)
    RUN_LEASE = property(lambda self: self.get("RUN_LEASE"), doc=SETTINGS["RUN_LEASE"].doc)
    WORKER_WARM_UP = property(lambda self: self.get("WORKER_WARM_UP"), doc=SETTINGS["WORKER_WARM_UP"].doc)
    STREAM_FLUSH_INTERVAL = property(lambda self: self.get("STREAM_FLUSH_INTERVAL"),
                                     doc=SETTINGS["STREAM_FLUSH_INTERVAL"].doc)
    STREAM_FLUSH_DELTAS = property(lambda self: self.get("STREAM_FLUSH_DELTAS"),
                                   doc=SETTINGS["STREAM_FLUSH_DELTAS"].doc)
    GROUP_PREFIX = property(lambda self: self.get("GROUP_PREFIX"), doc=SETTINGS["GROUP_PREFIX"].doc)
    STREAM_PUBLISH_TIMEOUT = property(lambda self: self.get("STREAM_PUBLISH_TIMEOUT"),
                                      doc=SETTINGS["STREAM_PUBLISH_TIMEOUT"].doc)
    MAX_MESSAGE_LENGTH = property(lambda self: self.get("MAX_MESSAGE_LENGTH"),
                                  doc=SETTINGS["MAX_MESSAGE_LENGTH"].doc)
    MAX_ATTACHMENT_BYTES = property(lambda self: self.get("MAX_ATTACHMENT_BYTES"),
                                    doc=SETTINGS["MAX_ATTACHMENT_BYTES"].doc)
    MAX_ATTACHMENTS = property(lambda self: self.get("MAX_ATTACHMENTS"), doc=SETTINGS["MAX_ATTACHMENTS"].doc)
    CONTENT_SECURITY_POLICY = property(lambda self: self.get("CONTENT_SECURITY_POLICY"),
                                       doc=SETTINGS["CONTENT_SECURITY_POLICY"].doc)
    ADMIN_USAGE_DAYS = property(lambda self: self.get("ADMIN_USAGE_DAYS"), doc=SETTINGS["ADMIN_USAGE_DAYS"].doc)
    RUN_RATE_LIMIT = property(lambda self: self.get("RUN_RATE_LIMIT"), doc=SETTINGS["RUN_RATE_LIMIT"].doc)
    RUN_RATE_PERIOD = property(lambda self: self.get("RUN_RATE_PERIOD"), doc=SETTINGS["RUN_RATE_PERIOD"].doc)
    A2A_PUSH_URLS = property(lambda self: self.get("A2A_PUSH_URLS"), doc=SETTINGS["A2A_PUSH_URLS"].doc)
    A2A_PUSH_PRIVATE = property(lambda self: self.get("A2A_PUSH_PRIVATE"), doc=SETTINGS["A2A_PUSH_PRIVATE"].doc)
    API_TOKEN_DAYS = property(lambda self: self.get("API_TOKEN_DAYS"), doc=SETTINGS["API_TOKEN_DAYS"].doc)
    ASK_TIMEOUT = property(lambda self: self.get("ASK_TIMEOUT"), doc=SETTINGS["ASK_TIMEOUT"].doc)
    CANCEL_POLL_INTERVAL = property(lambda self: self.get("CANCEL_POLL_INTERVAL"),
                                    doc=SETTINGS["CANCEL_POLL_INTERVAL"].doc)
    RETENTION_DAYS = property(lambda self: self.get("RETENTION_DAYS"), doc=SETTINGS["RETENTION_DAYS"].doc)
    ERASE_ON_USER_DELETE = property(lambda self: self.get("ERASE_ON_USER_DELETE"),
                                    doc=SETTINGS["ERASE_ON_USER_DELETE"].doc)
    INSTRUMENT = property(lambda self: self.get("INSTRUMENT"), doc=SETTINGS["INSTRUMENT"].doc)
    TRACES = property(lambda self: self.get("TRACES"), doc=SETTINGS["TRACES"].doc)
    ONLINE_EVALS = property(lambda self: self.get("ONLINE_EVALS"), doc=SETTINGS["ONLINE_EVALS"].doc)

    # -- resolved values -----------------------------------------------------------------
    def robot_option(self, name: str, key: str) -> Any:
        """Option ``key`` of the robot (else network) ``name`` in ``ROBOTS`` (``NETWORKS``); ``None`` when unset.

        Only a dict entry has options (``{"factory": ..., "on_busy": ...}``); a dotted path or a callable has none.
        """
        for setting in ("ROBOTS", "NETWORKS"):
            entries = self.get(setting)
            entry = entries.get(name) if isinstance(entries, dict) else None
            if entry is not None:
                return entry.get(key) if isinstance(entry, Mapping) else None
        return None

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

    def span_model(self) -> type[models.Model]:
        """The model class named by ``SPAN_MODEL``."""
        return apps.get_model(self.SPAN_MODEL)

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
    def logout_redirect_url(self) -> str | None:
        """``settings.LOGOUT_REDIRECT_URL`` (``None`` when unset): where the project sends a visitor who logs out."""
        value = getattr(settings, "LOGOUT_REDIRECT_URL", None)
        return str(value) if value else None

    @property
    def settings_module(self) -> str | None:
        """The dotted name of the settings module (for a generated ``pytest.ini``)."""
        return getattr(settings, "SETTINGS_MODULE", None) or os.environ.get(ENVIRONMENT_VARIABLE) or None


#: The app's settings object.
app_settings = AppSettings()
