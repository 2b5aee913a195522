"""Fault scenarios on the real stack, run as a driver process by test_faults.py.

``python -m tests.robotlab_django.faults <scenario>`` sets Django up against the shared database
named by the environment (a SQLite file, or a PostgreSQL database: see :func:`database_env`),
starts what the scenario needs (a Celery worker, daphne, a private ``redis-server``), breaks one
thing mid-stream and prints what it observed as one JSON line; the test asserts on it. Scenarios:

* ``worker-kill --mode child``: SIGKILL the worker's pool child mid-run; its parent requeues the
  message (``reject_on_worker_lost``) and a new child runs it again.
* ``worker-kill --mode node``: SIGKILL the whole worker mid-run, start a new one; the broker
  redelivers the unacked message after its ``visibility_timeout`` (20 s here: fault_celery.py).
* ``step-kill``: the ``notary`` robot calls its tool (a side effect: a line in a file), then streams its
  answer from a fake OpenAI-compatible server in this process; SIGKILL the pool child mid-answer. The
  facts count the requests the server got and the tool's runs across both attempts: with checkpoints
  (``ROBOTLAB["CHECKPOINT_STEPS"]``) only the answer in flight is sent again (``--no-checkpoints``:
  everything is).
* ``poison-run``: SIGKILL the pool child on every attempt; after ``TASK_MAX_ATTEMPTS`` the run is
  marked failed instead of looping.
* ``socket-drop``: a websocket client drops its connection several times mid-stream and resumes
  after its last cursor.
* ``redis-restart``: the channel layer's Redis (a private server) is killed mid-stream and started
  again on the same port; the run, in a Celery worker whose broker is the shared Redis, keeps
  storing its events and the client resynchronises.
* ``redis-hang``: the channel layer's Redis is stopped (``SIGSTOP``, so it hangs instead of closing its
  sockets) mid-stream and continued later; the worker gives up on each send after
  ``STREAM_PUBLISH_TIMEOUT`` and keeps storing, and the connected client gets the lost batches from
  the rows without reconnecting.

The model is ``benchmarks.streaming.PacedLLM`` (``BENCH_TOKENS`` tokens at ``BENCH_RATE`` tokens/s).
The client (:class:`Watcher`) follows the protocol of ``robotlab.js``: it resumes after the last
``cursor`` it saw, drops events whose per-run ``seq`` it has seen, and starts a run's text again at
a second ``run.started`` of that run (the run was executed again after its worker was lost).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parents[2]
#: The Redis database of the broker and layer on the shared server (the worker test uses 15, B2 14).
REDIS_URL = "redis://127.0.0.1:6379/13"
#: Seconds any single wait of a scenario may take.
WAIT = 60.0
T = TypeVar("T")


# -- helpers shared by the test and the driver --------------------------------------------
def free_port() -> int:
    """A TCP port nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def reachable(host: str, port: int) -> bool:
    """Whether something accepts TCP connections on ``host:port``."""
    try:
        socket.create_connection((host, port), timeout=2).close()
    except OSError:
        return False
    return True


