"""The qemu backend's storage and devices end to end on real podman: data_limit
as a virtio-blk disk capped on the host, single-file mounts through a staged directory of
the file server, forks (the guest's overlay over two virtio-fs exports), the guest's
console in the VMM's log (hvc0), and a guest root writing garbage to every device it has
without harming anything beyond its own VM. TCG unless BLUEBOX_TEST_QEMU_ACCEL says kvm;
skipped where tests/integration/test_qemu.py is. About ten boots: one sandbox serves
most tests."""
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from test_podman_build import env  # noqa: F401  (session fixture)
from test_qemu import ACCEL, pytestmark  # noqa: F401  (the same skips)
from test_runtime import IMAGE, Home, containers_of, privileged

MIB = 1 << 20


def bluefile(extra=""):
    return f"base: {IMAGE}\nbackend: qemu\nram_mib: 256\n{extra}"


@pytest.fixture(scope="module")
def home(env, bluebox_bin):  # noqa: F811
    h = Home(bluebox_bin)
    h.env["BLUEBOX_QEMU_ACCEL"] = ACCEL
    yield h
    h.close()


@pytest.fixture(scope="module")
def files():
    """Two host files mounted one by one: one read-only, one read-write."""
    d = Path(tempfile.mkdtemp(prefix="bluebox-it-qf-", dir="/var/tmp"))
    (d / "ro.txt").write_text("ro-content\n")
    (d / "rw.txt").write_text("rw-before\n")
    (d / "beside").write_text("not mounted\n")
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def box(home, files):
    """A qemu sandbox with a 32M data disk and two single-file mounts."""
    name = home.sandbox(f"qd-{os.getpid()}", bluefile(
        "data_limit: 32M\ntimeout_seconds: 120\nmounts:\n"
        f"  - {{host: {files}/ro.txt, guest: /etc/app.conf, mode: ro}}\n"
        f"  - {{host: {files}/rw.txt, guest: /srv/state.txt, mode: rw}}\n"))
    r = home("build", name)
    assert r.returncode == 0, r
    assert "/data rw, 32M disk" in r.stdout.decode(), r
    return name


def disk(home, name):
    return home.dir / "home" / "disks" / f"{name}.img"


def sh(home, name, script, **kw):
    """The script in the guest, its stderr in its stdout (in order)."""
    return home("run", name, "--", "sh", "-c", "exec 2>&1; " + script, **kw)


def test_data_limit_is_a_disk_that_holds_and_persists(home, box):
    img = disk(home, box)
    assert img.stat().st_size == 32 * MIB
    r = sh(home, box, "grep ' /data ' /proc/mounts | tail -n1 | cut -d' ' -f1-3; "
                      "echo kept > /data/keep && sync && df -k /data | tail -n1; "
                      "dd if=/dev/zero of=/data/big bs=1M count=100; echo dd=$?; "
                      "rm /data/big; fstrim /data; cat /data/keep")
    out = r.stdout.decode()
    assert r.returncode == 0, r
    assert out.splitlines()[0] == "/dev/vda /data ext4", out
    total_kib = int(out.splitlines()[1].split()[1])
    assert 24 * 1024 < total_kib <= 32 * 1024, out
    assert "No space left on device" in out and "dd=1" in out, out
    assert out.rstrip().endswith("kept"), out
    st = img.stat()
    assert st.st_size == 32 * MIB and st.st_blocks * 512 < 16 * MIB, st  # discards punched
    r = sh(home, box, "cat /data/keep")
    assert r.returncode == 0 and r.stdout == b"kept\n", r
    assert containers_of(box) == []


def test_single_file_mounts_and_what_the_guest_cannot_see(home, box, files):
    """Each file alone, ro refused (even after a remount), rw written through; and nothing
    of QEMU, its monitor, /dev/kvm or the container's /proc in the guest."""
    script = (
        "cat /etc/app.conf; echo x > /etc/app.conf || echo RO-REFUSED; "
        "mount -o remount,rw /etc/app.conf; echo y > /etc/app.conf && echo RO-WRITABLE; "
        "cat /srv/state.txt; echo rw-after > /srv/state.txt; "
        "ls /etc/beside /srv/beside 2>/dev/null && echo BESIDE-VISIBLE; "
        "test -e /dev/kvm && echo KVM-VISIBLE; "
        "ls /dev | grep -qi -e monitor -e qmp && echo MONITOR-VISIBLE; "
        "for f in /.bluebox/vmm /usr/bin/qemu-system-x86_64 /usr/share/qemu /usr/lib/*/qemu; "
        "do test -e $f && echo QEMU-VISIBLE; done; "
        "ls -A /.bluebox | tr '\\n' ' '; echo; "
        "cat /proc/[0-9]*/comm 2>/dev/null | grep -qi -e qemu -e bluebox-vmm -e conmon "
        "&& echo HOST-PROC-VISIBLE; "
        "grep -q cloud /proc/version && echo own-kernel; true")
    r = sh(home, box, script)
    out = r.stdout.decode()
    assert r.returncode == 0, r
    lines = out.splitlines()
    assert lines[0] == "ro-content" and "RO-REFUSED" in lines, out
    assert "rw-before" in lines, out
    for bad in ("RO-WRITABLE", "BESIDE-VISIBLE", "KVM-VISIBLE", "MONITOR-VISIBLE",
                "QEMU-VISIBLE", "HOST-PROC-VISIBLE"):
        assert bad not in out, out
    assert "bluebox mem " in lines or ACCEL == "kvm", out
    assert (files / "ro.txt").read_text() == "ro-content\n"
    assert (files / "rw.txt").read_text() == "rw-after\n"
    assert sorted(p.name for p in files.iterdir()) == ["beside", "ro.txt", "rw.txt"]


