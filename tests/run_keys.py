"""The keys a test run leaves on the shared Redis, removed at its end (tests/conftest.py)."""

from __future__ import annotations


def remove_run_keys(prefix: str, host: str = "127.0.0.1", port: int = 6379) -> int:
    """Delete the keys starting with ``prefix`` (one run's: no other run's name starts so) in databases 0-15."""
    try:
        import redis
    except ImportError:
        return 0
    removed = 0
    for database in range(16):
        client = redis.Redis(host=host, port=port, db=database, socket_timeout=5, socket_connect_timeout=2)
        try:
            keys = list(client.scan_iter(match=f"{prefix}*", count=1000))
            removed += client.delete(*keys) if keys else 0
        except redis.RedisError:
            return removed  # no Redis here (or it went away): nothing to tidy
        finally:
            client.close()
    return removed
