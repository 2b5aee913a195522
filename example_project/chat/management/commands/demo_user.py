"""``manage.py demo_user``: make sure the local demo login exists (``demo`` / ``demo``); DEBUG only."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

__all__ = ["Command"]


class Command(BaseCommand):
    """Create the user ``demo`` with the password ``demo`` (reset it when the user exists)."""

    help = "Create the local demo user 'demo' (password 'demo'). Refused unless DEBUG is on."

    def handle(self, *args: Any, **options: Any) -> None:
        """Create or reset the demo user."""
        if not settings.DEBUG:
            raise CommandError("The demo user is for local development only (DEBUG is off).")
        user, created = get_user_model().objects.get_or_create(username="demo")
        user.set_password("demo")
        user.save()
        self.stdout.write(f"{'Created' if created else 'Reset'} the demo user: log in as demo / demo.")
