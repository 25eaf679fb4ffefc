"""Container limits that fit the host, against the STAND-IN podman.

bluebox runs under a hard nofile limit of 4096 and without CAP_SYS_RESOURCE, as root is on
this CI machine kind (hard nofile 20000 there). The stand-in plays runc on such a host
($BB_STANDIN_RLIMITS, tests/cli/standin_podman.py): a container asking for more than the hard
limit it inherited fails as runc does. podman's defaults (nofile 1048576) do not fit, so every
podman run and build bluebox makes must carry limits that do, and doctor must start a plain
container and say what fails and how to fix it. The real podman is in
tests/integration/test_host_limits.py."""
import os
import re
import resource
import shutil

import pytest

from test_run import NAME, Standin

HARD_NOFILE = 4096
IMAGE = "localhost/elsewhere/base:1"


def pid_max():
    with open("/proc/sys/kernel/pid_max") as f:
        return int(f.read())


# nproc: podman's default (pid_max), unless the hard limit is lower
NPROC = min(pid_max(), resource.getrlimit(resource.RLIMIT_NPROC)[1])
FLAGS = [f"--ulimit=nofile={HARD_NOFILE}:{HARD_NOFILE}", f"--ulimit=nproc={NPROC}:{NPROC}"]


@pytest.fixture
def sb(bb):
    s = Standin(bb)
    if not shutil.which("setpriv"):
        pytest.fail("setpriv (util-linux) is missing", pytrace=False)
    # the hard limit lowered, and CAP_SYS_RESOURCE (which would let podman raise it) dropped
    wrapper = bb.tmp / "low-limits.sh"
    wrapper.write_text(f"#!/bin/sh\nulimit -n {HARD_NOFILE} || exit 99\n"
                       "exec setpriv --inh-caps=-sys_resource --bounding-set=-sys_resource "
                       f"-- {s.bin} \"$@\"\n")
    wrapper.chmod(0o755)
    bb.bin = str(wrapper)
    bb.env.update({"BB_STANDIN_RLIMITS": "1", "BB_STANDIN_LOCAL_IMAGES": f"<none>:<none> {IMAGE}"})
    bb.env.pop("CONTAINERS_CONF", None)
    bb.env.pop("CONTAINERS_CONF_OVERRIDE", None)
    yield s
    s.cleanup()


def doctor_line(text, name):
    lines = [l for l in text.splitlines() if re.match(rf"  (ok  |warn|FAIL)  {name}\s", l)]
    assert len(lines) == 1, text
    return lines[0]


def test_every_container_gets_limits_that_fit(sb):
    """run (its isolation baseline and the workload) and build carry --ulimit values within
    the hard limits, so they start where podman's defaults fail."""
    sb.sandbox()
    r = sb.run("run", NAME, "--", "true")
    assert r.rc == 0, r
    runs = sb.runs()
    assert len(sb.probes()) == 2 and len(sb.workloads()) == 1, runs
    for argv in runs:
        assert [a for a in argv if a.startswith("--ulimit")] == FLAGS, argv
    sb.bb.podman_log.write_text("")
    r = sb.run("build", "--host-kernel", NAME)
    assert r.rc == 0, r
    build = [c for c in sb.calls() if c[:1] == ["build"]]
    assert build and [a for a in build[0] if a.startswith("--ulimit")] == [
        "--ulimit=nproc=1024:1024", f"--ulimit=nofile={HARD_NOFILE}:{HARD_NOFILE}"], build


def test_doctor_starts_a_plain_container(sb):
    """doctor starts one with bluebox's limits (it starts) and without (podman's defaults
    fail), and says both, with podman's own error."""
    r = sb.run("doctor")
    assert r.rc == 0, r
    line = doctor_line(r.text, "plain container")
    assert line.startswith("  ok"), r.text
    assert f"starts ({IMAGE}) with bluebox's {' '.join(FLAGS)}" in line, line
    assert "error setting rlimit type 7: operation not permitted" in line, line
    assert f'default_ulimits = ["nofile={HARD_NOFILE}:{HARD_NOFILE}", ' in line, line
    probes = sb.probes()
    assert len(probes) == 2, sb.calls()
    assert [a for a in probes[0] if a.startswith("--ulimit")] == FLAGS, probes
    assert not [a for a in probes[1] if a.startswith("--ulimit")], probes
    assert all(p[p.index("__probe") - 1] == IMAGE for p in probes), probes


def test_a_containers_conf_that_sets_limits_wins(sb):
    """A containers.conf with default_ulimits is the user's choice: bluebox passes none
    (--ulimit would replace that whole list). When its limits do not fit, doctor fails with
    podman's error and the line that fits, and run fails with podman's error."""
    conf = sb.bb.tmp / "containers.conf"
    conf.write_text('[containers]\ndefault_ulimits = [\n  "nofile=1048576:1048576",\n]\n')
    env = {"CONTAINERS_CONF": str(conf)}
    r = sb.run("doctor", env=env)
    assert r.rc == 1, r
    line = doctor_line(r.text, "plain container")
    assert line.startswith("  FAIL") and line.endswith(
        "error setting rlimits for ready process: error setting rlimit type 7: operation "
        "not permitted: OCI permission denied"), r.text
    fix = r.text.splitlines()[r.text.splitlines().index(line) + 1]
    assert f"the default_ulimits in {conf} ask for more than this host allows" in fix, fix
    assert f'"nofile={HARD_NOFILE}:{HARD_NOFILE}", "nproc={NPROC}:{NPROC}"' in fix, fix
    assert all("--ulimit" not in " ".join(c) for c in sb.runs()), sb.calls()
    sb.sandbox()
    env["BB_TEST_IMAGES"] = f"localhost/bluebox/{NAME}:{sb.bb.home_id()}"  # present, as built
    r = sb.run("run", NAME, "--", "true", env=env)
    assert r.rc != 0 and "error setting rlimit type 7" in r.etext, r
    assert r.etext.rstrip().endswith("(bluebox doctor names the limits that fit)"), r
