#!/usr/bin/python3
"""Many `bluebox exec` at once on one up sandbox, with the host kept busy (issue 32, item 4).
Usage: bench/exec_concurrency.py [--execs N] [--rounds R] [--busy B] [--bin PATH]

Needs root, build/bluebox-vmm, user-mode-linux and the test image (tests/integration/setup.sh).
Starts B busy loops (`sh -c 'while :; do :; done'`, default 2) on the host, brings one uml
sandbox up, and R times starts N execs (default 200) of `sh -c 'echo n<i>; exit <i % 5>'`
together. Every exec must answer with its own output and exit code; the bench reports any
that did not, and the whole-process wall time of each exec: median, p99 and max.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

from common import IMAGE, make_sandbox


def burst(binary, env, name, n):
    """(latencies in s, failures) of n execs started together."""
    results = {}

    def one(i):
        t = time.monotonic()
        r = subprocess.run([binary, "exec", name, "--", "sh", "-c", f"echo n{i}; exit {i % 5}"],
                           env=env, capture_output=True, stdin=subprocess.DEVNULL)
        results[i] = (r, time.monotonic() - t)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    bad = [(i, r.returncode, r.stdout, r.stderr.decode(errors="replace").strip())
           for i, (r, _) in results.items()
           if (r.returncode, r.stdout) != (i % 5, f"n{i}\n".encode())]
    return [dt for _, dt in results.values()], bad


def p99(values):
    v = sorted(values)
    return v[min(len(v) - 1, int(len(v) * 0.99))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--execs", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--busy", type=int, default=2)
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--bin", default=os.path.join(repo, "build", "bluebox"))
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="bluebox-bench-execc.", dir="/var/tmp")
    env = dict(os.environ, BLUEBOX_HOME=os.path.join(tmp, "home"))
    name = f"execc{os.getpid()}"
    busy = [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(a.busy)]
    failed = 0
    try:
        make_sandbox(a.bin, env, name, f"base: {IMAGE}\nbackend: uml\nram_mib: 256\n"
                                       "network: none\ntimeout_seconds: 120\n")
        subprocess.run([a.bin, "up", name], env=env, check=True, capture_output=True)
        every = []
        for k in range(a.rounds):
            lat, bad = burst(a.bin, env, name, a.execs)
            every += lat
            failed += len(bad)
            print(f"round {k + 1}: {a.execs} execs, {len(bad)} wrong; median "
                  f"{statistics.median(lat):.2f} s, p99 {p99(lat):.2f} s, max {max(lat):.2f} s; "
                  f"load {os.getloadavg()[0]:.1f}", flush=True)
            for b in bad[:5]:
                print("  ", b)
        print(f"all {len(every)} execs ({a.busy} busy loops, {os.cpu_count()} CPUs): median "
              f"{statistics.median(every):.2f} s, p99 {p99(every):.2f} s, max {max(every):.2f} s; "
              f"{failed} wrong")
    finally:
        for p in busy:
            p.kill()
            p.wait()
        subprocess.run([a.bin, "down", name], env=env, capture_output=True)
        subprocess.run([a.bin, "destroy", name, "--data", "-y"], env=env, capture_output=True)
        subprocess.run(["rm", "-rf", tmp])
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