def test_file_mount_nested_in_data_is_refused_at_boot(home, box):
    """The nesting checks run at every boot on qemu too: a mount moved into the sandbox's
    own /data after the build is refused before anything starts."""
    data = home.data(box)
    data.mkdir(parents=True, exist_ok=True)
    (data / "f").write_text("x\n")
    bf = home.dir / "home" / "sandboxes" / box / "Bluefile"
    saved = bf.read_text()
    bf.write_text(saved + f"  - {{host: {data}/f, guest: /etc/f, mode: ro}}\n")
    try:
        r = home("run", box, "--", "true")
        assert r.returncode != 0 and b"can write, so a guest could redirect" in r.stderr, r
    finally:
        bf.write_text(saved)
    assert containers_of(box) == []


def test_kernel_console_reaches_the_vmm_log(home, box):
    """A guest that dies before its command finishes is diagnosable: the kernel's last
    messages (hvc0) are in what bluebox shows."""
    r = sh(home, box, "echo \"<2>bluebox-marker-$((6*7))\" > /dev/kmsg; "
                      "echo o > /proc/sysrq-trigger; sleep 30")
    err = r.stderr.decode()
    assert r.returncode == 125, r
    assert "the guest kernel stopped before the command finished" in err, err
    marker = [line for line in err.splitlines() if "bluebox-marker-42" in line]
    assert marker and marker[0].startswith("bluebox-vmm: qemu: ["), err
    assert "\\x0d" not in err, err  # hvc0's line ends are not shown as escapes
    assert containers_of(box) == []


def test_fork_on_qemu(home):
    parent = home.sandbox(f"qdfork-{os.getpid()}", bluefile())
    r = home("build", parent)
    assert r.returncode == 0, r
    data = home.data(parent)
    data.mkdir(parents=True, exist_ok=True)
    (data / "keep.txt").write_text("keep\n")
    (data / "del.txt").write_text("bye\n")
    (data / "mod.txt").write_text("old\n")
    fork = f"{parent}-f"
    r = home("fork", parent, fork)
    assert r.returncode == 0, r
    home.names.insert(0, fork)
    r = sh(home, fork, "cat /data/keep.txt; cd /data && rm del.txt && echo new > new.txt && "
                       "echo changed > mod.txt && mv keep.txt kept.txt && ls | tr '\\n' ' '")
    assert r.returncode == 0, r
    assert r.stdout.decode() == "keep\nkept.txt mod.txt new.txt ", r
    # the parent is untouched; the changes are the fork's
    assert sorted(p.name for p in data.iterdir()) == ["del.txt", "keep.txt", "mod.txt"]
    assert (data / "mod.txt").read_text() == "old\n"
    r = home("diff", fork)
    assert r.returncode == 0, r
    assert r.stdout.decode() == "D del.txt\nD keep.txt\nA kept.txt\nM mod.txt\nA new.txt\n", r
    assert privileged([home.data(fork)]) == []


def test_hostile_guest_writes_garbage_to_every_device(home, box):
    """Guest root writes random bytes to the raw data disk, the console, /dev/mem (and
    /dev/port where the kernel has one), then unbinds every virtio-mmio device in the middle
    of its traffic, the virtio-fs ones of bluebox's file server and the root's among them.
    (The registers themselves are out of userspace's reach: the kernel's STRICT_DEVMEM
    refuses them even unbound.) bluebox ends with its exit code or a clear message, the
    container goes, the disk image keeps its size, and a sandbox running beside it is
    unaffected."""
    beside = home.sandbox(f"qdnext-{os.getpid()}", bluefile())
    assert home("build", beside).returncode == 0
    other = subprocess.Popen(
        home.cmd("run", beside, "--", "sh", "-c", "echo up; sleep 30; echo still-fine"),
        env=home.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd="/")
    assert other.stdout.readline() == b"up\n", other.communicate(timeout=60)  # booted
    hostile = r"""
set +e
head -c 1048576 /dev/urandom > /dev/vda; sync
head -c 65536 /dev/urandom > /dev/hvc0
dd if=/dev/urandom of=/dev/mem bs=4096 count=1 2>/dev/null
[ -e /dev/port ] && dd if=/dev/urandom of=/dev/port bs=4096 count=1 2>/dev/null
for d in /sys/bus/platform/drivers/virtio-mmio/*; do
  [ -L "$d" ] && [ "${d##*/}" != module ] || continue
  echo "${d##*/}" > /sys/bus/platform/drivers/virtio-mmio/unbind && echo "unbound ${d##*/}"
done
echo survived
"""
    t = time.monotonic()
    r = sh(home, box, hostile, timeout=240)
    elapsed = time.monotonic() - t
    err = r.stderr.decode(errors="replace")
    assert elapsed < 200, (elapsed, r)  # at worst the sandbox's timeout_seconds ends it
    assert r.returncode >= 0, r  # bluebox itself ended, not killed
    assert "core dumped" not in err and "Segmentation fault" not in err, err
    if r.returncode != 0:
        assert err.startswith("bluebox") or "bluebox-vmm:" in err or "bluebox:" in err, err
    else:  # the guest lived through it: each device was torn down
        # The loop may end at the first device it unbinds (the root's virtio-fs: the shell loses its
        # files); what matters is that one went and the host side survives it.
        assert r.stdout.decode().count("unbound ") >= 1, r
    assert containers_of(box) == []
    assert disk(home, box).stat().st_size == 32 * MIB
    out, oerr = other.communicate(timeout=120)
    assert other.returncode == 0 and out == b"still-fine\n", (out, oerr)
    assert containers_of(beside) == []
