"""The checks of `hills check`: the hill's own tests, the answer-leak scan, the
leak probe and the cheat corpus."""