def wait_for(check: Callable[[], T], what: str, timeout: float = WAIT, interval: float = 0.05) -> T:
    """Poll ``check`` until it returns something truthy, and return that; ``TimeoutError`` naming ``what``."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"gave up after {timeout:g} s waiting for {what}")
        time.sleep(interval)


def database_env(workdir: Path) -> tuple[dict[str, str], Callable[[], None]]:
    """The environment naming a database every process can share, and a function that drops it.

    ``ROBOTLAB_TEST_DB=postgres`` gets a fresh PostgreSQL database ``robotlab_faults_<hex>`` on the
    server of tests/robotlab_django/settings.py; otherwise a SQLite file in ``workdir``.
    """
    if os.environ.get("ROBOTLAB_TEST_DB", "sqlite").strip().lower() not in {"postgres", "postgresql", "pg"}:
        return ({"ROBOTLAB_TEST_DB": "sqlite", "ROBOTLAB_TEST_SQLITE_PATH": str(workdir / "db.sqlite3")},
                lambda: None)
    import psycopg

    user = os.environ.get("PGUSER", "postgres")
    name = f"robotlab_faults_{uuid.uuid4().hex[:10]}"
    admin: dict[str, Any] = {"host": "127.0.0.1", "port": 5432, "user": user, "dbname": "postgres", "autocommit": True}
    with psycopg.connect(**admin) as connection:
        connection.execute(f'CREATE DATABASE "{name}"')

    def drop() -> None:
        with psycopg.connect(**admin) as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    return ({"ROBOTLAB_TEST_DB": "postgres",
             "ROBOTLAB_TEST_DATABASE_URL": f"postgres://{user}@127.0.0.1:5432/{name}"}, drop)


class Processes:
    """Subprocesses started by a scenario; :meth:`stop_all` ends every one still running."""

    def __init__(self, workdir: Path, env: dict[str, str]) -> None:
        self.workdir, self.env = workdir, env
        self.started: list[subprocess.Popen[bytes]] = []
        self.by_name: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, name: str, argv: list[str], env: dict[str, str] | None = None,
              pass_fds: tuple[int, ...] = ()) -> subprocess.Popen[bytes]:
        """Start ``argv`` with its output in ``<workdir>/<name>.log`` (``pass_fds``: descriptors it inherits)."""
        with (self.workdir / f"{name}.log").open("ab") as log:
            process = subprocess.Popen(argv, cwd=ROOT, env={**self.env, **(env or {})}, stdout=log,
                                       stderr=subprocess.STDOUT, start_new_session=True, pass_fds=pass_fds)
        self.started.append(process)
        self.by_name[name] = process
        return process

    def worker(self, queue: str, name: str = "worker") -> subprocess.Popen[bytes]:
        """A Celery worker with one prefork child on ``queue``."""
        return self.start(name, [sys.executable, "-m", "celery", "-A", "tests.robotlab_django.fault_celery",
                                 "worker", "--pool=prefork", "-c", "1", "-Q", queue, "-l", "info",
                                 "--without-heartbeat", "--without-gossip", "--without-mingle"])

    def daphne(self) -> int:
        """daphne serving tests/robotlab_django/asgi.py; returns its port.

        The socket is bound and listening here and handed to daphne (``--fd``), so no other process (another
        test run's server, a connection's source port) can take the port between choosing it and listening.
        """
        with socket.socket() as listener:
            listener.bind(("127.0.0.1", 0))
            listener.listen(128)
            port = int(listener.getsockname()[1])
            self.start("daphne", [sys.executable, "-m", "daphne", "--fd", str(listener.fileno()),
                                  "tests.robotlab_django.asgi:application"], pass_fds=(listener.fileno(),))
        wait_for(lambda: reachable("127.0.0.1", port), f"daphne on port {port}")
        return port

    def redis(self, port: int) -> subprocess.Popen[bytes]:
        """A private ``redis-server`` on ``port`` that keeps nothing on disk."""
        process = self.start("redis", ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                                       "--appendonly", "no", "--dir", str(self.workdir)])
        wait_for(lambda: reachable("127.0.0.1", port), f"redis-server on port {port}")
        return process

    def stop_all(self) -> None:
        """SIGTERM every process group still running, then SIGKILL what is left after 15 s."""
        for process in self.started:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in self.started:
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=15)


def children(pid: int) -> list[int]:
    """The process ids of ``pid``'s children (Linux ``/proc``)."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found.extend(int(child) for child in (task / "children").read_text().split())
    return found


