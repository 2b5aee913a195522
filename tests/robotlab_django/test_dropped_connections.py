"""A PostgreSQL connection the server dropped (a restart, a failover, ``pg_terminate_backend``) costs no request.

Issue 25 item 12. The drop tests run on PostgreSQL only (``ROBOTLAB_TEST_DB=postgres``): each terminates a
backend of the test database from a connection of its own and shows that the next frame or request still gets
its answer.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import psycopg
import pytest
from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from django.db import close_old_connections, connection, connections
from django.test import Client
from psycopg_pool import ConnectionPool

from robotlab_django import checks, services
from robotlab_django.chat.consumers import DATABASE_DOWN
from tests.robotlab_django.chat.test_consumers import _login, _socket
from tests.robotlab_django.chat.test_views import URLCONF

pytestmark = pytest.mark.django_db(transaction=True)


def _terminate(pid: int) -> None:
    """End the backend ``pid`` as an administrator would, from a connection of this test's own."""
    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    params.pop("context", None)
    with psycopg.connect(**params, autocommit=True) as admin:
        assert admin.execute("SELECT pg_terminate_backend(%s)", [pid]).fetchone() == (True,)


def _backend_pid() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return int(cursor.fetchone()[0])


@pytest.fixture
def persistent() -> Iterator[dict[str, Any]]:
    """Connections kept between requests (``CONN_MAX_AGE = None``), without health checks unless a test sets them."""
    database = connections.settings["default"]  # every thread's wrapper reads this dict
    saved = database.get("CONN_MAX_AGE"), database.get("CONN_HEALTH_CHECKS")
    database.update(CONN_MAX_AGE=None, CONN_HEALTH_CHECKS=False)
    try:
        yield database
    finally:
        database.update(CONN_MAX_AGE=saved[0], CONN_HEALTH_CHECKS=saved[1])


@pytest.fixture
async def close_connections() -> AsyncIterator[None]:
    yield
    await sync_to_async(connections.close_all)()


@pytest.mark.usefixtures("postgres")
async def test_a_resume_after_the_consumers_connection_was_dropped_still_replays(
        persistent: dict[str, Any], close_connections: None) -> None:
    """The consumer reads again on a fresh connection; before, the socket closed with 1011."""
    user, session = await sync_to_async(_login)("ada")
    thread = await sync_to_async(services.get_thread)(None, user=user)
    socket = await _socket(thread.pk, session)
    assert (await socket.connect())[0] is True
    await socket.send_json_to({"type": "resume", "after": 0})
    assert await socket.receive_json_from(timeout=5) == {"type": "replayed", "cursor": 0}
    await sync_to_async(_terminate)(await database_sync_to_async(_backend_pid)())
    await socket.send_json_to({"type": "resume", "after": 0})
    assert await socket.receive_json_from(timeout=5) == {"type": "replayed", "cursor": 0}
    # a frame that writes is not sent twice: it gets an error frame, and the socket stays open
    await sync_to_async(_terminate)(await database_sync_to_async(_backend_pid)())
    await socket.send_json_to({"type": "message", "text": "still here?"})
    assert await socket.receive_json_from(timeout=5) == {"type": "error", "error": DATABASE_DOWN}
    await socket.send_json_to({"type": "resume", "after": 0})
    assert await socket.receive_json_from(timeout=5) == {"type": "replayed", "cursor": 0}
    await socket.disconnect()


@pytest.mark.usefixtures("postgres")
def test_with_health_checks_the_next_request_after_a_drop_succeeds(persistent: dict[str, Any], settings: Any) -> None:
    """What ``robotlab.W007`` asks for: with ``CONN_HEALTH_CHECKS`` a dropped connection is replaced, not a 500."""
    settings.ROOT_URLCONF = URLCONF
    user, _session = _login("ada")
    client = Client(raise_request_exception=False)
    client.force_login(user)
    assert client.get("/robotlab/").status_code == 200
    _terminate(_backend_pid())
    persistent["CONN_HEALTH_CHECKS"] = True
    connection.health_check_enabled = True  # read when the connection was made
    close_old_connections()  # what request_started does (Django's test client leaves it out)
    assert client.get("/robotlab/").status_code == 200


def test_w007_names_reused_connections_that_nothing_checks() -> None:
    base = {"ENGINE": "django.db.backends.postgresql", "NAME": "site"}
    assert checks.database_warnings({
        "checked_pool": {**base, "OPTIONS": {"pool": {"max_size": 4}}, "CONN_HEALTH_CHECKS": True},
        "health_checked": {**base, "CONN_MAX_AGE": 60, "CONN_HEALTH_CHECKS": True},
        "per_request": {**base, "CONN_MAX_AGE": 0},
        "sqlite": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:", "CONN_MAX_AGE": None},
    }) == []
    pool, own_check, persistent = checks.database_warnings({
        "bare_pool": {**base, "OPTIONS": {"pool": True}},
        "own_check": {**base, "OPTIONS": {"pool": {"check": ConnectionPool.check_connection}}},
        "persistent": {**base, "CONN_MAX_AGE": None}})
    assert (pool.id, own_check.id, persistent.id) == ("robotlab.W007",) * 3
    assert "DATABASES['bare_pool'] uses psycopg's pool without CONN_HEALTH_CHECKS" in pool.msg
    assert "ConnectionPool.check_connection" in str(pool.hint) and "CONN_HEALTH_CHECKS" in str(pool.hint)
    assert "DATABASES['own_check'] gives psycopg's pool a 'check' of its own" in own_check.msg
    assert "DATABASES['persistent']" in persistent.msg and "CONN_HEALTH_CHECKS" in str(persistent.hint)
