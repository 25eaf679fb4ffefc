#!/usr/bin/python3
"""Write the seed corpora for the fuzz targets: for the Bluefile, the shipped examples, edge
cases that parse, and one input per rejection rule; for the uml launch spec, valid specs per
mode and broken ones; for the archive extractor, the hostile archives of the restore tests.
Run once after adding a rule (`seed-corpus.py [bluefile|spec|safetar]`, default all); the files are committed and replayed by `make check`."""
import hashlib
import os
import struct
import sys

root = os.path.dirname(os.path.abspath(__file__))
out = os.path.join(root, "corpus", "bluefile")
repo = os.path.dirname(os.path.dirname(root))

cases = [
    "", "# only a comment\n", "---\n", "~\n", "cpus: 2\n",
    "base: docker.io/library/debian:bookworm-slim\npackages: [python3, git]\n",
    "cpus: 99\n", "cpus: 0\n", "cpus: \"2\"\n", "cpus: [1]\n", "cpus: 1e3\n",
    "cpus: 99999999999999999999\n", "ram_mib: 127\n", "ram_mib: -1\n",
    "network: host\n", "network: bridge\nwarm: 2\n", "warm: 1\n", "warm: 9\n",
    "passt: maybe\n", "readonly: yes\n", "timeout_seconds: -5\n",
    "warmup: ['', ok]\n", "isolation: strict\nmounts:\n  - {host: /tmp, guest: /w, mode: rw}\n",
    "backend: firecracker\n", "backend: podman\n", "backend: uml\n",
    "seccomp: /nonexistent.json\n", "pkgmgr: APK\npackages: [x]\n",
    "base: quay.io/x/y\npackages: [x]\n", "packages: ['a;b']\n", "packages: ['-o']\n",
    "packages: ['a b']\n", "packages: ['$(id)']\n", "run: ['echo hi', 'true']\n",
    "run:\n  - |\n    one\n    FROM evil\n", "run:\n  - |\n    ok\n",
    "env:\n  LANG: C.UTF-8\n  A_B: 'x y \"q\" $HOME \\\\'\n", "env:\n  1BAD: x\n",
    "env:\n  A: \"line\\nbreak\"\n", "env: [a]\n",
    "mounts:\n  - host: ~/src\n    guest: /src\n", "mounts:\n  - host: rel\n    guest: /x\n",
    "mounts:\n  - host: /a:b\n    guest: /x\n", "mounts:\n  - host: /a/../b\n    guest: /x\n",
    "mounts:\n  - host: /a\n    guest: /data\n", "mounts:\n  - {host: /a, guest: /x}\n  - {host: /b, guest: /x}\n",
    "mounts:\n  - {host: /a, guest: /x, mode: rx}\n", "mounts:\n  - {host: /a, guest: '/x y'}\n",
    "blueprint:\n  users:\n    - {name: admin, shell: /bin/bash, sudo: true}\n  write_files:\n    - {path: /etc/motd, content: \"hi $x `y`\\n\", mode: '0644'}\n  runcmd: [echo done]\n",
    "blueprint:\n  users:\n    - {name: Admin}\n", "blueprint:\n  users:\n    - {name: a, shell: bash}\n",
    "blueprint:\n  write_files:\n    - {path: 'rel', content: x}\n",
    "blueprint:\n  write_files:\n    - {path: /x, mode: '999'}\n", "blueprint:\n  other: 1\n",
    "cpus: 2\ncpus: 3\n", "cpu: 2\n", "a: &x [1]\nb: *x\n", "cpus: !!int 2\n",
    "a: 1\n---\nb: 2\n", "cpus: [\n", "\"unterminated\n", "- a\n- b\n", "just text\n",
    "lol: &a [x,x,x,x,x,x,x,x,x]\nlol2: &b [*a,*a,*a,*a,*a,*a,*a,*a]\n",
    "env:\n  A: \"nul\\0byte\"\n", "[" * 100 + "\n", "{a: " * 40 + "1" + "}" * 40 + "\n",
    "base: \"with space\"\n", "base: \"\"\n", "\ufeffcpus: 2\n",
    # allow: and secrets:
    "network: bridge\nallow: [a.example.org, \"*.example.org:8443\", 192.0.2.0/24:5432, 1.2.3.4]\n"
    "secrets:\n  - {name: T, from_env: T, hosts: [a.example.org, \"*.example.org\"]}\n"
    "  - {name: F, from_file: ~/t, hosts: [b.example.org]}\n",
    "allow: [a.example.org]\n", "network: bridge\nallow: []\n",
    "network: bridge\nallow: [\"*.org\", a.*.b, \"2001:db8::/32\", 1.2.3.4/33, 10.0.0.1/8, x:0]\n",
    "network: bridge\nallow: [a.example.org]\nsecrets: [{name: X, from_env: Y, hosts: [b.example.org]}]\n",
    "network: bridge\nallow: [a.b.c]\nsecrets: [{name: BLUEBOX_X, from_env: A, from_file: /f, hosts: []}]\n",
]


