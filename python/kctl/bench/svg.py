"""Small SVG charts for fleet reports: lines (step or straight), grouped bars, a histogram.

Hand-written SVG keeps the report self-contained and byte-for-byte reproducible, with no plotting
library to install on a cluster's driver. Each function returns one ``<svg>`` element. Numbers on
the axes are written by :func:`kctl.bench.numbers.fmt`, as in the report's tables.

A distribution axis is logarithmic when its data are :func:`skewed`; such an axis says so in its
label. Series of a line chart that coincide exactly are all drawn, the later ones dashed on top of
the first and named "identical to" it in the legend, instead of one hiding the other.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from html import escape

from kctl.bench.numbers import fmt
from kctl.bench.stats import CONFIDENCE

WIDTH, HEIGHT = 640, 360
LEFT, RIGHT, TOP, BOTTOM = 64, 160, 36, 48
COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")
DASHES = ("7 5", "2 4", "10 4 2 4")
"""Dash patterns of series identical to an earlier one, in turn."""
LOG_RATIO = 100.0
"""A distribution axis is logarithmic when none of its values is negative and the largest is at
least this many times the smallest positive one."""
MAX_DECADES = 8
"""At most this many labelled powers of ten on a logarithmic axis (every other one beyond)."""
Series = Mapping[str, tuple[Sequence[float], Sequence[float]]]


def skewed(values: Sequence[float]) -> bool:
    """Whether an axis showing ``values`` is logarithmic (see :data:`LOG_RATIO`)."""
    positive = [v for v in values if v > 0]
    return bool(positive) and min(values) >= 0 and max(positive) >= LOG_RATIO * min(positive)


def _ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values covering [low, high]."""
    if high <= low:
        high = low + 1.0
    raw = (high - low) / count
    step = 10 ** math.floor(math.log10(raw))
    step *= next(m for m in (1, 2, 2.5, 5, 10) if step * m >= raw)
    first = math.floor(low / step) * step
    return [first + i * step for i in range(int(math.ceil((high - first) / step)) + 1)]


class Axis:
    """The range and ticks of one axis, and where a value falls along it (0 at its start, 1 at its
    end). A logarithmic axis starts at half its smallest positive value, so that value stays
    visible; values ≤ 0 are drawn at its start. Its ticks are powers of ten."""

    def __init__(self, values: Sequence[float], log: bool = False, from_zero: bool = False) -> None:
        positive = [v for v in values if v > 0]
        self.log = log and bool(positive)
        self.clamps = self.log and len(positive) < len(values)
        if self.log:
            self.low = min(positive) / 2
            first, last = math.ceil(math.log10(self.low)), math.ceil(math.log10(max(positive)))
            step = max(1, math.ceil((last - first) / MAX_DECADES))
            self.ticks = [10.0 ** (first + k * step) for k in range(math.ceil((last - first) / step) + 1)]
        else:
            low = min(values, default=0.0)
            self.ticks = _ticks(min(0.0, low) if from_zero else low, max(values, default=1.0))
            self.low = self.ticks[0]
        self.high = self.ticks[-1]

    def at(self, value: float) -> float:
        if self.log:
            return math.log10(max(value, self.low) / self.low) / math.log10(self.high / self.low)
        return (value - self.low) / (self.high - self.low)

    def label(self, text: str) -> str:
        if not self.log:
            return text
        return f"{text} (log scale{', 0 drawn at its start' if self.clamps else ''})"


