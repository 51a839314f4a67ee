"""A picture of a submission, drawn from the `picture` an evaluator puts
in its report block (hills-report(5), PICTURE): circles and rectangles in
a box, such as a circle packing or a bin packing, drawn by matplotlib as
SVG for `hills show --picture` and the journal."""

from __future__ import annotations

import io

from . import numbers
from ..base.errors import EnvironmentProblem

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# Shapes drawn at most: a picture is a glance, not a data dump.
MAX_SHAPES = 20000
FILL = "#1f77b4"


def _numbers(row: object, count: int) -> list[float] | None:
    if not isinstance(row, list) or len(row) != count or not all(numbers.is_number(v) for v in row):
        return None
    return [float(v) for v in row]


def of(report: dict[str, Any]) -> dict[str, Any] | None:
    """The report's picture in the shape `draw` takes, or None when it has
    none or it is malformed: {box, circles, rectangles, title}."""
    block = report.get("report")
    picture = block.get("picture") if isinstance(block, dict) else None
    if not isinstance(picture, dict):
        return None
    circles = [c for c in (_numbers(row, 3) for row in picture.get("circles") or []) if c and c[2] >= 0]
    rectangles = [r for r in (_numbers(row, 4) for row in picture.get("rectangles") or [])
                  if r and r[2] >= 0 and r[3] >= 0]
    if not circles and not rectangles:
        return None
    box = _numbers(picture.get("box"), 4)
    title = picture.get("title")
    return {"box": box, "circles": circles[:MAX_SHAPES], "rectangles": rectangles[:MAX_SHAPES],
            "title": title if isinstance(title, str) else None}


def describe(picture: dict[str, Any]) -> str:
    parts = []
    if picture["circles"]:
        parts.append(f"{len(picture['circles'])} circle(s)")
    if picture["rectangles"]:
        parts.append(f"{len(picture['rectangles'])} rectangle(s)")
    return " and ".join(parts) + (f" in the box {picture['box']}" if picture["box"] else "")


def draw(picture: dict[str, Any], size: float = 5.0) -> str:
    """The picture as an SVG document."""
    from matplotlib.patches import Circle, Rectangle

    drawing = figure(size, size)
    axes = drawing.add_subplot()
    for x, y, r in picture["circles"]:
        axes.add_patch(Circle((x, y), r, facecolor=FILL, alpha=0.35, edgecolor=FILL, linewidth=0.8))
    for x, y, w, h in picture["rectangles"]:
        axes.add_patch(Rectangle((x, y), w, h, facecolor=FILL, alpha=0.35, edgecolor=FILL, linewidth=0.8))
    box = picture["box"]
    if box:
        x0, y0, x1, y1 = box
        axes.add_patch(Rectangle((x0, y0), x1 - x0, y1 - y0, fill=False, edgecolor="#333333", linewidth=1.2))
        pad = 0.02 * max(x1 - x0, y1 - y0)
        axes.set_xlim(x0 - pad, x1 + pad)
        axes.set_ylim(y0 - pad, y1 + pad)
    else:
        axes.autoscale_view()
    axes.set_aspect("equal")
    if picture["title"]:
        axes.set_title(picture["title"], fontsize=9)
    axes.tick_params(labelsize=7)
    return svg(drawing)


def figure(width: float, height: float) -> Any:
    """A matplotlib Figure on the SVG canvas, without pyplot's global state."""
    try:
        import matplotlib
    except ModuleNotFoundError:
        raise EnvironmentProblem("'hills journal' draws its plots with matplotlib, which is not installed",
                                 hint="install it: pip install 'hills[journal]'") from None
    matplotlib.rcParams["svg.hashsalt"] = "hills-journal"  # the same page for the same logs
    matplotlib.rcParams["svg.fonttype"] = "none"  # text stays text: small, selectable
    from matplotlib.backends.backend_svg import FigureCanvasSVG
    from matplotlib.figure import Figure

    made = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasSVG(made)
    return made


def svg(drawing: Any) -> str:
    out = io.StringIO()
    drawing.savefig(out, format="svg", metadata={"Date": None})
    text = out.getvalue()
    return text[text.index("<svg"):]
