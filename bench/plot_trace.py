#!/usr/bin/env python3
"""Draws a SYRAH_TRACE file as a timeline picture: one row per device lane
(and host-task worker), one bar per command, coloured by kind.

    python3 bench/plot_trace.py trace.json out.png [--from US] [--to US]
                                [--span-from N]

--from/--to cut a window, in microseconds from the first command.
--span-from N also prints, per device, the time from the start of its
N-th kernel (1-based) to the end of its last one.
Needs matplotlib (pip install matplotlib).
"""
import argparse
import json
import sys

COLOURS = {
    "kernel": "#3b7dd8",
    "copy": "#e8943a",
    "fill": "#9b59b6",
    "host task": "#2e9e5b",
    "staging": "#c0392b",
    "other": "#999999",
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("png")
    ap.add_argument("--from", dest="start", type=float, default=None)
    ap.add_argument("--to", dest="end", type=float, default=None)
    ap.add_argument("--title", default=None)
    ap.add_argument("--span-from", dest="span_from", type=int, default=None)
    a = ap.parse_args()
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.patches import Patch
    except ImportError:
        print("plot_trace: matplotlib is missing (pip install matplotlib)", file=sys.stderr)
        return 2
    with open(a.trace) as f:
        events = json.load(f)
    procs, threads, spans = {}, {}, []
    for e in events:
        if e.get("ph") == "M" and e["name"] == "process_name":
            procs[e["pid"]] = e["args"]["name"]
        elif e.get("ph") == "M" and e["name"] == "thread_name":
            threads[(e["pid"], e["tid"])] = e["args"]["name"]
        elif e.get("ph") == "X":
            spans.append(e)
    if not spans:
        print(f"plot_trace: {a.trace} has no commands", file=sys.stderr)
        return 1
    if a.span_from is not None:
        for pid in sorted({s["pid"] for s in spans}):
            ks = sorted((s for s in spans if s["pid"] == pid and s.get("cat") == "kernel"), key=lambda s: s["ts"])
            if len(ks) < a.span_from or a.span_from < 1:
                print(f"{procs.get(pid, pid)}: {len(ks)} kernels, fewer than {a.span_from}")
                continue
            first, last = ks[a.span_from - 1], ks[-1]
            span = (last["ts"] + last["dur"] - first["ts"]) / 1000
            print(f"{procs.get(pid, pid)}: kernels {a.span_from}..{len(ks)} took {span:.2f} ms")
    t0 = min(s["ts"] for s in spans)
    lo = a.start if a.start is not None else 0.0
    hi = a.end if a.end is not None else max(s["ts"] + s["dur"] for s in spans) - t0
    shown = [s for s in spans if s["ts"] - t0 + s["dur"] >= lo and s["ts"] - t0 <= hi]
    rows = sorted({(s["pid"], s["tid"]) for s in shown})
    index = {r: i for i, r in enumerate(rows)}
    fig, ax = plt.subplots(figsize=(12, 0.5 * len(rows) + 2.2))
    for s in shown:
        y = index[(s["pid"], s["tid"])]
        start = max(s["ts"] - t0, lo)
        width = max(min(s["ts"] - t0 + s["dur"], hi) - start, (hi - lo) / 2000)
        ax.barh(y, width, left=start, height=0.7, color=COLOURS.get(s.get("cat"), "#999999"))
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels(
        [f"{procs.get(p, p)} / {threads.get((p, t), t)}" for p, t in rows], fontsize=7
    )
    ax.invert_yaxis()
    ax.set_xlim(lo, hi)
    ax.set_xlabel("µs from the first command")
    ax.set_title(a.title or a.trace, fontsize=9)
    ax.legend(
        handles=[Patch(color=c, label=k) for k, c in COLOURS.items()],
        fontsize=7,
        loc="upper center",
        bbox_to_anchor=(0.5, -0.28),
        ncol=5,
        frameon=False,
    )
    fig.tight_layout()
    fig.savefig(a.png, dpi=110)
    print(f"plot_trace: {len(shown)} commands on {len(rows)} rows -> {a.png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
