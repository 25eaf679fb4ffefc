"""The agent's authentication (src/abi/chain.h) against the real agent, `bluebox __agent`,
run natively in a network namespace of its own (no VM, so no kernel gate to pass: these
tests speak the protocol themselves). What the agent is given is the chain's head; the
token it was derived from must be nowhere in its memory, a proof the guest could have
sniffed must not get anyone in again, and the chain must roll over to a new epoch without
anyone noticing. Needs root (a network namespace) and a built bluebox."""
import ctypes
import hashlib
import json
import os
import secrets
import socket
import subprocess
import time
from pathlib import Path

import pytest

from test_agent import CHAIN_LEN, chain_value, closed_silently, frame, hello, read_frames

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root for a network namespace")

CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


class Agent:
    """`bluebox __agent` in its own network namespace, given the head of token's chain."""

    def __init__(self, binary, token):
        self.token = token
        head = chain_value(token, 0, CHAIN_LEN).hex()
        self.proc = subprocess.Popen(
            ["unshare", "-n", "--", "sh", "-c", 'ip link set lo up && exec "$0" __agent',
             binary],
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "BLUEBOX_AGENT_HEAD": head},
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd="/")
        self.netns = f"/proc/{self.proc.pid}/ns/net"
        self.chain = {}  # (epoch) -> every value of that epoch's chain, computed once
        deadline = time.monotonic() + 10
        while True:
            try:
                self.connect().close()
                time.sleep(0.2)  # the agent sees that close (and takes its index back)
                break
            except OSError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise AssertionError(f"the agent did not listen: {self.stop()}")
                time.sleep(0.05)

    def connect(self):
        """A TCP connection to the agent's port, made inside its network namespace."""
        me = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        there = os.open(self.netns, os.O_RDONLY)
        try:
            assert _libc.setns(there, CLONE_NEWNET) == 0, ctypes.get_errno()
            try:
                s = socket.socket()
                s.settimeout(10)
            finally:
                assert _libc.setns(me, CLONE_NEWNET) == 0, ctypes.get_errno()
        finally:
            os.close(me)
            os.close(there)
        s.connect(("127.0.0.1", 7700))
        return s

    def value(self, epoch, index):
        if epoch not in self.chain:
            v = chain_value(self.token, epoch, 0)
            values = [v]
            for _ in range(CHAIN_LEN):
                v = hashlib.sha256(v).digest()
                values.append(v)
            self.chain[epoch] = values
        return self.chain[epoch][index]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
        _, err = self.proc.communicate(timeout=10)
        return err.decode(errors="replace")


@pytest.fixture
def agent(bluebox_bin):
    a = Agent(bluebox_bin, secrets.token_hex(32))
    yield a
    a.stop()


def challenge(sock):
    frames = read_frames(sock, until=b"C", timeout=10)
    assert [t for t, _ in frames] == [b"C"], frames
    return json.loads(frames[0][1])


def ping(agent, proof=None, **kw):
    """One connection: challenge, hello (the right proof unless given), the agent's answer.
    Returns (challenge, proof sent, frame types received)."""
    s = agent.connect()
    try:
        ch = challenge(s)
        p = proof if proof is not None else agent.value(ch["epoch"], ch["index"]).hex()
        s.sendall(hello(p, **kw))
        if kw.get("argv"):  # a command: go, and no stdin
            s.sendall(frame(b"G") + frame(b"i"))
        return ch, p, [t for t, _ in read_frames(s, timeout=10)]
    finally:
        s.close()


def test_the_agent_opens_with_a_fresh_index(agent):
    seen = []
    for _ in range(3):
        ch, _, got = ping(agent)
        assert got == [b"R", b"X"], got
        assert ch["epoch"] == 0 and 1 <= ch["index"] < CHAIN_LEN and not ch.get("rotate")
        seen.append(ch["index"])
    assert len(set(seen)) == 3, seen


def test_a_sniffed_proof_is_refused(agent):
    """Everything a guest can learn from watching an owner log in: the proof it sent, what
    follows from it by hashing (the values of indices already used), the head, the token's
    hex text. None of it gets a new connection in; the connection is closed without a word."""
    ch, proof, got = ping(agent)
    assert got == [b"R", b"X"], got
    derived = bytes.fromhex(proof)
    tries = [proof]
    for _ in range(3):
        derived = hashlib.sha256(derived).digest()
        tries.append(derived.hex())
    tries += [agent.value(0, CHAIN_LEN).hex(), agent.token, "0" * 64]
    for t in tries:
        s = agent.connect()
        c2 = challenge(s)
        assert c2["index"] < ch["index"]  # never the spent one again
        s.sendall(hello(t, ["true"]))
        assert closed_silently(s), t
        s.close()
    # the owner, who can compute the value asked for, still gets in
    _, _, got = ping(agent)
    assert got == [b"R", b"X"], got


def connect_at(agent, index, within=10):
    """A connection whose challenge asks for `index`: an unproven connection holds its index
    until the agent has seen it close, so a busy host may need a few tries. Returns the last
    try's (socket, challenge) after `within` seconds, for the caller's assertion."""
    deadline = time.monotonic() + within
    while True:
        s = agent.connect()
        ch = challenge(s)
        if ch["index"] == index or time.monotonic() > deadline:
            return s, ch
        s.close()
        time.sleep(0.05)


