"""doctor and the qemu backend: every backend reported; the KVM probe boot's
verdict (a guest kernel that runs to its end, one that hangs, a QEMU that stops), its cache per
boot, kernel and QEMU, and a qemu run on KVM refused at once from a cached "cannot run".

QEMU here is a stand-in script (BLUEBOX_QEMU) that plays a host's KVM: it logs its argv and
prints what a kernel under a working, a hanging or a broken KVM prints. The real probe on this
host is tests/integration/test_qemu_doctor.py."""
import os
import re
import time

import pytest
from hostkvm import kvm_openable

from test_run import NAME, Standin  # the stand-in podman and the uml set-up

CANNOT = "KVM opens but cannot run a standard guest kernel"

QEMU = """#!/bin/sh
if [ "$1" = --version ]; then echo "QEMU emulator version 9.9.9 (stand-in)"; exit 0; fi
printf '%s\\n' "$*" >> {log}
echo $$ > {pidfile}
{body}
"""
BODIES = {
    "runs": 'echo "[    0.000000] Linux version 6.1.0-stand-in"\n'
            'echo "[    0.400000] Kernel panic - not syncing: VFS: Unable to mount root fs"\n'
            "exit 0",
    "hangs": 'echo "Probing EDD (edd=off to disable)... ok"\nexec sleep 60',
    "fails": 'echo "qemu-system-x86_64: error: failed to set MSR 0x10a to 0x0" >&2\nexit 1',
}


needs_kvm = pytest.mark.skipif(not kvm_openable(),
                               reason="the probe boots only where /dev/kvm opens")


class Qemu:
    """The stand-in QEMU, a kernel, its modules and the firmware, all under tmp."""

    def __init__(self, sb):
        self.sb = sb
        tmp = sb.bb.tmp
        self.log = tmp / "qemu.log"
        self.pidfile = tmp / "qemu.pid"
        self.kernel = tmp / "vmlinuz-6.1.0-stand-in"
        self.kernel.write_bytes(b"kernel")
        (tmp / "modules").mkdir()
        (tmp / "bios-microvm.bin").write_bytes(b"bios")
        self.bin = tmp / "qemu-system-x86_64"
        self.behave("runs")
        sb.bb.env.update({
            "BLUEBOX_QEMU": str(self.bin),
            "BLUEBOX_QEMU_KERNEL": str(self.kernel),
            "BLUEBOX_QEMU_MODULES": str(tmp / "modules"),
            "BLUEBOX_QEMU_BIOS": str(tmp / "bios-microvm.bin"),
            "BLUEBOX_BACKEND": "qemu",
        })

    def behave(self, how):
        self.bin.write_text(QEMU.format(log=self.log, pidfile=self.pidfile, body=BODIES[how]))
        self.bin.chmod(0o755)

    def boots(self):
        """The argv of each probe boot so far."""
        return self.log.read_text().splitlines() if self.log.exists() else []


@pytest.fixture
def sb(bb):
    s = Standin(bb)
    yield s
    s.cleanup()


@pytest.fixture
def qemu(sb):
    return Qemu(sb)


def lines_of(r, name):
    return [l for l in r.text.splitlines() if re.match(rf"  (ok  |warn|FAIL)  {name}\s", l)]


def test_doctor_reports_every_backend(sb, qemu):
    r = sb.run("doctor", env={"BLUEBOX_BACKEND": "uml"})
    assert r.rc == 0, r
    text = r.text
    assert lines_of(r, "krun") or lines_of(r, "/dev/kvm"), text
    assert lines_of(r, "user-mode-linux"), text
    assert lines_of(r, "qemu") and "9.9.9 (stand-in)" in lines_of(r, "qemu")[0], text
    assert lines_of(r, "qemu guest kernel") and str(qemu.kernel) in text, text
    assert len(lines_of(r, "qemu acceleration")) == 1, text
    bundle = lines_of(r, "qemu bundle")
    assert bundle and "none yet" in bundle[0] and "120 MB" in bundle[0], text


