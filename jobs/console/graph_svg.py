"""Job Detail's dependency graph as server-side SVG: a layered drawing computed here, no
JavaScript. Each job sits one layer below the lowest of its upstream jobs in the graph
(longest path); within a layer, jobs are ordered by the mean position of their upstream
jobs, so edges cross little. Colours follow the display state, and the text says it too."""

from __future__ import annotations

import uuid
from collections.abc import Callable

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from jobs.display import label_of, reveal_bidi
from jobs.graph import Graph, Node
from jobs.representation import short_id

NODE_W, NODE_H, GAP_X, GAP_Y, PAD = 150, 40, 14, 46, 8
# About the width of the panel on a laptop screen.
CENTRED_UP_TO = 1000
FILL = {
    "pending": "#e8eef9",
    "blocked": "#eeeeee",
    # As the pills: a paused job, like a blocked one, waits on something else.
    "paused": "#eeeeee",
    "processing": "#dbe9ff",
    "completed": "#dcf3e3",
    "retrying": "#fff1cc",
    "dlq": "#fbdad7",
    "cancelled": "#e4e4e4",
}
STROKE = {"dlq": "#b3261e", "retrying": "#9a6700", "completed": "#1e7b3c"}


def layers(graph: Graph) -> list[list[Node]]:
    """Nodes by layer, longest path from the graph's sources, ordered to cross little."""
    parents: dict[uuid.UUID, list[uuid.UUID]] = {n.id: [] for n in graph.nodes}
    for upstream, downstream in graph.edges:
        parents[downstream].append(upstream)
    depth: dict[uuid.UUID, int] = {}

    def layer_of(node_id: uuid.UUID) -> int:
        if node_id not in depth:
            depth[node_id] = 1 + max((layer_of(p) for p in parents[node_id]), default=-1)
        return depth[node_id]

    by_layer: dict[int, list[Node]] = {}
    for node in graph.nodes:
        by_layer.setdefault(layer_of(node.id), []).append(node)
    ordered: list[list[Node]] = []
    position: dict[uuid.UUID, float] = {}
    for index in sorted(by_layer):

        def mean_parent(node: Node) -> float:
            seen = [position[p] for p in parents[node.id] if p in position]
            return sum(seen) / len(seen) if seen else 0.0

        row = sorted(by_layer[index], key=lambda n: (mean_parent(n), str(n.id)))
        position.update({n.id: i - (len(row) - 1) / 2 for i, n in enumerate(row)})
        ordered.append(row)
    return ordered


def graph_svg(graph: Graph, url_of: Callable[[uuid.UUID], str]) -> SafeString:
    rows = layers(graph)
    widest = max(len(row) for row in rows)
    width = widest * (NODE_W + GAP_X) - GAP_X + 2 * PAD
    height = len(rows) * (NODE_H + GAP_Y) - GAP_Y + 2 * PAD
    place: dict[uuid.UUID, tuple[int, int]] = {}
    for r, row in enumerate(rows):
        # Narrower layers are centred, unless the graph is wider than a panel: it scrolls
        # then, and a centred layer (this job, a fan-out's root) would start off-screen.
        spare = width - 2 * PAD - (len(row) * (NODE_W + GAP_X) - GAP_X)
        left = PAD + (spare // 2 if width <= CENTRED_UP_TO else 0)
        for i, node in enumerate(row):
            place[node.id] = (left + i * (NODE_W + GAP_X), PAD + r * (NODE_H + GAP_Y))
    edges = format_html_join(
        "",
        '<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="#8a8f98" '
        'stroke-width="1.2" marker-end="url(#arrow)"/>',
        (
            (
                place[u][0] + NODE_W // 2,
                place[u][1] + NODE_H,
                place[d][0] + NODE_W // 2,
                place[d][1] - 2,
            )
            for u, d in graph.edges
        ),
    )
    nodes = format_html_join(
        "",
        '<a href="{}" class="graph-node{}" data-state="{}"><title>{} {}: {}{}</title>'
        '<rect x="{}" y="{}" width="{}" height="{}" rx="6" fill="{}" stroke="{}" '
        'stroke-width="{}"/><text x="{}" y="{}" font-size="12" text-anchor="middle">'
        "{}</text>"
        '<text x="{}" y="{}" font-size="11" text-anchor="middle" fill="#444">'
        "{} · {}</text></a>",
        (
            (
                url_of(n.id),
                # Outlined in the theme's text colour by console.css; the stroke below is
                # what an SVG shown without the stylesheet draws.
                " current" if n.id == graph.job_id else "",
                n.display_state,
                reveal_bidi(n.type),
                n.id,
                label_of(n.display_state),
                " (waiting on a dead letter)" if n.waiting_on_dlq else "",
                place[n.id][0],
                place[n.id][1],
                NODE_W,
                NODE_H,
                FILL.get(n.display_state, "#ffffff"),
                "#1b1f24" if n.id == graph.job_id else STROKE.get(n.display_state, "#9aa0a6"),
                3 if n.id == graph.job_id else 1,
                place[n.id][0] + NODE_W // 2,
                place[n.id][1] + 16,
                reveal_bidi(n.type[:20]),
                place[n.id][0] + NODE_W // 2,
                place[n.id][1] + 32,
                short_id(n.id),
                label_of(n.display_state) + (" ⚠" if n.waiting_on_dlq else ""),
            )
            for n in graph.nodes
        ),
    )
    return format_html(
        '<svg class="job-graph" role="img" aria-label="Dependency graph: {} jobs" '
        'viewBox="0 0 {} {}" width="{}" height="{}">'
        '<defs><marker id="arrow" viewBox="0 0 8 8" refX="7" refY="4" markerWidth="7" '
        'markerHeight="7" orient="auto"><path d="M0,0 L8,4 L0,8 z" fill="#8a8f98"/></marker>'
        "</defs>{}{}</svg>",
        len(graph.nodes),
        width,
        height,
        # Drawn at its own size, in a panel that scrolls sideways: scaled to fit, a fan-out
        # of 50 became a strip of 15-pixel boxes.
        width,
        height,
        edges,
        nodes,
    )
