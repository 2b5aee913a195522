"""A2A push notifications: which webhook URLs are allowed, how a notification is signed, and when one is sent.

**Allowed URLs.** A webhook URL is ``http(s)`` and starts with one of ``ROBOTLAB["A2A_PUSH_URLS"]`` (the same
scheme, host and port, its path under the prefix's path), and its host must be, and resolve to, public addresses
only unless ``ROBOTLAB["A2A_PUSH_PRIVATE"]`` is true (a loopback, private, link-local, cloud-metadata... address
would let a client make this server call a network the client cannot reach). :func:`check_url` applies the rule
when a client registers a webhook and again before every delivery, so a setting narrowed later, or a name that
now resolves elsewhere, stops notifications already registered. A delivery is sent to the address its host was
checked at (:func:`pinned`), with the host's name kept for the ``Host`` header and TLS (its SNI and certificate
check), so a name that resolves to a public address when checked and to a private one when the request connects
(DNS rebinding) does not reach the private one.

**Signing.** Each notification's body is signed with HMAC-SHA256 keyed by the config's token
(:func:`signature`), sent as ``X-RobotLab-Signature: sha256=<hex digest>``; the token itself goes in the A2A
SDK's ``X-A2A-Notification-Token`` header.

**When.** The A2A task's state changes are its run's stored events (:data:`STATE_KINDS`): ``run.started`` and
``hitl.resolved`` (working), ``hitl.requested`` (input-required), ``run.completed``, ``run.failed`` and
``run.cancelled``. :func:`on_events_stored`, connected to
:data:`~robotlab_django.streaming.stored.events_stored` by the app's ``ready()``, finds the configs of the
batch's row (none are looked for while ``A2A_PUSH_URLS`` is empty) and schedules one delivery per config and new
state, once the transaction commits: the Celery task ``robotlab_django.a2a.push_task.send_push_notification``
under the ``celery`` executor (retried with exponential backoff), else the deliverer the A2A server registered
(:func:`register_deliverer`), once, in a thread of this process (``"thread"``) or at once (``"sync"``).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import logging
import threading
from collections.abc import Callable, Sequence
from typing import NamedTuple
from urllib.parse import urlsplit

from django.db import close_old_connections, connections, transaction

from robotlab.streaming import (
    HITL_REQUESTED,
    HITL_RESOLVED,
    RUN_CANCELLED,
    RUN_COMPLETED,
    RUN_FAILED,
    RUN_STARTED,
    Event,
)
from robotlab_django.conf import app_settings
from robotlab_django.protocols.push_models import PushNotificationConfig
from robotlab_django.runs.attachments import IPAddress, non_public_address, resolved_addresses
from robotlab_django.streaming.stored import events_stored

__all__ = ["SIGNATURE_HEADER", "STATE_KINDS", "TASK_NAME", "TOKEN_HEADER", "Pinned", "WebhookURLError", "check_url",
           "connect_signals", "on_events_stored", "pinned", "register_deliverer", "schedule", "signature"]

logger = logging.getLogger("robotlab_django")

#: The A2A task state (its ``TaskState`` name) each state-changing event kind of a run means.
STATE_KINDS: dict[str, str] = {
    RUN_STARTED: "TASK_STATE_WORKING", HITL_RESOLVED: "TASK_STATE_WORKING",
    HITL_REQUESTED: "TASK_STATE_INPUT_REQUIRED", RUN_COMPLETED: "TASK_STATE_COMPLETED",
    RUN_FAILED: "TASK_STATE_FAILED", RUN_CANCELLED: "TASK_STATE_CANCELED",
}
#: The header carrying the body's HMAC-SHA256, keyed by the config's token: ``sha256=<hex digest>``.
SIGNATURE_HEADER = "X-RobotLab-Signature"
#: The A2A SDK's header carrying the config's token.
TOKEN_HEADER = "X-A2A-Notification-Token"
#: The Celery task that delivers one notification (:mod:`robotlab_django.a2a.push_task`).
TASK_NAME = "robotlab_django.a2a.push_task.send_push_notification"

Deliverer = Callable[[int, str], object]
_deliverers: list[Deliverer] = []


class WebhookURLError(ValueError):
    """A webhook URL the settings do not allow; the message says why (never the URL's query or credentials)."""


def _matches(url: str, prefix: str) -> bool:
    given, allowed = urlsplit(url), urlsplit(prefix)
    path = allowed.path if allowed.path.endswith("/") or not allowed.path else allowed.path + "/"
    return (given.scheme.lower(), (given.hostname or "").lower(), given.port) == (
        allowed.scheme.lower(), (allowed.hostname or "").lower(), allowed.port) and (
        given.path == allowed.path or (given.path or "/").startswith(path or "/"))


def check_url(url: str) -> str:
    """``url`` if ``ROBOTLAB["A2A_PUSH_URLS"]`` and ``["A2A_PUSH_PRIVATE"]`` allow a webhook there.

    Raises:
        WebhookURLError: push notifications are off, the URL is malformed, under no allowed prefix, or its host
            is (or resolves to) a non-public address, or does not resolve.
    """
    _checked_addresses(url)
    return url


class Pinned(NamedTuple):
    """A request to a checked webhook URL, bound to the address its host was checked at."""

    #: The URL with its host replaced by the checked address (the URL as given when nothing is bound).
    url: str
    #: ``Host``: the name and port of the URL as given.
    headers: dict[str, str]
    #: httpx's request extensions: ``sni_hostname``, so TLS names (and checks the certificate of) the host.
    extensions: dict[str, str]


def pinned(url: str) -> Pinned:
    """:func:`check_url`, and the request that goes to the address checked rather than to the name again.

    Resolving the name again when connecting would let it answer with a private address after a public one
    (DNS rebinding). Nothing is bound when the URL's host is an address already, or when ``A2A_PUSH_PRIVATE``
    allows every address (then the URL is sent as given).

    Raises:
        WebhookURLError: as :func:`check_url`.
    """
    addresses = _checked_addresses(url)
    parts = urlsplit(url)
    host = parts.hostname or ""
    if not addresses or _is_address(host):
        return Pinned(url, {}, {})
    address = addresses[0]
    literal = f"[{address}]" if address.version == 6 else str(address)
    userinfo, _, named = parts.netloc.rpartition("@")
    netloc = (f"{userinfo}@" if userinfo else "") + literal + (f":{parts.port}" if parts.port else "")
    extensions = {"sni_hostname": host} if parts.scheme == "https" else {}
    return Pinned(parts._replace(netloc=netloc).geturl(), {"Host": named}, extensions)


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _checked_addresses(url: str) -> list[IPAddress]:
    """Check ``url`` as :func:`check_url` says; the public addresses its host resolved to (``[]`` if unchecked)."""
    prefixes = [str(prefix) for prefix in app_settings.A2A_PUSH_URLS or ()]
    if not prefixes:
        raise WebhookURLError("Push notifications are off on this server (ROBOTLAB['A2A_PUSH_URLS'] is empty).")
    try:
        parts = urlsplit(url)
        host, port = parts.hostname, parts.port
    except ValueError:
        raise WebhookURLError("The webhook URL is malformed.") from None
    if parts.scheme not in ("http", "https") or not host:
        raise WebhookURLError("A webhook URL is an http(s) URL with a host.")
    if not any(_matches(url, prefix) for prefix in prefixes):
        raise WebhookURLError(f"Webhooks on {parts.scheme}://{parts.netloc.rpartition('@')[2]} are not allowed "
                              "here: the URL must start with one of ROBOTLAB['A2A_PUSH_URLS'].")
    if app_settings.A2A_PUSH_PRIVATE:
        return []
    addresses = resolved_addresses(host, port)
    if not addresses:
        raise WebhookURLError(f"The webhook's host {host} does not resolve.")
    for address in addresses:
        reason = non_public_address(address)
        if reason:
            raise WebhookURLError(f"The webhook's host {host} is not a public address ({address} is {reason}); "
                                  "ROBOTLAB['A2A_PUSH_PRIVATE'] allows such hosts.")
    return addresses


def signature(token: str, body: bytes) -> str:
    """The value of :data:`SIGNATURE_HEADER` for ``body``: ``sha256=`` and its HMAC-SHA256 keyed by ``token``."""
    return "sha256=" + hmac.new(token.encode(), body, hashlib.sha256).hexdigest()


def register_deliverer(deliver: Deliverer) -> None:
    """Deliver notifications in this process (``deliver(config_pk, state)``) under the thread and sync executors."""
    if deliver not in _deliverers:
        _deliverers.append(deliver)


def _deliver_once(config_pk: int, state: str) -> None:
    for deliver in _deliverers:
        try:
            deliver(config_pk, state)
        except Exception:  # one try only outside Celery; the run goes on
            logger.exception("robotlab: the A2A push notification of config %s failed", config_pk)


def _in_background(config_pk: int, state: str) -> None:
    close_old_connections()
    try:
        _deliver_once(config_pk, state)
    finally:
        connections.close_all()


def _send(config_pk: int, state: str) -> None:
    from celery import current_app  # Celery only where it is used

    try:
        current_app.send_task(TASK_NAME, args=(config_pk, state), queue=str(app_settings.TASK_QUEUE))
    except Exception:  # the broker is down: this notification is lost, the run goes on
        logger.exception("robotlab: the A2A push notification of config %s could not be sent", config_pk)


def schedule(config_pk: int, state: str) -> None:
    """Deliver the notification of ``state`` to the config ``config_pk`` once the transaction commits."""
    mode = app_settings.EXECUTOR
    if mode == "celery":
        transaction.on_commit(lambda: _send(config_pk, state), robust=True)
    elif mode == "thread":
        transaction.on_commit(lambda: threading.Thread(target=_in_background, args=(config_pk, state),
                                                       name=f"robotlab-a2a-push-{config_pk}", daemon=True).start(),
                              robust=True)
    else:
        transaction.on_commit(lambda: _deliver_once(config_pk, state), robust=True)


def on_events_stored(sender: object = None, result_id: int | None = None, events: Sequence[Event] = (),
                     **kwargs: object) -> None:
    """:data:`~robotlab_django.streaming.stored.events_stored`: schedule the notifications of the batch's states."""
    changes = [(event.run_id, STATE_KINDS[event.kind]) for event in events if event.kind in STATE_KINDS]
    if not changes or result_id is None or not app_settings.A2A_PUSH_URLS:
        return
    try:
        with transaction.atomic():  # a savepoint inside the run's transaction: an error here leaves it usable
            for run_id, state in changes:  # the task's own events, not those of a network's robots
                configs = PushNotificationConfig.objects.filter(result_id=result_id, result__run_id=run_id)
                for pk in configs.exclude(last_state=state).values_list("pk", flat=True):
                    if PushNotificationConfig.objects.filter(pk=pk).exclude(last_state=state).update(
                            last_state=state):
                        schedule(pk, state)
    except Exception:  # a notification never fails the run
        logger.exception("robotlab: the A2A push notifications of run row %s could not be scheduled", result_id)


def connect_signals() -> None:
    """Listen to stored events (the app's ``ready()`` calls it)."""
    events_stored.connect(on_events_stored, dispatch_uid="robotlab_a2a_push")
