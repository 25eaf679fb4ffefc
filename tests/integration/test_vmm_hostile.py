"""bluebox-vmm against a hostile guest, on real podman: what the guest can write (its view
of the container includes /.bluebox/mem, where UML's console log lives) must never make
the VMM, which runs outside UML's jail, spin or hang. The guest kernel is stood in for by a
script in the VMM bundle that does what guest root can do and then dies without an exit
frame, so these run without user-mode-linux booting; the same with a real guest is in
test_a_real_guest_swapping_the_log. Needs root, podman and a built bluebox-vmm."""
import os
import shutil
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import pytest

from test_uml_boot import BUILD, CONFINE, IMAGE, LINUX_UML, _libs, env, sh, uml  # noqa: F401

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("podman") is None or not (BUILD / "bluebox-vmm").exists(),
    reason="needs root, podman and a built bluebox-vmm")

# What guest root does to the log before it goes: a symlink to a device that never ends,
# a FIFO nobody writes, a symlink to a FIFO.
SWAPS = {
    "dev-zero": "ln -s /dev/zero /.bluebox/mem/uml.log",
    "fifo": "mkfifo /.bluebox/mem/uml.log",
    "symlink-to-fifo": "mkfifo /.bluebox/mem/f && ln -s /.bluebox/mem/f /.bluebox/mem/uml.log",
}


def fake_kernel_bundle(d, script):
    """A VMM bundle whose "kernel" is a shell script (run in UML's jail, as the kernel is)."""
    d.mkdir()
    (d / "linux.uml").write_text("#!/bin/sh\n" + script)
    shutil.copyfile("/lib64/ld-linux-x86-64.so.2", d / "ld.so")
    for lib in _libs(BUILD / "bluebox-vmm"):
        shutil.copyfile(lib, d / Path(lib).name)
    shutil.copyfile(BUILD / "bluebox-vmm", d / "bluebox-vmm")
    for f in d.iterdir():
        f.chmod(0o755)


def run_vmm(bundle, timeout):
    name = f"bluebox-vmm-hostile-{uuid.uuid4().hex[:12]}"
    argv = ["podman", "run", *CONFINE, "--name", name, "--tmpfs", "/.bluebox/mem:exec",
            "-e", "TMPDIR=/.bluebox/mem", "-v", f"{bundle}:/.bluebox/vmm:ro",
            "--entrypoint", "/.bluebox/vmm/bluebox-vmm", IMAGE, "true"]
    t0 = time.monotonic()
    try:
        r = subprocess.run(argv, capture_output=True, timeout=timeout, cwd="/",
                           stdin=subprocess.DEVNULL)
        return r, time.monotonic() - t0
    finally:
        subprocess.run(["podman", "rm", "-f", "-t", "0", name], capture_output=True)


def run_fake_kernel(script, timeout):
    """run_vmm on a bundle whose kernel is the shell script, in a directory of its own."""
    top = Path(tempfile.mkdtemp(prefix="bluebox-vmm-hostile-", dir="/var/tmp"))
    try:
        top.chmod(0o755)
        fake_kernel_bundle(top / "vmm", script)
        return run_vmm(top / "vmm", timeout)
    finally:
        shutil.rmtree(top, ignore_errors=True)


@pytest.mark.parametrize("swap", SWAPS, ids=list(SWAPS))
def test_a_swapped_log_cannot_hold_the_vmm(env, swap):  # noqa: F811
    """The guest replaces uml.log and its kernel dies without an exit frame: the VMM still
    reports promptly, with the last lines the kernel really wrote (from the file it opened
    before boot), not whatever the guest's replacement yields."""
    r, took = run_fake_kernel("echo 'kernel: the last words' >&2\n"
                              "rm -f /.bluebox/mem/uml.log\n"
                              f"{SWAPS[swap]} || exit 99\n"
                              "exit 1\n", timeout=60)
    err = r.stderr.decode(errors="replace")
    assert r.returncode == 125, (r.returncode, err)
    assert took < 30, took
    assert "bluebox-vmm: the guest kernel stopped before the command finished (exit status 1)" \
        in err, err
    assert "bluebox-vmm: uml: kernel: the last words" in err, err
    assert len(err) < 4096, err


