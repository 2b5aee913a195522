"""Celery: the ``send_push_notification`` task, which POSTs one A2A push notification to its webhook.

Thin, like :mod:`robotlab_django.tasks`: it takes the config's primary key and the notified state (never the
token or the URL) and calls :func:`robotlab_django.a2a.push.deliver`. A webhook that cannot be reached or answers
other than 2xx (:class:`~robotlab_django.a2a.push.WebhookDeliveryError`) is tried again by Celery's own retry, with
exponential backoff and jitter (:data:`RETRY_BACKOFF` seconds doubled each time, at most
:data:`RETRY_BACKOFF_MAX`), :data:`MAX_RETRIES` times. Every process that loaded Celery before Django's set up
(a Celery worker does) and has the A2A server's packages registers it (the app's ``ready()``). A retry of a state
the task has left since is not sent (``"superseded"``), so a webhook never gets an older state after a newer one.
"""

from __future__ import annotations

from celery import Task, shared_task

from robotlab_django.a2a.push import WebhookDeliveryError, deliver
from robotlab_django.protocols.push import TASK_NAME

__all__ = ["MAX_RETRIES", "RETRY_BACKOFF", "RETRY_BACKOFF_MAX", "send_push_notification"]

#: Retries of a notification the webhook did not take, after its first try.
MAX_RETRIES = 8
#: Seconds before the first retry (then 2, 4, 8... times that, with jitter), and the longest wait.
RETRY_BACKOFF, RETRY_BACKOFF_MAX = 1, 600


@shared_task(bind=True, name=TASK_NAME, ignore_result=True, autoretry_for=(WebhookDeliveryError,),
             max_retries=MAX_RETRIES, retry_backoff=RETRY_BACKOFF, retry_backoff_max=RETRY_BACKOFF_MAX,
             retry_jitter=True)
def send_push_notification(self: Task[[int, str], str], config_pk: int, state: str) -> str:
    """Deliver the notification of ``state`` (a ``TaskState`` name) to the config ``config_pk``; what happened.

    A retry of a state the task has left since is dropped (``"superseded"``), so retries keep the order.
    """
    return deliver(config_pk, state, retry=bool(self.request.retries))
