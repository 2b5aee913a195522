"""What users read of a model provider's failure comes from its kind (``InferenceError.kind``), never its text.

Each kind is raised as the transports raise it (:func:`robotlab.llm.guard.error_for` on an exception of that
kind), run through the app, and read back from the stored row, its stored ``run.failed`` event, the page's JSON
and the protocols' run objects.
"""

from __future__ import annotations

from typing import Any

import pytest

from robotlab.errors import PROVIDER_ERROR_KINDS, InferenceError, ProviderErrorKind
from robotlab.llm.guard import ERROR_KINDS, error_for
from robotlab.testing import raise_
from robotlab_django import services
from robotlab_django.acp.wire import run_object
from robotlab_django.chat.views import result_summary
from robotlab_django.models import RunEvent, Status
from robotlab_django.runs.user_errors import (
    GENERIC_PROVIDER_MESSAGE,
    KIND_MESSAGES,
    PROVIDER_MESSAGES,
    public_error,
    public_events,
)

SECRET = "Rate limit reached for org-SECRET on gpt-4o"


def _provider_failure(kind: ProviderErrorKind) -> InferenceError:
    """The ``InferenceError`` a transport raises for a failure of ``kind`` (a class :data:`ERROR_KINDS` names)."""
    name = next((name for name, listed in ERROR_KINDS.items() if listed == kind), "SomethingOdd")
    error = type(name, (Exception,), {})(SECRET)
    raised = error_for(error, "openai/gpt-4o", "openai")
    assert raised.kind == kind, raised.kind
    return raised


def test_every_kind_has_a_message_and_every_listed_class_its_kinds() -> None:
    assert set(KIND_MESSAGES) == set(PROVIDER_ERROR_KINDS)
    assert KIND_MESSAGES["unknown"] == GENERIC_PROVIDER_MESSAGE
    assert {name: KIND_MESSAGES[kind] for name, kind in ERROR_KINDS.items()} == PROVIDER_MESSAGES


@pytest.mark.parametrize("kind", PROVIDER_ERROR_KINDS)
def test_the_kind_words_the_message_whatever_the_text(kind: ProviderErrorKind) -> None:
    assert public_error("InferenceError", "anything at all", kind) == ("", KIND_MESSAGES[kind])
    failed = {"kind": "run.failed", "error": SECRET, "error_type": "InferenceError", "error_kind": kind}
    events = public_events([failed])
    assert events == [{"kind": "run.failed", "error": KIND_MESSAGES[kind], "error_type": "", "error_kind": kind}]


def test_a_kind_of_a_newer_version_reads_as_unknown_and_no_kind_shows_the_apps_own_text() -> None:
    assert public_error("InferenceError", SECRET, "solar_flare") == ("", GENERIC_PROVIDER_MESSAGE)
    assert public_error("InferenceError", "Token budget exceeded", "") == ("InferenceError", "Token budget exceeded")
    assert public_error("InferenceError", "provider down", None) == ("InferenceError", "provider down")


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("kind", PROVIDER_ERROR_KINDS)
def test_a_failed_run_stores_its_kind_and_users_read_its_message(scripted_llm: Any, kind: ProviderErrorKind) -> None:
    scripted_llm(raise_(_provider_failure(kind)))
    row = services.run_robot(None, "echo", "hi", raise_errors=False)
    assert (row.status, row.error_type, row.error_kind) == (Status.FAILED, "InferenceError", kind)
    assert SECRET in row.error  # staff see it all
    summary = result_summary(row)
    assert (summary["error_type"], summary["error"]) == ("", KIND_MESSAGES[kind])
    assert run_object(row, "session")["error"]["message"] == KIND_MESSAGES[kind]
    failed = RunEvent.objects.get(result_id=row.pk, kind="run.failed")
    assert (failed.data["error_type"], failed.data["error_kind"]) == ("InferenceError", kind)


@pytest.mark.django_db(transaction=True)
def test_an_error_that_is_not_the_providers_stores_no_kind(scripted_llm: Any) -> None:
    scripted_llm(raise_(InferenceError("provider down")))
    row = services.run_robot(None, "echo", "hi", raise_errors=False)
    assert (row.error_type, row.error_kind, row.error) == ("InferenceError", "", "provider down")
    assert (result_summary(row)["error_type"], result_summary(row)["error"]) == ("InferenceError", "provider down")
    assert "error_kind" not in RunEvent.objects.get(result_id=row.pk, kind="run.failed").data
