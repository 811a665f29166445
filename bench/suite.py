#!/usr/bin/env python3
"""Runs Syrah's benchmark suite on OpenCL devices and writes the results.

Each benchmark measures Syrah against raw OpenCL on the same device in the
same run and appends JSON records (one per line) to the file named by
SYRAH_BENCH_JSON; this script runs them, then writes into --out:
  results.json  every record, with the date, the devices and the commands
  results.md    each benchmark's Markdown tables, as it printed them
  *.png         bandwidth against size, and per-submission cost and
                resident memory against submissions (DAG scaling)
It stops with a non-zero status if any benchmark failed (wrong results
included), after writing what it has.

usage: suite.py --bin BUILD/bench [--devices 1.0,0.0] [--quick] [--out DIR]
       suite.py --replot DIR   (plots from DIR/results.json, e.g. made on a
                                machine without matplotlib)
"""

import argparse
import datetime
import json
import os
import subprocess
import sys
import time


def device_list(info):
    out = subprocess.run([info], check=True, capture_output=True, text=True).stdout
    devices, names = [], {}
    current = None
    for line in out.splitlines():
        s = line.strip()
        if s.startswith("Device "):
            current = s.split()[1]
            devices.append(current)
        elif current and s.startswith("name ") and current not in names:
            names[current] = s[len("name "):].strip()
    return devices, names


def is_gpu(info_text, dev):
    """Whether syrah-info lists the device as a GPU."""
    block, inside = [], False
    for line in info_text.splitlines():
        s = line.strip()
        if s.startswith("Device "):
            inside = s.split()[1] == dev
            continue
        if inside:
            block.append(s)
    return any(s.startswith("aspects ") and "gpu" in s.split() for s in block)


def plan(dev, gpu, quick):
    """The commands for one device: (benchmark, arguments)."""
    if quick:
        return [
            ("bench_submit", [dev, "20000", "5000"]),
            ("bench_chains", [dev, "1000"]),
            ("bench_independent", [dev, "400", "8", "100"]),
            ("bench_bandwidth", [dev, str(16 << 20), "4096", "1"]),
            ("bench_staged", [dev, "4", "h2d", "5"]),
            ("bench_coherence", [dev]),
            ("bench_dag", [dev, "20000", "100", "2000"]),
            ("bench_apps", [dev, "1"]),
            ("bench_driver", [dev, "100"]),
            ("bench_graph", [dev, "5", "50", "3"]),
            ("bench_usm_roundtrip", [dev, "3", "4"]),
            ("bench_hop", [dev, "200", "3"]),
        ]
    return [
        ("bench_submit", [dev, "100000", "10000"]),
        # Nine rounds: single rounds on a GPU host move by a microsecond or more.
        ("bench_chains", [dev, "10000", "9"]),
        ("bench_independent", [dev, "10000", "16", "20000" if gpu else "2000"]),
        ("bench_bandwidth", [dev, str(1 << 30 if gpu else 256 << 20)]),
        ("bench_staged", [dev, "64", "h2d"]),
        ("bench_staged", [dev, "64", "d2h"]),
        ("bench_coherence", [dev]),
        ("bench_dag", [dev, "1000000", "1000", "10000"]),
        ("bench_usm_roundtrip", [dev, "9", "64"]),
        ("bench_hop", [dev, "2000", "5"]),
        # Runs on processors move more between rounds (see the raw against
        # raw runs): more rounds there.
        ("bench_apps", [dev, "4", "7"] if gpu else [dev, "2", "15"]),
    ] + ([] if gpu else [
        # Raw against raw: how finely single runs on this processor can be
        # told apart, next to the ratios above.
        ("bench_apps", [dev, "2", "15", "aa"]),
    ]) + [
        ("bench_driver", [dev]),
    ]


