#!/usr/bin/python3
"""The soak (issue 32 item 7): 1,000 cold runs, 10,000 execs, 100 up/down cycles, 50 pool
claims and 20 serve restarts, mixed with kills and timeouts (tests/integration/soakmix.py), then
a census of the host against the one taken before (tests/integration/census.py): processes,
fds, mounts, /run, /tmp, /dev/shm, cgroups, podman and runc containers, BLUEBOX_HOME, memory.
Usage: bench/soak.py [--counts runs=N,execs=N,…|DIVISOR] [--bin PATH] [--seed N] [--strict]
                     [--lifeline] [--stop-after SECONDS]

--counts: the full counts by default; "10" divides every count by 10; "runs=100,execs=500"
sets those. --strict also fails on new things nothing ties to the soak (for a quiet host).
--lifeline adds the cases that need issue 32 item 1 (a SIGKILL of a run's process group and of
serve mid-run) after the census, and reports what they leave.
Exit 1 when anything of the soak's is left or an operation failed. Needs root, podman,
user-mode-linux, build/bluebox-vmm and the test image (tests/integration/setup.sh)."""
import argparse
import os
import secrets
import shutil
import sys
import tempfile
import time
from pathlib import Path

here = Path(__file__).resolve().parent
sys.path.insert(0, str(here.parent / "tests" / "integration"))

import census  # noqa: E402
from soakmix import FULL, Soak, parse_counts  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--counts", default="")
    ap.add_argument("--bin", default=str(here.parent / "build" / "bluebox"))
    ap.add_argument("--seed", type=int, default=32)
    ap.add_argument("--strict", action="store_true")
    ap.add_argument("--lifeline", action="store_true")
    ap.add_argument("--stop-after", type=float, default=0,
                    help="seconds: start no operation after this long (the census still runs)")
    a = ap.parse_args()
    counts = parse_counts(a.counts) if a.counts else FULL
    top = Path(tempfile.mkdtemp(prefix="bluebox-soakbench-", dir="/var/tmp"))
    s = Soak(a.bin, os.environ, top / "home", f"b{secrets.token_hex(3)}")
    bad = False
    try:
        s.setup()
        s.warm_up()
        if s.failures:
            sys.exit("the warm-up failed:\n" + "\n".join(s.failures))
        before = census.take(s.home, s.markers)
        print(f"soak: {counts}; load {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs",
              flush=True)
        stop = time.monotonic() + a.stop_after if a.stop_after else None
        took = s.mix(counts, seed=a.seed, progress=max(1, sum(vars(counts).values()) // 40),
                     stop_at=stop)
        d, settle = census.settle(before, s.home, s.markers, timeout=30)
        print(f"done in {took:.0f} s: {s.done}; settled in {settle:.1f} s; "
              f"load {os.getloadavg()[0]:.1f}")
        print(d.report())
        for op, t in sorted(s.exit_after.items()):
            print(f"  {op}: bluebox exited {min(t):.2f}-{max(t):.2f} s after the signal "
                  f"(median {sorted(t)[len(t) // 2]:.2f}, {len(t)} times)")
        for g in s.fd_growth:
            print(f"  GREW {g}")
        for f in s.failures:
            print(f"  FAILED {f}")
        bad = bool(d.leftovers(a.strict) or s.failures or s.fd_growth)
        if a.lifeline:
            for case in ("kill_group", "serve_killed_mid_run"):
                s.failures.clear()
                b = census.take(s.home, s.markers)
                getattr(s, case)()
                time.sleep(0.5)
                d, t = census.settle(b, s.home, s.markers, timeout=2,
                                     allow=(census.KILLED_NOTE,))
                print(f"lifeline case {case}, 2 s after the kill:")
                print("\n".join(line for line in d.report().splitlines() if "LEFTOVER" in line
                                or "nothing" in line))
                s.reap_leftovers(b)
    finally:
        s.bb("down", s.cold)
        for name in (s.cold, s.warm):
            s.bb("destroy", name, "--data", "-y")
        shutil.rmtree(top, ignore_errors=True)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
