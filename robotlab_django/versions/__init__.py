"""Robots as versioned data: versions of a robot's prompt and settings, labels, rollouts, and applying them."""
