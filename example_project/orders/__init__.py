"""The example's own data: orders of the demo users, which the ``orders`` robot finds and changes after approval."""
