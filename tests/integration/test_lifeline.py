"""A VM never outlives the bluebox that owns it: kill -9 of the owner's whole
process group — what a harness's timeout, a closed terminal or the OOM killer does — during a
run's boot, in the middle of its workload writing /data, during its teardown, of `serve` in
the middle of a streamed run, and of the warm pool's tender while it boots a VM. After each,
within 2 s, nothing of the VM is left: no runc container, no VMM process, no mount, no scratch
directory (the VMM stops at its lifeline's EOF; the direct supervisor's janitor removes the
rest). What the workload wrote before the kill is all in /data, and `reset` afterwards is
never beside a VM still writing. Needs root, podman, runc, user-mode-linux and
build/bluebox-vmm.

    python3 -m pytest -q tests/integration/test_lifeline.py
"""
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from test_direct_launch import RUNS, leftovers, runc_ids, runs_of, vmm_pids_of
from test_podman_build import env, podman  # noqa: F401  (session fixture + helper)
from test_pool import wait_for
from test_runtime import IMAGE, UML, Home
from test_serve import Conn, Server

pytestmark = [UML, pytest.mark.skipif(os.geteuid() != 0, reason="the direct launch needs root")]

# The bound: the VMM goes within 1 s of its last owner, the rest within 2 s.
WITHIN_S = 2.0


@pytest.fixture(scope="module")
def box(env, bluebox_bin):  # noqa: F811
    h = Home(bluebox_bin)
    name = h.sandbox(f"life-{os.getpid()}", f"base: {IMAGE}\nbackend: uml\nram_mib: 256\n")
    r = h("build", name)
    assert r.returncode == 0, r
    yield h, name
    h.close()


def start(h, name, script, env=None):
    """`bluebox run` in a process group (a session) of its own, as a harness starts it."""
    return subprocess.Popen(h.cmd("run", name, "--", "sh", "-c", script),
                            env=dict(h.env, **(env or {})), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd="/",
                            start_new_session=True)


def killpg(p):
    os.killpg(p.pid, signal.SIGKILL)
    killed = time.monotonic()
    p.communicate(timeout=30)
    return killed


def left_now(h, name, cid):
    try:
        return leftovers(h, name, cid)
    except FileNotFoundError:  # a cgroup directory went while the glob read it
        return ["(going)"]


def left_after(h, name, cid, killed):
    """What is still there WITHIN_S after the kill (polled until then)."""
    left = left_now(h, name, cid)
    while left and time.monotonic() - killed < WITHIN_S:
        time.sleep(0.05)
        left = left_now(h, name, cid)
    return left


def the_cid(name, pid):
    return wait_for("direct run", lambda: [c for c in runs_of(name)
                                           if c.startswith(f"bluebox-{name}-{pid}-")], 60, 0.02)[0]


def test_killed_during_boot(box):
    h, name = box
    p = start(h, name, "echo ready; sleep 60")
    cid = the_cid(name, p.pid)
    # the supervisor has started runc: the guest is booting, nothing printed yet
    wait_for("supervisor", lambda: (RUNS / cid / "pid").exists(), 60, 0.02)
    killed = killpg(p)
    assert left_after(h, name, cid, killed) == []


def test_killed_mid_workload_writing_data_then_reset(box):
    h, name = box
    data = h.data(name)
    p = start(h, name, "i=0; while :; do echo $i >> /data/count; echo $i; i=$((i+1)); done")
    cid = the_cid(name, p.pid)
    seen = -1
    while seen < 200:  # the workload said it wrote these lines
        seen = int(p.stdout.readline())
    killed = killpg(p)
    assert left_after(h, name, cid, killed) == []
    lines = (data / "count").read_text().split()
    # every line written before the kill is there, whole and in order
    assert lines[:seen + 1] == [str(i) for i in range(seen + 1)], lines[-5:]
    size = (data / "count").stat().st_size
    time.sleep(0.5)
    assert (data / "count").stat().st_size == size, "something still writes /data"
    r = h("reset", name, "-y")
    assert r.returncode == 0, r
    time.sleep(0.5)
    assert list(data.iterdir()) == [], "a VM wrote into the reset /data"


def test_killed_during_teardown(box):
    h, name = box
    p = start(h, name, "echo bye")
    cid = the_cid(name, p.pid)
    assert p.stdout.readline() == b"bye\n"  # the guest is done: its VM is coming down
    killed = killpg(p)
    assert left_after(h, name, cid, killed) == []


