"""up / exec / down through the in-guest agent, end to end on the uml backend: real podman,
real guest kernels, root and rootless. Also the agent under abuse from the host, where the
token may and may not appear, the kernel gate, and network: none staying offline while the
agent is reachable."""
import hashlib
import json
import os
import pty
import random
import re
import socket
import struct
import subprocess
import termios
import threading
import time
from pathlib import Path

import pytest

from test_podman_build import env, podman  # noqa: F401  (session fixture + helper)
from test_runtime import Home, containers_of

REPO = Path(__file__).resolve().parents[2]
IMAGE = "localhost/bluebox-test/busybox:latest"

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not (REPO / "build" / "bluebox-vmm").exists()
    or not Path("/usr/bin/linux.uml").exists(),
    reason="agent tests need root, podman, build/bluebox-vmm and user-mode-linux")


# 10 s: short enough to see the timeout fire, long enough for twenty execs at once on one
# loaded uml CPU (4 s was not, under a busy test run).
def bluefile(net="none", extra="", timeout=10):
    return (f"base: {IMAGE}\nbackend: uml\nram_mib: 256\nnetwork: {net}\n"
            f"timeout_seconds: {timeout}\n{extra}")


@pytest.fixture(scope="module")
def box(env, bluebox_bin):  # noqa: F811
    """One up sandbox (network: none) shared by the tests of this module."""
    h = Home(bluebox_bin)
    name = h.sandbox(f"agent-{os.getpid()}", bluefile())
    r = h("build", name)
    assert r.returncode == 0, r
    r = h("up", name)
    assert r.returncode == 0, r
    out = r.stdout.decode()
    assert out.startswith(f"up {name} (ready in ") and "isolation: uml guest kernel" in out, r
    yield h, name
    h("down", name)
    h.close()


def state(h, name):
    return json.loads((h.dir / "home" / "run" / f"{name}.json").read_text())


def frame(t, payload=b""):
    return t + struct.pack(">I", len(payload)) + payload


CHAIN_LEN = 1024


def chain_value(token, epoch, index):
    """The agent's hash chain (src/abi/chain.h): SHA256^index(seed_epoch)."""
    v = hashlib.sha256(token.encode() + b"bluebox-agent" + struct.pack(">I", epoch)).digest()
    for _ in range(index):
        v = hashlib.sha256(v).digest()
    return v


def hello(proof, argv=(), **kw):
    return frame(b"H", json.dumps(dict(proof=proof, argv=list(argv), **kw)).encode())


def challenge(sock, timeout=20):
    """The agent's first frame on a connection: {epoch, index[, rotate]}."""
    frames = read_frames(sock, until=b"C", timeout=timeout)
    assert frames and frames[-1][0] == b"C", frames
    return json.loads(frames[-1][1])


def proof_for(token, ch):
    return chain_value(token, ch["epoch"], ch["index"]).hex()


def authed_hello(sock, token, argv=(), **kw):
    """Answer the challenge the way bluebox does; returns the proof sent."""
    p = proof_for(token, challenge(sock))
    sock.sendall(hello(p, argv, **kw))
    return p


def fake_challenge(c):
    """What a fake agent sends first, as the real one does."""
    c.sendall(frame(b"C", json.dumps({"epoch": 0, "index": CHAIN_LEN - 1}).encode()))


def read_frames(sock, until=b"X", timeout=20):
    """Frames until one of type `until` (or the connection closes): [(type, payload)]."""
    sock.settimeout(timeout)
    buf, out = b"", []
    while True:
        while len(buf) >= 5:
            n = struct.unpack(">I", buf[1:5])[0]
            if len(buf) < 5 + n:
                break
            out.append((buf[:1], buf[5:5 + n]))
            buf = buf[5 + n:]
            if out[-1][0] == until:
                return out
        chunk = sock.recv(65536)
        if not chunk:
            return out
        buf += chunk


def connect(addr):
    host, port = addr.rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=10)


