"""bluebox serve end to end on uml: every v1 route (docs/API.md) against a real up sandbox
(real podman, real guest), streaming, files done inside the guest, snapshots, the error
shapes, the socket's rules (owner only, SO_PEERCRED on every connection, stale sockets,
symlinks, --idle, SIGTERM, an upgraded executable), and abuse from a local client."""
import base64
import http.client
import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from test_podman_build import env  # noqa: F401  (session fixture)
from test_runtime import Home

REPO = Path(__file__).resolve().parents[2]
IMAGE = "localhost/bluebox-test/busybox:latest"

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not (REPO / "build" / "bluebox-vmm").exists()
    or not Path("/usr/bin/linux.uml").exists(),
    reason="serve tests need root, podman, build/bluebox-vmm and user-mode-linux")

BLUEFILE = (f"base: {IMAGE}\nbackend: uml\nram_mib: 256\nnetwork: none\n"
            "timeout_seconds: 60\n")


def b64(data):
    return base64.b64encode(data).decode()


def unb64(s):
    return base64.b64decode(s)


class Conn(http.client.HTTPConnection):
    def __init__(self, path, timeout=120):
        super().__init__("localhost", timeout=timeout)
        self.sock_path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.sock_path)


class Server:
    def __init__(self, home, *args, binary=None):
        self.home = home
        self.sock = str(home.dir / "home" / "bluebox.sock")
        self.err = home.dir / f"serve-{time.monotonic_ns()}.err"
        self.proc = subprocess.Popen([binary or home.bin, "serve", *args], env=home.env,
                                     stdout=subprocess.DEVNULL, stderr=open(self.err, "wb"),
                                     cwd="/")
        for _ in range(100):
            if self.answers():
                return
            time.sleep(0.05)
        raise AssertionError(f"serve did not answer: {self.err.read_text()}")

    def answers(self, timeout=2):
        try:
            return self.call("GET", "/v1/version", timeout=timeout)[0] == 200
        except OSError:
            return False

    def call(self, method, path, body=None, raw=None, timeout=120):
        c = Conn(self.sock, timeout)
        try:
            data = raw if raw is not None else (None if body is None else json.dumps(body))
            c.request(method, path, body=data,
                      headers={"Content-Type": "application/json"} if data is not None else {})
            r = c.getresponse()
            payload = r.read()
            try:
                return r.status, json.loads(payload)
            except ValueError:
                return r.status, payload
        finally:
            c.close()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def rss_kib(self):
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        return 0


@pytest.fixture(scope="module")
def box(env, bluebox_bin):  # noqa: F811
    h = Home(bluebox_bin)
    name = h.sandbox(f"serve-{os.getpid()}", BLUEFILE)
    r = h("build", name)
    assert r.returncode == 0, r
    s = Server(h)
    st, body = s.call("POST", f"/v1/sandboxes/{name}/up", {})
    assert st == 200 and body["up"] is True and body["ready_ms"] >= 0, body
    yield h, name, s
    s.stop()
    h("down", name)
    h.close()


def exec_(s, name, **cmd):
    return s.call("POST", f"/v1/sandboxes/{name}/exec", cmd)


# ---- routes ------------------------------------------------------------------------------

def test_version_and_list(box):
    h, name, s = box
    st, v = s.call("GET", "/v1/version")
    assert st == 200 and v["api"] == "v1" and v["version"], v
    st, lst = s.call("GET", "/v1/sandboxes")
    assert st == 200
    me = [x for x in lst if x["name"] == name]
    assert me and me[0]["up"] is True and me[0]["backend"] == "uml", lst
    assert me[0]["network"] == "none" and me[0]["warm"] == 0 and me[0]["base"] == IMAGE
    st, again = s.call("POST", f"/v1/sandboxes/{name}/up", {})
    assert st == 200 and again == {"up": True, "already": True}


