"""An order of a customer (a user): what the ``orders`` robot searches and changes for the user it runs for."""

from __future__ import annotations

from django.conf import settings
from django.db import models

__all__ = ["Order"]


class Order(models.Model):
    """One order of one customer."""

    class Status(models.TextChoices):
        """Where an order stands."""

        PLACED = "placed", "Placed"
        SHIPPED = "shipped", "Shipped"
        CANCELLED = "cancelled", "Cancelled"

    customer = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="orders")
    number = models.CharField(max_length=20, unique=True, help_text="The order number the customer sees.")
    item = models.CharField(max_length=80)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PLACED)

    class Meta:
        ordering = ("number",)

    def __str__(self) -> str:
        return f"{self.number} ({self.item})"
