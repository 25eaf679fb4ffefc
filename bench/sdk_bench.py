#!/usr/bin/python3
"""What an SDK call costs over the raw API request it makes (issue 16: at most 1 ms more, median).
Usage: bench/sdk_bench.py [--runs N] [--bin PATH] [--socket PATH --sandbox NAME]

Side by side, interleaved call by call in one process each (Python, then Node):
* GET /v1/version: a raw request (one connection, the request bytes written by hand, the
  response read to its Content-Length) against Client.version();
* POST /v1/sandboxes/box/exec `true` on an up uml sandbox: raw against Sandbox.exec("true").
The SDK's extra cost is the median of the SDK calls minus the median of the raw ones (which of
the pair goes first alternates); "paired" is the median of each pair's difference, which a
busy machine's drift disturbs less.

Without --socket: a throwaway BLUEBOX_HOME with a uml sandbox, and `bluebox serve` started here
(needs root, build/bluebox-vmm, user-mode-linux, the test image from tests/integration/setup.sh
and the TypeScript SDK built: cd sdk/typescript && npm ci && npm run build). With --socket: an
existing server; --sandbox names an up sandbox on it (else only the version row).
"""
import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

here = os.path.dirname(os.path.abspath(__file__))
repo = os.path.dirname(here)
sys.path.insert(0, os.path.join(repo, "sdk", "python"))
IMAGE = "localhost/bluebox-test/busybox:latest"

import bluebox  # noqa: E402


def raw_request(path, method, body):
    """The bytes of one request, built once; the SDK builds its own every call."""
    data = json.dumps(body).encode() if body is not None else b""
    head = f"{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
    if body is not None:
        head += f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n"
    return head.encode() + b"\r\n" + data


def raw_call(sock_path, req):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(sock_path)
    s.sendall(req)
    buf = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        buf += chunk
        head, sep, rest = buf.partition(b"\r\n\r\n")
        if sep:
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:") and len(rest) >= int(line.split(b":")[1]):
                    s.close()
                    return buf
    s.close()
    return buf


def pair(raw, sdk, runs, warm=5):
    for _ in range(warm):
        raw()
        sdk()
    r, k = [], []
    for i in range(runs):
        # alternate which goes first: a call may pay for the server's tail of the one before
        for f, out in ((raw, r), (sdk, k)) if i % 2 == 0 else ((sdk, k), (raw, r)):
            t = time.perf_counter()
            f()
            out.append((time.perf_counter() - t) * 1000)
    return statistics.median(r), statistics.median(k), statistics.median(b - a for a, b in zip(r, k))


def python_rows(sock, name, runs, exec_runs):
    c = bluebox.Client(socket=sock, autostart=False)
    rows = []
    v = raw_request("/v1/version", "GET", None)
    rows.append(("python  GET version", *pair(lambda: raw_call(sock, v), c.version, runs)))
    if name:
        box = c.sandbox(name)
        e = raw_request(f"/v1/sandboxes/{name}/exec", "POST", {"command": "true"})
        rows.append(("python  exec true", *pair(lambda: raw_call(sock, e), lambda: box.exec("true"),
                                                exec_runs)))
    return rows


