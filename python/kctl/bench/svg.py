"""Small SVG charts for fleet reports: lines (step or straight), grouped bars, a histogram.

Hand-written SVG keeps the report self-contained and byte-for-byte reproducible, with no plotting
library to install on a cluster's driver. Each function returns one ``<svg>`` element.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from html import escape

WIDTH, HEIGHT = 640, 360
LEFT, RIGHT, TOP, BOTTOM = 64, 160, 36, 48
COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")
Series = Mapping[str, tuple[Sequence[float], Sequence[float]]]


def _ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values covering [low, high]."""
    if high <= low:
        high = low + 1.0
    raw = (high - low) / count
    step = 10 ** math.floor(math.log10(raw))
    step *= next(m for m in (1, 2, 2.5, 5, 10) if step * m >= raw)
    first = math.floor(low / step) * step
    return [first + i * step for i in range(int(math.ceil((high - first) / step)) + 1)]


def _number(value: float) -> str:
    for unit, size in (("M", 1e6), ("k", 1e3)):
        if abs(value) >= size:
            return f"{value / size:.3g}{unit}"
    return f"{value:.3g}"


class _Frame:
    """Axes, labels and the mapping from data to pixels."""

    def __init__(self, title: str, xlabel: str, ylabel: str, xs: Sequence[float], ys: Sequence[float],
                 from_zero: bool = True) -> None:
        self.xticks = _ticks(min(xs, default=0.0), max(xs, default=1.0))
        low = min(ys, default=0.0)
        self.yticks = _ticks(min(0.0, low) if from_zero else low, max(ys, default=1.0))
        self.parts = [
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
            f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="11">',
            f"<title>{escape(title)}</title>",
            f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
            f'<text x="{LEFT}" y="20" font-size="13" font-weight="bold">{escape(title)}</text>',
            f'<text x="{(LEFT + WIDTH - RIGHT) / 2}" y="{HEIGHT - 10}" text-anchor="middle">{escape(xlabel)}</text>',
            f'<text transform="translate(14 {(TOP + HEIGHT - BOTTOM) / 2}) rotate(-90)" '
            f'text-anchor="middle">{escape(ylabel)}</text>',
        ]
        for y in self.yticks:
            py = self.y(y)
            self.parts.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{py:.1f}" y2="{py:.1f}" stroke="#ddd"/>')
            self.parts.append(f'<text x="{LEFT - 6}" y="{py + 4:.1f}" text-anchor="end">{_number(y)}</text>')

    def x_axis(self) -> None:
        for x in self.xticks:
            px = self.x(x)
            self.parts.append(f'<line x1="{px:.1f}" x2="{px:.1f}" y1="{HEIGHT - BOTTOM}" y2="{HEIGHT - BOTTOM + 4}" '
                              'stroke="#333"/>')
            self.parts.append(f'<text x="{px:.1f}" y="{HEIGHT - BOTTOM + 16}" text-anchor="middle">{_number(x)}</text>')
        self.parts.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{HEIGHT - BOTTOM}" y2="{HEIGHT - BOTTOM}" '
                          'stroke="#333"/>')

    def x(self, value: float) -> float:
        low, high = self.xticks[0], self.xticks[-1]
        return LEFT + (value - low) / (high - low) * (WIDTH - LEFT - RIGHT)

    def y(self, value: float) -> float:
        low, high = self.yticks[0], self.yticks[-1]
        return HEIGHT - BOTTOM - (value - low) / (high - low) * (HEIGHT - TOP - BOTTOM)

    def legend(self, labels: Sequence[str]) -> None:
        for i, label in enumerate(labels):
            y = TOP + 8 + 18 * i
            color = COLORS[i % len(COLORS)]
            self.parts.append(f'<rect x="{WIDTH - RIGHT + 12}" y="{y - 8}" width="12" height="12" fill="{color}"/>')
            self.parts.append(f'<text x="{WIDTH - RIGHT + 30}" y="{y + 2}">{escape(label)}</text>')

    def svg(self) -> str:
        return "\n".join([*self.parts, "</svg>"])


def line_chart(title: str, xlabel: str, ylabel: str, series: Series, step: bool = False) -> str:
    """One line per series; ``step`` draws each value until the next x (an ECDF, a sampled count).
    The y axis starts at the lowest value, not at zero."""
    xs = [x for xv, _ in series.values() for x in xv]
    ys = [y for _, yv in series.values() for y in yv]
    frame = _Frame(title, xlabel, ylabel, xs, ys, from_zero=False)
    frame.x_axis()
    for i, (xv, yv) in enumerate(series.values()):
        points: list[tuple[float, float]] = []
        for j, (x, y) in enumerate(zip(xv, yv)):
            if step and j:
                points.append((x, yv[j - 1]))
            points.append((x, y))
        path = " ".join(f"{frame.x(x):.1f},{frame.y(y):.1f}" for x, y in points)
        frame.parts.append(f'<polyline fill="none" stroke="{COLORS[i % len(COLORS)]}" stroke-width="1.8" '
                           f'points="{path}"/>')
    frame.legend(list(series))
    return frame.svg()


def bar_chart(title: str, ylabel: str, categories: Sequence[str], series: Mapping[str, Sequence[float]]) -> str:
    """Grouped bars: one group per category, one bar per series."""
    frame = _Frame(title, "", ylabel, [0.0, 1.0], [v for values in series.values() for v in values])
    group = (WIDTH - LEFT - RIGHT) / max(1, len(categories))
    bar = group * 0.8 / max(1, len(series))
    for c, category in enumerate(categories):
        x0 = LEFT + c * group + group * 0.1
        frame.parts.append(f'<text x="{x0 + group * 0.4:.1f}" y="{HEIGHT - BOTTOM + 16}" '
                           f'text-anchor="middle">{escape(category)}</text>')
        for s, values in enumerate(series.values()):
            top, base = frame.y(values[c]), frame.y(0.0)
            frame.parts.append(f'<rect x="{x0 + s * bar:.1f}" y="{top:.1f}" width="{bar * 0.95:.1f}" '
                               f'height="{max(0.0, base - top):.1f}" fill="{COLORS[s % len(COLORS)]}"/>')
    frame.parts.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{frame.y(0.0):.1f}" y2="{frame.y(0.0):.1f}" '
                       'stroke="#333"/>')
    frame.legend(list(series))
    return frame.svg()


def histogram(title: str, xlabel: str, values: Sequence[float], bins: int = 30) -> str:
    """Counts of ``values`` in ``bins`` equal-width bins, with a line at zero."""
    low, high = min(values, default=0.0), max(values, default=1.0)
    if high <= low:
        low, high = low - 0.5, high + 0.5
    width = (high - low) / bins
    counts = [0] * bins
    for v in values:
        counts[min(bins - 1, int((v - low) / width))] += 1
    frame = _Frame(title, xlabel, "runs", [low, high], [float(c) for c in counts])
    frame.x_axis()
    for i, count in enumerate(counts):
        left, right = frame.x(low + i * width), frame.x(low + (i + 1) * width)
        top, base = frame.y(count), frame.y(0.0)
        frame.parts.append(f'<rect x="{left:.1f}" y="{top:.1f}" width="{max(0.5, right - left - 1):.1f}" '
                           f'height="{base - top:.1f}" fill="{COLORS[0]}"/>')
    if low < 0 < high:
        frame.parts.append(f'<line x1="{frame.x(0.0):.1f}" x2="{frame.x(0.0):.1f}" y1="{TOP}" y2="{HEIGHT - BOTTOM}" '
                           'stroke="#333" stroke-dasharray="4 3"/>')
    return frame.svg()
