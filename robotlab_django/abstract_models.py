"""Abstract bases of the app's models: a thread, one robot result per run, stream events, run steps, run spans.

The concrete models in :mod:`robotlab_django.models` add the foreign keys between them;
``manage.py robotlab_install --models`` copies the same three subclasses into your app (then
point ``ROBOTLAB["THREAD_MODEL"]`` and friends at them). This module imports without the
concrete models, so your app can subclass the bases without registering ours.

A thread is the Rails ``robot_lab_threads`` row (``session_id``, ``initial_input``,
``input_metadata``, ``state_data``, ``last_user_message``, ``last_user_message_at``) plus the
owner and the robot. A result is one robot run on the thread, numbered by ``sequence_number``
(unique per thread, gap-free, allocated under a row lock by the services), with the Rails
columns (``robot_name``, ``output_data``, ``tool_calls_data``, ``stop_reason``, ``checksum``) and
the ones Rails lacked: status, input, reply, the chat messages the run appended (what rebuilds
history), model, tokens, cost, duration, error, delegated_by, run and task ids, attempts.

Every text and JSON column stores storable text (:mod:`robotlab_django.storable`): a NUL or a lone surrogate in a
reply, a tool's arguments or a message is stored as U+FFFD, on SQLite and PostgreSQL alike.
"""

from __future__ import annotations

import uuid
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _

from robotlab_django.encoders import RobotLabJSONEncoder
from robotlab_django.storable import CostField, StorableCharField, StorableJSONField, StorableTextField

if TYPE_CHECKING:
    import datetime

    from django.contrib.auth.models import _AnyUser

__all__ = ["AbstractRobotResult", "AbstractRunEvent", "AbstractRunSpan", "AbstractRunStep", "AbstractThread", "Status",
           "new_run_id", "new_session_id"]


def new_session_id() -> str:
    """A new random session id (a UUID4 string, like Rails' ``SecureRandom.uuid``)."""
    return str(uuid.uuid4())


def new_run_id() -> str:
    """A new random run id (32 hex characters); stream events of the run carry it."""
    return uuid.uuid4().hex


class Status(models.TextChoices):
    """The life of a run.

    Queued -> running -> completed or failed (retrying between attempts); a network task that will not run (its turn
    ended first) is skipped. A run whose robot asked the user waits ``awaiting`` (no process holds it) until the
    answer queues it again; a cancelled run is ``cancelled``.
    """

    QUEUED = "queued", _("queued")
    RUNNING = "running", _("running")
    RETRYING = "retrying", _("retrying")
    COMPLETED = "completed", _("completed")
    FAILED = "failed", _("failed")
    SKIPPED = "skipped", _("skipped")
    AWAITING = "awaiting", _("awaiting an answer")
    CANCELLED = "cancelled", _("cancelled")


class ThreadQuerySet(models.QuerySet[Any]):
    """Queries over threads."""

    def for_user(self, user: _AnyUser | None) -> ThreadQuerySet:
        """The threads ``user`` owns (none for an anonymous user)."""
        if user is None or not getattr(user, "is_authenticated", False):
            return self.none()
        return self.filter(user=user)

    def inactive_since(self, cutoff: datetime.datetime) -> ThreadQuerySet:
        """Threads not updated since ``cutoff`` (what retention deletes)."""
        return self.filter(updated_at__lt=cutoff)


class AbstractThread(models.Model):
    """A conversation: the Rails thread columns plus its owner and robot."""

    session_id = StorableCharField(_("session id"), max_length=255, unique=True, default=new_session_id)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, verbose_name=_("owner"), null=True, blank=True,
                             on_delete=models.SET_NULL, related_name="%(app_label)s_threads")
    robot_name = StorableCharField(_("robot"), max_length=255, blank=True, default="", db_index=True)
    initial_input = StorableTextField(_("initial input"), blank=True, default="")
    input_metadata = StorableJSONField(_("input metadata"), default=dict, blank=True, encoder=RobotLabJSONEncoder)
    state_data = StorableJSONField(_("state data"), default=dict, blank=True, encoder=RobotLabJSONEncoder)
    last_user_message = StorableTextField(_("last user message"), blank=True, default="")
    last_user_message_at = models.DateTimeField(_("last user message at"), null=True, blank=True)
    created_at = models.DateTimeField(_("created at"), auto_now_add=True, db_index=True)
    updated_at = models.DateTimeField(_("updated at"), auto_now=True, db_index=True)

    objects = ThreadQuerySet.as_manager()

    class Meta:
        abstract = True
        verbose_name = _("thread")
        verbose_name_plural = _("threads")

    def __str__(self) -> str:
        return self.session_id

    @classmethod
    def find_or_create_by_session_id(cls, session_id: str) -> AbstractThread:
        """The thread with ``session_id``, created when missing (Rails ``find_or_create_by_session_id``)."""
        thread, _created = cls.objects.get_or_create(session_id=session_id)
        return thread

    def last_result(self) -> Any:
        """The result with the highest sequence number, or ``None``."""
        return self._results().order_by("-sequence_number").first()

    def message_count(self) -> int:
        """How many results the thread has (Rails ``message_count``)."""
        return int(self._results().count())

    def _results(self) -> Any:
        """The thread's results (the reverse of the ``thread`` foreign key that the concrete result model adds)."""
        return getattr(self, "results")  # noqa: B009 - not declared on the abstract base


