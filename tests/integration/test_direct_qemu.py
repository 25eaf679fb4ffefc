"""The direct OCI launch on the qemu backend: a `backend: qemu` run or shell as root
goes the direct way by default, as uml's does (its VMM is bluebox-vmm starting QEMU under
runc, from the config.json podman generated once). Run semantics, `bluebox ps`, the VMM's
confinement (bluebox-vmm and QEMU) compared with the podman path's, cleanup after kill -9 of
bluebox, a timeout and a crashed QEMU, and a bridge run's reach (the mirror, not the host).
TCG here (BLUEBOX_QEMU_ACCEL=tcg unless BLUEBOX_TEST_QEMU_ACCEL says kvm). Needs root, podman,
runc, build/bluebox-vmm, qemu-system-x86 and a guest kernel; slirp4netns for bridge.

    python3 -m pytest -q tests/integration/test_direct_qemu.py
"""
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

import backends
from test_podman_build import env  # noqa: F401  (session fixture)
from test_runtime import IMAGE, home  # noqa: F401  (fixture)
from test_runtime import podman_containers_of
from test_netpolicy import other_container  # noqa: F401  (fixture)
from test_direct_launch import (DEFAULT, DIRECT, PODMAN, RUNC_ROOT, _gone, comm, leftovers,
                                ps_rows, run_semantics, runc_ids, runs_of, start, the_run,
                                vmm_pids_of, vmm_records)
from test_direct_net import reach_check

QEMU = "qemu-system-x86_64"
pytestmark = [backends.skip_unless("qemu"),
              pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("runc"),
                                 reason="the direct launch needs root and runc")]


def bluefile(extra=""):
    return f"base: {IMAGE}\nbackend: qemu\nram_mib: 256\n{extra}"


@pytest.fixture
def qhome(home):  # noqa: F811
    home.env["BLUEBOX_QEMU_ACCEL"] = backends.QEMU_ACCEL
    return home


def build(h, stem, extra=""):
    name = h.sandbox(f"{stem}-{os.getpid()}", bluefile(extra))
    r = h("build", name)
    assert r.returncode == 0, r
    return name


@pytest.fixture
def box(qhome):
    return build(qhome, "dqemu")


def stop(p):
    p.terminate()
    p.communicate(timeout=120)


def test_qemu_run_is_direct_by_default(qhome, box):
    """No BLUEBOX_LAUNCH: runc runs it, podman does not know it, `bluebox ps` says direct;
    BLUEBOX_LAUNCH=podman keeps podman."""
    p = start(qhome, box, DEFAULT)
    try:
        cid = the_run(box, p.pid)
        assert cid in runc_ids()
        state = json.loads(subprocess.run(["runc", "--root", RUNC_ROOT, "state", cid],
                                          capture_output=True, check=True).stdout)
        assert state["annotations"]["bluebox.launch"] == "direct"
        assert podman_containers_of(box) == []
        assert ps_rows(qhome, box) == [[cid, box, "direct", "running", str(state["pid"])]]
        # QEMU runs in the container runc started
        assert any(comm(q) == QEMU[:15] for q in vmm_pids_of(cid))
    finally:
        stop(p)
    assert _gone(qhome, box, cid) == []
    p = start(qhome, box, PODMAN)
    try:
        assert runs_of(box) == [] and len(podman_containers_of(box)) == 1
    finally:
        stop(p)


def test_qemu_direct_run_semantics(qhome, box):
    run_semantics(qhome, box)
    assert list((qhome.dir / "home" / "direct" / "tpl").glob(f"{box}-*")) != []
    assert runs_of(box) == [] and not [i for i in runc_ids() if box in i]


def test_qemu_direct_confinement_is_podmans(qhome, box):
    """bluebox-vmm and QEMU, read from /proc on the host on both paths: capabilities, NNP,
    seccomp mode and filters, namespaces, uid map, rlimits, cgroup pids/memory limits."""
    via_podman = vmm_records(qhome, box, PODMAN, vmm=QEMU)
    direct = vmm_records(qhome, box, DIRECT, vmm=QEMU)
    assert direct == via_podman
    q = direct[QEMU]
    assert q["NoNewPrivs"] == "1" and q["Seccomp"] == "2"
    assert q["own net"] and q["own pid"] and q["own mnt"]
    assert q["cgroup"].get("pids", q["cgroup"].get("pids.max", "")).strip() == "512"


def test_qemu_kill9_of_bluebox_leaves_nothing(qhome, box):
    p = start(qhome, box, DIRECT)
    cid = the_run(box, p.pid)
    assert leftovers(qhome, box, cid)
    os.kill(p.pid, signal.SIGKILL)
    p.communicate(timeout=60)
    assert _gone(qhome, box, cid) == []


def test_qemu_crash_leaves_nothing(qhome, box):
    """QEMU killed from the host: the run fails and its container goes with it."""
    p = start(qhome, box, DIRECT)
    cid = the_run(box, p.pid)
    qemus = [q for q in vmm_pids_of(cid) if comm(q) == QEMU[:15]]
    assert qemus
    for q in qemus:
        os.kill(q, signal.SIGKILL)
    p.communicate(timeout=60)
    assert p.returncode != 0
    assert _gone(qhome, box, cid) == []


def test_qemu_direct_timeout_is_124_and_leaves_nothing(qhome):
    name = build(qhome, "dqemuto", "timeout_seconds: 4\n")
    t = time.monotonic()
    r = qhome("run", name, "--", "sleep", "60", env=DIRECT)
    assert r.returncode == 124, r
    assert b"bluebox: killed after 4s (timeout_seconds)" in r.stderr
    assert time.monotonic() - t < 60
    assert list((qhome.dir / "home" / "direct" / "tpl").glob(f"{name}-*")) != []
    assert runs_of(name) == [] and not [i for i in runc_ids() if name in i]
    assert not list(Path("/sys/fs/cgroup").glob(f"**/bluebox-direct/bluebox-{name}-*"))
    assert f"bluebox-{name}-" not in Path("/proc/self/mountinfo").read_text()
    assert not list((qhome.dir / "home" / "direct" / "scratch").glob(f"bluebox-{name}-*"))


@pytest.mark.skipif(not shutil.which("slirp4netns"), reason="bridge on the direct launch needs "
                    "slirp4netns")
def test_qemu_direct_bridge_reaches_the_mirror_but_not_the_host(
        env, qhome, other_container):  # noqa: F811
    """test_direct_net's reach check for a qemu guest: QEMU's virtio-net into bluebox-vmm's
    libslirp, in the run's own namespace behind slirp4netns."""
    name = build(qhome, "dqemunet", "network: bridge\n")
    reach_check(qhome, name, other_container)
