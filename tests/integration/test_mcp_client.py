"""`bluebox mcp` driven by a real MCP client that nobody here wrote: the official MCP
TypeScript SDK's `Client` with its `StdioClientTransport` (tests/mcp/client.mjs, installed by
scripts/deps.sh with npm from tests/mcp/package-lock.json). It lists the tools and calls up,
exec, write_file, read_file, run and down against a real uml sandbox; the calls go through
the same in-process API handler as `bluebox serve`."""
import json
import os
import shlex
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from test_podman_build import env  # noqa: F401  (session fixture)
from test_runtime import Home, containers_of

REPO = Path(__file__).resolve().parents[2]
CLIENT_DIR = REPO / "tests" / "mcp"
IMAGE = "localhost/bluebox-test/busybox:latest"
SDK = CLIENT_DIR / "node_modules" / "@modelcontextprotocol" / "sdk" / "package.json"

pytestmark = [
    pytest.mark.skipif(
        os.geteuid() != 0 or not (REPO / "build" / "bluebox-vmm").exists()
        or not Path("/usr/bin/linux.uml").exists(),
        reason="the MCP client test needs root, podman, build/bluebox-vmm and user-mode-linux"),
    pytest.mark.skipif(
        shutil.which("node") is None or not SDK.exists(),
        reason="the MCP client test needs node and tests/mcp/node_modules (make deps installs "
               "them)"),
]

NOTE_PATH = "/data/it's a \"note\".txt"
NOTE = "héllo ✓ — naïve café\nline two\n\ttabbed $HOME `id` $(id)\n"

STEPS = [
    ("list", "list_sandboxes", {}),
    ("exec_down", "exec", {"command": "true"}),
    ("write_down", "write_file", {"path": "/data/x", "content": "x"}),
    ("up", "up", {}),
    ("up_again", "up", {}),
    ("exec", "exec", {"command": "echo hello; echo oops >&2; exit 3"}),
    ("stdin", "exec", {"command": "tr a-z A-Z", "stdin": "piped text\n"}),
    ("write", "write_file", {"path": NOTE_PATH, "content": NOTE}),
    ("read", "read_file", {"path": NOTE_PATH}),
    ("bytes", "exec", {"command": f"wc -c < {shlex.quote(NOTE_PATH)}"}),
    ("read_missing", "read_file", {"path": "/data/no-such-file"}),
    ("big", "exec", {"command": "head -c 100000 /dev/zero | tr '\\000' a"}),
    ("binary", "exec", {"command": "printf 'ok\\377\\000end'"}),
    ("timeout", "exec", {"command": "sleep 30", "timeout_seconds": 1}),
    ("tmp", "exec", {"command": "echo kept > /tmp/mcp-tmp && cat /tmp/mcp-tmp"}),
    ("path", "exec", {"command": "mkdir -p /usr/local/sbin && printf '#!/bin/sh\\necho in "
                                 "sbin\\n' > /usr/local/sbin/bbmcp && chmod 755 "
                                 "/usr/local/sbin/bbmcp && bbmcp && exec bbmcp"}),
    ("bad_args", "exec", {"cmd": "true"}),
    ("restore", "restore", {"snapshot": "s"}),
    ("list_up", "list_sandboxes", {}),
    ("down", "down", {}),
    ("exec_after_down", "exec", {"command": "true"}),
    ("run", "run", {"command": f"cat {shlex.quote(NOTE_PATH)}; ls /tmp/mcp-tmp",
                    "timeout_seconds": 60}),
]


def bluefile():
    return (f"base: {IMAGE}\nbackend: uml\nram_mib: 256\nnetwork: none\n"
            f"timeout_seconds: 30\n")


@pytest.fixture(scope="module")
def report(env, bluebox_bin, tmp_path_factory):  # noqa: F811
    """One `bluebox mcp` session of the SDK's client through every step above."""
    h = Home(bluebox_bin)
    name = h.sandbox(f"mcp-{os.getpid()}", bluefile())
    r = h("build", name)
    assert r.returncode == 0, r
    steps = []
    for label, tool, args in STEPS:
        args = dict(args)
        if tool != "list_sandboxes" and "cmd" not in args:
            args = {"sandbox": name, **args}
        timeout_ms = 300_000 if tool in ("up", "run") else 60_000
        steps.append({"label": label, "tool": tool, "arguments": args, "timeout_ms": timeout_ms})
    plan = tmp_path_factory.mktemp("mcp") / "steps.json"
    plan.write_text(json.dumps({"steps": steps}))
    try:
        p = subprocess.run(["node", str(CLIENT_DIR / "client.mjs"), h.bin, str(plan)],
                           env=h.env, cwd=CLIENT_DIR, capture_output=True, timeout=900)
        assert p.returncode == 0, p
        rep = json.loads(p.stdout)
        rep["name"] = name
        rep["stderr"] = p.stderr.decode()
        rep["left"] = containers_of(name)
        log = h.dir / "home" / "logs" / f"{name}.log"
        rep["log"] = log.read_text(errors="replace") if log.exists() else ""
        yield rep
    finally:
        h("down", name)
        h.close()


def step(report, label):
    return report["steps"][label]


def ok_text(report, label):
    s = step(report, label)
    assert "error" not in s and s["isError"] is False and s["types"] == ["text"], (label, s)
    return s["text"]


def tool_error(report, label):
    s = step(report, label)
    assert "error" not in s and s["isError"] is True, (label, s)
    return s["text"]


