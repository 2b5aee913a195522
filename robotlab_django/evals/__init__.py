"""Evals built from stored runs: eval sets and cases, evaluators, and runs of a set against a robot version."""
