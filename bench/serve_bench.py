#!/usr/bin/python3
"""bluebox serve benchmarks on the uml backend (real podman, real guest kernel).
Usage: bench/serve_bench.py [--runs N] [--bin PATH] [--mib N]

Needs root, build/bluebox-vmm, user-mode-linux and the test image
(tests/integration/setup.sh). On one up sandbox, side by side in one run:
* `bluebox exec box -- true` (whole process, wall time) against POST /v1/sandboxes/box/exec
  {"argv":["true"]} over the Unix socket (one request on a fresh connection, wall time as
  the client sees it); target: the API at most 2 ms more (median);
* the idle server's RSS (VmRSS after start and a few requests); target: <= 8 MiB;
* streaming throughput: N MiB of zeros written by `dd bs=1M` and by busybox `head -c` through
  /exec/stream, to curl (a client in C, bytes on the wire checked) and to Python (bytes of
  stdout decoded), per second of wall time, beside `bluebox exec` of the
  same command (what the guest's agent channel delivers) and the same producer piped into
  `wc` inside the guest (what the guest itself can push through a pipe, timed by the guest's
  clock); target: >= 100 MiB/s.
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

        n = a.mib * 1048576
        producers = {  # what writes the stdout inside the guest
            "dd bs=1M": f"dd if=/dev/zero bs=1M count={a.mib} 2>/dev/null",
            "head -c": f"head -c {n} /dev/zero",
        }
        streams = {}
        for label, cmd in producers.items():
            c = Conn(sock)
            t = time.perf_counter()
            c.request("POST", "/v1/sandboxes/box/exec/stream", body=json.dumps({"command": cmd}))
            r = c.getresponse()
            got, buf = 0, b""
            while True:  # what arrived, up to 1 MiB a call, split into lines here
                more = r.read1(1 << 20)
                if not more:
                    break
                *lines, buf = (buf + more).split(b"\n")
                for line in lines:
                    d = json.loads(line)
                    if "stdout" in d:
                        got += len(base64.b64decode(d["stdout"]))
            api_secs = time.perf_counter() - t
            c.close()
            assert got == n, got
            curl_r = 0.0
            if shutil.which("curl"):  # a client in C: what the server itself delivers
                t = time.perf_counter()
                size = subprocess.run(
                    ["curl", "-s", "--unix-socket", sock, "-X", "POST", "-o", "/dev/null",
                     "-w", "%{size_download}", "-d", json.dumps({"command": cmd}),
                     "http://localhost/v1/sandboxes/box/exec/stream"],
                    check=True, capture_output=True, text=True).stdout
                curl_r = a.mib / (time.perf_counter() - t)
                assert int(size) >= n * 4 // 3, size
            t = time.perf_counter()
            subprocess.run(bb + ["exec", "box", "--", "sh", "-c", cmd], env=env, check=True,
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
            cli_secs = time.perf_counter() - t
            # The guest's own pipe: the same producer into wc inside the guest, timed there.
            inner = subprocess.run(
                bb + ["exec", "box", "--", "sh", "-c",
                      f"a=$(cut -d' ' -f1 /proc/uptime); {cmd} | wc -c >/dev/null;"
                      " b=$(cut -d' ' -f1 /proc/uptime); echo $a $b"],
                env=env, check=True, stdin=subprocess.DEVNULL, capture_output=True, text=True)
            ta, tb = map(float, inner.stdout.split())
            streams[label] = (a.mib / api_secs, curl_r, a.mib / cli_secs, a.mib / max(tb - ta, 0.01))
        cli_m, api_m = statistics.median(cli), statistics.median(http_)
        print(f"median of {a.runs} runs, wall clock, ms")
        print(f"{'bluebox exec box -- true':40s} {cli_m:8.2f}")
        print(f"{'API POST …/exec {argv:[true]}':40s} {api_m:8.2f}   {api_m - cli_m:+.2f}")
        print(f"idle serve RSS: {idle_rss / 1024:.1f} MiB")
        for label, (api_r, curl_r, cli_r, pipe_r) in streams.items():
            print(f"stream {a.mib} MiB of stdout ({label}): /exec/stream to curl {curl_r:.0f} MiB/s,"
                  f" to Python {api_r:.0f} MiB/s; bluebox exec {cli_r:.0f} MiB/s;"
                  f" the guest's own pipe {pipe_r:.0f} MiB/s")
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
