#!/usr/bin/python3
"""Piped stdin into a uml guest (issue 14): `bluebox run <sb> -- sh -c 'cat >/dev/null'` with
N MiB on stdin, against `bluebox exec` of the same on an up sandbox (the agent's TCP path),
and `bluebox run <sb> -- true` for the boot that a run pays and an exec does not.
Usage: bench/stdin_bench.py [--runs N] [--mib M] [--bin PATH] [--no-exec]

Needs root, podman, user-mode-linux and the local test image (tests/integration/setup.sh);
export CONTAINERS_CONF (and CONTAINERS_STORAGE_CONF) as for the integration tests. Runs are
interleaved; medians of N. The data is checked once per binary (sha256 in the guest)."""
import argparse
import hashlib
import os
import shutil
import statistics
import subprocess
import tempfile
import time

here = os.path.dirname(os.path.abspath(__file__))
repo = os.path.dirname(here)
IMAGE = "localhost/bluebox-test/busybox:latest"


class Home:
    def __init__(self, binary):
        self.bin = binary
        self.dir = tempfile.mkdtemp(prefix="bluebox-bench-stdin.", dir="/var/tmp")
        self.env = dict(os.environ, BLUEBOX_HOME=os.path.join(self.dir, "home"))

    def __call__(self, *args, stdin=subprocess.DEVNULL, check=True):
        r = subprocess.run([self.bin, *args], env=self.env, stdin=stdin, capture_output=True)
        if check and r.returncode != 0:
            raise SystemExit(f"{args}: exit {r.returncode}: {r.stderr.decode()}")
        return r

    def box(self, name):
        self("new", name)
        path = os.path.join(self.dir, "home", "sandboxes", name, "Bluefile")
        with open(path, "w") as f:
            f.write(f"base: {IMAGE}\nbackend: uml\nram_mib: 256\n")
        self("build", name)

    def close(self):
        self("down", "s", check=False)
        self("destroy", "s", "--data", "-y", check=False)
        shutil.rmtree(self.dir, ignore_errors=True)


def timed(home, data, *args):
    with open(data, "rb") as f:
        t = time.monotonic()
        home(*args, stdin=f)
        return time.monotonic() - t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--mib", type=int, default=64)
    ap.add_argument("--bin", default=os.path.join(repo, "build", "bluebox"))
    ap.add_argument("--no-exec", action="store_true", help="skip the exec side")
    a = ap.parse_args()
    data = tempfile.mktemp(prefix="bluebox-bench-stdin.", dir="/var/tmp")
    with open(data, "wb") as f:
        f.write(os.urandom(a.mib << 20))
    want = hashlib.sha256(open(data, "rb").read()).hexdigest()
    home = Home(a.bin)
    try:
        home.box("s")
        with open(data, "rb") as f:
            got = home("run", "s", "--", "sha256sum", stdin=f).stdout.split()[0].decode()
        assert got == want, "run's stdin did not arrive byte-exact"
        if not a.no_exec:
            home("up", "s")
        cat = ["--", "sh", "-c", "cat > /dev/null"]
        res = {"true": [], "run": [], "exec": []}
        for _ in range(a.runs):
            res["true"].append(timed(home, "/dev/null", "run", "s", "--", "true"))
            res["run"].append(timed(home, data, "run", "s", *cat))
            if not a.no_exec:
                res["exec"].append(timed(home, data, "exec", "s", *cat))
        med = {k: statistics.median(v) for k, v in res.items() if v}
        print(f"{a.mib} MiB through stdin, median of {a.runs} runs, seconds (MB/s of the transfer)")
        print(f"run -- true (boot)          {med['true']:7.2f}")
        xfer = max(med["run"] - med["true"], 1e-3)
        print(f"run, piped                  {med['run']:7.2f}   "
              f"({(a.mib << 20) / xfer / 1e6:6.1f} MB/s after the boot)")
        if "exec" in med:
            print(f"exec, piped (up sandbox)    {med['exec']:7.2f}   "
                  f"({(a.mib << 20) / med['exec'] / 1e6:6.1f} MB/s)")
    finally:
        home.close()
        os.unlink(data)


if __name__ == "__main__":
    main()
