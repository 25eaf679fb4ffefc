#!/usr/bin/python3
"""Egress by name (issue 17): what the allowlist's enforcing path costs, side by side in one run
on the uml backend. Usage: bench/egress_bench.py [--rounds N] [--bin PATH]

The same sandbox runs twice: plain `network: bridge` (libslirp straight to the internet) and
bridge with an allowlist naming the machine's Debian mirror (bluebox's resolver, the fake
address, a proxy process forked per connection that reads the Host, resolves and relays).
Measured inside the guest with /proc/uptime, DNS kept out of both (the guest resolves once,
then connects to the address it got with the Host header set):
* throughput of one download of a large file from the mirror (median of N);
* connection setup: the mean time of 20 small HTTP requests in a row, median of N rounds; the
  difference between the modes is the added latency per connection.
Needs root, build/bluebox-vmm, user-mode-linux, the test image (tests/integration/setup.sh)
and an http:// Debian mirror in apt's sources that the bridge can reach.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import urllib.request

here = os.path.dirname(os.path.abspath(__file__))
repo = os.path.dirname(here)
sys.path.insert(0, os.path.join(repo, "tests", "integration"))
IMAGE = "localhost/bluebox-test/busybox:latest"
BIG = ["dists/bookworm/main/binary-amd64/Packages.xz", "dists/bookworm/main/Contents-amd64.gz",
       "dists/bookworm/InRelease"]
SMALL = "dists/bookworm/Release.gpg"


def mirror():
    from test_uml_boot import apt_mirror  # reads apt's sources; no name written here
    m = apt_mirror()
    if not m:
        sys.exit("egress_bench: apt has no http:// Debian mirror configured")
    host, url = m
    base = url.split("/dists/")[0] + "/"
    for path in BIG:
        try:
            with urllib.request.urlopen(base + path, timeout=30) as r:
                size = len(r.read())
            if size > 1 << 20:
                return host, base, path, size
        except OSError:
            continue
    sys.exit("egress_bench: no large file on the mirror to download")


def guest_script(host, base, big, rounds):
    path = base.split(host, 1)[1]
    return f"""
ip=$(nslookup {host} | sed -n 's/^Address: *//p' | tail -n1)
up() {{ cut -d' ' -f1 /proc/uptime; }}
get() {{ wget -q -O /dev/null --header "Host: {host}" "http://$ip{path}$1"; }}
get {SMALL}
for r in $(seq {rounds}); do
    a=$(up); get {big}; b=$(up); echo "big $a $b"
    a=$(up); for i in $(seq 20); do get {SMALL}; done; b=$(up); echo "small $a $b"
done
"""


def run_mode(bb, home_env, name, allow, script):
    env = dict(home_env)
    if allow is not None:
        env["BLUEBOX_NET_ALLOW"] = allow
    r = subprocess.run([bb, "run", name, "--", "sh", "-c", script], env=env,
                       capture_output=True, text=True, timeout=1800)
    if r.returncode != 0:
        sys.exit(f"egress_bench: run failed ({'allowlist' if allow else 'bridge'}): {r.stderr}")
    big, small = [], []
    for ln in r.stdout.splitlines():
        w = ln.split()
        if len(w) == 3 and w[0] in ("big", "small"):
            (big if w[0] == "big" else small).append(float(w[2]) - float(w[1]))
    if not big:
        sys.exit(f"egress_bench: no timings ({r.stdout!r})")
    return big, small


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--bin", default=os.path.join(repo, "build", "bluebox"))
    a = ap.parse_args()
    host, base, big, size = mirror()
    tmp = tempfile.mkdtemp(prefix="bluebox-egress-bench-", dir="/var/tmp")
    env = dict(os.environ, BLUEBOX_HOME=os.path.join(tmp, "home"))
    try:
        subprocess.run([a.bin, "new", "eb"], env=env, check=True, capture_output=True)
        with open(os.path.join(tmp, "home", "sandboxes", "eb", "Bluefile"), "w") as f:
            f.write(f"base: {IMAGE}\nbackend: uml\nram_mib: 256\nnetwork: bridge\n")
        subprocess.run([a.bin, "build", "eb"], env=env, check=True, capture_output=True)
        script = guest_script(host, base, big, a.rounds)
        res = {}
        for mode, allow in (("bridge", None), ("allowlist", host), ("bridge ", None),
                            ("allowlist ", host)):  # interleaved: two boots each
            b, s = run_mode(a.bin, env, "eb", allow, script)
            k = mode.strip()
            res.setdefault(k, ([], []))
            res[k][0].extend(b)
            res[k][1].extend(s)
        print(f"download: {big.rsplit('/', 1)[-1]} ({size / 1e6:.1f} MB) from the apt mirror; "
              f"{len(res['bridge'][0])} downloads and rounds per mode, medians")
        print(f"{'mode':<12}{'MB/s':>10}{'ms/request':>12}")
        for k in ("bridge", "allowlist"):
            mbps = size / 1e6 / statistics.median(res[k][0])
            req = statistics.median(res[k][1]) / 20 * 1000
            print(f"{k:<12}{mbps:>10.1f}{req:>12.2f}")
        med = {k: (statistics.median(v[0]), statistics.median(v[1])) for k, v in res.items()}
        tb = med["bridge"][0] / med["allowlist"][0]
        dl = (med["allowlist"][1] - med["bridge"][1]) / 20 * 1000
        print(f"allowlist/bridge throughput {tb:.2f}x; added setup per connection {dl:+.2f} ms")
    finally:
        subprocess.run([a.bin, "destroy", "eb", "--data", "-y"], env=env, capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
