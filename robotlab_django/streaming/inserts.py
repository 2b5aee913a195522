"""One batch of a run's events written: one ``INSERT ... RETURNING``, and on SQLite one writer at a time.

:func:`insert_rows` is how :func:`robotlab_django.streaming.event_stream.persist_events` stores a batch.
"""

from __future__ import annotations

import threading
from contextlib import AbstractContextManager, nullcontext
from typing import TypeVar

from django.db import connections, router
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import AutoField, Model

__all__ = ["insert_rows"]

M = TypeVar("M", bound=Model)


def insert_rows(rows: list[M]) -> list[M]:
    """Insert ``rows`` (new instances of one model, primary keys from the database) and set their keys.

    One ``INSERT ... RETURNING`` statement, atomic by itself, so no transaction of its own is opened around it (a
    batch is the common write of a run: ``BEGIN`` and ``COMMIT`` would triple its round trips), written here: each
    value prepared by its field as ``bulk_create`` would, without building a query for it. ``bulk_create`` when the
    database returns no keys from a bulk insert or the rows do not fit in one statement.
    """
    model = type(rows[0])
    meta = model._meta
    using = router.db_for_write(model)
    connection = connections[using]
    fields = [field for field in meta.concrete_fields if not field.generated and not isinstance(field, AutoField)]
    if not connection.features.can_return_rows_from_bulk_insert or \
            connection.ops.bulk_batch_size(fields, rows) < len(rows):
        return list(model._base_manager.db_manager(using).bulk_create(rows))
    quote = connection.ops.quote_name
    columns = ", ".join(quote(str(field.column)) for field in fields)
    values = ", ".join(["(" + ", ".join(["%s"] * len(fields)) + ")"] * len(rows))
    params = [field.get_db_prep_save(field.pre_save(row, True), connection) for row in rows for field in fields]
    with _one_writer(connection), connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO {quote(meta.db_table)} ({columns}) VALUES {values} "  # noqa: S608 - names quoted
                       f"RETURNING {quote(str(meta.pk.column))}", params)
        keys = [key for (key,) in cursor.fetchall()]
    for row, key in zip(rows, keys, strict=True):
        row.pk, row._state.adding, row._state.db = key, False, using
    return rows


_writers: dict[str, threading.Lock] = {}


def _one_writer(connection: BaseDatabaseWrapper) -> AbstractContextManager[object]:
    """On SQLite, outside a transaction: this process's batches written one at a time, in turn.

    SQLite takes one writer at a time, and a connection that finds the file locked sleeps in its busy handler
    in growing steps (up to 100 ms each) however soon the lock is free: 30 streaming runs in one worker then held
    batches up to 740 ms (``benchmarks/streaming.py --clients 30``). Waiting on a lock of this process instead
    wakes the next writer as soon as the last one is done. A connection inside a transaction skips it (it may hold
    the file's lock already, and must not wait on a writer that waits on it); other databases take concurrent
    inserts.
    """
    if connection.vendor != "sqlite" or connection.in_atomic_block:
        return nullcontext()
    return _writers.setdefault(connection.alias, threading.Lock())
