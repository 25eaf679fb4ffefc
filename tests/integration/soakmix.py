"""The soak's mix of bluebox commands, for tests/integration/test_soak.py
(small counts) and bench/soak.py (full counts).

Two sandboxes of one home, both uml, 128 MiB, network none:
  cold  warm: 0, timeout 20 s: cold runs, up/down cycles with execs, serve's API, the kills
  warm  warm: 1, timeout 3 s, a warmup that marks the VM: pool claims (`run` served by the pool)

Operations (Soak.mix runs them shuffled, one at a time, each checked: output and exit code):
  run      `bluebox run cold -- echo N`
  updown   `up cold`, its share of the execs (`exec cold -- echo N`), a SIGKILL of an exec client
           mid-command, `down cold`
  claim    wait for a waiting pool VM, `run warm -- …` (it must be the pool's VM)
  serve    `bluebox serve`: up over the API, execs, an exec and a run with timeout_seconds 1
           (124), a run, down; then SIGTERM or SIGINT when idle, or SIGKILL to serve alone
           while it streams a run (its worker, in its own process group, ends the run); the
           last one SIGTERM
  kill-term / kill-int / kill-bluebox / kill-claimer
           a run mid-command: SIGTERM to bluebox, SIGINT to its process group (a terminal's
           Ctrl-C), SIGKILL to bluebox alone (its supervisor stays), SIGKILL to a warm run
  timeout  a warm run over its timeout (124)
Cases of SIGKILL of every owner: kill_group (SIGKILL of a run's whole
process group mid-command; on main today its VM keeps running) and serve_killed_mid_run
(SIGKILL of serve and of the worker streaming its run; on main today its VM sometimes
stops within 3 s and sometimes runs on).

settle() brings the home to its quiet state (nothing up, the pool empty), the state the
baseline is taken in; warm_up() does one of everything first, so what a first use creates
for good (templates, the pool's directory, lock files) is in the baseline."""
import base64
import json
import os
import random
import signal
import subprocess
import time
from dataclasses import dataclass, fields
from pathlib import Path
from types import SimpleNamespace

import census
from test_serve import Conn, Server  # HTTP over the Unix socket; `bluebox serve`

IMAGE = os.environ.get("BLUEBOX_TEST_IMAGE", "localhost/bluebox-test/busybox:latest")
WARMED = "/tmp/.warmed"


@dataclass
class Counts:
    runs: int = 10
    execs: int = 100
    updown: int = 3
    claims: int = 3
    serves: int = 2
    kills: int = 1     # rounds of kill-term, kill-int, kill-bluebox, kill-claimer
    timeouts: int = 1  # warm runs over their timeout (serve adds two API timeouts each)

    def __str__(self):
        return ", ".join(f"{f.name} {getattr(self, f.name)}" for f in fields(self))


FULL = Counts(runs=1000, execs=10000, updown=100, claims=50, serves=20, kills=20, timeouts=20)


