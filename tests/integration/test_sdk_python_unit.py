"""The Python SDK (sdk/python) against tests/sdk/fakeserver.py: the requests it sends, the
values and typed errors it returns, streaming, the context manager, the socket path and
autostart. Fast and needs no root; the real server and uml sandboxes are in
test_sdk_python.py."""
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "sdk" / "python"))
FAKE = REPO / "tests" / "sdk" / "fakeserver.py"

import bluebox  # noqa: E402
from bluebox import (BadSocket, Client, CommandFailed, IsUp, NoServer, NotFound, NotUp,  # noqa: E402
                     Refused, Result, Sandbox)


def wait_for(path, proc):
    deadline = time.monotonic() + 60  # a Python start on a loaded CI machine can take seconds
    while time.monotonic() < deadline:
        if os.path.exists(path):
            return
        assert proc.poll() is None, "fake server died"
        time.sleep(0.02)
    raise AssertionError("fake server did not start")


@pytest.fixture
def fake(tmp_path, monkeypatch):
    sock = str(tmp_path / "s.sock")
    log = tmp_path / "requests.log"
    monkeypatch.setenv("FAKE_LOG", str(log))
    p = subprocess.Popen([sys.executable, str(FAKE), "--socket", sock])
    wait_for(sock, p)

    class F:
        socket = sock
        client = Client(socket=sock, autostart=False)

        @staticmethod
        def requests():
            return [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []

    yield F
    p.kill()
    p.wait()


def test_version_and_sandboxes(fake):
    assert fake.client.version() == "0.0.0-fake"
    infos = fake.client.sandboxes()
    assert [i.name for i in infos] == ["box", "other"]
    assert infos[0].up is False and infos[0].backend == "uml" and infos[0].error is None


def test_commands_are_a_shell_string_or_an_argv(fake):
    box = fake.client.sandbox("box")
    assert box.up() is True
    assert box.up() is False  # already up
    r = box.exec("echo $((6*7)); echo err >&2; exit 3")
    assert isinstance(r, Result)
    assert (r.exit_code, r.stdout, r.stderr, r.ok) == (3, b"42\n", b"err\n", False)
    assert r.stdout_text == "42\n" and r.stderr_text == "err\n"
    r = box.exec(["printf", "%s|", "a b", "$HOME"], stdin=b"ignored", env={"K": "V"}, cwd="/",
                 timeout=5)
    assert r.ok and r.stdout == b"a b|$HOME|"
    assert r.check() is r
    sent = [q["body"] for q in fake.requests() if q["path"].endswith("/exec")]
    assert sent[0] == {"command": "echo $((6*7)); echo err >&2; exit 3"}
    assert sent[1] == {"argv": ["printf", "%s|", "a b", "$HOME"], "stdin": "aWdub3JlZA==",
                       "env": {"K": "V"}, "cwd": "/", "timeout_seconds": 5}
    assert box.exec("cat", stdin="héllo").stdout == "héllo".encode()
    with pytest.raises(ValueError):
        box.exec([])
    with pytest.raises(TypeError):
        box.exec(b"echo")  # type: ignore[arg-type]


def test_check_raises_command_failed_with_the_result(fake):
    box = fake.client.sandbox("box")
    box.up()
    with pytest.raises(CommandFailed) as e:
        box.exec("echo oops >&2; exit 7").check()
    assert e.value.code == "command_failed" and e.value.result.exit_code == 7
    assert "exited 7: oops" in str(e.value)
    r = box.run(["sh", "-c", "sleep 5"], timeout=0.3)
    assert (r.exit_code, r.timed_out, r.ok) == (124, True, False)
    with pytest.raises(CommandFailed, match="timed out"):
        r.check()


def test_typed_errors(fake):
    with pytest.raises(NotFound) as e:
        fake.client.sandbox("nope").up()
    assert (e.value.code, e.value.status) == ("no_sandbox", 404)
    assert isinstance(e.value, bluebox.BlueboxError)
    with pytest.raises(NotUp) as e:
        fake.client.sandbox("box").exec("true")
    assert (e.value.code, e.value.status) == ("not_up", 409)
    assert "bluebox up box" in str(e.value)
    with pytest.raises(NotUp):
        fake.client.sandbox("box").stream("true")
    box = fake.client.sandbox("box")
    box.up()
    with pytest.raises(IsUp):
        box.restore("s1")
    # names are one path segment: "../x" cannot reach another route
    with pytest.raises(NotFound):
        fake.client.sandbox("../version").down()
    assert fake.requests()[-1]["path"] == "/v1/sandboxes/..%2Fversion/down"


def test_files(fake):
    box = fake.client.sandbox("box")
    box.up()
    assert box.write_file("/data/a.txt", "hi\n") == 3
    assert box.write_file("/data/b.bin", b"\0\xff", mode=0o600) == 2
    assert box.read_file("/data/a.txt") == b"hi\n"
    ents = box.list_dir("/data")
    assert [(e.name, e.type, e.size, e.mode) for e in ents] == [("a.txt", "file", 3, "0644"),
                                                                ("b.bin", "file", 2, "0600")]
    with pytest.raises(ValueError):
        box.write_file("/data/x", b"", mode="rw")


def test_snapshots(fake):
    box = fake.client.sandbox("box")
    assert box.snapshot("before") == "before"
    assert [s.name for s in box.snapshots()] == ["s1"]
    assert box.restore("s1") == "s1"


def test_fork_diff_apply_discard(fake):
    box = fake.client.sandbox("box")
    with pytest.raises(Refused) as e:
        box.diff()
    assert (e.value.code, e.value.status) == ("refused", 409)
    assert "box is not a fork" in str(e.value)
    f = box.fork("box-f")
    assert isinstance(f, Sandbox) and f.name == "box-f"
    assert fake.requests()[-1] == {"method": "POST", "path": "/v1/sandboxes/box/fork",
                                   "body": {"fork": "box-f"}}
    with pytest.raises(Refused):
        f.fork("box-ff")
    f.up()
    f.write_file("/data/new.txt", "x")
    d = f.diff()
    assert (d.parent, len(d), d.skipped) == ("box", 1, 0)
    assert d.changes[0] == bluebox.Change(kind="A", path="/data/new.txt")
    with pytest.raises(IsUp):
        f.apply()
    f.down()
    assert [c.path for c in f.apply().changes] == ["/data/new.txt"]
    assert len(f.diff()) == 0
    f.up()
    f.write_file("/data/gone.txt", "y")
    f.down()
    assert len(f.discard()) == 1 and len(f.diff()) == 0
    assert [r["path"] for r in fake.requests()[-2:]] == ["/v1/sandboxes/box-f/discard",
                                                          "/v1/sandboxes/box-f/diff"]


def test_stream_yields_chunks_as_they_happen(fake):
    box = fake.client.sandbox("box")
    box.up()
    t0 = time.monotonic()
    seen = []
    s = box.stream("echo one; sleep 1; echo two")
    for name, chunk in s:
        seen.append((name, chunk, time.monotonic() - t0))
    assert [(n, c) for n, c, _ in seen] == [("stdout", b"one\n"), ("stdout", b"two\n")]
    assert seen[0][2] < 0.8 <= seen[1][2], seen  # the first chunk came before the end
    assert s.result is not None and s.result.ok and s.result.stdout == b"one\ntwo\n"
    r = box.stream(["sh", "-c", "exit 5"], fresh=True).wait()
    assert r.exit_code == 5
    assert fake.requests()[-1]["path"] == "/v1/sandboxes/box/run/stream"


def wait_killed(fake, n):
    for _ in range(100):
        if sum(1 for q in fake.requests() if q.get("killed")) >= n:
            return
        time.sleep(0.05)
    raise AssertionError("the server did not see the client go")


def test_closing_a_stream_kills_the_command(fake):
    box = fake.client.sandbox("box")
    box.up()
    with box.stream("echo start; sleep 30; echo never") as s:
        it = iter(s)
        assert next(it) == ("stdout", b"start\n")
        time.sleep(0.2)
        assert not any(q.get("killed") for q in fake.requests())  # still open, still running
    wait_killed(fake, 1)
    # a plain loop left early does it too
    for name, chunk in box.stream("echo start; sleep 30; echo never"):
        assert chunk == b"start\n"
        break
    wait_killed(fake, 2)


def test_context_manager_downs_only_what_it_upped(fake):
    box = fake.client.sandbox("box")
    with box as b:
        assert b is box and b.exec("true").ok
    assert [q["path"].rsplit("/", 1)[1] for q in fake.requests()] == ["up", "exec", "down"]
    box.up()
    with box:
        pass
    assert fake.client.sandboxes()[0].up is True  # was up before: left up
    with pytest.raises(RuntimeError):
        with Sandbox("other", client=fake.client):
            raise RuntimeError("boom")
    assert fake.client.sandboxes()[1].up is False  # down on exit, exception or not


def test_socket_path_is_the_servers(monkeypatch, tmp_path):
    monkeypatch.setenv("BLUEBOX_HOME", "/srv/bb/")
    assert bluebox.socket_path() == "/srv/bb/bluebox.sock"
    monkeypatch.delenv("BLUEBOX_HOME")
    monkeypatch.setenv("HOME", "/home/u")
    assert bluebox.socket_path() == "/home/u/.bluebox/bluebox.sock"
    long_home = "/var/" + "x" * 100
    monkeypatch.setenv("BLUEBOX_HOME", long_home)
    monkeypatch.setenv("XDG_RUNTIME_DIR", "/run/user/7")
    h = hashlib.sha256(long_home.encode()).digest()[:6].hex()
    assert bluebox.socket_path() == f"/run/user/7/bluebox-{h}.sock"
    monkeypatch.setenv("XDG_RUNTIME_DIR", "/run/" + "r" * 90)
    with pytest.raises(BadSocket, match="XDG_RUNTIME_DIR is too long"):
        bluebox.socket_path()
    monkeypatch.delenv("XDG_RUNTIME_DIR")
    with pytest.raises(BadSocket, match="too long"):
        bluebox.socket_path()
    monkeypatch.setenv("BLUEBOX_HOME", "relative")
    with pytest.raises(BadSocket):
        bluebox.socket_path()


def test_no_server_without_autostart(tmp_path):
    c = Client(socket=str(tmp_path / "none.sock"), autostart=False)
    with pytest.raises(NoServer, match="start one: bluebox serve") as e:
        c.version()
    assert e.value.code == "no_server"


def test_autostart_runs_serve_detached_and_retries(tmp_path, monkeypatch):
    args = tmp_path / "args"
    fakebin = tmp_path / "bluebox"
    pidfile = tmp_path / "pid"
    fakebin.write_text(f"#!/bin/sh\necho \"$@\" > {args}\necho $$ > {pidfile}\n"
                       f"exec {sys.executable} {FAKE} \"$@\"\n")
    fakebin.chmod(0o755)
    sock = str(tmp_path / "auto.sock")
    monkeypatch.setenv("BLUEBOX_BIN", str(fakebin))
    c = Client(socket=sock, idle="2m")
    try:
        assert c.sandboxes()[0].name == "box"
        assert args.read_text().split() == ["serve", "--socket", sock, "--idle", "2m"]
        # it answers the next client without another start
        args.unlink()
        assert Client(socket=sock).version() == "0.0.0-fake"
        assert not args.exists()
    finally:
        os.kill(int(pidfile.read_text()), 9)  # the server this test started


def test_autostart_failure_says_why(tmp_path):
    bad = tmp_path / "bluebox"
    bad.write_text("#!/bin/sh\necho 'bluebox: cannot serve here' >&2\nexit 1\n")
    bad.chmod(0o755)
    c = Client(socket=str(tmp_path / "x.sock"), binary=str(bad))
    with pytest.raises(NoServer, match="exited with status 1: bluebox: cannot serve here"):
        c.version()
    c = Client(socket=str(tmp_path / "x.sock"), binary=str(tmp_path / "missing"))
    with pytest.raises(NoServer, match="cannot start"):
        c.version()


def test_pip_builds_the_package_offline(tmp_path):
    """The pyproject is one pip accepts with no index: the wheel has the package and py.typed."""
    src = tmp_path / "src"  # setuptools builds in the source tree: not in the checkout
    shutil.copytree(REPO / "sdk" / "python", src, ignore=shutil.ignore_patterns("__pycache__"))
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-index",
                        "--no-build-isolation", "-q", "-w", str(tmp_path), str(src)],
                       capture_output=True, text=True, cwd=tmp_path)
    if r.returncode != 0 and "No module named pip" in r.stderr:
        pytest.skip("pip is not installed")
    assert r.returncode == 0, r.stderr
    wheel, = tmp_path.glob("bluebox-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "bluebox/py.typed" in names and "bluebox/_client.py" in names, names


@pytest.mark.parametrize("long_home", [False, True])
def test_socket_path_agrees_with_bluebox_serve(monkeypatch, request, long_home):
    """`bluebox serve` with no --socket listens where socket_path() looks (both forms)."""
    binary = os.environ.get("BLUEBOX_BIN", str(REPO / "build" / "bluebox"))
    # Not tmp_path: under a pytest-xdist worker's basetemp it is long enough to push both the
    # short home's socket and the fallback's past a unix socket path's limit.
    base = Path(tempfile.mkdtemp(prefix="bbsock", dir="/tmp"))
    request.addfinalizer(lambda: shutil.rmtree(base, ignore_errors=True))
    home = base / ("h" * 100 if long_home else "h") / "home"
    home.mkdir(parents=True, mode=0o700)
    run = base / "run"
    run.mkdir(mode=0o700)
    monkeypatch.setenv("BLUEBOX_HOME", str(home))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(run))
    expect = bluebox.socket_path()
    assert expect.startswith(str(run) if long_home else str(home))
    p = subprocess.Popen([binary, "serve"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE)
    try:
        for _ in range(250):
            if os.path.exists(expect) or p.poll() is not None:
                break
            time.sleep(0.02)
        assert Client(autostart=False).version(), "no answer"
    finally:
        p.terminate()
        err = p.communicate(timeout=30)[1].decode()
    assert f"serving on {expect}" in err, err
