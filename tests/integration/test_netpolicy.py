"""network: bridge on uml reaches the internet, not the host, the LAN or other containers
(src/net/netpolicy.c): TCP servers this test starts on podman's bridge gateway and on the
host's own non-loopback address, a service in another podman container and the cloud metadata
address are refused at once (a reset: the guest's connect fails in well under 2 s, and no
connection arrives), while the machine's Debian mirror stays reachable. Needs root."""
import os
import socket
import subprocess
import threading
import uuid

import pytest

from test_podman_build import env, podman  # noqa: F401  (session fixture + helper)
from test_runtime import IMAGE, UML, Home, _bridge_mirror_or_skip


def podman_gateway():
    return podman("network", "inspect", "podman", "--format",
                  "{{range .Subnets}}{{.Gateway}}{{end}}").stdout.strip()


def host_address(skip):
    """A global IPv4 address of the host's own (not podman's bridge, not loopback)."""
    out = subprocess.run(["ip", "-o", "-4", "addr", "show", "scope", "global"],
                         capture_output=True, text=True).stdout
    for line in out.splitlines():
        w = line.split()
        addr = w[3].split("/")[0]
        if addr not in skip and not w[1].startswith(("podman", "cni-", "veth")):
            return addr
    return None


def assert_refused_at_once(out, targets):
    """Each target's `took NAME START END` line: refused (a reset) within 2 s, never a hang."""
    for t in targets:
        took = [ln for ln in out.splitlines() if ln.startswith(f"took {t[0]} ")]
        assert len(took) == 1, out
        _, _, a, b = took[0].split()
        assert float(b) - float(a) < 2.0, (t, out)
    assert out.count("Connection refused") == len(targets), out


class Listener:
    """A TCP server on addr that records every connection it accepts."""

    def __init__(self, addr):
        self.sock = socket.create_server((addr, 0))
        self.sock.settimeout(0.2)
        self.addr, self.port = addr, self.sock.getsockname()[1]
        self.seen = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.loop)
        self.thread.start()

    def loop(self):
        while not self.stop.is_set():
            try:
                c, peer = self.sock.accept()
                self.seen.append(peer)
                c.close()
            except OSError:
                pass

    def close(self):
        self.stop.set()
        self.thread.join()
        self.sock.close()


@pytest.fixture
def other_container(env):  # noqa: F811
    """A TCP service in another container on podman's bridge, reachable from the host."""
    name = f"bluebox-netpolicy-{uuid.uuid4().hex[:8]}"
    podman("run", "-d", "--rm", "--pull=never", "--network=bridge", "--name", name, IMAGE,
           "sh", "-c", "while true; do echo svc | nc -l -p 8080; done")
    try:
        ip = podman("inspect", "-f", "{{.NetworkSettings.IPAddress}}", name).stdout.strip()
        with socket.create_connection((ip, 8080), timeout=5) as s:  # the control: it serves
            assert s.recv(16) == b"svc\n"
        yield ip
    finally:
        podman("rm", "-f", "-t", "0", name, check=False)


def probe(target):
    """Shell for one TCP connect from the guest, timed by the guest's /proc/uptime."""
    host, port = target
    return (f"a=$(cut -d' ' -f1 /proc/uptime); timeout 10 nc -w 8 {host} {port} </dev/null "
            f"2>&1 | head -c 200; echo; b=$(cut -d' ' -f1 /proc/uptime); "
            f"echo \"took {host} $a $b\"")


@UML
def test_bridge_guest_reaches_the_mirror_but_not_the_host_lan_or_metadata(
        env, bluebox_bin, other_container):  # noqa: F811
    host, url = _bridge_mirror_or_skip()
    gw = podman_gateway()
    addr = host_address({gw})
    listeners = [Listener(gw)] + ([Listener(addr)] if addr else [])
    h = Home(bluebox_bin)
    try:
        targets = [(li.addr, li.port) for li in listeners]
        targets += [(other_container, 8080), ("169.254.169.254", 80)]
        script = "; ".join(probe(t) for t in targets)
        script += f"; timeout 20 wget -q -O- {url} | head -1"
        name = h.sandbox(f"netpol-{os.getpid()}",
                         f"base: {IMAGE}\nbackend: uml\nram_mib: 256\nnetwork: bridge\n")
        r = h("build", name)
        assert r.returncode == 0, r
        assert b"network bridge (internet only: host, LAN, metadata refused)" in \
            r.stdout + r.stderr, r
        r = h("run", name, "--", "sh", "-c", script, timeout=180)
        out = r.stdout.decode()
        assert r.returncode == 0, r
        print(out)
        assert_refused_at_once(out, targets)
        assert out.rstrip().endswith("-----BEGIN PGP SIGNATURE-----"), out
        for li in listeners:
            assert li.seen == [], (li.addr, li.seen)
    finally:
        for li in listeners:
            li.close()
        h.close()
