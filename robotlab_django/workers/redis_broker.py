"""kombu's Redis transport, with the one guard a worker needs to survive a restart of the broker's Redis.

Set it as the Celery transport of a ``redis://`` (or ``rediss://``) broker::

    CELERY_BROKER_URL = "redis://127.0.0.1:6379/0"
    CELERY_BROKER_TRANSPORT = "robotlab_django.workers.redis_broker:Transport"

Why: with Celery 5.7.0 and kombu 5.7.0, a worker node whose broker Redis goes away while the node holds an
unacknowledged message (any run in flight: robotlab's task acknowledges late) logged ``Restoring 1
unacknowledged message(s)``, then ``Unrecoverable error: AttributeError("'NoneType' object has no attribute
'hostname'")``, and exited. The path, in the versions named:

1. ``celery.worker.consumer.consumer.Consumer.on_connection_error_after_connected`` calls
   ``connection.collect()``. The task channel's first ``close()`` raises a ``ConnectionError`` before it
   marks itself closed (it reads the pending ``BRPOP`` reply from the dead socket) and ``collect()`` swallows
   it; the transport's ``close_connection`` then stops at the first channel whose close fails too (a fanout
   channel's ``queue_delete``) before it reaches the task channel again; ``collect()`` then drops the
   transport's client (``Connection._do_close_transport``: ``transport.client = None``) with that channel
   still open.
2. Celery 5.7 then closes the broken connection as well (``ignore_errors(connection, connection.close)``,
   new in 5.7): ``Connection._do_close_self`` closes the same default channel again; its QoS restores the
   unacked message (``restore_unacked_once``), which needs a Redis client; the channel's pool was
   disconnected, so it builds a new one from ``Channel._connparams``, which reads
   ``self.connection.client.hostname`` with ``self.connection.client`` ``None`` (kombu/transport/redis.py,
   ``_connparams``). ``ignore_errors`` ignores only connection and channel errors, so the
   ``AttributeError`` reaches the worker's blueprint and the node exits.

The same ``_connparams`` read of a dropped client was reported as celery/kombu#582 ("Error on restarting
Gossip", kombu 3.0); no report of the Celery 5.7 path was found upstream.

The guard: :meth:`Channel._connparams` raises redis-py's ``ConnectionError`` ("the connection was closed")
when the channel's transport no longer has a client. That is what the failure is: this channel cannot reach
the broker any more, and every caller on this path already treats a connection error as such
(``maybe_close_channel`` and ``ignore_errors`` swallow it, the consumer reconnects with a fresh connection and
fresh channels, and a late ``ack`` of the lost message is logged, not raised). Nothing is lost by not restoring
from this channel: the message is still in the broker's ``unacked`` hash when Redis kept its data, and kombu
puts it back on the queue once ``visibility_timeout`` has passed; when Redis restarted empty, the run's row is
the truth (a run in flight completes in its pool process). Everything else is kombu's own Redis transport.
"""

from __future__ import annotations

from typing import Any

from kombu.transport import redis as kombu_redis
from redis.exceptions import ConnectionError as RedisConnectionError

__all__ = ["Channel", "Transport"]


class Channel(kombu_redis.Channel):
    """kombu's Redis channel; one that outlived its broker connection fails with a connection error."""

    def _connparams(self, asynchronous: bool = False) -> dict[str, Any]:
        """The Redis connection parameters, or ``ConnectionError`` once the broker connection was closed.

        Args:
            asynchronous: As kombu's: the parameters of the event loop's pool.

        Raises:
            redis.exceptions.ConnectionError: The channel's transport was closed (its client is ``None``).
        """
        transport = self.connection
        if transport is None or transport.client is None:
            raise RedisConnectionError("The broker connection of this channel was closed; it cannot reach Redis.")
        params: dict[str, Any] = super()._connparams(asynchronous=asynchronous)  # type: ignore[misc]  # not in kombu-stubs
        return params


class Transport(kombu_redis.Transport):
    """kombu's Redis transport with :class:`Channel` (see the module's docs)."""

    Channel = Channel
