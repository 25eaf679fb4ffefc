"""network: bridge on the direct launch path (src/launch/direct_net.c): each run gets
a network namespace of its own, linked to the internet by slirp4netns, instead of podman's
bridge. The guest's reach is what test_netpolicy asserts on the podman path (the internet,
not the host, the LAN, other containers or metadata); one sandbox can reach nothing of
another's, not from its guest and not from its VMM's namespace; the VMM's confinement is the
podman path's; and no exit (kill -9, timeout) leaves a slirp4netns, a namespace or a mount.
Needs root, podman, runc, slirp4netns, build/bluebox-vmm and user-mode-linux.

    python3 -m pytest -q tests/integration/test_direct_net.py
"""
import ctypes
import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from test_podman_build import env, podman  # noqa: F401  (session fixture + helper)
from test_runtime import IMAGE, UML, home, _bridge_mirror_or_skip  # noqa: F401
from test_netpolicy import (Listener, assert_refused_at_once, host_address,  # noqa: F401
                            other_container, podman_gateway, probe)
from test_direct_launch import (DIRECT, PODMAN, RUNC_ROOT, RUNS, _gone, runs_of, start,
                                the_run, vmm_records)

pytestmark = [UML, pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("runc") or not shutil.which("slirp4netns"),
    reason="the direct launch with network: bridge needs root, runc and slirp4netns")]

BRIDGE = f"base: {IMAGE}\nbackend: uml\nram_mib: 256\nnetwork: bridge\n"
CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


@pytest.fixture
def box(home):  # noqa: F811
    name = home.sandbox(f"dnet-{os.getpid()}", BRIDGE)
    r = home("build", name)
    assert r.returncode == 0, r
    return name


def went_direct(home, name):  # noqa: F811
    """A direct launch of the sandbox left its template (podman's config.json) behind."""
    return list((home.dir / "home" / "direct" / "tpl").glob(f"{name}-*")) != []


def vmm_pid(cid):
    state = json.loads(subprocess.run(["runc", "--root", RUNC_ROOT, "state", cid],
                                      capture_output=True, check=True).stdout)
    return state["pid"]


class InNetns:
    """This thread in another process's network namespace for the `with` block (sockets made
    there stay there)."""

    def __init__(self, pid):
        self.target = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY)
        self.own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)

    def __enter__(self):
        assert _libc.setns(self.target, CLONE_NEWNET) == 0, ctypes.get_errno()

    def __exit__(self, *exc):
        assert _libc.setns(self.own, CLONE_NEWNET) == 0, ctypes.get_errno()
        os.close(self.target)
        os.close(self.own)


class NsListener(Listener):
    """test_netpolicy's Listener, on every address of another process's namespace."""

    def __init__(self, pid):
        with InNetns(pid):
            self.sock = socket.create_server(("0.0.0.0", 0))
        self.sock.settimeout(0.2)
        self.addr, self.port = "0.0.0.0", self.sock.getsockname()[1]
        self.seen = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.loop)
        self.thread.start()


def connect_from(pid, host, port):
    """One TCP connect from inside pid's network namespace: what a VMM a guest took over
    could try. Returns the error's name, or "connected"."""
    with InNetns(pid):
        s = socket.socket()
    s.settimeout(3)
    try:
        s.connect((host, port))
        return "connected"
    except OSError as e:
        return type(e).__name__
    finally:
        s.close()


def netns_of(pid):
    return os.readlink(f"/proc/{pid}/ns/net")


