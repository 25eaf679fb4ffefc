#!/usr/bin/python3
"""bluebox serve benchmarks on the uml backend (real podman, real guest kernel).
Usage: bench/serve_bench.py [--runs N] [--bin PATH] [--mib N]

Needs root, build/bluebox-vmm, user-mode-linux and the test image
(tests/integration/setup.sh). On one up sandbox, side by side in one run:
* `bluebox exec box -- true` (whole process, wall time) against POST /v1/sandboxes/box/exec
  {"argv":["true"]} over the Unix socket (one request on a fresh connection, wall time as
  the client sees it); target: the API at most 2 ms more (median);
* the idle server's RSS (VmRSS after start and a few requests); target: <= 8 MiB;
* streaming throughput: `head -c N MiB /dev/zero` through /exec/stream, bytes of stdout
  decoded per second of wall time, beside `bluebox exec` of the same command (what the
  guest's agent channel itself delivers); target: >= 100 MiB/s.
"""
import argparse
import base64
import http.client
import json
import os
import shutil
import socket
import statistics
import subprocess
import tempfile
import time

here = os.path.dirname(os.path.abspath(__file__))
repo = os.path.dirname(here)
IMAGE = "localhost/bluebox-test/busybox:latest"


class Conn(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost", timeout=300)
        self.path_ = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.connect(self.path_)


def api(sock, method, path, body=None):
    c = Conn(sock)
    c.request(method, path, body=None if body is None else json.dumps(body))
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, json.loads(data)


def rss_kib(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--mib", type=int, default=256)
    ap.add_argument("--bin", default=os.path.join(repo, "build", "bluebox"))
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="bluebox-bench-serve.")
    home = os.path.join(tmp, "home")
    env = dict(os.environ, BLUEBOX_HOME=home)
    bb = [a.bin]
    srv = None
    try:
        subprocess.run(bb + ["new", "box"], env=env, check=True, stdout=subprocess.DEVNULL)
        with open(os.path.join(home, "sandboxes", "box", "Bluefile"), "w") as f:
            f.write(f"base: {IMAGE}\nbackend: uml\nram_mib: 256\nnetwork: none\n")
        subprocess.run(bb + ["build", "box"], env=env, check=True, stdout=subprocess.DEVNULL)
        subprocess.run(bb + ["up", "box"], env=env, check=True, stdout=subprocess.DEVNULL)
        sock = os.path.join(home, "bluebox.sock")
        srv = subprocess.Popen(bb + ["serve"], env=env, stderr=subprocess.DEVNULL)
        while not os.path.exists(sock):
            time.sleep(0.02)
        for _ in range(3):
            api(sock, "GET", "/v1/version")
        time.sleep(0.5)
        idle_rss = rss_kib(srv.pid)

        cli, http_ = [], []
        argv = bb + ["exec", "box", "--", "true"]
        for _ in range(3):
            subprocess.run(argv, env=env, check=True, stdin=subprocess.DEVNULL)
            api(sock, "POST", "/v1/sandboxes/box/exec", {"argv": ["true"]})
        for _ in range(a.runs):  # interleaved, so both see the same machine
            t = time.perf_counter()
            subprocess.run(argv, env=env, check=True, stdin=subprocess.DEVNULL)
            cli.append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            st, r = api(sock, "POST", "/v1/sandboxes/box/exec", {"argv": ["true"]})
            http_.append((time.perf_counter() - t) * 1000)
            assert st == 200 and r["exit_code"] == 0, r

        c = Conn(sock)
        t = time.perf_counter()
        c.request("POST", "/v1/sandboxes/box/exec/stream",
                  body=json.dumps({"command": f"head -c {a.mib * 1048576} /dev/zero"}))
        r = c.getresponse()
        got = 0
        for line in r:
            d = json.loads(line)
            if "stdout" in d:
                got += len(base64.b64decode(d["stdout"]))
        secs = time.perf_counter() - t
        c.close()
        assert got == a.mib * 1048576, got
        t = time.perf_counter()
        subprocess.run(bb + ["exec", "box", "--", "head", "-c", str(a.mib * 1048576), "/dev/zero"],
                       env=env, check=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        cli_secs = time.perf_counter() - t
        cli_m, api_m = statistics.median(cli), statistics.median(http_)
        print(f"median of {a.runs} runs, wall clock, ms")
        print(f"{'bluebox exec box -- true':40s} {cli_m:8.2f}")
        print(f"{'API POST …/exec {argv:[true]}':40s} {api_m:8.2f}   {api_m - cli_m:+.2f}")
        print(f"idle serve RSS: {idle_rss / 1024:.1f} MiB")
        print(f"stream {a.mib} MiB of stdout: {secs:.2f} s = {a.mib / secs:.0f} MiB/s"
              f" (bluebox exec, same command: {cli_secs:.2f} s = {a.mib / cli_secs:.0f} MiB/s)")
    finally:
        if srv:
            srv.terminate()
            srv.wait()
        subprocess.run(bb + ["down", "box"], env=env, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        subprocess.run(bb + ["destroy", "box", "--data", "-y"], env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
