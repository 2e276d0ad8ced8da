"""`manage.py benchmark`: the scheduler table, printed and written to a file."""

from __future__ import annotations

import re
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from worker.bench.schedulers import Row, render

ROW = re.compile(
    r"^\| (insert|drain|insert \+ drain) \| ([\d,]+) \| ([\d.]+) \| ([\d.]+) \| (MinHeap|SkipList) "
    r"\| ([\d.]+) \| ([\d.]+) \| ([\d.]+)x \| ([\d.]+)x \|$",
    re.MULTILINE,
)


def test_benchmark_prints_the_table_and_writes_it(tmp_path: Path) -> None:
    output = tmp_path / "reports" / "scheduler.md"
    out = StringIO()
    call_command(
        "benchmark", "--sizes", "100,200", "--runs", "3", "--output", str(output), stdout=out
    )
    printed = out.getvalue()
    assert "Median of 3 runs" in printed
    rows = ROW.findall(printed)
    assert [(op, size) for op, size, *_ in rows] == [
        ("insert", "100"),
        ("insert", "200"),
        ("drain", "100"),
        ("drain", "200"),
        ("insert + drain", "100"),
        ("insert + drain", "200"),
    ]
    for _, _, heap_ms, skiplist_ms, winner, tuples_ms, ints_ms, to_tuples, to_ints in rows:
        if heap_ms != skiplist_ms:
            assert winner == ("MinHeap" if float(heap_ms) < float(skiplist_ms) else "SkipList")
        assert float(to_tuples) == pytest.approx(float(heap_ms) / float(tuples_ms), rel=0.1)
        assert float(to_ints) == pytest.approx(float(heap_ms) / float(ints_ms), rel=0.1)
    assert f"Written to {output}" in printed
    assert output.read_text() in printed
    assert ROW.findall(output.read_text()) == rows


def test_budget_verdict_appears_at_ten_thousand_jobs_only() -> None:
    small = render([Row("insert", 200, 1.5, 3.0, 1.0, 0.5)], runs=7)
    assert "budget" not in small
    report = render(
        [Row("insert", 10_000, 1.5, 3.0, 1.0, 0.5), Row("drain", 10_000, 8.4, 6.0, 4.0, 2.0)],
        runs=7,
    )
    assert "MinHeap over bare heapq on tuples at 10,000 jobs: insert 1.50x, drain 2.10x" in report
    assert "(OVER the 2x budget)" in report


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--sizes", "100,abc"], "expected positive job counts separated by commas"),
        (["--sizes", "0"], "expected positive job counts separated by commas"),
        (["--runs", "0"], "expected a positive integer"),
    ],
)
def test_benchmark_rejects_bad_options(args: list[str], message: str) -> None:
    with pytest.raises(CommandError, match=message):
        call_command("benchmark", *args, stdout=StringIO())