# -- the client ----------------------------------------------------------------------------
class Watcher:
    """A websocket client of one thread, keeping each run's text the way ``robotlab.js`` does."""

    def __init__(self, port: int, thread_pk: int, session: str) -> None:
        self.url = f"ws://127.0.0.1:{port}/ws/robotlab/threads/{thread_pk}/"
        self.headers = {"Origin": "http://localhost", "Cookie": f"sessionid={session}"}
        self.cursor = 0
        self.seq: dict[str, int] = {}
        self.text: dict[str, str] = {}
        self.ended: set[str] = set()
        self.events = 0
        self.connects = 0
        self.resets = 0
        self.replayed = 0  # new events that came in a replay after a reconnect, not live
        self.healed = 0  # new events of live frames the consumer read from the rows (no t_emit): a lost batch
        self.live_after_reconnect = 0
        self._replaying = False

    def handle(self, event: dict[str, Any], healed: bool = False) -> None:
        """Apply one event: skip a seen ``seq``, restart the text at a repeated ``run.started``."""
        run, seq = event["run_id"], event["seq"]
        self.cursor = max(self.cursor, int(event.get("cursor") or 0))
        if seq <= self.seq.get(run, 0):
            return
        self.seq[run] = seq
        self.events += 1
        self.replayed += self._replaying
        self.healed += healed and not self._replaying
        self.live_after_reconnect += self.connects > 1 and not self._replaying
        if event["kind"] == "run.started" and run in self.text:
            self.text[run] = ""
            self.resets += 1
        elif event["kind"] == "text.delta":
            self.text[run] = self.text.get(run, "") + event["text"]
        elif event["kind"] == "stream.ended":
            self.ended.add(run)

    async def follow(self, http: Any, run_id: str, *, drop_after: int = 0, drops: int = 0,
                     missed: Callable[[int], bool] | None = None, timeout: float = WAIT) -> None:
        """Watch until ``run_id``'s ``stream.ended``, reconnecting (after the cursor) whenever the socket goes.

        ``drops`` times, the client cuts its own connection (no close frame) once it has received
        ``drop_after`` event frames on it (a replay is one frame; live batches come every ~50 ms),
        and stays away until ``missed(cursor)`` says events were stored after its cursor.
        """
        import aiohttp

        deadline = time.monotonic() + timeout
        delay = 0.1
        while run_id not in self.ended:
            if time.monotonic() > deadline:
                raise TimeoutError(f"run {run_id} did not end within {timeout:g} s (cursor {self.cursor})")
            try:
                socket_ = await http.ws_connect(f"{self.url}?after={self.cursor}", headers=self.headers,
                                                timeout=aiohttp.ClientWSTimeout(ws_close=2))
            except (aiohttp.ClientError, OSError):
                await asyncio.sleep(delay)  # backoff before the next attempt, as robotlab.js does
                delay = min(delay * 2, 1.0)
                continue
            self.connects += 1
            self._replaying = self.connects > 1
            delay = 0.1
            frames = 0
            try:
                while run_id not in self.ended:
                    if drops and frames >= drop_after:
                        drops -= 1
                        socket_.get_extra_info("socket").shutdown(socket.SHUT_RDWR)
                        if missed is not None:
                            await asyncio.to_thread(wait_for, functools.partial(missed, self.cursor),
                                                    "events stored after the cut")
                        break
                    frame = await socket_.receive(timeout=max(0.1, deadline - time.monotonic()))
                    if frame.type != aiohttp.WSMsgType.TEXT:
                        break  # closed by the server (or by the cut above)
                    data = json.loads(frame.data)
                    frames += data.get("type") == "events"
                    self._replaying = self._replaying and data.get("type") != "replayed"
                    for event in data.get("events", []) if data.get("type") == "events" else []:
                        self.handle(event, healed="t_emit" not in data)
            except (TimeoutError, aiohttp.ClientError, OSError):
                pass
            finally:
                await socket_.close()


# -- the driver ----------------------------------------------------------------------------
def _setup() -> tuple[Any, str]:
    """Migrate, and create a user with a logged-in session: ``(user, session id)``."""
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test import Client

    call_command("migrate", verbosity=0)
    user = get_user_model().objects.create_user(f"faults-{uuid.uuid4().hex[:6]}", password="pw")
    client = Client()
    client.force_login(user)
    return user, client.cookies["sessionid"].value


def _row(pk: int) -> Any:
    from robotlab_django.models import RobotResult

    return RobotResult.objects.get(pk=pk)


def _saved_deltas(pk: int) -> int:
    from robotlab_django.models import RunEvent

    return RunEvent.objects.filter(result_id=pk, kind="text.delta").count()


def _stored_after(pk: int, cursor: int) -> bool:
    from robotlab_django.models import RunEvent

    return RunEvent.objects.filter(result_id=pk, pk__gt=cursor).exists()


def _replayed_text(pk: int) -> str:
    """The run's text as a client replaying every stored event from cursor 0 ends with it."""
    from robotlab_django.models import RunEvent

    client = Watcher(0, 0, "")
    for row in RunEvent.objects.filter(result_id=pk).order_by("pk"):
        client.handle({**row.to_dict(), "cursor": row.pk})
    return "".join(client.text.values())


def _facts(pk: int) -> dict[str, Any]:
    from robotlab_django.models import RobotResult, RunEvent

    row = _row(pk)
    kinds = list(RunEvent.objects.filter(result_id=pk).order_by("pk").values_list("kind", flat=True))
    return {"status": str(row.status), "attempts": row.attempts, "reply": row.reply, "error": row.error,
            "error_type": row.error_type,
            "rows_on_thread": RobotResult.objects.filter(thread_id=row.thread_id).count(),
            "replayed_text": _replayed_text(pk), "kinds": kinds}


def _finished(pk: int) -> bool:
    return str(_row(pk).status) in {"completed", "failed"}


