"""Runs: queue, claim, execute, checkpoint, control and dispatch a robot's or a network's run."""