def closed_silently(sock, timeout=15):
    """True when the peer closes the connection without sending a byte."""
    sock.settimeout(timeout)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def agent_rss_kib(h, name, field="VmHWM"):
    r = h("exec", name, "--", "cat", "/proc/1/status")
    assert r.returncode == 0, r
    line = next(x for x in r.stdout.decode().splitlines() if x.startswith(field + ":"))
    return int(line.split()[1])


# ---- up, exec, down ------------------------------------------------------------------------

def test_exec_state_and_exit_codes(box):
    h, name = box
    r = h("exec", name, "--", "sh", "-c", "echo kept > /tmp/f; sleep 300 >/dev/null 2>&1 &")
    assert r.returncode == 0, r
    r = h("exec", name, "--", "sh", "-c", "cat /tmp/f; ps -o args | grep -c '^sleep 300'")
    assert (r.returncode, r.stdout) == (0, b"kept\n1\n"), r
    r = h("exec", name, "--", "sh", "-c", "echo out; echo err >&2; exit 3")
    assert (r.returncode, r.stdout, r.stderr) == (3, b"out\n", b"err\n"), r
    r = h("exec", name, "--", "sleep", "30")
    assert r.returncode == 124 and b"killed after 10s (timeout_seconds)" in r.stderr, r
    r = h("exec", name, "--", "no-such-command")
    assert r.returncode == 127 and b"cannot run no-such-command" in r.stderr, r
    r = h("exec", name, "--", "sh", "-c", "kill -TERM $$")
    assert r.returncode == 128 + 15, r
    # no shell: the argument reaches the command as one word
    r = h("exec", name, "--", "echo", "a  b;$HOME")
    assert r.stdout == b"a  b;$HOME\n", r
    r = h("exec", name, "--", "pwd")
    assert r.stdout == b"/data\n", r
    log = (h.dir / "home" / "logs" / f"{name}.log").read_text()
    assert "exec: 'sh' '-c' 'echo out; echo err >&2; exit 3'\n| out\n| err\n=== exit 3 (" in log


def test_up_again_and_state_file(box):
    h, name = box
    r = h("up", name)
    assert (r.returncode, r.stdout) == (0, f"{name} is already up\n".encode()), r
    run = h.dir / "home" / "run"
    assert run.stat().st_mode & 0o777 == 0o700
    f = run / f"{name}.json"
    assert f.stat().st_mode & 0o777 == 0o600
    s = state(h, name)
    assert set(s) == {"container", "addr", "token", "kernel", "started"}
    assert re.fullmatch(rf"bluebox-up-{name}-[0-9a-f]{{12}}", s["container"]), s
    assert s["addr"].startswith("127.0.0.1:")
    assert len(s["token"]) == 64 and s["kernel"] != os.uname().release
    # while up: rename refuses, ls says so
    r = h("rename", name, name + "-x")
    assert r.returncode == 1 and f"{name} is up; bring it down first: bluebox down {name}" \
        in r.stderr.decode(), r
    assert b" up " in h("ls").stdout


def test_exec_stdin_binary_and_10mib(box):
    h, name = box
    blob = os.urandom(3 << 20) + b"\0\r\n\x04end"
    r = h("exec", name, "--", "cat", input=blob)
    assert r.returncode == 0 and r.stdout == blob, (r.returncode, len(r.stdout), r.stderr)
    r = h("exec", name, "--", "sha256sum", input=blob)
    assert r.stdout.split()[0].decode() == hashlib.sha256(blob).hexdigest(), r
    r = h("exec", name, "--", "sh", "-c",
          "head -c 10485760 /dev/urandom > /tmp/big; sha256sum /tmp/big")
    want = r.stdout.split()[0].decode()
    r = h("exec", name, "--", "cat", "/tmp/big")
    assert r.returncode == 0 and len(r.stdout) == 10 << 20, (r.returncode, len(r.stdout))
    assert hashlib.sha256(r.stdout).hexdigest() == want
    # a terminal's stdin is not forwarded without -i: the command sees EOF at once
    r = h("exec", name, "--", "cat")
    assert (r.returncode, r.stdout) == (0, b""), r


