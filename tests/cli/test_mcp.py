"""`bluebox mcp` over pipes, as an MCP client drives it: JSON-RPC 2.0 framing, initialize,
ping, tools/list and its strict schemas, and every kind of bad input a client can send
(bad JSON, invalid requests, unknown methods and tools, invalid arguments, a line past the
16 MiB limit). Nothing here needs a sandbox to be up; tests/integration/test_mcp_client.py
drives real sandboxes with the official MCP SDK's client."""
import json
import os
import re
import selectors
import subprocess
import time
from pathlib import Path

import pytest

PROTOCOL = "2025-06-18"
TOOLS = ["list_sandboxes", "up", "down", "exec", "run", "write_file", "read_file", "snapshot",
         "fork", "diff", "apply", "discard"]


class Mcp:
    """A `bluebox mcp` process: send lines, read reply lines (with a deadline)."""

    def __init__(self, bb, *flags, argv=None, env=None):
        self.p = subprocess.Popen(argv or [bb.bin, "mcp", *flags], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  env=env or bb.env, cwd=bb.tmp)
        self.buf = b""
        self.next_id = 1

    def send_raw(self, data):
        self.p.stdin.write(data)
        self.p.stdin.flush()

    def send(self, msg):
        self.send_raw(json.dumps(msg).encode() + b"\n")

    def line(self, timeout=20):
        """The next line of stdout, parsed; every line the server writes must be JSON."""
        deadline = time.monotonic() + timeout
        sel = selectors.DefaultSelector()
        sel.register(self.p.stdout, selectors.EVENT_READ)
        fd = self.p.stdout.fileno()
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            assert left > 0 and sel.select(left), f"no reply line within {timeout} s"
            chunk = os.read(fd, 1 << 20)
            assert chunk, f"bluebox mcp closed stdout; stderr: {self.p.stderr.read()!r}"
            self.buf += chunk
        raw, self.buf = self.buf.split(b"\n", 1)
        msg = json.loads(raw)
        assert msg["jsonrpc"] == "2.0", msg
        return msg

    def request(self, method, params=None, **kw):
        i = self.next_id
        self.next_id += 1
        msg = {"jsonrpc": "2.0", "id": i, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)
        reply = self.line(**kw)
        assert reply["id"] == i, reply
        return reply

    def call(self, tool, arguments=None):
        params = {"name": tool}
        if arguments is not None:
            params["arguments"] = arguments
        return self.request("tools/call", params)

    def close(self):
        """End input; the server exits 0 at end of file. Returns its stderr."""
        self.p.stdin.close()
        rc = self.p.wait(timeout=20)
        err = self.p.stderr.read().decode()
        assert rc == 0, (rc, err)
        return err


@pytest.fixture
def mcp(bb):
    m = Mcp(bb)
    yield m
    if m.p.poll() is None:
        m.p.kill()
        m.p.wait()


def error_of(reply):
    assert "result" not in reply, reply
    return reply["error"]["code"], reply["error"]["message"]


def text_of(reply):
    r = reply["result"]
    assert set(r) == {"content", "isError"}, r
    assert [c["type"] for c in r["content"]] == ["text"], r
    return r["content"][0]["text"], r["isError"]


# ---------------------------------------------------------------- the handshake

def test_initialize(bb, mcp):
    r = mcp.request("initialize", {"protocolVersion": PROTOCOL, "capabilities": {},
                                   "clientInfo": {"name": "pytest", "version": "1"}})
    res = r["result"]
    assert res["protocolVersion"] == PROTOCOL
    assert "tools" in res["capabilities"]
    version = bb.run("--version").out.split()[1]
    assert res["serverInfo"]["name"] == "bluebox" and res["serverInfo"]["version"] == version
    # a paragraph a model can act on: what the tools are for and what they cannot do
    assert "list_sandboxes" in res["instructions"] and "cannot create" in res["instructions"]
    mcp.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert mcp.request("ping")["result"] == {}
    assert mcp.close() == ""


def test_an_older_client_version_gets_ours(mcp):
    r = mcp.request("initialize", {"protocolVersion": "2024-11-05", "capabilities": {},
                                   "clientInfo": {"name": "old", "version": "0"}})
    assert r["result"]["protocolVersion"] == PROTOCOL


def test_ping_takes_a_string_id_and_echoes_it(mcp):
    mcp.send({"jsonrpc": "2.0", "id": "abc-1", "method": "ping"})
    r = mcp.line()
    assert r == {"jsonrpc": "2.0", "id": "abc-1", "result": {}}


def test_end_of_input_ends_the_server_and_a_last_line_without_newline_counts(mcp):
    mcp.send_raw(b'{"jsonrpc":"2.0","id":7,"method":"ping"}')
    mcp.p.stdin.close()
    assert mcp.line()["id"] == 7
    assert mcp.p.wait(timeout=20) == 0