def test_exec_argv_command_stdin_env_cwd(box):
    h, name, s = box
    st, r = exec_(s, name, argv=["sh", "-c", 'echo out; echo err >&2; exit 3'])
    assert st == 200, r
    assert (r["exit_code"], unb64(r["stdout"]), unb64(r["stderr"])) == (3, b"out\n", b"err\n")
    assert r["timed_out"] is False and r["truncated"] is False and r["duration_ms"] >= 0
    st, r = exec_(s, name, command='cat; pwd; echo "$FOO"', stdin=b64(b"in\x00put\n"),
                  env={"FOO": "b a r"}, cwd="/tmp")
    assert st == 200 and r["exit_code"] == 0, r
    assert unb64(r["stdout"]) == b"in\x00put\n/tmp\nb a r\n"
    # argv is not a shell: metacharacters arrive as they are
    st, r = exec_(s, name, argv=["echo", "$HOME;", "`id`", "\x01\x7f"])
    assert st == 200 and unb64(r["stdout"]) == "$HOME; `id` \x01\x7f\n".encode(), r


def test_exec_finds_its_program_in_the_callers_path(box):
    """argv[0] is looked up in the PATH the command gets (the caller's env here), as a shell
    would; the agent's own PATH used to decide, so this was exit 127."""
    h, name, s = box
    st, r = exec_(s, name, command="mkdir -p /opt/bbtools && printf '#!/bin/sh\\necho tool "
                  "\"$1\"\\nexit 5\\n' > /opt/bbtools/bbtool && chmod 755 /opt/bbtools/bbtool")
    assert st == 200 and r["exit_code"] == 0, r
    st, r = exec_(s, name, argv=["bbtool", "x"], env={"PATH": "/opt/bbtools:/bin"})
    assert st == 200 and (r["exit_code"], unb64(r["stdout"])) == (5, b"tool x\n"), r
    st, r = exec_(s, name, argv=["bbtool", "x"])  # not in the image's PATH: not found
    assert st == 200 and r["exit_code"] == 127, r
    assert b"cannot run bbtool: No such file or directory" in unb64(r["stderr"]), r


def test_exec_timeout_and_truncation(box):
    h, name, s = box
    st, r = exec_(s, name, command="sleep 30", timeout_seconds=1)
    assert st == 200 and r["exit_code"] == 124 and r["timed_out"] is True, r
    st, r = exec_(s, name, command="head -c 17000000 /dev/zero; echo e >&2")
    assert st == 200 and r["exit_code"] == 0, r
    assert r["truncated"] is True and len(unb64(r["stdout"])) == 16 << 20
    assert unb64(r["stderr"]) == b"e\n"


def test_run_in_a_fresh_vm(box):
    h, name, s = box
    st, r = s.call("POST", f"/v1/sandboxes/{name}/run",
                   {"argv": ["sh", "-c", "cat; pwd; echo $K; cat /proc/uptime"],
                    "stdin": b64(b"xyz\n"), "cwd": "/tmp", "env": {"K": "v"}})
    assert st == 200 and r["exit_code"] == 0, r
    out = unb64(r["stdout"]).decode().splitlines()
    assert out[:3] == ["xyz", "/tmp", "v"], out
    # a fresh VM: it has been up for moments, not since the module began
    assert float(out[3].split()[0]) < 30, out
    st, r = s.call("POST", f"/v1/sandboxes/{name}/run", {"command": "exit 7"})
    assert st == 200 and r["exit_code"] == 7, r


def test_requests_are_logged(box):
    h, name, s = box
    exec_(s, name, argv=["echo", "logged-by-api"])
    log = (h.dir / "home" / "logs" / f"{name}.log").read_text()
    assert "exec (api): 'echo' 'logged-by-api'" in log and "logged-by-api" in log, log[-2000:]


# ---- streaming ---------------------------------------------------------------------------

