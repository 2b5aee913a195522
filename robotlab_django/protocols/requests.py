"""What the protocol servers (ACP, A2A) accept in a request body: its size, its JSON.

A protocol request carries its files in its body, base64-encoded, so Django's ``DATA_UPLOAD_MAX_MEMORY_SIZE`` (2.5 MB
by default) would refuse files long before ``ROBOTLAB["MAX_ATTACHMENT_BYTES"]`` (10 MiB) does, and with Django's
HTML 400 page. :func:`read_body` reads a body up to :func:`body_limit` instead: room for the most files allowed,
base64-encoded, plus ``DATA_UPLOAD_MAX_MEMORY_SIZE`` for the rest; a larger one is :class:`BodyTooLargeError`,
which each server answers in its protocol's form. Files over ``MAX_ATTACHMENT_BYTES`` in a body within the limit
get the run's own error, naming that setting. :func:`check_nesting` refuses a body nested too deeply to parse.
"""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.http import HttpRequest

from robotlab_django.conf import app_settings

__all__ = ["NESTING_CHECK_BRACKETS", "BodyTooLargeError", "body_limit", "check_nesting", "parse_json", "read_body"]


class BodyTooLargeError(ValueError):
    """A protocol request's body is larger than :func:`body_limit`."""


def body_limit() -> int | None:
    """The largest protocol request body read, in bytes; ``None`` for no limit.

    ``DATA_UPLOAD_MAX_MEMORY_SIZE`` plus ``MAX_ATTACHMENT_BYTES`` base64-encoded (4 bytes for every 3), or only the
    former when files have no limit; no limit when ``DATA_UPLOAD_MAX_MEMORY_SIZE`` is ``None``.
    """
    data: int | None = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    files: int | None = app_settings.MAX_ATTACHMENT_BYTES
    if data is None:
        return None
    return data if files is None else data + (files + 2) // 3 * 4


def read_body(request: HttpRequest) -> bytes:
    """The request's body, read up to :func:`body_limit` (Django's own limit does not apply).

    Raises:
        BodyTooLargeError: the body (or its ``Content-Length``) is over the limit.
    """
    limit = body_limit()
    if limit is not None and int(request.META.get("CONTENT_LENGTH") or 0) > limit:
        raise BodyTooLargeError(_too_large(limit))
    body = request.read() if limit is None else request.read(limit + 1)
    if limit is not None and len(body) > limit:
        raise BodyTooLargeError(_too_large(limit))
    return body


def _too_large(limit: int) -> str:
    return (f"The request body is larger than {limit} bytes: room for ROBOTLAB['MAX_ATTACHMENT_BYTES'] "
            f"({app_settings.MAX_ATTACHMENT_BYTES}) of files, base64-encoded, and "
            f"settings.DATA_UPLOAD_MAX_MEMORY_SIZE ({settings.DATA_UPLOAD_MAX_MEMORY_SIZE}) for the rest; send "
            "smaller files, or raise those settings.")


#: Brackets a body holds before :func:`check_nesting` parses it to see whether it nests too deeply.
NESTING_CHECK_BRACKETS = 100

_TOO_DEEP = "The request body is not JSON this server reads: it nests too deeply."


def check_nesting(body: bytes) -> None:
    """Refuse a JSON body that nests too deeply for the JSON parser, before a library parses it.

    Only a body with :data:`NESTING_CHECK_BRACKETS` brackets or more is parsed here (a file's base64 holds none), so
    ordinary requests are parsed once, by whoever reads them.

    Raises:
        ValueError: the body nests too deeply.
    """
    if body.count(b"[") + body.count(b"{") < NESTING_CHECK_BRACKETS:
        return
    try:
        json.loads(body)
    except RecursionError:
        raise ValueError(_TOO_DEEP) from None
    except ValueError:  # not JSON: the reader says so in its own words
        return


def parse_json(body: bytes) -> Any:
    """``body`` as JSON.

    Raises:
        ValueError: it is not JSON, or nests too deeply to parse (the message says which).
    """
    try:
        return json.loads(body or b"{}")
    except RecursionError:
        raise ValueError(_TOO_DEEP) from None
    except ValueError as exc:
        raise ValueError(f"The request body is not JSON: {exc}.") from None
