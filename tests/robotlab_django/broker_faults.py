"""The broker's Redis restarts while a run is in flight: the run completes, the node goes on (issue 25, item 7).

``python -m tests.robotlab_django.broker_faults --workdir DIR`` is a driver process for
``test_broker_faults.py``, built on :mod:`tests.robotlab_django.faults`: it starts a private
``redis-server`` that is the Celery broker, the result backend and the channel layer at once (as a site
with one ``REDIS_URL`` has it), a prefork worker and a streaming run. Once the run streams, it kills that
Redis (``SIGKILL``: the worker's message is unacked) and starts it again, empty, on the same port, then
sends a second run. It prints as one JSON line the transport the node connected with, whether the node stayed
up, the run's facts and the second run's; when the node exited, the driver starts it again, as a supervisor
would, for the second run. With Celery 5.7.0, kombu 5.7.0 and kombu's own Redis transport the node logged
``Restoring 1 unacknowledged message(s)``, then ``Unrecoverable error: AttributeError("'NoneType' object has
no attribute 'hostname'")``, and exited; :mod:`robotlab_django.workers.redis_broker` (the tests' transport) says why
and keeps it up.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sys
import uuid
from pathlib import Path
from typing import Any

from tests.robotlab_django.faults import (
    WAIT,
    Processes,
    _facts,
    _finished,
    _row,
    _saved_deltas,
    _setup,
    free_port,
    wait_for,
)


def broker_restart(processes: Processes, port: int) -> dict[str, Any]:
    """Restart the broker's Redis mid-run; then send a second run to the same worker."""
    from django.db import transaction

    import tests.robotlab_django.fault_celery  # noqa: F401  (tasks are sent through its broker)
    from robotlab_django import services
    from robotlab_django.runs import executor

    user, _session = _setup()
    queue = f"robotlab-broker-{uuid.uuid4().hex[:8]}"
    # a worker as a site runs it: gossip, mingle and heartbeats on (they use the broker too)
    argv = [sys.executable, "-m", "celery", "-A", "tests.robotlab_django.fault_celery", "worker", "--pool=prefork",
            "-c", "2", "-Q", queue, "-l", "info", "-n", f"{queue}@%h"]
    worker = processes.start("worker", argv)
    with transaction.atomic():
        victim = services.start_run(services.get_thread(None, user=user), "echo", "Go")
        executor.enqueue(victim, queue=queue)
    wait_for(lambda: str(_row(victim.pk).status) == "running" and _saved_deltas(victim.pk) >= 2,
             "the run to be running with text deltas saved")
    redis = processes.by_name["redis"]
    os.killpg(redis.pid, signal.SIGKILL)
    redis.wait(timeout=WAIT)
    deltas_at_restart = _saved_deltas(victim.pk)
    processes.redis(port)
    wait_for(lambda: _finished(victim.pk), "the run to finish after the restart", timeout=2 * WAIT)
    with transaction.atomic():
        after = services.start_run(services.get_thread(None, user=user), "echo", "Go")
        executor.enqueue(after, queue=queue)
    wait_for(lambda: _finished(after.pk) or worker.poll() is not None, "a run sent after the restart",
             timeout=2 * WAIT)
    survived = worker.poll() is None
    if not survived:  # what a supervisor does: start the node again
        processes.start("worker-restarted", argv)
        wait_for(lambda: _finished(after.pk), "a run sent after the restart, on the restarted node", timeout=2 * WAIT)
    log = (processes.workdir / "worker.log").read_text(errors="replace")
    connected = re.search(r"Connected to (\S+?)://", log)
    return {"deltas_at_restart": deltas_at_restart, "worker_alive": survived,
            "transport": connected.group(1) if connected else None,
            "unrecoverable": "Unrecoverable error" in log, "run": _facts(victim.pk), "second": _facts(after.pk)}


def main() -> int:
    """Run the scenario and print its facts as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, required=True)
    args = parser.parse_args()
    port = free_port()
    os.environ["ROBOTLAB_TEST_BROKER_URL"] = f"redis://127.0.0.1:{port}/0"
    os.environ["ROBOTLAB_TEST_REDIS_URL"] = f"redis://127.0.0.1:{port}/1"
    import django

    django.setup()
    processes = Processes(args.workdir, dict(os.environ))
    try:
        processes.redis(port)
        facts = broker_restart(processes, port)
    finally:
        processes.stop_all()
    print(json.dumps(facts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