def stream(s, name, cmd, run=False):
    c = Conn(s.sock, 120)
    c.request("POST", f"/v1/sandboxes/{name}/{'run' if run else 'exec'}/stream",
              body=json.dumps(cmd), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    return c, r


def test_stream_output_arrives_before_the_end(box):
    h, name, s = box
    t0 = time.monotonic()
    c, r = stream(s, name, {"command": "echo first; sleep 4; echo second >&2"})
    assert r.status == 200 and r.getheader("Content-Type") == "application/x-ndjson"
    first = json.loads(r.readline())
    t_first = time.monotonic()
    assert unb64(first["stdout"]) == b"first\n", first
    rest = [json.loads(line) for line in r.read().splitlines() if line.strip()]
    c.close()
    # the first line came while the command slept, not with the rest at its end (how late
    # the exec started on a loaded host does not matter)
    assert time.monotonic() - t_first >= 2, (t_first - t0, time.monotonic() - t0)
    assert {"stderr": b64(b"second\n")} in rest, rest
    assert rest[-1]["exit_code"] == 0 and rest[-1]["timed_out"] is False, rest
    assert rest[-1]["duration_ms"] >= 4000 and time.monotonic() - t0 >= 4


def test_run_stream(box):
    h, name, s = box
    c, r = stream(s, name, {"argv": ["sh", "-c", "echo a; exit 5"]}, run=True)
    lines = [json.loads(x) for x in r.read().splitlines() if x.strip()]
    c.close()
    assert {"stdout": b64(b"a\n")} in lines and lines[-1]["exit_code"] == 5, lines


def test_a_slow_stream_reader_holds_the_command_back_not_the_servers_memory(box):
    # A client that reads nothing for a while: the server must stop reading the worker (its
    # pipe, then the agent's connection, then the command in the guest wait) instead of
    # keeping the output in memory; then everything still arrives, in order and whole.
    h, name, s = box
    mib = 160
    before = s.rss_kib()
    c, r = stream(s, name, {"command": f"dd if=/dev/zero bs=1M count={mib} 2>/dev/null"})
    assert r.status == 200
    c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 10)
    time.sleep(6)
    grown = s.rss_kib() - before
    got, buf, last = 0, b"", None
    while True:
        more = r.read1(1 << 20)
        if not more:
            break
        *lines, buf = (buf + more).split(b"\n")
        for line in lines:
            d = json.loads(line)
            got += len(unb64(d.get("stdout", "")))
            last = d
    c.close()
    assert got == mib << 20 and last["exit_code"] == 0, (got, last)
    assert grown < 32 << 10, f"serve grew by {grown} KiB while its client read nothing"


def guest_ps(s, name):
    st, r = exec_(s, name, argv=["ps"])
    return unb64(r["stdout"]).decode()


@pytest.mark.parametrize("route", ["exec/stream", "exec"])
def test_client_disconnect_kills_the_command(box, route):
    h, name, s = box
    marker = f"sleep {700 + len(route)}"
    c = Conn(s.sock, 30)
    c.request("POST", f"/v1/sandboxes/{name}/{route}",
              body=json.dumps({"command": f"echo started; {marker}; echo never"}))
    deadline = time.monotonic() + 20
    while marker not in guest_ps(s, name):
        assert time.monotonic() < deadline, "the command never started"
        time.sleep(0.2)
    c.sock.shutdown(socket.SHUT_RDWR)
    c.close()
    deadline = time.monotonic() + 15
    while marker in guest_ps(s, name):
        assert time.monotonic() < deadline, "the command outlived its client"
        time.sleep(0.3)


def test_stream_errors_before_the_stream_are_plain(box):
    h, name, s = box
    st, r = s.call("POST", "/v1/sandboxes/no-such-box/exec/stream", {"argv": ["true"]})
    assert st == 404 and r["code"] == "no_sandbox", r
    st, r = s.call("POST", f"/v1/sandboxes/{name}/exec/stream", {"argv": []})
    assert st == 400 and r["code"] == "bad_request", r


# ---- files, inside the guest ---------------------------------------------------------------

def files(s, name, op, **body):
    return s.call("POST", f"/v1/sandboxes/{name}/files/{op}", body)


