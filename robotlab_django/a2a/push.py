"""A2A push notifications: the configs a task's owner registers, and the delivery of one notification.

A config (:class:`~robotlab_django.protocols.push_models.PushNotificationConfig`) is a webhook URL registered for
one task (``CreateTaskPushNotificationConfig``, or ``configuration.task_push_notification_config`` of the message
that starts the task), read, listed and deleted by the task's owner only: another user's task is not found. Its
URL must be allowed by the settings (:func:`robotlab_django.protocols.push.check_url`); its token is the client's,
or one made here and returned when it sent none.

Each state change of the task is POSTed to the URL (:func:`deliver`): the body is the A2A ``StreamResponse``
holding the task (its status the new state, its artifacts the reply so far) as JSON, signed with the token
(``X-RobotLab-Signature: sha256=<HMAC-SHA256 of the body>``), the token in ``X-A2A-Notification-Token``, and the
config's ``authentication`` as ``Authorization: <scheme> <credentials>``. A refused URL is not retried; a network
error or a non-2xx answer raises :class:`WebhookDeliveryError`, which the Celery task retries with backoff.
"""

from __future__ import annotations

import logging
import secrets
import time
import uuid
from typing import TYPE_CHECKING

import httpx
from a2a.types.a2a_pb2 import AuthenticationInfo, StreamResponse, TaskPushNotificationConfig, TaskState
from django.db import transaction
from google.protobuf.json_format import MessageToJson

from robotlab_django.a2a.wire import STATES, task_id, task_of
from robotlab_django.protocols import push as push_policy
from robotlab_django.protocols import runs as protocol_runs
from robotlab_django.protocols.push_models import PushNotificationConfig

if TYPE_CHECKING:
    from django.contrib.auth.models import _User

    from robotlab_django.models import RobotResult

__all__ = ["MAX_CONFIGS", "SETTLE_WAIT", "TIMEOUT", "WebhookDeliveryError", "config_of", "create_config",
           "delete_config", "deliver", "get_config", "list_configs", "notification_body"]

logger = logging.getLogger("robotlab_django")

#: Push-notification configs one task may hold.
MAX_CONFIGS = 10
#: Seconds one delivery may take (connect, send, answer).
TIMEOUT = 10.0
#: Seconds a notification waits for its row to reach the state it notifies (see :func:`deliver`).
SETTLE_WAIT = 5.0
_UNSETTLED = (TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING)


class WebhookDeliveryError(Exception):
    """A notification the webhook did not take (a network error or a non-2xx answer): worth trying again."""


def config_of(stored: PushNotificationConfig, row: RobotResult) -> TaskPushNotificationConfig:
    """The A2A shape of ``stored`` (a config of ``row``'s task), its token included: for its owner only."""
    config = TaskPushNotificationConfig(id=stored.config_id, task_id=task_id(row), url=stored.url, token=stored.token)
    if stored.auth_scheme:
        config.authentication.CopyFrom(AuthenticationInfo(scheme=stored.auth_scheme,
                                                          credentials=stored.auth_credentials))
    return config


def create_config(row: RobotResult, user: _User, params: TaskPushNotificationConfig) -> TaskPushNotificationConfig:
    """Register (or replace, by its id) the webhook ``params`` for ``row``'s task, owned by ``user``.

    Raises:
        WebhookURLError: the settings do not allow its URL.
        ValueError: the task holds :data:`MAX_CONFIGS` configs already, or the id is too long.
    """
    push_policy.check_url(params.url)
    config_id = params.id or uuid.uuid4().hex
    if len(config_id) > 200:
        raise ValueError("A push-notification config id has at most 200 characters.")
    fields = {"url": params.url, "user": user, "token": params.token or secrets.token_urlsafe(32),
              "auth_scheme": params.authentication.scheme, "auth_credentials": params.authentication.credentials}
    with transaction.atomic():
        configs = PushNotificationConfig.objects.select_for_update().filter(result=row)
        if not configs.filter(config_id=config_id).exists() and configs.count() >= MAX_CONFIGS:
            raise ValueError(f"A task holds at most {MAX_CONFIGS} push-notification configs; delete one first.")
        stored, _ = PushNotificationConfig.objects.update_or_create(result=row, config_id=config_id, defaults=fields)
    return config_of(stored, row)


def get_config(row: RobotResult, config_id: str) -> TaskPushNotificationConfig | None:
    """The config ``config_id`` of ``row``'s task (the first one without an id); ``None`` if there is none."""
    configs = PushNotificationConfig.objects.filter(result=row)
    stored = (configs.filter(config_id=config_id) if config_id else configs).first()
    return config_of(stored, row) if stored is not None else None


