#!/usr/bin/env python3
"""Cold `bluebox run -- true` on uml (network: none) through podman and through the direct
OCI path (BLUEBOX_LAUNCH=direct, issue 21), beside a plain `podman run --rm --network none
<image> true` with runc; runs interleaved, so that load hits all three alike. Also the
guest's /proc/uptime when the workload starts (UML boot to the command).

    bench/direct_bench.py [--runs N] [--bin build/bluebox]

Needs root, podman, runc, build/bluebox-vmm and user-mode-linux; run it under the
integration tests' environment (`source /etc/bluebox-test/env; eval
"$(tests/integration/setup.sh)"`)."""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

IMAGE = "localhost/bluebox-test/busybox:latest"


def timed(argv, env):
    t = time.monotonic()
    r = subprocess.run(argv, env=env, capture_output=True, stdin=subprocess.DEVNULL)
    ms = (time.monotonic() - t) * 1000
    if r.returncode != 0:
        sys.exit(f"{' '.join(argv)} failed: {r.stderr.decode()}")
    return ms, r.stdout.decode()


def main():
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--bin", default=os.path.join(repo, "build", "bluebox"))
    a = ap.parse_args()
    home = tempfile.mkdtemp(prefix="bluebox-dbench-", dir="/var/tmp")
    env = dict(os.environ, BLUEBOX_HOME=os.path.join(home, "home"))
    env.pop("BLUEBOX_LAUNCH", None)
    direct = dict(env, BLUEBOX_LAUNCH="direct")
    try:
        subprocess.run([a.bin, "new", "b"], env=env, check=True, capture_output=True)
        with open(os.path.join(home, "home", "sandboxes", "b", "Bluefile"), "w") as f:
            f.write(f"base: {IMAGE}\nbackend: uml\nram_mib: 256\nnetwork: none\n")
        subprocess.run([a.bin, "build", "b"], env=env, check=True, capture_output=True)
        cases = (
            ("podman run --rm --network none image true", direct,
             ["podman", "run", "--rm", "--network", "none", IMAGE, "true"]),
            ("bluebox run -- true, podman path", env, [a.bin, "run", "b", "--", "true"]),
            ("bluebox run -- true, direct path", direct, [a.bin, "run", "b", "--", "true"]),
        )
        for _, e, argv in cases:  # warm-up: caches, the bundle, the template, the check
            timed(argv, e)
        times = {name: [] for name, _, _ in cases}
        uptimes = {"podman path": [], "direct path": []}
        for _ in range(a.runs):
            for name, e, argv in cases:
                times[name].append(timed(argv, e)[0])
            for name, e in (("podman path", env), ("direct path", direct)):
                out = timed([a.bin, "run", "b", "--", "cat", "/proc/uptime"], e)[1]
                uptimes[name].append(float(out.split()[0]) * 1000)
        load = os.getloadavg()[0]
        print(f"median of {a.runs} interleaved runs, ms (wall clock, whole process); "
              f"load {load:.1f} on {os.cpu_count()} CPUs")
        med = {name: statistics.median(v) for name, v in times.items()}
        for name, ms in med.items():
            print(f"{name:44} {ms:9.1f}")
        for name, v in uptimes.items():
            print(f"{'guest uptime at workload start, ' + name:44} {statistics.median(v):9.1f}")
        plain = med["podman run --rm --network none image true"]
        for name in ("bluebox run -- true, podman path", "bluebox run -- true, direct path"):
            print(f"{name + ' / plain':44} {med[name] / plain:8.2f}x")
    finally:
        subprocess.run([a.bin, "destroy", "b", "--data", "-y"], env=env, capture_output=True)
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
