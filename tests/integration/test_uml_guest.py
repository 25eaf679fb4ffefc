"""A uml guest that behaves like a real machine: procps' ps and
top work, the host's TERM reaches the command, the posture line and `bluebox env` say how
many CPUs the guest really has (nproc agrees), and the host's kernel is not in the guest's
/proc/cpuinfo. Needs root, podman, build/bluebox-vmm and user-mode-linux; the procps test
also the Debian test image (BLUEBOX_TEST_DEBIAN=1)."""
import os
import re
import subprocess

import pytest

from test_podman_build import env  # noqa: F401  (session fixture)
from test_runtime import IMAGE, UML, home  # noqa: F401  (fixture)

pytestmark = UML


def run_without_term(home, *args):  # noqa: F811
    """bluebox with no TERM in its environment at all."""
    e = {k: v for k, v in home.env.items() if k != "TERM"}
    return subprocess.run(home.cmd(*args), env=e, capture_output=True, timeout=300, cwd="/",
                          stdin=subprocess.DEVNULL)


@pytest.fixture
def box4(home):  # noqa: F811
    """A busybox uml sandbox whose Bluefile asks for 4 CPUs."""
    name = home.sandbox(f"umlg-{os.getpid()}",
                        f"base: {IMAGE}\nbackend: uml\nram_mib: 256\ncpus: 4\n")
    r = home("build", name)
    assert r.returncode == 0, r
    return name, r.stdout.decode()


@pytest.mark.skipif(os.environ.get("BLUEBOX_TEST_DEBIAN") != "1",
                    reason="set BLUEBOX_TEST_DEBIAN=1 (debootstrap image, ~90 s once)")
def test_procps_ps_and_top_work(home):  # noqa: F811
    """Debian 12's procps wants a "core id" in /proc/cpuinfo, which UML does not print; the
    guest init adds it (src/guest/cpuinfo.c). Before, `ps -ef` died with "Unable to get
    system boot time"."""
    name = home.sandbox(f"umlps-{os.getpid()}", f"""\
base: {os.environ['BLUEBOX_TEST_DEBIAN_IMAGE']}
backend: uml
ram_mib: 256
pkgmgr: apt
packages:
  - procps
""")
    r = home("build", "--host-kernel", name)  # the run is the subject here, not the build
    assert r.returncode == 0, r
    r = home("run", name, "--", "sh", "-c",
             "ps -ef; echo ps=$?; top -bn1 >/dev/null; echo top=$?")
    out = r.stdout.decode()
    assert r.returncode == 0 and r.stderr == b"", r
    assert "ps=0" in out and "top=0" in out, r
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["UID", "PID", "PPID"], r
    pids = {ln.split()[1]: ln for ln in lines[1:] if len(ln.split()) > 7}
    assert "1" in pids, r  # the guest init
    assert any(ln.rstrip().endswith(" ps -ef") for ln in pids.values()), r


def test_cpus_posture_env_and_nproc_agree(home, box4):  # noqa: F811
    """cpus: 4 on uml: the guest has one CPU, and the posture line and env say so."""
    name, build_out = box4
    posture = [ln for ln in build_out.splitlines() if ln.startswith("isolation: ")]
    assert posture, build_out
    m = re.search(r" · (\d+) CPUs? \(uml has no SMP; cpus: 4 ignored\) · ", posture[-1])
    assert m, posture
    r = home("env", name)
    assert r.returncode == 0, r
    assert f"BLUEBOX_GUEST_CPUS='{m.group(1)}'" in r.stdout.decode().splitlines(), r
    r = home("run", name, "--", "nproc")
    assert r.returncode == 0, r
    assert r.stdout.decode().strip() == m.group(1), r


def test_host_kernel_not_in_cpuinfo(home, box4):  # noqa: F811
    """UML prints its host's uname in /proc/cpuinfo; bluebox-uname.so hides it, and the
    guest's own release (which the isolation check compares) stays the guest kernel's."""
    name, _ = box4
    host = os.uname()
    r = home("run", name, "--", "sh", "-c",
             "cat /proc/cpuinfo; echo ==; umount /proc/cpuinfo; cat /proc/cpuinfo; echo ==; "
             "uname -r")
    assert r.returncode == 0, r
    ours, kernels, release = r.stdout.decode().split("==\n")
    for text in (ours, kernels):
        assert "processor" in text, r
        assert host.release not in text and host.version not in text, r
    assert "core id" in ours, r
    assert release.strip() != host.release and release.strip()[0].isdigit(), r
    r = home("verify", name)
    assert r.returncode == 0 and b"isolated: host " in r.stdout, r


def test_host_term_reaches_run_and_exec(home, box4):  # noqa: F811
    name, _ = box4
    term = {"TERM": "screen-256color"}
    r = home("run", name, "--", "sh", "-c", "echo $TERM", env=term)
    assert (r.returncode, r.stdout) == (0, b"screen-256color\n"), r
    # without a TERM on the host the guest has what it had before (podman's default)
    r = run_without_term(home, "run", name, "--", "sh", "-c", "echo ${TERM-unset}")
    assert (r.returncode, r.stdout) == (0, b"xterm\n"), r
    r = home("up", name)
    assert r.returncode == 0, r
    try:
        r = home("exec", name, "--", "sh", "-c", "echo $TERM", env=term)
        assert (r.returncode, r.stdout) == (0, b"screen-256color\n"), r
        r = home("exec", name, "--", "sh", "-c", "echo $TERM", env={"TERM": "vt220"})
        assert (r.returncode, r.stdout) == (0, b"vt220\n"), r
    finally:
        home("down", name)


def test_bluefile_term_wins_over_the_hosts(home):  # noqa: F811
    name = home.sandbox(f"umlt-{os.getpid()}",
                        f"base: {IMAGE}\nbackend: uml\nram_mib: 256\nenv:\n  TERM: vt100\n")
    assert home("build", name).returncode == 0
    r = home("run", name, "--", "sh", "-c", "echo $TERM", env={"TERM": "screen-256color"})
    assert (r.returncode, r.stdout) == (0, b"vt100\n"), r
