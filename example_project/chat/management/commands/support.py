"""``manage.py support MESSAGE``: run the support network once and print the specialist's reply."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from chat.robots import support_network

__all__ = ["Command"]


class Command(BaseCommand):
    """Run the support network (classifier -> billing, technical or general) on one message."""

    help = "Run the support network on MESSAGE and print which specialist answered, and its reply."

    def add_arguments(self, parser: CommandParser) -> None:
        """``MESSAGE``: the customer's message."""
        parser.add_argument("message", nargs="+")

    def handle(self, *args: Any, **options: Any) -> None:
        """Run the network and print the route and the reply."""
        result = support_network().run(" ".join(options["message"]))
        self.stdout.write(f"route: classifier -> {', '.join(result.activated_steps) or '(none)'}")
        self.stdout.write(str(result.value.reply))