def test_files_write_read_list(box):
    h, name, s = box
    data = bytes(range(256)) * 300
    st, r = files(s, name, "write", path="/data/dir-test/bin.dat", content=b64(data))
    assert st == 404 and r["code"] == "not_found", r  # no such directory yet
    exec_(s, name, argv=["mkdir", "-p", "/data/dir-test"])
    st, r = files(s, name, "write", path="/data/dir-test/bin.dat", content=b64(data), mode="0640")
    assert st == 200 and r == {"path": "/data/dir-test/bin.dat", "bytes": len(data)}, r
    st, r = files(s, name, "read", path="/data/dir-test/bin.dat")
    assert st == 200 and unb64(r["content"]) == data
    exec_(s, name, command="cd /data/dir-test && mkdir sub && ln -s bin.dat ln && "
                           "printf x > 'odd\nname'")
    st, r = files(s, name, "list", path="/data/dir-test")
    assert st == 200, r
    ents = {e["name"]: e for e in r["entries"]}
    assert ents["bin.dat"] == {"name": "bin.dat", "type": "file", "size": len(data),
                               "mode": "0640"}
    assert ents["sub"]["type"] == "dir" and ents["ln"]["type"] == "link"
    assert ents["odd\nname"]["size"] == 1
    # in the guest: its own files, not the host's
    only = f"/tmp/guest-only-{os.getpid()}"
    exec_(s, name, command=f"echo guest > {only}")
    st, r = files(s, name, "read", path=only)
    assert st == 200 and unb64(r["content"]) == b"guest\n" and not Path(only).exists()
    for op, body, code in [("read", {"path": "/data/nope"}, "not_found"),
                           ("read", {"path": "/data"}, "bad_request"),
                           ("list", {"path": "/data/dir-test/bin.dat"}, "bad_request"),
                           ("read", {"path": "relative"}, "bad_request"),
                           ("read", {"path": "/x", "extra": 1}, "bad_request"),
                           ("write", {"path": "/data/x", "content": "!!"}, "bad_request"),
                           ("write", {"path": "/data/x", "content": "", "mode": "rwx"},
                            "bad_request")]:
        st, r = files(s, name, op, **body)
        assert r["code"] == code, (op, body, r)


def test_a_guest_symlink_cannot_redirect_a_host_write(box, tmp_path):
    """/data is a host directory: a symlink the guest plants there points, on the host, at
    a host path. The API's write happens in the guest, so the host path stays untouched."""
    h, name, s = box
    target = tmp_path / "host-target"
    target.mkdir()
    exec_(s, name, argv=["ln", "-s", str(target), "/data/evil"])
    assert (h.data(name) / "evil").is_symlink()
    st, r = files(s, name, "write", path="/data/evil/planted", content=b64(b"x"))
    assert list(target.iterdir()) == [], r
    st, r = files(s, name, "read", path="/data/evil/../../etc/shadow")
    assert st != 200 or unb64(r["content"]) != Path("/etc/shadow").read_bytes()


# ---- errors ------------------------------------------------------------------------------

