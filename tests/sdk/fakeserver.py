#!/usr/bin/python3
"""A stand-in for `bluebox serve` for the SDKs' unit tests: the v1 routes of docs/API.md on a
Unix socket, with commands run on the host (it is a test double, not a sandbox). The real
server is tested end to end in tests/integration/test_sdk_*.py.

    fakeserver.py --socket PATH            serve until killed
    fakeserver.py serve --socket PATH ...  the same, shaped like `bluebox serve` (autostart tests)

Sandboxes: "box" (down at start) and "other". Every request is appended to $FAKE_LOG
(one JSON line: method, path, body) when that is set.
"""
import base64
import json
import os
import select
import socket
import socketserver
import subprocess
import sys
import time
from http.server import BaseHTTPRequestHandler

STATE = {"box": {"up": False, "files": {}}, "other": {"up": False, "files": {}}}
# forks: name -> parent; a fork's changes are the files it wrote (as the API's Changes)
FORKS = {}


def run_argv(body):
    if "command" in body:
        return ["sh", "-c", body["command"]]
    return body["argv"]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def reply(self, status, obj):
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def error(self, status, code, msg):
        self.reply(status, {"error": msg, "code": code})

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        return json.loads(raw) if raw else {}

    def do_GET(self):
        self.route("GET")

    def do_POST(self):
        self.route("POST")

    def route(self, method):
        body = self.body() if method == "POST" else None
        if os.environ.get("FAKE_LOG"):
            with open(os.environ["FAKE_LOG"], "a") as f:
                f.write(json.dumps({"method": method, "path": self.path, "body": body}) + "\n")
        parts = self.path.split("/")[1:]
        if parts == ["v1", "version"]:
            return self.reply(200, {"version": "0.0.0-fake", "api": "v1"})
        if parts == ["v1", "sandboxes"]:
            return self.reply(200, [{"name": n, "up": s["up"], "warm": 0, "warm_target": 0,
                                     "network": "none", "backend": "uml", "base": "fake"}
                                    for n, s in sorted(STATE.items())])
        if len(parts) < 4 or parts[:2] != ["v1", "sandboxes"]:
            return self.error(404, "not_found", "no such route")
        name, route = parts[2], "/".join(parts[3:])
        if name not in STATE:
            return self.error(404, "no_sandbox", f"no sandbox named {name}")
        box = STATE[name]
        if route == "up":
            if box["up"]:
                return self.reply(200, {"up": True, "already": True})
            box["up"] = True
            return self.reply(200, {"up": True, "ready_ms": 5})
        if route == "down":
            box["up"] = False
            return self.reply(200, {"up": False})
        if route in ("exec", "exec/stream", "files/write", "files/read", "files/list") and not box["up"]:
            return self.error(409, "not_up", f"{name} is not up; start it: bluebox up {name}")
        if route in ("exec", "run"):
            unknown = set(body) - {"argv", "command", "stdin", "env", "cwd", "timeout_seconds"}
            if unknown:
                return self.error(400, "bad_request", f"unknown field {sorted(unknown)[0]}")
            t = time.monotonic()
            try:
                p = subprocess.run(run_argv(body), input=base64.b64decode(body.get("stdin", "")),
                                   capture_output=True, timeout=body.get("timeout_seconds"),
                                   env=dict(os.environ, **body.get("env", {})), cwd=body.get("cwd"))
                code, out, err, to = p.returncode, p.stdout, p.stderr, False
            except subprocess.TimeoutExpired as e:
                code, out, err, to = 124, e.stdout or b"", e.stderr or b"", True
            return self.reply(200, {"exit_code": code, "stdout": base64.b64encode(out).decode(),
                                    "stderr": base64.b64encode(err).decode(),
                                    "duration_ms": int((time.monotonic() - t) * 1000),
                                    "timed_out": to, "truncated": False})
        if route in ("exec/stream", "run/stream"):
            return self.stream(body)
        if route == "files/write":
            data = base64.b64decode(body["content"])
            box["files"][body["path"]] = (data, body.get("mode", "0644"))
            return self.reply(200, {"path": body["path"], "bytes": len(data)})
        if route == "files/read":
            if body["path"] not in box["files"]:
                return self.error(404, "not_found", f"cat: {body['path']}: No such file or directory")
            return self.reply(200, {"path": body["path"],
                                    "content": base64.b64encode(box["files"][body["path"]][0]).decode()})
        if route == "files/list":
            d = body["path"].rstrip("/") + "/"
            ents = [{"name": p[len(d):], "type": "file", "size": len(v[0]), "mode": v[1]}
                    for p, v in sorted(box["files"].items()) if p.startswith(d)]
            return self.reply(200, {"path": body["path"], "entries": ents})
        if route == "snapshots" and method == "GET":
            return self.reply(200, [{"name": "s1", "created": "2026-01-01T00:00:00Z", "bytes": 10}])
        if route == "snapshots":
            return self.reply(200, {"snapshot": body.get("name") or "20260101T000000Z"})
        if route == "restore":
            if box["up"]:
                return self.error(409, "is_up", f"{name} is up; bring it down first")
            return self.reply(200, {"restored": body["snapshot"]})
        if route == "fork":
            if name in FORKS:
                return self.error(409, "refused", f"{name} is itself a fork; apply or discard it "
                                                  "before forking from it")
            STATE[body["fork"]] = {"up": False, "files": {}}
            FORKS[body["fork"]] = name
            return self.reply(200, {"fork": body["fork"], "parent": name})
        if route in ("diff", "apply", "discard"):
            if name not in FORKS:
                return self.error(409, "refused", f"{name} is not a fork; make one with: "
                                                  f"bluebox fork {name} <fork>")
            if route != "diff" and box["up"]:
                return self.error(409, "is_up", f"{name} is up; bring it down first")
            changes = [{"change": "A", "path": p} for p in sorted(box["files"])]
            if route == "apply":
                STATE[FORKS[name]]["files"].update(box["files"])
            if route != "diff":
                box["files"] = {}
            return self.reply(200, {"parent": FORKS[name], "count": len(changes),
                                    "changes": changes, "skipped": 0})
        return self.error(404, "not_found", "no such route")

    def stream(self, body):
        self.send_response(200)
        self.send_header("Content-Type", "application/x-ndjson")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

        def line(obj):
            data = json.dumps(obj).encode() + b"\n"
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()

        t = time.monotonic()
        p = subprocess.Popen(run_argv(body), stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
        code = None
        try:
            while True:
                ready, _, _ = select.select([p.stdout, self.connection], [], [])
                if self.connection in ready and not self.connection.recv(1, socket.MSG_PEEK):
                    raise ConnectionResetError  # the client hung up
                if p.stdout not in ready:
                    continue
                chunk = os.read(p.stdout.fileno(), 65536)
                if not chunk:
                    break
                line({"stdout": base64.b64encode(chunk).decode()})
            code = p.wait()
            line({"exit_code": code, "duration_ms": int((time.monotonic() - t) * 1000),
                  "timed_out": False})
            self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            if code is not None:
                return  # the command had ended: a client that read its exit line may hang up
            p.kill()  # the client went away: kill the command, as the real server does
            p.wait()
            if os.environ.get("FAKE_LOG"):
                with open(os.environ["FAKE_LOG"], "a") as f:
                    f.write(json.dumps({"killed": True}) + "\n")


class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


def main(argv):
    args = [a for a in argv if a != "serve"]
    path = args[args.index("--socket") + 1]
    if os.path.exists(path):
        os.unlink(path)
    with Server(path, Handler) as srv:
        srv.serve_forever()


if __name__ == "__main__":
    main(sys.argv[1:])
