#!/usr/bin/python3
"""bluebox benchmarks for the file-only commands: whole-process wall time, median of N runs,
with `true` as the floor. Usage: bench/bench.py [--runs N] [--bin PATH]

Targets (DESIGN/issue 2): `env` within 2 ms of `true`; `ls` over 200 sandboxes under 20 ms.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time

here = os.path.dirname(os.path.abspath(__file__))
repo = os.path.dirname(here)


def median_ms(argv, env, runs):
    times = []
    for _ in range(3):  # warm the page cache
        subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, check=True)
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, check=True)
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--bin", default=os.path.join(repo, "build", "bluebox"))
    a = ap.parse_args()
    home = tempfile.mkdtemp(prefix="bluebox-bench.")
    env = dict(os.environ, BLUEBOX_HOME=home)
    try:
        subprocess.run([a.bin, "new", "one", "--from", "ai-agent"], env=env, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for i in range(199):
            subprocess.run([a.bin, "new", f"s{i:03d}"], env=env, check=True,
                           stdout=subprocess.DEVNULL)
        floor = median_ms(["true"], env, a.runs)
        rows = [
            ("true", floor),
            ("bluebox env one", median_ms([a.bin, "env", "one"], env, a.runs)),
            ("bluebox build --dry-run one", median_ms([a.bin, "build", "--dry-run", "one"], env, a.runs)),
            ("bluebox ls (200 sandboxes)", median_ms([a.bin, "ls"], env, a.runs)),
        ]
        print(f"median of {a.runs} runs, whole process, wall clock")
        print(f"{'command':34} {'median ms':>10} {'over true':>10}")
        for name, ms in rows:
            print(f"{name:34} {ms:10.2f} {ms - floor:10.2f}")
    finally:
        shutil.rmtree(home)


if __name__ == "__main__":
    main()
