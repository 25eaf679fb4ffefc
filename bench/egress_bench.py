#!/usr/bin/python3
"""Egress by name (issue 17): what the enforcing path and the secrets broker cost, side by side
in one run through a real uml guest. Usage: bench/egress_bench.py [--rounds N] [--mib M]
[--bin PATH]

An HTTPS server of the bench (Python ssl, a CA of its own handed to bluebox as
BLUEBOX_UPSTREAM_CA and to the guest's trust store) listens on the host's non-loopback
addresses; one Debian sandbox (the debootstrap test image) boots once per mode, the modes
interleaved (each twice):
* bridge: the server by IP literal through an `allow:` CIDR entry: frames go straight to
  libslirp, the path plain `network: bridge` takes (plain bridge itself no longer reaches the
  host, so this is the same path with the host opened by one entry);
* allowlist: the server by name (`host.containers.internal:PORT`): bluebox's resolver, a fake
  address, a proxy process per connection (a pre-forked worker of the proxy pool) that reads
  the SNI/Host, resolves the name itself and relays;
* intercept: the same name carrying a secret: the proxy process runs the broker, which
  terminates the guest's TLS with a leaf of the sandbox CA and opens its own verified TLS to
  the server.
Measured in the guest (date +%s.%N): one download of M MiB with apt's own HTTPS client
(apt-helper, GnuTLS) per round; connection setup as 50 connect → tiny HTTP request → answer
→ close in one perl process (no process start per connection, the address resolved once), each
timed with clock_gettime; the same for TLS: 50 connections that each send a TLS 1.3
ClientHello and are timed to the first byte of the server's answer (with the broker: its
ServerHello, so the leaf it signs per connection is inside). Medians over every download and
every connection of a mode. Needs root, build/bluebox-vmm,
user-mode-linux and the Debian test image (tests/integration/setup.sh --debian).
"""
import argparse
import datetime
import ipaddress
import os
import shutil
import socket
import ssl
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

REPO = Path(__file__).resolve().parent.parent
NAME = "host.containers.internal"  # podman's /etc/hosts in the VMM's container: the host
IMAGE = os.environ.get("BLUEBOX_TEST_DEBIAN_IMAGE", "localhost/bluebox-test/debian:bookworm")
CONNS = 50
CHUNK = 256 << 10


def host_addrs():
    """The host's global IPv4 addresses (the podman bridge's gateway among them)."""
    out = subprocess.run(["ip", "-o", "-4", "addr", "show", "scope", "global"],
                         capture_output=True, text=True, check=True).stdout
    return [line.split()[3].split("/")[0] for line in out.splitlines()]


