"""What runs cost and may cost: budgets, per-call admission, rate limits, rollups and usage."""