def test_exec_tty(box):
    h, name = box
    r = h("exec", name, "-t", "--", "tty")
    assert r.returncode == 0 and r.stdout.startswith(b"/dev/pts/"), r
    r = h("exec", name, "--", "tty")
    assert r.returncode == 1, r
    # -i on a terminal: a pty whose size follows the client's terminal
    master, slave = pty.openpty()
    termios.tcsetwinsize(slave, (33, 101))
    p = subprocess.Popen(h.cmd("exec", name, "-i", "--", "stty", "size"), env=h.env,
                         stdin=slave, stdout=slave, stderr=slave, cwd="/")
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    assert p.wait(timeout=60) == 0, out
    assert b"33 101" in out, out
    os.close(master)


def test_exec_inherits_only_its_stdio(box):
    """An exec'd command holds fds 0, 1 and 2 and nothing of the agent's (its socket, the
    control line, the terminal it opened for the command), with or without a pty."""
    h, name = box
    for flags in ([], ["-t"]):
        # ls, a child of the shell (not exec'd: a second command follows), lists the
        # shell's fds (a glob would open the directory in the shell itself)
        r = h("exec", name, *flags, "--", "sh", "-c", "ls /proc/$$/fd; true")
        assert r.returncode == 0, r
        assert r.stdout.decode().split() == ["0", "1", "2"], (flags, r.stdout)


def test_many_parallel_execs(box):
    """A burst of execs at once: each answers with its own output and exit code. One in
    twenty used to wait 30 s for a challenge that never came (libslirp's forward listened with
    a backlog of 1: a SYN cookie, then a dropped last ACK), and past 16 at once the agent
    closed connections it could not hold."""
    h, name = box
    n = 60
    results = {}

    def one(i):
        results[i] = h("exec", name, "--", "sh", "-c", f"echo n{i}; exit {i % 5}")

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    bad = [results[i] for i in range(n)
           if (results[i].returncode, results[i].stdout) != (i % 5, f"n{i}\n".encode())]
    assert not bad, bad[:3]


def test_the_forwarded_port_has_a_deep_backlog(box):
    """The VMM's forward of the agent's port can hold a burst of connections until libslirp
    accepts them (it listens with a backlog of 1 by itself)."""
    h, name = box
    pid = podman("inspect", "-f", "{{.State.Pid}}", state(h, name)["container"]).stdout.strip()
    r = subprocess.run(["nsenter", "-t", pid, "-n", "ss", "-Hltn", "sport = :7700"],
                       capture_output=True, text=True, check=True)
    backlogs = [int(line.split()[2]) for line in r.stdout.splitlines()]
    assert backlogs and min(backlogs) >= 1024, r.stdout


def test_exec_finds_programs_in_the_commands_path(box):
    """The program is looked up in the PATH the command runs with (the image's here, which
    has /usr/local/sbin), not in the agent's own, as run and a shell do."""
    h, name = box
    r = h("exec", name, "--", "sh", "-c",
          "mkdir -p /usr/local/sbin && printf '#!/bin/sh\\necho found \"$@\"\\n' "
          "> /usr/local/sbin/bbsbin && chmod 755 /usr/local/sbin/bbsbin && echo $PATH")
    assert r.returncode == 0 and b"/usr/local/sbin" in r.stdout, r
    r = h("exec", name, "--", "bbsbin", "a b")
    assert (r.returncode, r.stdout) == (0, b"found a b\n"), r


