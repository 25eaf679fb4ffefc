#!/usr/bin/env python3
"""`bluebox build` on backend: uml with the steps in a uml guest (issue 20) against the
explicit host-kernel fallback (`--host-kernel`): a cached rebuild (nothing changed) and a
full Debian-based build (packages from the Debian mirror, a user with sudo, a run: step).

    bench/build_vm_bench.py [--runs N] [--bin build/bluebox] [--skip-debian]

A full build is forced by changing an ENV value (the layer after FROM), so every step runs
again. Needs root, podman, build/bluebox-vmm, user-mode-linux, the debian test image
(tests/integration/setup.sh --debian) and a network to the Debian mirror; run it under the
integration tests' environment (`source /etc/bluebox-test/env;
eval "$(tests/integration/setup.sh)"`)."""
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from common import arg_parser

BUSYBOX = "localhost/bluebox-test/busybox:latest"
DEBIAN = os.environ.get("BLUEBOX_TEST_DEBIAN_IMAGE", "localhost/bluebox-test/debian:bookworm")


def timed(argv, env):
    t = time.monotonic()
    r = subprocess.run(argv, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    ms = (time.monotonic() - t) * 1000
    if "built " not in r.stdout:
        sys.exit(f"{' '.join(argv)} failed:\n{r.stdout}\n{r.stderr}")
    return ms


def bluefile(home, name, text):
    with open(os.path.join(home, "sandboxes", name, "Bluefile"), "w") as f:
        f.write(text)


def main():
    ap = arg_parser(5)
    ap.add_argument("--skip-debian", action="store_true")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="bluebox-bvbench-", dir="/var/tmp")
    home = os.path.join(tmp, "home")
    env = dict(os.environ, BLUEBOX_HOME=home)
    env.pop("BLUEBOX_BACKEND", None)
    modes = (("guest", []), ("host-kernel", ["--host-kernel"]))
    rows = []
    try:
        for mode, flag in modes:
            subprocess.run([a.bin, "new", f"c-{mode}"], env=env, check=True, capture_output=True)
            bluefile(home, f"c-{mode}", f"base: {BUSYBOX}\nbackend: uml\nrun:\n"
                     "  - echo one > /one\n  - echo two > /two\n"
                     "blueprint:\n  runcmd:\n    - echo three > /three\n")
            timed([a.bin, "build", *flag, f"c-{mode}"], env)
            rows.append((f"cached rebuild, busybox, 3 RUN steps ({mode})",
                         [timed([a.bin, "build", *flag, f"c-{mode}"], env)
                          for _ in range(a.runs)]))
        if not a.skip_debian:
            for mode, flag in modes:
                name = f"d-{mode}"
                subprocess.run([a.bin, "new", name], env=env, check=True, capture_output=True)
                ms = []
                for i in range(a.runs):
                    bluefile(home, name, f"base: {DEBIAN}\nbackend: uml\nnetwork: bridge\n"
                             f"pkgmgr: apt\nenv:\n  BENCH_RUN: '{mode}-{i}-{time.time()}'\n"
                             "packages: [sudo]\nrun:\n  - echo built > /built\n"
                             "blueprint:\n  users:\n    - name: alice\n      sudo: true\n")
                    ms.append(timed([a.bin, "build", *flag, name], env))
                rows.append((f"full Debian build: apt sudo, a user, run: ({mode})", ms))
    finally:
        for line in subprocess.run(["podman", "images", "--format", "{{.Repository}}:{{.Tag}}"],
                                   capture_output=True, text=True).stdout.split():
            if line.startswith("localhost/bluebox/c-") or line.startswith("localhost/bluebox/d-"):
                subprocess.run(["podman", "rmi", "-f", line], capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"median of {a.runs} runs, whole `bluebox build`, wall clock")
    print(f"{'build':62} {'median ms':>10}")
    for label, ms in rows:
        print(f"{label:62} {statistics.median(ms):10.0f}")


if __name__ == "__main__":
    main()
