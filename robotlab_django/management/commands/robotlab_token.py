"""``manage.py robotlab_token USERNAME``: issue an API token for the ACP and A2A servers."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from ...api_tokens import issue_token


class Command(BaseCommand):
    """Print a new API token for a user on the last line (it is stored hashed: copy it now)."""

    help = ("Create an API token for USERNAME and print it on the last line. Requests send "
            "'Authorization: Bearer <token>'; revoke tokens in the admin.")

    def add_arguments(self, parser: CommandParser) -> None:
        """The command's options."""
        parser.add_argument("username", help="The user the token acts as (the user model's USERNAME_FIELD).")
        parser.add_argument("--name", default="", help="A label to tell the token apart in the admin.")

    def handle(self, *args: Any, **options: Any) -> None:
        """Find the user, issue the token, print it."""
        model = get_user_model()
        try:
            user = model.objects.get(**{model.USERNAME_FIELD: options["username"]})
        except model.DoesNotExist:
            raise CommandError(f"No user {options['username']!r}; create it first (manage.py createsuperuser "
                               "or the admin).") from None
        row, token = issue_token(user, options["name"])
        self.stdout.write(f"Token {row.prefix}… for {user} (stored hashed; it is not shown again):")
        self.stdout.write(token)