class _Frame:
    """Title, axes, grid lines, legend and the mapping from data to pixels."""

    def __init__(self, title: str, xlabel: str, ylabel: str, x: Axis | None, y: Axis) -> None:
        self.xaxis, self.yaxis = x, y
        self.legend_y = TOP + 8
        self.parts = [
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
            f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="11">',
            f"<title>{escape(title)}</title>",
            f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
            f'<text x="{LEFT}" y="20" font-size="13" font-weight="bold">{escape(title)}</text>',
            f'<text x="{(LEFT + WIDTH - RIGHT) / 2}" y="{HEIGHT - 10}" text-anchor="middle">'
            f"{escape(x.label(xlabel) if x is not None else xlabel)}</text>",
            f'<text transform="translate(14 {(TOP + HEIGHT - BOTTOM) / 2}) rotate(-90)" '
            f'text-anchor="middle">{escape(y.label(ylabel))}</text>',
        ]
        for tick in y.ticks:
            py = self.y(tick)
            self.parts.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{py:.1f}" y2="{py:.1f}" stroke="#ddd"/>')
            self.parts.append(f'<text x="{LEFT - 6}" y="{py + 4:.1f}" text-anchor="end">{fmt(tick)}</text>')
        if x is not None:
            for tick in x.ticks:
                px = self.x(tick)
                self.parts.append(f'<line x1="{px:.1f}" x2="{px:.1f}" y1="{HEIGHT - BOTTOM}" '
                                  f'y2="{HEIGHT - BOTTOM + 4}" stroke="#333"/>')
                self.parts.append(f'<text x="{px:.1f}" y="{HEIGHT - BOTTOM + 16}" '
                                  f'text-anchor="middle">{fmt(tick)}</text>')
            self.parts.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{HEIGHT - BOTTOM}" '
                              f'y2="{HEIGHT - BOTTOM}" stroke="#333"/>')

    def x(self, value: float) -> float:
        assert self.xaxis is not None
        return LEFT + self.xaxis.at(value) * (WIDTH - LEFT - RIGHT)

    def y(self, value: float) -> float:
        return HEIGHT - BOTTOM - self.yaxis.at(value) * (HEIGHT - TOP - BOTTOM)

    def legend(self, label: str, color: str, dash: str | None = None, note: str = "") -> None:
        """One legend entry: a line (dashed if ``dash``) or, for bars (``dash`` of ""), a square;
        ``note`` goes on a second, smaller line."""
        x, y = WIDTH - RIGHT + 12, self.legend_y
        if dash == "":
            self.parts.append(f'<rect x="{x}" y="{y - 8}" width="12" height="12" fill="{color}"/>')
        else:
            pattern = f' stroke-dasharray="{dash}"' if dash else ""
            self.parts.append(f'<line x1="{x - 4}" x2="{x + 14}" y1="{y - 2}" y2="{y - 2}" stroke="{color}" '
                              f'stroke-width="2.5"{pattern}/>')
        self.parts.append(f'<text x="{x + 18}" y="{y + 2}">{escape(label)}</text>')
        if note:
            self.legend_y += 13
            self.parts.append(f'<text x="{x + 18}" y="{self.legend_y + 2}" font-size="9" fill="#555">'
                              f"{escape(note)}</text>")
        self.legend_y += 18

    def svg(self) -> str:
        return "\n".join([*self.parts, "</svg>"])


def identical_to(series: Series) -> dict[str, str]:
    """Each series whose points equal an earlier series' exactly → the first series with them."""
    first: dict[tuple[tuple[float, ...], tuple[float, ...]], str] = {}
    twins = {}
    for name, (xv, yv) in series.items():
        points = (tuple(xv), tuple(yv))
        if points in first:
            twins[name] = first[points]
        else:
            first[points] = name
    return twins


def line_chart(title: str, xlabel: str, ylabel: str, series: Series, step: bool = False,
               distribution: bool = False) -> str:
    """One line per series; ``step`` draws each value until the next x (an ECDF, a sampled count).
    The y axis starts at the lowest value, not at zero. A ``distribution``'s x axis (values, not
    time) is logarithmic when they are :func:`skewed`."""
    xs = [x for xv, _ in series.values() for x in xv]
    ys = [y for _, yv in series.values() for y in yv]
    frame = _Frame(title, xlabel, ylabel, Axis(xs, log=distribution and skewed(xs)), Axis(ys))
    twins = identical_to(series)
    for i, (name, (xv, yv)) in enumerate(series.items()):
        points: list[tuple[float, float]] = []
        for j, (x, y) in enumerate(zip(xv, yv)):
            if step and j:
                points.append((x, yv[j - 1]))
            points.append((x, y))
        path = " ".join(f"{frame.x(x):.1f},{frame.y(y):.1f}" for x, y in points)
        color = COLORS[i % len(COLORS)]
        dash = DASHES[sum(1 for other in list(series)[:i] if other in twins) % len(DASHES)] if name in twins else None
        note = f"identical to {twins[name]}" if name in twins else ""
        pattern = f' stroke-dasharray="{dash}"' if dash else ""
        frame.parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="{2.2 if dash else 1.8}" '
                           f'points="{path}"{pattern}><title>{escape(name)}'
                           f"{escape(f' ({note})') if note else ''}</title></polyline>")
        frame.legend(name, color, dash, note)
    return frame.svg()


