"""A worker process racing others for the last tokens of a daily budget (see test_budgets.py)."""

from __future__ import annotations

import os
from typing import Any


def race(barrier: Any, results: Any, budgets_setting: dict[str, Any], user_id: int, tokens_per_run: int) -> None:
    """Reserve and reconcile runs of ``tokens_per_run`` until the user's budget refuses; put the count in ``results``.

    Args:
        barrier: Released when every racer is ready, so they start together.
        results: A queue receiving ``(pid, runs)`` or ``(pid, error text)``.
        budgets_setting: ``ROBOTLAB["BUDGETS"]``.
        user_id: The user whose budget is raced for.
        tokens_per_run: What each run uses.
    """
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.robotlab_django.settings")
    import django
    from django.conf import settings

    django.setup()
    settings.ROBOTLAB = {"BUDGETS": budgets_setting}
    from robotlab.errors import BudgetExceeded
    from robotlab_django.accounting import budgets

    runs = 0
    try:
        barrier.wait(timeout=60)
        while True:
            try:
                reservation = budgets.reserve_run(user_id, "echo")
            except BudgetExceeded:
                break
            budgets.reconcile_run(reservation, tokens=tokens_per_run, cost=0)
            runs += 1
    except Exception as exc:  # reported to the test
        results.put((os.getpid(), f"{type(exc).__name__}: {exc}"))
        return
    results.put((os.getpid(), runs))
