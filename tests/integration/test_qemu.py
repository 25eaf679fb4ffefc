"""The qemu backend end to end on real podman: build and its isolation check,
run (output, exit codes, timeout 124), the posture line, the guest's view (the image's
owners, /data shared, nothing of the container's /.bluebox, /proc or /dev/kvm), and the first
stage's refusals. What qemu shares with uml runs from the uml tests, parametrised by backend
(conftest.py's `backend`): stdin byte-exact, /data, mounts and readonly in test_runtime.py,
terminals and stdin in test_uml_stdio.py, the escape suite in test_escape.py. Runs with TCG (BLUEBOX_QEMU_ACCEL=tcg)
unless BLUEBOX_TEST_QEMU_ACCEL says kvm (a host where KVM runs a standard guest). Needs root,
podman, build/bluebox-vmm, qemu-system-x86 and a kernel (scripts/deps.sh installs Debian's
cloud kernel); skipped with the reason otherwise, which fails CI (BLUEBOX_MUST_RUN)."""
import glob
import os
import shutil
import time
from pathlib import Path

import pytest

from test_podman_build import env  # noqa: F401  (session fixture)
from test_runtime import IMAGE, REPO, Home, containers_of

ACCEL = os.environ.get("BLUEBOX_TEST_QEMU_ACCEL", "tcg")
KERNEL = os.environ.get("BLUEBOX_QEMU_KERNEL") or next(
    iter(sorted(glob.glob("/boot/vmlinuz-*-cloud-amd64"))), None)

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0 or shutil.which("podman") is None,
                       reason="integration tests need root and podman"),
    pytest.mark.skipif(not (REPO / "build" / "bluebox-vmm").exists(),
                       reason="needs build/bluebox-vmm"),
    pytest.mark.skipif(not Path("/usr/bin/qemu-system-x86_64").exists(),
                       reason="needs qemu-system-x86 (scripts/deps.sh)"),
    pytest.mark.skipif(KERNEL is None,
                       reason="needs a guest kernel: linux-image-cloud-amd64 (scripts/deps.sh)"),
]


@pytest.fixture
def home(env, bluebox_bin):  # noqa: F811
    h = Home(bluebox_bin)
    h.env["BLUEBOX_QEMU_ACCEL"] = ACCEL
    yield h
    h.close()


def bluefile(extra=""):
    return f"base: {IMAGE}\nbackend: qemu\nram_mib: 256\n{extra}"


@pytest.fixture
def box(home):
    """A qemu sandbox whose image has a directory of uid 1000 (the image's owners must reach
    the guest as they are)."""
    name = home.sandbox(f"qemu-{os.getpid()}", bluefile(
        "run:\n  - mkdir -p /home/u && chown 1000:1000 /home/u && chmod 0750 /home/u\n"))
    r = home("build", name)
    assert r.returncode == 0, r
    out = r.stdout.decode()
    assert "isolated: host " in out and "(qemu)" in out, r
    return name


def test_run_output_exit_code_and_posture(home, box):
    r = home("run", box, "--", "sh", "-c", "echo hello from qemu; echo oops >&2; exit 7")
    assert r.returncode == 7, r
    assert r.stdout == b"hello from qemu\n", r
    assert b"oops\n" in r.stderr, r
    r = home("verify", box)
    assert r.returncode == 0, r
    words = ("qemu (TCG, emulated: a software boundary), guest kernel "
             if ACCEL == "tcg" else "qemu (KVM), guest kernel ")
    assert f"isolation: {words}" in r.stdout.decode(), r
    assert containers_of(box) == []


def test_timeout_is_124_and_leaves_nothing(home):
    name = home.sandbox(f"qemuto-{os.getpid()}", bluefile("timeout_seconds: 3\n"))
    assert home("build", name).returncode == 0
    t = time.monotonic()
    r = home("run", name, "--", "sleep", "60")
    assert r.returncode == 124, r
    assert b"bluebox: killed after 3s (timeout_seconds)" in r.stderr
    assert time.monotonic() - t < 30
    assert containers_of(name) == []


def test_guest_view(home, box):
    """The image's owners as they are; the guest's own kernel, /proc and root; bluebox's
    directory holds the static bluebox alone; no /dev/kvm under TCG; writes to / stay in
    the guest; /data is the host's."""
    script = (
        "stat -c '%u:%g %a' /home/u; uname -r; cat /proc/1/cmdline | tr '\\0' ' '; echo; "
        "ls -A /.bluebox | tr '\\n' ' '; echo; "
        "test -e /dev/kvm && echo KVM-VISIBLE; "
        "echo scratch > /etc/scratch && cat /etc/scratch; "
        "echo kept > /data/kept")
    r = home("run", box, "--", "sh", "-c", script)
    assert r.returncode == 0, r
    lines = r.stdout.decode().splitlines()
    assert lines[0] == "1000:1000 750", r
    assert lines[1] == Path(KERNEL).name.removeprefix("vmlinuz-") or ACCEL == "kvm", r
    assert lines[2].startswith("/init") or lines[2].startswith("/.bluebox/bluebox"), r
    assert lines[3].split() == ["bluebox", "mem"], r
    assert "KVM-VISIBLE" not in lines, r
    assert "scratch" in lines, r
    assert (home.data(box) / "kept").read_text() == "kept\n"
    r = home("run", box, "--", "cat", "/etc/scratch")
    assert r.returncode != 0, r  # the last run's root layer is gone


def test_profiling_words_reach_the_kernel_and_no_uevent_helper_runs(home, box):
    """BLUEBOX_QEMU_CMDLINE (as BLUEBOX_UML_ARGS on uml: bench/boot_profile.py's way in) adds
    words to the guest kernel's command line; the init turns the kernel's uevent helper off
    (Debian's cloud kernel has none: CONFIG_UEVENT_HELPER is off there)."""
    r = home("run", box, "--", "sh", "-c",
             "cat /proc/cmdline; cat /proc/sys/kernel/hotplug 2>/dev/null || echo none",
             env={"BLUEBOX_QEMU_CMDLINE": "bluebox_test_mark=7"})
    assert r.returncode == 0, r
    lines = r.stdout.decode().split("\n")
    assert "bluebox_test_mark=7" in lines[0].split(), r
    assert lines[1] in ("", "none"), r


def test_refusals(home):
    name = home.sandbox(f"qemuno-{os.getpid()}", bluefile())
    assert home("build", name).returncode == 0
    r = home("run", name, "--", "true", env={"BLUEBOX_QEMU_ACCEL": "emulate"})
    assert r.returncode != 0 and b"BLUEBOX_QEMU_ACCEL must be kvm or tcg" in r.stderr, r
    assert containers_of(name) == []
