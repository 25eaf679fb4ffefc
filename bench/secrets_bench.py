#!/usr/bin/python3
"""Throughput and connection-setup cost of the secrets broker (issue 17): secrets_relay()
(src/net/tlsbroker.c) driven by build/tlsbroker_driver, against the same download without it.

    bench/secrets_bench.py [--build DIR] [--runs N] [--mib M]

An HTTP/1.1 server on 127.0.0.1 (Python ssl, a CA of its own) serves M MiB; a Python client
downloads it (1) straight from the server over TLS, (2) through the broker, which terminates
the client's TLS with a certificate of the sandbox CA, rewrites the request head and opens
its own verified TLS to the server; the same for plain HTTP (3, 4: the broker's plain path,
only the head rewriter). Setup: connect → first byte of a 2-byte response, TLS direct vs
broker (two handshakes, a leaf signed per connection). Runs interleaved; medians.
The driver relays connections one after another in one process; the egress proxy forks a
child per connection (not measured here)."""
import argparse
import datetime
import json
import socket
import ssl
import statistics
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

REPO = Path(__file__).resolve().parent.parent
PH = "BLUEBOX_SECRET_" + "0123456789abcdef" * 2
CHUNK = 256 << 10


def pki(d: Path):
    now = datetime.datetime.now(datetime.timezone.utc)
    name = lambda cn: x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])  # noqa: E731
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (x509.CertificateBuilder().subject_name(name("bench CA")).issuer_name(name("bench CA"))
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now - datetime.timedelta(hours=1))
          .not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder().subject_name(name("api.test")).issuer_name(ca.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("api.test")]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    pem = serialization.Encoding.PEM
    (d / "ca.pem").write_bytes(ca.public_bytes(pem))
    (d / "server.pem").write_bytes(cert.public_bytes(pem))
    (d / "server.key").write_bytes(key.private_bytes(pem, serialization.PrivateFormat.PKCS8,
                                                     serialization.NoEncryption()))


class Server:
    def __init__(self, d: Path, tls: bool, size: int):
        self.size = size
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.ctx = None
        if tls:
            self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            self.ctx.load_cert_chain(d / "server.pem", d / "server.key")
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        while True:
            c, _ = self.sock.accept()
            threading.Thread(target=self.one, args=(c,), daemon=True).start()

    def one(self, c):
        try:
            if self.ctx:
                c = self.ctx.wrap_socket(c, server_side=True)
            buf = b""
            while b"\r\n\r\n" not in buf:
                buf += c.recv(65536)
            n = self.size if buf.startswith(b"GET /big") else 2
            head = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % n
            if n == 2:  # one write: no Nagle/delayed-ACK wait in the setup figure
                c.sendall(head + b"ok")
                n = 0
            else:
                c.sendall(head)
            block = b"x" * CHUNK
            while n:
                k = min(n, CHUNK)
                c.sendall(block[:k])
                n -= k
            c.recv(1)
        except (OSError, ssl.SSLError):
            pass
        finally:
            c.close()


def fetch(port, cafile, path, tls):
    """(seconds to the first byte, seconds to the last, bytes)."""
    t0 = time.perf_counter()
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if tls:
        s = ssl.create_default_context(cafile=cafile).wrap_socket(s, server_hostname="api.test")
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: api.test\r\nAuthorization: Bearer {PH}\r\n\r\n"
              .encode())
    buf = s.recv(65536)
    t1 = time.perf_counter()
    head, _, body = buf.partition(b"\r\n\r\n")
    want = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
    got = len(body)
    while got < want:
        got += len(s.recv(1 << 20))
    t2 = time.perf_counter()
    s.close()
    return t1 - t0, t2 - t0, got


def driver(build: Path, d: Path, port: int, mode: str, n: int):
    secrets = [{"name": "T", "placeholder": PH, "value": "real-value", "hosts": ["api.test"]}]
    (d / "s.json").write_text(json.dumps(secrets))
    p = subprocess.Popen([str(build / "tlsbroker_driver"), str(d / "s.json"), str(d / "ca.pem"),
                          str(d / f"sandbox-{mode}.pem"), str(port), mode, str(n), "api.test"],
                         stdout=subprocess.PIPE, text=True)
    return p, int(p.stdout.readline())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=str(REPO / "build"))
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--mib", type=int, default=256)
    a = ap.parse_args()
    d = Path(tempfile.mkdtemp(prefix="secrets-bench."))
    pki(d)
    size = a.mib << 20
    tls_srv, plain_srv = Server(d, True, size), Server(d, False, size)
    btls, btls_port = driver(Path(a.build), d, tls_srv.port, "tls", 2 * a.runs + 1)
    bplain, bplain_port = driver(Path(a.build), d, plain_srv.port, "plain", a.runs + 1)
    up_ca, sb_tls = str(d / "ca.pem"), str(d / "sandbox-tls.pem")
    r = {k: [] for k in ("tls", "broker", "plain", "relay", "setup_tls", "setup_broker")}
    # warm-up
    fetch(tls_srv.port, up_ca, "/small", True)
    fetch(btls_port, sb_tls, "/small", True)
    fetch(bplain_port, None, "/small", False)
    for _ in range(a.runs):
        r["tls"].append(size / fetch(tls_srv.port, up_ca, "/big", True)[1])
        r["broker"].append(size / fetch(btls_port, sb_tls, "/big", True)[1])
        r["plain"].append(size / fetch(plain_srv.port, None, "/big", False)[1])
        r["relay"].append(size / fetch(bplain_port, None, "/big", False)[1])
        r["setup_tls"].append(fetch(tls_srv.port, up_ca, "/small", True)[0])
        r["setup_broker"].append(fetch(btls_port, sb_tls, "/small", True)[0])
    btls.wait(timeout=60)
    bplain.wait(timeout=60)
    m = {k: statistics.median(v) for k, v in r.items()}
    mib = 1 << 20
    print(f"median of {a.runs} runs, {a.mib} MiB per download, 127.0.0.1")
    print(f"{'path':44} {'MiB/s':>9} {'ratio':>7}")
    print(f"{'HTTPS direct (client TLS to the server)':44} {m['tls'] / mib:9.1f}")
    print(f"{'HTTPS through the broker (interception)':44} {m['broker'] / mib:9.1f} "
          f"{m['broker'] / m['tls']:6.2f}x")
    print(f"{'HTTP direct':44} {m['plain'] / mib:9.1f}")
    print(f"{'HTTP through the broker (head rewriter)':44} {m['relay'] / mib:9.1f} "
          f"{m['relay'] / m['plain']:6.2f}x")
    print(f"{'setup to first byte, HTTPS direct (ms)':44} {m['setup_tls'] * 1e3:9.2f}")
    print(f"{'setup to first byte, broker (ms)':44} {m['setup_broker'] * 1e3:9.2f} "
          f"{(m['setup_broker'] - m['setup_tls']) * 1e3:+6.2f}")


if __name__ == "__main__":
    main()
