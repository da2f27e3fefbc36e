"""The SVG chart of recall by age: one pair of bars per age bucket, evertalk beside the
baseline, written as plain SVG text (no plotting library)."""

from __future__ import annotations

from html import escape
from typing import Final

from evertalk.recall.report import Report
from evertalk.recall.scoring import bucket_order

WIDTH: Final = 640
HEIGHT: Final = 360
LEFT, RIGHT, TOP, BOTTOM = 56, 16, 48, 64
COLOURS: Final = {"evertalk": "#2f6fdf", "baseline": "#b0b0b0"}


def recall_by_age_svg(report: Report) -> str:
    sides = (report.evertalk, report.baseline)
    groups = [side.by("bucket") for side in sides]
    buckets = sorted({name for group in groups for name in group}, key=bucket_order)
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">',
        f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
        f'<text x="{LEFT}" y="20" font-size="14">{escape(_title(report))}</text>',
    ]
    for tick in range(0, 101, 25):
        y = TOP + plot_h - plot_h * tick / 100
        parts.append(
            f'<line x1="{LEFT}" y1="{y:.1f}" x2="{WIDTH - RIGHT}" y2="{y:.1f}" stroke="#e4e4e4"/>'
        )
        parts.append(f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{tick}%</text>')
    slot = plot_w / max(len(buckets), 1)
    bar = slot * 0.35
    for k, name in enumerate(buckets):
        x0 = LEFT + slot * k + slot * 0.15
        for s, (side, group) in enumerate(zip(sides, groups, strict=True)):
            right, asked = group.get(name, (0, 0))
            if not asked:
                continue
            height = plot_h * right / asked
            x, y = x0 + s * bar, TOP + plot_h - height
            parts.append(
                f'<rect x="{x:.1f}" y="{y:.1f}" width="{bar:.1f}" height="{height:.1f}" '
                f'fill="{COLOURS[side.name]}"><title>{side.name} {escape(name)}: '
                f"{right}/{asked}</title></rect>"
            )
        label_x = LEFT + slot * k + slot / 2
        parts.append(
            f'<text x="{label_x:.1f}" y="{TOP + plot_h + 16}" text-anchor="middle">'
            f"{escape(name)}</text>"
        )
    parts.append(
        f'<text x="{LEFT + plot_w / 2:.1f}" y="{HEIGHT - 28}" text-anchor="middle">'
        "age (log messages before the question)</text>"
    )
    for s, side in enumerate(sides):
        x = LEFT + s * 110
        parts.append(
            f'<rect x="{x}" y="{HEIGHT - 16}" width="10" height="10" fill="{COLOURS[side.name]}"/>'
        )
        parts.append(f'<text x="{x + 14}" y="{HEIGHT - 7}">{side.name}</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def _title(report: Report) -> str:
    source = f"dataset {report.dataset}" if report.dataset else f"seed {report.seed}"
    return f"recall by age · {report.model} · {source} · {report.messages:,} messages"