def test_the_sdk_client_connects_and_lists_the_tools(report):
    assert report["server"]["name"] == "bluebox"
    assert "tools" in report["capabilities"]
    assert "list_sandboxes" in report["instructions"]
    names = [t["name"] for t in report["tools"]]
    assert names == ["list_sandboxes", "up", "down", "exec", "run", "write_file", "read_file",
                     "snapshot", "fork", "diff", "apply", "discard"]
    exec_tool = next(t for t in report["tools"] if t["name"] == "exec")
    assert exec_tool["inputSchema"]["additionalProperties"] is False


def test_list_sandboxes_shows_the_sandbox_and_whether_it_is_up(report):
    before = json.loads(ok_text(report, "list"))
    after = json.loads(ok_text(report, "list_up"))
    assert [(s["name"], s["up"]) for s in before] == [(report["name"], False)]
    assert [(s["name"], s["up"]) for s in after] == [(report["name"], True)]


def test_up_and_down(report):
    assert ok_text(report, "up").startswith(f"{report['name']} is up (ready in ")
    assert "already up" in ok_text(report, "up_again")
    assert ok_text(report, "down") == f"{report['name']} is down"
    assert report["left"] == [], "down left the VM's container behind"


def test_exec_before_up_and_after_down_is_a_tool_error(report):
    for label in ("exec_down", "write_down", "exec_after_down"):
        assert "not_up" in tool_error(report, label), label


def test_exec_reports_exit_code_and_both_streams_and_a_failure_is_not_an_error(report):
    text = ok_text(report, "exec")
    first, rest = text.split("\n", 1)
    assert first.startswith("exit code 3 in ") and first.endswith(" ms"), text
    assert rest == "stdout:\nhello\nstderr:\noops\n", text


def test_exec_feeds_stdin(report):
    assert ok_text(report, "stdin").endswith("stdout:\nPIPED TEXT\nstderr:\n")


def test_write_file_then_read_file_round_trips_in_the_guest(report):
    n = len(NOTE.encode())
    assert ok_text(report, "write") == f"wrote {n} bytes to {NOTE_PATH}"
    assert ok_text(report, "read") == NOTE
    # the guest's own view of the file: the same bytes
    assert f"stdout:\n{n}\n" in ok_text(report, "bytes")


def test_read_file_of_a_missing_file_is_a_tool_error(report):
    assert "no-such-file" in tool_error(report, "read_missing")


def test_output_is_clipped_at_64_kib(report):
    text = ok_text(report, "big")
    assert "stdout:\n" + "a" * 65536 + "\n[... 34464 more bytes not shown]\nstderr:\n" in text


def test_bytes_that_are_not_utf8_arrive_as_replacement_characters(report):
    assert "stdout:\nok\ufffd\ufffdend\n" in ok_text(report, "binary")


def test_a_timeout_is_a_result(report):
    first = ok_text(report, "timeout").split("\n")[0]
    assert first.startswith("exit code 124 in ") and first.endswith(" ms (timed out)")


def test_exec_finds_programs_in_the_images_path(report):
    """A program in a directory of the image's PATH that libc's default lacks
    (/usr/local/sbin) is found, as a shell finds it."""
    text = ok_text(report, "path")
    assert text.count("in sbin") == 2 and "exit code 0" in text, text


def test_an_up_sandbox_keeps_tmp_between_execs_and_run_gets_a_fresh_vm(report):
    assert "stdout:\nkept\n" in ok_text(report, "tmp")
    text = ok_text(report, "run")
    # a fresh VM: /data has the file written through the up VM, /tmp is empty again
    assert text.startswith("exit code 1 in "), text
    assert f"stdout:\n{NOTE}stderr:\n" in text and "mcp-tmp" in text.split("stderr:")[1]


def test_bad_arguments_and_unoffered_tools_are_protocol_errors(report):
    assert step(report, "bad_args")["error"]["code"] == -32602
    e = step(report, "restore")["error"]
    assert e["code"] == -32602 and "unknown tool: restore" in e["message"]


def test_nothing_but_protocol_on_stdout(report):
    # the SDK's transport would have failed the session on a stray stdout line; stderr holds
    # no protocol either
    assert '"jsonrpc"' not in report["stderr"]


def test_calls_go_through_the_api_handler_and_are_logged_as_mcp(report):
    assert "exec (mcp)" in report["log"] and "run (mcp)" in report["log"], report["log"]


def test_a_server_stopped_by_its_client_mid_exec_stops_the_command(env, bluebox_bin):  # noqa: F811
    """MCP clients stop a stdio server with SIGTERM to its pid. The running command (in a child
    of the API's handler, in the guest through the agent) stops with it rather than running
    on to its timeout."""
    h = Home(bluebox_bin)
    name = h.sandbox(f"mcp-term-{os.getpid()}", bluefile())
    try:
        assert h("build", name).returncode == 0
        assert h("up", name).returncode == 0
        p = subprocess.Popen([h.bin, "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, env=h.env)
        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "exec", "arguments": {
                    "sandbox": name, "command": "sleep 25; echo done"}}}
        p.stdin.write(json.dumps(call).encode() + b"\n")
        p.stdin.flush()
        deadline = time.monotonic() + 20
        while b"sleep 25" not in h("exec", name, "--", "ps").stdout:
            assert time.monotonic() < deadline, "the exec never started"
            time.sleep(0.2)
        kids = subprocess.run(["pgrep", "-P", str(p.pid)], capture_output=True,
                              text=True).stdout.split()
        assert kids, "the API's handler runs the exec in a child"
        p.terminate()
        assert p.wait(timeout=10) == -15
        deadline = time.monotonic() + 10
        while any(Path(f"/proc/{k}").exists() for k in kids) or \
                b"sleep 25" in h("exec", name, "--", "ps").stdout:
            assert time.monotonic() < deadline, "the command ran on after its server was stopped"
            time.sleep(0.2)
    finally:
        h("down", name)
        h.close()