NODE_BENCH = r"""
const http = require("node:http");
const [dist, sock, name, runs, execRuns] = process.argv.slice(-5);
const { Client } = require(dist);
function raw(method, path, body) {
  return new Promise((resolve, reject) => {
    const data = body === undefined ? undefined : JSON.stringify(body);
    const req = http.request({ socketPath: sock, method, path, agent: false,
      headers: data ? { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(data) } : {} },
      (res) => { res.on("data", () => {}); res.on("end", resolve); });
    req.on("error", reject);
    req.end(data);
  });
}
const med = (a) => { a.sort((x, y) => x - y); const m = a.length >> 1; return a.length % 2 ? a[m] : (a[m - 1] + a[m]) / 2; };
async function pair(r, s, n) {
  for (let i = 0; i < 5; i++) { await r(); await s(); }
  const R = [], S = [];
  for (let i = 0; i < n; i++) {
    for (const [f, out] of i % 2 === 0 ? [[r, R], [s, S]] : [[s, S], [r, R]]) {
      const t = process.hrtime.bigint(); await f(); out.push(Number(process.hrtime.bigint() - t) / 1e6);
    }
  }
  return [med(R), med(S), med(S.map((x, i) => x - R[i]))];
}
(async () => {
  const c = new Client({ socket: sock, autostart: false });
  const rows = [["node    GET version", ...await pair(() => raw("GET", "/v1/version"), () => c.version(), +runs)]];
  if (name) {
    const box = c.sandbox(name);
    rows.push(["node    exec true", ...await pair(() => raw("POST", `/v1/sandboxes/${name}/exec`, { command: "true" }),
                                                     () => box.exec("true"), +execRuns)]);
  }
  console.log(JSON.stringify(rows));
})().catch((e) => { console.error(e); process.exit(1); });
"""


def node_rows(sock, name, runs, exec_runs):
    dist = os.path.join(repo, "sdk", "typescript", "dist", "index.js")
    node = shutil.which("node")
    if not node or not os.path.exists(dist):
        print("(node rows skipped: build the TypeScript SDK first)", file=sys.stderr)
        return []
    out = subprocess.run([node, "-e", NODE_BENCH, "--", dist, sock, name or "", str(runs),
                          str(exec_runs)], capture_output=True, text=True, check=True).stdout
    return [tuple(r) for r in json.loads(out)]


def wait_socket(path, proc):
    for _ in range(500):
        try:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(path)
            s.close()
            return
        except OSError:
            if proc.poll() is not None:
                raise SystemExit(f"bluebox serve exited with status {proc.returncode}")
            time.sleep(0.02)
    raise SystemExit("bluebox serve did not answer")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=500)
    ap.add_argument("--exec-runs", type=int, default=100)
    ap.add_argument("--bin", default=os.path.join(repo, "build", "bluebox"))
    ap.add_argument("--socket")
    ap.add_argument("--sandbox")
    a = ap.parse_args()
    tmp = server = None
    sock, name = a.socket, a.sandbox
    bb = [a.bin]
    env = dict(os.environ)
    try:
        if not sock:
            tmp = tempfile.mkdtemp(prefix="bluebox-bench-sdk.", dir="/var/tmp")
            env["BLUEBOX_HOME"] = os.path.join(tmp, "home")
            name = "box"
            subprocess.run(bb + ["new", name], env=env, check=True, stdout=subprocess.DEVNULL)
            with open(os.path.join(env["BLUEBOX_HOME"], "sandboxes", name, "Bluefile"), "w") as f:
                f.write(f"base: {IMAGE}\nbackend: uml\nram_mib: 256\n")
            subprocess.run(bb + ["build", name], env=env, check=True, stdout=subprocess.DEVNULL)
            subprocess.run(bb + ["up", name], env=env, check=True, stdout=subprocess.DEVNULL)
            sock = os.path.join(env["BLUEBOX_HOME"], "bluebox.sock")
            server = subprocess.Popen(bb + ["serve", "--socket", sock, "--idle", "0"], env=env,
                                      stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
            wait_socket(sock, server)
        rows = python_rows(sock, name, a.runs, a.exec_runs) + node_rows(sock, name, a.runs,
                                                                         a.exec_runs)
        print(f"median ms; version: {a.runs} pairs, exec: {a.exec_runs} pairs, interleaved")
        print(f"{'call':24s} {'raw API':>9s} {'SDK':>9s} {'SDK extra':>10s} {'paired':>8s}")
        for label, raw, sdk, paired in rows:
            print(f"{label:24s} {raw:9.3f} {sdk:9.3f} {sdk - raw:10.3f} {paired:8.3f}")
    finally:
        if server:
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=30)
        if tmp:
            subprocess.run(bb + ["destroy", name, "--data", "-y"], env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
