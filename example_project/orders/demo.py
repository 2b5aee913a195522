"""The demo orders of the local users ``demo`` and ``bob``, made (or put back) by ``manage.py demo_user``."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import Permission

from .models import Order

__all__ = ["DEMO_ORDERS", "reset_orders"]

#: Each demo user's orders: number, item, status.
DEMO_ORDERS = {
    "demo": [("A-1001", "Robot arm", "placed"), ("A-1002", "Gripper", "placed"), ("A-1003", "Sensor kit", "shipped")],
    "bob": [("B-2001", "Wheel set", "placed")],
}


def reset_orders(user: Any) -> int:
    """Give ``user`` back their demo orders, as first made, and the right to change them; how many there are."""
    user.user_permissions.add(Permission.objects.get(content_type__app_label="orders", codename="change_order"))
    rows = DEMO_ORDERS.get(user.get_username(), [])
    for number, item, status in rows:
        Order.objects.update_or_create(number=number, defaults={"customer": user, "item": item, "status": status})
    return len(rows)
