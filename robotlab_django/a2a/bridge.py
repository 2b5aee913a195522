"""Serving a Starlette endpoint of the A2A SDK from an async Django view.

The SDK's JSON-RPC dispatcher takes a Starlette ``Request`` and returns a Starlette ``Response`` (JSON, or
Server-Sent Events for streams). :func:`starlette_request` makes the request from Django's (its body read
already, its headers, and extra scope keys such as the authenticated user), and :func:`django_response` runs the
response as the ASGI app it is and hands what it sends to Django: a ``HttpResponse``, or a
``StreamingHttpResponse`` whose chunks go out as the SDK yields them. When the client goes away, Django stops
iterating; the response then hears ``http.disconnect``, as under any ASGI server.

This keeps the A2A server a URLconf to include, like every other view of the app: Django's middleware, URL
routing, database-connection handling and ASGI server serve it, with no second ASGI application to mount.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, MutableMapping
from typing import Any

from django.http import HttpRequest, HttpResponse, HttpResponseBase, StreamingHttpResponse
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

__all__ = ["Exchange", "django_response", "starlette_request"]

Message = MutableMapping[str, Any]


class Exchange:
    """The ASGI ``receive`` side of one bridged request: the body once, then ``http.disconnect`` when closed."""

    def __init__(self, body: bytes) -> None:
        """Serve ``body`` as the request's one ``http.request`` message."""
        self._body: bytes | None = body
        self.closed = asyncio.Event()

    async def receive(self) -> Message:
        """The body, then (waiting until :meth:`close`) ``http.disconnect``."""
        if self._body is not None:
            body, self._body = self._body, None
            return {"type": "http.request", "body": body, "more_body": False}
        await self.closed.wait()
        return {"type": "http.disconnect"}

    def close(self) -> None:
        """The client is gone, or the response was sent: ``receive`` now returns ``http.disconnect``."""
        self.closed.set()


def starlette_request(request: HttpRequest, exchange: Exchange, **scope: object) -> Request:
    """A Starlette request with ``request``'s method, path, query and headers, reading from ``exchange``.

    ``scope`` adds keys to the ASGI scope (the endpoint reads them from ``request.scope``).
    """
    headers = [(name.lower().encode("latin-1"), str(value).encode("latin-1"))
               for name, value in request.headers.items()]
    asgi_scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": request.method,
                  "scheme": request.scheme, "path": request.path, "raw_path": request.path.encode("utf-8"),
                  "root_path": "", "query_string": request.META.get("QUERY_STRING", "").encode("latin-1"),
                  "headers": headers, "client": None, "server": None, **scope}
    return Request(asgi_scope, exchange.receive)


async def _next(queue: asyncio.Queue[Message], task: asyncio.Future[None]) -> Message | None:
    """The response's next ASGI message; ``None`` once it finished sending (its error raised)."""
    getter = asyncio.ensure_future(queue.get())
    waiting: list[asyncio.Future[Any]] = [getter, task]
    await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
    if getter.done():
        return getter.result()
    getter.cancel()
    if not queue.empty():
        return queue.get_nowait()
    task.result()  # raises what the response raised
    return None


async def _messages(response: Response, request: Request, exchange: Exchange) -> AsyncIterator[Message]:
    """Run ``response`` as the ASGI app it is: the messages it sends, as it sends them.

    It runs in a task started here, on the first iteration: in the context of whoever iterates (Django, for a
    streaming response, after the view returned), not the view's, whose sync-adapter threads end with it.
    """
    queue: asyncio.Queue[Message] = asyncio.Queue()
    send: Callable[[Message], Awaitable[None]] = queue.put
    task = asyncio.ensure_future(response(request.scope, exchange.receive, send))
    try:
        while (message := await _next(queue, task)) is not None:
            yield message
            if message["type"] == "http.response.body" and not message.get("more_body"):
                break
    finally:
        exchange.close()
        if not task.done():
            task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def _body(messages: AsyncIterator[Message]) -> AsyncIterator[bytes]:
    async def chunks() -> AsyncIterator[bytes]:
        async for message in messages:
            if message["type"] == "http.response.body" and message.get("body"):
                yield bytes(message["body"])

    return chunks()


def _pairs(raw: Iterable[tuple[bytes, bytes]]) -> list[tuple[str, str]]:
    return [(bytes(name).decode("latin-1"), bytes(value).decode("latin-1")) for name, value in raw]


async def django_response(response: Response, request: Request, exchange: Exchange, *,
                          buffered: bool = False) -> HttpResponseBase:
    """Run the Starlette ``response`` for ``request`` and return what it sends as a Django response.

    A streaming response (SSE) becomes a ``StreamingHttpResponse`` (its status and headers the response's own)
    whose chunks are the ones it sends, as it sends them; when Django stops iterating (the client left),
    ``exchange`` closes and the response stops. Any other response, and every response with ``buffered``, is
    run here and returned whole.

    Under WSGI pass ``buffered=True``: Django would iterate a stream on an event loop of its own, after the
    view's loop closed the SDK's generators (it started them, to catch errors before the stream begins); the
    events then arrive together once the stream ends.
    """
    result: HttpResponseBase
    if not buffered and (isinstance(response, StreamingResponse) or hasattr(response, "body_iterator")):
        result = StreamingHttpResponse(_body(_messages(response, request, exchange)), status=response.status_code)
        headers = [(name, value) for name, value in _pairs(response.raw_headers) if name.lower() != "content-length"]
    else:
        messages = [message async for message in _messages(response, request, exchange)]
        start = next((message for message in messages if message["type"] == "http.response.start"), None)
        if start is None:
            raise RuntimeError("The A2A endpoint sent no response.")
        result = HttpResponse(b"".join(bytes(message.get("body") or b"") for message in messages
                                       if message["type"] == "http.response.body"), status=int(start["status"]))
        headers = _pairs(start["headers"])
    for name, value in headers:
        result[name] = value
    return result
