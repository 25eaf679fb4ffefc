"""The soak's CI tier: a small mix of cold runs, execs on an up sandbox, up/down
cycles, pool claims and serve restarts, with kills and timeouts (tests/integration/soakmix.py),
and afterwards the host holds nothing more of it than before: no process, mount, runc or podman
container, cgroup, file under /run, /tmp or /dev/shm, fd, or file in BLUEBOX_HOME beyond its
bounded logs (tests/integration/census.py). bench/soak.py runs the full counts.

Other tests' VMs run beside this one (xdist, other checkouts), so the assertion is on what is
the soak's (named by its home and its unique sandbox names); the rest of what is new is only
reported. Needs root, podman, user-mode-linux and build/bluebox-vmm."""
import os
import secrets
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

import pytest

import census
from soakmix import Counts, Soak
from test_podman_build import env  # noqa: F401  (session fixture)

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not (REPO / "build" / "bluebox-vmm").exists()
    or not Path("/usr/bin/linux.uml").exists(),
    reason="the soak needs root, podman, build/bluebox-vmm and user-mode-linux")

CI = Counts(runs=10, execs=100, updown=3, claims=3, serves=2, kills=1, timeouts=1)


@pytest.fixture(scope="module")
def soak(env, bluebox_bin):  # noqa: F811
    top = Path(tempfile.mkdtemp(prefix="bluebox-soak-", dir="/var/tmp"))
    s = Soak(bluebox_bin, os.environ, top / "home", f"{os.getpid()}{secrets.token_hex(2)}")
    try:
        s.setup()
        s.warm_up()
        assert not s.failures, "the warm-up failed:\n" + "\n".join(s.failures)
        yield s
    finally:
        s.bb("down", s.cold)
        for name in (s.cold, s.warm):
            s.bb("destroy", name, "--data", "-y")
        shutil.rmtree(top, ignore_errors=True)


def test_the_census_names_what_is_left(tmp_path):
    """The census is not blind: a process, a /run and a /dev/shm entry, a mount and a home
    file planted after the baseline are each named, as the soak's or not."""
    mark = f"soakcensus{os.getpid()}{secrets.token_hex(2)}"
    home = tmp_path / "home"
    home.mkdir()
    before = census.take(home, (mark,))
    sleeper = subprocess.Popen(["sh", "-c", "sleep 60; :", mark], start_new_session=True)
    run, shm, mnt = Path(f"/run/{mark}"), Path(f"/dev/shm/{mark}"), tmp_path / "mnt"
    mnt.mkdir()
    try:
        run.write_text("x")
        shm.write_text("x")
        (home / "left").write_text("x")
        subprocess.run(["mount", "-t", "tmpfs", mark, mnt], check=True)
        d = census.diff(before, census.take(home, (mark,)))
        text = "\n".join(d.ours)
        for want in (f"process {sleeper.pid} (sh", f"path /run/{mark}",
                     f"path /dev/shm/{mark}", f"{mnt} tmpfs {mark}", "home path left"):
            assert want in text, d.report()
        assert not any(mark in x for x in d.other), d.report()
    finally:
        subprocess.run(["umount", mnt])
        os.killpg(sleeper.pid, signal.SIGKILL)
        sleeper.wait()
        run.unlink(missing_ok=True)
        shm.unlink(missing_ok=True)


def leftovers(s, d, took):
    return ("\n".join(f"  FAILED {f}" for f in s.failures)
            + "".join(f"\n  GREW {g}" for g in s.fd_growth)
            + f"\nafter {took:.1f} s of settling, the census against the baseline:\n"
            + d.report())


def test_nothing_accumulates(soak):
    before = census.take(soak.home, soak.markers)
    soak.mix(CI, seed=32)
    d, took = census.settle(before, soak.home, soak.markers, timeout=10)
    print(f"soak ({CI}): {soak.done}\n" + d.report())
    assert soak.done.get("exec", 0) >= CI.execs and soak.done.get("kill-exec") == CI.updown
    assert not soak.failures and not soak.fd_growth and not d.ours, leftovers(soak, d, took)


def sigkilled_owners_leave_nothing(soak, case):
    soak.failures.clear()
    before = census.take(soak.home, soak.markers)
    try:
        getattr(soak, case)()
        # item 1 asks for 2 s; a loaded host gets a little more before it counts as a leak
        d, took = census.settle(before, soak.home, soak.markers, timeout=3,
                                allow=(census.KILLED_NOTE,))
        assert not soak.failures and not d.ours, leftovers(soak, d, took)
    finally:
        soak.reap_leftovers(before)


def test_a_sigkilled_process_group_leaves_nothing(soak):
    sigkilled_owners_leave_nothing(soak, "kill_group")


def test_serve_and_its_worker_sigkilled_mid_run_leave_nothing(soak):
    """SIGKILL of serve and of the worker streaming its run (the worker's process group holds
    the run's __direct supervisor and runc too) while the command runs."""
    sigkilled_owners_leave_nothing(soak, "serve_killed_mid_run")
