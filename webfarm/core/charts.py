"""PNG charts, for reports and the dashboard alike."""

import io
from collections.abc import Callable
from typing import Any


def png_chart(draw: Callable[[Any], None], size: tuple[float, float] = (9, 4.8)) -> bytes:
    """Render a chart with matplotlib's object API (no pyplot: no global state)."""
    # Imported here, not at the top: matplotlib costs every process that
    # imports this app about half a second, and only chart views draw.
    from matplotlib.figure import Figure

    figure = Figure(figsize=size, dpi=100, layout="constrained")
    draw(figure.add_subplot())
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return buffer.getvalue()
