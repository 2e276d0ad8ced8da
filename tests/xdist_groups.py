"""`xdist_group` marks kept under pytest 9.2 (a plugin of tests/conftest.py).

xdist's `--dist loadgroup` sends the tests of a group to one process by the group's name
after an "@" in their node ids, which it writes to `Item._nodeid`; pytest 9.2 builds a node
id from `Item._id` and no longer reads `_nodeid`. Every group was spread over every process:
the browser tests started a Chromium and a server in each, the lists at volume built their
tables in each. This writes the suffix where pytest 9.2 reads it, as xdist meant it.
"""

from __future__ import annotations

import pytest
from _pytest.nodeid import NodeId


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Set in each xdist process when run with `--dist loadgroup`.
    if not getattr(config.option, "loadgroup", False):
        return
    for item in items:
        names = sorted(
            {
                mark.args[0] if mark.args else mark.kwargs.get("name", "default")
                for mark in item.iter_markers("xdist_group")
            }
        )
        suffix = "@" + "_".join(map(str, names))
        if names and not item.nodeid.endswith(suffix):
            item._id = NodeId.parse(item.nodeid + suffix)
