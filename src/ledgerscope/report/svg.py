"""Inline SVG charts for the HTML report: a line chart with intervals, bars, a histogram, a strip.

Our own small writer rather than a plotting library: it installs nothing, a chart is a few
kilobytes of text inside the page (so the file opens offline and prints), its labels stay
selectable text, and every string it writes goes through :func:`esc`, so escaping is ours to
check. Meaning never rests on colour alone: series differ in dash and marker, cells carry glyphs.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

from ledgerscope.common.safe_text import safe

AXIS = "#555"
GRID = "#ddd"


def esc(text: object) -> str:
    """Text for HTML or SVG: control and bidi characters shown as escapes, markup characters escaped."""
    return html.escape(safe(str(text)), quote=True)


@dataclass(frozen=True)
class Series:
    name: str
    values: Sequence[float | None]
    lows: Sequence[float | None]
    highs: Sequence[float | None]
    colour: str
    dash: str = ""
    marker: str = "circle"  # circle | square


def _marker(kind: str, x: float, y: float, colour: str, r: float = 3.5) -> str:
    if kind == "square":
        return (
            f'<rect x="{x - r:.1f}" y="{y - r:.1f}" width="{2 * r:.1f}" height="{2 * r:.1f}" '
            f'fill="{colour}"/>'
        )
    return f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{r:.1f}" fill="{colour}"/>'


def _open(width: int, height: int, title: str, element_id: str | None) -> str:
    ident = f' id="{esc(element_id)}"' if element_id else ""
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg"{ident} viewBox="0 0 {width} {height}" width="{width}" '
        f'height="{height}" role="img" aria-label="{esc(title)}" font-family="system-ui, sans-serif" '
        f'font-size="11"><title>{esc(title)}</title>'
    )


def line_chart(
    x_labels: Sequence[str],
    series: Sequence[Series],
    *,
    title: str,
    y_label: str,
    marks: Sequence[tuple[int, int, str]] = (),
    width: int = 520,
    height: int = 240,
    element_id: str | None = None,
) -> str:
    """Rates in [0, 1] per x label, each point with its interval as a whisker; ``marks`` rings
    (series index, x index) with a label (e.g. the worst phase)."""
    left, right, top, bottom = 44, 12, 40, 36
    pw, ph = width - left - right, height - top - bottom
    n = max(1, len(x_labels))
    offset = [(-4 + 8 * i / max(1, len(series) - 1)) if len(series) > 1 else 0 for i in range(len(series))]

    def xpos(i: int, k: int = 0) -> float:
        return left + pw * (i + 0.5) / n + offset[k]

    def ypos(v: float) -> float:
        return top + ph * (1 - v)

    out = [
        _open(width, height, title, element_id),
        f'<text x="{left}" y="14" font-weight="bold">{esc(title)}</text>',
    ]
    for tick in (0, 0.25, 0.5, 0.75, 1.0):
        y = ypos(tick)
        out.append(
            f'<line x1="{left}" x2="{left + pw}" y1="{y:.1f}" y2="{y:.1f}" stroke="{GRID}"/>'
            f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{int(tick * 100)}%</text>'
        )
    for i, label in enumerate(x_labels):
        out.append(f'<text x="{xpos(i):.1f}" y="{top + ph + 14}" text-anchor="middle">{esc(label)}</text>')
    out.append(
        f'<text x="{left + pw / 2:.1f}" y="{height - 4}" text-anchor="middle">phase</text>'
        f'<text x="12" y="{top + ph / 2:.1f}" text-anchor="middle" '
        f'transform="rotate(-90 12 {top + ph / 2:.1f})">{esc(y_label)}</text>'
        f'<line x1="{left}" x2="{left}" y1="{top}" y2="{top + ph}" stroke="{AXIS}"/>'
    )
    for k, s in enumerate(series):
        out.extend(_series(s, partial(xpos, k=k), ypos))
    for k, i, label in marks:
        v = series[k].values[i]
        if v is None:
            continue
        x, y = xpos(i, k), ypos(v)
        out.append(
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="8" fill="none" stroke="{series[k].colour}" '
            f'stroke-width="1.5"/><text x="{x:.1f}" y="{y + (20 if v > 0.85 else -11):.1f}" '
            f'text-anchor="middle" fill="{series[k].colour}">{esc(label)}</text>'
        )
    out.append(_legend(series, left + pw, 30))
    out.append("</svg>")
    return "".join(out)


def _series(s: Series, xpos: Callable[[int], float], ypos: Callable[[float], float]) -> list[str]:
    """One series of a line chart: each point's interval as a whisker, the line, the markers."""
    out = []
    points = [(xpos(i), ypos(v)) for i, v in enumerate(s.values) if v is not None]
    for i, (lo, hi) in enumerate(zip(s.lows, s.highs, strict=True)):
        if lo is not None and hi is not None:
            x = xpos(i)
            out.append(
                f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{ypos(lo):.1f}" y2="{ypos(hi):.1f}" '
                f'stroke="{s.colour}" stroke-width="1.2" opacity="0.7"/>'
            )
    if len(points) > 1:
        path = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
        dash = f' stroke-dasharray="{s.dash}"' if s.dash else ""
        out.append(
            f'<polyline points="{path}" fill="none" stroke="{s.colour}" stroke-width="2"{dash} '
            f'class="series"/>'
        )
    out.extend(_marker(s.marker, x, y, s.colour) for x, y in points)
    return out