@needs_kvm
def test_probe_boot_that_runs_is_cached(sb, qemu):
    r = sb.run("doctor")
    acc = lines_of(r, "qemu acceleration")
    assert acc and acc[0].startswith("  ok    qemu acceleration KVM runs a standard guest "
                                     "kernel"), r.text
    assert str(qemu.kernel) in acc[0] and "cached" not in acc[0], r.text
    boots = qemu.boots()
    assert len(boots) == 1, boots
    argv = boots[0].split()
    # the probe: KVM, QEMU's sandbox, nothing but a serial line, the kernel with no initramfs
    for want in (["-accel", "kvm"], ["-machine", "microvm"], ["-kernel", str(qemu.kernel)],
                 ["-serial", "stdio"], ["-display", "none"], ["-monitor", "none"]):
        i = argv.index(want[0])
        assert argv[i:i + 2] == want, argv
    assert "-nodefaults" in argv and "-no-reboot" in argv, argv
    sandbox = argv[argv.index("-sandbox") + 1]
    assert sandbox.startswith("on,") and "spawn=deny" in sandbox, argv
    for absent in ("-initrd", "-drive", "-netdev", "-device", "-fw_cfg", "-chardev"):
        assert absent not in argv, argv
    if os.geteuid() == 0:
        assert argv[argv.index("-runas") + 1] == "65534:65534", argv
    else:
        assert "-runas" not in argv and "elevateprivileges=deny" in sandbox, argv
    # again: the cached verdict, no second boot
    r = sb.run("doctor")
    acc = lines_of(r, "qemu acceleration")
    assert acc and "KVM runs a standard guest kernel" in acc[0], r.text
    assert "(cached for this boot)" in acc[0], r.text
    assert len(qemu.boots()) == 1, qemu.boots()
    # a new kernel (another mtime) is probed anew
    os.utime(qemu.kernel, (1_000_000_000, 1_000_000_000))
    r = sb.run("doctor")
    assert len(qemu.boots()) == 2, qemu.boots()
    assert "cached" not in lines_of(r, "qemu acceleration")[0], r.text


@needs_kvm
def test_probe_boot_that_hangs(sb, qemu):
    """A kernel that never finishes booting under KVM (this host's kvm-pvm): killed at the
    time bound, said in the user's words, with what to do; the stand-in does not survive."""
    qemu.behave("hangs")
    r = sb.run("doctor")
    assert r.rc == 0, r  # a warning: uml still runs here
    acc = lines_of(r, "qemu acceleration")
    assert acc and acc[0].startswith(f"  warn  qemu acceleration {CANNOT}: "), r.text
    assert "hung (killed after 8 s)" in acc[0], r.text
    assert 'its last words: "Probing EDD (edd=off to disable)... ok"' in acc[0], r.text
    fix = r.text.splitlines()[r.text.splitlines().index(acc[0]) + 1]
    assert fix.startswith("          fix: BLUEBOX_QEMU_ACCEL=tcg runs qemu emulated"), r.text
    assert "backend: uml" in fix, r.text
    assert 7.5 < r.seconds < 15, r
    pid = int(qemu.pidfile.read_text())
    assert not os.path.exists(f"/proc/{pid}") or \
        open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] == "Z", pid
    # cached: the next doctor is quick
    t = time.monotonic()
    r = sb.run("doctor")
    assert time.monotonic() - t < 5, r
    assert "(cached for this boot)" in lines_of(r, "qemu acceleration")[0], r.text


@needs_kvm
def test_qemu_that_stops_and_the_run_it_refuses(sb, qemu):
    """QEMU exits before the kernel ran (as -cpu host does on this host's KVM): "cannot run",
    with QEMU's words; then a qemu run on KVM is refused at once from the cached verdict,
    before podman is asked anything, and TCG is not."""
    qemu.behave("fails")
    r = sb.run("doctor")
    acc = lines_of(r, "qemu acceleration")
    assert acc and acc[0].startswith(f"  warn  qemu acceleration {CANNOT}: a probe boot of "), \
        r.text
    assert "under KVM failed: QEMU stopped (exit status 1)" in acc[0], r.text
    assert "failed to set MSR 0x10a" in acc[0], r.text
    sb.sandbox(extra="backend: qemu\n")
    sb.bb.podman_log.write_text("")
    r = sb.run("run", NAME, "--", "true")
    assert r.rc != 0, r
    err = r.etext
    assert f"backend: qemu: {CANNOT} on this host (bluebox doctor: a probe boot of" in err, r
    assert "failed: QEMU stopped" in err, r
    assert "BLUEBOX_QEMU_ACCEL=tcg" in err and "backend: uml" in err, r
    assert sb.runs() == [], sb.calls()
    r = sb.run("run", NAME, "--", "true", env={"BLUEBOX_QEMU_ACCEL": "tcg"})
    assert CANNOT not in r.etext, r


@needs_kvm
def test_no_probe_without_a_verdict_to_give(sb, qemu):
    """TCG asked for: no KVM probe; another backend chosen: no probe boot either."""
    r = sb.run("doctor", env={"BLUEBOX_QEMU_ACCEL": "tcg"})
    acc = lines_of(r, "qemu acceleration")
    assert acc and "BLUEBOX_QEMU_ACCEL=tcg: emulated, a software boundary" in acc[0], r.text
    r = sb.run("doctor", env={"BLUEBOX_BACKEND": "uml"})
    acc = lines_of(r, "qemu acceleration")
    assert acc and "not probed while BLUEBOX_BACKEND=uml" in acc[0], r.text
    assert qemu.boots() == []
