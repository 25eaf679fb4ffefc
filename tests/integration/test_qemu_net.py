"""The qemu backend's network and agent end to end on real podman, with TCG here:
QEMU's virtio-net device on a stream socket into bluebox-vmm's libslirp, the same engine as
uml's (src/net/slirp.c, netstream.c). network: bridge reaches the machine's Debian mirror but
neither the host's loopback nor podman's gateway (refused at once, nothing arrives); network:
none has no interface but lo; an allow: list lets one name through and not another; up, exec
(exit codes, stdin and output byte-exact through the agent's forwarded port), down. Boots are
dear under TCG (~3 s each, CI's budget): one per build and per run, the up sandbox shared.
Skipped where test_qemu.py is (root, podman, build/bluebox-vmm, QEMU, a guest kernel)."""
import hashlib
import json
import os

import pytest

from test_egress import npm_registry_host, podman_gateway
from test_netpolicy import Listener
from test_podman_build import env  # noqa: F401  (session fixture)
from test_qemu import ACCEL, bluefile, pytestmark  # noqa: F401  (the same skips)
from test_runtime import Home, _bridge_mirror_or_skip, containers_of


def probe(tag, host, port):
    """Shell for one TCP connect from the guest, timed by the guest's /proc/uptime."""
    return (f"a=$(cut -d' ' -f1 /proc/uptime); timeout 10 nc -w 8 {host} {port} </dev/null "
            f"2>&1 | head -c 200; echo; b=$(cut -d' ' -f1 /proc/uptime); echo \"took {tag} $a $b\"")


def took(out, tag):
    lines = [ln for ln in out.splitlines() if ln.startswith(f"took {tag} ")]
    assert len(lines) == 1, out
    _, _, a, b = lines[0].split()
    return float(b) - float(a)


def mirror():
    """(host, url) of the machine's Debian mirror when plain podman reaches it, else None."""
    try:
        return _bridge_mirror_or_skip()
    except pytest.skip.Exception:
        return None


@pytest.fixture(scope="module")
def home(env, bluebox_bin):  # noqa: F811
    h = Home(bluebox_bin)
    h.env["BLUEBOX_QEMU_ACCEL"] = ACCEL
    yield h
    h.close()


@pytest.fixture(scope="module")
def bridge(home):
    """One bridge run (one boot): the interface, the mirror when there is one, and connects to
    listeners on the host's loopback (through slirp's 10.0.2.2) and on podman's gateway."""
    m = mirror()
    loop, gw = Listener("127.0.0.1"), Listener(podman_gateway())
    try:
        name = home.sandbox(f"qnet-{os.getpid()}", bluefile("network: bridge\n"))
        r = home("build", name)
        assert r.returncode == 0, r
        assert b"network bridge (internet only: host, LAN, metadata refused)" in \
            r.stdout + r.stderr, r
        script = [
            "ls /sys/class/net | tr '\\n' ' '; echo",
            "cat /sys/class/net/eth0/mtu",
            probe("loopback", "10.0.2.2", loop.port),
            probe("gateway", gw.addr, gw.port),
        ]
        if m:
            script += [f"nslookup {m[0]} >/dev/null && echo resolved",
                       f"timeout 20 wget -q -O- {m[1]} | head -1"]
        r = home("run", name, "--", "sh", "-c", "; ".join(script), timeout=240)
        assert r.returncode == 0, r
        yield name, r.stdout.decode(), m, loop, gw
    finally:
        loop.close()
        gw.close()


def test_bridge_has_eth0_at_the_links_mtu(bridge):
    _, out, _, _, _ = bridge
    lines = out.splitlines()
    assert lines[0].split() == ["eth0", "lo"], out
    assert lines[1] == "9000", out


def test_bridge_refuses_the_hosts_loopback_and_podmans_gateway(bridge):
    _, out, _, loop, gw = bridge
    for tag in ("loopback", "gateway"):
        assert took(out, tag) < 2.0, (tag, out)  # refused at once, not timed out
    assert out.count("Connection refused") == 2, out
    assert loop.seen == [] and gw.seen == [], (loop.seen, gw.seen)


def test_bridge_reaches_the_mirror(bridge):
    _, out, m, _, _ = bridge
    if not m:
        pytest.skip("no reachable http:// Debian mirror here (plain podman cannot fetch it)")
    assert "resolved\n-----BEGIN PGP SIGNATURE-----\n" in out, out