@pytest.mark.parametrize("method,path,raw,status,code", [
    ("GET", "/v1/nope", None, 404, "not_found"),
    ("GET", "/v1/sandboxes/x/frobnicate", None, 404, "not_found"),
    ("GET", "/v1/sandboxes/x/exec", None, 405, "method"),
    ("DELETE", "/v1/version", None, 405, "method"),
    ("POST", "/v1/sandboxes/BOX/exec", b"{not json", 400, "bad_request"),
    ("POST", "/v1/sandboxes/BOX/exec", b"[1]", 400, "bad_request"),
    ("POST", "/v1/sandboxes/BOX/exec", b'{"argv": "ls"}', 400, "bad_request"),
    ("POST", "/v1/sandboxes/BOX/exec", b'{"argv": ["ls"], "command": "ls"}', 400, "bad_request"),
    ("POST", "/v1/sandboxes/BOX/exec", b'{"argv": ["ls"], "bogus": 1}', 400, "bad_request"),
    ("POST", "/v1/sandboxes/BOX/exec", b'{"argv": ["ls"], "timeout_seconds": -1}', 400,
     "bad_request"),
    ("POST", "/v1/sandboxes/BOX/exec", b'{"argv": ["ls"], "env": {"A=B": "x"}}', 400,
     "bad_request"),
    ("POST", "/v1/sandboxes/BOX/exec", b'{"argv": ["ls"], "stdin": "%%%"}', 400, "bad_request"),
    ("POST", "/v1/sandboxes/BOX/exec", b'{"argv": ["\xff\xfe"]}', 400, "bad_request"),
    ("POST", "/v1/sandboxes/BOX/exec", b'{"argv": ["a\\u0000b"]}', 400, "bad_request"),
    ("POST", "/v1/sandboxes/BOX/exec", b'{"argv": ["ls"], "argv": ["id"]}', 400, "bad_request"),
    ("POST", "/v1/sandboxes/BOX/up", b'{"x": 1}', 400, "bad_request"),
    ("POST", "/v1/sandboxes/no-such-box/exec", b'{"argv": ["ls"]}', 404, "no_sandbox"),
    ("POST", "/v1/sandboxes/..%2f..%2fetc/exec", b'{"argv": ["ls"]}', 404, "not_found"),
    ("POST", "/v1/sandboxes/../exec", b'{"argv": ["ls"]}', 400, "bad_name"),
    ("POST", "/v1/sandboxes/.hidden/exec", b'{"argv": ["ls"]}', 400, "bad_name"),
    ("POST", "/v1/sandboxes/a%01b/exec", b'{"argv": ["ls"]}', 400, "bad_name"),
    ("POST", "/v1/sandboxes/a%ffb/exec", b'{"argv": ["ls"]}', 400, "bad_name"),
    ("POST", "/v1/sandboxes/a%00b/exec", b'{"argv": ["ls"]}', 400, "bad_request"),
    ("POST", "/v1/sandboxes/" + "a" * 65 + "/exec", b'{"argv": ["ls"]}', 400, "bad_name"),
    ("POST", "/v1/sandboxes/BOX/restore", b'{"snapshot": "../../x"}', 400, "bad_name"),
    ("POST", "/v1/sandboxes/BOX/restore", b'{"snapshot": "/etc/passwd"}', 400, "bad_name"),
    ("POST", "/v1/sandboxes/BOX/snapshots", b'{"name": "../x"}', 400, "bad_name"),
])
def test_bad_requests(box, method, path, raw, status, code):
    h, name, s = box
    before = sorted(os.listdir(h.dir))
    st, r = s.call(method, path.replace("BOX", name), raw=raw)
    assert (st, r["code"]) == (status, code), r
    assert isinstance(r["error"], str) and r["error"]
    assert sorted(os.listdir(h.dir)) == before  # nothing appeared beside the home
    assert s.answers()


# ---- snapshots ---------------------------------------------------------------------------

def test_snapshots_and_restore_with_the_cli_guards(box):
    h, name, s = box
    exec_(s, name, command="echo one > /data/snap.txt")
    st, r = s.call("POST", f"/v1/sandboxes/{name}/snapshots", {"name": "s1"})
    assert st == 200 and r == {"snapshot": "s1"}, r
    st, lst = s.call("GET", f"/v1/sandboxes/{name}/snapshots")
    assert st == 200 and [x["name"] for x in lst] == ["s1"] and lst[0]["bytes"] > 0, lst
    assert lst[0]["created"].endswith("Z")
    exec_(s, name, command="echo two > /data/snap.txt")
    st, r = s.call("POST", f"/v1/sandboxes/{name}/restore", {"snapshot": "s1"})
    assert st == 409 and r["code"] == "is_up", r
    st, r = s.call("POST", f"/v1/sandboxes/{name}/down", {})
    assert st == 200 and r == {"up": False}, r
    st, r = exec_(s, name, argv=["true"])
    assert st == 409 and r["code"] == "not_up", r
    st, r = files(s, name, "read", path="/data/snap.txt")
    assert st == 409 and r["code"] == "not_up", r
    st, r = s.call("POST", f"/v1/sandboxes/{name}/restore", {"snapshot": "nope"})
    assert st == 404 and r["code"] == "not_found", r
    st, r = s.call("POST", f"/v1/sandboxes/{name}/restore", {"snapshot": "s1"})
    assert st == 200 and r == {"restored": "s1"}, r
    assert (h.data(name) / "snap.txt").read_text() == "one\n"
    st, r = s.call("POST", f"/v1/sandboxes/{name}/up", {})
    assert st == 200 and r["up"] is True, r
    st, r = files(s, name, "read", path="/data/snap.txt")
    assert st == 200 and unb64(r["content"]) == b"one\n", r


# ---- abuse -------------------------------------------------------------------------------

