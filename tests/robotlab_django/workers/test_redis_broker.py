"""``robotlab_django.workers.redis_broker``: a channel that outlived its broker connection fails as a connection error.

The sequence is Celery 5.7's on a broker loss (issue 25, item 7): ``Connection.collect()`` drops the
transport's client while the task channel, holding an unacked message, is still open, and
``Connection.close()`` then closes that channel, whose QoS restores the message. The whole worker scenario is
``test_broker_faults.py``; here it runs on one kombu connection to the tests' Redis, under this run's key prefix.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
import redis
from django.conf import settings
from kombu import Connection, Exchange, Queue
from kombu.common import ignore_errors
from kombu.transport import redis as kombu_redis

from robotlab_django.workers.redis_broker import Transport


@pytest.fixture
def prefix() -> Iterator[str]:
    """A key prefix of this test's own on the tests' broker Redis (skipped when it does not answer)."""
    client = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    try:
        client.ping()
    except redis.ConnectionError:
        pytest.skip(f"no Redis at {settings.CELERY_BROKER_URL}")
    own = f"{settings.CELERY_BROKER_TRANSPORT_OPTIONS['global_keyprefix']}redis-broker-{uuid.uuid4().hex[:8]}:"
    yield own
    for key in client.scan_iter(match=f"{own}*"):
        client.delete(key)
    client.close()


def _lose_the_transport_with_a_message_unacked(transport: type, prefix: str) -> Connection:
    """A connection whose default channel holds an unacked message when ``collect()`` drops its client."""
    connection = Connection(settings.CELERY_BROKER_URL, transport=transport,
                            transport_options={"global_keyprefix": prefix})
    queue = Queue(f"jobs-{uuid.uuid4().hex[:8]}", Exchange("jobs", type="direct"), routing_key="jobs")
    connection.Producer().publish({"job": 1}, exchange=queue.exchange, routing_key="jobs", declare=[queue])
    message = queue(connection.default_channel).get(no_ack=False)
    assert message is not None and not message.acknowledged
    connection._do_close_transport()  # the last step of Connection.collect(): transport.client = None
    return connection


def test_closing_a_channel_whose_transport_was_collected_is_a_connection_error(prefix: str) -> None:
    connection = _lose_the_transport_with_a_message_unacked(Transport, prefix)
    ignore_errors(connection, connection.close)  # what Celery 5.7 does after collect(): no AttributeError
    unacked = redis.Redis.from_url(settings.CELERY_BROKER_URL).hlen(f"{prefix}unacked")
    assert unacked == 1  # still in the broker: redelivered after visibility_timeout, as a lost node's message


def test_kombus_own_redis_transport_raises_attribute_error_there(prefix: str) -> None:
    """Why the guard exists: kombu's transport reads ``client.hostname`` of ``None`` (remove it once kombu doesn't)."""
    connection = _lose_the_transport_with_a_message_unacked(kombu_redis.Transport, prefix)
    with pytest.raises(AttributeError, match="hostname"):
        ignore_errors(connection, connection.close)


def test_the_tests_celery_app_connects_with_the_guarded_transport() -> None:
    from tests.robotlab_django.celery_app import app

    with app.connection_for_write() as connection:
        assert isinstance(connection.transport, Transport)
