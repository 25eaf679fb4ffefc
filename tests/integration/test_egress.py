"""network: bridge with an allowlist on uml (src/net/egress_engine.c): bluebox's own resolver answers
allowed names with fake addresses and denied ones with NXDOMAIN (never forwarded upstream: a
DNS spy as the container's nameserver sees the engine's own lookups, never a denied name); an
HTTP GET by name to the machine's Debian mirror works when the mirror is allowed and fails fast
when it is not; a Host or TLS SNI naming another name than the one resolved, an IP literal, UDP
to an outside address, and a name resolving into the host's range without a CIDR entry are all
refused promptly (a raw TCP client to a NAME:PORT entry gets through) and logged as JSON
lines. Each case is a Bluefile with `allow:`; the log is the sandbox's connection log,
$BLUEBOX_HOME/logs/net/<name>.log, as `bluebox logs <name> --net` reads it. Needs root."""
import json
import os
import selectors
import socket
import stat
import struct
import subprocess
import threading
import time
import uuid

import pytest

from test_podman_build import env, podman  # noqa: F401  (session fixture + helper)
from test_runtime import IMAGE, UML, Home, _bridge_mirror_or_skip

HOSTS_NAME = "host.containers.internal"  # podman's /etc/hosts: the bridge gateway (the host)