def parse_counts(text, base=FULL):
    """"runs=100,execs=1000" over base; a bare number N scales base down by N."""
    c = Counts(**{f.name: getattr(base, f.name) for f in fields(base)})
    if text.isdigit():
        for f in fields(c):
            setattr(c, f.name, max(1, getattr(c, f.name) // int(text)))
        return c
    for item in filter(None, text.split(",")):
        k, v = item.split("=")
        if not hasattr(c, k):
            raise ValueError(f"unknown count {k}")
        setattr(c, k, int(v))
    return c


def bluefile(warm, timeout, extra=""):
    return (f"base: {IMAGE}\nbackend: uml\nram_mib: 128\nnetwork: none\n"
            f"timeout_seconds: {timeout}\nwarm: {warm}\n{extra}")


WARM_BLUEFILE = bluefile(1, 3, f"warmup:\n  - \"touch {WARMED}\"\n")


class Soak:
    def __init__(self, binary, env, home, tag):
        self.bin, self.env, self.home = binary, dict(env, BLUEBOX_HOME=str(home)), str(home)
        self.cold, self.warm = f"soak{tag}c", f"soak{tag}w"
        self.markers = {self.cold, self.warm}
        self.failures = []  # "op: what went wrong"
        self.done = {}      # op -> how many
        self.fd_growth = []  # "process: fds a -> b" of a long-lived process across its life
        self.serial = 0
        self.exit_after = {}  # kill case -> seconds from the signal to bluebox's exit

    # ---- plumbing ---------------------------------------------------------------------------

    def bb(self, *args, timeout=300):
        return subprocess.run([self.bin, *map(str, args)], env=self.env, capture_output=True,
                              stdin=subprocess.DEVNULL, timeout=timeout, cwd="/")

    def check(self, op, r, code=0, out=None):
        got = r.stdout.decode(errors="replace") if isinstance(r.stdout, bytes) else r.stdout
        if r.returncode != code or (out is not None and got != out):
            self.failures.append(f"{op}: exit {r.returncode} (want {code}), stdout {got[-200:]!r}"
                                 f" (want {out!r}), stderr {r.stderr[-400:]!r}")
            return False
        return True

    def count(self, op):
        self.done[op] = self.done.get(op, 0) + 1

    def next(self):
        self.serial += 1
        return self.serial

    def note_containers(self):
        """Remember the podman ids of our containers: leftovers named only by the id (podman's
        exit files, cgroups) are ours too."""
        r = subprocess.run(["podman", "ps", "-a", "--no-trunc", "--format", "{{.ID}} {{.Names}}"],
                           capture_output=True, text=True, cwd="/")
        for line in r.stdout.splitlines():
            cid, _, names = line.partition(" ")
            if self.cold in names or self.warm in names:
                self.markers.add(cid)

    def setup(self):
        for name, body in ((self.cold, bluefile(0, 20)), (self.warm, WARM_BLUEFILE)):
            r = self.bb("new", name)
            assert r.returncode == 0, r
            with open(os.path.join(self.home, "sandboxes", name, "Bluefile"), "w") as f:
                f.write(body)
            r = self.bb("build", name, "-q")
            assert r.returncode == 0, r

    def pool_entries(self):
        d = os.path.join(self.home, "pool", self.warm)
        try:
            return [n for n in os.listdir(d) if not n.startswith(".") and "." in n
                    and ".tmp-" not in n and n.split(".")[1] != "generation"]
        except FileNotFoundError:
            return []

    def wait(self, what, cond, timeout=120):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if cond():
                return True
            time.sleep(0.1)
        self.failures.append(f"timed out waiting for {what}")
        return False

    def started(self, argv, group=True):
        """A bluebox command started in its own session, once its command printed `started`."""
        p = subprocess.Popen([self.bin, *argv], env=self.env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, cwd="/",
                             start_new_session=group)
        line = p.stdout.readline()
        if line != b"started\n":
            p.kill()
            p.wait()
            self.failures.append(f"{argv}: never started: {line!r} {p.stderr.read()[-300:]!r}")
            return None
        return p

    def reap(self, op, p, codes):
        t = time.monotonic()
        try:
            rc = p.wait(60)
            self.exit_after.setdefault(op, []).append(time.monotonic() - t)
        except subprocess.TimeoutExpired:
            p.kill()
            rc = p.wait()
            self.failures.append(f"{op}: bluebox did not exit within 60 s of the signal")
        p.stdout.close()
        err = p.stderr.read()
        p.stderr.close()
        if rc not in codes:
            self.failures.append(f"{op}: exit {rc}, want one of {codes}: {err[-300:]!r}")

    # ---- operations -------------------------------------------------------------------------

    def op_run(self):
        n = self.next()
        self.check("run", self.bb("run", self.cold, "--", "echo", n), 0, f"{n}\n")

    def op_updown(self, execs):
        if not self.check("up", self.bb("up", self.cold)):
            return
        self.note_containers()
        vmm = None
        for i in range(execs):
            n = self.next()
            self.check("exec", self.bb("exec", self.cold, "--", "echo", n), 0, f"{n}\n")
            self.count("exec")
            if i == 0:
                vmm = self.up_vmm()
        first = {pid: self.fds(pid) for pid in vmm or ()}
        p = self.started(["exec", self.cold, "--", "sh", "-c", "echo started; sleep 30"])
        if p:
            p.kill()  # the client only: the command is the up VM's to end
            self.reap("kill-exec", p, (-signal.SIGKILL,))
            self.count("kill-exec")
        self.check("exec after a killed client", self.bb("exec", self.cold, "--", "true"))
        for pid, was in first.items():
            now = self.fds(pid)
            if was is not None and now is not None and now > was + 2:
                self.fd_growth.append(f"up VM process {pid}: fds {was} -> {now} over "
                                      f"{execs} execs")
        self.check("down", self.bb("down", self.cold))

    def up_vmm(self):
        """Host pids of the up VM's bluebox-vmm (its conmon's children)."""
        self.note_containers()
        out = []
        for pid in os.listdir("/proc"):
            try:
                cg = open(f"/proc/{pid}/cgroup").read()
                comm = open(f"/proc/{pid}/comm").read().strip()
            except (OSError, ValueError):
                continue
            if comm == "bluebox-vmm" and any(m in cg for m in self.markers if len(m) == 64):
                out.append(int(pid))
        return out

    @staticmethod
    def fds(pid):
        try:
            return len(os.listdir(f"/proc/{pid}/fd"))
        except OSError:
            return None

    def op_claim(self, cmd=("sh", "-c", f"test -e {WARMED} && echo warm"), code=0, out="warm\n"):
        if self.bb("pool", self.warm).returncode != 0:  # starts the tender when none runs
            self.failures.append("pool: failed")
        if not self.wait("a waiting pool VM",
                         lambda: any(e.endswith(".waiting") for e in self.pool_entries())):
            return
        self.note_containers()
        self.check("claim", self.bb("run", self.warm, "--", *cmd), code, out)

    def op_timeout(self):
        self.op_claim(("sleep", "30"), 124, "")

    def op_kill(self, how):
        if how == "kill-claimer":
            self.op_claim(("true",), 0, "")  # a waiting VM to claim, and one that boots after
            if not self.wait("a waiting pool VM",
                             lambda: any(e.endswith(".waiting") for e in self.pool_entries())):
                return
            argv = ["run", self.warm, "--", "sh", "-c", "echo started; sleep 30"]
        else:
            argv = ["run", self.cold, "--", "sh", "-c", "echo started; sleep 30"]
        p = self.started(argv)
        if not p:
            return
        if how == "kill-term":
            p.send_signal(signal.SIGTERM)
            self.reap(how, p, (143, -signal.SIGTERM))
        elif how == "kill-int":
            os.killpg(p.pid, signal.SIGINT)
            self.reap(how, p, (130, -signal.SIGINT))
        else:
            p.kill()
            self.reap(how, p, (-signal.SIGKILL,))

    def server(self):
        """`bluebox serve` on the home's socket, answering (test_serve's Server, given 30 s
        rather than its 5 on a loaded host, as the SDKs' auto-start is)."""
        srv = Server.__new__(Server)
        try:
            srv.__init__(SimpleNamespace(dir=Path(self.home).parent, env=self.env, bin=self.bin))
            return srv
        except AssertionError:
            if self.wait("serve to answer", srv.answers, 25):
                return srv
        srv.proc.kill()
        srv.proc.wait()
        self.failures.append(f"serve: {srv.err.read_text()[-300:]!r}")
        return None

    def op_serve(self, sig):
        srv, stream = self.server(), None
        if not srv:
            return
        try:
            start_fds = self.fds(srv.proc.pid)
            base = f"/v1/sandboxes/{self.cold}"
            self.api_check("serve up", srv, f"{base}/up", {}, lambda b: b.get("up") is True)
            self.note_containers()
            for _ in range(3):
                n = str(self.next())
                self.api_check("serve exec", srv, f"{base}/exec", {"argv": ["echo", n]},
                               lambda b, n=n: (b.get("exit_code"), b64(b.get("stdout"))) == (0, n + "\n"))
            self.api_check("serve exec timeout", srv, f"{base}/exec",
                           {"argv": ["sleep", "30"], "timeout_seconds": 1},
                           lambda b: (b.get("exit_code"), b.get("timed_out")) == (124, True))
            self.api_check("serve run", srv, f"{base}/run", {"argv": ["echo", "r"]},
                           lambda b: (b.get("exit_code"), b64(b.get("stdout"))) == (0, "r\n"))
            self.api_check("serve run timeout", srv, f"{base}/run",
                           {"argv": ["sleep", "30"], "timeout_seconds": 1},
                           lambda b: b.get("exit_code") == 124)
            self.api_check("serve down", srv, f"{base}/down", {}, lambda b: b.get("up") is False)
            end_fds = self.fds(srv.proc.pid)
            if start_fds is not None and end_fds is not None and end_fds > start_fds + 2:
                self.fd_growth.append(f"serve {srv.proc.pid}: fds {start_fds} -> {end_fds} "
                                      "over 8 requests")
            if sig == signal.SIGKILL:  # serve alone, mid-stream: its worker ends the run
                stream = self.stream_started(srv)
        finally:
            srv.proc.send_signal(sig)
            if stream:
                stream.close()
            try:
                srv.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.failures.append(f"serve: still running 30 s after signal {sig}")
                srv.proc.kill()
                srv.proc.wait()
            srv.err.unlink(missing_ok=True)

    def api_check(self, op, srv, path, body, ok):
        try:
            st, b = srv.call("POST", path, body)
        except OSError as e:
            st, b = None, e
        if st != 200 or not isinstance(b, dict) or not ok(b):
            self.failures.append(f"{op}: HTTP {st} {str(b)[:300]}")

    # ---- lifeline cases ---------------------------------------------------

    def kill_group(self):
        """SIGKILL of a cold run's whole process group (bluebox and its __direct supervisor)
        mid-command: what a harness's timeout or a closed terminal does."""
        p = self.started(["run", self.cold, "--", "sh", "-c", "echo started; sleep 30"])
        if p:
            os.killpg(p.pid, signal.SIGKILL)
            self.reap("kill-group", p, (-signal.SIGKILL,))

    def stream_started(self, srv):
        """A streamed run through serve, once its command printed: the open connection."""
        c = Conn(srv.sock, 60)
        c.request("POST", f"/v1/sandboxes/{self.cold}/run/stream",
                  body=json.dumps({"command": "echo started; sleep 30"}),
                  headers={"Content-Type": "application/json"})
        r = c.getresponse()
        out = ""
        while "started" not in out:  # NDJSON lines, stdout in base64 (docs/API.md)
            line = r.fp.readline()
            if not line:
                self.failures.append("serve mid-run: the stream ended before `started`")
                break
            if line.strip().startswith(b"{"):
                out += b64(json.loads(line).get("stdout"))
        return c

    def serve_killed_mid_run(self):
        """SIGKILL of serve and of the worker that runs its streamed run (each in its own
        process group, src/api/server.c) while the run's command runs: every owner at once."""
        srv = self.server()
        if not srv:
            return
        try:
            c = self.stream_started(srv)
            workers = [int(pid) for pid in os.listdir("/proc") if pid.isdigit()
                       and parent(pid) == srv.proc.pid]
            srv.proc.kill()
            for w in workers:
                try:
                    os.killpg(w, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            c.close()
        finally:
            srv.proc.kill()
            srv.proc.wait()
            srv.err.unlink(missing_ok=True)

    def reap_leftovers(self, before):
        """What a lifeline case left: the next direct launch reaps an orphaned direct run; any
        process of ours still alive after it is killed, so what follows starts clean."""
        self.bb("run", self.cold, "--", "true")
        after = census.take(self.home, self.markers)
        for key, p in after.procs.items():
            if key not in before.procs and p["ours"] and p["pid"] != os.getpid():
                try:
                    os.kill(p["pid"], signal.SIGKILL)
                except ProcessLookupError:
                    pass

    # ---- the mix ----------------------------------------------------------------------------

    def settle(self):
        """The quiet state: nothing up, the pool drained and no tender left; a last run of each
        sandbox (the warm one's with warm: 0, which shrinks its pool)."""
        self.bb("down", self.cold)
        self.check("a last run", self.bb("run", self.cold, "--", "true"))
        path = os.path.join(self.home, "sandboxes", self.warm, "Bluefile")
        with open(path, "w") as f:
            f.write(WARM_BLUEFILE.replace("warm: 1", "warm: 0"))
        self.check("run with warm: 0 (shrinks the pool)", self.bb("run", self.warm, "--", "true"))
        self.wait("the pool to empty", lambda: not self.pool_entries() and not tenders(self.warm))
        with open(path, "w") as f:
            f.write(WARM_BLUEFILE)

    def warm_up(self):
        """One of every kind, so that what first uses create for good is in the baseline."""
        self.op_run()
        self.op_updown(1)
        self.op_claim()
        self.op_serve(signal.SIGTERM)
        self.settle()

    def mix(self, counts, seed=0, progress=None, stop_at=None):
        """The operations of `counts` shuffled, then the quiet state; stop_at (monotonic
        seconds): no operation starts after it. Returns the seconds it took."""
        ops = (["run"] * counts.runs + ["updown"] * counts.updown + ["claim"] * counts.claims
               + ["serve"] * counts.serves + ["timeout"] * counts.timeouts
               + ["kill-term", "kill-int", "kill-bluebox", "kill-claimer"] * counts.kills)
        rng = random.Random(seed)
        rng.shuffle(ops)
        if counts.execs and not counts.updown:
            raise ValueError("execs need up/down cycles")
        per = [counts.execs // counts.updown + (i < counts.execs % counts.updown)
               for i in range(counts.updown)]
        serves = counts.serves
        self.done = {}
        t0 = time.monotonic()
        for i, op in enumerate(ops):
            if stop_at and time.monotonic() > stop_at:
                print(f"  stopped at {stop_at}: {i} of {len(ops)} operations done", flush=True)
                break
            if op == "run":
                self.op_run()
            elif op == "updown":
                self.op_updown(per.pop())
            elif op == "claim":
                self.op_claim()
            elif op == "timeout":
                self.op_timeout()
            elif op == "serve":
                serves -= 1  # SIGKILL mid-stream first, then SIGINT and SIGKILL by turns; the
                # last SIGTERM (as the warm-up's), so that no stale socket is left
                k = counts.serves - 1 - serves
                self.op_serve((signal.SIGKILL, signal.SIGINT)[k % 2] if serves else signal.SIGTERM)
            else:
                self.op_kill(op)
            self.count(op)
            if progress and (i + 1) % progress == 0:
                print(f"  {i + 1}/{len(ops)} operations, {time.monotonic() - t0:.0f} s, "
                      f"{len(self.failures)} failures", flush=True)
        self.settle()
        return time.monotonic() - t0


def b64(s):
    return base64.b64decode(s or "").decode(errors="replace")


def parent(pid):
    try:
        stat = open(f"/proc/{pid}/stat").read()
    except OSError:
        return None
    return int(stat[stat.rindex(")") + 2:].split()[1])


def tenders(name):
    r = subprocess.run(["pgrep", "-f", f"bluebox __tend {name}$"], capture_output=True)
    return r.stdout.split()