def helpers_of(supervisor):
    """The slirp4netns processes serving a supervisor's namespace."""
    out = []
    for p in Path("/proc").iterdir():
        try:
            argv = (p / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(b"slirp4netns") and str(supervisor).encode() in argv:
            out.append(int(p.name))
    return out


def holders(netns, cid):
    """Processes in the namespace, and mount tables that still mention the run."""
    out = []
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            if os.readlink(p / "ns" / "net") == netns:
                out.append(f"process {p.name} in the namespace")
            if cid in (p / "mountinfo").read_text():
                out.append(f"a mount of process {p.name}")
        except OSError:
            pass
    return out


def running(home, name):  # noqa: F811
    """A direct bridge run, sleeping: (Popen, container id, supervisor pid, VMM pid)."""
    p = start(home, name, DIRECT)
    cid = the_run(name, p.pid)
    return p, cid, int((RUNS / cid / "pid").read_text()), vmm_pid(cid)


def stop(p):
    p.terminate()
    p.communicate(timeout=60)


def test_direct_bridge_reaches_the_mirror_but_not_the_host_lan_or_metadata(
        env, home, box, other_container):  # noqa: F811
    """test_netpolicy's check, on the direct path: refused at once, nothing arrives; the
    mirror is reachable (and the guest resolves its name)."""
    reach_check(home, box, other_container)


def reach_check(home, box, other_container):  # noqa: F811
    """A bridge sandbox's direct run reaches the mirror and nothing of the host, the LAN,
    other containers, metadata or slirp4netns's gateway (test_direct_qemu.py too)."""
    host, url = _bridge_mirror_or_skip()
    gw = podman_gateway()
    addr = host_address({gw})
    listeners = [Listener(gw)] + ([Listener(addr)] if addr else [])
    try:
        targets = [(li.addr, li.port) for li in listeners]
        targets += [(other_container, 8080), ("169.254.169.254", 80), ("10.0.2.2", 22)]
        script = "; ".join(probe(t) for t in targets)
        script += f"; nslookup {host} >/dev/null && echo resolved"
        script += f"; timeout 20 wget -q -O- {url} | head -1"
        r = home("run", box, "--", "sh", "-c", script, env=DIRECT, timeout=180)
        out = r.stdout.decode()
        assert r.returncode == 0, r
        assert went_direct(home, box)
        assert_refused_at_once(out, targets)
        assert "resolved\n" in out, out
        assert out.rstrip().endswith("-----BEGIN PGP SIGNATURE-----"), out
        for li in listeners:
            assert li.seen == [], (li.addr, li.seen)
    finally:
        for li in listeners:
            li.close()


def test_one_sandbox_cannot_reach_anothers_namespace(home, box):  # noqa: F811
    """A listener in sandbox A's network namespace (where the VMM's sockets and, for up, its
    forwarded ports live): sandbox B's guest cannot reach it by any address it may name, nor
    can B's namespace itself (a VMM taken over by its guest). Every run has its own
    namespace, and slirp4netns forwards nothing into one."""
    other = home.sandbox(f"dnetb-{os.getpid()}", BRIDGE)
    assert home("build", other).returncode == 0
    a, a_cid, _, a_vmm = running(home, box)
    li = NsListener(a_vmm)
    try:
        assert connect_from(a_vmm, "127.0.0.1", li.port) == "connected"  # the control
        for _ in range(50):
            if li.seen:
                break
            time.sleep(0.1)
        assert len(li.seen) == 1, li.seen
        li.seen.clear()
        gw = podman_gateway()
        targets = [("10.0.2.100", li.port), ("10.0.2.2", li.port), ("127.0.0.1", li.port),
                   (gw, li.port)]
        addr = host_address({gw})
        if addr:
            targets.append((addr, li.port))
        script = "; ".join(probe(t) for t in targets)
        r = home("run", other, "--", "sh", "-c", script, env=DIRECT, timeout=180)
        out = r.stdout.decode()
        assert r.returncode == 0, r
        # 10.0.2.100 is inside the guest's own virtual subnet: no host answers for it there
        assert out.count("can't connect") == len(targets), out
        b, _, _, b_vmm = running(home, other)
        try:
            assert netns_of(b_vmm) not in (netns_of(a_vmm), netns_of(os.getpid()))
            for host, port in targets:
                assert connect_from(b_vmm, host, port) != "connected", host
        finally:
            stop(b)
        time.sleep(0.5)
        assert li.seen == [], li.seen
    finally:
        li.close()
        stop(a)


def test_direct_bridge_confinement_is_podmans(home, box):  # noqa: F811
    """test_direct_launch's comparison for a bridge sandbox: caps, NNP, seccomp, namespaces
    (a network namespace of its own on both), uid map, rlimits, cgroup limits."""
    via_podman = vmm_records(home, box, PODMAN)
    direct = vmm_records(home, box, DIRECT)
    assert direct == via_podman
    assert direct["bluebox-vmm"]["own net"] and direct["linux.uml"]["own net"]


def _all_gone(home, box, cid, sup, netns):  # noqa: F811
    left = []
    for _ in range(100):
        left = _gone(home, box, cid) + [f"slirp4netns {p}" for p in helpers_of(sup)]
        left += holders(netns, cid)
        if not left:
            return []
        time.sleep(0.2)
    return left


def test_kill9_of_bluebox_leaves_no_helper_namespace_or_mount(home, box):  # noqa: F811
    p, cid, sup, vmm = running(home, box)
    netns = netns_of(vmm)
    assert helpers_of(sup) and holders(netns, cid)  # there while it runs
    os.kill(p.pid, signal.SIGKILL)
    p.communicate(timeout=60)
    assert _all_gone(home, box, cid, sup, netns) == []


def test_kill9_of_the_supervisor_stops_its_helper_at_once(home, box):  # noqa: F811
    """Supervisor and bluebox killed outright: slirp4netns goes with the supervisor (its
    exit fd, PR_SET_PDEATHSIG); the container, and with it the namespace, at the next
    direct launch."""
    p, cid, sup, vmm = running(home, box)
    netns = netns_of(vmm)
    os.kill(sup, signal.SIGKILL)
    os.kill(p.pid, signal.SIGKILL)
    p.communicate(timeout=60)
    for _ in range(50):
        if not helpers_of(sup):
            break
        time.sleep(0.1)
    assert helpers_of(sup) == []
    r = home("run", box, "--", "true", env=DIRECT)
    assert r.returncode == 0, r
    assert _all_gone(home, box, cid, sup, netns) == []


def test_direct_bridge_timeout_is_124_and_leaves_nothing(home):  # noqa: F811
    name = home.sandbox(f"dnetto-{os.getpid()}", BRIDGE + "timeout_seconds: 3\n")
    assert home("build", name).returncode == 0
    p = subprocess.Popen(home.cmd("run", name, "--", "sleep", "60"),
                         env=dict(home.env, **DIRECT), stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    sup = cid = None
    for _ in range(200):
        ids = runs_of(name)
        if ids and (RUNS / ids[0] / "pid").exists():
            cid, sup = ids[0], int((RUNS / ids[0] / "pid").read_text())
            break
        time.sleep(0.05)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 124, (out, err)
    assert sup, "the run never started its supervisor"
    assert went_direct(home, name)
    assert _gone(home, name, cid) == [] and helpers_of(sup) == []
    assert [h for h in holders("", cid) if "mount" in h] == []


def test_direct_allowlist_enforced(home):  # noqa: F811
    """allow: (without secrets:) goes direct too: the allowed name resolves (to the egress
    engine's fake address) and is fetched, another name does not resolve, and both are in
    the connection log. (test_egress.py runs whole on this path with BLUEBOX_LAUNCH=direct.)"""
    host, url = _bridge_mirror_or_skip()
    name = home.sandbox(f"dnetal-{os.getpid()}", BRIDGE + f'allow:\n  - "{host}"\n')
    assert home("build", name).returncode == 0
    script = (f"nslookup {host} 2>&1 | grep Address: | tail -1; "
              f"timeout 20 wget -q -O- {url} | head -1; "
              f"timeout 10 wget -q -O- http://denied.invalid/ 2>&1 | head -1")
    r = home("run", name, "--", "sh", "-c", script, env=DIRECT, timeout=180)
    out = r.stdout.decode()
    assert r.returncode == 0, r
    assert went_direct(home, name)
    assert "Address: 10.0.2.1" in out and "-----BEGIN PGP SIGNATURE-----" in out, out
    assert "bad address" in out, out
    log = [json.loads(ln) for ln in
           (home.dir / "home" / "logs" / "net" / f"{name}.log").read_text().splitlines()]
    assert any(e.get("name") == host and e["decision"] == "allow" for e in log), log
    assert any(e.get("name") == "denied.invalid" and e["decision"] == "deny" for e in log), log


def test_direct_secrets_reach_the_vmm_only(home):  # noqa: F811
    """secrets: go direct too: the memfd reaches bluebox-vmm as fd 3 (runc run
    --preserve-fds; a VMM told of secrets it cannot read does not start), the run's
    config.json and the guest hold a placeholder that changes at every boot, never the value,
    and one template serves every boot. (test_secrets.py's end to end and
    test_egress_attacks.py run whole on this path with BLUEBOX_LAUNCH=direct.)"""
    value = "bb-direct-" + os.urandom(8).hex()
    secret = dict(DIRECT, BB_DIRECT_TOKEN=value)
    name = home.sandbox(f"dnetsec-{os.getpid()}", BRIDGE + 'allow:\n  - "example.com"\n'
                        "secrets:\n  - name: TOKEN\n    from_env: BB_DIRECT_TOKEN\n"
                        "    hosts: [example.com]\n")
    assert home("build", name, env={"BB_DIRECT_TOKEN": value}).returncode == 0
    p = start(home, name, secret)
    try:
        cid = the_run(name, p.pid)
        cfg = (RUNS / cid / "config.json").read_text()
        assert value not in cfg and "TOKEN=BLUEBOX_SECRET_" in cfg
        assert "__bluebox_secret_" not in cfg
    finally:
        stop(p)
    seen = []
    for _ in range(2):
        r = home("run", name, "--", "sh", "-c", "echo $TOKEN", env=secret)
        assert r.returncode == 0, r
        seen.append(r.stdout.decode().strip())
    assert all(s.startswith("BLUEBOX_SECRET_") for s in seen) and seen[0] != seen[1], seen
    assert value.encode() not in r.stdout + r.stderr
    assert len(list((home.dir / "home" / "direct" / "tpl").glob(f"{name}-*"))) == 1
