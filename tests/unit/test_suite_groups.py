"""The suite's `xdist_group` marks hold: `make test` runs each group in one process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

GROUPED = """
import os
import pytest

pytestmark = pytest.mark.xdist_group("together")


@pytest.mark.parametrize("n", range(8))
def test_grouped(n):
    with open("workers.txt", "a") as record:
        record.write(os.environ["PYTEST_XDIST_WORKER"] + "\\n")
"""


def test_the_tests_of_a_group_run_in_one_process(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["tests.xdist_groups"]\n')
    (tmp_path / "test_grouped.py").write_text(GROUPED)
    finished = subprocess.run(
        [
            *(sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-c", "/dev/null"),
            *("--rootdir", ".", "--disable-plugin-autoload", "-p", "xdist.plugin"),
            *("-n", "2", "--dist", "loadgroup"),
        ],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert finished.returncode == 0, finished.stdout + finished.stderr
    workers = (tmp_path / "workers.txt").read_text().split()
    assert len(workers) == 8
    assert len(set(workers)) == 1, workers