def test_serve_killed_mid_stream(box):
    h, name = box
    s = Server.__new__(Server)  # Server, but in a session of its own (killpg takes it whole)
    s.home, s.sock = h, str(h.dir / "home" / "bluebox.sock")
    s.proc = subprocess.Popen([h.bin, "serve"], env=h.env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, cwd="/", start_new_session=True)
    wait_for("serve", s.answers, 30, 0.05)
    c = Conn(s.sock, 120)
    c.request("POST", f"/v1/sandboxes/{name}/run/stream",
              body=json.dumps({"command": "echo first; while :; do date >> /data/s; done"}),
              headers={"Content-Type": "application/json"})
    r = c.getresponse()
    assert r.status == 200
    assert "stdout" in json.loads(r.readline())  # the VM runs the command
    cid = wait_for("direct run", lambda: runs_of(name))[0]
    killed = killpg(s.proc)
    c.close()
    assert left_after(h, name, cid, killed) == []


def tenders(name):
    out = []
    for p in Path("/proc").iterdir():
        try:
            if p.name.isdigit() and (p / "cmdline").read_bytes().split(b"\0")[1:3] == [
                    b"__tend", name.encode()]:
                out.append(int(p.name))
        except OSError:
            pass
    return out


def test_pool_tender_killed_while_it_boots(env, bluebox_bin):  # noqa: F811
    h = Home(bluebox_bin)
    try:
        name = h.sandbox(f"lifepool-{os.getpid()}",
                         f"base: {IMAGE}\nbackend: uml\nram_mib: 128\nwarm: 1\n"
                         "warmup:\n  - sleep 30\n")
        r = h("build", name)
        assert r.returncode == 0, r
        pool = h.dir / "home" / "pool" / name
        h("pool", name)  # starts a tender
        booting = wait_for("a tender's boot", lambda: [e for e in (
            pool.iterdir() if pool.is_dir() else []) if ".booting-" in e.name])[0].name
        vm = f"-{booting.split('.')[0]}"

        def vmm():
            out = podman("ps", "--format", "{{.Names}} {{.Pid}}", "--filter",
                         f"label=bluebox.sandbox={name}").stdout.split("\n")
            return [int(line.split()[1]) for line in out if line.split()[:1]
                    and line.split()[0].endswith(vm) and line.split()[1] != "0"]
        pid = wait_for("the VM being booted", vmm)[0]
        # podman run -d has returned: the tender waits for the agent (or runs the warmup)
        wait_for("podman run -d to return", lambda: not [
            c for c in Path(f"/proc/{booting.rsplit('-', 1)[1]}/task").glob("*/children")
            if c.read_text().strip()], 60)
        # every tender of the pool, each with its group (its session): the one booting, and
        # one that waits to sweep after it (build and `pool` each start one), which would
        # otherwise remove the VM it finds orphaned
        for t in tenders(name):
            try:
                os.killpg(os.getpgid(t), signal.SIGKILL)
            except ProcessLookupError:
                pass
        killed = time.monotonic()
        while Path(f"/proc/{pid}").exists() and time.monotonic() - killed < WITHIN_S:
            time.sleep(0.05)
        assert not Path(f"/proc/{pid}").exists(), "the pool VM outlived its tender"
    finally:
        h.close()


def test_ps_stops_what_runc_runs_for_a_supervisor_that_is_gone(box):
    """runc's state is the truth: a direct container whose supervisor (and janitor) are gone
    is stopped by the next command that asks what runs, not left unseen. (bluebox is stopped
    here, still holding the lifeline, so that only runc's state can tell.)"""
    h, name = box
    p = start(h, name, "echo ready; sleep 60")
    cid = the_cid(name, p.pid)
    assert p.stdout.readline() == b"ready\n"
    sup = int((RUNS / cid / "pid").read_text())
    os.kill(p.pid, signal.SIGSTOP)
    try:
        # the janitor: the supervisor's child in a session of its own
        for k in map(int, Path(f"/proc/{sup}/task/{sup}/children").read_text().split()):
            if os.getsid(k) == k:
                os.kill(k, signal.SIGKILL)
        os.kill(sup, signal.SIGKILL)
        time.sleep(0.3)
        assert cid in runc_ids()  # the VM runs on, its supervisor gone
        r = h("ps", name)
        assert r.returncode == 0, r
        assert cid not in runc_ids() and not vmm_pids_of(cid), r.stdout
    finally:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate(timeout=30)