def _ended(pk: int) -> bool:
    """The row is stored as finished and so is its stream's end (stored after the row: ``run.completed`` is held)."""
    return _finished(pk) and "stream.ended" in _facts(pk)["kinds"]


def worker_kill(mode: str, processes: Processes) -> dict[str, Any]:
    """Kill the worker running a run (its pool child, or the whole node), let it run again, compare."""
    from django.db import transaction

    import tests.robotlab_django.fault_celery  # noqa: F401  (tasks are sent through its broker)
    from robotlab_django import services
    from robotlab_django.runs import executor

    user, _session = _setup()
    queue = f"robotlab-faults-{uuid.uuid4().hex[:8]}"
    with transaction.atomic():
        victim = services.start_run(services.get_thread(None, user=user), "echo", "Go")
        executor.enqueue(victim, queue=queue)
    worker = processes.worker(queue)
    wait_for(lambda: str(_row(victim.pk).status) == "running" and _saved_deltas(victim.pk) >= 2,
             "the run to be running with text deltas saved")
    killed = children(worker.pid)
    if mode == "child":
        for pid in killed:
            os.kill(pid, signal.SIGKILL)
    else:  # the whole node: the parent and its child at once
        killed.append(worker.pid)
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait(timeout=WAIT)
    deltas_at_kill = _saved_deltas(victim.pk)
    if mode == "node":
        processes.worker(queue, name="worker2")
    wait_for(lambda: _ended(victim.pk), "the killed run and its end to be stored on redelivery", timeout=2 * WAIT)
    with transaction.atomic():
        clean = services.start_run(services.get_thread(None, user=user), "echo", "Go")
        executor.enqueue(clean, queue=queue)
    wait_for(lambda: _ended(clean.pk), "the clean run and its end to be stored")
    return {"killed": killed, "deltas_at_kill": deltas_at_kill, "run": _facts(victim.pk),
            "clean": _facts(clean.pk)}


#: Tokens of the ``notary`` robot's streamed answer (at 40 tokens/s) in the step-kill scenario.
ANSWER_TOKENS = 60
#: The environment of the step-kill scenario: the fake server's address, the tool's notes file, checkpoints.
LLM_BASE_ENV, NOTES_ENV = "ROBOTLAB_FAULT_LLM_BASE", "ROBOTLAB_FAULT_NOTES"
CHECKPOINTS_ENV = "ROBOTLAB_FAULT_CHECKPOINTS"


def server_llm() -> Any:
    """The LLM of the step-kill scenario (``ROBOTLAB["LLM"]``): litellm against the driver's fake server.

    No litellm retries, so the server's request count is the robot's call count.
    """
    from robotlab.llm import LLMClient

    return LLMClient(api_base=os.environ[LLM_BASE_ENV], api_key="sk-fake", num_retries=0)


def write_note(note: str) -> str:
    """Write a note down.

    Args:
        note: What to write.
    """
    with open(os.environ[NOTES_ENV], "a", encoding="utf-8") as notes:
        notes.write(f"{note}\n")
    return f"noted {note}"


def build_notary(**options: Any) -> Any:
    """The step-kill scenario's robot (``ROBOTLAB["ROBOTS"]["notary"]``): one tool call, then an answer."""
    import robotlab

    return robotlab.build(name="notary", system_prompt="You write notes.", local_tools=[write_note], **options)


def _notes() -> list[str]:
    path = Path(os.environ[NOTES_ENV])
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