def test_crlf_and_blank_lines(mcp):
    mcp.send_raw(b'\n   \n{"jsonrpc":"2.0","id":1,"method":"ping"}\r\n')
    assert mcp.line() == {"jsonrpc": "2.0", "id": 1, "result": {}}


def test_a_client_that_goes_away_ends_the_server(bb):
    m = Mcp(bb)
    m.p.stdout.close()
    m.send_raw(b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n')
    m.p.stdin.close()
    assert m.p.wait(timeout=20) == 0


# ---------------------------------------------------------------- tools/list

def tools(m):
    return {t["name"]: t for t in m.request("tools/list")["result"]["tools"]}


def test_tools_list_schemas_are_strict(mcp):
    ts = tools(mcp)
    assert list(ts) == TOOLS
    for name, t in ts.items():
        s = t["inputSchema"]
        assert s["type"] == "object" and s["additionalProperties"] is False, name
        assert set(s["required"]) <= set(s["properties"]), name
        assert t["description"] and t["title"], name
        for prop, ps in s["properties"].items():
            assert ps["type"] in ("string", "number"), (name, prop)
            assert ps.get("description"), (name, prop)
    props = {n: (set(t["inputSchema"]["properties"]), set(t["inputSchema"]["required"]))
             for n, t in ts.items()}
    assert props == {
        "list_sandboxes": (set(), set()),
        "up": ({"sandbox"}, {"sandbox"}),
        "down": ({"sandbox"}, {"sandbox"}),
        "exec": ({"sandbox", "command", "stdin", "timeout_seconds"}, {"sandbox", "command"}),
        "run": ({"sandbox", "command", "timeout_seconds"}, {"sandbox", "command"}),
        "write_file": ({"sandbox", "path", "content"}, {"sandbox", "path", "content"}),
        "read_file": ({"sandbox", "path"}, {"sandbox", "path"}),
        "snapshot": ({"sandbox", "name"}, {"sandbox"}),
        "fork": ({"sandbox", "fork"}, {"sandbox", "fork"}),
        "diff": ({"sandbox"}, {"sandbox"}),
        "apply": ({"sandbox"}, {"sandbox"}),
        "discard": ({"sandbox"}, {"sandbox"}),
    }
    assert ts["list_sandboxes"]["annotations"]["readOnlyHint"] is True
    assert ts["read_file"]["annotations"]["readOnlyHint"] is True


def test_restore_is_listed_and_callable_only_with_allow_restore(bb, mcp):
    assert "restore" not in tools(mcp)
    code, msg = error_of(mcp.call("restore", {"sandbox": "box", "snapshot": "s1"}))
    assert code == -32602 and msg.startswith("unknown tool: restore") and "--allow-restore" in msg
    m = Mcp(bb, "--allow-restore")
    try:
        ts = tools(m)
        assert list(ts) == TOOLS + ["restore"]
        assert ts["restore"]["inputSchema"]["required"] == ["sandbox", "snapshot"]
        assert ts["restore"]["annotations"]["destructiveHint"] is True
        # past the schema: the API answers (no such sandbox) as a tool error, not a protocol one
        _, is_error = text_of(m.call("restore", {"sandbox": "box", "snapshot": "s1"}))
        assert is_error is True
    finally:
        m.close()


def test_mcp_help_names_the_flag(bb):
    r = bb.run("mcp", "--help")
    assert r.rc == 0 and "--allow-restore" in r.out and "2025-06-18" in r.out


def test_mcp_takes_no_arguments(bb):
    r = bb.run("mcp", "extra")
    assert r.rc == 2 and "mcp takes" in r.error_line()


# ---------------------------------------------------------------- bad messages

def test_bad_json_is_a_parse_error_and_the_server_goes_on(mcp):
    for raw in (b"nope", b'{"jsonrpc":"2.0","id":1,', b'{"a":1,"a":2}', b"\xff\xfe{}"):
        mcp.send_raw(raw + b"\n")
        r = mcp.line()
        assert r["id"] is None and r["error"]["code"] == -32700, (raw, r)
        assert r["error"]["message"].startswith("parse error")
    assert mcp.request("ping")["result"] == {}


@pytest.mark.parametrize("msg,why", [
    ([{"jsonrpc": "2.0", "id": 1, "method": "ping"}], "batches"),
    ("ping", "JSON object"),
    (42, "JSON object"),
    ({"jsonrpc": "1.0", "id": 1, "method": "ping"}, "jsonrpc"),
    ({"id": 1, "method": "ping"}, "jsonrpc"),
    ({"jsonrpc": "2.0", "id": 1, "method": 5}, "method"),
    ({"jsonrpc": "2.0", "id": 1}, "method"),
    ({"jsonrpc": "2.0", "id": {"x": 1}, "method": "ping"}, "id"),
    ({"jsonrpc": "2.0", "id": None, "method": "ping"}, "id"),
    ({"jsonrpc": "2.0", "id": True, "method": "ping"}, "id"),
])
def test_invalid_requests(mcp, msg, why):
    mcp.send(msg)
    r = mcp.line()
    code, text = error_of(r)
    assert code == -32600 and why in text, r
    assert r["id"] in (None, 1)
    assert mcp.request("ping")["result"] == {}


def test_unknown_method(mcp):
    code, msg = error_of(mcp.request("resources/list"))
    assert (code, msg) == (-32601, "method not found: resources/list")


def test_notifications_and_client_responses_get_no_reply(mcp):
    mcp.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    mcp.send({"jsonrpc": "2.0", "method": "notifications/cancelled",
              "params": {"requestId": 3}})
    mcp.send({"jsonrpc": "2.0", "method": "no/such/notification"})
    mcp.send({"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "nope"}})
    mcp.send({"jsonrpc": "2.0", "id": 99, "result": {}})  # a response to nothing we sent
    mcp.send({"jsonrpc": "2.0", "id": 98, "error": {"code": 1, "message": "x"}})
    # the next line on stdout is the ping's reply: nothing was written for the others
    r = mcp.request("ping")
    assert r["result"] == {}
    mcp.p.stdin.close()
    assert mcp.p.stdout.read() == b""


def test_params_must_be_an_object(mcp):
    code, msg = error_of(mcp.request("tools/list", ["x"]))
    assert code == -32602 and "params" in msg


# ---------------------------------------------------------------- tools/call arguments

def test_unknown_tool(mcp):
    assert error_of(mcp.call("format_disk", {})) == (-32602, "unknown tool: format_disk")
    code, msg = error_of(mcp.request("tools/call", {"arguments": {}}))
    assert code == -32602 and "tool name" in msg
    code, msg = error_of(mcp.request("tools/call", {"name": "up", "argumnets": {}}))
    assert code == -32602 and "argumnets" in msg


@pytest.mark.parametrize("tool,args,says", [
    ("exec", {"sandbox": "box"}, 'missing required argument "command"'),
    ("exec", {"command": "true"}, 'missing required argument "sandbox"'),
    ("exec", {"sandbox": "box", "command": "true", "argv": ["true"]}, 'unknown argument "argv"'),
    ("exec", {"sandbox": "box", "command": ["true"]}, "command must be a string, not an array"),
    ("exec", {"sandbox": 3, "command": "true"}, "sandbox must be a string, not a number"),
    ("exec", {"sandbox": "box", "command": "true", "stdin": None}, "stdin must be a string"),
    ("exec", {"sandbox": "box", "command": "true", "timeout_seconds": 0},
     "timeout_seconds must be more than 0"),
    ("exec", {"sandbox": "box", "command": "true", "timeout_seconds": -5},
     "timeout_seconds must be more than 0"),
    ("exec", {"sandbox": "box", "command": "true", "timeout_seconds": "9"},
     "timeout_seconds must be a number"),
    ("exec", {"sandbox": "", "command": "true"}, "sandbox must not be empty"),
    ("exec", {"sandbox": "box", "command": ""}, "command must not be empty"),
    ("exec", {"sandbox": "box", "command": "true\u0000; rm -rf /"}, "must not contain a NUL"),
    ("run", {"sandbox": "box", "command": "true", "stdin": "x"}, 'unknown argument "stdin"'),
    ("list_sandboxes", {"all": True}, 'unknown argument "all" (it takes none)'),
    ("write_file", {"sandbox": "box", "path": "/data/x"}, 'missing required argument "content"'),
    ("write_file", {"sandbox": "box", "path": "/data/x", "content": "x", "mode": "0777"},
     'unknown argument "mode"'),
    ("read_file", {"sandbox": "box", "path": {"p": 1}}, "path must be a string, not an object"),
    ("snapshot", {"sandbox": "box", "name": True}, "name must be a string, not a boolean"),
    ("up", None, 'missing required argument "sandbox"'),
])
def test_invalid_arguments(mcp, tool, args, says):
    code, msg = error_of(mcp.call(tool, args))
    assert code == -32602 and msg.startswith("invalid params: ") and says in msg, msg


def test_arguments_must_be_an_object(mcp):
    code, msg = error_of(mcp.call("up", ["box"]))
    assert code == -32602 and "must be an object" in msg


# ---------------------------------------------------------------- through to the API

def test_api_errors_are_tool_errors_not_protocol_errors(bb, mcp):
    """A tool that reaches the API and is refused answers isError:true with the API's message
    and code; the protocol-level call succeeds."""
    for tool, args in [("up", {"sandbox": "ghost"}),
                       ("exec", {"sandbox": "ghost", "command": "true"}),
                       ("read_file", {"sandbox": "ghost", "path": "/etc/hostname"})]:
        text, is_error = text_of(mcp.call(tool, args))
        assert is_error is True and "no_sandbox" in text, (tool, text)


def test_a_name_cannot_steer_the_api_outside_home(bb, mcp):
    outside = bb.tmp / "outside"
    for name in ("../outside", "a/b", "..", "x?y", "%2e%2e"):
        text, is_error = text_of(mcp.call("up", {"sandbox": name}))
        assert is_error is True, (name, text)
    assert not outside.exists()


def test_list_sandboxes(bb, mcp):
    text, is_error = text_of(mcp.call("list_sandboxes"))
    assert is_error is False and text.startswith("[]\n")
    assert "bluebox new" in text
    assert bb.run("new", "box").rc == 0
    text, is_error = text_of(mcp.call("list_sandboxes", {}))
    listed = json.loads(text)
    assert is_error is False and [s["name"] for s in listed] == ["box"]
    assert listed[0]["up"] is False


# ---------------------------------------------------------------- the line limit

def test_a_line_past_16_mib_is_a_parse_error_and_the_server_goes_on(mcp):
    big = b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"' + b"x" * (17 << 20) + b'"}}'
    mcp.send_raw(big + b"\n")
    r = mcp.line()
    code, msg = error_of(r)
    assert code == -32700 and "16 MiB" in msg and r["id"] is None
    assert mcp.request("ping")["result"] == {}


def test_a_line_just_under_16_mib_is_read(mcp):
    pad = (16 << 20) - 200
    mcp.send_raw(b'{"jsonrpc":"2.0","id":5,"method":"ping","params":{"_meta":{"pad":"'
                 + b"y" * pad + b'"}}}\n')
    assert mcp.line() == {"jsonrpc": "2.0", "id": 5, "result": {}}


# ---------------------------------------------------------------- the docs' example

def test_the_documented_client_configuration_starts_a_working_server(bb, tmp_path):
    """The JSON docs/mcp.md tells users to put in their MCP client's configuration, run the
    way a client runs it: `command` looked up on PATH, with `args`."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "mcp.md").read_text()
    config = json.loads(re.search(r"```json\n(.*?)```", page, re.S).group(1))
    server = config["mcpServers"]["bluebox"]
    bindir = tmp_path / "path"
    bindir.mkdir()
    (bindir / server["command"]).symlink_to(bb.bin)
    env = dict(bb.env, PATH=f"{bindir}:{bb.env['PATH']}")
    m = Mcp(bb, argv=[server["command"], *server["args"]], env=env)
    r = m.request("initialize", {"protocolVersion": PROTOCOL, "capabilities": {},
                                 "clientInfo": {"name": "readme", "version": "1"}})
    assert r["result"]["serverInfo"]["name"] == "bluebox"
    assert [t["name"] for t in m.request("tools/list")["result"]["tools"]] == TOOLS
    m.close()


def test_completion_knows_mcp_and_its_flag(bb):
    assert "mcp" in bb.run("__complete", "m").out.split()
    assert bb.run("__complete", "mcp", "--").out.split() == ["--allow-restore", "--help"]


def test_what_the_server_starts_cannot_reach_the_protocol_stream(mcp):
    """Once serving, the process's fd 0 is /dev/null and fd 1 is its stderr, so no command,
    podman or VM it starts can read a client's message or write into the replies; the
    protocol's own pipes are kept on close-on-exec descriptors."""
    assert mcp.request("ping")["result"] == {}
    fds = f"/proc/{mcp.p.pid}/fd"
    assert os.readlink(f"{fds}/0") == "/dev/null"
    assert os.readlink(f"{fds}/1") == os.readlink(f"{fds}/2")
    ours = {os.readlink(f"/proc/self/fd/{f.fileno()}") for f in (mcp.p.stdin, mcp.p.stdout)}
    held = [n for n in os.listdir(fds) if int(n) > 2 and os.readlink(f"{fds}/{n}") in ours]
    assert len(held) == 2, held
    for n in held:
        flags = int(dict(line.split(":\t") for line in
                         open(f"/proc/{mcp.p.pid}/fdinfo/{n}").read().splitlines())["flags"], 8)
        assert flags & os.O_CLOEXEC, n


def test_the_server_leads_its_own_process_group(mcp):
    """So that passing its client's SIGTERM on to what it started (tests/integration/
    test_mcp_client.py) never reaches the client."""
    assert mcp.request("ping")["result"] == {}
    assert os.getpgid(mcp.p.pid) == mcp.p.pid != os.getpgid(0)
    mcp.p.terminate()
    assert mcp.p.wait(timeout=10) == -15
