"""The Python SDK end to end: a real `bluebox serve` (started by the SDK itself, from no
server) and a real uml sandbox: up/exec/run/stream/files/snapshots, the context manager,
typed errors, and docs/sdks.md's example run as written. Needs root, podman and uml."""
import os
import subprocess
import sys
import time

import pytest

from test_podman_build import env  # noqa: F401  (session fixture)
from test_runtime import IMAGE, REPO, UML, Home

sys.path.insert(0, str(REPO / "sdk" / "python"))
sys.path.insert(0, str(REPO / "tests" / "sdk"))

import bluebox  # noqa: E402
from bluebox import (BadRequest, BlueboxError, Client, CommandFailed, IsUp, NotBuilt,  # noqa: E402
                     NotFound, NotUp, Sandbox)
from e2e import docs_block, server_pid, stop_server  # noqa: E402

pytestmark = [UML, pytest.mark.skipif(os.geteuid() != 0, reason="integration tests need root")]


@pytest.fixture(scope="module")
def world(env, bluebox_bin):  # noqa: F811
    """A home with one built uml sandbox; BLUEBOX_HOME/BLUEBOX_BIN point at it for the SDK
    (and for the server it starts, which inherits them)."""
    home = Home(bluebox_bin)
    saved = {k: os.environ.get(k) for k in ("BLUEBOX_HOME", "BLUEBOX_BIN")}
    os.environ["BLUEBOX_HOME"] = home.env["BLUEBOX_HOME"]
    os.environ["BLUEBOX_BIN"] = bluebox_bin
    name = home.sandbox(f"sdkpy-{os.getpid()}", f"base: {IMAGE}\nbackend: uml\nram_mib: 256\n")
    r = home("build", name)
    assert r.returncode == 0, r
    home.sandbox(f"sdkpy-unbuilt-{os.getpid()}", f"base: {IMAGE}\nbackend: uml\n")
    sock = bluebox.socket_path()
    try:
        yield home, name, sock
    finally:
        stop_server(sock)
        home("down", name)
        home.close()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def test_autostart_from_no_server(world, bluebox_bin):
    home, name, sock = world
    assert sock == home.env["BLUEBOX_HOME"] + "/bluebox.sock"
    assert server_pid(sock) is None
    c = Client()  # socket and binary from the environment, autostart on
    version = subprocess.run([bluebox_bin, "--version"], capture_output=True, text=True).stdout
    assert c.version() in version
    pid = server_pid(sock)
    assert pid is not None
    # detached: its own session, not this test's
    assert os.getsid(pid) == pid != os.getsid(0)
    info = {i.name: i for i in c.sandboxes()}[name]
    assert (info.up, info.backend) == (False, "uml")


def test_errors(world):
    home, name, _ = world
    with pytest.raises(NotFound) as e:
        Sandbox("no-such-box").up()
    assert (e.value.code, e.value.status) == ("no_sandbox", 404)
    box = Sandbox(name)
    with pytest.raises(NotUp) as e:
        box.exec("true")
    assert (e.value.code, e.value.status) == ("not_up", 409)
    with pytest.raises(NotUp):
        box.read_file("/etc/hostname")
    with pytest.raises(NotUp):
        box.stream("true")
    with pytest.raises(NotBuilt) as e:
        Sandbox(f"sdkpy-unbuilt-{os.getpid()}").up()
    assert (e.value.code, e.value.status) == ("not_built", 409)
    assert "bluebox build" in str(e.value)
    with pytest.raises(BadRequest) as e:  # refused before it is sent
        box.write_file("/data/huge", b"\0" * (49 << 20))
    assert (e.value.code, e.value.status) == ("too_large", 413)
    with pytest.raises(BlueboxError) as e:
        Sandbox("../etc").up()
    assert e.value.status in (400, 404) and e.value.code in ("bad_name", "not_found"), e.value


def test_run_in_a_fresh_vm(world):
    _, name, _ = world
    box = Sandbox(name)
    r = box.run("echo out; echo err >&2; uname -r; exit 3")
    assert (r.exit_code, r.stderr, r.ok) == (3, b"err\n", False), r
    out, kernel = r.stdout_text.splitlines()
    assert out == "out" and kernel != os.uname().release  # a guest kernel, not the host's
    r = box.run(["cat"], stdin=b"\0binary\xff")
    assert (r.exit_code, r.stdout) == (0, b"\0binary\xff"), r