def write_bluefile():
    os.makedirs(out, exist_ok=True)
    for c in cases:
        data = c.encode()
        name = hashlib.sha1(data).hexdigest()[:16]
        open(os.path.join(out, name), "wb").write(data)
    ex = os.path.join(repo, "examples")
    for e in sorted(os.listdir(ex)):
        p = os.path.join(ex, e, "Bluefile")
        if os.path.isfile(p):
            open(os.path.join(out, "example-" + e), "wb").write(open(p, "rb").read())
    print(len(os.listdir(out)), "inputs in", out, file=sys.stderr)


# The launch spec (src/abi/spec.c): magic line, then records of tag byte, big-endian u32
# length, bytes. spec() writes records in the order spec_encode() does.
SPEC_MAGIC = b"bluebox-spec 3\n"


def rec(tag, data):
    return tag.encode() + struct.pack(">I", len(data)) + data


def u32(tag, v):
    return rec(tag, struct.pack(">I", v))


def spec(mode="run", argv=(b"/bin/sh", b"-c", b"echo hi"), env=(b"PATH=/usr/bin:/bin",),
         cwd=b"/", host=b"bluebox", uid=0, gid=0, groups=(0,), rows=0, cols=0, root=0,
         mounts=((0, b"/data"),), user=b"", tty=0, extra=b""):
    out = [SPEC_MAGIC, rec("m", mode.encode())]
    out += [rec("a", a) for a in argv]
    out += [rec("e", e) for e in env]
    out += [rec("c", cwd), rec("h", host), u32("u", uid), u32("g", gid)]
    out += [u32("G", g) for g in groups]
    out += [u32("r", rows), u32("k", cols), u32("R", root)]
    out += [rec("M", bytes([f]) + p) for f, p in mounts]
    out += [u32("t", tty), rec("U", user), extra]
    return b"".join(out)