def test_a_huge_log_is_read_from_its_end_only(env):  # noqa: F811
    """64 MiB without a newline, then the last words: one bounded read, at once."""
    r, took = run_fake_kernel("head -c 67108864 /dev/zero | tr '\\0' x >&2\n"
                              "printf '\\nkernel: the last words\\n' >&2\nexit 1\n", timeout=120)
    err = r.stderr.decode(errors="replace")
    assert r.returncode == 125 and "bluebox-vmm: uml: kernel: the last words" in err, err
    assert len(err) < 4096, len(err)


def test_the_log_tail_leaves_out_the_lines_left_unconfigured(env):  # noqa: F811
    """UML notes each console and serial line that `con=none ssl=none` leaves out; a boot
    that dies right after them still shows the kernel's own last lines, not those notes."""
    r, took = run_fake_kernel("echo 'kernel: an earlier line' >&2\n"
                              "for i in $(seq 1 63); do echo \"setup_one_line failed for device $i"
                              " : configured as 'none'\" >&2; done\n"
                              "echo 'kernel: the last words' >&2\nexit 1\n", timeout=60)
    err = r.stderr.decode(errors="replace")
    assert r.returncode == 125, (r.returncode, err)
    assert "bluebox-vmm: uml: kernel: an earlier line" in err, err
    assert "bluebox-vmm: uml: kernel: the last words" in err, err
    assert "setup_one_line" not in err, err


def test_a_restarted_guest_is_the_reason_whatever_it_says_after(env):  # noqa: F811
    """The guest kernel restarts (sysrq b): its init comes up again, says it is ready, and
    fails (the spec was read once). On a slow host all of that arrives in one read, after
    the second ready frame: the restart is the reason, not the new init's exit."""
    ready = r'R\000\000\000\016{"ring":false}'
    again = ready + r'E\000\000\000\010no spec\nX\000\000\000\012{"code":7}'
    r, took = run_fake_kernel(f"printf '{ready}' >&3\nsleep 1\nprintf '{again}' >&3\n"
                              "sleep 20\n", timeout=60)
    err = r.stderr.decode(errors="replace")
    assert r.returncode == 125, (r.returncode, err)
    assert "bluebox-vmm: the guest kernel crashed and restarted" in err, err
    assert "no spec" not in err, err
    assert took < 15, took


def test_libslirp_reads_resolv_conf_through_the_vmms_fopen():
    """libslirp re-reads /etc/resolv.conf by path while the guest runs (a path a guest with
    a writable root can replace); its fopen64 must bind to bluebox-vmm's own, which refuses
    symlinks, FIFOs, devices and huge files (tests/unit/test_vmm_fopen.c)."""
    r = subprocess.run(["/lib64/ld-linux-x86-64.so.2", str(BUILD / "bluebox-vmm")],
                       env={"LD_BIND_NOW": "1", "LD_DEBUG": "bindings"}, capture_output=True,
                       text=True, timeout=30)
    assert "libslirp.so.0 [0] to " + str(BUILD / "bluebox-vmm") + " [0]: normal symbol " \
        "`fopen64'" in r.stderr, r.stderr[-2000:]


@pytest.mark.skipif(not LINUX_UML.exists(), reason="needs user-mode-linux")
def test_a_real_guest_swapping_the_log(env, uml, data):  # noqa: F811
    """The finding as reported: guest root swaps the log for a symlink to /dev/zero and
    powers off without an exit frame. `run` must end, with a clear error."""
    r = sh(uml, data, "rm -f /.bluebox/mem/uml.log; ln -s /dev/zero /.bluebox/mem/uml.log;"
           " echo b > /proc/sysrq-trigger; poweroff -f", timeout=90)
    assert r.returncode == 125, r
    # sysrq's b restarts the guest kernel, which says it is up again: either way bluebox-vmm
    # stops it and says the guest failed, from the log it opened before boot
    assert (b"bluebox-vmm: the guest kernel stopped before the command finished" in r.stderr
            or b"bluebox-vmm: the guest kernel crashed and restarted" in r.stderr), r
    assert len(r.stderr) < 8192


@pytest.fixture
def data():
    d = Path(tempfile.mkdtemp(prefix="bluebox-uml-data-", dir="/var/tmp"))
    yield d
    shutil.rmtree(d, ignore_errors=True)
