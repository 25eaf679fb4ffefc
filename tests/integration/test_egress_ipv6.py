"""IPv6 out of a uml guest ("IPv6 filtered the same as IPv4"), with an `allow:` list
and with plain `network: bridge`.

The uml guest kernel has no IPv6 stack (Debian's user-mode-linux builds it as a module the
guest cannot load), so a program's v6 socket fails at once; that is the guest's word, not the
enforcement. What a hostile guest root can still do is write IPv6 frames itself on a packet
socket, and those reach bluebox-vmm. So the guest (perl, in the Debian test image) sends raw
Ethernet frames: a TCP SYN and a UDP datagram to an outside IPv6 address, and as the control
that raw frames do get answered, an IPv4 SYN to a private-range address (refused with a reset
on both paths). Checked:
* with `allow:` the v6 frames are refused the way v4 ones are: the SYN gets a TCP reset and
  the datagram an ICMPv6 administratively prohibited (nothing else comes back), and both are
  logged (`kind: frame`, the address, tcp/udp), and `bluebox logs --net` shows them; the resolver answers an
  AAAA query for the allowed name with no address (the name's real v6 address never reaches
  the guest) and a denied name's AAAA with NXDOMAIN, logged;
* on plain bridge nothing comes back for the v6 frames either (libslirp has no IPv6 here).
Needs root, podman, uml and BLUEBOX_TEST_DEBIAN=1."""
import json
import os

from test_egress_registries import DEBIAN, apt_hosts
from test_podman_build import env  # noqa: F401  (session fixture: setup.sh, --debian)
from test_runtime import UML, Home

V6 = "2001:db8::1"  # an outside address (documentation prefix: routed nowhere, refused anyway)
PRIVATE = "192.168.255.1"  # the control: a private-range address, refused on both paths

# Raw frames from the guest's only interface to the VMM's MAC (learnt from the ARP table after
# one DNS query): each probe is sent once, then every frame arriving within 2 s is matched.
PERL_FRAMES = r"""
use strict; use Socket qw(:DEFAULT inet_pton);
my ($v6, $priv, $qname, $denied) = @ARGV;
my ($if) = grep { $_ ne 'lo' } map { s{.*/}{}r } glob '/sys/class/net/*';
sub slurp { open my $f, '<', $_[0] or die "$_[0]: $!"; local $/; my $x = <$f>; $x =~ s/\s+$//; $x }
my $ifindex = slurp("/sys/class/net/$if/ifindex");
my $mac = pack 'H12', slurp("/sys/class/net/$if/address") =~ s/://gr;

# DNS over UDP to the stack's resolver: (rcode, answers) for qtype AAAA
sub aaaa {
    my ($name) = @_;
    socket(my $u, AF_INET, SOCK_DGRAM, 0) or die "udp: $!";
    my $q = pack('n6', 0x1234, 0x0100, 1, 0, 0, 0)
        . join('', map { chr(length) . $_ } split /\./, $name) . "\0" . pack('n2', 28, 1);
    send($u, $q, 0, pack_sockaddr_in(53, inet_aton('10.0.2.3'))) or die "send: $!";
    my $rin = ''; vec($rin, fileno($u), 1) = 1;
    select(my $r = $rin, undef, undef, 5) or return 'timeout';
    recv($u, my $a, 4096, 0);
    my ($id, $flags, $qd, $an) = unpack 'n4', $a;
    return sprintf 'rcode=%d answers=%d', $flags & 15, $an;
}
print "aaaa-allowed ", aaaa($qname), "\n";
print "aaaa-denied ", aaaa($denied), "\n";

my $gw;
open my $arp, '<', '/proc/net/arp' or die;
while (<$arp>) { $gw = $1 if /^10\.0\.2\.[23]\s+\S+\s+0x2\s+(\S+)/ }
die "no ARP entry for the stack\n" unless $gw;
$gw = pack 'H12', $gw =~ s/://gr;

sub csum {
    my $s = 0; my $d = $_[0]; $d .= "\0" if length($d) % 2;
    $s += $_ for unpack 'n*', $d;
    $s = ($s & 0xffff) + ($s >> 16) while $s >> 16;
    return ~$s & 0xffff;
}
my $src6 = inet_pton(AF_INET6, 'fe80::5055:aff:fe00:20f') // die;
my $dst6 = inet_pton(AF_INET6, $v6) // die;
sub l4 {  # a TCP SYN or a UDP datagram, checksummed over the pseudo-header ($pseudo)
    my ($proto, $pseudo_fn) = @_;
    my $seg = $proto == 6
        ? pack('n2 N2 C2 n3', 40001, 443, 12345, 0, 5 << 4, 0x02, 64240, 0, 0)
        : pack('n4', 40002, 53, 8 + 4, 0) . 'ping';
    my $c = csum($pseudo_fn->(length $seg) . $seg);
    substr($seg, $proto == 6 ? 16 : 6, 2) = pack 'n', $c;
    return $seg;
}
sub v6 {
    my ($proto) = @_;
    my $seg = l4($proto, sub { $src6 . $dst6 . pack('N', $_[0]) . "\0\0\0" . chr($proto) });
    return $gw . $mac . pack('n', 0x86dd)
        . pack('N n C C', 6 << 28, length $seg, $proto, 64) . $src6 . $dst6 . $seg;
}
my $src4 = inet_aton('10.0.2.15'); my $dst4 = inet_aton($priv);
my $tcp4 = l4(6, sub { $src4 . $dst4 . pack('C C n', 0, 6, $_[0]) });
my $ip4 = pack('C C n n n C C n', 0x45, 0, 20 + length $tcp4, 1, 0, 64, 6, 0) . $src4 . $dst4;
substr($ip4, 10, 2) = pack 'n', csum($ip4);
my $v4 = $gw . $mac . pack('n', 0x0800) . $ip4 . $tcp4;

socket(my $p, 17, SOCK_RAW, unpack('S', pack('n', 3))) or die "AF_PACKET: $!";
my $ll = pack('S n i S C C a8', 17, 3, $ifindex, 0, 0, 6, $gw);
bind($p, $ll) or die "bind: $!";
for ([v6 => v6(6)], [v6 => v6(17)], [v4 => $v4]) {
    send($p, $_->[1], 0, $ll) or die "send $_->[0]: $!";
}
my ($rst4, $from6, $rst6, $adm6) = (0, 0, 0, 0);
my $end = time + 2;
while ((my $left = $end - time) > 0) {
    my $rin = ''; vec($rin, fileno($p), 1) = 1;
    select(my $r = $rin, undef, undef, $left) or last;
    recv($p, my $f, 65536, 0);
    next if length $f < 34 || substr($f, 6, 6) eq $mac;  # our own frames, seen outgoing
    my $type = unpack 'n', substr($f, 12, 2);
    if ($type == 0x86dd && length $f >= 54) {
        if (substr($f, 22, 16) eq $dst6) {  # from the refused address: which answer
            $from6++;
            my $nh = unpack 'C', substr($f, 20, 1);
            $rst6++ if $nh == 6 && length $f >= 74 && (unpack('C', substr($f, 67, 1)) & 4);
            $adm6++ if $nh == 58 && substr($f, 54, 2) eq "\x01\x01";
        }
    } elsif ($type == 0x0800 && substr($f, 26, 4) eq $dst4 && unpack('C', substr($f, 23, 1)) == 6) {
        my $flags = unpack 'C', substr($f, 14 + 4 * (unpack('C', substr($f, 14, 1)) & 15) + 13, 1);
        $rst4++ if $flags & 4;
    }
}
print "rst4=$rst4 from6=$from6 rst6=$rst6 adm6=$adm6\n";
"""


