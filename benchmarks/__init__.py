"""`make benchmark`: the project, a bare-SQL floor and (optionally) its peers, side by side.

Nothing here imports Django at module level: the peers' drivers run from a separate
virtualenv (`.bench/peers`) that has their libraries and not the project's.
"""
