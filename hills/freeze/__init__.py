"""Freezing a hill: the commit gate, `hills commit` and the pre-commit hook."""
