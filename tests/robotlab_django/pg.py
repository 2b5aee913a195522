"""Reaching the PostgreSQL server (shared by the conftest and the concurrency tests)."""

from __future__ import annotations

from typing import Any


def postgres_unreachable(database: dict[str, Any]) -> str | None:
    """Why the PostgreSQL server of ``database`` (a ``DATABASES`` entry) cannot be reached, or ``None``."""
    import psycopg

    try:
        psycopg.connect(host=database.get("HOST") or "127.0.0.1", port=int(database.get("PORT") or 5432),
                        user=database.get("USER") or None, password=database.get("PASSWORD") or None,
                        dbname="postgres", connect_timeout=3).close()
    except psycopg.Error as exc:
        return f"PostgreSQL at {database.get('HOST')}:{database.get('PORT')} cannot be reached: {exc}"
    return None
