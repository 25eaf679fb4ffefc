#!/usr/bin/env python3
"""Where a uml guest's boot goes (issue 21): the kernel's initcalls (initcall_debug), the
guest init's steps (BLUEBOX_BOOT_PROFILE=1: src/guest/init.h) and the guest's /proc/uptime
when the command starts, over cold `bluebox run` runs of a busybox sandbox (network none).

    bench/boot_profile.py [--runs N] [--bin build/bluebox] [--compare 'ARGS' ...]

--compare runs `cat /proc/uptime` with each set of extra kernel words (BLUEBOX_UML_ARGS;
'' is bluebox's own command line), interleaved, and prints the medians: how a trim is
tried before it goes into src/vmm/machine_uml.c. Needs root, podman, user-mode-linux and the
integration tests' environment (`source /etc/bluebox-test/env; eval
"$(tests/integration/setup.sh)"`)."""
import collections
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from common import IMAGE, arg_parser

PROFILE_ARGS = ("initcall_debug printk.time=1 printk.devkmsg=on log_buf_len=4M "
                "BLUEBOX_BOOT_PROFILE=1")
INITCALL = re.compile(r"^\[\s*([\d.]+)\] (?:initcall|probe of) (\S+?)(?:\+0x\S+)?(?: \[\w+\])? "
                      r"returned -?\d+ after (\d+) usecs")
STEP = re.compile(r"^\[\s*([\d.]+)\] bluebox-init: (.*) at ([\d.]+) ms")
PLAIN_STEP = re.compile(r"^bluebox-init: (.*) at ([\d.]+) ms")
RUN_INIT = re.compile(r"^\[\s*([\d.]+)\] Run \S+ as init process")


def run(a, env, argv, extra=""):
    e = dict(env)
    if extra:
        e["BLUEBOX_UML_ARGS"] = extra
    t = time.monotonic()
    r = subprocess.run([a.bin, "run", "b", "--"] + argv, env=e,
                       capture_output=True, stdin=subprocess.DEVNULL)
    ms = (time.monotonic() - t) * 1000
    if r.returncode != 0:
        sys.exit(f"bluebox run -- {' '.join(argv)} failed: {r.stderr.decode()}")
    return ms, r.stdout.decode()


def profile(a, env):
    """Median per initcall and per init step over a.runs profiled boots."""
    calls = collections.defaultdict(list)
    steps = collections.defaultdict(list)
    to_init, uptimes, sums = [], [], []
    for _ in range(a.runs):
        out = run(a, env, ["sh", "-c", "cat /proc/uptime; dmesg"], PROFILE_ARGS)[1]
        lines = out.splitlines()
        uptimes.append(float(lines[0].split()[0]) * 1000)
        total = 0
        for line in lines[1:]:
            m = INITCALL.match(line)
            if m:
                calls[m.group(2)].append(int(m.group(3)) / 1000)
                total += int(m.group(3)) / 1000
            m = STEP.match(line)
            if m:
                steps[m.group(2)].append(float(m.group(3)))
            m = RUN_INIT.match(line)
            if m:
                to_init.append(float(m.group(1)) * 1000)
        sums.append(total)
    print(f"profiled boots ({a.runs}, initcall_debug: slower than a plain boot), medians, ms")
    print(f"  kernel start to init (printk clock, 10 ms steps) {statistics.median(to_init):8.1f}")
    print(f"  all initcalls and probes                         {statistics.median(sums):8.1f}")
    top = sorted(calls.items(), key=lambda kv: -statistics.median(kv[1]))[:a.top]
    for name, v in top:
        print(f"    {name:46} {statistics.median(v):8.1f}")
    print("  guest init steps (boot clock at the end of each)")
    for name, v in steps.items():
        print(f"    {name:46} {statistics.median(v):8.1f}")
    print(f"  uptime at the command                            {statistics.median(uptimes):8.1f}")


def compare(a, env):
    variants = a.compare
    cols = ("init starts", "command starts", "uptime at it", "wall clock")
    res = {v: {c: [] for c in cols} for v in variants}
    for _ in range(a.runs):
        for v in variants:
            words = f"{v} printk.devkmsg=on BLUEBOX_BOOT_PROFILE=1".strip()
            ms, out = run(a, env, ["sh", "-c", "cat /proc/uptime; dmesg"], words)
            lines = out.splitlines()
            marks = {m.group(2): float(m.group(3)) for m in map(STEP.match, lines) if m}
            marks.update({m.group(1): float(m.group(2))
                          for m in map(PLAIN_STEP.match, lines) if m})
            res[v]["init starts"].append(marks.get("start", 0))
            res[v]["command starts"].append(marks.get("command started", 0))
            res[v]["uptime at it"].append(float(lines[0].split()[0]) * 1000)
            res[v]["wall clock"].append(ms)
    print(f"kernel words compared, median of {a.runs} interleaved cold runs, ms (guest boot "
          "clock at init's start and at the command's; wall clock of the whole run)")
    print(f"  {'':50} " + " ".join(f"{c:>14}" for c in cols))
    for v in variants:
        print(f"  {(v or '(bluebox default)')[:50]:50} " +
              " ".join(f"{statistics.median(res[v][c]):14.1f}" for c in cols))


def main():
    ap = arg_parser(5)
    ap.add_argument("--top", type=int, default=12)
    ap.add_argument("--ram-mib", type=int, default=512)
    ap.add_argument("--compare", nargs="*", help="extra kernel words to compare ('' = none)")
    a = ap.parse_args()
    home = tempfile.mkdtemp(prefix="bluebox-boot-", dir="/var/tmp")
    env = dict(os.environ, BLUEBOX_HOME=os.path.join(home, "home"))
    env.pop("BLUEBOX_UML_ARGS", None)
    try:
        subprocess.run([a.bin, "new", "b"], env=env, check=True, capture_output=True)
        with open(os.path.join(home, "home", "sandboxes", "b", "Bluefile"), "w") as f:
            f.write(f"base: {IMAGE}\nbackend: uml\nram_mib: {a.ram_mib}\nnetwork: none\n"
                    "timeout_seconds: 60\n")
        subprocess.run([a.bin, "build", "b"], env=env, check=True, capture_output=True)
        run(a, env, ["true"])  # warm-up: the bundle, caches
        print(f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; ram_mib {a.ram_mib}")
        if a.compare is not None:
            compare(a, env)
        else:
            profile(a, env)
    finally:
        subprocess.run([a.bin, "destroy", "b", "--data", "-y"], env=env, capture_output=True)
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