def _legend(series: Sequence[Series], right: float, y: float) -> str:
    out, x = [], right
    for s in reversed(series):
        width = 34 + 6.5 * len(s.name)
        x -= width
        dash = f' stroke-dasharray="{s.dash}"' if s.dash else ""
        out.append(
            f'<line x1="{x:.1f}" x2="{x + 22:.1f}" y1="{y - 4}" y2="{y - 4}" stroke="{s.colour}" '
            f'stroke-width="2"{dash}/>{_marker(s.marker, x + 11, y - 4, s.colour, 3)}'
            f'<text x="{x + 26:.1f}" y="{y}">{esc(s.name)}</text>'
        )
    return "".join(out)


def bars(
    labels: Sequence[str],
    groups: Sequence[tuple[Series, Sequence[str]]],
    *,
    title: str,
    width: int = 520,
    element_id: str | None = None,
) -> str:
    """Horizontal bars in [0, 1], one row per label and one bar per series; a series' ``lows`` are
    drawn as a tick (e.g. the worst phase); each bar is labelled with its text."""
    left, bar_h, gap = 96, 11, 7
    row_h = len(groups) * bar_h + gap
    height = 30 + row_h * len(labels) + 16
    pw = width - left - 140
    out = [
        _open(width, height, title, element_id),
        f'<text x="0" y="14" font-weight="bold">{esc(title)}</text>',
    ]
    for i, label in enumerate(labels):
        y0 = 26 + i * row_h
        out.append(f'<text x="{left - 6}" y="{y0 + row_h / 2 + 1:.1f}" text-anchor="end">{esc(label)}</text>')
        for k, (s, texts) in enumerate(groups):
            v, lo = s.values[i], s.lows[i] if i < len(s.lows) else None
            y = y0 + k * bar_h
            w = pw * (v or 0)
            pattern = ' fill-opacity="0.55"' if s.dash else ""
            out.append(
                f'<rect x="{left}" y="{y:.1f}" width="{w:.1f}" height="{bar_h - 2}" fill="{s.colour}"'
                f'{pattern}/><text x="{left + w + 4:.1f}" y="{y + bar_h - 3:.1f}">'
                f"{esc(texts[i])}</text>"
            )
            if lo is not None:
                x = left + pw * lo
                out.append(
                    f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{y - 1:.1f}" y2="{y + bar_h - 1:.1f}" '
                    f'stroke="#000" stroke-width="1.5"/>'
                )
    out.append(f'<line x1="{left}" x2="{left}" y1="22" y2="{height - 14}" stroke="{AXIS}"/>')
    out.append(_legend([g[0] for g in groups], width, height - 2))
    out.append("</svg>")
    return "".join(out)


def _x_range(
    values: Sequence[float], lines: Sequence[tuple[float, str, str]], band: tuple[float, float] | None
) -> tuple[float, float]:
    """The histogram's x range: every value, line and band edge, with a margin of 4 % each side."""
    xs = [float(v) for v in values] + [x for x, _l, _d in lines] + (list(band) if band else [])
    lo, hi = (min(xs), max(xs)) if xs else (0.0, 1.0)
    if hi - lo < 1e-9:
        lo, hi = lo - 0.05, hi + 0.05
    pad = (hi - lo) * 0.04
    return lo - pad, hi + pad


def _bin_counts(values: Sequence[float], lo: float, hi: float, bins: int) -> list[int]:
    """How many values fall in each of ``bins`` equal bins over [lo, hi] (the edges clamped)."""
    counts = [0] * bins
    for v in values:
        counts[min(bins - 1, max(0, int((float(v) - lo) / (hi - lo) * bins)))] += 1
    return counts


