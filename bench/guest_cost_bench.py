#!/usr/bin/env python3
"""What one guest system call and one guest page fault cost on this host: the same work in a
uml guest and in a plain container on the host's kernel, timed inside each (so the guest's
boot and podman's start are not in it), down to microseconds per operation.

    bench/guest_cost_bench.py [--runs N] [--bin build/bluebox]

UML intercepts every system call and every page fault of a guest process with ptrace, so
these two figures set how much slower syscall- and memory-heavy work (a package install,
`apt-get update`, a compiler) runs in a uml guest build or run than on the host. They depend
on the host: each interception is several host context switches, which a nested or
paravirtual host makes dearer. Needs root, podman, user-mode-linux and the integration tests'
Debian image (tests/integration/setup.sh --debian), which has perl for the memory case."""
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

from common import arg_parser, make_sandbox

DEBIAN = os.environ.get("BLUEBOX_TEST_DEBIAN_IMAGE", "localhost/bluebox-test/debian:bookworm")
SYSCALLS = 100_000  # dd bs=1: a read and a write each
TOUCH_MB = 100      # perl makes a string this long: one first-touch fault per 4 KiB page

# Prints "<syscall seconds> <touch seconds> <perl's own page faults>" (perl's count from its
# /proc/self/stat: the host's /proc/vmstat is the whole host's, not the container's).
SCRIPT = (
    "t0=$(date +%s.%N); dd if=/dev/zero of=/dev/null bs=1 count={n} 2>/dev/null; "
    "t1=$(date +%s.%N); "
    "f=$(perl -e '$x = \"a\" x ({mb} * 1048576); open(F, \"/proc/self/stat\"); "
    "print((split / /, <F>)[9])'); t2=$(date +%s.%N); "
    "awk -v a=$t0 -v b=$t1 -v c=$t2 -v f=$f 'BEGIN {{ print b - a, c - b, f }}'"
).format(n=SYSCALLS, mb=TOUCH_MB)


def measure(argv, env):
    r = subprocess.run(argv + ["sh", "-c", SCRIPT], env=env, capture_output=True, text=True,
                       stdin=subprocess.DEVNULL, timeout=900)
    m = re.search(r"^([\d.]+) ([\d.]+) (\d+)$", r.stdout, re.M)
    if r.returncode != 0 or not m:
        sys.exit(f"{' '.join(argv)} failed: {r.stdout}\n{r.stderr}")
    return float(m.group(1)), float(m.group(2)), int(m.group(3))


def main():
    ap = arg_parser(3)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="bluebox-costbench-", dir="/var/tmp")
    env = dict(os.environ, BLUEBOX_HOME=os.path.join(tmp, "home"))
    env.pop("BLUEBOX_BACKEND", None)
    try:
        make_sandbox(a.bin, env, "cost",
                     f"base: {DEBIAN}\nbackend: uml\nram_mib: 1024\n")
        cases = (("uml guest", [a.bin, "run", "cost", "--"]),
                 ("host kernel (podman run, runc)",
                  ["podman", "run", "--rm", "--network", "none", DEBIAN]))
        rows = {name: [] for name, _ in cases}
        for _ in range(a.runs):
            for name, argv in cases:
                rows[name].append(measure(argv, env))
    finally:
        subprocess.run([a.bin, "destroy", "--force", "cost"], env=env, capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"median of {a.runs} interleaved runs; load {os.getloadavg()[0]:.1f} on "
          f"{os.cpu_count()} CPUs")
    print(f"{'where':34} {'syscall µs':>11} {'faults':>8} {'µs a page':>9}")
    for name, v in rows.items():
        sc = statistics.median(x[0] for x in v) / (2 * SYSCALLS) * 1e6
        faults = statistics.median(x[2] for x in v)
        touch = statistics.median(x[1] for x in v)
        print(f"{name:34} {sc:11.1f} {faults:8.0f} {touch / max(faults, 1) * 1e6:9.1f}")


if __name__ == "__main__":
    main()