def list_configs(row: RobotResult) -> list[TaskPushNotificationConfig]:
    """Every config of ``row``'s task, oldest first."""
    return [config_of(stored, row) for stored in PushNotificationConfig.objects.filter(result=row)]


def delete_config(row: RobotResult, config_id: str) -> bool:
    """Delete the config ``config_id`` of ``row``'s task; whether there was one."""
    deleted, _ = PushNotificationConfig.objects.filter(result=row, config_id=config_id).delete()
    return bool(deleted)


def notification_body(row: RobotResult, state: str) -> bytes:
    """The body of the notification of ``state`` (a ``TaskState`` name) for ``row``: a ``StreamResponse`` as JSON.

    The task as :func:`~robotlab_django.a2a.wire.task_of` makes it, its status the notified state (with the row's
    status message, the question or the error, when the row is in that state).
    """
    task = task_of(row, protocol_runs.public_session_id(row.thread))
    if STATES.get(row.status) != TaskState.Value(state):
        task.status.ClearField("message")
        task.status.state = TaskState.Value(state)
    return str(MessageToJson(StreamResponse(task=task), indent=None)).encode()


def _reached(row: RobotResult, state: str) -> RobotResult:
    """``row`` once it has left ``working`` for the notified ``state`` (at most :data:`SETTLE_WAIT` seconds).

    A run stores the event of a question before its row says ``awaiting`` (the question itself is in the row): the
    notification waits for the row, so an ``input-required`` task carries its question, a ``completed`` one its reply.
    """
    deadline = time.monotonic() + SETTLE_WAIT
    while STATES.get(row.status) in _UNSETTLED and TaskState.Value(state) not in _UNSETTLED \
            and time.monotonic() < deadline:
        time.sleep(protocol_runs.POLL_INTERVAL)
        row.refresh_from_db()
    return row


def deliver(config_pk: int, state: str, *, retry: bool = False) -> str:
    """POST the notification of ``state`` to the config ``config_pk``; what happened (``"sent"``, ``"gone"``...).

    A deleted config (or task) is ``"gone"``; a URL the settings no longer allow is ``"refused"`` (logged, not
    retried). The body is made once the row has reached the notified state (:func:`_reached`). A ``retry`` (the
    webhook missed the first try) of a state the task has left since is ``"superseded"`` and not sent: a retried
    ``working`` would otherwise reach the webhook after ``completed``, and the newer state has its own notification.

    Raises:
        WebhookDeliveryError: the webhook could not be reached or did not answer 2xx.
    """
    stored = PushNotificationConfig.objects.select_related("result__thread").filter(pk=config_pk).first()
    if stored is None:
        return "gone"
    row = stored.result
    if retry and STATES.get(row.status) != TaskState.Value(state):
        logger.info("robotlab: A2A push notification %s of run %s to config %s superseded (the task is %s now)",
                    state, row.run_id, config_pk, TaskState.Name(STATES.get(row.status, 0)))
        return "superseded"
    try:
        target = push_policy.pinned(stored.url)  # sent to the address checked, not to the name resolved again
    except push_policy.WebhookURLError as exc:
        logger.warning("robotlab: A2A push config %s of run %s refused: %s", config_pk, row.run_id, exc)
        return "refused"
    body = notification_body(_reached(row, state), state)
    headers = {**target.headers, "Content-Type": "application/json", push_policy.TOKEN_HEADER: stored.token,
               push_policy.SIGNATURE_HEADER: push_policy.signature(stored.token, body)}
    if stored.auth_scheme:
        headers["Authorization"] = f"{stored.auth_scheme} {stored.auth_credentials}".strip()
    try:
        with httpx.Client(timeout=TIMEOUT, follow_redirects=False) as client:
            answer = client.post(target.url, content=body, headers=headers, extensions=target.extensions)
    except httpx.HTTPError as exc:  # the exception's text may hold the URL: only its kind is told
        raise WebhookDeliveryError(f"config {config_pk}: {type(exc).__name__}") from None
    if not 200 <= answer.status_code < 300:
        raise WebhookDeliveryError(f"config {config_pk}: HTTP {answer.status_code}")
    logger.info("robotlab: A2A push notification %s of run %s sent to config %s", state, row.run_id, config_pk)
    return "sent"


push_policy.register_deliverer(deliver)
