"""The warm pool end to end on uml: `warm: N` keeps agent VMs booted by detached
tenders, `run` takes one (output, exit codes, stdin, timeout 124 as a cold run) and throws
it away, so nothing carries over; an edited Bluefile or a rebuilt image is never served by an
old VM; a claimer or a tender killed with -9, or VMs gone behind bluebox's back, and the pool
recovers; 20 concurrent runs on `warm: 2` all succeed (the rest boot cold); the commands that
change /data or the sandbox drain the pool. Root standard and rootless strict. Needs root,
podman, user-mode-linux and build/bluebox-vmm."""
import fcntl
import json
import os
import re
import signal
import subprocess
import time

import pytest

from test_guest_users import made_home
from test_podman_build import env, podman  # noqa: F401  (session fixture + helper)
from test_runtime import UML, IMAGE, Home

pytestmark = UML

# A file only a pool VM has: the warmup wrote it, a cold boot never does.
WARMED = "/tmp/.warmed"


def bluefile(home, warm=2, extra="", timeout=3, net="bridge"):
    iso = getattr(home, "isolation", "standard")
    return (f"base: {IMAGE}\nbackend: uml\nram_mib: 128\nnetwork: {net}\nisolation: {iso}\n"
            f"timeout_seconds: {timeout}\nwarm: {warm}\n{extra}")


def warmup(*lines):
    return "warmup:\n" + "".join(f"  - {json.dumps(line)}\n" for line in lines)


def pool_dir(home, name):
    return home.dir / "home" / "pool" / name


def entries(home, name):
    d = pool_dir(home, name)
    if not d.is_dir():
        return []
    entry = re.compile(r"[0-9a-f]{12}\.[a-z]+(-\d+)?")
    return sorted(p.name for p in d.iterdir() if entry.fullmatch(p.name))


def waiting(home, name):
    return [e for e in entries(home, name) if e.endswith(".waiting")]