valid_run = spec()
spec_cases = {
    "run": valid_run,
    "shell": spec("shell", argv=(b"/bin/bash", b"-l"), env=(b"TERM=xterm-256color", b"HOME=/root",
                  b"LANG=C.UTF-8"), cwd=b"/work", host=b"dev", uid=1000, gid=1000,
                  groups=(1000, 27, 100), rows=50, cols=200, tty=1),
    "probe": spec("probe", argv=(b"/.bluebox/probe",), env=(), host=b"", groups=(), mounts=()),
    "readonly-mounts": spec(root=1, mounts=((0, b"/data"), (1, b"/src"), (0xf, b"/src/out dir"),
                                            (2, b"/a/b/c"), (0x11, b"/etc/app.conf"))),
    "agent": spec("agent", argv=(b"agent", b"\xff\xfe not utf-8", b""), env=(b"A==b", b"X=")),
    "reordered": SPEC_MAGIC + u32("k", 0) + rec("c", b"/") + rec("a", b"true") + rec("m", b"run")
                 + rec("h", b"h") + u32("u", 1) + u32("g", 1) + u32("r", 0) + rec("M", b"\0/x")
                 + u32("R", 0) + rec("U", b"1:1") + u32("t", 0),
    "with-ca": spec(extra=rec("C", b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")),
    "ca-twice": spec(extra=rec("C", b"-----BEGIN CERTIFICATE-----\nA\n")
                     + rec("C", b"-----BEGIN CERTIFICATE-----\nB\n")),
    "ca-not-pem": spec(extra=rec("C", b"-----BEGIN PRIVATE KEY-----\nA\n")),
    "user-name-group": spec(user=b"app:wheel"),
    "user-too-long": spec(user=b"u" * 1025),
    "user-twice": spec(user=b"app", extra=rec("U", b"root")),
    "user-missing": spec()[:-5],
    "truncated-record": valid_run[:-3],
    "truncated-header": valid_run[:len(SPEC_MAGIC) + 3],
    "bad-magic": b"bluebox-spec 1\n" + valid_run[len(SPEC_MAGIC):],
    "no-root": valid_run.replace(u32("R", 0), b""),
    "dup-root": spec(extra=u32("R", 1)),
    "bad-root-flag": spec(root=4),
    "bad-tty": spec(tty=2),
    "no-tty": valid_run.replace(u32("t", 0), b""),
    "mount-bad-flag": spec(mounts=((0x20, b"/data"),)),
    "mount-relative": spec(mounts=((0, b"data"),)),
    "mount-root": spec(mounts=((0, b"/"),)),
    "mount-dotdot": spec(mounts=((0, b"/data/../etc"),)),
    "mount-dot": spec(mounts=((0, b"/data/."),)),
    "mount-double-slash": spec(mounts=((0, b"/data//x"),)),
    "mount-trailing-slash": spec(mounts=((0, b"/data/"),)),
    "mount-nul": spec(mounts=((0, b"/da\0ta"),)),
    "mount-empty": spec(extra=rec("M", b"")),
    "dup-cwd": spec(extra=rec("c", b"/tmp")),
    "bad-tag": spec(extra=rec("Z", b"what")),
    "huge-length": valid_run + b"a\xff\xff\xff\xff",
    "nul-in-arg": spec(argv=(b"/bin/sh\0-c",)),
    "nul-in-env": spec(env=(b"A=b\0C=d",)),
    "env-no-eq": spec(env=(b"JUSTNAME",)),
    "no-argv": spec(argv=()),
}


def write_spec():
    d = os.path.join(root, "corpus", "spec")
    os.makedirs(d, exist_ok=True)
    for name, data in spec_cases.items():
        open(os.path.join(d, name), "wb").write(data)
    print(len(os.listdir(d)), "inputs in", d, file=sys.stderr)


def write_safetar():
    """The hostile archives of the restore tests (sparse ones included), plus a small tar
    bomb (the fuzz target allows 1000 entries) and a zstd one when the zstd program is there.
    snapshot-* in the corpus are real `bluebox snapshot` archives, added by hand."""
    import subprocess
    sys.path.insert(0, os.path.join(repo, "tests", "cli"))
    import hostile
    d = os.path.join(root, "corpus", "safetar")
    os.makedirs(d, exist_ok=True)
    inputs = {name: data for name, (data, _) in hostile.cases().items()}
    inputs["tar-bomb"] = hostile.gz(hostile.bomb(1500))
    try:
        inputs["ok-tree-zst"] = subprocess.run(["zstd", "-c"], input=hostile.cases()["ok-tree"][0],
                                               capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pass
    for name, data in inputs.items():
        open(os.path.join(d, name), "wb").write(data)
    print(len(os.listdir(d)), "inputs in", d, file=sys.stderr)


def write_netpolicy():
    """Guest ethernet frames: a TCP SYN and UDP datagrams to the internet, the stack's DNS,
    private ranges and metadata, with IP options, fragments, IPv6 with extension headers,
    ARP, and truncated ones."""
    import socket
    d = os.path.join(root, "corpus", "netpolicy")
    os.makedirs(d, exist_ok=True)
    eth4 = bytes.fromhex("525500 0a0202 525400 123456".replace(" ", "")) + b"\x08\x00"
    eth6 = eth4[:12] + b"\x86\xdd"

    def ip4(dst, proto, port, opts=b"", frag=0, flags=0x02):
        l4 = (struct.pack(">HHIIBBHHH", 40000, port, 1000, 0, 0x50, flags, 0, 0, 0)
              if proto == 6 else struct.pack(">HHHH", 40000, port, 12, 0)) + b"data"
        ihl = 20 + len(opts)
        hdr = struct.pack(">BBHHHBBH4s4s", 0x40 | ihl // 4, 0, ihl + len(l4), 1, frag, 64,
                          proto, 0, socket.inet_aton("10.0.2.15"), socket.inet_aton(dst))
        return eth4 + hdr + opts + l4

    def ip6(dst, nh, ext=b""):
        tcp = struct.pack(">HHIIBBHHH", 40000, 443, 1, 0, 0x50, 0x02, 0, 0, 0)
        hdr = struct.pack(">IHBB16s16s", 0x60000000, len(ext) + len(tcp), nh, 64,
                          socket.inet_pton(socket.AF_INET6, "fec0::15"),
                          socket.inet_pton(socket.AF_INET6, dst))
        return eth6 + hdr + ext + tcp

    inputs = {
        "syn-internet": ip4("93.184.216.34", 6, 443),
        "syn-metadata": ip4("169.254.169.254", 6, 80),
        "syn-gateway": ip4("10.0.2.2", 6, 22),
        "ack-private": ip4("192.168.1.1", 6, 80, flags=0x10),
        "udp-dns": ip4("10.0.2.3", 17, 53),
        "udp-private": ip4("172.17.0.1", 17, 53),
        "udp-options": ip4("10.0.0.9", 17, 53, opts=b"\x01" * 40),
        "frag-later": ip4("169.254.169.254", 6, 80, frag=100),
        "frag-first-dns": ip4("10.0.2.3", 17, 53, frag=0x2000),
        "icmp-gateway": ip4("10.0.2.2", 1, 0),
        "ip6-loopback": ip6("::1", 6),
        "ip6-hop": ip6("2001:4860::8888", 0, bytes([6, 0]) + b"\0" * 6),
        "ip6-routing": ip6("2001:4860::8888", 43, bytes([6, 0]) + b"\0" * 6),
        "ip6-frag": ip6("fe80::1", 44, bytes([6, 0, 0, 8]) + b"\0" * 4),
        "arp": eth4[:12] + b"\x08\x06" + b"\0" * 28,
        "truncated": ip4("10.0.0.1", 6, 80)[:40],
        "short": eth4[:10],
    }
    for name, data in inputs.items():
        open(os.path.join(d, name), "wb").write(data)
    print(len(os.listdir(d)), "inputs in", d, file=sys.stderr)


def write_netlog():
    """The connection log's lines as `bluebox logs --net` reads them (src/core/netlog.c)."""
    d = os.path.join(root, "corpus", "netlog")
    os.makedirs(d, exist_ok=True)
    inputs = {
        "ok": b'{"time":"2026-11-30T23:59:01Z","sandbox":"box","name":"api.example.com",'
              b'"port":443,"decision":"allow","rule":"api.example.com","bytes_up":512,'
              b'"bytes_down":2048,"ms":34}\n',
        "epoch-deny": b'{"time":1764547200123,"name":"x.example","port":80,"decision":"deny",'
                      b'"reason":"not in allow","bytes":{"up":0,"down":0},"ms":0.5}\n',
        "escapes": b'{"name":"a\\u001b]0;x\\u0007","port":"4\\n","rule":[1],"ms":1e308}\n',
        "mixed": b'garbage\n{}\n[1]\n{"name":1\n\xff\xfe\n{"name":"x","name":"y"}\n\n',
        "deep": b'{"name":' + b'[' * 500 + b']' * 500 + b'}\n',
        "no-newline": b'{"name":"end","port":1}',
def client_hello(sni, chunk=16384):
    ext = struct.pack(">HHHH", 10, 4, 2, 0x1d)
    if sni is not None:
        n = sni.encode()
        ext += struct.pack(">HHHBH", 0, len(n) + 5, len(n) + 3, 0, len(n)) + n
    body = (b"\x03\x03" + bytes(range(32)) + b"\x20" + b"\xaa" * 32 + struct.pack(">HHH", 4, 0x1301, 0x1302)
            + b"\x01\x00" + struct.pack(">H", len(ext)) + ext)
    hs = b"\x01" + struct.pack(">I", len(body))[1:] + body
    out = b""
    for i in range(0, len(hs), chunk):
        part = hs[i:i + chunk]
        out += b"\x16\x03\x01" + struct.pack(">H", len(part)) + part
    return out


def write_sniff():
    d = os.path.join(root, "corpus", "sniff")
    os.makedirs(d, exist_ok=True)
    inputs = {
        "tls-sni": client_hello("api.example.org"),
        "tls-split": client_hello("split.example.org", chunk=9),
        "tls-nosni": client_hello(None),
        "tls-partial": client_hello("x.example.org")[:40],
        "http-host": b"GET /x HTTP/1.1\r\nHost: deb.example.org:80\r\nAccept: */*\r\n\r\n",
        "http-two-hosts": b"GET / HTTP/1.1\r\nHost: a.org\r\nHost: b.org\r\n\r\n",
        "http-fold": b"GET / HTTP/1.1\r\nHost: a.org\r\n x\r\n\r\n",
        "http-lf": b"POST / HTTP/1.0\nhost: a.example.org\n\n",
        "ssh": b"SSH-2.0-OpenSSH_9.2\r\n",
    }
    for name, data in inputs.items():
        open(os.path.join(d, name), "wb").write(data)
    print(len(os.listdir(d)), "inputs in", d, file=sys.stderr)


which = sys.argv[1:] or ["bluefile", "spec", "safetar", "netpolicy", "netlog"]
for w in which:
    {"bluefile": write_bluefile, "spec": write_spec, "safetar": write_safetar,
     "netpolicy": write_netpolicy, "netlog": write_netlog}[w]()
def dns_query(name, qtype=1, flags=0x0100):
    q = struct.pack(">HHHHHH", 0x1234, flags, 1, 0, 0, 0)
    for label in name.split(".") if name else []:
        q += bytes([len(label)]) + label.encode()
    return q + b"\0" + struct.pack(">HH", qtype, 1)


def dns_frame(msg):
    udp = struct.pack(">HHHH", 40000, 53, 8 + len(msg), 0) + msg
    ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 0, 0, 64, 17, 0,
                     bytes([10, 0, 2, 15]), bytes([10, 0, 2, 3]))
    return b"\x52\x55\x0a\x00\x02\x02\x52\x54\x00\x12\x34\x56\x08\x00" + ip + udp


def write_netdns():
    d = os.path.join(root, "corpus", "netdns")
    os.makedirs(d, exist_ok=True)
    inputs = {
        "frame-a": dns_frame(dns_query("deb.example.org")),
        "frame-aaaa": dns_frame(dns_query("deb.example.org", 28)),
        "frame-txt-exfil": dns_frame(dns_query("c2VjcmV0.exfil.example", 16)),
        "frame-root": dns_frame(dns_query("")),
        "msg-a": dns_query("a.org"),
        "msg-response": dns_query("a.org", flags=0x8180),
        "msg-pointer": dns_query("a.org")[:12] + b"\xc0\x0c\x00\x01\x00\x01",
        "msg-edns": dns_query("a.org")[:5] + b"\x01\x00\x00\x00\x00\x00\x01" + dns_query("a.org")[12:]
                    + b"\x00\x00\x29\x10\x00\x00\x00\x00\x00\x00\x00",
    }
    for name, data in inputs.items():
        open(os.path.join(d, name), "wb").write(data)
    print(len(os.listdir(d)), "inputs in", d, file=sys.stderr)


which = sys.argv[1:] or ["bluefile", "spec", "safetar", "netpolicy", "sniff", "netdns"]
for w in which:
    {"bluefile": write_bluefile, "spec": write_spec, "safetar": write_safetar,
     "netpolicy": write_netpolicy, "sniff": write_sniff, "netdns": write_netdns}[w]()
