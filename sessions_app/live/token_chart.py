"""The geometry of a session's token chart: active tokens over time, the auto-compact limit and compaction drops.

Plain Python (no Django): takes the points a selector read from the rollout and returns coordinates a template
draws as server-rendered SVG, so the chart needs no JavaScript library and renders the same on first load and on
every live update.
"""

from __future__ import annotations

import bisect
import functools
import threading
from dataclasses import dataclass


@dataclass(frozen=True)
class Point:
    """One reading of the window's active tokens at rollout line `seq`; `drop` marks a history replacement
    (compaction, rollback, redo) rather than a model response's usage. `peak` is the value a compaction fired at
    (its tokens before): the meter counted items after the last usage reading, so the peak can be above it."""

    seq: int
    tokens: int
    drop: bool = False
    peak: int | None = None


@dataclass(frozen=True)
class Marker:
    x: float
    y_from: float
    y_to: float
    seq: int


@dataclass(frozen=True)
class LimitSegment:
    """The auto-compact limit of one context window, drawn across that window's readings only."""

    x1: float
    x2: float
    y: float
    limit: int


@dataclass(frozen=True)
class Tick:
    y: float
    label: str


@dataclass(frozen=True)
class Chart:
    width: int
    height: int
    left: int
    plot_right: float
    plot_top: int
    plot_bottom: float
    line: str  # the SVG polyline `points` attribute
    area: str  # the same line closed along the x axis, for a light fill
    limit_y: float | None
    window_y: float
    limits: tuple[LimitSegment, ...]  # each window's own limit over its readings (empty chart: none)
    drops: tuple[Marker, ...]
    ticks: tuple[Tick, ...]
    empty: bool
    last_tokens: int
    peak_tokens: int


def short_tokens(n: int) -> str:
    """12345 -> '12.3k', 272000 -> '272k', 1500000 -> '1.5M'."""
    if n >= 1_000_000:
        return f"{n / 1_000_000:.1f}M".replace(".0M", "M")
    if n >= 1000:
        return f"{n / 1000:.1f}k".replace(".0k", "k")
    return str(n)


@functools.lru_cache(maxsize=64)
def _x_axis(count: int, left: int, plot_w: int) -> tuple[tuple[float, ...], tuple[str, ...]]:
    """The x of each of `count` readings laid out evenly, and its text with the comma that follows it in the SVG
    `points` list: the same for every chart with as many readings (a full chart always has CHART_POINTS)."""
    step = plot_w / max(count - 1, 1)
    xs = tuple(round(left + i * step, 1) for i in range(count))
    return xs, tuple(f"{x}," for x in xs)


class _YTexts:
    """The y (and its text) of a token value on an axis (top, plot height, ceiling), kept between charts: a live
    chart shows nearly the same readings on the same axis at every update. Bounded: at most AXES axes of at most
    VALUES values each; a full one is replaced by a new dict (never cleared in place: a chart being laid out on
    another thread keeps the one it has)."""

    AXES = 64
    VALUES = 4096

    def __init__(self) -> None:
        self._axes: dict[tuple[int, int, int], dict[int, tuple[float, str]]] = {}
        self._lock = threading.Lock()

    def axis(self, top: int, plot_h: int, ceiling: int) -> dict[int, tuple[float, str]]:
        key = (top, plot_h, ceiling)
        with self._lock:
            values = self._axes.get(key)
            if values is None or len(values) > self.VALUES:
                if len(self._axes) >= self.AXES:
                    self._axes.clear()
                values = self._axes[key] = {}
            return values


_y_texts = _YTexts()