def wait_for(what, cond, timeout=180, every=0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(every)
    raise AssertionError(f"timed out waiting for {what}")


def locked(path):
    """Whether a process holds flock on path (a tender on .lock, a waiting one on .waiter)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def tenders_quiet(home, name):
    """No tender runs or waits to run. One that waited for the lock while another filled the
    pool sweeps after it: were VMs removed meanwhile, it would rightly drop their entries."""
    d = pool_dir(home, name)
    return not locked(d / ".waiter") and not locked(d / ".lock")


def wait_full(home, name, n=2, timeout=180):
    """Until n VMs wait, nothing else is left and no tender is at work; `bluebox pool` starts
    a tender if needed."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r = home("pool", name)
        assert r.returncode == 0, r
        e = entries(home, name)
        full = len(e) == n and all(x.endswith(".waiting") for x in e)
        if full and tenders_quiet(home, name) and entries(home, name) == e:
            return e
        time.sleep(0.5)
    raise AssertionError(f"pool {name} never filled: {entries(home, name)}\n"
                         f"{log(home, name)[-3000:]}")


def pool_vms(home, name, running=False):
    """The pool's containers podman knows (names end in the entry id)."""
    args = ["ps", "--format", "{{.Names}}"] + ([] if running else ["-a"])
    out = podman(*args, "--filter", f"label=bluebox.sandbox={name}",
                 user=bool(home.user)).stdout.split()
    return sorted(n for n in out if n.startswith("bluebox-pool-"))


def ids(names):
    return {n.split(".")[0] if "." in n else n.rsplit("-", 1)[1] for n in names}


def log(home, name):
    p = home.dir / "home" / "logs" / f"{name}.log"
    return p.read_text(errors="replace") if p.exists() else ""


def make(home, tag, body):
    name = home.sandbox(f"pool-{tag}-{os.getpid()}", body)
    r = home("build", name, timeout=900)
    assert r.returncode == 0, r
    return name


@pytest.fixture(params=[("root", "standard"), ("rootless", "strict")],
                ids=["root-standard", "rootless-strict"])
def mhome(request, env, bluebox_bin):  # noqa: F811
    h = made_home(request, env, bluebox_bin)
    yield h
    h.close()


@pytest.fixture
def home(env, bluebox_bin):  # noqa: F811
    h = Home(bluebox_bin)
    h.isolation = "standard"
    yield h
    h.close()


def quiet(stderr):
    """stderr without the isolation re-check's note: parallel test sessions rewrite the
    shared CONTAINERS_CONF, which is a runtime change that any run may notice."""
    return b"".join(ln for ln in stderr.splitlines(keepends=True)
                    if not ln.startswith((b"bluebox: re-verified isolation",
                                          b"bluebox: verified isolation")))


def warm_run(home, name, *cmd, input=None, timeout=120):
    """A run that must have been served by a pool VM: the command runs after a check for the
    warmup's file (exit 99 when a cold boot ran it)."""
    script = f"test -e {WARMED} || exit 99; exec \"$@\""
    return home("run", name, "--", "sh", "-c", script, "sh", *cmd, input=input, timeout=timeout)


# ---- the warm path: output, exit codes, stdin, timeout --------------------------------------

def test_warm_run_output_exit_stdin_timeout(mhome):
    home = mhome
    name = make(home, "basic", bluefile(home, extra=warmup(f"echo w > {WARMED}", "exit 7",
                                                             "sleep 30")))
    wait_full(home, name)
    # the warmup ran in each VM; a failing or overlong line is logged, never fatal
    text = log(home, name)
    assert text.count("pool warmup: '/bin/sh' '-c' 'exit 7'") >= 2, text[-2000:]
    assert "=== exit 7 (" in text and "=== exit 124 (" in text, text[-2000:]

    t = time.monotonic()
    r = warm_run(home, name, "sh", "-c", "echo out; echo err >&2; exit 3")
    took = time.monotonic() - t
    assert (r.returncode, r.stdout, quiet(r.stderr)) == (3, b"out\n", b"err\n"), r
    assert took < 10, took
    wait_full(home, name)
    blob = os.urandom(300000) + b"\0end"
    r = warm_run(home, name, "cat", input=blob)
    assert r.returncode == 0 and r.stdout == blob, (r.returncode, len(r.stdout), r.stderr)
    wait_full(home, name)
    r = warm_run(home, name, "no-such-command")
    assert r.returncode == 127, r
    wait_full(home, name)
    t = time.monotonic()
    r = warm_run(home, name, "sleep", "60")
    assert r.returncode == 124, r
    assert b"bluebox: killed after 3s (timeout_seconds)" in r.stderr, r
    assert time.monotonic() - t < 30
    # each run went into the run log, as a cold run's does
    assert "'echo out; echo err >&2; exit 3'\n| out\n| err\n=== exit 3 (" in log(home, name)
    # /data is the sandbox's, as on every run
    r = warm_run(home, name, "sh", "-c", "echo kept > /data/f")
    assert r.returncode == 0, r
    assert (home.data(name) / "f").read_text() == "kept\n"
    # ls and pool say what the pool holds
    wait_full(home, name)
    r = home("ls")
    row = [ln.split() for ln in r.stdout.decode().splitlines() if ln.startswith(name + " ")][0]
    assert "2/2" in row, row
    r = home("pool", name)
    out = r.stdout.decode()
    assert out.startswith(f"{name}: warm 2/2, 2 VMs holding up to 128 MiB of RAM each\n"), out
    assert out.count(" waiting ") == 2, out


def test_no_vm_free_boots_cold(home):
    """warm: 1 with its one VM taken: the next run boots cold at once, never waits."""
    name = make(home, "cold", bluefile(home, warm=1, timeout=60,
                                       extra=warmup(f"echo w > {WARMED}")))
    wait_full(home, name, 1)
    first = subprocess.Popen(home.cmd("run", name, "--", "sh", "-c",
                                      f"test -e {WARMED} && echo warm; sleep 8"),
                             env=home.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             stdin=subprocess.DEVNULL, cwd="/")
    wait_for("the claim", lambda: any(".claimed-" in e for e in entries(home, name)), 30)
    r = home("run", name, "--", "sh", "-c", f"test -e {WARMED} && echo warm || echo cold")
    assert (r.returncode, r.stdout) == (0, b"cold\n"), r
    out, err = first.communicate(timeout=120)
    assert (first.returncode, out) == (0, b"warm\n"), (out, err)


# ---- one run per VM: nothing carries over ---------------------------------------------------

def test_nothing_carries_over(home):
    name = make(home, "fresh", bluefile(home, timeout=30, extra=warmup(f"echo w > {WARMED}")))
    wait_full(home, name)
    leave = ("cat /proc/sys/kernel/random/boot_id; echo mark > /tmp/mark; "
             "(setsid sleep 4242 </dev/null >/dev/null 2>&1 &); "
             "echo 'export LEAKED=1' >> /etc/profile; mkdir -p /root; "
             "echo 'export LEAKED=1' >> /root/.profile; true")
    r = warm_run(home, name, "sh", "-c", leave)
    assert r.returncode == 0, r
    boot1 = r.stdout.decode().strip()
    wait_full(home, name)
    look = ("cat /proc/sys/kernel/random/boot_id; test -e /tmp/mark && echo MARK; "
            "ps -o args 2>/dev/null | grep -v grep | grep -q 'sleep 4242' && echo PROC; "
            "grep -q LEAKED /etc/profile /root/.profile 2>/dev/null && echo PROFILE; "
            "env | grep -q LEAKED && echo ENV; true")
    for _ in range(3):  # and again, whichever VM of the pool serves it
        r = warm_run(home, name, "sh", "-c", look)
        assert r.returncode == 0, r
        lines = r.stdout.decode().split()
        assert lines[0] != boot1, "a run was served by the VM of an earlier run"
        assert lines[1:] == [], lines
        wait_full(home, name)
    # the VM that served the run is gone (a tender removed it)
    assert len(pool_vms(home, name)) == 2


# ---- an edited Bluefile or a rebuilt image is never served by an old VM -----------------------

def test_edited_bluefile_and_rebuilt_image_never_served_by_old_vms(home):
    body = bluefile(home, timeout=30, extra="run:\n  - echo v1 > /etc/ver\n")
    name = make(home, "edit", body + warmup(f"echo A > {WARMED}"))
    wait_full(home, name)
    before = ids(entries(home, name))
    # edited (not rebuilt): the old VMs have /tmp/.warmed = A and must not serve
    (home.dir / "home" / "sandboxes" / name / "Bluefile").write_text(
        body + warmup(f"echo B > {WARMED}"))
    r = home("run", name, "--", "sh", "-c", f"cat {WARMED} 2>/dev/null; true")
    assert r.returncode == 0 and b"A" not in r.stdout, r
    # the tender that run started replaced them
    wait_full(home, name)
    assert not before & ids(entries(home, name))
    r = home("run", name, "--", "sh", "-c", f"cat {WARMED}")
    assert (r.returncode, r.stdout) == (0, b"B\n"), r
    # rebuilt: the image changes under the pool; build drains it
    wait_full(home, name)
    before = ids(entries(home, name))
    (home.dir / "home" / "sandboxes" / name / "Bluefile").write_text(
        body.replace("v1", "v2") + warmup(f"echo B > {WARMED}"))
    r = home("build", name, timeout=900)
    assert r.returncode == 0, r
    assert not before & ids(entries(home, name)), entries(home, name)
    assert not before & ids(pool_vms(home, name))
    r = home("run", name, "--", "cat", "/etc/ver")
    assert (r.returncode, r.stdout) == (0, b"v2\n"), r
    wait_full(home, name)
    r = warm_run(home, name, "cat", "/etc/ver")
    assert (r.returncode, r.stdout) == (0, b"v2\n"), r


# ---- crashes: a claimer or a tender killed with -9, VMs gone --------------------------------

def test_killed_claimer_and_tender_and_lost_vms_recover(home):
    name = make(home, "crash", bluefile(home, timeout=60,
                                        extra=warmup(f"echo w > {WARMED}", "sleep 1")))
    wait_full(home, name)
    # a claimer killed mid-run: its VM is removed and the pool refilled
    p = subprocess.Popen(home.cmd("run", name, "--", "sleep", "50"), env=home.env,
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, cwd="/")
    claimed = wait_for("the claim", lambda: [e for e in entries(home, name)
                                             if e.endswith(f".claimed-{p.pid}")], 30)[0]
    p.kill()
    p.wait()
    gone = claimed.split(".")[0]
    wait_for("the killed run's VM to go", lambda: (home("pool", name),
                                                   gone not in ids(pool_vms(home, name)))[1], 120)
    wait_full(home, name)
    assert len(pool_vms(home, name)) == 2
    # a tender killed halfway, at several points of a boot
    for delay in (0.0, 0.4, 1.5):
        r = home("reset", name, "-y")  # drains the pool and starts a tender
        assert r.returncode == 0, r
        booting = wait_for("a tender to boot", lambda: [e for e in entries(home, name)
                                                        if ".booting-" in e], 60)[0]
        time.sleep(delay)
        try:
            os.kill(int(booting.rsplit("-", 1)[1]), signal.SIGKILL)
        except ProcessLookupError:
            pass
        full = wait_full(home, name)
        wait_for("no stray VMs", lambda: ids(pool_vms(home, name)) == ids(full), 60)
    # a reboot: the VMs are gone behind bluebox's back, their files stay
    for vm in pool_vms(home, name):
        podman("rm", "-f", "-t", "0", vm, user=bool(home.user))
    assert len(waiting(home, name)) == 2
    r = home("run", name, "--", "sh", "-c", "echo ran")
    assert (r.returncode, r.stdout) == (0, b"ran\n"), r
    full = wait_full(home, name)
    assert ids(pool_vms(home, name, running=True)) == ids(full)
    r = warm_run(home, name, "echo", "warm again")
    assert (r.returncode, r.stdout) == (0, b"warm again\n"), r


# ---- 20 concurrent runs on warm: 2 ----------------------------------------------------------

def test_twenty_concurrent_runs(home):
    name = make(home, "many", bluefile(home, timeout=300, extra=warmup(f"echo w > {WARMED}")))
    wait_full(home, name)
    procs = [subprocess.Popen(home.cmd("run", name, "--", "sh", "-c",
                                       f"echo $(({i} * 2)); test -e {WARMED} && echo warm; true"),
                              env=home.env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, cwd="/")
             for i in range(20)]
    outs = [(p.communicate(timeout=900), p.returncode) for p in procs]
    warm = 0
    for i, ((out, err), rc) in enumerate(outs):
        assert rc == 0, (i, out, err)
        lines = out.decode().split()
        assert lines[0] == str(i * 2), (i, out, err)
        warm += lines[1:] == ["warm"]
    assert 1 <= warm, "no run was served by the pool"
    full = wait_full(home, name, timeout=300)
    wait_for("no stray VMs", lambda: ids(pool_vms(home, name)) == ids(full), 120)


# ---- drains: reset, restore, destroy, rename, lowering warm -----------------------------------

def test_commands_drain_the_pool(home):
    body = bluefile(home, timeout=30, extra=warmup(f"echo w > {WARMED}"))
    name = make(home, "drain", body)
    wait_full(home, name)
    r = warm_run(home, name, "sh", "-c", "echo one > /data/f")
    assert r.returncode == 0, r
    assert home("snapshot", name, "one", "-y").returncode == 0
    for cmd in (["reset", name, "-y"], ["restore", name, "one", "-y"]):
        full = wait_full(home, name)
        r = home(*cmd)
        assert r.returncode == 0, r
        assert not ids(full) & ids(entries(home, name)), (cmd, entries(home, name))
        assert not ids(full) & ids(pool_vms(home, name)), cmd
        # the refilled pool's VMs see /data as it is now
        wait_full(home, name)
        r = warm_run(home, name, "sh", "-c", "cat /data/f 2>/dev/null || echo none")
        want = b"none\n" if cmd[0] == "reset" else b"one\n"
        assert (r.returncode, r.stdout) == (0, want), (cmd, r)
    # lowering warm shrinks the pool at the next run
    wait_full(home, name)
    (home.dir / "home" / "sandboxes" / name / "Bluefile").write_text(body.replace("warm: 2",
                                                                                  "warm: 0"))
    r = home("run", name, "--", "true")
    assert r.returncode == 0, r
    wait_for("the pool to empty", lambda: entries(home, name) == [] and pool_vms(home, name) == [],
             120)
    (home.dir / "home" / "sandboxes" / name / "Bluefile").write_text(body)
    # rename and destroy remove the pool with its VMs
    wait_full(home, name)
    r = home("rename", name, name + "-b")
    assert r.returncode == 0, r
    home.names[home.names.index(name)] = name + "-b"
    assert not pool_dir(home, name).exists() and pool_vms(home, name) == []
    name += "-b"
    wait_full(home, name)
    r = home("destroy", name, "--data", "-y")
    assert r.returncode == 0, r
    home.names.remove(name)
    assert not pool_dir(home, name).exists() and pool_vms(home, name) == []


@pytest.mark.parametrize("cmd,when", [("rename", "starting"), ("destroy", "warming")])
def test_a_boot_in_flight_is_gone_when_rename_or_destroy_returns(home, cmd, when):
    """A tender's boot in flight when the sandbox is renamed or destroyed, just begun (its VM
    not made yet) or warming up: the command returns only once that VM is gone, and no pool
    directory of the old name comes back."""
    name = make(home, f"fly{cmd[0]}{when[0]}",
                bluefile(home, warm=1, timeout=30, extra=warmup(f"echo w > {WARMED}", "sleep 6")))
    assert home("pool", name).returncode == 0  # starts the tender

    def in_flight():
        booting = any(".booting-" in e for e in entries(home, name))
        return booting and (when == "starting" or pool_vms(home, name, running=True))
    wait_for("a boot in flight", in_flight, 120, every=0.005)
    if cmd == "rename":
        r = home("rename", name, name + "-b")
        home.names[home.names.index(name)] = name + "-b"
    else:
        r = home("destroy", name, "--data", "-y")
        home.names.remove(name)
    assert r.returncode == 0, r
    # the tender has ended: no VM of the old name shows up later, no pool directory either
    until = time.monotonic() + 6
    while time.monotonic() < until:
        assert pool_vms(home, name) == [], "a VM of the old pool outlived " + cmd
        assert not pool_dir(home, name).exists()
        time.sleep(0.1)


# ---- network: none: the pool stays offline ----------------------------------------------------

def test_offline_pool_stays_offline(home):
    gw = podman("network", "inspect", "podman", "--format",
                "{{range .Subnets}}{{.Gateway}}{{end}}").stdout.strip()
    name = make(home, "off", bluefile(home, net="none", timeout=30,
                                      extra=warmup(f"echo w > {WARMED}")))
    wait_full(home, name)
    script = (f"echo hi | nc -w 3 {gw} 9 >/dev/null 2>&1 && echo tcp-out; "
              "echo hi | nc -w 3 1.1.1.1 80 >/dev/null 2>&1 && echo internet; "
              "timeout 5 nslookup example.net >/dev/null 2>&1 && echo dns-out; echo done")
    r = warm_run(home, name, "sh", "-c", script)
    assert (r.returncode, r.stdout) == (0, b"done\n"), r


# ---- pool VMs cannot see each other or the pool directory -------------------------------------

def test_pool_vms_cannot_reach_each_other(home):
    name = make(home, "iso", bluefile(home, timeout=60, extra=warmup(f"echo w > {WARMED}")))
    wait_full(home, name)
    others = [json.loads((pool_dir(home, name) / e).read_text()) for e in waiting(home, name)]
    ports = [o["addr"].rsplit(":", 1)[1] for o in others]
    gw = podman("network", "inspect", "podman", "--format",
                "{{range .Subnets}}{{.Gateway}}{{end}}").stdout.strip()
    # the markers are spelled apart in the script, which the guest's ps shows
    script = ("; ".join(f"echo x | nc -w 3 {a} {p} >/dev/null 2>&1 && echo RE\"\"ACHED-{a}-{p}"
                        for p in ports for a in ("10.0.2.2", "127.0.0.1", gw))
              + f"; find / -xdev \\( -name '*.waiting' -o -name '*.claimed-*' -o -name "
                f"'{name}' \\) 2>/dev/null | grep -v '^/data' | sed 's/^/FO\"\"UND /'; "
                "cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n'; true")
    r = warm_run(home, name, "sh", "-c", script)
    assert r.returncode == 0, r
    out = r.stdout.decode(errors="replace")
    assert "REACHED" not in out and "FOUND" not in out, out
    for o in others:
        assert o["token"] not in out
    # the pool directory is owner-only on the host
    assert pool_dir(home, name).stat().st_mode & 0o077 == 0


# ---- forks: a fork has its own pool; apply drains the fork's and the parent's -------------------

def test_fork_pool_and_apply(home):
    body = bluefile(home, warm=1, timeout=30, extra=warmup(f"echo w > {WARMED}"))
    parent = make(home, "fp", body)
    fork = parent + "-f"
    r = home("fork", parent, fork)
    assert r.returncode == 0, r
    home.names.insert(0, fork)  # destroyed before its parent
    wait_full(home, fork, 1)
    r = warm_run(home, fork, "sh", "-c", "echo x > /data/new")
    assert r.returncode == 0, r
    assert not (home.data(parent) / "new").exists()
    old = ids(wait_full(home, parent, 1)) | ids(wait_full(home, fork, 1))
    r = home("apply", fork, "-y")
    assert r.returncode == 0, r
    left = ids(entries(home, parent)) | ids(entries(home, fork))
    assert not old & left, (old, left)
    assert not old & (ids(pool_vms(home, parent)) | ids(pool_vms(home, fork)))
    wait_full(home, parent, 1)
    r = warm_run(home, parent, "cat", "/data/new")
    assert (r.returncode, r.stdout) == (0, b"x\n"), r


# ---- the API's run takes the same warm path ----------------------------------------------

def test_api_run_claims_a_warm_vm(home):
    from test_serve import Server, unb64
    name = make(home, "api", bluefile(home, warm=1, extra=warmup(f"echo w > {WARMED}")))
    before = wait_full(home, name, n=1)
    s = Server(home)
    try:
        script = f"test -e {WARMED} || exit 99; echo \"$X $PWD\"; cat"
        st, res = s.call("POST", f"/v1/sandboxes/{name}/run",
                         {"argv": ["sh", "-c", script], "env": {"X": "warm"}, "cwd": "/tmp",
                          "stdin": "aW4K"})
        assert st == 200, res
        assert (res["exit_code"], unb64(res["stdout"])) == (0, b"warm /tmp\nin\n"), res
        # the VM that served it is gone, and a tender boots its replacement
        after = wait_full(home, name, n=1)
        assert not set(ids(before)) & set(ids(after)), (before, after)
        assert "run (api)" in log(home, name)
    finally:
        s.stop()
