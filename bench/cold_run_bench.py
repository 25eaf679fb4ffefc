#!/usr/bin/env python3
"""Cold `run -- true` side by side (issue 21), one command, one table: a plain runc container,
bluebox on uml through podman and through the direct OCI path (BLUEBOX_LAUNCH=direct),
sandbox-runtime's `srt -c true` (bubblewrap, no kernel of its own), and with a network:
bluebox `network: bridge` against `podman run --rm <image> true`; with --qemu also the qemu
backend (TCG unless BLUEBOX_QEMU_ACCEL=kvm) through podman and direct: its runs print the
guest's /proc/uptime, so that the time outside the guest (launch and teardown, what the two
paths differ in) is told apart from a boot that TCG on a loaded host makes vary by seconds.
Runs are interleaved, so
that load hits every case alike; the machine's load is printed before and after (the
figures mean little on a loaded machine: re-run on an idle one).

    bench/cold_run_bench.py [--runs 15] [--bin build/bluebox] [--no-bridge] [--no-srt]
                            [--qemu] [--before OTHER/build/bluebox]

--before adds a row for another build's `bluebox run -- true` (podman path, its own
BLUEBOX_HOME, so that neither build's isolation check is redone each run): a change's before
and after, measured in the same interleaved runs.

Needs root, podman, runc, user-mode-linux, build/bluebox and build/bluebox-vmm, under the
integration tests' environment (`source /etc/bluebox-test/env; eval
"$(tests/integration/setup.sh)"`). srt is optional (its row is left out when the command is
missing): `apt-get install bubblewrap socat ripgrep` and `npm install -g
@anthropic-ai/sandbox-runtime`."""
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from common import IMAGE, arg_parser, make_sandbox


RETRIED = {}
LAST_OUT = [b""]


def timed(argv, env):
    # srt's bubblewrap binds the host's whole mount tree: a container mount that goes away
    # meanwhile (other runs on the machine) fails its remount. Such a run is timed again,
    # and counted.
    for attempt in range(5 if argv[0].endswith("srt") else 1):
        t = time.monotonic()
        r = subprocess.run(argv, env=env, capture_output=True, stdin=subprocess.DEVNULL,
                           timeout=300)
        ms = (time.monotonic() - t) * 1000
        if r.returncode == 0:
            LAST_OUT[0] = r.stdout
            return ms
        RETRIED[argv[0]] = RETRIED.get(argv[0], 0) + 1
    sys.exit(f"{' '.join(argv)} failed ({r.returncode}): {r.stderr.decode()[-2000:]}")


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


def make(binary, env, name, network, backend="uml"):
    make_sandbox(binary, env, name,
                 f"base: {IMAGE}\nbackend: {backend}\nram_mib: 512\nnetwork: {network}\n")


