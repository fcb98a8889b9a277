#!/usr/bin/env python3
"""`whip run` start to exit, two builds interleaved run by run, each in its own fresh
embedded store: the medians of runs 1-10, 41-50 and the last ten.

Usage: scripts/bench-run-start.py before=PATH after=PATH [--runs 150]
"""
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROGRAM = ROOT / "engine/tests/check/valid/seed_ledger_decisions.whip"


def main() -> None:
    args = sys.argv[1:]
    runs = 150
    if "--runs" in args:
        at = args.index("--runs")
        runs = int(args[at + 1])
        del args[at : at + 2]
    builds = dict(a.split("=", 1) for a in args)
    dirs = {k: tempfile.mkdtemp() for k in builds}
    for d in dirs.values():
        shutil.copy(PROGRAM, Path(d) / "d.whip")
    times: dict[str, list[float]] = {k: [] for k in builds}
    try:
        for _ in range(runs):
            for label, whip in builds.items():
                start = time.perf_counter()
                subprocess.run([whip, "run", "d.whip"], cwd=dirs[label], check=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                times[label].append((time.perf_counter() - start) * 1000)
    except KeyboardInterrupt:
        sys.exit(130)
    finally:
        for d in dirs.values():
            shutil.rmtree(d)
    for label, xs in times.items():
        parts = [f"runs 1-10 {statistics.median(xs[:10]):.1f} ms"]
        if len(xs) >= 60:
            parts.append(f"41-50 {statistics.median(xs[40:50]):.1f} ms")
        last = xs[-10:]
        parts.append(f"last 10 {statistics.median(last):.1f} ms (min {min(last):.1f})")
        print(f"{label}: " + " | ".join(parts))

if __name__ == "__main__":
    main()
