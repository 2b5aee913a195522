"""``@robotlab.tool``'s flags (issue 27): ``side_effect`` and ``approve`` are recorded on the tool (approvers:
test_approval.py)."""

from __future__ import annotations

from robotlab import Tool, tool


def test_side_effect_is_recorded_on_function_and_class_tools_and_off_by_default() -> None:
    @tool(side_effect=True)
    def send_mail(to: str) -> str:
        """Send a mail."""
        return f"sent to {to}"

    @tool
    def read_mail() -> str:
        """Read the mail."""
        return "nothing new"

    class Charge(Tool):
        """Charge a card."""

        side_effect = True

        def execute(self, amount: int) -> str:
            return f"charged {amount}"

    assert send_mail.side_effect is True and read_mail.side_effect is False
    assert Charge().side_effect is True and Tool.create(name="noop").side_effect is False
    assert send_mail.call({"to": "ada"}) == "sent to ada"  # recorded only: the call itself is unchanged


def test_approve_is_recorded_on_function_and_class_tools_and_off_by_default() -> None:
    @tool(side_effect=True, approve=True)
    def refund(order: str) -> str:
        """Refund an order."""
        return f"refunded {order}"

    @tool(side_effect=True)
    def log(line: str) -> str:
        """Append a line to the log."""
        return line

    class Delete(Tool):
        """Delete a file."""

        approve = True

        def execute(self, path: str) -> str:
            return f"deleted {path}"

    assert (refund.approve, refund.side_effect) == (True, True) and log.approve is False
    assert Delete().approve is True and Tool.create(name="noop").approve is False
    assert refund.call({"order": "A-1"}) == "refunded A-1"  # no robot, so no approver to ask: it runs
