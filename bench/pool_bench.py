#!/usr/bin/python3
"""The warm pool (issue 18), side by side in one run on uml: a warm `bluebox run -- true`
(a pool VM takes the command through its agent), `bluebox exec -- true` on an up sandbox,
and a cold `bluebox run -- true` (a boot per run).
Usage: bench/pool_bench.py [--runs N] [--bin PATH] [--image REF]

Targets: warm median <= exec median + 5 ms, and <= 0.15 x the cold median.
Each timed command runs with the pool full and no tender at work (the bench waits for the
pool to refill and the host to settle between runs), the three kinds interleaved. Whole-
process wall time, median of --runs (default 20). Needs root, podman, user-mode-linux,
build/bluebox-vmm and the test image (tests/integration/setup.sh)."""
import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

here = Path(__file__).resolve().parent
repo = here.parent


def timed(argv, env):
    t = time.monotonic()
    r = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, capture_output=True)
    took = time.monotonic() - t
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} -> {r.returncode}: {r.stderr.decode()}")
    return took


def settle(pool, n, timeout=120):
    name = pool.name
    """Until n VMs wait, nothing else is in the pool and no tender runs."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        names = [p.name for p in pool.iterdir()] if pool.is_dir() else []
        entries = [x for x in names if "." in x and not x.startswith(".") and ".tmp-" not in x
                   and x.split(".")[1] != "generation"]
        busy = subprocess.run(["pgrep", "-f", f"bluebox __tend {name}$"],
                              capture_output=True).stdout
        if sum(x.endswith(".waiting") for x in entries) == n and len(entries) == n and not busy:
            time.sleep(0.5)
            return
        time.sleep(0.1)
    raise SystemExit(f"the pool never settled: {entries}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--bin", default=str(repo / "build" / "bluebox"))
    ap.add_argument("--image", default=os.environ.get("BLUEBOX_TEST_IMAGE",
                                                      "localhost/bluebox-test/busybox:latest"))
    a = ap.parse_args()
    top = Path(tempfile.mkdtemp(prefix="bluebox-poolbench-", dir="/var/tmp"))
    home = top / "home"
    env = dict(os.environ, BLUEBOX_HOME=str(home))
    bb = [a.bin]
    body = f"base: {a.image}\nbackend: uml\nram_mib: 256\nnetwork: bridge\ntimeout_seconds: 60\n"
    try:
        w, u = f"pbw{os.getpid()}", f"pbu{os.getpid()}"
        for name, warm in ((w, 2), (u, 0)):
            subprocess.run(bb + ["new", name], env=env, check=True, capture_output=True)
            (home / "sandboxes" / name / "Bluefile").write_text(body + f"warm: {warm}\n")
            subprocess.run(bb + ["build", name, "-q"], env=env, check=True, capture_output=True)
        subprocess.run(bb + ["up", u], env=env, check=True, capture_output=True)
        pool = home / "pool" / w
        subprocess.run(bb + ["pool", w], env=env, check=True, capture_output=True)
        warm, exe, cold = [], [], []
        for i in range(a.runs + 2):
            settle(pool, 2)
            t_exec = timed(bb + ["exec", u, "--", "true"], env)
            t_warm = timed(bb + ["run", w, "--", "true"], env)
            settle(pool, 2)
            t_cold = timed(bb + ["run", u, "--", "true"], env)
            if i >= 2:  # the first two are warm-ups
                exe.append(t_exec)
                warm.append(t_warm)
                cold.append(t_cold)
        mw, me, mc = (statistics.median(x) * 1000 for x in (warm, exe, cold))
        print(f"median of {a.runs}, whole process, wall clock (uml, 256 MiB guests)")
        print(f"exec -- true on an up sandbox     {me:8.1f} ms")
        print(f"warm run -- true (pool VM)        {mw:8.1f} ms   exec + {mw - me:.1f} ms "
              f"(target <= +5 ms: {'met' if mw <= me + 5 else 'NOT met'})")
        print(f"cold run -- true (boot)           {mc:8.1f} ms   warm/cold {mw / mc:.3f}x "
              f"(target <= 0.15x: {'met' if mw <= 0.15 * mc else 'NOT met'})")
    finally:
        subprocess.run(bb + ["nuke", "-y"], env=env, capture_output=True)
        shutil.rmtree(top, ignore_errors=True)


if __name__ == "__main__":
    main()
