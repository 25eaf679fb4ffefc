"""doctor's KVM probe boot with the real QEMU and kernel, and what a qemu run on
KVM does on a host whose KVM cannot run a guest: refused at once once doctor has a verdict,
and ended by bluebox-vmm's boot timeout with a clear error (never left hanging) without one.

Which verdict is right depends on the host: on a nested paravirtual KVM (kvm-pvm, these
machines: /dev/kvm opens, a standard kernel hangs) "cannot run"; on a host whose KVM runs a
standard guest (the kvm CI lane, BLUEBOX_TEST_QEMU_ACCEL=kvm) "runs". Elsewhere skipped with
the reason. Needs root, podman, build/bluebox-vmm, qemu-system-x86 and a kernel."""
import os
import re
import time
from pathlib import Path

import pytest
from backends import kvm_openable

from test_podman_build import env  # noqa: F401  (session fixture)
from test_qemu import KERNEL, bluefile
from test_runtime import REPO, Home, containers_of

CANNOT = "KVM opens but cannot run a standard guest kernel"
KVM_PVM = Path("/sys/module/kvm_pvm").exists()
KVM_RUNS = os.environ.get("BLUEBOX_TEST_QEMU_ACCEL") == "kvm"


pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="integration tests need root"),
    pytest.mark.skipif(not Path("/usr/bin/qemu-system-x86_64").exists(),
                       reason="needs qemu-system-x86 (scripts/deps.sh)"),
    pytest.mark.skipif(KERNEL is None,
                       reason="needs a guest kernel: linux-image-cloud-amd64 (scripts/deps.sh)"),
    pytest.mark.skipif(not kvm_openable(), reason="needs an openable /dev/kvm"),
    pytest.mark.skipif(not (KVM_PVM or KVM_RUNS),
                       reason="which verdict is right here is unknown: a kvm-pvm host says "
                              "cannot run; set BLUEBOX_TEST_QEMU_ACCEL=kvm where KVM runs guests"),
]


@pytest.fixture
def home(env, bluebox_bin):  # noqa: F811
    h = Home(bluebox_bin)
    for k in ("BLUEBOX_QEMU_ACCEL", "BLUEBOX_QEMU", "BLUEBOX_QEMU_BIOS"):
        h.env.pop(k, None)
    h.env["BLUEBOX_BACKEND"] = "qemu"
    yield h
    h.close()


def accel_line(r):
    out = r.stdout.decode()
    lines = out.splitlines()
    hits = [i for i, l in enumerate(lines) if re.match(r"  (ok  |warn|FAIL)  qemu acceleration ", l)]
    assert len(hits) == 1, out
    i = hits[0]
    fix = lines[i + 1] if i + 1 < len(lines) and lines[i + 1].startswith("          fix:") else ""
    return lines[i], fix


def test_probe_verdict_and_cache(home):
    t = time.monotonic()
    r = home("doctor")
    took = time.monotonic() - t
    line, fix = accel_line(r)
    if KVM_RUNS:
        assert line.startswith("  ok    qemu acceleration KVM runs a standard guest kernel"), r
        assert took < 10, took
    else:
        assert line.startswith(f"  warn  qemu acceleration {CANNOT}: a probe boot of "), r
        # such a host's QEMU either hangs after the kernel's setup banner or stops at once
        # (an assertion on a KVM call): both are a verdict, the first after the probe's 8 s
        hung = "under KVM hung (killed after 8 s)" in line
        assert hung or "under KVM failed: QEMU stopped (" in line, r
        assert "BLUEBOX_QEMU_ACCEL=tcg" in fix, r
        backend = [l for l in r.stdout.decode().splitlines() if l.startswith("  warn  backend ")]
        assert backend and "qemu, from BLUEBOX_BACKEND, cannot run here" in backend[0], r
        assert (7.5 if hung else 0) < took < 20, took
    assert (Path(home.env["BLUEBOX_HOME"]) / "vmm" / "kvm-probe").is_file()
    # the verdict holds for this boot, kernel and QEMU: the next doctor does not boot
    t = time.monotonic()
    r = home("doctor")
    assert time.monotonic() - t < 5
    line2, _ = accel_line(r)
    assert line2.endswith("(cached for this boot)"), r
    # the probe left no QEMU behind
    assert probe_qemus() == []


def probe_qemus():
    """Pids of QEMUs running a probe boot (their argv: the probe's own command line)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv[0].endswith(b"qemu-system-x86_64") and \
                b"console=ttyS0 panic=-1 pci=off cryptomgr.notests" in argv:
            found.append(int(pid))
    return found


@pytest.mark.skipif(KVM_RUNS, reason="a host whose KVM runs guests boots them")
def test_run_on_kvm_that_cannot_run(home):
    """Built with TCG; then run on KVM: with no verdict yet, the boot never comes up and
    bluebox-vmm's boot timeout ends it with advice; once doctor has probed, refused at once."""
    name = home.sandbox(f"qemukvm-{os.getpid()}", bluefile())
    r = home("build", name, env={"BLUEBOX_QEMU_ACCEL": "tcg"})
    assert r.returncode == 0, r
    t = time.monotonic()
    r = home("run", name, "--", "true", timeout=120)
    assert r.returncode != 0, r
    assert time.monotonic() - t < 90
    err = r.stderr.decode()
    assert "on KVM" in err and "BLUEBOX_QEMU_ACCEL=tcg" in err, err
    assert containers_of(name) == []
    home("doctor")
    t = time.monotonic()
    r = home("run", name, "--", "true")
    assert r.returncode != 0, r
    assert time.monotonic() - t < 10
    err = r.stderr.decode()
    assert f"backend: qemu: {CANNOT} on this host (bluebox doctor: " in err, err
    assert "BLUEBOX_QEMU_ACCEL=tcg" in err, err
    assert containers_of(name) == []
