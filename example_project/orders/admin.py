"""The orders in the admin."""

from __future__ import annotations

from django.contrib import admin

from .models import Order

__all__ = ["OrderAdmin"]


@admin.register(Order)
class OrderAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """Every customer's orders."""

    list_display = ("number", "item", "status", "customer")
    list_filter = ("status", "customer")
