"""``manage.py demo_user``: the local logins ``demo`` / ``demo`` and the superuser ``admin`` / ``admin``; DEBUG only."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

__all__ = ["Command"]


class Command(BaseCommand):
    """Create ``demo`` / ``demo`` and the superuser ``admin`` / ``admin`` (reset each one that exists)."""

    help = ("Create the local users 'demo' (password 'demo') and the superuser 'admin' (password 'admin', "
            "for /admin/). Refused unless DEBUG is on.")

    def handle(self, *args: Any, **options: Any) -> None:
        """Create or reset both users."""
        if not settings.DEBUG:
            raise CommandError("The demo users are for local development only (DEBUG is off).")
        for name, staff, purpose in (("demo", False, "the chat"), ("admin", True, "the admin at /admin/")):
            user, created = get_user_model().objects.get_or_create(username=name)
            user.set_password(name)
            user.is_staff = user.is_superuser = staff
            user.save()
            self.stdout.write(f"{'Created' if created else 'Reset'} the {name} user: log in as {name} / {name} "
                              f"for {purpose}.")
