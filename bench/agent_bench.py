#!/usr/bin/python3
"""bluebox up / exec benchmarks on the uml backend (real podman, real guest kernel).
Usage: bench/agent_bench.py [--runs N] [--up-runs N] [--bin PATH]

Needs root, build/bluebox-vmm, user-mode-linux and the test image
(tests/integration/setup.sh). Whole-process wall time, median:
* `bluebox exec box -- true` on an up sandbox (target: <= 10 ms; the original: 15 ms on krun),
  side by side with `bluebox run box -- true` (a fresh VM per command);
* `exec` and `run` of a Python one-liner when the image has python3 (the busybox test image
  has none: then `sh -c 'i=0; while [ $i -lt 1000 ]; do i=$((i+1)); done'` stands in);
* `bluebox up` (boot to the first answered ping, plus the CLI around it).
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
IMAGE = "localhost/bluebox-test/busybox:latest"


def timed(argv, env, runs, warm=3):
    for _ in range(warm):
        subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       check=True)
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       check=True)
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--up-runs", type=int, default=10)
    ap.add_argument("--bin", default=os.path.join(repo, "build", "bluebox"))
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="bluebox-bench-agent.")
    env = dict(os.environ, BLUEBOX_HOME=os.path.join(tmp, "home"))
    bb = [a.bin]
    try:
        subprocess.run(bb + ["new", "box"], env=env, check=True, stdout=subprocess.DEVNULL)
        with open(os.path.join(env["BLUEBOX_HOME"], "sandboxes", "box", "Bluefile"), "w") as f:
            f.write(f"base: {IMAGE}\nbackend: uml\nram_mib: 256\n")
        subprocess.run(bb + ["build", "box"], env=env, check=True, stdout=subprocess.DEVNULL)
        ups = []
        for _ in range(a.up_runs):
            t = time.perf_counter()
            subprocess.run(bb + ["up", "box"], env=env, check=True, stdout=subprocess.DEVNULL)
            ups.append((time.perf_counter() - t) * 1000)
            subprocess.run(bb + ["down", "box"], env=env, check=True, stdout=subprocess.DEVNULL)
        subprocess.run(bb + ["up", "box"], env=env, check=True, stdout=subprocess.DEVNULL)
        has_py = subprocess.run(bb + ["exec", "box", "--", "python3", "-c", "pass"], env=env,
                                stdin=subprocess.DEVNULL, capture_output=True).returncode == 0
        work = (["python3", "-c", "print(sum(range(1000)))"] if has_py else
                ["sh", "-c", "i=0; while [ $i -lt 1000 ]; do i=$((i+1)); done"])
        rows = [("exec -- true", timed(bb + ["exec", "box", "--", "true"], env, a.runs)),
                ("run -- true", timed(bb + ["run", "box", "--", "true"], env, max(a.runs // 5, 5),
                                      warm=1)),
                (f"exec -- {work[0]} one-liner", timed(bb + ["exec", "box", "--", *work], env,
                                                       a.runs)),
                (f"run -- {work[0]} one-liner", timed(bb + ["run", "box", "--", *work], env,
                                                      max(a.runs // 5, 5), warm=1)),
                ("up (boot to first ping)", statistics.median(ups))]
        print(f"median wall ms; exec: {a.runs} runs, run: {max(a.runs // 5, 5)}, "
              f"up: {a.up_runs}")
        for label, ms in rows:
            print(f"{label:36s} {ms:9.2f}")
    finally:
        subprocess.run(bb + ["destroy", "box", "--data", "-y"], env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
