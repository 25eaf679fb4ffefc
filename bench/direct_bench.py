#!/usr/bin/env python3
"""Cold `bluebox run -- true` on uml (network: none) through podman and through the direct
OCI path (BLUEBOX_LAUNCH=direct, issue 21), beside a plain `podman run --rm --network none
<image> true` with runc; runs interleaved, so that load hits all three alike. Also the
guest's /proc/uptime when the workload starts (UML boot to the command).

    bench/direct_bench.py [--runs N] [--bin build/bluebox]

Needs root, podman, runc, build/bluebox-vmm and user-mode-linux; run it under the
integration tests' environment (`source /etc/bluebox-test/env; eval
"$(tests/integration/setup.sh)"`)."""
import os
import shutil
import statistics
import subprocess
import tempfile

from common import IMAGE, arg_parser, interleaved_medians, make_sandbox, print_medians, timed


def main():
    ap = arg_parser(10)
    a = ap.parse_args()
    home = tempfile.mkdtemp(prefix="bluebox-dbench-", dir="/var/tmp")
    env = dict(os.environ, BLUEBOX_HOME=os.path.join(home, "home"), BLUEBOX_LAUNCH="podman")
    direct = dict(env, BLUEBOX_LAUNCH="direct")
    try:
        make_sandbox(a.bin, env, "b",
                     f"base: {IMAGE}\nbackend: uml\nram_mib: 256\nnetwork: none\n")
        cases = (
            ("podman run --rm --network none image true", direct,
             ["podman", "run", "--rm", "--network", "none", IMAGE, "true"]),
            ("bluebox run -- true, podman path", env, [a.bin, "run", "b", "--", "true"]),
            ("bluebox run -- true, direct path", direct, [a.bin, "run", "b", "--", "true"]),
        )
        med = interleaved_medians(cases, a.runs)
        uptimes = {"podman path": [], "direct path": []}
        for _ in range(a.runs):
            for name, e in (("podman path", env), ("direct path", direct)):
                out = timed([a.bin, "run", "b", "--", "cat", "/proc/uptime"], e)[1]
                uptimes[name].append(float(out.split()[0]) * 1000)
        print_medians(med, a.runs)
        for name, v in uptimes.items():
            print(f"{'guest uptime at workload start, ' + name:44} {statistics.median(v):9.1f}")
        plain = med["podman run --rm --network none image true"]
        for name in ("bluebox run -- true, podman path", "bluebox run -- true, direct path"):
            print(f"{name + ' / plain':44} {med[name] / plain:8.2f}x")
    finally:
        subprocess.run([a.bin, "destroy", "b", "--data", "-y"], env=env, capture_output=True)
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