class RobotResultQuerySet(models.QuerySet[Any]):
    """Queries over robot results."""

    def completed(self) -> RobotResultQuerySet:
        """Runs that finished (the ones whose messages make up the history)."""
        return self.filter(status=Status.COMPLETED)

    def failed(self) -> RobotResultQuerySet:
        """Runs that failed."""
        return self.filter(status=Status.FAILED)

    def unfinished(self) -> RobotResultQuerySet:
        """Runs queued, running or waiting for a retry."""
        return self.filter(status__in=[Status.QUEUED, Status.RUNNING, Status.RETRYING])

    def awaiting(self) -> RobotResultQuerySet:
        """Runs parked on a question to their user."""
        return self.filter(status=Status.AWAITING)


class AbstractRobotResult(models.Model):
    """One robot run on a thread (Rails ``robot_lab_results`` plus status, usage and errors).

    The concrete model adds ``thread = ForeignKey(<thread model>, related_name="results")``.
    """

    sequence_number = models.PositiveIntegerField(_("sequence number"))
    robot_name = StorableCharField(_("robot"), max_length=255, db_index=True)
    status = StorableCharField(_("status"), max_length=16, choices=Status.choices, default=Status.QUEUED,
                              db_index=True)
    input = StorableTextField(_("input"), blank=True, default="", help_text=_("The user message of the run."))
    attachments = StorableJSONField(_("attachments"), default=list, blank=True, encoder=RobotLabJSONEncoder,
                                   help_text=_("The files sent with the user message (robotlab.Attachment.to_dict(): "
                                               "mime_type, name, base64 data or an image url)."))
    reply = StorableTextField(_("reply"), blank=True, default="")
    messages = StorableJSONField(_("messages"), default=list, blank=True, encoder=RobotLabJSONEncoder,
                                help_text=_("The chat messages this run appended, in order (OpenAI format)."))
    output_data = StorableJSONField(_("output"), default=list, blank=True, encoder=RobotLabJSONEncoder)
    tool_calls_data = StorableJSONField(_("tool calls"), default=list, blank=True, encoder=RobotLabJSONEncoder)
    stop_reason = StorableCharField(_("stop reason"), max_length=64, blank=True, default="")
    checksum = StorableCharField(_("checksum"), max_length=64, blank=True, default="")
    model = StorableCharField(_("model"), max_length=255, blank=True, default="")
    input_tokens = models.PositiveIntegerField(_("input tokens"), default=0)
    output_tokens = models.PositiveIntegerField(_("output tokens"), default=0)
    cost = CostField(_("cost (USD)"), max_digits=14, decimal_places=8, default=Decimal(0))
    duration = models.FloatField(_("duration (s)"), null=True, blank=True)
    error = StorableTextField(_("error"), blank=True, default="")
    error_type = StorableCharField(_("error type"), max_length=255, blank=True, default="")
    error_kind = StorableCharField(_("error kind"), max_length=32, blank=True, default="",
                                  help_text=_("The kind of a model provider's failure (robotlab's "
                                              "InferenceError.kind: rate_limit, auth, timeout, ...), which words "
                                              "the message users see; empty for any other error."))
    delegated_by = StorableCharField(_("delegated by"), max_length=255, blank=True, default="")
    run_id = StorableCharField(_("run id"), max_length=64, default=new_run_id, db_index=True)
    task_id = StorableCharField(_("task id"), max_length=255, blank=True, default="", db_index=True)
    attempts = models.PositiveSmallIntegerField(_("attempts"), default=0)
    task_name = StorableCharField(_("network task"), max_length=255, blank=True, default="",
                                 help_text=_("The network task this row ran, on a network turn's task row."))
    parent = models.ForeignKey("self", verbose_name=_("network turn"), null=True, blank=True,
                               on_delete=models.CASCADE, related_name="task_rows",
                               help_text=_("The network turn this task row belongs to."))
    worker = StorableCharField(_("worker"), max_length=255, blank=True, default="",
                              help_text=_("The host (Celery hostname) that ran the row's last attempt."))
    worker_pid = models.PositiveIntegerField(_("worker pid"), null=True, blank=True)
    turn_state = StorableJSONField(_("turn state"), default=dict, blank=True, encoder=RobotLabJSONEncoder,
                                  help_text=_("A distributed network turn's scheduling state "
                                              "(robotlab.network.TurnState.to_dict())."))
    turn_version = models.PositiveIntegerField(_("turn version"), default=0,
                                               help_text=_("Bumped by every change of the turn state; a change "
                                                           "applies only over the version it read."))
    question = StorableJSONField(_("pending question"), default=dict, blank=True, encoder=RobotLabJSONEncoder,
                                help_text=_("The question an awaiting run waits on: request_id, question, "
                                            "choices, default, robot."))
    answers = StorableJSONField(_("answers"), default=list, blank=True, encoder=RobotLabJSONEncoder,
                               help_text=_("The user's answers to the run's questions, oldest first."))
    parked_at = models.DateTimeField(_("parked at"), null=True, blank=True,
                                     help_text=_("When the run last started waiting for an answer."))
    version = models.ForeignKey("robotlab.RobotVersion", verbose_name=_("robot version"), null=True, blank=True,
                                on_delete=models.SET_NULL, related_name="+",
                                help_text=_("The robot version the run ran; empty: the robot's code."))
    code_hash = StorableCharField(_("code's prompt hash"), max_length=64, blank=True, default="",
                                 help_text=_("SHA-256 of the instructions the code gave, when no version applied."))
    created_at = models.DateTimeField(_("created at"), auto_now_add=True, db_index=True)
    updated_at = models.DateTimeField(_("updated at"), auto_now=True)
    started_at = models.DateTimeField(_("started at"), null=True, blank=True)
    finished_at = models.DateTimeField(_("finished at"), null=True, blank=True)

    objects = RobotResultQuerySet.as_manager()

    class Meta:
        abstract = True
        ordering = ("sequence_number",)
        verbose_name = _("robot result")
        verbose_name_plural = _("robot results")
        constraints = [
            models.UniqueConstraint(fields=("thread", "sequence_number"),
                                    name="%(app_label)s_%(class)s_thread_seq_uniq"),
        ]

    def __str__(self) -> str:
        return f"{self.robot_name} #{self.sequence_number}"

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return int(self.input_tokens or 0) + int(self.output_tokens or 0)

    @property
    def is_finished(self) -> bool:
        """Whether the run completed, failed, was skipped or cancelled."""
        return self.status in (Status.COMPLETED, Status.FAILED, Status.SKIPPED, Status.CANCELLED)

    def output_messages(self) -> list[Any]:
        """``output_data`` as :class:`robotlab.messages.Message` objects."""
        from robotlab.messages import Message

        return [Message.from_dict(item) for item in self.output_data or []]

    def tool_call_messages(self) -> list[Any]:
        """``tool_calls_data`` as :class:`robotlab.messages.ToolResultMessage` objects."""
        from robotlab.messages import Message

        return [Message.from_dict(item) for item in self.tool_calls_data or []]

    def to_robot_result(self) -> Any:
        """The stored run as a :class:`robotlab.RobotResult` (its ``id`` is the run id)."""
        from robotlab.result import RobotResult

        result = RobotResult(
            robot_name=self.robot_name, output=self.output_data or [], tool_calls=self.tool_calls_data or [],
            created_at=self.created_at, id=self.run_id, stop_reason=self.stop_reason or None,
            input_tokens=self.input_tokens, output_tokens=self.output_tokens, cost=float(self.cost or 0),
            model=self.model or None,
        )
        result.duration = self.duration
        result.delegated_by = self.delegated_by or None
        return result


