"""Run every benchmark: `python -m tests.bench` (or `make bench`)."""

from . import (bench_api, bench_audit, bench_base, bench_check, bench_cluster, bench_commit, bench_corpus, bench_eval,
               bench_history, bench_memory, bench_replicates, bench_sandbox, bench_service, bench_verify)

for module in (bench_commit, bench_eval, bench_history, bench_verify, bench_replicates, bench_sandbox, bench_audit,
               bench_corpus, bench_check, bench_service, bench_cluster, bench_memory, bench_api, bench_base):
    print(f"== {module.__name__.rsplit('.', 1)[-1]}")
    module.main()
