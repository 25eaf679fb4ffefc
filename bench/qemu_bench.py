#!/usr/bin/env python3
"""Cold `bluebox run -- true` on the qemu backend (issue 19) beside uml and a plain runc
container, the guest's own boot time (its /proc/uptime when the workload starts), and
`exec -- true` in an up VM once `bluebox up` works on qemu.

    bench/qemu_bench.py [--runs N] [--accel auto|kvm|tcg|both] [--bin build/bluebox]

--accel auto (the default) measures KVM when `bluebox doctor`'s probe boot says this host's
KVM runs a standard guest kernel, and TCG otherwise (saying why); kvm insists on KVM (the kvm
lane: it exits 1 when the probe says KVM cannot run a guest); tcg is QEMU's software
emulator, the number for hosts without usable KVM; both measures each that works. Needs
root, podman, build/bluebox-vmm, qemu-system-x86 and a kernel (scripts/deps.sh); run it
under the integration tests' environment (`source /etc/bluebox-test/env; eval
"$(tests/integration/setup.sh)"`). Issue 19's targets: TCG cold run ≤ 3.0 s; KVM cold run
≤ 1.5× plain runc and `exec -- true` ≤ 10 ms."""
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

from common import IMAGE, arg_parser, timed

RUNC = "podman run --rm image true (runc)"


def kvm_verdict(binary, env):
    """(True, why) when doctor's probe boot says KVM runs a standard guest kernel here."""
    r = subprocess.run([binary, "doctor"], env=dict(env, BLUEBOX_BACKEND="qemu"),
                       capture_output=True, text=True, stdin=subprocess.DEVNULL)
    line = next((l for l in r.stdout.splitlines()
                 if re.match(r"  (ok  |warn|FAIL)  qemu acceleration ", l)), "")
    why = line[len("  warn  qemu acceleration "):].strip() or "doctor said nothing about KVM"
    return line.startswith("  ok    qemu acceleration KVM runs"), why


def make(binary, env, home, name, backend, extra=""):
    subprocess.run([binary, "new", name], env=env, check=True, capture_output=True)
    with open(os.path.join(home, "home", "sandboxes", name, "Bluefile"), "w") as f:
        f.write(f"base: {IMAGE}\nbackend: {backend}\nram_mib: 256\ncpus: 1\n{extra}")
    r = subprocess.run([binary, "build", name], env=env, capture_output=True, text=True)
    return r.returncode, (r.stderr.strip().splitlines() or ["no message"])[-1]


def median_of(argv, env, runs):
    timed(argv, env)  # warm-up: caches, the bundle, the isolation check
    return statistics.median(timed(argv, env)[0] for _ in range(runs))


def exec_rows(binary, env, home, accel, runs, rows):
    """`exec -- true` in an up VM (network: bridge: an up VM's agent is reached over the
    network path); skipped, with the reason, while up does not work on qemu."""
    name = f"qemu-{accel}-up"
    rc, msg = make(binary, env, home, name, "qemu", "network: bridge\n")
    if rc != 0:
        print(f"exec -- true, qemu ({accel}): skipped: bluebox build failed: {msg}")
        return
    r = subprocess.run([binary, "up", name], env=env, capture_output=True, text=True,
                       stdin=subprocess.DEVNULL, timeout=300)
    if r.returncode != 0:
        msg = (r.stderr.strip().splitlines() or ["no message"])[-1]
        print(f"exec -- true, qemu ({accel}): skipped: bluebox up failed: {msg}")
        return
    try:
        rows[f"bluebox exec -- true, qemu ({accel})"] = median_of(
            [binary, "exec", name, "--", "true"], env, runs)
    finally:
        subprocess.run([binary, "down", name], env=env, capture_output=True)


def bench_accel(binary, env, home, accel, runs, rows):
    e = dict(env, BLUEBOX_QEMU_ACCEL=accel)
    name = f"qemu-{accel}"
    rc, msg = make(binary, e, home, name, "qemu")
    if rc != 0:
        sys.exit(f"bluebox build {name} failed: {msg}")
    rows[f"bluebox run -- true, qemu ({accel})"] = median_of(
        [binary, "run", name, "--", "true"], e, runs)
    uptimes = [float(timed([binary, "run", name, "--", "cat", "/proc/uptime"], e)[1].split()[0])
               * 1000 for _ in range(runs)]
    rows[f"qemu ({accel}) guest uptime at workload start"] = statistics.median(uptimes)
    exec_rows(binary, e, home, accel, runs, rows)


def accels(binary, env, want):
    if want == "tcg":
        return ["tcg"]
    runs, why = kvm_verdict(binary, env)
    if want == "kvm" and not runs:
        sys.exit(f"--accel kvm: {why}")
    if want == "kvm":
        return ["kvm"]
    if not runs:
        print(f"KVM not measured: {why}")
        return ["tcg"]
    return ["kvm", "tcg"] if want == "both" else ["kvm"]


def main():
    ap = arg_parser(10)
    ap.add_argument("--accel", choices=("auto", "kvm", "tcg", "both"), default="auto")
    a = ap.parse_args()
    home = tempfile.mkdtemp(prefix="bluebox-qbench-", dir="/var/tmp")
    env = {k: v for k, v in os.environ.items()
           if k not in ("BLUEBOX_BACKEND", "BLUEBOX_QEMU_ACCEL")}
    env["BLUEBOX_HOME"] = os.path.join(home, "home")
    names = ["uml"]
    try:
        todo = accels(a.bin, env, a.accel)
        rows = {}
        rc, msg = make(a.bin, env, home, "uml", "uml")
        if rc != 0:
            sys.exit(f"bluebox build uml failed: {msg}")
        rows[RUNC] = median_of(["podman", "run", "--rm", IMAGE, "true"], env, a.runs)
        rows["bluebox run -- true, uml"] = median_of([a.bin, "run", "uml", "--", "true"], env,
                                                     a.runs)
        for accel in todo:
            names += [f"qemu-{accel}", f"qemu-{accel}-up"]
            bench_accel(a.bin, env, home, accel, a.runs, rows)
        print(f"median of {a.runs} runs, ms (wall clock, whole process)")
        for name, ms in rows.items():
            print(f"{name:44} {ms:9.1f}")
        for accel in todo:
            q = rows[f"bluebox run -- true, qemu ({accel})"]
            print(f"{f'qemu ({accel}) cold run / plain runc':44} {q / rows[RUNC]:8.2f}x")
    finally:
        for n in names:
            subprocess.run([a.bin, "down", n], env=env, capture_output=True)
            subprocess.run([a.bin, "destroy", n, "--data", "-y"], env=env, capture_output=True)
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