def test_up_exec_files_stream_in_a_with_block(world):
    home, name, _ = world
    with Sandbox(name) as box:
        assert {i.name: i for i in box.client.sandboxes()}[name].up is True
        # state carries over between execs
        box.exec("echo kept > /tmp/state").check()
        assert box.exec(["cat", "/tmp/state"]).stdout == b"kept\n"
        r = box.exec("echo $GREETING; pwd", env={"GREETING": "hi"}, cwd="/tmp")
        assert r.stdout_text == "hi\n/tmp\n", r
        with pytest.raises(CommandFailed) as e:
            box.exec("echo nope >&2; exit 9").check()
        assert e.value.result.exit_code == 9 and "nope" in str(e.value)
        r = box.exec(["sleep", "30"], timeout=1)
        assert (r.exit_code, r.timed_out) == (124, True), r
        # files, inside the guest
        blob = os.urandom(300_000)
        assert box.write_file("/data/blob.bin", blob) == len(blob)
        assert box.read_file("/data/blob.bin") == blob
        box.write_file("/data/run.sh", "#!/bin/sh\necho ran\n", mode="0755")
        assert box.exec("/data/run.sh").stdout == b"ran\n"
        ents = {e.name: e for e in box.list_dir("/data")}
        assert ents["blob.bin"].size == len(blob) and ents["blob.bin"].type == "file"
        assert ents["run.sh"].mode == "0755"
        assert (home.data(name) / "blob.bin").read_bytes() == blob  # /data is the sandbox's
        # streaming: the first line arrives while the command is still running
        t0 = time.monotonic()
        seen = []
        s = box.stream("echo one; sleep 2; echo two >&2; exit 4")
        for stream, chunk in s:
            seen.append((stream, chunk, time.monotonic() - t0))
        assert [(a, b) for a, b, _ in seen] == [("stdout", b"one\n"), ("stderr", b"two\n")], seen
        assert seen[1][2] - seen[0][2] >= 1.5, seen  # not all delivered at the end
        assert (s.result.exit_code, s.result.stdout, s.result.stderr) == (4, b"one\n", b"two\n")
        # leaving the loop early kills the command in the guest
        for _, chunk in box.stream("echo started; exec sleep 313"):
            assert chunk == b"started\n"
            assert "sleep 313" in box.exec("ps -o args").stdout_text  # running, seen by ps
            break
        for _ in range(100):
            if "sleep 313" not in box.exec("ps -o args").stdout_text:
                break
            time.sleep(0.1)
        else:
            raise AssertionError("the streamed command outlived its client")
    # it was down before the with block: down again after it
    assert {i.name: i for i in Client().sandboxes()}[name].up is False


def test_with_block_leaves_an_up_sandbox_up(world):
    _, name, _ = world
    box = Sandbox(name)
    assert box.up() is True
    try:
        with Sandbox(name) as again:
            assert again.exec("true").ok
        assert {i.name: i for i in Client().sandboxes()}[name].up is True
        with pytest.raises(IsUp):
            box.restore("anything")
    finally:
        box.down()


def test_run_stream_and_snapshots(world):
    home, name, _ = world
    box = Sandbox(name)
    r = box.stream("for i in 1 2 3; do echo $i; done", fresh=True).wait()
    assert (r.exit_code, r.stdout) == (0, b"1\n2\n3\n"), r
    (home.data(name) / "marker").write_text("v1")
    snap = box.snapshot("sdk-snap")
    assert snap == "sdk-snap"
    assert "sdk-snap" in [s.name for s in box.snapshots()]
    (home.data(name) / "marker").write_text("v2")
    assert box.restore("sdk-snap") == "sdk-snap"
    assert (home.data(name) / "marker").read_text() == "v1"


def test_docs_example(world, tmp_path):
    """docs/sdks.md's Python example, as written, against this sandbox."""
    home, name, _ = world
    code = docs_block("Python SDK", "python")
    assert len(code.splitlines()) <= 12, "the docs/sdks.md example should stay about 10 lines"
    assert '"demo"' in code
    (tmp_path / "example.py").write_text(code.replace('"demo"', f'"{name}"'))
    r = subprocess.run([sys.executable, str(tmp_path / "example.py")], capture_output=True,
                       text=True, timeout=300, cwd=tmp_path,
                       env=dict(os.environ, PYTHONPATH=str(REPO / "sdk" / "python")))
    assert r.returncode == 0, r.stderr
    assert r.stdout == "42\nhello from the host\n", r