def test_fifty_concurrent_execs(box):
    h, name, s = box

    def one(i):
        return exec_(s, name, command=f"echo {i}; sleep 1")

    t0 = time.monotonic()
    with ThreadPoolExecutor(50) as pool:
        futs = [pool.submit(one, i) for i in range(50)]
        # the server keeps answering meanwhile
        time.sleep(0.5)
        # (a server that waited for them would answer after all 50, each taking a second)
        t = time.monotonic()
        assert s.answers(timeout=10) and time.monotonic() - t < 10
        res = [f.result() for f in futs]
    for i, (st, r) in enumerate(res):
        assert st == 200 and r["exit_code"] == 0 and unb64(r["stdout"]) == f"{i}\n".encode(), r
    assert time.monotonic() - t0 < 110


def test_idle_connections_big_bodies_and_slow_headers(box):
    h, name, s = box
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 4096)), hard))
    rss0 = s.rss_kib()
    idle = []
    for _ in range(1000):
        c = socket.socket(socket.AF_UNIX)
        c.connect(s.sock)
        idle.append(c)
    t = time.monotonic()  # (a server that served them in turn would not answer at all)
    assert s.answers(timeout=10) and time.monotonic() - t < 10
    # a slow-loris header: a byte now and then, never finished
    stop = threading.Event()

    def loris():
        c = socket.socket(socket.AF_UNIX)
        c.connect(s.sock)
        try:
            for ch in b"POST /v1/sandboxes/x/exec HTTP/1.1\r\nHost: x\r\nX-Slow: ":
                if stop.wait(0.2):
                    break
                c.send(bytes([ch]))
        except OSError:
            pass
        c.close()

    th = threading.Thread(target=loris)
    th.start()
    # 65 MiB: refused with 413 without the server keeping it
    big = b'{"argv": ["true"], "stdin": "' + b"A" * (65 << 20) + b'"}'
    c = Conn(s.sock, 60)
    try:
        c.request("POST", f"/v1/sandboxes/{name}/exec", body=big)
        status = c.getresponse().status
    except (BrokenPipeError, ConnectionResetError):
        status = 413  # the server answered and closed while we were still sending
    c.close()
    assert status == 413
    assert s.answers()
    st, r = exec_(s, name, argv=["echo", "ok"])
    assert st == 200 and unb64(r["stdout"]) == b"ok\n"
    stop.set()
    th.join()
    for c in idle:
        c.close()
    assert s.proc.poll() is None
    # bounded: no per-connection or per-body growth that stays
    time.sleep(0.5)
    assert s.rss_kib() < rss0 + 32 * 1024, (rss0, s.rss_kib())


def test_another_uid_is_refused_even_on_an_open_socket(box):
    h, name, s = box
    home = h.dir / "home"
    mode = home.stat().st_mode & 0o777
    home.chmod(0o711)
    os.chmod(s.sock, 0o666)
    code = ("import socket,sys\ns=socket.socket(socket.AF_UNIX)\ns.settimeout(5)\n"
            "s.connect(sys.argv[1])\nprint('connected')\n"
            "try:\n    s.sendall(b'GET /v1/version HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n')\n"
            "    print(repr(s.recv(100)))\nexcept OSError as e:\n    print('ERR', e)\n")
    try:
        r = subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
                            "/usr/bin/python3", "-c", code, s.sock],
                           capture_output=True, text=True, timeout=30)
    finally:
        home.chmod(mode)
        os.chmod(s.sock, 0o600)
    assert r.returncode == 0 and "connected" in r.stdout, r  # the socket was open ...
    assert "HTTP/" not in r.stdout, r  # ... and got no answer
    assert "not the owner" in s.err.read_text()
    assert s.answers()


# ---- the socket and the server's life ------------------------------------------------------

def test_socket_mode_and_second_server(box):
    h, name, s = box
    st = os.lstat(s.sock)
    assert st.st_mode & 0o777 == 0o600 and st.st_uid == os.getuid()
    r = h("serve")
    assert r.returncode == 1 and f"already serving on {s.sock}" in r.stderr.decode(), r


