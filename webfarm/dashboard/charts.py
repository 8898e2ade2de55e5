"""The dashboard's charts as PNG pictures, drawn from webfarm.dashboard.series."""

from datetime import datetime
from typing import Any

from webfarm.core.charts import png_chart

SIZE = (7.5, 3.2)
STATE_COLOURS = {
    "queued": "#9aa5b1",
    "running": "#2f6fd0",
    "succeeded": "#2e8b57",
    "failed": "#c0392b",
    "cancelled": "#7f7f7f",
    "lost": "#e67e22",
}
TITLES = {
    "jobs": "Jobs per hour by state",
    "durations": "Job run time per hour (seconds)",
    "polls": "Progress polls per minute",
    "refusals": "Requests refused per hour",
}


def _ticks(labels: list[str], fmt: str) -> tuple[list[int], list[str]]:
    step = max(len(labels) // 8, 1)
    positions = list(range(0, len(labels), step))
    return positions, [datetime.fromisoformat(labels[i]).strftime(fmt) for i in positions]


def _frame(ax: Any, name: str, labels: list[str], fmt: str, empty: bool) -> None:
    ax.set_title(TITLES[name], loc="left", fontsize=11)
    positions, texts = _ticks(labels, fmt)
    ax.set_xticks(positions, texts, fontsize=8)
    ax.tick_params(axis="y", labelsize=8)
    ax.grid(axis="y", alpha=0.3)
    ax.set_xlim(-0.6, len(labels) - 0.4)
    if empty:
        ax.text(0.5, 0.5, "nothing counted yet", transform=ax.transAxes, ha="center", color="#888")


def render(name: str, series: dict[str, Any]) -> bytes:
    labels, lines = series["labels"], series["lines"]
    x = list(range(len(labels)))

    def stacked_bars(ax: Any, colours: dict[str, str]) -> None:
        bottom = [0.0] * len(labels)
        for line, values in lines.items():
            if any(values):
                ax.bar(x, values, bottom=bottom, label=line, color=colours.get(line), width=0.8)
                bottom = [b + v for b, v in zip(bottom, values, strict=True)]
        if any(bottom):
            ax.legend(fontsize=8, ncols=3, loc="upper left")
        _frame(ax, name, labels, "%a %H:00", not any(bottom))

    def draw(ax: Any) -> None:
        if name == "durations":
            empty = True
            for line, values in lines.items():
                points = [(i, v) for i, v in enumerate(values) if v is not None]
                if points:
                    empty = False
                    ax.plot(*zip(*points, strict=True), marker="o", markersize=3, label=line)
            if not empty:
                ax.legend(fontsize=8, loc="upper left")
                ax.set_ylim(bottom=0)
            _frame(ax, name, labels, "%a %H:00", empty)
        elif name == "polls":
            values = lines["polls"]
            ax.fill_between(x, values, step="mid", alpha=0.35, color="#2f6fd0")
            ax.step(x, values, where="mid", color="#2f6fd0")
            ax.set_ylim(bottom=0)
            _frame(ax, name, labels, "%H:%M", not any(values))
        else:
            stacked_bars(ax, STATE_COLOURS if name == "jobs" else {})

    return png_chart(draw, size=SIZE)
