"""The rebalance timeline of a chaos report, drawn with matplotlib's Agg backend (no display, no pyplot).

Top: one row per member slot, time across; bars show each process's member state, vertical lines the
group's generations, markers the faults and every assignment change. Bottom: partitions nobody owns.
Everything comes from the report, so a saved report can be drawn again.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from .scenarios import slot_name

STATE_COLOURS = {
    "stable": "#4caf50",
    "syncing": "#ffb300",
    "joining": "#fb8c00",
    "unjoined": "#e53935",
    "paused": "#9e9e9e",
    "closed": "#cfd8dc",
    "failed": "#212121",
}
# event kind -> (marker, colour, label)
EVENT_MARKERS = {
    "assignment_change": ("D", "#6a1b9a", "assignment change"),
    "crash": ("X", "#000000", "crash"),
    "close": ("|", "#000000", "close"),
    "start": (">", "#1565c0", "start"),
    "start_duplicate": (">", "#d81b60", "duplicate start"),
    "pause": ("s", "#616161", "pause"),
    "failed": ("*", "#d50000", "fenced / failed"),
}


def plot_report(report: Mapping[str, Any], path: str | Path) -> None:
    """Draws the report's timeline into a PNG file."""
    config = report["config"]
    slots = config["members"]
    fig = Figure(figsize=(14, 3 + 0.28 * slots))
    FigureCanvasAgg(fig)
    grid = fig.add_gridspec(2, 1, height_ratios=[4, 1], hspace=0.08)
    timeline = fig.add_subplot(grid[0])
    unowned = fig.add_subplot(grid[1], sharex=timeline)
    end_s = report["end_at_ms"] / 1000

    for slot, incarnation, state, start, end in report["segments"]:
        stop = end_s if end is None else end / 1000
        lane = slot - 0.35 + 0.1 * (incarnation % 2)  # a duplicate process shows beside its twin
        timeline.broken_barh([(start / 1000, stop - start / 1000)], (lane, 0.6),
                             facecolors=STATE_COLOURS.get(state, "#bdbdbd"), linewidth=0)

    _generation_lines(timeline, report, slots)
    _outages(timeline, report)
    seen: set[str] = set()
    for event in report["events"]:
        style = EVENT_MARKERS.get(event["kind"])
        if style is None or event["member"] is None:
            continue
        marker, colour, label = style
        timeline.plot(event["at_ms"] / 1000, event["member"][0], marker=marker, color=colour, markersize=7,
                      linestyle="none", label=None if label in seen else label)
        seen.add(label)

    if report["stable_at_ms"] is not None:
        timeline.axvspan(0, report["stable_at_ms"] / 1000, color="#eeeeee", zorder=0)
    timeline.set_yticks(range(slots))
    timeline.set_yticklabels([slot_name(config, s) for s in range(slots)], fontsize=7)
    timeline.set_ylim(-1, slots)
    timeline.invert_yaxis()
    timeline.set_title(_title(report), fontsize=10)
    handles = timeline.get_legend_handles_labels()[0]
    handles += [Patch(color=c, label=s) for s, c in STATE_COLOURS.items()]
    timeline.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.005, 1), fontsize=7)
    timeline.tick_params(labelbottom=False)

    points = report["unowned"]
    if points:
        xs = [t / 1000 for t, _ in points] + [end_s]
        ys = [n for _, n in points] + [points[-1][1]]
        unowned.step(xs, ys, where="post", color="#e53935")
    unowned.set_ylabel("unowned\npartitions", fontsize=8)
    clock = "simulated seconds" if config["engine"] == "sim" else "seconds"
    unowned.set_xlabel(f"{clock} since start (grey: warm-up before first stability)")
    unowned.set_xlim(0, end_s)
    fig.savefig(str(path), dpi=100, bbox_inches="tight")


def _generation_lines(ax: Any, report: Mapping[str, Any], slots: int) -> None:
    for generation in report["generations"]:
        x = generation["at_ms"] / 1000
        ax.axvline(x, color="#1565c0", linewidth=0.8, linestyle="--", alpha=0.6)
        ax.text(x, -0.6, f"g{generation['generation_id']}", fontsize=7, color="#1565c0", ha="center")


def _outages(ax: Any, report: Mapping[str, Any]) -> None:
    """Shades the coordinator's outages."""
    stops = [e["at_ms"] for e in report["events"] if e["kind"] == "stop_coordinator"]
    starts = [e["at_ms"] for e in report["events"] if e["kind"] == "start_coordinator"]
    for stop, start in zip(stops, starts, strict=False):
        ax.axvspan(stop / 1000, start / 1000, color="#ffcdd2", alpha=0.6, zorder=0, label="coordinator down")


def _title(report: Mapping[str, Any]) -> str:
    c = report["config"]
    return (f"{c['scenario']}: {c['members']} {c['membership']} members, seed {c['seed']} - "
            f"rebalances {report['rebalances']}, assignment changes {report['assignment_changes']}, "
            f"unassigned {report['unassigned_ms']} partition-ms, fenced {report['fenced']}, "
            f"unanswered {report['unanswered']}")


# event kind of a real-clients report (chaos_harness.real_chaos) -> (colour, marker)
REAL_CLIENT_MARKERS = {"start": ("g", "^"), "stop": ("k", "v"), "crash": ("r", "X"), "duplicate": ("m", "D"),
                       "rebalanced without": ("r", "o"), "fenced": ("m", "x"), "revoked": ("r", "|"),
                       "assigned": ("b", "|")}


def plot_real_clients_report(report: Mapping[str, Any], path: str | Path) -> None:
    """A real-clients chaos report: each member's line, marked where it started, stopped, crashed, lost or got
    partitions (real consumers report only what their rebalance listeners see, not a state per instant)."""
    fig = Figure(figsize=(10, 1 + 0.5 * int(report["members"])))
    FigureCanvasAgg(fig)
    axes = fig.add_subplot()
    for kind, (colour, marker) in REAL_CLIENT_MARKERS.items():
        points = [(e["at_ms"] / 1000, e["member"]) for e in report["timeline"]
                  if e["kind"] == kind and e["member"] is not None]
        if points:
            axes.scatter([x for x, _ in points], [y for _, y in points], c=colour, marker=marker, label=kind, s=60)
    axes.set_xlabel("seconds")
    axes.set_ylabel("member")
    axes.set_title(f"{report['scenario']} with {report['clients']} clients, engine {report['engine']}: "
                   f"{report['rebalances']} rebalances")
    axes.legend(loc="upper right", fontsize="small")
    fig.tight_layout()
    fig.savefig(path)