def style(ax, xlabel, ylabel, zero=True):
    """Labels, grid and legend of one panel."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if zero:
        ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)


def plots(records, out):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("suite: matplotlib is not installed: no PNG plots (pip install matplotlib)")
        return []
    made = []
    devices = sorted({r["device"] for r in records})

    def save(fig, file):
        fig.tight_layout()
        path = os.path.join(out, file)
        fig.savefig(path, dpi=110)
        plt.close(fig)
        return path

    for dev in devices:
        bw = [r for r in records if r["bench"] == "bandwidth" and r["device"] == dev]
        if bw:
            name = bw[0].get("device_name", dev)
            dirs = ["h2d", "d2h", "d2d", "h2h"]
            present = [d for d in dirs if any(r["direction"] == d for r in bw)]
            fig, axes = plt.subplots(1, len(present), figsize=(5.5 * len(present), 4.5), squeeze=False)
            for ax, d in zip(axes[0], present):
                series = sorted({(r["path"], r["host"]) for r in bw if r["direction"] == d})
                for path, host in series:
                    pts = sorted((r["bytes"], r["gbps"]) for r in bw if r["direction"] == d and r["path"] == path and r["host"] == host)
                    line = "-" if path.startswith("syrah") else "--"
                    label = path if host in ("none", "ordinary") and d in ("d2d", "h2h") else f"{path}, {host}"
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], line, marker="o", markersize=3, label=label)
                ax.set_xscale("log", base=2)
                ax.set_title(f"{d}")
                style(ax, "bytes", "GB/s")
            fig.suptitle(f"Bandwidth, device {dev} ({name})")
            made.append(save(fig, f"bandwidth_{dev}.png"))
        dag = sorted((r for r in records if r["bench"] == "dag" and r["device"] == dev), key=lambda r: r["submissions"])
        if dag:
            name = dag[0].get("device_name", dev)
            fig, (a1, a2, a3) = plt.subplots(1, 3, figsize=(16, 4.5))
            xs = [r["submissions"] for r in dag]
            a1.plot(xs, [r["syrah_us"] for r in dag], label="Syrah (accessors, out-of-order queue)")
            a1.plot(xs, [r["raw_us"] for r in dag], "--", label="raw OpenCL (in-order queue)")
            style(a1, "submissions", "µs per submission (window mean)")
            # Records from before Syrah and raw took turns came from two runs.
            turns = any(r.get("interleaved") for r in records if r["bench"] == "dag_summary" and r["device"] == dev)
            who = ("Syrah's windows", "raw's windows") if turns else ("Syrah run", "raw run")
            a2.plot(xs, [r["syrah_rss_mib"] for r in dag], label=who[0])
            a2.plot(xs, [r["raw_rss_mib"] for r in dag], "--", label=who[1])
            style(a2, "submissions", "resident MiB added" + (" during each side's windows" if turns else " since the run began"), zero=False)
            a3.plot(xs, [r.get("syrah_inflight", 0) for r in dag], label="Syrah")
            a3.plot(xs, [r.get("raw_inflight", 0) for r in dag], "--", label="raw")
            style(a3, "submissions", "commands in flight")
            fig.suptitle(f"DAG scaling, device {dev} ({name})")
            made.append(save(fig, f"dag_{dev}.png"))
        sub = sorted((r for r in records if r["bench"] == "submit" and r["device"] == dev), key=lambda r: r["submissions"])
        if sub:
            name = sub[0].get("device_name", dev)
            fig, ax = plt.subplots(figsize=(6, 4.5))
            xs = [r["submissions"] for r in sub]
            ax.plot(xs, [r["syrah_us"] for r in sub], marker="o", label="Syrah, two accessors")
            ax.plot(xs, [r["raw_us"] for r in sub], "--", marker="o", label="raw OpenCL, cl_mem")
            ax.plot(xs, [r["raw_svm_us"] for r in sub], ":", marker="o", label="raw OpenCL, SVM pointers")
            style(ax, "submissions", "µs per submission (batch mean)")
            ax.set_title(f"Submission cost, device {dev} ({name})")
            made.append(save(fig, f"submit_{dev}.png"))
    return made


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", help="folder with the built benchmarks")
    ap.add_argument("--replot", metavar="DIR", help="only draw the plots of DIR/results.json into DIR")
    ap.add_argument("--info", default=None, help="syrah-info (default: next to the library, or on PATH)")
    ap.add_argument("--devices", default="", help="comma-separated P.D list (default: every device)")
    ap.add_argument("--quick", action="store_true", help="small sizes, as in CI")
    ap.add_argument("--out", default="build/bench-results")
    args = ap.parse_args()
    if args.replot:
        with open(os.path.join(args.replot, "results.json")) as f:
            made = plots(json.load(f)["records"], args.replot)
        md = os.path.join(args.replot, "results.md")
        if made and os.path.exists(md):
            with open(md) as f:
                text = f.read()
            # The plots replace a section listing them, if the run wrote one.
            if "\n## Plots\n" in text:
                text = text[: text.index("\n## Plots\n")].rstrip() + "\n"
            links = "\n".join(f"![{os.path.basename(m)}]({os.path.basename(m)})" for m in made)
            with open(md, "w") as f:
                f.write(text + "\n## Plots\n\n" + links + "\n")
        print(f"suite: {len(made)} plots in {args.replot}")
        return 0
    if not args.bin:
        ap.error("--bin is required to run the suite")

    info = args.info or "syrah-info"
    info_text = subprocess.run([info], check=True, capture_output=True, text=True).stdout
    found, names = device_list(info)
    devices = [d for d in args.devices.split(",") if d] or found
    for d in devices:
        if d not in found:
            sys.exit(f"suite: device {d} is not among those found: {', '.join(found) or 'none'}")
    os.makedirs(args.out, exist_ok=True)
    jsonl = os.path.join(args.out, "records.jsonl")
    if os.path.exists(jsonl):
        os.remove(jsonl)
    env = dict(os.environ, SYRAH_BENCH_JSON=os.path.abspath(jsonl))
    started = datetime.datetime.now(datetime.timezone.utc)
    md = [
        "# Syrah benchmark suite",
        "",
        f"Run {started.strftime('%Y-%m-%d %H:%M UTC')}, {'quick' if args.quick else 'full'} sizes, "
        f"command: `{' '.join([os.path.basename(sys.argv[0])] + sys.argv[1:])}`.",
        "",
    ]
    for d in devices:
        md.append(f"- device {d}: {names.get(d, '?')}{' (GPU)' if is_gpu(info_text, d) else ''}")
    md.append("")
    commands, failures = [], []

    def run_one(bench, argv):
        cmd = [os.path.join(args.bin, bench)] + argv
        print(f"suite: {bench} {' '.join(argv)}", flush=True)
        t0 = time.time()
        p = subprocess.run(cmd, env=env, capture_output=True, text=True)
        took = time.time() - t0
        commands.append({"command": [bench] + argv, "status": p.returncode, "seconds": round(took, 1)})
        md.append(p.stdout.rstrip())
        md.append("")
        md.append(f"*`{bench} {' '.join(argv)}`: {took:.1f} s, exit status {p.returncode}*")
        md.append("")
        if p.returncode != 0:
            failures.append(f"{bench} {' '.join(argv)} (status {p.returncode}): {p.stderr.strip()[-500:]}")
            print(f"suite: FAILED {bench} {' '.join(argv)}\n{p.stderr}", flush=True)

    for d in devices:
        for bench, argv in plan(d, is_gpu(info_text, d), args.quick):
            run_one(bench, argv)
    # The two-device stencil: the first two devices chosen, or one device
    # playing both parts.
    pair = devices[:2] if len(devices) >= 2 else devices * 2
    if pair:
        gpu = any(is_gpu(info_text, d) for d in pair)
        size = "256" if args.quick else ("2048" if gpu else "1024")
        if args.quick:
            run_one("bench_stencil2", [pair[0], pair[1], size, "10"])
        else:
            run_one("bench_stencil2", [pair[0], pair[1], size, "20", "15"])
            run_one("bench_stencil2", [pair[0], pair[1], size, "20", "15", "aa"])
    records = []
    if os.path.exists(jsonl):
        with open(jsonl) as f:
            for n, line in enumerate(f, 1):
                line = line.strip()
                if line:
                    try:
                        records.append(json.loads(line))
                    except json.JSONDecodeError as e:
                        failures.append(f"record {n} of {jsonl} is not JSON: {e}")
    result = {
        "date": started.isoformat(),
        "quick": args.quick,
        "devices": {d: names.get(d, "") for d in devices},
        "commands": commands,
        "records": records,
        "failures": failures,
    }
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(result, f, indent=1)
    made = plots(records, args.out)
    if made:
        md.append("## Plots")
        md.append("")
        md.extend(f"![{os.path.basename(m)}]({os.path.basename(m)})" for m in made)
        md.append("")
    if failures:
        md.append("## Failures")
        md.append("")
        md.extend(f"- {x}" for x in failures)
    with open(os.path.join(args.out, "results.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    print(f"suite: {len(records)} records, {len(made)} plots, {len(failures)} failures; results in {args.out}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
