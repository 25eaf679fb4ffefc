#!/usr/bin/env python3
"""Cold `bluebox run -- true` on the qemu backend (issue 19) beside uml and a plain runc
container, and the guest's own boot time (its /proc/uptime when the workload starts).

    bench/qemu_bench.py [--runs N] [--accel tcg|kvm] [--bin build/bluebox]

TCG (the default here) is QEMU's software emulator: the number for hosts without usable
KVM; `--accel kvm` is the kvm lane's. Needs root, podman, build/bluebox-vmm,
qemu-system-x86 and a kernel (scripts/deps.sh); run it under the integration tests'
environment (`source /etc/bluebox-test/env; eval "$(tests/integration/setup.sh)"`)."""
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
    ap.add_argument("--accel", choices=("tcg", "kvm"), default="tcg")
    ap.add_argument("--bin", default=os.path.join(repo, "build", "bluebox"))
    a = ap.parse_args()
    home = tempfile.mkdtemp(prefix="bluebox-qbench-", dir="/var/tmp")
    env = dict(os.environ, BLUEBOX_HOME=os.path.join(home, "home"), BLUEBOX_QEMU_ACCEL=a.accel)
    try:
        for backend in ("qemu", "uml"):
            subprocess.run([a.bin, "new", backend], env=env, check=True, capture_output=True)
            with open(os.path.join(home, "home", "sandboxes", backend, "Bluefile"), "w") as f:
                f.write(f"base: {IMAGE}\nbackend: {backend}\nram_mib: 256\ncpus: 1\n")
            subprocess.run([a.bin, "build", backend], env=env, check=True, capture_output=True)
        rows = {}
        uptimes = []
        for name, argv in (
                ("podman run --rm image true (runc)", ["podman", "run", "--rm", IMAGE, "true"]),
                ("bluebox run -- true, uml", [a.bin, "run", "uml", "--", "true"]),
                (f"bluebox run -- true, qemu ({a.accel})", [a.bin, "run", "qemu", "--", "true"]),
        ):
            timed(argv, env)  # warm-up: caches, the bundle, the isolation check
            rows[name] = statistics.median(timed(argv, env)[0] for _ in range(a.runs))
        for _ in range(a.runs):
            out = timed([a.bin, "run", "qemu", "--", "cat", "/proc/uptime"], env)[1]
            uptimes.append(float(out.split()[0]) * 1000)
        print(f"median of {a.runs} runs, ms (wall clock, whole process)")
        for name, ms in rows.items():
            print(f"{name:40} {ms:9.1f}")
        print(f"{'qemu guest uptime at workload start':40} {statistics.median(uptimes):9.1f}")
        runc = rows["podman run --rm image true (runc)"]
        q = rows[f"bluebox run -- true, qemu ({a.accel})"]
        print(f"{'qemu cold run / plain runc':40} {q / runc:8.2f}x")
    finally:
        subprocess.run([a.bin, "destroy", "qemu", "--data", "-y"], env=env, capture_output=True)
        subprocess.run([a.bin, "destroy", "uml", "--data", "-y"], env=env, capture_output=True)
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
