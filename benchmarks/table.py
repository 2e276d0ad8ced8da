"""The benchmark's tables, as Markdown, from the figures each system's run returned."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

FLOOR = "bare SQL floor"
DEFAULTS = "project, defaults"


@dataclass(frozen=True)
class Measure:
    label: str
    # Where the figure is in a row's dict, e.g. ("latency", "p50_ms").
    path: tuple[str, ...]
    unit: str
    # True: more is better (jobs/s); False: less is better (ms).
    higher_is_better: bool

    def value(self, row: dict[str, Any] | None) -> float | None:
        value: Any = row
        for key in self.path:
            if not isinstance(value, dict) or value.get(key) is None:
                return None
            value = value[key]
        return float(value)


MEASURES = [
    Measure("single enqueue (one job per transaction)", ("single_enqueue",), "jobs/s", True),
    Measure("batch enqueue", ("batch_enqueue",), "jobs/s", True),
    Measure("HTTP enqueue, POST /api/v1/jobs", ("http", "per_s"), "req/s", True),
    Measure("HTTP enqueue answers", ("http", "requests"), "answers", True),
    Measure("HTTP enqueue errors (not 201)", ("http", "errors"), "answers", False),
    Measure("HTTP enqueue p50", ("http", "p50_ms"), "ms", False),
    Measure("HTTP enqueue p99", ("http", "p99_ms"), "ms", False),
    Measure("drain, one worker process", ("drain",), "jobs/s", True),
    Measure("enqueue-to-start p50, idle worker", ("latency", "p50_ms"), "ms", False),
    Measure("enqueue-to-start p99, idle worker", ("latency", "p99_ms"), "ms", False),
]

PAGES = [
    ("counters", "job counters read (`jobs.stats.current_stats`) p95"),
    ("api_list", "GET /api/v1/jobs?limit=20 p95"),
    ("api_type", "GET /api/v1/jobs?type=send_email p95"),
    ("api_status", "GET /api/v1/jobs?status=dlq p95"),
    ("api_status_retrying", "GET /api/v1/jobs?status=failed (waiting for a retry) p95"),
    ("api_status_pending", "GET /api/v1/jobs?status=pending p95"),
    ("api_sort_priority", "GET /api/v1/jobs?ordering=priority p95"),
    ("api_sort_attempts", "GET /api/v1/jobs?ordering=-attempt_count p95"),
    ("api_sort_deadline", "GET /api/v1/jobs?ordering=virtual_deadline p95"),
    ("api_sort_cursor_middle", "GET /api/v1/jobs?ordering=-priority cursor halfway (limit=50) p95"),
    ("api_deep", "GET /api/v1/jobs deep page (limit=50) p95"),
    ("api_cursor", "GET /api/v1/jobs cursor at the same depth (limit=50) p95"),
    ("api_cursor_middle", "GET /api/v1/jobs cursor at the middle of the list (limit=50) p95"),
    ("api_cursor_last", "GET /api/v1/jobs cursor at the last page (limit=50) p95"),
    (
        "api_type_cursor_middle",
        "GET /api/v1/jobs?type=send_email cursor at the middle of its list p95",
    ),
    ("api_stats", "GET /api/v1/jobs/stats p95"),
    ("dashboard", "console Dashboard p95"),
    ("dlq", "console DLQ p95"),
    ("dlq_group", "console DLQ narrowed to its largest group p95"),
    ("ledger", "console Ledger p95"),
    ("ledger_dlq", "console Ledger, status=dlq p95"),
    ("admin_jobs", "admin job list p95"),
    ("admin_dlq", "admin dead-letter list p95"),
    ("admin_by_priority", "admin job list sorted by priority p95"),
]


@dataclass(frozen=True)
class Bound:
    """What the volume issue (#10) asks of a figure over history: at most `ratio` times
    worse than on the empty table, or under `ms` milliseconds."""

    ratio: float | None = None
    ms: float | None = None

    def text(self) -> str:
        return f"within {self.ratio}x of empty" if self.ratio else f"under {self.ms:,.0f} ms"

    def holds(self, measure: Measure, empty: float | None, full: float | None) -> bool | None:
        if full is None:
            return None
        if self.ms is not None:
            return full < self.ms
        if not empty or self.ratio is None:
            return None
        worse = empty / full if measure.higher_is_better else full / empty
        return worse <= self.ratio


# The bounds by measure: the hot path within 1.5x, the API under 100 ms, the console under
# 150 ms (server time), the admin "usable", read as under half a second.
HOT_PATH = Bound(ratio=1.5)
BOUNDS = {"api": Bound(ms=100), "console": Bound(ms=150), "admin": Bound(ms=500)}
HISTORY_MEASURES = [
    (m, HOT_PATH) for m in MEASURES if m.path[0] in {"single_enqueue", "drain", "latency"}
] + [
    (
        Measure(label, (name, "p95_ms"), "ms", False),
        BOUNDS.get("console" if label.startswith("console") else name.split("_")[0]),
    )
    for name, label in PAGES
]


def middle(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """One row of the median of each figure over `rows` (the passes of one measure); a
    figure some pass lacks is left out."""
    if not rows:
        return {}
    merged: dict[str, Any] = {}
    for key, value in rows[0].items():
        values: list[Any] = [row.get(key) for row in rows]
        if isinstance(value, dict):
            merged[key] = middle([v for v in values if isinstance(v, dict)])
        elif all(isinstance(v, int | float) for v in values):
            merged[key] = statistics.median(values)
    return merged


def number(value: float | None, unit: str = "") -> str:
    if value is None:
        return "-"
    if value >= 100 or unit == "answers":
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def ratio(value: float | None, reference: float | None) -> str:
    if value is None or not reference:
        return "-"
    return f"{value / reference:.2f}x"


def _markdown(header: list[str], rows: list[list[str]]) -> list[str]:
    align = ["---"] + ["---:"] * (len(header) - 1)
    return [
        "| " + " | ".join(header) + " |",
        "| " + " | ".join(align) + " |",
        *("| " + " | ".join(row) + " |" for row in rows),
    ]


RATIO_NOTE = (
    "*x / floor* is the project's figure divided by the floor's: for jobs/s and req/s more"
    " is better, for ms and errors less is."
)


def side_by_side(systems: dict[str, dict[str, Any]]) -> list[str]:
    """Measures as rows, systems as columns; after each project column its ratio to the
    floor (see RATIO_NOTE)."""
    floor = systems.get(FLOOR)
    header = ["measure"]
    for name in systems:
        header.append(name)
        if name.startswith("project") and floor is not None:
            header.append(name.removeprefix("project, ").split(" ")[0] + " / floor")
    body = []
    for m in MEASURES:
        if all(m.value(row) is None for row in systems.values()):
            continue
        cells = [f"{m.label} ({m.unit})"]
        for name, row in systems.items():
            cells.append(number(m.value(row), m.unit))
            if name.startswith("project") and floor is not None:
                cells.append(ratio(m.value(row), m.value(floor)))
        body.append(cells)
    table = _markdown(header, body)
    return [*table, "", RATIO_NOTE] if floor is not None else table


def history(empty: dict[str, Any], full: dict[str, Any], rows: int) -> list[str]:
    """The project at its defaults on an empty table and on `rows` jobs of history, each
    figure with the bound the volume issue sets it and whether it holds."""
    header = ["measure", "empty table", f"{rows:,} jobs of history", "history / empty", "bound"]
    body = []
    for m, bound in HISTORY_MEASURES:
        before, after = m.value(empty), m.value(full)
        verdict = "-"
        if bound is not None:
            holds = bound.holds(m, before, after)
            verdict = bound.text() + {True: ": holds", False: ": MISSES", None: ""}[holds]
        body.append(
            [f"{m.label} ({m.unit})", number(before), number(after), ratio(after, before), verdict]
        )
    return _markdown(header, body)


def pruning(figures: dict[str, Any]) -> list[str]:
    """Drain rounds without pruning beside drain rounds while the pruner runs."""
    steady, pruning = figures["steady"], figures["pruning"]
    header = ["measure", "not pruning", "while pruning", "pruning / not"]
    body = [
        [
            "drain, median of rounds (jobs/s)",
            number(steady["drain"]),
            number(pruning["drain"]),
            ratio(pruning["drain"], steady["drain"]),
        ],
        [
            "drain, slowest round (jobs/s)",
            number(steady.get("slowest")),
            number(pruning.get("slowest")),
            ratio(pruning.get("slowest"), steady.get("slowest")),
        ],
        ["rounds", number(steady["rounds"]), number(pruning["rounds"]), "-"],
        [
            "a round stalled (unfinished after 3x the measure's cap)",
            "yes" if steady.get("stalled") else "no",
            "yes" if pruning.get("stalled") else "no",
            "-",
        ],
        ["history rows pruned", "0", number(pruning["pruned"]), "-"],
        ["pruned rows/s", "-", number(pruning["pruned_per_s"]), "-"],
        ["seconds of rounds", number(steady.get("seconds")), number(pruning.get("seconds")), "-"],
    ]
    return _markdown(header, body)
