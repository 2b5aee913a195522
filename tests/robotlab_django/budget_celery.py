"""The budget scenarios' Celery app: the fault tests' app, with ``ROBOTLAB["BUDGETS"]`` from the environment.

``ROBOTLAB_TEST_BUDGETS`` holds the setting as JSON, ``ROBOTLAB_TEST_TASK_QUEUE`` the queue jobs go to (see
tests/robotlab_django/budget_workers.py).

The broker's ``visibility_timeout`` and ``ROBOTLAB["RUN_LEASE"]`` are long again (the fault tests' are 20 s and
15 s, to redeliver a lost node's run in seconds). No scenario here loses a node: the ``kill`` scenario kills a pool
child, whose run Celery retries at once (the claim names a process that is gone), without the lease. With the
short ones, a job that outlived them on a loaded machine (a call of about half a second took 20 to 160 s on two
busy cores) was delivered again while it ran, and the redelivery took the row over, its lease run out: the task
ran twice at once, sending its call twice (the model was paid for more than the rows record) or replaying it.
"""

from __future__ import annotations

import json
import os

from django.conf import settings

from tests.robotlab_django.fault_celery import app

__all__ = ["RUN_LEASE", "VISIBILITY_TIMEOUT", "app"]

#: Seconds before an unacknowledged job is delivered again, and seconds a run may be ``running`` before a redelivery
#: takes it over: above any job of the scenarios, however slowed (the driver waits 240 s for a whole turn).
VISIBILITY_TIMEOUT, RUN_LEASE = 3600.0, 900.0

settings.ROBOTLAB = {**settings.ROBOTLAB, "BUDGETS": json.loads(os.environ.get("ROBOTLAB_TEST_BUDGETS") or "{}"),
                     "TASK_QUEUE": os.environ.get("ROBOTLAB_TEST_TASK_QUEUE") or "default", "RUN_LEASE": RUN_LEASE}
app.conf.broker_transport_options = {**app.conf.broker_transport_options, "visibility_timeout": VISIBILITY_TIMEOUT}
app.conf.result_backend_transport_options = {"visibility_timeout": VISIBILITY_TIMEOUT}
app.conf.visibility_timeout = VISIBILITY_TIMEOUT