class AbstractRunEvent(models.Model):
    """One stream event of a run, kept so a reconnecting client can replay what it missed.

    The concrete model adds ``thread`` and ``result`` foreign keys (``related_name="events"``).
    """

    run_id = StorableCharField(_("run id"), max_length=64)
    seq = models.PositiveIntegerField(_("sequence"))
    kind = StorableCharField(_("kind"), max_length=64)
    ts = models.FloatField(_("timestamp"))
    data = StorableJSONField(_("data"), default=dict, blank=True, encoder=RobotLabJSONEncoder)
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)

    class Meta:
        abstract = True
        ordering = ("run_id", "seq")
        verbose_name = _("run event")
        verbose_name_plural = _("run events")
        constraints = [
            models.UniqueConstraint(fields=("run_id", "seq"), name="%(app_label)s_%(class)s_run_seq_uniq"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} #{self.seq}"

    def to_dict(self) -> dict[str, Any]:
        """The event as it went over the wire: ``{"kind", "run_id", "seq", "ts", **data}``."""
        return {"kind": self.kind, "run_id": self.run_id, "seq": self.seq, "ts": self.ts, **(self.data or {})}


class AbstractRunStep(models.Model):
    """One completed LLM call or tool call of a run, checkpointed so a re-execution replays it.

    ``idx`` numbers a run's steps from 0 in the order the robot took them; ``fingerprint`` is a
    hash of the step's input (the LLM request, or the tool and its arguments) and ``output`` what
    came back (see :mod:`robotlab_django.runs.checkpoints`). The concrete model adds
    ``result = ForeignKey(<result model>, related_name="steps")``.
    """

    LLM = "llm"
    TOOL = "tool"
    KINDS = ((LLM, _("LLM call")), (TOOL, _("tool call")))

    idx = models.PositiveIntegerField(_("step"))
    kind = StorableCharField(_("kind"), max_length=8, choices=KINDS)
    fingerprint = StorableCharField(_("fingerprint"), max_length=64,
                                   help_text=_("SHA-256 of the step's input; a re-execution replays the step "
                                               "only while its input is the same."))
    output = StorableJSONField(_("output"), default=dict, blank=True, encoder=RobotLabJSONEncoder)
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)

    class Meta:
        abstract = True
        ordering = ("result", "idx")
        verbose_name = _("run step")
        verbose_name_plural = _("run steps")
        constraints = [
            models.UniqueConstraint(fields=("result", "idx"), name="%(app_label)s_%(class)s_result_idx_uniq"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} #{self.idx}"


class AbstractRunSpan(models.Model):
    """One OpenTelemetry span of a run, kept when ``ROBOTLAB["TRACES"]`` is on (:mod:`robotlab_django.tracing`).

    The ids are lowercase hex, as W3C ``traceparent`` writes them; ``attributes`` are the span's (the GenAI ones:
    ``gen_ai.operation.name``, ``gen_ai.usage.*``, ...), and the tokens and cost (the run's own figure,
    ``robotlab.usage.cost``) are copied into columns. A span with no ``ended_at`` never ended: the worker of its
    job was lost. The concrete model adds ``result = ForeignKey(<result model>, related_name="spans")``.
    """

    UNSET = "unset"
    OK = "ok"
    ERROR = "error"
    STATUSES = ((UNSET, _("unset")), (OK, _("ok")), (ERROR, _("error")))

    trace_id = models.CharField(_("trace id"), max_length=32, db_index=True)
    span_id = models.CharField(_("span id"), max_length=16)
    parent_span_id = models.CharField(_("parent span id"), max_length=16, blank=True, default="")
    name = StorableCharField(_("name"), max_length=255)
    kind = models.CharField(_("kind"), max_length=16, default="internal")
    started_at = models.DateTimeField(_("started at"))
    ended_at = models.DateTimeField(_("ended at"), null=True, blank=True,
                                    help_text=_("Empty: the span never ended (its worker was lost)."))
    status = models.CharField(_("status"), max_length=8, choices=STATUSES, default=UNSET)
    status_message = StorableTextField(_("status message"), blank=True, default="")
    attributes = StorableJSONField(_("attributes"), default=dict, blank=True, encoder=RobotLabJSONEncoder)
    links = StorableJSONField(_("links"), default=list, blank=True, encoder=RobotLabJSONEncoder,
                              help_text=_("The spans this one is linked to: [{trace_id, span_id}] (an earlier "
                                          "attempt of the same run)."))
    input_tokens = models.PositiveIntegerField(_("input tokens"), null=True, blank=True)
    output_tokens = models.PositiveIntegerField(_("output tokens"), null=True, blank=True)
    cost = CostField(_("cost (USD)"), max_digits=14, decimal_places=8, default=Decimal(0))
    worker = StorableCharField(_("worker"), max_length=255, blank=True, default="")
    worker_pid = models.PositiveIntegerField(_("worker pid"), null=True, blank=True)

    class Meta:
        abstract = True
        ordering = ("started_at", "id")
        verbose_name = _("run span")
        verbose_name_plural = _("run spans")
        constraints = [
            models.UniqueConstraint(fields=("trace_id", "span_id"), name="%(app_label)s_%(class)s_trace_span_uniq"),
        ]

    def __str__(self) -> str:
        return str(self.name)

    @property
    def duration(self) -> float | None:
        """Seconds from start to end (``None`` while the span has no end)."""
        if self.ended_at is None:
            return None
        return (self.ended_at - self.started_at).total_seconds()
