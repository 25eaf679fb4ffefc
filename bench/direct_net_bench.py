#!/usr/bin/env python3
"""Cold `bluebox run -- true` on uml with `network: bridge` through podman and through the
direct OCI path (BLUEBOX_LAUNCH=direct: a per-run network namespace linked by slirp4netns,
src/launch/direct_net.c), beside a plain `podman run --rm <image> true` (podman's default
bridge network, runc) and the same with `--network none`; interleaved, so that load hits all
alike. Issue 21's target: the direct bridge run ≤ 1.3× the plain bridge container.

    bench/direct_net_bench.py [--runs N] [--bin build/bluebox]

Needs root, podman, runc, slirp4netns, build/bluebox-vmm and user-mode-linux; run it under
the integration tests' environment (`source /etc/bluebox-test/env; eval
"$(tests/integration/setup.sh)"`)."""
import os
import shutil
import subprocess
import tempfile

from common import IMAGE, arg_parser, interleaved_medians, make_sandbox, print_medians


def main():
    ap = arg_parser(10)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="bluebox-nbench-", dir="/var/tmp")
    home = os.path.join(tmp, "home")
    env = dict(os.environ, BLUEBOX_HOME=home, BLUEBOX_LAUNCH="podman")
    direct = dict(env, BLUEBOX_LAUNCH="direct")
    try:
        for name, network in (("br", "bridge"), ("no", "none")):
            make_sandbox(a.bin, env, name,
                         f"base: {IMAGE}\nbackend: uml\nram_mib: 256\nnetwork: {network}\n")
        cases = (
            ("podman run --rm image true (bridge)", env,
             ["podman", "run", "--rm", "--pull=never", IMAGE, "true"]),
            ("podman run --rm --network none image true", env,
             ["podman", "run", "--rm", "--pull=never", "--network", "none", IMAGE, "true"]),
            ("bluebox bridge, podman path", env, [a.bin, "run", "br", "--", "true"]),
            ("bluebox bridge, direct path", direct, [a.bin, "run", "br", "--", "true"]),
            ("bluebox none, direct path", direct, [a.bin, "run", "no", "--", "true"]),
        )
        med = interleaved_medians(cases, a.runs)
        print_medians(med, a.runs)
        plain = med["podman run --rm image true (bridge)"]
        for name in ("bluebox bridge, podman path", "bluebox bridge, direct path"):
            print(f"{name + ' / plain bridge':44} {med[name] / plain:8.2f}x")
        print(f"{'bridge over none, direct path':44} "
              f"{med['bluebox bridge, direct path'] - med['bluebox none, direct path']:+9.1f}")
    finally:
        for name in ("br", "no"):
            subprocess.run([a.bin, "destroy", name, "--data", "-y"], env=env,
                           capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
