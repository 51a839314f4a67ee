"""Run every benchmark: `python -m tests.bench` (or `make bench`)."""

from . import bench_commit, bench_eval, bench_verify

for module in (bench_commit, bench_eval, bench_verify):
    print(f"== {module.__name__.rsplit('.', 1)[-1]}")
    module.main()