def npm_registry_host():
    """The npm registry's host from npm's own configuration (never written down here)."""
    try:
        out = subprocess.run(["npm", "config", "get", "registry"], capture_output=True,
                             text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return None
    host = out.split("//", 1)[-1].split("/", 1)[0].split(":", 1)[0]
    return host or None


def podman_gateway():
    return podman("network", "inspect", "podman", "--format",
                  "{{range .Subnets}}{{.Gateway}}{{end}}").stdout.strip()


class Server:
    """A TCP server on addr: answers an HTTP request with 'hello-egress', records what each
    connection sent first."""

    def __init__(self, addr):
        self.sock = socket.create_server((addr, 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.seen = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.loop)
        self.thread.start()

    def loop(self):
        while not self.stop.is_set():
            try:
                c, _ = self.sock.accept()
            except OSError:
                continue
            with c:
                c.settimeout(3)
                try:
                    data = c.recv(4096)
                except OSError:
                    data = b""
                self.seen.append(data)
                if data.startswith(b"GET"):
                    c.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 12\r\n\r\nhello-egress")
                elif data.startswith(b"hello-raw"):
                    c.sendall(b"raw-ok\n")

    def close(self):
        self.stop.set()
        self.thread.join()
        self.sock.close()


def client_hello(sni):
    """A TLS 1.2/1.3 ClientHello naming sni, as a record."""
    n = sni.encode()
    ext = struct.pack(">HHHH", 10, 4, 2, 0x1d)
    ext += struct.pack(">HHHBH", 0, len(n) + 5, len(n) + 3, 0, len(n)) + n
    body = (b"\x03\x03" + bytes(32) + b"\x00" + struct.pack(">HH", 2, 0x1301) + b"\x01\x00"
            + struct.pack(">H", len(ext)) + ext)
    hs = b"\x01" + struct.pack(">I", len(body))[1:] + body
    return b"\x16\x03\x01" + struct.pack(">H", len(hs)) + hs


def timed(tag, cmd):
    """Shell running cmd, printing its output and 'took TAG START END' by /proc/uptime."""
    return (f"a=$(cut -d' ' -f1 /proc/uptime); {{ {cmd} ; }} 2>&1 | head -c 300; echo; "
            f"b=$(cut -d' ' -f1 /proc/uptime); echo \"took {tag} $a $b\"")


def took(out, tag):
    lines = [ln for ln in out.splitlines() if ln.startswith(f"took {tag} ")]
    assert len(lines) == 1, out
    _, _, a, b = lines[0].split()
    return float(b) - float(a)


class DnsSpy:
    """A DNS forwarder on addr:53 that records every name asked, passing queries on to the
    host's own resolver: as the container's only nameserver, it sees whatever leaves.
    answers: names it answers itself (an IPv4 address each; no AAAA), for test servers."""

    def __init__(self, addr, answers=None):
        self.answers = answers or {}
        ns = [ln.split()[1] for ln in open("/etc/resolv.conf") if ln.startswith("nameserver")]
        self.upstream = ns[0]
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        # Another test (a parallel pytest worker, or another session on this host) may hold
        # the port for a few seconds: wait for it rather than fail (as test_agent's spy does).
        deadline = time.monotonic() + 90
        while True:
            try:
                self.sock.bind((addr, 53))
                break
            except OSError:
                if time.monotonic() > deadline:
                    self.sock.close()
                    raise
                time.sleep(0.5)
        self.sock.settimeout(0.2)
        self.names = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.loop)
        self.thread.start()

    @staticmethod
    def qname(m):
        labels, off = [], 12
        while off < len(m) and m[off]:
            labels.append(m[off + 1:off + 1 + m[off]].decode(errors="replace"))
            off += 1 + m[off]
        return ".".join(labels).lower()

    @staticmethod
    def answer(m, addr):
        """The reply to query m: one A record for addr (an empty answer to other types)."""
        end = 12
        while m[end]:
            end += 1 + m[end]
        question = m[12:end + 5]
        qtype = struct.unpack(">H", m[end + 1:end + 3])[0]
        rr = b""
        if qtype == 1:
            rr = struct.pack(">HHHIH", 0xC00C, 1, 1, 60, 4) + socket.inet_aton(addr)
        return (m[:2] + struct.pack(">HHHHH", 0x8180, 1, 1 if rr else 0, 0, 0) + question
                + rr)

    def loop(self):
        while not self.stop.is_set():
            try:
                m, peer = self.sock.recvfrom(4096)
            except OSError:
                continue
            name = self.qname(m)
            self.names.append(name)
            if name in self.answers:
                self.sock.sendto(self.answer(m, self.answers[name]), peer)
                continue
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as up:
                up.settimeout(3)
                try:
                    up.sendto(m, (self.upstream, 53))
                    self.sock.sendto(up.recv(4096), peer)
                except OSError:
                    pass

    def close(self):
        self.stop.set()
        self.thread.join()
        self.sock.close()


def spied_containers_conf(tmp_path, spy_addr):
    """CONTAINERS_CONF with the spy as the containers' only nameserver."""
    text = open(os.environ["CONTAINERS_CONF"]).read()
    text = text.replace("[containers]\n", f'[containers]\ndns_servers = ["{spy_addr}"]\n', 1)
    path = tmp_path / "containers-spy.conf"
    path.write_text(text)
    return str(path)


def bluefile(allow):
    """A bridge sandbox's Bluefile; allow: a list of entries, or None for plain bridge."""
    text = f"base: {IMAGE}\nbackend: uml\nram_mib: 256\nnetwork: bridge\n"
    if allow is not None:
        text += "allow:\n" + "".join(f'  - "{a}"\n' for a in allow)
    return text


@pytest.fixture
def sandbox(env, bluebox_bin):  # noqa: F811
    """run(allow, script): the Bluefile given `allow` (rebuilt: a cached image, no podman
    build), the script run in the guest; its output and the connection log's new lines."""
    h = Home(bluebox_bin)
    name = h.sandbox(f"egress-{os.getpid()}", bluefile([]))
    log = h.dir / "home" / "logs" / "net" / f"{name}.log"

    def run(allow, script, timeout=180, extra=None):
        (h.dir / "home" / "sandboxes" / name / "Bluefile").write_text(bluefile(allow))
        r = h("build", name, env=extra)
        assert r.returncode == 0, r
        start = log.stat().st_size if log.exists() else 0
        r = h("run", name, "--", "sh", "-c", script, timeout=timeout, env=extra)
        assert r.returncode == 0, r
        assert b"changed since it was built" not in r.stderr, r
        out = r.stdout.decode()
        print(out)
        if allow is None:
            return out, []
        assert stat.S_IMODE(log.stat().st_mode) == 0o600
        with open(log) as f:
            f.seek(start)
            entries = [json.loads(ln) for ln in f.read().splitlines()]
        # `bluebox logs --net` reads the same file: every entry of this run is one of its rows
        shown = h("logs", name, "--net", "-n", "1000")
        assert shown.returncode == 0, shown
        rows = shown.stdout.decode()
        assert all(e["name"][:40] in rows for e in entries if e.get("name")), rows
        return out, entries

    yield run
    h.close()


@UML
def test_allowlist_by_name_dns_http_literal_udp(sandbox):
    host, url = _bridge_mirror_or_skip()
    other = npm_registry_host() or "denied.invalid"
    real = socket.gethostbyname(host)
    script = "; ".join([
        f"nslookup {host} 2>&1 | grep Address: | tail -1",
        f"nslookup {other} 2>&1 | grep -c NXDOMAIN",
        timed("get", f"timeout 20 wget -q -O- {url} | head -1"),
        timed("literal", f"timeout 10 wget -q -O- http://{real}/"),
        # UDP to an outside address: a DNS query straight to it, around our resolver
        timed("udp", f"timeout 5 nslookup {host} {real}"),
        timed("denied", f"timeout 10 wget -q -O- http://{other}/"),
    ])
    out, log = sandbox([host], script)
    assert "Address: 10.0.2.1" in out, out  # the fake address, not the mirror's
    assert "-----BEGIN PGP SIGNATURE-----" in out, out
    for tag in ("literal", "denied"):
        assert took(out, tag) < 2.0, (tag, out)
    assert out.count("Connection refused") >= 1, out  # the IP literal's reset
    assert "bad address" in out, out  # the denied name does not resolve
    dns = [e for e in log if e.get("kind") == "dns"]
    assert {"name": host, "decision": "allow"}.items() <= dns[0].items(), log
    assert any(e["name"] == other and e["decision"] == "deny" for e in dns), log
    tcp = [e for e in log if e.get("kind") == "tcp"]
    assert tcp and tcp[0]["decision"] == "allow" and tcp[0]["addr"] == real, log
    assert tcp[0]["bytes_down"] > 0 and tcp[0]["port"] == 80, log
    frames = [e for e in log if e.get("kind") == "frame"]
    assert any(e["name"] == real and e["reason"] == "tcp" for e in frames), log
    assert any(e["name"] == real and e["reason"] == "udp" for e in frames), log
    # a denied name is never looked up upstream: no allowed DNS entry or connection for it
    assert not any(e.get("name") == other and e["decision"] == "allow" for e in log), log

    # the reverse: only the other name allowed; the mirror fails fast and is logged
    out, log = sandbox([other], timed("mirror", f"timeout 20 wget -q -O- {url} | head -1"))
    assert "-----BEGIN PGP SIGNATURE-----" not in out, out
    assert took(out, "mirror") < 2.0, out
    assert any(e.get("name") == host and e["decision"] == "deny" for e in log), log


@UML
def test_host_and_sni_must_name_the_resolved_name(sandbox):
    gw = podman_gateway()
    srv = Server(gw)
    try:
        port = srv.port
        good = client_hello(HOSTS_NAME).hex()
        evil = client_hello("evil.example").hex()

        def tls(hexdata):  # busybox printf has no \x: octal escapes
            octal = "".join(f"\\{int(hexdata[i:i + 2], 16):03o}" for i in range(0, len(hexdata), 2))
            return f"printf '{octal}' | timeout 5 nc {HOSTS_NAME} {port}"

        http = "printf 'GET / HTTP/1.0\\r\\nHost: %s\\r\\n\\r\\n' | timeout 5 nc " + \
            f"{HOSTS_NAME} {port}"
        script = "; ".join([
            timed("host-ok", http % HOSTS_NAME),
            timed("host-evil", http % "evil.example"),
            timed("sni-evil", tls(evil)),
            timed("sni-ok", tls(good)),
            # other TCP to a NAME:PORT entry: the name itself decides (a raw client, no proxy)
            timed("raw", f"{{ echo hello-raw; sleep 1; }} | timeout 5 nc {HOSTS_NAME} {port}"),
        ])
        out, log = sandbox([f"{HOSTS_NAME}:{port}", f"{gw}/32"], script)
        assert out.count("hello-egress") == 1, out
        assert "raw-ok" in out, out
        for tag in ("host-evil", "sni-evil"):
            assert took(out, tag) < 2.0, (tag, out)
        assert not any(b"evil.example" in s for s in srv.seen), srv.seen
        assert any(s.startswith(b"\x16\x03") for s in srv.seen), srv.seen  # the good SNI got in
        tcp = [e for e in log if e.get("kind") == "tcp"]
        reasons = {e.get("seen"): (e["decision"], e.get("reason", "")) for e in tcp}
        assert reasons["evil.example"][0] == "deny", log
        assert reasons[HOSTS_NAME][0] == "allow", log
        assert any("Host is another name" in e.get("reason", "") for e in tcp), log
        assert any("SNI) is another name" in e.get("reason", "") for e in tcp), log

        # without the CIDR entry the name resolves into the host's range: refused (rebinding)
        seen = len(srv.seen)
        out, log = sandbox([f"{HOSTS_NAME}:{port}"], timed("rebind", http % HOSTS_NAME))
        assert "hello-egress" not in out and took(out, "rebind") < 2.0, out
        assert len(srv.seen) == seen, srv.seen
        tcp = [e for e in log if e.get("kind") == "tcp"]
        assert tcp and tcp[0]["decision"] == "deny" and tcp[0]["addr"] == gw, log
        assert "only a CIDR entry may open" in tcp[0]["reason"], log
    finally:
        srv.close()


@UML
def test_denied_names_never_reach_the_upstream_resolver(sandbox, tmp_path):
    """A DNS spy as the container's nameserver: with the mirror allowed, the spy sees the
    mirror's name (bluebox-vmm resolving it for the connection: the spy is in the path) and
    never the denied names the guest asked for; plain bridge (no list) forwards the guest's
    query, and the spy sees it (the test can see a leak)."""
    host, url = _bridge_mirror_or_skip()
    gw = podman_gateway()
    spy = DnsSpy(gw)
    try:
        conf = {"CONTAINERS_CONF": spied_containers_conf(tmp_path, gw)}
        secret = f"s{uuid.uuid4().hex[:12]}.exfil.invalid"
        script = (f"nslookup {secret} >/dev/null 2>&1; nslookup x-{secret} >/dev/null 2>&1; "
                  f"timeout 20 wget -q -O- {url} | head -1")
        out, log = sandbox([host], script, extra=conf)
        assert "-----BEGIN PGP SIGNATURE-----" in out, out
        assert host in spy.names, spy.names  # the engine's own lookup went through the spy
        assert not any("exfil" in n for n in spy.names), spy.names
        assert sum(e.get("kind") == "dns" and e["decision"] == "deny" for e in log) >= 2, log

        # control: plain bridge forwards the guest's query upstream, where the spy sees it
        out, _ = sandbox(None, f"nslookup c-{secret} >/dev/null 2>&1; echo done", extra=conf)
        assert f"c-{secret}" in spy.names, spy.names
    finally:
        spy.close()


@UML
def test_proxy_children_are_bounded(sandbox):
    """70 connections held open at once to an allowed NAME:PORT: at most 64 proxy children
    serve, the rest are refused at once and logged; afterwards new connections work again."""
    gw = podman_gateway()
    srv = socket.create_server((gw, 0))
    port = srv.getsockname()[1]
    held, stop = [], threading.Event()

    def accept():  # hold each connection until its client is done sending, then close it
        sel = selectors.DefaultSelector()
        sel.register(srv, selectors.EVENT_READ)
        while not stop.is_set():
            for key, _ in sel.select(0.2):
                if key.fileobj is srv:
                    c = srv.accept()[0]
                    held.append(c)
                    sel.register(c, selectors.EVENT_READ)
                    continue
                try:
                    data = key.fileobj.recv(4096)
                except OSError:
                    data = b""
                if not data:
                    sel.unregister(key.fileobj)
                    key.fileobj.close()
    t = threading.Thread(target=accept)
    t.start()
    try:
        # one process per connection, reading a fifo nobody writes to, so it stays open until
        # killed: a uml guest on a slow host starts a process in ~0.2 s, and all 70 must be
        # open at once (sleeps of a fixed length ran out before the last ones connected)
        script = (f"mkfifo /tmp/hold; exec 3<>/tmp/hold; pids=; for i in $(seq 70); do "
                  f"nc {HOSTS_NAME} {port} <&3 >/dev/null 2>&1 & pids=\"$pids $!\"; done; "
                  f"sleep 6; echo open; kill $pids; wait; "
                  f"{{ echo again; sleep 1; }} | timeout 5 nc {HOSTS_NAME} {port}; echo done")
        out, log = sandbox([f"{HOSTS_NAME}:{port}", f"{gw}/32"], script)
        assert "done" in out, out
        refused = [e for e in log if e.get("reason") == "too many connections at once"]
        allowed = [e for e in log if e.get("kind") == "tcp" and e["decision"] == "allow"]
        # at most 64 at once: the rest refused (a child still being reaped may hold a slot)
        assert len(refused) >= 70 - 64 and len(allowed) + len(refused) == 71, log
        assert len(allowed) >= 60 and len(held) == len(allowed), (len(held), log)
        tcp = [e for e in log if e.get("kind") == "tcp"]
        assert tcp[-1]["decision"] == "allow", log  # afterwards: served again
    finally:
        stop.set()
        t.join()
        for c in held:
            c.close()
        srv.close()