def main():
    ap = arg_parser(15)
    ap.add_argument("--no-bridge", action="store_true")
    ap.add_argument("--no-srt", action="store_true")
    ap.add_argument("--qemu", action="store_true", help="add the qemu backend's two paths")
    ap.add_argument("--before", help="another build's bluebox, for a before/after row")
    a = ap.parse_args()
    home = tempfile.mkdtemp(prefix="bluebox-cbench-", dir="/var/tmp")
    env = dict(os.environ, BLUEBOX_HOME=os.path.join(home, "home"))
    for k in ("BLUEBOX_LAUNCH", "BLUEBOX_UML_ARGS"):
        env.pop(k, None)
    env.setdefault("BLUEBOX_QEMU_ACCEL", "tcg")
    accel = env["BLUEBOX_QEMU_ACCEL"]
    # the direct launch is the default: the podman path is asked for by name (a build from
    # before the direct launch ignores the variable)
    direct = dict(env, BLUEBOX_LAUNCH="direct")
    via_podman = dict(env, BLUEBOX_LAUNCH="podman")
    before = dict(via_podman, BLUEBOX_HOME=os.path.join(home, "before"))
    srt = None if a.no_srt else shutil.which("srt")
    names = ["none"] + ([] if a.no_bridge else ["bridge"])
    try:
        for n in names:
            make(a.bin, env, n, n)
        if a.qemu:
            names.append("qemu")
            make(a.bin, env, "qemu", "none", "qemu")
        if a.before:
            make(a.before, before, "none", "none")
        # (name, environment, argv, the plain container it is compared with)
        plain_none = "podman run --rm --network none (runc)"
        plain_bridge = "podman run --rm, bridge (runc)"
        cases = [
            (plain_none, env, ["podman", "run", "--rm", "--network", "none", IMAGE, "true"],
             None),
            ("bluebox run, podman path", via_podman, [a.bin, "run", "none", "--", "true"],
             plain_none),
            ("bluebox run, direct path", direct, [a.bin, "run", "none", "--", "true"],
             plain_none),
        ]
        qemu_cases = [(f"bluebox run, qemu ({accel}), podman path", via_podman),
                      (f"bluebox run, qemu ({accel}), direct path", direct)] if a.qemu else []
        qemu_argv = [a.bin, "run", "qemu", "--", "cat", "/proc/uptime"]
        cases += [(name, e, qemu_argv, plain_none) for name, e in qemu_cases]
        if a.before:
            cases.append(("bluebox run, podman path, --before", before,
                          [a.before, "run", "none", "--", "true"], plain_none))
        if srt:
            cases.append(("srt -c true (sandbox-runtime)", env, [srt, "-c", "true"],
                          plain_none))
        if not a.no_bridge:
            cases += [
                (plain_bridge, env, ["podman", "run", "--rm", IMAGE, "true"], None),
                ("bluebox run, network: bridge (default)", env,
                 [a.bin, "run", "bridge", "--", "true"], plain_bridge),
            ]
        for _, e, argv, _ in cases:  # warm-up: caches, the bundle, the template, the check
            timed(argv, e)
        load0 = os.getloadavg()
        times = {c[0]: [] for c in cases}
        # the guest's boot alone, of this build and of --before's (podman path)
        up_cases = [("this build", via_podman, a.bin)] + ([("--before", before, a.before)]
                                                  if a.before else [])
        uptimes = {name: [] for name, _, _ in up_cases}
        outside = {name: [] for name, _ in qemu_cases}
        for _ in range(a.runs):
            for name, e, argv, _ in cases:
                times[name].append(timed(argv, e))
                if name in outside:
                    outside[name].append(times[name][-1] - float(LAST_OUT[0].split()[0]) * 1000)
            for name, e, binary in up_cases:
                out = subprocess.run([binary, "run", "none", "--", "cat", "/proc/uptime"], env=e,
                                     capture_output=True, stdin=subprocess.DEVNULL, timeout=300)
                if out.returncode == 0:
                    uptimes[name].append(float(out.stdout.split()[0]) * 1000)
        load1 = os.getloadavg()
        print(f"cold `run -- true`, {a.runs} runs interleaved, {time.strftime('%Y-%m-%d %H:%M')}"
              f"; {cpu_model()}, {os.cpu_count()} CPUs, kernel {platform.release()}")
        print(f"load (1/5/15 min) before {load0[0]:.1f}/{load0[1]:.1f}/{load0[2]:.1f}, "
              f"after {load1[0]:.1f}/{load1[1]:.1f}/{load1[2]:.1f}")
        if not srt and not a.no_srt:
            print("(srt not found: install it to get its row, see the script's help)")
        print(f"{'case':40} {'median ms':>10} {'min':>8} {'max':>8} {'ratio':>8}")
        med = {name: statistics.median(v) for name, v in times.items()}
        for name, _, _, base in cases:
            ratio = f"{med[name] / med[base]:7.2f}x" if base else f"{'1':>7}x"
            print(f"{name:40} {med[name]:10.1f} {min(times[name]):8.1f} "
                  f"{max(times[name]):8.1f} {ratio:>8}")
        for name, v in outside.items():
            print(f"  {name}: outside the guest (wall minus its uptime), median "
                  f"{statistics.median(v):.1f} ms, min {min(v):.1f}")
        if uptimes:
            print("guest's /proc/uptime when the command starts (UML boot to the command), "
                  "median ms:")
            for name, v in uptimes.items():
                print(f"  {name:38} {statistics.median(v):10.1f}")
        for prog, n in RETRIED.items():
            print(f"({os.path.basename(prog)}: {n} failed run(s) timed again)")
        print("ratio: against the plain container of the same network (bridge rows against "
              "podman's bridge)")
    finally:
        for n in names:
            subprocess.run([a.bin, "destroy", n, "--data", "-y"], env=env, capture_output=True)
        if a.before:
            subprocess.run([a.before, "destroy", "none", "--data", "-y"], env=before,
                           capture_output=True)
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
