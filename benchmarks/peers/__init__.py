"""The peers, measured with the same workload (benchmarks/workload.py) as the project.

These modules run only in the `.bench/peers` virtualenv (`make benchmark-peers` creates
it), which has the peers' libraries; the project never depends on them. Each peer runs as
its documentation shows, with its defaults: its own worker command, no flags.
Configuration comes from the run's environment (DATABASE_URL, REDIS_URL).
"""