def chart_geometry(
    points: list[Point],
    *,
    context_window: int,
    limit: int | None,
    window_limits: tuple[tuple[int, int | None], ...] = (),
    width: int = 1200,
    height: int = 190,
    left: int = 44,
    top: int = 8,
    bottom: int = 18,
) -> Chart:
    """Lay `points` out left to right (evenly, one step per reading) on a y axis from 0 to the context window.

    A drop is drawn as a vertical segment from the previous reading (or from the drop's `peak`, the value the
    compaction fired at, when it has one) down to the value after the replacement, so the saw-tooth of compactions
    shows as it happened and each peak reaches the value that triggered it.

    `window_limits` are the past windows' own limits as (seq the window opened at, limit or None when it was not
    recorded), oldest first; readings from the last of them on, and readings with none, use `limit` (the current
    window's). Each window's limit is drawn across its own readings only.
    """
    values = [p.tokens for p in points]
    values += [p.peak for p in points if p.peak is not None]
    ceiling = max([context_window, *values] or [1]) or 1
    plot_w = width - left - 6
    plot_h = height - top - bottom

    def y_of(tokens: int) -> float:
        return round(top + plot_h * (1 - tokens / ceiling), 1)

    xs, x_texts = _x_axis(len(points), left, plot_w)
    known = _y_texts.axis(top, plot_h, ceiling)
    coords: list[tuple[float, float]] = []
    texts: list[str] = []  # "x,y" of each of coords
    drops: list[Marker] = []
    previous_y: float | None = None
    for i, point in enumerate(points):
        found = known.get(point.tokens)
        if found is None:
            y = y_of(point.tokens)
            found = known[point.tokens] = (y, f"{y}")
        y, y_text = found
        if point.drop and point.peak is not None:
            previous_y = y_of(point.peak)
        if point.drop and previous_y is not None:
            coords.append((xs[i], previous_y))
            texts.append(f"{x_texts[i]}{previous_y}")
            drops.append(Marker(x=xs[i], y_from=previous_y, y_to=y, seq=point.seq))
        coords.append((xs[i], y))
        texts.append(x_texts[i] + y_text)
        previous_y = y
    if len(coords) == 1:  # one reading: draw it as a flat line so it is visible
        coords.append((left + plot_w, coords[0][1]))
        texts.append(f"{left + plot_w},{coords[0][1]}")
    line = " ".join(texts)
    base = top + plot_h
    area = f"{coords[0][0]},{base} {line} {coords[-1][0]},{base}" if coords else ""
    ticks = tuple(Tick(y=y_of(v), label=short_tokens(v)) for v in (0, ceiling // 2, ceiling))
    segments = _limit_segments(points, xs, window_limits, limit, y_of, right=left + plot_w)
    return Chart(
        width=width, height=height, left=left, plot_right=left + plot_w, plot_top=top, plot_bottom=base,
        line=line, area=area, limit_y=y_of(limit) if limit else None, window_y=y_of(context_window),
        drops=tuple(drops), ticks=ticks, empty=not points, limits=segments,
        last_tokens=points[-1].tokens if points else 0, peak_tokens=max(values, default=0),
    )


def _limit_segments(points: list[Point], xs: tuple[float, ...], window_limits: tuple[tuple[int, int | None], ...],
                    current: int | None, y_of, *, right: float) -> tuple[LimitSegment, ...]:
    """One segment per run of readings under the same window limit: from the run's first reading to the next run's
    first (a compaction's drop), the last run to the plot's right edge."""
    if not points:
        return ()
    starts = [seq for seq, _ in window_limits]
    runs: list[tuple[int, int | None]] = []  # (index of the first reading, limit)
    for i, point in enumerate(points):
        at = bisect.bisect_right(starts, point.seq) - 1
        value = window_limits[at][1] if 0 <= at < len(window_limits) - 1 else current
        if not runs or runs[-1][1] != value:
            runs.append((i, value))
    segments = []
    for n, (first, value) in enumerate(runs):
        x2 = xs[runs[n + 1][0]] if n + 1 < len(runs) else right
        if value:
            segments.append(LimitSegment(x1=xs[first], x2=x2, y=y_of(value), limit=value))
    return tuple(segments)
