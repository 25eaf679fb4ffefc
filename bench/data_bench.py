#!/usr/bin/python3
"""Snapshot and restore of /data against GNU tar with the same compressor, on the same data.
Usage: bench/data_bench.py [--mib N] [--runs N] [--bin PATH] [--dir DIR]

Builds N MiB (default 1024) of mixed files under DIR (default /var/tmp): about a third in
many small files (1-64 KiB, in nested directories), the rest in a few large ones; content
half random, half repetitive text, so it compresses about 2:1. Then, median of --runs each:
  snapshot:  bluebox snapshot box x [--zstd] -y    vs  tar -czf / tar --zstd -cf … -C data .
  restore:   bluebox restore box x -y (into an empty /data)
                                                   vs  tar -xzf / tar --zstd -xf … -C empty
Throughput is MiB of data per second; the target (issue 5) is bluebox >= 0.9x tar. Max RSS
(GNU time's %M: the process and its children) is reported for bluebox at N/4
and N MiB: flat means it does not grow with the archive. The page cache is warm for both
tools (the data was just written). User-run: 1 GiB takes minutes, so it is not in make check.
"""
import argparse
import os
import random
import shutil
import statistics
import subprocess
import tempfile
import time

here = os.path.dirname(os.path.abspath(__file__))
repo = os.path.dirname(here)


def make_data(root, mib, seed=1):
    rnd = random.Random(seed)
    words = [bytes(rnd.choice(b"abcdefghijklmnopqrstuvwxyz") for _ in range(rnd.randint(2, 9)))
             for _ in range(2000)]

    def content(n):
        half = n // 2
        text = b" ".join(rnd.choice(words) for _ in range(half // 5 + 1))[:half]
        return os.urandom(n - len(text)) + text

    total = mib << 20
    small_budget, written, i = total // 3, 0, 0
    while written < small_budget:
        d = os.path.join(root, f"d{i % 37}", f"e{i % 11}")
        os.makedirs(d, exist_ok=True)
        n = rnd.randint(1 << 10, 64 << 10)
        with open(os.path.join(d, f"f{i}"), "wb") as f:
            f.write(content(n))
        written += n
        i += 1
    big = 0
    while written < total:
        n = min(total - written, rnd.randint(32 << 20, 128 << 20))
        with open(os.path.join(root, f"big{big}"), "wb") as f:
            left = n
            while left:
                c = min(left, 4 << 20)
                f.write(content(c))
                left -= c
        written += n
        big += 1
    return i + big


def timed(argv, env=None):
    """Wall seconds and the max RSS (KiB) of the process and its children, as GNU time
    reports it (a child forked from this Python would carry Python's own RSS)."""
    fd, out = tempfile.mkstemp()
    os.close(fd)
    t0 = time.monotonic()
    p = subprocess.run(["/usr/bin/time", "-f", "%M", "-o", out, *argv], env=env,
                       stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    dt = time.monotonic() - t0
    rss = int(open(out).read().split()[-1])
    os.unlink(out)
    if p.returncode != 0:
        raise SystemExit(f"{argv} failed")
    return dt, rss


def bench(args, mib):
    work = tempfile.mkdtemp(prefix="bluebox-databench-", dir=args.dir)
    try:
        home = os.path.join(work, "home")
        env = dict(os.environ, BLUEBOX_HOME=home)
        subprocess.run([args.bin, "new", "box"], env=env, check=True, stdout=subprocess.DEVNULL)
        data = os.path.join(home, "data", "box")
        nfiles = make_data(data, mib)
        rows = []
        for comp, flag, tarc, tarx, suffix in (
                ("gzip", [], ["-czf"], ["-xzf"], ".tar.gz"),
                ("zstd", ["--zstd"], ["--zstd", "-cf"], ["--zstd", "-xf"], ".tar.zst")):
            snap = os.path.join(home, "snapshots", "box", "x" + suffix)
            ref = os.path.join(work, "ref" + suffix)
            res = {k: [] for k in ("bb_snap", "tar_snap", "bb_rest", "tar_rest")}
            rss = {"bb_snap": 0, "bb_rest": 0}
            for _ in range(args.runs):
                t, m = timed([args.bin, "snapshot", "box", "x", *flag, "-y"], env=env)
                res["bb_snap"].append(t)
                rss["bb_snap"] = max(rss["bb_snap"], m)
                res["tar_snap"].append(timed(["tar", *tarc, ref, "-C", data, "."])[0])
            keep = os.path.join(work, "keep")
            os.rename(data, keep)  # restore into an empty /data, as tar extracts into one
            for _ in range(args.runs):
                os.mkdir(data)
                t, m = timed([args.bin, "restore", "box", snap, "-y"], env=env)
                res["bb_rest"].append(t)
                rss["bb_rest"] = max(rss["bb_rest"], m)
                shutil.rmtree(data)
                empty = os.path.join(work, "empty")
                os.mkdir(empty)
                res["tar_rest"].append(timed(["tar", *tarx, ref, "-C", empty])[0])
                shutil.rmtree(empty)
            os.rename(keep, data)
            med = {k: statistics.median(v) for k, v in res.items()}
            rows.append((comp, med, rss, os.path.getsize(snap), os.path.getsize(ref)))
        return nfiles, rows
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=1024)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--bin", default=os.path.join(repo, "build", "bluebox"))
    ap.add_argument("--dir", default="/var/tmp")
    args = ap.parse_args()
    args.bin = os.path.abspath(args.bin)
    small_rows = bench(args, max(args.mib // 4, 1))[1]
    nfiles, rows = bench(args, args.mib)
    print(f"{args.mib} MiB in {nfiles} files, median of {args.runs} runs, MiB/s of data")
    print(f"{'':6} {'op':9} {'bluebox':>9} {'tar':>9} {'ratio':>7} {'bb RSS':>9} "
          f"{'@' + str(max(args.mib // 4, 1)) + 'MiB':>9}")
    for (comp, med, rss, size, refsize), (_, _, small_rss, _, _) in zip(rows, small_rows):
        for op, bb, tar in (("snapshot", "bb_snap", "tar_snap"), ("restore", "bb_rest",
                                                                   "tar_rest")):
            print(f"{comp:6} {op:9} {args.mib / med[bb]:9.1f} {args.mib / med[tar]:9.1f} "
                  f"{med[tar] / med[bb]:6.2f}x {rss[bb] / 1024:7.1f}M "
                  f"{small_rss[bb] / 1024:7.1f}M")
        print(f"{comp:6} archive   {size / 2**20:8.1f}M (tar: {refsize / 2**20:.1f}M)")


if __name__ == "__main__":
    main()
