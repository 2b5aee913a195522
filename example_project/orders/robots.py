"""The ``orders`` robot: it searches the user's orders and changes one once the user approves.

Its tools come from :func:`robotlab_django.tools.model_tools`: ``search_order`` and ``get_order`` see only the
orders of the run's user (``owner_field="customer"``), and ``update_order`` (with ``create_order`` and
``delete_order``) needs the ``orders.change_order`` permission and parks the run until the user approves the call on
the chat page (or denies it: the model then reads ``denied by <user>``). On the offline demo model, ask "Show my
orders", then "Change order 2 to shipped".
"""

from __future__ import annotations

from typing import Any

import robotlab
from robotlab_django.registry import register_robot
from robotlab_django.tools import model_tools

from .models import Order

__all__ = ["OrdersRobot"]


@register_robot
class OrdersRobot:
    """An assistant on your orders that asks you before it changes one."""

    name = "orders"
    description = "Finds your orders, and changes one once you approve"

    @classmethod
    def build(cls, **options: Any) -> robotlab.Robot:
        """A fresh orders robot."""
        return robotlab.build(
            name=cls.name, description=cls.description,
            system_prompt="You help the user with their orders. Find them with search_order; change one with "
                          "update_order (the user approves each change).",
            local_tools=model_tools(Order, fields=["number", "item", "status"], owner_field="customer", write=True,
                                    max_rows=20),
            **options)
