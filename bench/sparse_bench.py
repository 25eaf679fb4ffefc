#!/usr/bin/python3
"""A guest's sparse file through snapshot and restore (issue 12, finding 8).
Usage: bench/sparse_bench.py [--gib N] [--bin PATH] [--dir DIR]

Makes /data hold one N GiB (default 4) file made with truncate plus four 4 KiB blocks of
random data, then, for gzip and zstd: `bluebox snapshot` (time, archive size) and
`bluebox restore` into an emptied /data (time, disk the file then takes, by st_blocks);
then `bluebox data import` of the restored file (time, disk).
Runs without podman (the /data commands need none). Compare --bin of two builds.
"""
import argparse
import os
import shutil
import subprocess
import tempfile
import time

here = os.path.dirname(os.path.abspath(__file__))
repo = os.path.dirname(here)


def timed(argv, env):
    t = time.monotonic()
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL)
    return time.monotonic() - t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gib", type=int, default=4)
    ap.add_argument("--bin", default=os.path.join(repo, "build", "bluebox"))
    ap.add_argument("--dir", default="/var/tmp")
    o = ap.parse_args()
    top = tempfile.mkdtemp(prefix="sparse-bench-", dir=o.dir)
    try:
        stub = os.path.join(top, "stub")
        os.mkdir(stub)
        with open(os.path.join(stub, "podman"), "w") as f:
            f.write("#!/bin/sh\nexit 1\n")
        os.chmod(os.path.join(stub, "podman"), 0o755)
        env = dict(os.environ, BLUEBOX_HOME=os.path.join(top, "home"),
                   PATH=stub + ":" + os.environ["PATH"])
        subprocess.run([o.bin, "new", "box"], env=env, check=True, stdout=subprocess.DEVNULL)
        data = os.path.join(top, "home", "data", "box")
        img = os.path.join(data, "disk.img")
        size = o.gib << 30
        with open(img, "wb") as f:
            f.truncate(size)
            for off in (0, size // 4, size // 2 + 12288, size - 4096):
                f.seek(off)
                f.write(os.urandom(4096))
        print(f"{o.bin}: {o.gib} GiB file, {os.stat(img).st_blocks * 512 >> 10} KiB on disk")
        for flags, suffix in (((), ".tar.gz"), (("--zstd",), ".tar.zst")):
            s = timed([o.bin, "snapshot", "box", "b", *flags, "-y"], env)
            arch = os.path.join(top, "home", "snapshots", "box", "b" + suffix)
            asize = os.path.getsize(arch)
            os.unlink(img)
            r = timed([o.bin, "restore", "box", "b", "-y"], env)
            used = os.stat(img).st_blocks * 512
            print(f"  {suffix:9} snapshot {s:7.3f} s, {asize / 1024:8.1f} KiB;"
                  f"  restore {r:7.3f} s, file takes {used / 1048576:8.2f} MiB")
        src = os.path.join(top, "import")
        os.mkdir(src)
        os.rename(img, os.path.join(src, "disk.img"))
        i = timed([o.bin, "data", "import", "box", src], env)
        used = os.stat(img).st_blocks * 512
        print(f"  data import {i:7.3f} s, file takes {used / 1048576:8.2f} MiB")
    finally:
        shutil.rmtree(top, ignore_errors=True)


main()