def pki(d: Path, addrs):
    now = datetime.datetime.now(datetime.timezone.utc)

    def name(cn):
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (x509.CertificateBuilder().subject_name(name("egress bench CA"))
          .issuer_name(name("egress bench CA")).public_key(ca_key.public_key())
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
    sans = [x509.DNSName(NAME)] + [x509.IPAddress(ipaddress.ip_address(a)) for a in addrs]
    cert = (x509.CertificateBuilder().subject_name(name(NAME)).issuer_name(ca.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(sans), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    pem = serialization.Encoding.PEM
    (d / "ca.pem").write_bytes(ca.public_bytes(pem))
    (d / "server.pem").write_bytes(cert.public_bytes(pem))
    (d / "server.key").write_bytes(key.private_bytes(
        pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))


class Server:
    """HTTP/1.1 on every address: GET /big is `size` bytes, anything else "ok"; TLS or not."""

    def __init__(self, d: Path, tls: bool, size: int):
        self.size = size
        self.sock = socket.create_server(("0.0.0.0", 0), backlog=64)
        self.port = self.sock.getsockname()[1]
        self.ctx = None
        if tls:
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
            c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.ctx:
                c = self.ctx.wrap_socket(c, server_side=True)
            buf = b""
            while True:
                while b"\r\n\r\n" not in buf:
                    more = c.recv(65536)
                    if not more:
                        return
                    buf += more
                head, buf = buf.split(b"\r\n\r\n", 1)
                n = self.size if head.startswith(b"GET /big") else 2
                close = b"HTTP/1.0" in head.split(b"\r\n")[0]
                c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n%s\r\n%s" % (
                    n, b"Connection: close\r\n" if close else b"", b"ok" if n == 2 else b""))
                if n != 2:
                    block = b"x" * CHUNK
                    while n:
                        k = min(n, CHUNK)
                        c.sendall(block[:k])
                        n -= k
                if close:
                    return
        except (OSError, ssl.SSLError):
            pass
        finally:
            c.close()


PERL_CONNECT = r"""
use IO::Socket::INET; use Socket;
my ($name, $port, $n, $hello) = @ARGV;  # with $hello (hex): TLS, timed to the first byte
sub now {  # clock_gettime(CLOCK_MONOTONIC): perl-base has no Time::HiRes
    my $t = pack 'q2', 0, 0;
    syscall(228, 1, $t) == 0 or die "clock_gettime: $!\n";
    my ($s, $ns) = unpack 'q2', $t;
    return $s + $ns / 1e9;
}
my $ip = inet_ntoa(scalar gethostbyname($name) // die "cannot resolve $name\n");
my @ms;
for (1 .. $n) {
    my $t0 = now();
    my $s = IO::Socket::INET->new(PeerAddr => $ip, PeerPort => $port, Proto => 'tcp')
        or die "connect $ip:$port: $!\n";
    if ($hello) {  # a ClientHello; the server's first flight (ServerHello...) ends setup
        print $s pack('H*', $hello);
        my $got = sysread($s, my $r, 5);
        $got && substr($r, 0, 1) eq "\x16"
            or die "no ServerHello (", $got // "error $!", ": ", unpack('H*', $r // ''), ")\n";
    } else {
        print $s "GET /small HTTP/1.0\r\nHost: $name\r\n\r\n";
        local $/; my $r = <$s>;
        die "bad answer: $r\n" unless defined $r && $r =~ /ok\z/;
    }
    push @ms, sprintf '%.3f', (now() - $t0) * 1000;
}
print $hello ? "tls" : "setup", " @ms\n";
"""


def client_hello(sni):
    """A TLS 1.3 ClientHello naming sni (x25519, ECDSA/RSA-PSS), as one record, in hex."""
    def ext(t, body):
        return struct.pack(">HH", t, len(body)) + body
    n = sni.encode()
    exts = (ext(0, struct.pack(">HBH", len(n) + 3, 0, len(n)) + n)
            + ext(10, struct.pack(">HH", 2, 0x1d))
            + ext(13, struct.pack(">HHHHH", 8, 0x0403, 0x0804, 0x0503, 0x0805))
            + ext(43, b"\x02\x03\x04")
            + ext(51, struct.pack(">HHH", 36, 0x1d, 32) + os.urandom(32)))
    body = (b"\x03\x03" + os.urandom(32) + b"\x20" + os.urandom(32)
            + struct.pack(">HHH", 4, 0x1301, 0x1302) + b"\x01\x00"
            + struct.pack(">H", len(exts)) + exts)
    hs = b"\x01" + struct.pack(">I", len(body))[1:] + body
    return (b"\x16\x03\x01" + struct.pack(">H", len(hs)) + hs).hex()


def guest_script(host, tls_port, plain_port, rounds):
    url = f"https://{host}:{tls_port}"
    hello = client_hello(NAME)
    return f"""set -e
mkdir -p /etc/ssl/certs
cat >> /etc/ssl/certs/ca-certificates.crt
cat > /tmp/connect.pl <<'EOF'
{PERL_CONNECT}
EOF
get() {{
    /usr/lib/apt/apt-helper -o Acquire::https::CaInfo=/etc/ssl/certs/ca-certificates.crt \\
        -o Acquire::Retries=0 download-file "$1" /tmp/dl >/tmp/get.out 2>&1 ||
        {{ cat /tmp/get.out; exit 1; }}
    rm -f /tmp/dl
}}
get {url}/small
perl /tmp/connect.pl {host} {plain_port} {CONNS} >/dev/null
perl /tmp/connect.pl {host} {tls_port} 5 {hello} >/dev/null
for r in $(seq {rounds}); do
    a=$(date +%s.%N); get {url}/big; b=$(date +%s.%N); echo "big $a $b"
    perl /tmp/connect.pl {host} {plain_port} {CONNS}
    perl /tmp/connect.pl {host} {tls_port} {CONNS} {hello}
done
"""


def bluefile(mode, addrs, tls_port, plain_port):
    lines = [f"base: {IMAGE}", "backend: uml", "ram_mib: 512", "network: bridge", "allow:"]
    lines += [f"  - {a}/32" for a in addrs]
    if mode != "bridge":
        lines += [f"  - {NAME}:{tls_port}", f"  - {NAME}:{plain_port}"]
    if mode == "intercept":
        lines += ["secrets:", "  - name: BENCH_TOKEN", "    from_env: BB_BENCH_TOKEN",
                  f"    hosts: [{NAME}]"]
    return "\n".join(lines) + "\n"


def run_mode(bb, env, home, mode, addrs, tls, plain, rounds, ca):
    bf = home / "sandboxes" / "eb" / "Bluefile"
    bf.write_text(bluefile(mode, addrs, tls.port, plain.port))
    r = subprocess.run([bb, "build", "eb"], env=env, capture_output=True, text=True,
                       timeout=900)
    if r.returncode != 0:
        sys.exit(f"egress_bench: build failed ({mode}): {r.stderr}")
    host = addrs[0] if mode == "bridge" else NAME
    r = subprocess.run([bb, "run", "eb", "--", "sh", "-c",
                        guest_script(host, tls.port, plain.port, rounds)],
                       env=env, input=ca, capture_output=True, timeout=1800)
    out = r.stdout.decode(errors="replace")
    if r.returncode != 0:
        sys.exit(f"egress_bench: run failed ({mode}): {out}{r.stderr.decode(errors='replace')}")
    big, setup, tls = [], [], []
    for ln in out.splitlines():
        w = ln.split()
        if len(w) == 3 and w[0] == "big":
            big.append(float(w[2]) - float(w[1]))
        elif len(w) == CONNS + 1 and w[0] in ("setup", "tls"):
            (setup if w[0] == "setup" else tls).extend(float(x) for x in w[1:])
    if len(big) != rounds:
        sys.exit(f"egress_bench: no timings ({mode}: {out!r})")
    return big, setup, tls


def quartiles(v):
    q = statistics.quantiles(v, n=4)
    return f"{q[0]:.2f}-{q[2]:.2f}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--mib", type=int, default=64)
    ap.add_argument("--bin", default=str(REPO / "build" / "bluebox"))
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bluebox-egress-bench-", dir="/var/tmp"))
    tmp.chmod(0o755)
    addrs = host_addrs()
    pki(tmp, addrs)
    size = a.mib << 20
    tls, plain = Server(tmp, True, size), Server(tmp, False, size)
    home = tmp / "home"
    env = dict(os.environ, BLUEBOX_HOME=str(home), BLUEBOX_UPSTREAM_CA=str(tmp / "ca.pem"),
               BB_BENCH_TOKEN="bench-secret-value")
    ca = (tmp / "ca.pem").read_bytes()
    modes = ("bridge", "allowlist", "intercept")
    try:
        subprocess.run([a.bin, "new", "eb"], env=env, check=True, capture_output=True)
        res = {m: ([], [], []) for m in modes}
        for _ in range(2):  # interleaved: two boots per mode
            for m in modes:
                for acc, got in zip(res[m], run_mode(a.bin, env, home, m, addrs, tls, plain,
                                                     a.rounds, ca)):
                    acc.extend(got)
        med = {m: tuple(statistics.median(x) for x in v) for m, v in res.items()}
        print(f"{a.mib} MiB over HTTPS from the bench's server on the host (apt-helper in the "
              f"guest); {len(res['bridge'][0])} downloads per mode; setup: {CONNS} connections "
              f"per round, plain HTTP to the answer and TLS to the first byte (perl); medians")
        print("load average at the end: " + " ".join(f"{x:.2f}" for x in os.getloadavg()))
        print(f"{'mode':<12}{'MiB/s':>9}{'x bridge':>10}{'ms/conn':>10}{'added ms':>10}"
              f"{'ms/tls':>10}{'added ms':>10}")
        for m in modes:
            mibs = a.mib / med[m][0]
            ratio = med["bridge"][0] / med[m][0]
            added = med[m][1] - med["bridge"][1]
            added_https = med[m][2] - med["bridge"][2]
            print(f"{m:<12}{mibs:>9.1f}{ratio:>10.2f}{med[m][1]:>10.2f}{added:>+10.2f}"
                  f"{med[m][2]:>10.2f}{added_https:>+10.2f}")
        print("quartiles (ms), plain HTTP / TLS: " + "; ".join(
            f"{m} {quartiles(res[m][1])} / {quartiles(res[m][2])}" for m in modes))
    finally:
        subprocess.run([a.bin, "destroy", "eb", "--data", "-y"], env=env, capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
