"""Networks on threads: a turn in one process, or distributed across workers, and its graph."""