def step_kill(processes: Processes, server: Any) -> dict[str, Any]:
    """Kill the pool child while the run streams its second LLM call; count what was sent and run again."""
    import tests.robotlab_django.fault_celery  # noqa: F401  (tasks are sent through its broker)
    from robotlab.testing.server import call, tokens, tool_calls
    from robotlab_django import services
    from robotlab_django.models import RunStep
    from robotlab_django.runs import executor

    arrivals: list[float] = []

    def respond(body: dict[str, Any]) -> Any:
        arrivals.append(time.monotonic())
        if body["messages"][-1]["role"] == "tool":
            return tokens(ANSWER_TOKENS, tokens_per_second=40)
        return tool_calls(call("write_note", note="milk"))

    server.responder = respond
    user, _session = _setup()
    queue = f"robotlab-faults-{uuid.uuid4().hex[:8]}"
    row = services.start_run(services.get_thread(None, user=user), "notary", "Note milk")
    executor.enqueue(row, queue=queue)  # autocommit: sent at once
    worker = processes.worker(queue)
    wait_for(lambda: str(_row(row.pk).status) == "running" and _notes() and _saved_deltas(row.pk) >= 2,
             "the tool to have run and the answer to be streaming")
    for pid in children(worker.pid):
        os.kill(pid, signal.SIGKILL)
    killed_at = time.monotonic()
    # the row is stored first, then its held run.completed and stream.ended
    wait_for(lambda: _ended(row.pk), "the killed run to finish on its retry and its end to be stored",
             timeout=2 * WAIT)
    bodies = server.requests
    answers = sum(body["messages"][-1]["role"] == "tool" for body in bodies)
    after = [stamp - killed_at for stamp in arrivals if stamp > killed_at]
    messages = _row(row.pk).messages
    return {"requests": len(bodies), "tool_call_requests": len(bodies) - answers, "answer_requests": answers,
            "completed_llm_steps_reissued": len(bodies) - answers - 1, "tool_runs": len(_notes()),
            "final_messages": sum(m.get("role") == "assistant" and not m.get("tool_calls") for m in messages),
            "resume_seconds": round(after[0], 3) if after else None,
            "steps": list(RunStep.objects.filter(result_id=row.pk).order_by("idx").values_list("idx", "kind")),
            "run": _facts(row.pk)}


def _streaming_attempt(pk: int) -> int:
    """How many times the running run has started, once text follows its last ``run.started`` (else 0)."""
    from robotlab_django.models import RunEvent

    kinds = list(RunEvent.objects.filter(result_id=pk).order_by("pk").values_list("kind", flat=True))
    if "run.started" not in kinds or str(_row(pk).status) != "running":
        return 0
    last_start = len(kinds) - 1 - kinds[::-1].index("run.started")
    return kinds.count("run.started") if "text.delta" in kinds[last_start:] else 0


def _streams_attempt(pk: int, attempt: int) -> bool:
    return _streaming_attempt(pk) == attempt


def poison_run(processes: Processes) -> dict[str, Any]:
    """Kill the pool child on every attempt of a run: it must end failed, not loop."""
    import tests.robotlab_django.fault_celery  # noqa: F401  (tasks are sent through its broker)
    from robotlab_django import services
    from robotlab_django.conf import app_settings
    from robotlab_django.runs import executor

    user, _session = _setup()
    queue = f"robotlab-faults-{uuid.uuid4().hex[:8]}"
    row = services.start_run(services.get_thread(None, user=user), "echo", "Go")
    executor.enqueue(row, queue=queue)  # autocommit: sent at once
    worker = processes.worker(queue)
    limit = int(app_settings.TASK_MAX_ATTEMPTS)
    for attempt in range(1, limit + 1):
        wait_for(functools.partial(_streams_attempt, row.pk, attempt), f"attempt {attempt} to stream")
        for pid in children(worker.pid):
            os.kill(pid, signal.SIGKILL)
    # the row is failed first, then run.failed and stream.ended are stored
    wait_for(lambda: _ended(row.pk), "the run to be given up and its end stored")
    return {"kills": limit, "limit": limit, "run": _facts(row.pk)}


def _run_in_background(pk: int) -> Any:
    import threading

    from django.db import connections

    from robotlab_django import services

    def work() -> None:
        try:
            services.execute_run(pk, raise_errors=False)
        finally:
            connections.close_all()

    thread = threading.Thread(target=work, name=f"fault-run-{pk}", daemon=True)
    thread.start()
    return thread


def socket_drop(processes: Processes, drops: int) -> dict[str, Any]:
    """A client cuts its websocket ``drops`` times mid-stream and resumes each time."""
    from robotlab_django import services

    user, session = _setup()
    port = processes.daphne()
    row = services.start_run(services.get_thread(None, user=user), "echo", "Go")
    client = Watcher(port, row.thread_id, session)

    async def watch() -> None:
        import aiohttp

        async with aiohttp.ClientSession() as http:
            follow = asyncio.ensure_future(client.follow(http, row.run_id, drop_after=3, drops=drops,
                                                         missed=lambda cursor: _stored_after(row.pk, cursor)))
            await asyncio.to_thread(wait_for, lambda: client.connects, "the client's first connection")
            runner = _run_in_background(row.pk)
            await follow
            await asyncio.to_thread(runner.join, WAIT)

    asyncio.run(watch())
    return {"client_text": client.text.get(row.run_id, ""), "connects": client.connects,
            "replayed": client.replayed, "run": _facts(row.pk)}