def test_an_unproven_index_is_asked_again_and_proven_ones_never(agent):
    """A local user connecting and leaving (or sending garbage) uses up nothing: the index
    goes back. So the chain cannot be burnt from outside."""
    s = agent.connect()
    first = challenge(s)["index"]
    s.close()
    for junk in (b"", hello("1" * 64), b"\x01garbage"):
        s, ch = connect_at(agent, first)
        assert ch["index"] == first, (junk, ch)
        if junk:
            s.sendall(junk)
        s.close()
    s, ch = connect_at(agent, first)
    with s:
        assert ch["index"] == first, ch
        s.sendall(hello(agent.value(ch["epoch"], first).hex()))
        got = [t for t, _ in read_frames(s, timeout=10)]
    assert got == [b"R", b"X"], got
    ch, _, _ = ping(agent)
    assert ch["index"] == first - 1


def test_the_chain_rolls_over_to_a_new_epoch(agent):
    """After half the chain the challenge asks for the next head; the hello that brings it
    starts epoch 1, a challenge of epoch 0 already out is still honoured, and epoch 0's
    values are worthless afterwards."""
    ch = {}
    n = 0
    while not ch.get("rotate"):
        ch, _, got = ping(agent)
        assert got == [b"R", b"X"], (n, got)
        n += 1
        assert n <= CHAIN_LEN // 2 + 1
    assert ch["epoch"] == 0 and ch["index"] < CHAIN_LEN // 2
    pending = agent.connect()
    old = challenge(pending)
    assert old["rotate"] and old["epoch"] == 0
    _, _, got = ping(agent, next_head=agent.value(1, CHAIN_LEN).hex())
    assert got == [b"R", b"X"], got
    ch, _, got = ping(agent)
    assert (ch["epoch"], ch["index"], ch.get("rotate")) == (1, CHAIN_LEN - 1, None), ch
    assert got == [b"R", b"X"]
    pending.sendall(hello(agent.value(0, old["index"]).hex()))
    assert [t for t, _ in read_frames(pending, timeout=10)] == [b"R", b"X"]
    pending.close()
    s = agent.connect()
    c = challenge(s)
    s.sendall(hello(agent.value(0, c["index"]).hex()))  # the right index, the old epoch
    assert closed_silently(s)
    s.close()


def test_a_forged_next_head_is_ignored(agent):
    """Only a client that proved itself may hand over the next head; anyone else is shut
    out before the agent looks at it."""
    s = agent.connect()
    challenge(s)
    s.sendall(hello("2" * 64, next_head="3" * 64))
    assert closed_silently(s)
    s.close()
    _, _, got = ping(agent)
    assert got == [b"R", b"X"], got


def _readable_memory(pid):
    """Every readable mapping of pid, as guest root reads the agent (/proc/<pid>/mem)."""
    out = []
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", 0) as mem:
        for line in maps:
            parts = line.split()
            if not parts[1].startswith("r") or "[vvar" in line or "[vsyscall]" in line:
                continue
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            try:
                mem.seek(lo)
                out.append(mem.read(hi - lo))
            except (OSError, ValueError, OverflowError):
                pass
    return b"".join(out)


def test_the_token_is_nowhere_in_the_agents_memory(agent):
    """The same scan as the escape suite's [token] check, on the agent itself: after a few
    logins its memory holds the head (so the scan does read it) and never the token."""
    for _ in range(3):
        assert ping(agent, argv=["true"])[2] == [b"R", b"X"]
    pid = agent.proc.pid  # unshare execs sh, which execs the agent
    mem = _readable_memory(pid)
    assert len(mem) > 1 << 20
    assert agent.value(0, CHAIN_LEN) in mem
    assert agent.token.encode() not in mem and bytes.fromhex(agent.token) not in mem
    assert agent.value(0, 0) not in mem  # nor the seed the chain starts from
    environ = Path(f"/proc/{pid}/environ").read_bytes()
    assert agent.value(0, CHAIN_LEN).hex().encode() not in environ  # read, then wiped


def test_frames_before_the_challenge_is_answered_change_nothing(agent):
    """A hello sent before reading the challenge (a client racing ahead) is still judged
    against the index the agent picked."""
    s = agent.connect()
    s.sendall(hello(agent.value(0, CHAIN_LEN - 1).hex()))
    frames = read_frames(s, timeout=10)
    assert frames[0][0] == b"C" and json.loads(frames[0][1])["index"] == CHAIN_LEN - 1
    assert [t for t, _ in frames[1:]] == [b"R", b"X"], frames
    s.close()
    s = agent.connect()
    s.sendall(hello(agent.value(0, CHAIN_LEN - 1).hex()))  # the same again: spent
    frames = read_frames(s, timeout=10)
    # refused without a word: the challenge may or may not have left before the agent read
    # the spent proof and dropped the connection
    assert [t for t, _ in frames] in ([], [b"C"]), frames
    assert closed_silently(s)
    s.close()
