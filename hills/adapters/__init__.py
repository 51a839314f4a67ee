"""Adapters: hills as the evaluator of other optimisation loops (docs/adapters.md)."""