def test_ctrl_c_reaches_the_remote_group(box):
    h, name = box
    p = subprocess.Popen(
        h.cmd("exec", name, "--", "sh", "-c",
              "trap 'echo got-int; exit 7' INT; echo ready; sleep 60 & wait"),
        env=h.env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stdout.readline() == b"ready\n"
    p.send_signal(2)
    out, err = p.communicate(timeout=60)
    assert (p.returncode, out) == (7, b"got-int\n"), err


# ---- the token -----------------------------------------------------------------------------

def test_token_never_leaks(box):
    h, name = box
    s = state(h, name)
    token = s["token"].encode()
    ps = subprocess.run(["ps", "axww", "-o", "args"], capture_output=True).stdout
    assert token not in ps
    info = json.loads(podman("inspect", s["container"]).stdout)[0]
    for key in ("Args", "Path"):
        assert s["token"] not in json.dumps(info.get(key))
    create = info["Config"].get("CreateCommand") or []
    assert create and "--env=BLUEBOX_AGENT_HEAD" in create
    assert s["token"] not in json.dumps(create) and s["token"] not in json.dumps(
        info["Config"].get("Cmd"))
    r = h("exec", name, "--", "sh", "-c",
          "env; cat /proc/1/environ /proc/1/cmdline; for f in /proc/[0-9]*/environ; do "
          "cat $f; done 2>/dev/null; ls /.bluebox/mem")
    assert r.returncode == 0 and token not in r.stdout and b"BLUEBOX_AGENT_HEAD" not in r.stdout
    assert b"spec" not in r.stdout  # the launch spec was deleted after reading
    logs = podman("logs", s["container"]).stdout + podman("logs", s["container"]).stderr
    assert s["token"] not in logs
    assert token not in (h.dir / "home" / "logs" / f"{name}.log").read_bytes()
    # the agent binary in the guest is read-only
    before = hashlib.sha256(Path(h.bin).read_bytes()).hexdigest()
    r = h("exec", name, "--", "sh", "-c",
          "echo x >> /.bluebox/bluebox && echo WROTE; rm -f /.bluebox/bluebox && echo REMOVED;"
          " mount -o remount,rw /.bluebox/bluebox 2>/dev/null; echo y >> /.bluebox/bluebox "
          "&& echo WROTE2; true")
    assert b"WROTE" not in r.stdout and b"REMOVED" not in r.stdout, r
    assert hashlib.sha256(Path(h.bin).read_bytes()).hexdigest() == before


def test_the_control_line_cannot_fill_the_hosts_disk(box):
    """Root in the guest can write frames on the uml control line; bluebox-vmm relays them
    to its stdout, which podman keeps as the container's log on the host. That log is
    capped, so a flood cannot fill the host's disk."""
    h, name = box
    s = state(h, name)
    # in 6 execs of 512 KiB each, as each must end inside the box's 10 s timeout, and a uml
    # serial line on a slow host takes several seconds for all of it
    for _ in range(6):
        r = h("exec", name, "--", "sh", "-c",
              "{ printf 'O\\000\\001\\000\\000'; head -c 65536 /dev/zero | tr '\\0' x; } >/tmp/fr"
              " && for i in $(seq 8); do cat /tmp/fr; done >/dev/ttyS0; rm /tmp/fr; echo flooded",
              timeout=300)
        assert r.stdout == b"flooded\n", r
    info = json.loads(podman("inspect", s["container"]).stdout)[0]
    log = Path(info["HostConfig"]["LogConfig"].get("Path") or info["LogPath"])
    # 3 MiB went to the log; at most the cap (1 MiB, and a little) is kept
    assert log.stat().st_size < (1 << 20) + (128 << 10), log.stat().st_size
    r = h("exec", name, "--", "echo", "still")
    assert r.stdout == b"still\n", r


def test_exec_output_cannot_fill_the_run_log(box):
    """`exec -- head -c 50M /dev/zero` must not leave a 50 MB logs/<name>.log:
    the log keeps the command line, 64 KiB at each end and the exit code.
    10 MiB here, inside this box's 10 s timeout."""
    h, name = box
    log = h.dir / "home" / "logs" / f"{name}.log"
    before = log.stat().st_size if log.exists() else 0
    r = h("exec", name, "--", "sh", "-c", "head -c 10485760 /dev/zero; exit 4", timeout=300)
    assert r.returncode == 4 and len(r.stdout) == 10 << 20, (r.returncode, len(r.stdout))
    text = log.read_bytes()
    assert len(text) - before < 256 << 10 or len(text) < 256 << 10, (before, len(text))
    tail = text[-(200 << 10):].decode(errors="replace")
    assert "exec: 'sh' '-c' 'head -c 10485760 /dev/zero; exit 4'\n" in tail
    assert re.search(r"\n=== \[\u2026 \d+ bytes clipped \u2026\]\n", tail), tail[-300:]
    assert re.search(r"\n=== exit 4 \(\d+\.\d\ds\)\n$", tail), tail[-100:]


def test_other_containers_cannot_reach_the_agent_port(box):
    """Under root podman the up container sits on podman's shared bridge; a filter on the
    forwarded port lets only the host's port mapping (bridge gateway, loopback) through."""
    h, name = box
    s = state(h, name)
    info = json.loads(podman("inspect", s["container"]).stdout)[0]
    ips = [n["IPAddress"] for n in info["NetworkSettings"]["Networks"].values() if n["IPAddress"]]
    assert ips, info["NetworkSettings"]
    r = podman("run", "--rm", IMAGE, "sh", "-c",
               f"echo x | timeout 5 nc -w 3 {ips[0]} 7700 && echo CONNECTED || echo refused",
               check=False)
    assert r.stdout.strip().endswith("refused") and "CONNECTED" not in r.stdout, r
    r = h("exec", name, "--", "echo", "still")  # the host still gets in
    assert r.stdout == b"still\n", r


# ---- abuse from the host -------------------------------------------------------------------

def test_agent_under_abuse(box):
    h, name = box
    s = state(h, name)
    addr, token = s["addr"], s["token"]
    base = agent_rss_kib(h, name)

    # a connection that never speaks is closed (after 3 s), having heard only the challenge
    c = connect(addr)
    challenge(c)
    assert closed_silently(c)
    c.close()
    # a wrong proof, the token itself, the chain's head: silence
    for wrong in ("0" * 64, token, chain_value(token, 0, CHAIN_LEN).hex()):
        c = connect(addr)
        challenge(c)
        c.sendall(hello(wrong, ["true"]))
        assert closed_silently(c)
    # the right proof after garbage on the same connection: still silence
    c = connect(addr)
    c.sendall(b"\x01garbage" + hello(proof_for(token, challenge(c))))
    assert closed_silently(c)
    # a frame declaring 4 GiB, a truncated frame, random bytes
    for junk in (b"H\xff\xff\xff\xff" + b"x" * 1000, b"H\x00\x00\x00\x64" + b"{" * 10,
                 random.randbytes(1 << 20)):
        c = connect(addr)
        challenge(c)  # every connection hears the challenge first, then nothing
        try:
            c.sendall(junk)
        except OSError:
            pass
        if junk.startswith(b"H\x00\x00\x00\x64"):
            c.shutdown(socket.SHUT_WR)
        assert closed_silently(c)
        c.close()
    # 17+ silent connections, each half-way through a 1 MiB hello: the owner still gets in
    silent = []
    for _ in range(20):
        c = connect(addr)
        c.sendall(b"H\x00\x10\x00\x00" + b"{" * (512 << 10))
        silent.append(c)
    r = h("exec", name, "--", "echo", "owner")
    assert (r.returncode, r.stdout) == (0, b"owner\n"), r
    c = connect(addr)
    authed_hello(c, token)
    frames = read_frames(c)
    assert [t for t, _ in frames] == [b"R", b"X"], frames
    assert json.loads(frames[0][1])["kernel"] == s["kernel"]
    assert json.loads(frames[1][1])["code"] == 0
    for c in silent:
        c.close()
    # memory stayed bounded: 16 unauthenticated peers hold at most 1 MiB each
    assert agent_rss_kib(h, name) - base < 24 << 10
    # and the agent still serves the owner
    r = h("exec", name, "--", "echo", "still")
    assert r.stdout == b"still\n", r


def test_a_sniffed_proof_is_refused(box):
    """Guest root sees every hello on its own network stack. What it learns there (a proof
    already accepted, and what hashing it yields) gets no one in again: the agent hands out
    each index once, and the values it accepts next lie below, where hashing cannot go."""
    h, name = box
    token = state(h, name)["token"]
    c = connect(state(h, name)["addr"])
    sniffed = authed_hello(c, token)
    assert [t for t, _ in read_frames(c)] == [b"R", b"X"]
    c.close()
    replays = [sniffed, hashlib.sha256(bytes.fromhex(sniffed)).hexdigest()]
    for p in replays:
        c = connect(state(h, name)["addr"])
        challenge(c)
        c.sendall(hello(p, ["touch", "/data/replayed"]))
        assert closed_silently(c), p
        c.close()
    assert not (h.data(name) / "replayed").exists()
    r = h("exec", name, "--", "echo", "owner")  # the owner still gets in
    assert (r.returncode, r.stdout) == (0, b"owner\n"), r


def test_kernel_gate_refuses_an_agent_on_the_host_kernel(box):
    """A fake agent that reports the host's kernel (what a plain container would): exec
    refuses it and never sends go."""
    h, _ = box
    name = h.sandbox(f"gate-{os.getpid()}", bluefile())
    srv = socket.create_server(("127.0.0.1", 0))
    got = []

    def serve():
        c, _ = srv.accept()
        fake_challenge(c)
        got.extend(t for t, _ in read_frames(c, until=b"H"))
        c.sendall(frame(b"R", json.dumps({"kernel": os.uname().release}).encode()))
        got.extend(t for t, _ in read_frames(c, until=b"G", timeout=5))
        c.close()

    t = threading.Thread(target=serve)
    t.start()
    run = h.dir / "home" / "run"
    (run / f"{name}.json").write_text(json.dumps({
        "container": "none", "addr": f"127.0.0.1:{srv.getsockname()[1]}",
        "token": "a" * 64, "kernel": "6.1.176", "started": 0}))
    r = h("exec", name, "--", "touch", "/data/ran")
    t.join(timeout=30)
    srv.close()
    (run / f"{name}.json").unlink()
    assert r.returncode == 1 and b"not isolated" in r.stderr, r
    assert got == [b"H"], got


def fake_state(h, name, srv):
    """run/<name>.json pointing exec at a server of the test's, not at a VM."""
    (h.dir / "home" / "run" / f"{name}.json").write_text(json.dumps({
        "container": "none", "addr": f"127.0.0.1:{srv.getsockname()[1]}",
        "token": "a" * 64, "kernel": "6.1.0-not-the-host", "started": 0}))


def _fake_agent(h, name, got):
    """A hostile agent for `name`: it answers the hello as a guest would, prints a line,
    then never sends the exit frame and never closes. Returns the server's thread."""
    srv = socket.create_server(("127.0.0.1", 0))

    def serve():
        c, _ = srv.accept()
        srv.close()
        fake_challenge(c)
        got.extend(t for t, _ in read_frames(c, until=b"H"))
        c.sendall(frame(b"R", json.dumps({"kernel": "6.1.0-not-the-host"}).encode()))
        got.extend(t for t, _ in read_frames(c, until=b"G"))
        c.sendall(frame(b"O", b"partial\n"))
        got.extend(t for t, _ in read_frames(c, until=b"", timeout=120))  # until it hangs up
        c.close()

    t = threading.Thread(target=serve)
    t.start()
    fake_state(h, name, srv)
    return t


def test_an_agent_that_never_exits_cannot_hold_exec(box):
    """A guest that stops answering after the ready frame: exec gives up once the
    sandbox's timeout_seconds (plus a grace) has passed without an exit frame."""
    h, _ = box
    name = h.sandbox(f"silent-{os.getpid()}", bluefile(timeout=1))
    got = []
    t = _fake_agent(h, name, got)
    try:
        r = h("exec", name, "--", "true", timeout=90)
    finally:
        (h.dir / "home" / "run" / f"{name}.json").unlink()
        t.join(timeout=130)
    assert r.returncode == 1 and r.stdout == b"partial\n", r
    assert b"did not report the command's end" in r.stderr, r
    assert got[:2] == [b"H", b"G"], got


def test_a_second_ctrl_c_ends_exec_on_an_agent_that_never_exits(box):
    """Without a timeout: the first Ctrl-C goes to the remote group, a second one ends the
    client (it hangs up, so the agent kills the group)."""
    h, _ = box
    name = h.sandbox(f"hung-{os.getpid()}", bluefile(timeout=0))
    got = []
    t = _fake_agent(h, name, got)
    p = None
    try:
        p = subprocess.Popen(h.cmd("exec", name, "--", "sleep", "1000"), env=h.env,
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        assert p.stdout.readline() == b"partial\n"
        p.send_signal(2)
        t0 = time.monotonic()
        while b"K" not in got and time.monotonic() - t0 < 30:  # the first one was forwarded
            time.sleep(0.05)
        p.send_signal(2)
        out, err = p.communicate(timeout=60)
    finally:
        if p and p.poll() is None:
            p.kill()
            p.wait()
        (h.dir / "home" / "run" / f"{name}.json").unlink()
        t.join(timeout=130)
    assert p.returncode == 130, (p.returncode, err)
    assert got[:3] == [b"H", b"G", b"K"], got


def test_an_agents_error_text_cannot_drive_the_terminal(box):
    """The exit frame's err is the guest's text, printed on the user's terminal: C0 and C1
    controls (also C1 as UTF-8, which xterm obeys) and broken UTF-8 come out escaped."""
    h, _ = box
    name = h.sandbox(f"esc-{os.getpid()}", bluefile())
    srv = socket.create_server(("127.0.0.1", 0))
    err = "a\x1b]0;t\x07b\u009b2Jc\u009d0;x\u0007d é"

    def serve():
        c, _ = srv.accept()
        fake_challenge(c)
        read_frames(c, until=b"H")
        c.sendall(frame(b"R", json.dumps({"kernel": "6.1.0-not-the-host"}).encode()))
        read_frames(c, until=b"G")
        c.sendall(frame(b"X", json.dumps({"code": 3, "err": err}).encode()))
        c.close()

    t = threading.Thread(target=serve)
    t.start()
    fake_state(h, name, srv)
    try:
        r = h("exec", name, "--", "true", timeout=60)
    finally:
        (h.dir / "home" / "run" / f"{name}.json").unlink()
        t.join(timeout=30)
        srv.close()
    assert r.returncode == 3, r
    assert r.stderr == "bluebox: a\\x1b]0;t\\x07b\\u009b2Jc\\u009d0;x\\x07d é\n".encode(), r


# ---- network: none stays offline; the guest cannot reach the host's loopback -------------

def _host_listeners():
    """A TCP and a UDP listener on podman's bridge gateway (the host, as containers see it);
    returns (gateway, tcp port, udp port, list of what arrived, closer)."""
    gw = podman("network", "inspect", "podman", "--format",
                "{{range .Subnets}}{{.Gateway}}{{end}}").stdout.strip()
    tcp = socket.create_server((gw, 0))
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    # Another run of this test on the same host (parallel sessions) holds the port for a few
    # seconds: wait for it rather than skip (a skip fails CI under BLUEBOX_MUST_RUN=1).
    deadline = time.monotonic() + 90
    while True:
        try:
            udp.bind((gw, 53))
            break
        except OSError as e:
            if time.monotonic() > deadline:
                udp.close()
                pytest.skip(f"cannot listen on {gw}:53/udp here ({e.strerror}, for 90 s)")
            time.sleep(0.5)
    seen = []
    stop = threading.Event()

    def loop():
        tcp.settimeout(0.2)
        udp.settimeout(0.2)
        while not stop.is_set():
            for s in (tcp, udp):
                try:
                    if s is tcp:
                        c, _ = s.accept()
                        seen.append("tcp")
                        c.close()
                    else:
                        s.recvfrom(4096)
                        seen.append("udp")
                except OSError:
                    pass

    t = threading.Thread(target=loop)
    t.start()

    def close():
        stop.set()
        t.join()
        tcp.close()
        udp.close()
    return gw, tcp.getsockname()[1], seen, close


@pytest.mark.parametrize("net", ["none", "bridge"])
def test_network_egress(env, bluebox_bin, net):  # noqa: F811
    """network: none (restricted slirp): no TCP, UDP or DNS leaves the guest, while the agent
    answers. network: bridge: the same TCP and UDP to podman's gateway (the host) are refused
    by bluebox-vmm's network policy (test_netpolicy.py shows bridge still reaching the
    internet). Neither can reach the agent's port on the host's loopback."""
    h = Home(bluebox_bin)
    gw, port, seen, close = _host_listeners()
    try:
        name = h.sandbox(f"net{net}-{os.getpid()}", bluefile(net, timeout=120))
        assert h("build", name).returncode == 0
        r = h("up", name)
        assert r.returncode == 0, r
        assert f"network {net}".encode() in r.stdout, r
        agent_port = state(h, name)["addr"].rsplit(":", 1)[1]
        script = (f"echo hi | nc -w 3 {gw} {port} && echo tcp-out; "
                  f"timeout 5 nslookup example.org {gw} >/dev/null 2>&1; "
                  "timeout 5 nslookup example.net >/dev/null 2>&1 && echo dns-out; "
                  + "; ".join(f"echo x | nc -w 3 {a} {agent_port} >/dev/null 2>&1 && echo "
                              f"agent-via-{a}" for a in ("10.0.2.2", "127.0.0.1", gw))
                  + "; true")
        r = h("exec", name, "--", "sh", "-c", script)
        assert r.returncode == 0, r
        out = r.stdout.decode()
        assert "agent-via" not in out, out
        time.sleep(0.5)
        assert "tcp-out" not in out and seen == [], (out, seen)
        if net == "none":
            assert "dns-out" not in out, out
        assert h("down", name).returncode == 0
    finally:
        close()
        h.close()


# ---- down, destroy, rootless ---------------------------------------------------------------

def test_down_and_destroy(env, bluebox_bin):  # noqa: F811
    h = Home(bluebox_bin)
    try:
        name = h.sandbox(f"down-{os.getpid()}", bluefile())
        assert h("build", name).returncode == 0
        r = h("exec", name, "--", "true")
        assert r.returncode == 1 and \
            f"{name} is not up; start it: bluebox up {name}".encode() in r.stderr, r
        assert h("up", name).returncode == 0
        container = state(h, name)["container"]
        r = h("down", name)
        assert (r.returncode, r.stdout) == (0, f"down {name}\n".encode()), r
        assert containers_of(name) == []
        assert not (h.dir / "home" / "run" / f"{name}.json").exists()
        r = h("down", name)
        assert (r.returncode, r.stdout) == (0, f"{name} is not up\n".encode()), r
        # a lost agent says how to recover
        assert h("up", name).returncode == 0
        podman("rm", "-f", "-t", "0", container)
        r = h("exec", name, "--", "true")
        assert r.returncode == 1 and b"is not responding" in r.stderr and \
            f"bluebox down {name} && bluebox up {name}".encode() in r.stderr, r
        # a stale state is cleaned by up; destroy brings an up sandbox down first
        assert h("up", name).returncode == 0
        r = h("destroy", name, "--data", "-y")
        assert r.returncode == 0, r
        assert containers_of(name) == []
    finally:
        h.close()


def test_rootless_strict(env, bluebox_bin):  # noqa: F811
    user = env["BLUEBOX_TEST_USER"]
    h = Home(bluebox_bin, user=user)
    try:
        name = h.sandbox(f"agstrict-{os.getpid()}",
                         bluefile("none", "isolation: strict\n"))
        assert h("build", name).returncode == 0
        r = h("up", name)
        assert r.returncode == 0, r
        r = h("exec", name, "--", "sh", "-c", "id -u; echo x > /data/f; echo kept > /tmp/k")
        assert (r.returncode, r.stdout) == (0, b"0\n"), r
        r = h("exec", name, "--", "cat", "/tmp/k")
        assert r.stdout == b"kept\n", r
        blob = os.urandom(1 << 20)
        r = h("exec", name, "--", "cat", input=blob)
        assert r.stdout == blob
        sub = int(next(line.split(":")[1] for line in open("/etc/subuid")
                       if line.startswith(user + ":")))
        assert (h.data(name) / "f").stat().st_uid == sub
        token = state(h, name)["token"].encode()
        assert token not in subprocess.run(["ps", "axww", "-o", "args"],
                                           capture_output=True).stdout
        assert h("down", name).returncode == 0
        assert containers_of(name, user=True) == []
    finally:
        h.close()
