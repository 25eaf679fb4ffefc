#!/usr/bin/python3
"""bluebox benchmarks: whole-process wall time, median of N runs.
Usage: bench/bench.py [--runs N] [--bin PATH] [--real-runs N]

* File-only commands, with `true` as the floor. Targets (issue 2): `env` within 2 ms of
  `true`; `ls` over 200 sandboxes under 20 ms.
* bluebox's own cost per run (issue 3): `bluebox run` against a stand-in podman (a /bin/sh
  script that exits at once) versus the same script started directly with the same argv. The
  difference is bluebox's work: Bluefile parse, the cached isolation check (runtime
  fingerprint), the VMM bundle check, the argv, the spawn. Target: at most 2 ms.
* `bluebox run` against the identical `podman run` typed by hand, on real podman with the
  uml backend (when the test image exists: tests/integration/setup.sh). Target: <= 1.03x.
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


STANDIN = """#!/bin/sh
# bench stand-in for podman: answers the isolation probe, otherwise exits at once
case "$*" in
*/.bluebox/vmm/bluebox-vmm*__probe*) printf '6.1.0-bench\\nbench-boot-id\\n' ;;
*__probe*) printf '%s\\n' "$(uname -r)"; cat /proc/sys/kernel/random/boot_id ;;
esac
[ -n "$BENCH_ARGV" ] && printf '%s\\n' "$@" > "$BENCH_ARGV"
exit 0
"""


def locate_vmm():
    for name in ("bluebox-vmm", "uml_testprog"):
        p = os.path.join(repo, "build", name)
        if os.access(p, os.X_OK):
            return p
    return None


def own_cost(a, runs):
    """bluebox run through a stand-in podman, minus the stand-in started directly."""
    vmm = locate_vmm()
    if not vmm:
        return None
    tmp = tempfile.mkdtemp(prefix="bluebox-bench-run.")
    try:
        bindir = os.path.join(tmp, "bin")
        os.mkdir(bindir)
        podman = os.path.join(bindir, "podman")
        with open(podman, "w") as f:
            f.write(STANDIN)
        os.chmod(podman, 0o755)
        home = os.path.join(tmp, "home")
        env = dict(os.environ, BLUEBOX_HOME=home, BLUEBOX_BACKEND="uml",
                   BLUEBOX_UML_KERNEL="/bin/true", BLUEBOX_VMM=vmm,
                   PATH=bindir + ":" + os.environ["PATH"])
        subprocess.run([a.bin, "new", "box"], env=env, check=True, stdout=subprocess.DEVNULL)
        with open(os.path.join(home, "sandboxes", "box", "image-id"), "w") as f:
            f.write("0" * 64 + "\n")
        argv_file = os.path.join(tmp, "argv")
        subprocess.run([a.bin, "run", "box", "--", "true"], env=dict(env, BENCH_ARGV=argv_file),
                       check=True, stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with open(argv_file) as f:
            argv = f.read().splitlines()
        direct = median_ms([podman, *argv], env, runs)
        through = median_ms([a.bin, "run", "box", "--", "true"], env, runs)
        return direct, through
    finally:
        shutil.rmtree(tmp)


def real_uml(a, runs):
    """bluebox run versus its own podman argv typed by hand, real podman, uml backend."""
    if not os.access(os.path.join(repo, "build", "bluebox-vmm"), os.X_OK):
        return None
    image = "localhost/bluebox-test/busybox:latest"
    if subprocess.run(["podman", "image", "exists", image]).returncode != 0:
        return None
    tmp = tempfile.mkdtemp(prefix="bluebox-bench-uml.")
    env = dict(os.environ, BLUEBOX_HOME=os.path.join(tmp, "home"))
    try:
        subprocess.run([a.bin, "new", "box"], env=env, check=True, stdout=subprocess.DEVNULL)
        with open(os.path.join(env["BLUEBOX_HOME"], "sandboxes", "box", "Bluefile"), "w") as f:
            f.write(f"base: {image}\nbackend: uml\nram_mib: 256\n")
        subprocess.run([a.bin, "build", "box"], env=env, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        # the argv bluebox runs, caught by a logging wrapper in front of the real podman
        bindir = os.path.join(tmp, "bin")
        os.mkdir(bindir)
        real = shutil.which("podman")
        with open(os.path.join(bindir, "podman"), "w") as f:
            f.write(f'#!/bin/sh\n[ "$1" = run ] && printf "%s\\n" "$@" > {tmp}/argv\n'
                    f'exec {real} "$@"\n')
        os.chmod(os.path.join(bindir, "podman"), 0o755)
        subprocess.run([a.bin, "run", "box", "--", "true"], check=True, stdin=subprocess.DEVNULL,
                       env=dict(env, PATH=bindir + ":" + env["PATH"]))
        with open(os.path.join(tmp, "argv")) as f:
            argv = [real, *f.read().splitlines()]
        name = [x for x in argv if x.startswith("--name=")][0]
        # re-prime the isolation cache for the real podman (the wrapper is another runtime)
        subprocess.run([a.bin, "run", "box", "--", "true"], env=env, check=True,
                       stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        by_hand = []
        through = []
        for i in range(runs):  # interleaved, so drift hits both alike
            t = time.perf_counter()
            subprocess.run([x if x != name else f"--name=bench-{i}" for x in argv],
                           stdin=subprocess.DEVNULL, check=True)
            by_hand.append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            subprocess.run([a.bin, "run", "box", "--", "true"], env=env,
                           stdin=subprocess.DEVNULL, check=True)
            through.append((time.perf_counter() - t) * 1000)
        plain = []  # the same image as a plain runc container, for the cold-run ratio
        built = subprocess.run([a.bin, "env", "box"], env=env, check=True, capture_output=True,
                               text=True).stdout
        built = [x.split("=", 1)[1].strip("'") for x in built.splitlines()
                 if x.startswith("BLUEBOX_IMAGE=")][0]  # localhost/bluebox/box:<home id>
        for i in range(runs):
            t = time.perf_counter()
            subprocess.run([real, "run", "--rm", "--pull=never", "--network=none",
                            built, "true"], check=True,
                           stdin=subprocess.DEVNULL)
            plain.append((time.perf_counter() - t) * 1000)
        return statistics.median(by_hand), statistics.median(through), statistics.median(plain)
    finally:
        subprocess.run([a.bin, "destroy", "box", "--data", "-y"], env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--bin", default=os.path.join(repo, "build", "bluebox"))
    ap.add_argument("--real-runs", type=int, default=20)
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
    cost = own_cost(a, a.runs)
    if cost:
        direct, through = cost
        print(f"\nbluebox's own cost per run (stand-in podman), median of {a.runs}")
        print(f"{'stand-in podman, direct':34} {direct:10.2f}")
        print(f"{'bluebox run (cache hit)':34} {through:10.2f} {through - direct:10.2f}")
    if a.real_runs > 0:
        real = real_uml(a, a.real_runs)
        if real:
            by_hand, through, plain = real
            print(f"\nreal podman, uml backend, `true`, median of {a.real_runs}")
            print(f"{'podman run (same argv, by hand)':34} {by_hand:10.2f}")
            print(f"{'bluebox run':34} {through:10.2f} {through / by_hand:9.3f}x")
            print(f"{'podman run --rm image true (runc)':34} {plain:10.2f}")
            print(f"{'cold bluebox run / plain runc':34} {'':10} {through / plain:9.3f}x")


if __name__ == "__main__":
    main()
