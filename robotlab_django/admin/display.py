"""What the admin pages share: shortened text, pretty-printed JSON, file names and reversing an admin's URLs.

All model and user text is rendered by templates with autoescaping, or through ``format_html``, which escapes its
arguments; nothing in the admin marks such text safe.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html
from django.utils.text import Truncator

from robotlab_django.encoders import RobotLabJSONEncoder

if TYPE_CHECKING:
    from django.db.models.options import Options

__all__ = ["AdminURLs", "file_name", "json_block", "route_name", "short"]


def short(text: str | None, length: int = 60) -> str:
    """``text`` cut to ``length`` characters, with an ellipsis when it was longer."""
    return Truncator(text or "").chars(length)


def json_block(value: object) -> str:
    """``value`` as indented JSON in a ``<pre>`` block (escaped)."""
    text = json.dumps(value, indent=2, ensure_ascii=False, cls=RobotLabJSONEncoder)
    return format_html('<pre class="robotlab-json">{}</pre>', text)


def route_name(opts: Options[Any], suffix: str) -> str:
    """The URL name of an admin view of a model (without the ``admin:`` namespace)."""
    return f"{opts.app_label}_{opts.model_name}_{suffix}"


def file_name(text: str) -> str:
    """``text`` made safe as a download's file name (letters, digits, ``_.-``; at most 80 characters)."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-")[:80] or "thread"


class AdminURLs:
    """Reversing a model admin's own URLs."""

    opts: Any
    admin_site: admin.AdminSite

    def _url(self, suffix: str, *args: object) -> str:
        return reverse(f"admin:{route_name(self.opts, suffix)}", args=args or None,
                       current_app=self.admin_site.name)