def run_probe(h, name, allow, qname, denied):
    image = os.environ["BLUEBOX_TEST_DEBIAN_IMAGE"]
    entries = "allow:\n" + "".join(f"  - {a}\n" for a in allow) if allow is not None else ""
    bf = h.dir / "home" / "sandboxes" / name / "Bluefile"
    bf.write_text(f"base: {image}\nbackend: uml\nram_mib: 256\nnetwork: bridge\n{entries}")
    r = h("build", name, timeout=900)
    assert r.returncode == 0, r
    script = ("cat > /tmp/frames.pl; "
              "perl -MIO::Socket::IP -e 'IO::Socket::IP->new(PeerHost => \"" + V6 + "\", "
              "PeerPort => 80, Timeout => 5) or print \"v6-socket: $@\\n\"'; "
              f"perl /tmp/frames.pl {V6} {PRIVATE} {qname} {denied}")
    r = h("run", name, "--", "sh", "-c", script, input=PERL_FRAMES.encode(), timeout=300)
    out = r.stdout.decode()
    print(out, r.stderr.decode())
    assert r.returncode == 0, r
    return out


@UML
@DEBIAN
def test_ipv6_frames_refused_and_logged(env, bluebox_bin):  # noqa: F811
    mirrors = apt_hosts()
    allowed = mirrors[0] if mirrors else "deb.invalid"
    denied = "denied-v6.invalid"
    h = Home(bluebox_bin)
    try:
        name = h.sandbox(f"v6-{os.getpid()}", "")
        log = h.dir / "home" / "logs" / "net" / f"{name}.log"

        out = run_probe(h, name, [allowed], allowed, denied)
        assert "v6-socket: " in out, out  # the guest kernel's own refusal
        assert "rst4=1 " in out, out  # the control: a raw v4 SYN is answered with a reset
        # the v6 frames likewise: a reset for the SYN, admin-prohibited for the datagram
        assert "from6=2 rst6=1 adm6=1" in out, out
        if mirrors:  # a name the guest may use: no AAAA record (the real one stays outside)
            assert "aaaa-allowed rcode=0 answers=0" in out, out
        assert "aaaa-denied rcode=3 answers=0" in out, out
        lines = [json.loads(ln) for ln in log.read_text().splitlines()]
        v6 = [e for e in lines if e.get("kind") == "frame" and e.get("name") == V6]
        assert {e["reason"] for e in v6} == {"tcp", "udp"}, lines
        assert all(e["decision"] == "deny" for e in v6), lines
        assert {e["port"] for e in v6} == {443, 53}, lines
        assert any(e.get("kind") == "dns" and e["name"] == denied and e["decision"] == "deny"
                   for e in lines), lines
        shown = h("logs", name, "--net", "-n", "1000").stdout.decode()
        assert V6 in shown and denied in shown, shown

        # plain bridge: the same frames, and again nothing comes back for IPv6
        out = run_probe(h, name, None, allowed, denied)
        assert "rst4=1 " in out and "from6=0 " in out, out
    finally:
        h.close()