@pytest.fixture
def home(env, bluebox_bin):  # noqa: F811
    h = Home(bluebox_bin)
    (h.dir / "home").mkdir(mode=0o700)
    yield h
    h.close()


def test_stale_socket_symlink_and_directory_rules(home, tmp_path):
    sock = home.dir / "home" / "bluebox.sock"
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(sock))
    stale.close()
    s = Server(home)  # the stale socket is replaced
    s.stop()
    assert s.proc.returncode == 0 and not sock.exists()
    target = tmp_path / "target"
    sock.symlink_to(target)
    r = home("serve", "--idle", "1")
    assert r.returncode == 1 and "symlink" in r.stderr.decode(), r
    assert not target.exists() and sock.is_symlink()
    sock.unlink()
    opened = tmp_path / "open"
    opened.mkdir()
    opened.chmod(0o777)
    r = home("serve", "--socket", str(opened / "s.sock"))
    assert r.returncode == 1 and "writable by others" in r.stderr.decode(), r
    assert not (opened / "s.sock").exists()
    r = home("serve", "--socket", "relative.sock")
    assert r.returncode == 2, r
    r = home("serve", "--idle", "soon")
    assert r.returncode == 2 and "--idle" in r.stderr.decode(), r


def test_long_home_falls_back_to_xdg_runtime_dir(env, bluebox_bin, tmp_path):  # noqa: F811
    h = Home(bluebox_bin)
    try:
        deep = h.dir / ("d" * 60) / ("e" * 60)
        deep.mkdir(parents=True)
        # Short on purpose: tmp_path under a pytest-xdist worker's basetemp is long enough to
        # make even the fallback's socket path too long.
        xdg = Path(tempfile.mkdtemp(prefix="bbxdg", dir="/tmp"))
        e = dict(h.env, BLUEBOX_HOME=str(deep / "home"), XDG_RUNTIME_DIR=str(xdg))
        p = subprocess.Popen([h.bin, "serve", "--idle", "2"], env=e, stderr=subprocess.PIPE)
        _, err = p.communicate(timeout=30)
        assert p.returncode == 0, err
        assert f"serving on {xdg}/bluebox-" in err.decode(), err
        e.pop("XDG_RUNTIME_DIR")
        r = subprocess.run([h.bin, "serve"], env=e, capture_output=True, timeout=30)
        assert r.returncode == 1 and b"XDG_RUNTIME_DIR" in r.stderr, r
    finally:
        h.close()
        shutil.rmtree(xdg, ignore_errors=True)


def test_idle_exit(home):
    t = time.monotonic()
    r = home("serve", "--idle", "2s", timeout=30)
    assert r.returncode == 0 and 1.5 < time.monotonic() - t < 15, r
    assert "idle" in r.stderr.decode()
    assert not (home.dir / "home" / "bluebox.sock").exists()


def test_exits_when_its_executable_changes(home, tmp_path):
    copy = tmp_path / "bluebox"
    shutil.copy2(home.bin, copy)
    s = Server(home, binary=str(copy))
    time.sleep(1.5)
    assert s.proc.poll() is None
    new = tmp_path / "bluebox.new"
    shutil.copy2(home.bin, new)
    os.replace(new, copy)  # an upgrade: a new file at the same path
    s.proc.wait(15)
    assert s.proc.returncode == 0 and "changed" in s.err.read_text()


def test_sigterm_tells_running_execs_and_leaves_vms_up(box):
    h, name, s = box
    c, r = stream(s, name, {"command": "echo go; sleep 600"})
    assert json.loads(r.readline())["stdout"] == b64(b"go\n")
    s.proc.send_signal(signal.SIGTERM)
    rest = [json.loads(x) for x in r.read().splitlines() if x.strip()]
    c.close()
    assert rest and "exit_code" in rest[-1] and rest[-1]["exit_code"] != 0, rest
    s.proc.wait(20)
    assert s.proc.returncode == 0
    assert not Path(s.sock).exists()
    # the VM that up started is still up
    r = h("exec", name, "--", "echo", "still-up")
    assert r.returncode == 0 and r.stdout == b"still-up\n", r
    # a new server for whatever runs after this test in the module
    box[2].__init__(h)
