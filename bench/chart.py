"""A grouped bar chart as SVG, with no plotting library: requests/s and CPU per request."""

from __future__ import annotations

from html import escape

COLORS = {"mcpkit": "#2b6cb0", "mcpkit-hypercorn": "#90cdf4", "sdk-stateless": "#c05621", "sdk-stateful": "#f6ad55"}
PANELS = (("rps", "requests per second (higher is better)"), ("cpu_us", "server CPU µs per request (lower is better)"))


def bar_chart(groups: list[tuple[str, list[tuple[str, dict[str, float]]]]], colors: dict[str, str] | None = None,
              panels: tuple[tuple[str, str], ...] = PANELS, bar: int = 22) -> str:
    """``groups``: [(label, [(server, {"rps": ..., "cpu_us": ...}), ...]), ...]; one panel per
    (metric, title) in ``panels``, one colour per server in ``colors`` (the legend's order),
    bars ``bar`` pixels wide."""
    colors = colors or COLORS
    gap, left, panel_h, top = 34, 60, 220, 40
    width = max(left + len(groups) * (max(len(g[1]) for g in groups) * bar + gap) + 20, left + 150 * len(colors))
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{top + len(panels) * (panel_h + 70) + 30}" '
           f'font-family="sans-serif" font-size="11">', '<rect width="100%" height="100%" fill="white"/>']
    for p, (metric, title) in enumerate(panels):
        y0 = top + p * (panel_h + 70)
        peak = max(v[metric] for _, bars in groups for _, v in bars) or 1
        out.append(f'<text x="{left}" y="{y0 - 12}" font-size="13" font-weight="bold">{escape(title)}</text>')
        out.append(f'<line x1="{left}" y1="{y0 + panel_h}" x2="{width - 10}" y2="{y0 + panel_h}" stroke="#444"/>')
        for tick in range(0, 5):
            value = peak * tick / 4
            y = y0 + panel_h - panel_h * tick / 4
            label = f"{value:,.0f}" if peak >= 20 else f"{value:.1f}"
            out.append(f'<text x="{left - 6}" y="{y + 4}" text-anchor="end" fill="#555">{label}</text>')
            out.append(f'<line x1="{left}" y1="{y}" x2="{width - 10}" y2="{y}" stroke="#eee"/>')
        x = left + gap / 2
        for label, bars in groups:
            for server, values in bars:
                h = panel_h * values[metric] / peak
                out.append(f'<rect x="{x:.0f}" y="{y0 + panel_h - h:.1f}" width="{bar - 2}" height="{h:.1f}" '
                           f'fill="{colors.get(server, "#888")}"><title>{escape(server)}: {values[metric]:,.0f}</title></rect>')
                x += bar
            out.append(f'<text x="{x - len(bars) * bar / 2:.0f}" y="{y0 + panel_h + 14}" text-anchor="middle">{escape(label)}</text>')
            x += gap
    ly = top + len(panels) * (panel_h + 70) + 5
    for i, (server, color) in enumerate(colors.items()):
        out.append(f'<rect x="{left + i * 150}" y="{ly}" width="12" height="12" fill="{color}"/>'
                   f'<text x="{left + i * 150 + 16}" y="{ly + 10}">{escape(server)}</text>')
    out.append("</svg>")
    return "\n".join(out)
