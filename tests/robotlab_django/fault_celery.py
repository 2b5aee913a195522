"""The fault tests' Celery app: the tests' app with a short Redis ``visibility_timeout`` and run lease.

A message a dead worker left unacked goes back to the queue once ``visibility_timeout`` seconds
have passed (kombu looks every second here, not every 100 s), so a node loss is redelivered in
seconds, not in an hour;
``ROBOTLAB["RUN_LEASE"]`` stays below it and above the longest run, as in production.
"""

from __future__ import annotations

import os

from django.conf import settings

from tests.robotlab_django.celery_app import app

__all__ = ["RUN_LEASE", "VISIBILITY_TIMEOUT", "app"]

#: Seconds before a message of a lost worker is delivered again.
VISIBILITY_TIMEOUT = 20.0
#: Seconds a run may be ``running`` before a redelivery takes it over.
RUN_LEASE = 15.0

# the step-kill scenario's robot (tests/robotlab_django/faults.py), the side-effect scenarios' robots
# (tests/robotlab_django/effect_faults.py), and their switch for checkpoints
settings.ROBOTLAB = {**settings.ROBOTLAB, "RUN_LEASE": RUN_LEASE,
                     "ROBOTS": {"notary": "tests.robotlab_django.faults.build_notary",
                                "mailer": "tests.robotlab_django.effect_faults.build_mailer",
                                "notekeeper": "tests.robotlab_django.effect_faults.build_notekeeper"},
                     "CHECKPOINT_STEPS": os.environ.get("ROBOTLAB_FAULT_CHECKPOINTS", "1") != "0"}

# ROBOTLAB_TEST_BROKER_URL: a broker apart from the channel layer (the Redis-restart test kills the layer's)
app.conf.broker_url = os.environ.get("ROBOTLAB_TEST_BROKER_URL") or app.conf.broker_url
app.conf.result_backend = os.environ.get("ROBOTLAB_TEST_BROKER_URL") or app.conf.result_backend
# the run's global_keyprefix stays: another run's fault worker on this Redis must not take this run's messages
app.conf.broker_transport_options = {**settings.CELERY_BROKER_TRANSPORT_OPTIONS,
                                     "visibility_timeout": VISIBILITY_TIMEOUT, "unacked_restore_interval": 1,
                                     "unacked_restore_throttle": 1}
app.conf.result_backend_transport_options = {"visibility_timeout": VISIBILITY_TIMEOUT}
app.conf.visibility_timeout = VISIBILITY_TIMEOUT
