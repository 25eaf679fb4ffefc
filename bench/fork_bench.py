#!/usr/bin/python3
"""Forks (issue 18) on the host side: fork, diff and apply, no VM.
Usage: bench/fork_bench.py [--mib N] [--changes N] [--runs N] [--bin PATH] [--dir DIR]

  fork:   bluebox fork box f with --mib MiB (default 1024) in box's /data (then destroy f);
          target <= 0.3 s whatever the size.
  diff:   bluebox diff f with --changes entries (default 10000) in f's upper layer: 2000
          of box's files (half deleted by whiteouts, half replaced), the rest new; target
          <= 0.2 s.
  apply:  bluebox apply f -y of --mib MiB of changed files (64 files of MiB/64) over a box
          whose /data also holds 2000 small unchanged files, against cp -a of the same
          files into an empty directory; target >= 0.8x cp -a. The upper layer is rebuilt
          (untimed) before each run; the page cache is warm for both.
Median of --runs (default 5) each, whole-process wall time. Needs no podman: the commands
timed read and write files only (a stand-in podman is put first on PATH).
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
OWN = "user.bluebox.own"
WHITEOUT = bytes([1, 0, 0, 0]) + (0).to_bytes(4, "little") * 2 + \
    (0o020644).to_bytes(4, "little") + bytes(8)


def timed(argv, env):
    t = time.monotonic()
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL)
    return time.monotonic() - t


def write_mib(path, mib):
    with open(path, "wb") as f:
        for _ in range(mib):
            f.write(os.urandom(1 << 20))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=1024)
    ap.add_argument("--changes", type=int, default=10000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--bin", default=os.path.join(repo, "build", "bluebox"))
    ap.add_argument("--dir", default="/var/tmp")
    a = ap.parse_args()
    top = tempfile.mkdtemp(prefix="bluebox-forkbench-", dir=a.dir)
    try:
        stub = os.path.join(top, "stub")
        os.mkdir(stub)
        with open(os.path.join(stub, "podman"), "w") as f:
            f.write("#!/bin/sh\nexit 1\n")
        os.chmod(os.path.join(stub, "podman"), 0o755)
        home = os.path.join(top, "home")
        env = dict(os.environ, BLUEBOX_HOME=home, PATH=stub + ":" + os.environ["PATH"])
        bb = [a.bin]
        subprocess.run(bb + ["new", "box"], env=env, check=True, stdout=subprocess.DEVNULL)
        with open(os.path.join(home, "sandboxes", "box", "Bluefile"), "a") as f:
            f.write("backend: uml\n")
        data = os.path.join(home, "data", "box")

        # fork: /data of --mib MiB in 64 files plus 2000 small ones
        for i in range(2000):
            d = os.path.join(data, f"d{i % 20}")
            os.makedirs(d, exist_ok=True)
            with open(os.path.join(d, f"s{i}"), "wb") as f:
                f.write(os.urandom(4096))
        for i in range(64):
            write_mib(os.path.join(data, f"big{i}"), max(1, a.mib // 64))
        forks = []
        for _ in range(a.runs):
            forks.append(timed(bb + ["fork", "box", "f"], env))
            subprocess.run(bb + ["destroy", "f"], env=env, check=True, stdout=subprocess.DEVNULL)
        print(f"fork ({a.mib} MiB /data)         median {statistics.median(forks) * 1000:8.1f} ms")

        # diff of --changes entries
        subprocess.run(bb + ["fork", "box", "f"], env=env, check=True, stdout=subprocess.DEVNULL)
        upper = os.path.join(home, "data", "f", "upper")
        n = 0
        for i in range(2000):
            if n >= a.changes:
                break
            d = os.path.join(upper, f"d{i % 20}")
            os.makedirs(d, exist_ok=True)
            p = os.path.join(d, f"s{i}")
            with open(p, "wb") as f:
                f.write(b"" if i % 2 else b"changed")
            if i % 2:
                os.setxattr(p, OWN, WHITEOUT)
            n += 1
        new = os.path.join(upper, "new")
        os.makedirs(new, exist_ok=True)
        i = 0
        while n < a.changes:
            with open(os.path.join(new, f"n{i}"), "wb") as f:
                f.write(b"new")
            n += 1
            i += 1
        diffs = [timed(bb + ["diff", "f"], env) for _ in range(a.runs)]
        lines = subprocess.run(bb + ["diff", "f"], env=env, check=True,
                               capture_output=True).stdout.count(b"\n")
        print(f"diff ({lines} changes)         median {statistics.median(diffs) * 1000:8.1f} ms")
        subprocess.run(bb + ["discard", "f", "-y"], env=env, check=True,
                       stdout=subprocess.DEVNULL)

        # apply of --mib MiB of changed files, against cp -a of the same files
        src = os.path.join(top, "changes")
        os.mkdir(src)
        for i in range(64):
            write_mib(os.path.join(src, f"big{i}"), max(1, a.mib // 64))
        applies, cps = [], []
        for r in range(a.runs):
            shutil.rmtree(upper)
            shutil.copytree(src, upper)
            applies.append(timed(bb + ["apply", "f", "-y"], env))
            dst = os.path.join(top, f"cp{r}")
            cps.append(timed(["cp", "-a", src, dst], env))
            shutil.rmtree(dst)
        ma, mc = statistics.median(applies), statistics.median(cps)
        print(f"apply ({a.mib} MiB of changes)  median {ma * 1000:8.1f} ms  "
              f"({a.mib / ma:.0f} MiB/s)")
        print(f"cp -a (same files)            median {mc * 1000:8.1f} ms  "
              f"({a.mib / mc:.0f} MiB/s)  apply/cp speed {mc / ma:.2f}x")
    finally:
        subprocess.run(["rm", "-rf", top])


if __name__ == "__main__":
    main()