def bar_chart(title: str, ylabel: str, categories: Sequence[str], series: Mapping[str, Sequence[float]]) -> str:
    """Grouped bars: one group per category, one bar per series. The y axis is logarithmic when
    the values are :func:`skewed`; bars then rise from its start."""
    heights = [v for values in series.values() for v in values]
    yaxis = Axis(heights, log=skewed(heights), from_zero=True)
    frame = _Frame(title, "", ylabel, None, yaxis)
    base = frame.y(yaxis.low if yaxis.log else 0.0)
    group = (WIDTH - LEFT - RIGHT) / max(1, len(categories))
    bar = group * 0.8 / max(1, len(series))
    for c, category in enumerate(categories):
        x0 = LEFT + c * group + group * 0.1
        frame.parts.append(f'<text x="{x0 + group * 0.4:.1f}" y="{HEIGHT - BOTTOM + 16}" '
                           f'text-anchor="middle">{escape(category)}</text>')
        for s, (name, values) in enumerate(series.items()):
            top = frame.y(values[c])
            frame.parts.append(f'<rect x="{x0 + s * bar:.1f}" y="{top:.1f}" width="{bar * 0.95:.1f}" '
                               f'height="{max(0.0, base - top):.1f}" fill="{COLORS[s % len(COLORS)]}">'
                               f"<title>{escape(name)}: {fmt(values[c])}</title></rect>")
    frame.parts.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{base:.1f}" y2="{base:.1f}" stroke="#333"/>')
    for s, name in enumerate(series):
        frame.legend(name, COLORS[s % len(COLORS)], "")
    return frame.svg()


def histogram(title: str, xlabel: str, low: float, high: float, counts: Sequence[int],
              mean: float | None = None, interval: tuple[float, float] | None = None) -> str:
    """Runs counted in ``len(counts)`` equal-width bins from ``low`` to ``high``, with a dashed
    line at zero; ``mean`` is drawn as a line and its confidence ``interval`` as a band. The count
    axis is logarithmic when the counts are :func:`skewed` (one bin holding most runs)."""
    width = (high - low) / len(counts)
    filled = [float(c) for c in counts if c]  # empty bins draw nothing, on either scale
    yaxis = Axis(filled, log=skewed(filled), from_zero=True)
    frame = _Frame(title, xlabel, "runs", Axis([low, high]), yaxis)
    base = frame.y(yaxis.low if yaxis.log else 0.0)
    if interval is not None:
        left, right = (frame.x(min(high, max(low, v))) for v in interval)
        frame.parts.append(f'<rect x="{left:.1f}" y="{TOP}" width="{max(1.0, right - left):.1f}" '
                           f'height="{HEIGHT - TOP - BOTTOM}" fill="{COLORS[1]}" fill-opacity="0.15"/>')
    for i, count in enumerate(counts):
        if count:
            left, right = frame.x(low + i * width), frame.x(low + (i + 1) * width)
            top = frame.y(count)
            frame.parts.append(f'<rect x="{left:.1f}" y="{top:.1f}" width="{max(0.5, right - left - 1):.1f}" '
                               f'height="{max(0.5, base - top):.1f}" fill="{COLORS[0]}"/>')
    if low < 0 < high:
        frame.parts.append(f'<line x1="{frame.x(0.0):.1f}" x2="{frame.x(0.0):.1f}" y1="{TOP}" y2="{HEIGHT - BOTTOM}" '
                           'stroke="#333" stroke-dasharray="4 3"/>')
    if mean is not None:
        frame.parts.append(f'<line x1="{frame.x(mean):.1f}" x2="{frame.x(mean):.1f}" y1="{TOP}" '
                           f'y2="{HEIGHT - BOTTOM}" stroke="{COLORS[1]}" stroke-width="1.5"/>')
        frame.legend(f"mean {fmt(mean, signed=True)}", COLORS[1])
    if interval is not None:
        frame.legend(f"{CONFIDENCE:.0%} CI of the mean", COLORS[1], "",
                     f"{fmt(interval[0], signed=True)} to {fmt(interval[1], signed=True)}")
    return frame.svg()
