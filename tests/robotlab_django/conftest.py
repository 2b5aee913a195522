"""Fixtures of the robotlab_django tests."""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db import connection

from robotlab.testing import FakeLLM
from robotlab_django.registry import registry
from robotlab_django.tracing import processor
from tests.robotlab.spans import recording
from tests.robotlab_django.pg import postgres_unreachable

#: The batching of the tests' span processor: nothing is written until a test flushes (in its thread and transaction).
NEVER_WRITTEN = {"schedule_delay_millis": 3_600_000, "max_queue_size": 100_000, "max_export_batch_size": 100_000}


@pytest.fixture(scope="session", autouse=True)
def _span_processor() -> Iterator[None]:
    """One OpenTelemetry SDK tracer provider for the run (tests/robotlab/spans.py's), with the app's span processor.

    The tests' settings keep no spans (``TRACES`` off), but a test that sets a ``ROBOTLAB`` of its own has them on:
    set up here first, the processor never writes in a thread of its own (no write beside a test's transaction), and
    no test can make the app set the provider the core's span tests need. What is still queued at the end goes.
    """
    with recording():
        pass
    found = processor.install(**NEVER_WRITTEN)
    yield
    if found is not None:
        found.marks.clear()  # spans of rolled-back tests: not written at exit


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


@pytest.fixture
def token(settings: Any) -> str:
    """An API token of the user ``ada``, with the URLconf serving ``/acp/`` and ``/a2a/``."""
    settings.ROOT_URLCONF = "tests.robotlab_django.acp_urls"
    get_user_model().objects.create_user("ada", password="pw")
    out = io.StringIO()
    call_command("robotlab_token", "ada", stdout=out)
    return out.getvalue().strip().splitlines()[-1]
