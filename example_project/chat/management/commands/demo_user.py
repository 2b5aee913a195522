"""``manage.py demo_user``: the local logins ``demo`` / ``demo``, ``bob`` / ``bob`` and the superuser ``admin`` /
``admin``, and the demo users' orders; DEBUG only."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from orders.demo import reset_orders

__all__ = ["Command"]


class Command(BaseCommand):
    """Create ``demo`` / ``demo``, ``bob`` / ``bob`` and the superuser ``admin`` / ``admin`` (reset each one that
    exists), and put the demo users' orders back as they were."""

    help = ("Create the local users 'demo' (password 'demo'), 'bob' (password 'bob') with their demo orders, and the "
            "superuser 'admin' (password 'admin', for /admin/). Refused unless DEBUG is on.")

    def handle(self, *args: Any, **options: Any) -> None:
        """Create or reset the users and the demo orders."""
        if not settings.DEBUG:
            raise CommandError("The demo users are for local development only (DEBUG is off).")
        for name, staff, purpose in (("demo", False, "the chat"), ("bob", False, "the chat as another customer"),
                                     ("admin", True, "the admin at /admin/")):
            user, created = get_user_model().objects.get_or_create(username=name)
            user.set_password(name)
            user.is_staff = user.is_superuser = staff
            user.save()
            orders = reset_orders(user)
            owned = f" ({orders} orders)" if orders else ""
            self.stdout.write(f"{'Created' if created else 'Reset'} the {name} user{owned}: log in as {name} / "
                              f"{name} for {purpose}.")
