#!/usr/bin/python3
"""/data on uml through bluebox's file server (virtio-fs, src/fsd) against hostfs (as before
the file server; `BLUEBOX_UML_HOSTFS=1` in the Bluefile's env), side by side (issue 14):
streaming (1 GiB written with fsync, read back after dropping the guest's caches) and
metadata (10,000 empty files in 100 directories made, then `find`, `ls -lR` with cold
caches, `rm -rf`), timed inside the guest from /proc/uptime; and a cold `run -- true`.
Usage: bench/data_fs_bench.py [--runs N] [--mib M] [--files N] [--bin PATH] [--git IMAGE]

--git IMAGE (a Debian image, e.g. the tests' localhost/bluebox-test/debian:bookworm; the
build installs git from the machine's apt mirror) adds a git repository of the same files:
`git add -A` + commit, then `git status` with cold caches and again warm.

Needs root, podman, user-mode-linux and the local test image (tests/integration/setup.sh);
export CONTAINERS_CONF (and CONTAINERS_STORAGE_CONF) as for the integration tests. Runs are
interleaved (fsd, hostfs, fsd, ...); medians of N."""
import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time

here = os.path.dirname(os.path.abspath(__file__))
repo = os.path.dirname(here)
IMAGE = "localhost/bluebox-test/busybox:latest"

# Each step prints "<name> <seconds>"; /proc/uptime has centisecond resolution.
WORK = r"""
t() { read a _ < /proc/uptime; }
d() { read b _ < /proc/uptime; echo "$1 $(echo "$a $b" | awk '{printf "%.2f", $2 - $1}')"; }
drop() { sync; echo 3 > /proc/sys/vm/drop_caches; }
rm -rf /data/b; mkdir -p /data/b
t; dd if=/dev/zero of=/data/b/big bs=1M count=$MIB conv=fsync 2>/dev/null; d write
drop; t; dd if=/data/b/big of=/dev/null bs=1M 2>/dev/null; d read
rm -f /data/b/big
t; i=0; while [ $i -lt 100 ]; do mkdir /data/b/$i; j=0
  while [ $j -lt $PER ]; do : > /data/b/$i/$j; j=$((j+1)); done; i=$((i+1)); done; d create
drop; t; find /data/b | wc -l > /dev/null; d find
drop; t; ls -lR /data/b > /dev/null; d ls-lR
t; rm -rf /data/b; d rm-rf
"""

GIT = r"""
t() { read a _ < /proc/uptime; }
d() { read b _ < /proc/uptime; echo "$1 $(echo "$a $b" | awk '{printf "%.2f", $2 - $1}')"; }
drop() { sync; echo 3 > /proc/sys/vm/drop_caches; }
rm -rf /data/g; mkdir -p /data/g; cd /data/g
i=0; while [ $i -lt 100 ]; do mkdir $i; j=0
  while [ $j -lt $PER ]; do echo $i.$j > $i/$j; j=$((j+1)); done; i=$((i+1)); done
git init -q . && git config user.email b@example.invalid && git config user.name b
t; git add -A; git commit -qm all; d git-commit
drop; t; git status --porcelain > /dev/null; d git-status-cold
t; git status --porcelain > /dev/null; d git-status-warm
cd /; rm -rf /data/g
"""


class Home:
    def __init__(self, binary):
        self.bin = binary
        self.dir = tempfile.mkdtemp(prefix="bluebox-bench-datafs.", dir="/var/tmp")
        self.env = dict(os.environ, BLUEBOX_HOME=os.path.join(self.dir, "home"))
        self.names = []

    def __call__(self, *args, check=True):
        r = subprocess.run([self.bin, *args], env=self.env, stdin=subprocess.DEVNULL,
                           capture_output=True)
        if check and r.returncode != 0:
            raise SystemExit(f"{args}: exit {r.returncode}: {r.stderr.decode()}")
        return r

    def box(self, name, extra=""):
        self("new", name)
        self.names.append(name)
        path = os.path.join(self.dir, "home", "sandboxes", name, "Bluefile")
        with open(path, "w") as f:
            f.write(("" if extra.startswith("base:") else f"base: {IMAGE}\n")
                    + f"backend: uml\nram_mib: 512\n{extra}")
        self("build", name)

    def close(self):
        for n in self.names:
            self("destroy", n, "--data", "-y", check=False)
        shutil.rmtree(self.dir, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--mib", type=int, default=1024)
    ap.add_argument("--files", type=int, default=10000)
    ap.add_argument("--bin", default=os.path.join(repo, "build", "bluebox"))
    ap.add_argument("--git", metavar="IMAGE")
    a = ap.parse_args()
    home = Home(a.bin)
    try:
        base = f"base: {a.git}\npkgmgr: apt\npackages: [git]\n" if a.git else ""
        home.box("fsd", base)
        home.box("hostfs", base + "env:\n  BLUEBOX_UML_HOSTFS: \"1\"\n")
        script = f"MIB={a.mib}; PER={a.files // 100}\n{WORK}" + (GIT if a.git else "")
        steps = {}
        cold = {"fsd": [], "hostfs": []}
        for _ in range(a.runs):
            for name in ("fsd", "hostfs"):
                r = home("run", name, "--", "sh", "-c", script)
                for line in r.stdout.decode().split("\n"):
                    if line.strip():
                        step, sec = line.split()
                        steps.setdefault(step, {"fsd": [], "hostfs": []})[name].append(float(sec))
                t0 = time.monotonic()
                home("run", name, "--", "true")
                cold[name].append((time.monotonic() - t0) * 1000)
        med = statistics.median
        print(f"median of {a.runs} runs, seconds inside the guest ({a.mib} MiB, {a.files} files)")
        print(f"{'step':<12}{'fsd':>10}{'hostfs':>10}{'fsd/hostfs':>12}")
        for step, v in steps.items():
            f, h = med(v["fsd"]), med(v["hostfs"])
            extra = ""
            if step in ("write", "read"):
                extra = f"   {a.mib / f:.0f} vs {a.mib / h:.0f} MiB/s" if f and h else ""
            print(f"{step:<12}{f:>10.2f}{h:>10.2f}{(f / h if h else 0):>12.2f}{extra}")
        f, h = med(cold["fsd"]), med(cold["hostfs"])
        print(f"{'run -- true':<12}{f:>9.0f}ms{h:>8.0f}ms{f / h:>12.2f}")
    finally:
        home.close()


if __name__ == "__main__":
    main()
