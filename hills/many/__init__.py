"""Many evals: tuning, A/B verdicts, re-scoring and Ray clusters."""
