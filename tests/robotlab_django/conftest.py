"""Fixtures of the robotlab_django tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.db import connection

from robotlab.testing import FakeLLM
from robotlab_django.registry import registry
from tests.robotlab_django.pg import postgres_unreachable


@pytest.fixture
def scripted_llm(settings: Any) -> Callable[..., FakeLLM]:
    """``scripted_llm(step, ...)``: a FakeLLM that every app-built robot uses (``ROBOTLAB["LLM"]``)."""

    def install(*steps: Any) -> FakeLLM:
        llm = FakeLLM(steps)
        settings.ROBOTLAB = {**settings.ROBOTLAB, "LLM": lambda: llm}
        return llm

    return install


@pytest.fixture
def clean_registry() -> Iterator[None]:
    """Restore the registry's robots and networks after the test."""
    saved, networks = dict(registry._robots), dict(registry._networks)
    try:
        yield
    finally:
        registry._robots.clear()
        registry._robots.update(saved)
        registry._networks.clear()
        registry._networks.update(networks)


@pytest.fixture
def postgres() -> None:
    """Skip unless the test database is PostgreSQL (``ROBOTLAB_TEST_DB=postgres``, which CI runs)."""
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL row locks: runs on PostgreSQL through "
                    "test_the_postgres_tests_pass_on_postgres and the ROBOTLAB_TEST_DB=postgres pass")


@pytest.fixture(scope="session")
def _robotlab_database_reachable() -> None:
    from django.conf import settings

    database = settings.DATABASES["default"]
    if "postgresql" in database["ENGINE"]:
        reason = postgres_unreachable(database)
        if reason:
            pytest.skip(reason)


@pytest.fixture(scope="session")
def django_db_setup(_robotlab_database_reachable: None, django_db_setup: None) -> None:
    """pytest-django's database setup, skipped with the reason when the PostgreSQL server is down."""