def test_allow_lets_one_name_through_and_not_another(home, bridge):
    name, _, m, _, _ = bridge
    if not m:
        pytest.skip("no reachable http:// Debian mirror here (plain podman cannot fetch it)")
    host, url = m
    other = npm_registry_host() or "denied.invalid"
    (home.dir / "home" / "sandboxes" / name / "Bluefile").write_text(
        bluefile(f"network: bridge\nallow:\n  - \"{host}\"\n"))
    r = home("build", name)
    assert r.returncode == 0, r
    script = (f"timeout 20 wget -q -O- {url} | head -1; "
              + probe("denied", other, 80))
    r = home("run", name, "--", "sh", "-c", script, timeout=240)
    out = r.stdout.decode()
    assert r.returncode == 0, r
    assert out.startswith("-----BEGIN PGP SIGNATURE-----\n"), out
    assert took(out, "denied") < 2.0, out
    assert "bad address" in out, out  # the denied name does not resolve
    log = [json.loads(ln) for ln in
           (home.dir / "home" / "logs" / "net" / f"{name}.log").read_text().splitlines()]
    assert any(e.get("name") == other and e["decision"] == "deny" for e in log), log
    assert any(e.get("name") == host and e["decision"] == "allow" for e in log), log


@pytest.fixture(scope="module")
def box(home):
    """A network: none sandbox: one run (its interfaces), then up, shared by the exec tests;
    down (and its check) at the end."""
    name = home.sandbox(f"qup-{os.getpid()}", bluefile("timeout_seconds: 60\n"))
    r = home("build", name)
    assert r.returncode == 0, r
    ifaces = home("run", name, "--", "ls", "/sys/class/net")
    r = home("up", name, timeout=240)
    assert r.returncode == 0, r
    out = r.stdout.decode()
    assert out.startswith(f"up {name} (ready in ") and "isolation: qemu (" in out, r
    yield name, ifaces
    r = home("down", name)
    assert r.returncode == 0, r
    assert containers_of(name) == []


def test_none_has_no_interface_but_lo(box):
    _, r = box
    assert (r.returncode, r.stdout) == (0, b"lo\n"), r


def test_exec_exit_codes_and_output(home, box):
    name, _ = box
    r = home("exec", name, "--", "sh", "-c", "echo out; echo err >&2; exit 3")
    assert (r.returncode, r.stdout, r.stderr) == (3, b"out\n", b"err\n"), r
    r = home("exec", name, "--", "sh", "-c", "echo kept > /tmp/f")
    assert r.returncode == 0, r
    r = home("exec", name, "--", "cat", "/tmp/f")  # the same VM: its state stays
    assert (r.returncode, r.stdout) == (0, b"kept\n"), r
    r = home("exec", name, "--", "no-such-command")
    assert r.returncode == 127, r


def test_exec_stdin_and_output_byte_exact(home, box):
    """Megabytes each way through the agent's forwarded port: the stream link's framing and
    its queue under load."""
    name, _ = box
    blob = os.urandom(2 << 20) + b"\0\r\n\x04end"
    r = home("exec", name, "--", "cat", input=blob, timeout=240)
    assert r.returncode == 0 and r.stdout == blob, (r.returncode, len(r.stdout), r.stderr)
    r = home("exec", name, "--", "sha256sum", input=blob, timeout=240)
    assert r.stdout.split()[0].decode() == hashlib.sha256(blob).hexdigest(), r


def test_up_guest_reaches_nothing(home, box):
    """network: none with the agent's forward is libslirp's restricted mode: the guest has
    an interface for the forward, and nothing answers it, not even the gateway."""
    name, _ = box
    r = home("exec", name, "--", "sh", "-c",
             "ls /sys/class/net | tr '\\n' ' '; echo; timeout 3 nc -w 2 10.0.2.2 80 </dev/null "
             "&& echo REACHED; timeout 3 nslookup localhost 10.0.2.3 >/dev/null 2>&1 && "
             "echo DNS; true")
    assert r.returncode == 0, r
    out = r.stdout.decode()
    assert out.splitlines()[0].split() == ["eth0", "lo"], out
    assert "REACHED" not in out and "DNS" not in out, out
