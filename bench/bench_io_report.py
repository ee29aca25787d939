"""The I/O benchmark's tables, goal checks and chart, from its rounds (run or --replot)."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from chart import bar_chart

COLORS = {"mcpkit": "#2b6cb0", "mcpkit-fifo": "#553c9a", "mcpkit-httpx": "#90cdf4", "ts-sdk": "#2f855a", "py-sdk": "#c05621"}
PANELS = (("rps", "mcp requests per second (higher is better)"),
          ("cpu_us", "server CPU µs per mcp request, whole process tree (lower is better)"),
          ("tool_p50", "tool-call p50, ms (lower is better)"))
TOOL, NO_IO = "tool calls", "no-I/O (initialize, tools/list)"


def med(values: list[float]) -> str:
    """Median and spread: ``1,234 (1,100–1,300)``."""
    if not values:
        return "–"
    fmt = "{:,.0f}" if statistics.median(values) >= 20 else "{:.2f}"
    return f"{fmt.format(statistics.median(values))} ({fmt.format(min(values))}–{fmt.format(max(values))})"


def lat(rounds: list[dict[str, Any]], kind: str, phase: str, group: str, p: str) -> list[float]:
    return [r[kind][phase]["latency"][group][p] for r in rounds if kind in r and group in r[kind][phase]["latency"]]


def report(result: dict[str, Any], chart: Path | None) -> None:
    rounds = result["rounds"]
    kinds = [k for k in COLORS if k in rounds[0]] + [k for k in rounds[0] if k not in COLORS]
    workers = result.get("workers", {})
    loads = [r[k]["loaded"]["load"] for r in rounds for k in r]
    print(f"machine: {result.get('cpus')} CPUs, shared; load average before the windows {min(loads):.1f}–{max(loads):.1f}; "
          f"{result['users']} users, {result['seconds']:g} s measured per window, {len(rounds)} alternating rounds; "
          f"medians (min–max over the rounds)\n")
    print("| server (workers) | mcp req/s | server CPU µs / mcp req | tool call p50 / p99 ms | no-I/O p50 / p99 ms "
          "| RSS / PSS MiB | API + Redis CPU µs / req | errors |")
    print("|---|---|---|---|---|---|---|---|")
    for k in kinds:
        loaded = [r[k]["loaded"] for r in rounds]
        errors = sum(sum(x["errors"].values()) for x in loaded)
        print(f"| {k} ({workers.get(k, '?')}) | {med([x['rps'] for x in loaded])} | {med([x['cpu_us'] for x in loaded])} | "
              f"{med(lat(rounds, k, 'loaded', TOOL, 'p50'))} / {med(lat(rounds, k, 'loaded', TOOL, 'p99'))} | "
              f"{med(lat(rounds, k, 'loaded', NO_IO, 'p50'))} / {med(lat(rounds, k, 'loaded', NO_IO, 'p99'))} | "
              f"{statistics.median(x['rss_mib'] for x in loaded):.0f} / {statistics.median(x['pss_mib'] for x in loaded):.0f} | "
              f"{statistics.median(x['api_us'] + x['redis_us'] for x in loaded):.0f} | {errors} |")
    print("\nOne user (unloaded), and how much load stretches a tool call:\n")
    print("| server | tool call p50 unloaded ms | no-I/O p50 unloaded ms | server CPU µs / mcp req unloaded | tool call p50 loaded ÷ unloaded |")
    print("|---|---|---|---|---|")
    for k in kinds:
        stretch = [a / b for a, b in zip(lat(rounds, k, "loaded", TOOL, "p50"), lat(rounds, k, "unloaded", TOOL, "p50"))]
        print(f"| {k} | {med(lat(rounds, k, 'unloaded', TOOL, 'p50'))} | {med(lat(rounds, k, 'unloaded', NO_IO, 'p50'))} | "
              f"{med([r[k]['unloaded']['cpu_us'] for r in rounds])} | {med(stretch)} |")
    print("\nPer kind of request under load, p50 / p99 ms:\n")
    names = ["initialize", "notification", "search_products", "get_user_cart", "checkout", "tools/list", "delete"]
    print("| server | " + " | ".join(names) + " |\n|---|" + "---|" * len(names))
    for k in kinds:
        cells = [f"{statistics.median(lat(rounds, k, 'loaded', n, 'p50')):.1f} / {statistics.median(lat(rounds, k, 'loaded', n, 'p99')):.1f}"
                 if lat(rounds, k, "loaded", n, "p50") else "–" for n in names]
        print(f"| {k} | " + " | ".join(cells) + " |")
    goals(rounds, kinds)
    if chart is not None:
        def values(k: str, phase: str) -> dict[str, float]:
            return {"rps": statistics.median(r[k][phase]["rps"] for r in rounds),
                    "cpu_us": statistics.median(r[k][phase]["cpu_us"] for r in rounds),
                    "tool_p50": statistics.median(lat(rounds, k, phase, TOOL, "p50"))}

        groups = [(f"{result['users']} users, a session per call", [(k, values(k, "loaded")) for k in kinds]),
                  ("1 user", [(k, values(k, "unloaded")) for k in kinds])]
        chart.write_text(bar_chart(groups, {k: COLORS.get(k, "#888") for k in kinds}, PANELS, bar=56))
        print(f"\nchart: {chart}")


def goals(rounds: list[dict[str, Any]], kinds: list[str]) -> None:
    if "mcpkit" not in kinds:
        return

    def per_round(a: str, b: str, key: str) -> list[float]:
        return [r[a]["loaded"][key] / r[b]["loaded"][key] for r in rounds if a in r and b in r and r[b]["loaded"][key]]

    print("\nIssue 27's goals (per-round ratios, median (min–max)):\n")
    cpu = [r["mcpkit"]["loaded"]["cpu_us"] for r in rounds]
    stretch = [a / b for a, b in zip(lat(rounds, "mcpkit", "loaded", TOOL, "p50"), lat(rounds, "mcpkit", "unloaded", TOOL, "p50"))]
    rows = [("server CPU per mcp request ≤ 450 µs", med(cpu), statistics.median(cpu) <= 450)]
    if "ts-sdk" in kinds:
        rps, cpur = per_round("mcpkit", "ts-sdk", "rps"), per_round("mcpkit", "ts-sdk", "cpu_us")
        rows += [("req/s ≥ 2.5× the TS SDK's", med(rps), statistics.median(rps) >= 2.5),
                 ("CPU per request ≤ 0.35× the TS SDK's", med(cpur), statistics.median(cpur) <= 0.35)]
    if "py-sdk" in kinds:
        rps = per_round("mcpkit", "py-sdk", "rps")
        rows.append(("req/s ≥ 8× the Python SDK's", med(rps), statistics.median(rps) >= 8))
    rows.append(("tool-call p50 under load ≤ 5× unloaded", med(stretch), statistics.median(stretch) <= 5))
    print("| goal | measured | met |\n|---|---|---|")
    for name, value, ok in rows:
        print(f"| {name} | {value} | {'yes' if ok else 'no'} |")