def histogram(
    values: Sequence[float],
    *,
    title: str,
    lines: Sequence[tuple[float, str, str]] = (),
    band: tuple[float, float] | None = None,
    bins: int = 40,
    width: int = 520,
    height: int = 200,
    element_id: str | None = None,
) -> str:
    """A distribution's counts in ``bins`` bins; ``band`` shades an interval, ``lines`` are
    vertical lines (x, label, dash) such as the estimate and a tolerance."""
    left, right, top, bottom = 14, 14, 40, 34
    pw, ph = width - left - right, height - top - bottom
    lo, hi = _x_range(values, lines, band)

    def xpos(v: float) -> float:
        return left + pw * (v - lo) / (hi - lo)

    counts = _bin_counts(values, lo, hi, bins)
    top_count = max(counts) or 1
    out = [
        _open(width, height, title, element_id),
        f'<text x="{left}" y="14" font-weight="bold">{esc(title)}</text>',
    ]
    if band:
        out.append(
            f'<rect x="{xpos(band[0]):.1f}" y="{top}" width="{xpos(band[1]) - xpos(band[0]):.1f}" '
            f'height="{ph}" fill="#e5e7eb"/>'
        )
    bw = pw / bins
    for i, c in enumerate(counts):
        h = ph * c / top_count
        out.append(
            f'<rect x="{left + i * bw:.1f}" y="{top + ph - h:.1f}" width="{max(bw - 1, 0.5):.1f}" '
            f'height="{h:.1f}" fill="#64748b"/>'
        )
    for k, (x, label, dash) in enumerate(lines):
        d = f' stroke-dasharray="{dash}"' if dash else ""
        y = top - 6 if k % 2 == 0 else top + ph + 26
        anchor = "start" if xpos(x) < left + pw / 2 else "end"
        out.append(
            f'<line x1="{xpos(x):.1f}" x2="{xpos(x):.1f}" y1="{top - 4}" y2="{top + ph}" '
            'stroke="#000" '
            f'stroke-width="1.5"{d}/><text x="{xpos(x):.1f}" y="{y}" '
            f'text-anchor="{anchor}">{esc(label)}</text>'
        )
    for frac in (0, 0.5, 1):
        v = lo + (hi - lo) * frac
        out.append(
            f'<text x="{xpos(v):.1f}" y="{top + ph + 12}" text-anchor="middle" fill="{AXIS}">{v:+.2f}</text>'
        )
    out.append(f'<line x1="{left}" x2="{left + pw}" y1="{top + ph}" y2="{top + ph}" stroke="{AXIS}"/></svg>')
    return "".join(out)


@dataclass(frozen=True)
class Cell:
    glyph: str
    fill: str


def strip(
    rows: Sequence[tuple[str, str, Sequence[Sequence[Cell | None]]]],
    headers: Sequence[tuple[str, Sequence[str]]],
    *,
    title: str,
    cell: int = 15,
    label_width: int = 230,
    element_id: str | None = None,
) -> str:
    """A grid: one row per (label, hover text, groups of cells), one group of columns per header
    (name, column labels); each cell a glyph on a fill."""
    gap = 12
    width = label_width + sum(len(cols) * cell + gap for _n, cols in headers)
    height = 44 + cell * len(rows) + 4
    out = [
        _open(width, height, title, element_id),
        f'<text x="0" y="14" font-weight="bold">{esc(title)}</text><g text-anchor="middle">',
    ]
    x = label_width
    starts = []
    for name, cols in headers:
        starts.append(x)
        out.append(f'<text x="{x}" y="28" text-anchor="start">{esc(name)}</text>')
        out.extend(
            f'<text x="{x + j * cell + cell / 2:.1f}" y="40" text-anchor="middle">{esc(c)}</text>'
            for j, c in enumerate(cols)
        )
        x += len(cols) * cell + gap
    for i, (label, hover, groups) in enumerate(rows):
        y = 44 + i * cell
        out.append(
            f'<text x="{label_width - 6}" y="{y + cell - 4}" text-anchor="end">'
            f"<title>{esc(hover)}</title>{esc(safe(label, 36))}</text>"
        )
        for g, cells in enumerate(groups):
            for j, c in enumerate(cells):
                if c is None:
                    continue
                cx = starts[g] + j * cell
                out.append(
                    f'<rect x="{cx}" y="{y}" width="{cell - 1}" height="{cell - 1}" fill="{c.fill}"/>'
                    f'<text x="{cx + cell // 2}" y="{y + cell - 4}">{esc(c.glyph)}</text>'
                )
    out.append("</g></svg>")
    return "".join(out)
