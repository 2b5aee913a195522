"""A webhook receiver for the A2A push-notification tests: an HTTP server thread on 127.0.0.1."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["Webhook", "serve_webhook"]


@dataclass
class Webhook:
    """The receiver at ``url``: the requests it took (headers, body), how many it answered 500 first."""

    url: str = ""
    received: list[tuple[dict[str, str], bytes]] = field(default_factory=list)
    refused: int = 0
    #: Requests still to answer with HTTP 500 (a webhook that is down), before it takes them.
    failures: int = 0
    changed: threading.Condition = field(default_factory=threading.Condition)

    def states(self) -> list[str]:
        """The task state of each notification taken, in arrival order."""
        return [json.loads(body)["task"]["status"]["state"] for _, body in self.received]

    def wait_for(self, count: int, timeout: float) -> bool:
        """Wait until ``count`` notifications were taken; whether they were within ``timeout`` seconds."""
        with self.changed:
            return self.changed.wait_for(lambda: len(self.received) >= count, timeout)


@contextmanager
def serve_webhook(path: str = "/hooks/a2a") -> Iterator[Webhook]:
    """A receiver thread; its URL is ``http://127.0.0.1:<port><path>``."""
    hook = Webhook()

    class Receiver(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            body = self.rfile.read(int(self.headers["Content-Length"]))
            with hook.changed:
                failing = hook.failures > 0
                if failing:
                    hook.failures -= 1
                    hook.refused += 1
                else:
                    hook.received.append((dict(self.headers), body))
                hook.changed.notify_all()
            self.send_response(500 if failing else 204)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    hook.url = f"http://127.0.0.1:{server.server_address[1]}{path}"
    try:
        yield hook
    finally:
        server.shutdown()
        server.server_close()
