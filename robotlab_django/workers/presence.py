"""Whether a worker takes the queued runs: the chat page's hint and ``manage.py check --deploy``'s.

With ``ROBOTLAB["EXECUTOR"] = "celery"`` a run waits ``queued`` until a Celery worker consuming
``ROBOTLAB["TASK_QUEUE"]`` claims it. With no worker (none started, or one on another queue) it would wait
for ever and the page would only say "queued". So:

* :func:`waiting_hint`: a run still ``queued`` ``ROBOTLAB["WORKER_WAIT_HINT"]`` seconds (10) after it was
  queued gets a hint, which the chat page's poll shows instead of "queued";
* :func:`queue_consumers`: asks the workers over the broker (Celery's ``inspect().active_queues()``)
  which of them consume a queue; ``robotlab.W006`` of ``manage.py check --deploy`` reports none.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.utils import timezone

from robotlab_django.conf import app_settings

if TYPE_CHECKING:
    from celery import Celery

    from robotlab_django.models import RobotResult

__all__ = ["BrokerUnreachableError", "queue_consumers", "waiting_hint"]


class BrokerUnreachableError(RuntimeError):
    """The Celery broker did not answer."""


def waiting_hint(row: RobotResult) -> str:
    """What to tell the user about a run no worker has picked up: ``""`` unless it waits too long.

    Only for the ``celery`` executor (the others run in the web process), a ``queued`` row, and once it has
    waited ``ROBOTLAB["WORKER_WAIT_HINT"]`` seconds since it was last queued (``updated_at``).
    """
    limit = app_settings.WORKER_WAIT_HINT
    if limit is None or app_settings.EXECUTOR != "celery" or row.status != "queued" or row.updated_at is None:
        return ""
    waited = (timezone.now() - row.updated_at).total_seconds()
    if waited < limit:
        return ""
    queue = str(app_settings.TASK_QUEUE)
    return (f"No worker has picked this run up in {int(waited)} s. If it stays queued, start a Celery worker "
            f"on the queue '{queue}' (celery -A yourproject worker -Q {queue}).")


def queue_consumers(queue: str, *, app: Celery | None = None, timeout: float = 1.0) -> list[str]:
    """The names of the Celery workers that answer within ``timeout`` seconds and consume ``queue``.

    Args:
        queue: The queue's name.
        app: The Celery app (default: the current one, the project's once its ``celery.py`` is imported).
        timeout: Seconds to wait for the workers' answers.

    Raises:
        BrokerUnreachableError: the broker could not be reached.
    """
    if app is None:
        from celery import current_app

        app = current_app
    try:
        with app.connection_for_read() as connection:
            connection.ensure_connection(max_retries=1, timeout=timeout)  # type: ignore[arg-type]  # a float works
            answers = app.control.inspect(timeout=timeout, connection=connection).active_queues() or {}
    except Exception as exc:  # kombu raises its transport's own errors (redis, amqp, OSError)
        raise BrokerUnreachableError(f"{type(exc).__name__}: {exc}") from None
    return sorted(worker for worker, queues in answers.items()
                  if any(isinstance(item, dict) and item.get("name") == queue for item in queues or []))