def redis_outage(processes: Processes, redis_port: int, *, hang: bool = False) -> dict[str, Any]:
    """Kill the layer's Redis mid-stream and start it again on the same port, or (``hang``) stop and
    continue it; the client resynchronises."""
    import tests.robotlab_django.fault_celery  # noqa: F401  (tasks are sent through its broker)
    from robotlab_django import services
    from robotlab_django.runs import executor

    user, session = _setup()
    port = processes.daphne()
    queue = f"robotlab-faults-{uuid.uuid4().hex[:8]}"
    processes.worker(queue)
    row = services.start_run(services.get_thread(None, user=user), "echo", "Go")
    client = Watcher(port, row.thread_id, session)
    outage: dict[str, int] = {}

    def break_redis() -> None:
        wait_for(lambda: client.events >= 3, "live events before the outage")
        redis = processes.by_name["redis"]
        os.killpg(redis.pid, signal.SIGSTOP if hang else signal.SIGKILL)
        if not hang:
            redis.wait(timeout=WAIT)
        outage["deltas_before"] = _saved_deltas(row.pk)
        # the run goes on without the layer: its events are still stored
        wait_for(lambda: _saved_deltas(row.pk) >= outage["deltas_before"] + 3, "events stored during the outage")
        outage["deltas_during"] = _saved_deltas(row.pk) - outage["deltas_before"]
        outage["connects_during"] = client.connects
        if hang:
            os.killpg(redis.pid, signal.SIGCONT)
        else:
            processes.redis(redis_port)

    async def watch() -> None:
        import aiohttp

        async with aiohttp.ClientSession() as http:
            follow = asyncio.ensure_future(client.follow(http, row.run_id))
            await asyncio.to_thread(wait_for, lambda: client.connects, "the client's first connection")
            await asyncio.to_thread(executor.enqueue, row, queue=queue)  # autocommit: sent at once
            await asyncio.to_thread(break_redis)
            await follow

    asyncio.run(watch())
    wait_for(lambda: _ended(row.pk), "the run and its end to be stored")
    return {"client_text": client.text.get(row.run_id, ""), "connects": client.connects,
            "replayed": client.replayed, "live_after_reconnect": client.live_after_reconnect,
            "healed": client.healed, **outage, "run": _facts(row.pk)}


@contextmanager
def _processes(workdir: Path) -> Iterator[Processes]:
    processes = Processes(workdir, dict(os.environ))
    try:
        yield processes
    finally:
        processes.stop_all()


def main() -> int:
    """Run one scenario (the environment names the database and Redis) and print its facts as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenario", choices=["worker-kill", "step-kill", "poison-run", "socket-drop", "redis-restart",
                                             "redis-hang"])
    parser.add_argument("--no-checkpoints", action="store_true", help="step-kill without ROBOTLAB['CHECKPOINT_STEPS']")
    parser.add_argument("--mode", choices=["child", "node"], default="child")
    parser.add_argument("--drops", type=int, default=4)
    parser.add_argument("--workdir", type=Path, required=True)
    args = parser.parse_args()
    redis_port = 0
    if args.scenario in ("redis-restart", "redis-hang"):
        redis_port = free_port()
        os.environ["ROBOTLAB_TEST_BROKER_URL"] = os.environ.get("ROBOTLAB_TEST_REDIS_URL") or REDIS_URL
        os.environ["ROBOTLAB_TEST_REDIS_URL"] = f"redis://127.0.0.1:{redis_port}/0"
    server: Any = None
    if args.scenario == "step-kill":  # the worker inherits this environment
        from robotlab.testing.server import FakeLLMServer

        server = FakeLLMServer().start()
        os.environ.update({LLM_BASE_ENV: server.base_url, NOTES_ENV: str(args.workdir / "notes.txt"),
                           CHECKPOINTS_ENV: "0" if args.no_checkpoints else "1",
                           "ROBOTLAB_TEST_LLM": "tests.robotlab_django.faults.server_llm",
                           "ROBOT_LAB_MODEL": "openai/gpt-4o-mini"})
    import django

    django.setup()
    with _processes(args.workdir) as processes:
        if args.scenario == "worker-kill":
            facts = worker_kill(args.mode, processes)
        elif args.scenario == "step-kill":
            facts = step_kill(processes, server)
        elif args.scenario == "poison-run":
            facts = poison_run(processes)
        elif args.scenario == "socket-drop":
            facts = socket_drop(processes, args.drops)
        else:
            processes.redis(redis_port)
            facts = redis_outage(processes, redis_port, hang=args.scenario == "redis-hang")
    if server is not None:
        server.stop()
    print(json.dumps(facts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
