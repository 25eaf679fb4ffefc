"""What the cold-run benches share: one timed command, a sandbox made from a Bluefile, and
cases timed interleaved (so that the machine's load falls on every case alike) down to
their medians."""
import argparse
import os
import statistics
import subprocess
import sys
import time

# The integration tests' busybox image (tests/integration/setup.sh makes it).
IMAGE = os.environ.get("BLUEBOX_TEST_IMAGE", "localhost/bluebox-test/busybox:latest")


def arg_parser(runs):
    """The flags every cold-run bench takes: --runs (default RUNS) and --bin (this checkout's
    build/bluebox); a bench adds its own."""
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=runs)
    ap.add_argument("--bin", default=os.path.join(repo, "build", "bluebox"))
    return ap


def timed(argv, env):
    """(milliseconds, stdout) of one run of argv; a failure ends the bench with its stderr."""
    t = time.monotonic()
    r = subprocess.run(argv, env=env, capture_output=True, stdin=subprocess.DEVNULL)
    ms = (time.monotonic() - t) * 1000
    if r.returncode != 0:
        sys.exit(f"{' '.join(argv)} failed: {r.stderr.decode()}")
    return ms, r.stdout.decode()


def make_sandbox(binary, env, name, bluefile):
    """`bluebox new NAME` with BLUEFILE as its Bluefile, built (env's BLUEBOX_HOME)."""
    subprocess.run([binary, "new", name], env=env, check=True, capture_output=True)
    path = os.path.join(env["BLUEBOX_HOME"], "sandboxes", name, "Bluefile")
    with open(path, "w") as f:
        f.write(bluefile)
    subprocess.run([binary, "build", name], env=env, check=True, capture_output=True)


def interleaved_medians(cases, runs):
    """cases: (name, env, argv) triples. One warm-up run each (caches, the bundle, the
    template, the isolation check), then RUNS rounds of one run of every case in turn.
    Returns {name: median ms}."""
    for _, env, argv in cases:
        timed(argv, env)
    times = {name: [] for name, _, _ in cases}
    for _ in range(runs):
        for name, env, argv in cases:
            times[name].append(timed(argv, env)[0])
    return {name: statistics.median(v) for name, v in times.items()}


def print_medians(med, runs):
    print(f"median of {runs} interleaved runs, ms (wall clock, whole process); "
          f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    for name, ms in med.items():
        print(f"{name:44} {ms:9.1f}")
