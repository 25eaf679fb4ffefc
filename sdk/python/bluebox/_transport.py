"""HTTP/1.1 over the server's Unix socket, the socket path, and starting the server.

The socket path is computed exactly as ``bluebox serve`` does: ``$BLUEBOX_HOME/bluebox.sock``
(BLUEBOX_HOME defaults to ``~/.bluebox``); when that is longer than ``sun_path`` allows
(103 bytes), ``$XDG_RUNTIME_DIR/bluebox-<first 6 bytes of sha256(BLUEBOX_HOME), hex>.sock``.
"""
from __future__ import annotations

import hashlib
import http.client
import json
import os
import shutil
import socket as _socket
import subprocess
import tempfile
import time
from typing import Any, Optional, Tuple

from ._errors import CODE_OF_STATUS, BadRequest, BadSocket, BlueboxError, NoServer, error_for

SUN_PATH_MAX = 103
MAX_BODY = 64 << 20  # the server's request limit
START_WAIT_S = 30.0  # a loaded host can take seconds to start it; a dead one is seen at once


def _home_root() -> str:
    h = os.environ.get("BLUEBOX_HOME")
    if h:
        if not h.startswith("/"):
            raise BadSocket(f'BLUEBOX_HOME must be an absolute path, got "{h}"', "bad_socket")
        return h
    home = os.environ.get("HOME", "")
    if not home.startswith("/"):
        raise BadSocket("HOME is not set; set HOME or BLUEBOX_HOME", "bad_socket")
    return _join(home, ".bluebox")


def _join(a: str, b: str) -> str:
    # exactly bluebox's path_join: a's trailing slashes (but a lone "/") and b's leading ones go
    la = len(a)
    while la > 1 and a[la - 1] == "/":
        la -= 1
    return a[:la] + "/" + b.lstrip("/")


def socket_path() -> str:
    """The socket ``bluebox serve`` listens on by default, for this environment."""
    root = _home_root()
    path = _join(root, "bluebox.sock")
    if len(path.encode()) <= SUN_PATH_MAX:
        return path
    run = os.environ.get("XDG_RUNTIME_DIR", "")
    if not run.startswith("/"):
        raise BadSocket(f"the socket path {path} is too long for a Unix socket and "
                        "XDG_RUNTIME_DIR is not set; set a shorter BLUEBOX_HOME", "bad_socket")
    digest = hashlib.sha256(root.encode()).hexdigest()[:12]
    path = f"{run}/bluebox-{digest}.sock"  # as the server writes it (no path_join here)
    if len(path.encode()) > SUN_PATH_MAX:
        raise BadSocket("XDG_RUNTIME_DIR is too long for a Unix socket path", "bad_socket")
    return path


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str):
        super().__init__("localhost")
        self._path = path

    def connect(self) -> None:
        s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        try:
            s.connect(self._path)
        except BaseException:
            s.close()
            raise
        self.sock = s


def _raise_for(resp: http.client.HTTPResponse) -> None:
    raw = resp.read()
    try:
        obj = json.loads(raw)
        msg, code = str(obj["error"]), str(obj.get("code") or "internal")
    except (ValueError, KeyError, TypeError):
        msg = raw.decode("utf-8", "replace").strip() or resp.reason
        code = CODE_OF_STATUS.get(resp.status, "internal")
    raise error_for(msg, code, resp.status)


class Transport:
    """One server: requests to it, and starting it when nothing answers."""

    def __init__(self, socket: Optional[str], binary: Optional[str], autostart: bool, idle: str):
        self.socket = socket or socket_path()
        if len(self.socket.encode()) > SUN_PATH_MAX + 4:
            raise BadSocket(f"socket path too long for a Unix socket: {self.socket}", "bad_socket")
        self.binary = binary
        self.autostart = autostart
        self.idle = idle

    def open(self, method: str, path: str, body: Any = None) -> Tuple[_UnixConnection, http.client.HTTPResponse]:
        """Send one request; return the connection and its response (status not checked).

        When nothing listens on the socket, start the server (if autostart) and retry once.
        """
        data = None if body is None else json.dumps(body).encode()
        if data is not None and len(data) > MAX_BODY:
            raise BadRequest(f"the request is {len(data)} bytes, over the server's 64 MiB limit "
                             "(stdin and file content travel base64-encoded: about 48 MiB of data)",
                             "too_large", 413)
        try:
            return self._send(method, path, data)
        except (FileNotFoundError, ConnectionRefusedError) as e:
            if not self.autostart:
                raise NoServer(f"no bluebox server answers on {self.socket} ({e.strerror}); "
                               f"start one: bluebox serve", "no_server") from None
        self.start()
        return self._send(method, path, data)

    def request(self, method: str, path: str, body: Any = None) -> Any:
        """One request; the parsed JSON response, or the typed error for a non-2xx."""
        conn, resp = self.open(method, path, body)
        try:
            if resp.status // 100 != 2:
                _raise_for(resp)
            raw = resp.read()
            return json.loads(raw) if raw else None
        finally:
            conn.close()

    def _send(self, method: str, path: str, data: Optional[bytes]):
        conn = _UnixConnection(self.socket)
        headers = {"Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        try:
            conn.request(method, path, body=data, headers=headers)
            return conn, conn.getresponse()
        except BaseException:
            conn.close()
            raise

    def _answers(self) -> bool:
        try:
            conn, resp = self._send("GET", "/v1/version", None)
        except OSError:
            return False
        try:
            resp.read()
            return resp.status == 200
        finally:
            conn.close()

    def start(self) -> None:
        """Start ``bluebox serve`` detached on this socket and wait until it answers."""
        binary = self.binary or os.environ.get("BLUEBOX_BIN") or shutil.which("bluebox")
        if not binary:
            raise NoServer(f"no bluebox server answers on {self.socket}, and no bluebox binary "
                           "to start one: put bluebox on PATH or set BLUEBOX_BIN", "no_server")
        argv = [binary, "serve", "--socket", self.socket, "--idle", self.idle]
        # stderr goes to an unnamed file: read when the server fails to come up, never a pipe
        # the detached server could block on later
        with tempfile.TemporaryFile() as errf:
            try:
                proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                        stderr=errf, start_new_session=True, close_fds=True)
            except OSError as e:
                raise NoServer(f"cannot start {binary} serve: {e.strerror}", "no_server") from None
            deadline = time.monotonic() + START_WAIT_S
            while time.monotonic() < deadline:
                if self._answers():
                    return
                if proc.poll() is not None and not self._answers():
                    # it may have lost a race to another starter that now serves
                    time.sleep(0.05)
                    if self._answers():
                        return
                    errf.seek(0)
                    why = errf.read().decode("utf-8", "replace").strip()
                    raise NoServer(f"{binary} serve exited with status {proc.returncode}"
                                   + (f": {why}" if why else ""), "no_server")
                time.sleep(0.02)
        raise NoServer(f"{binary} serve did not answer on {self.socket} within "
                       f"{START_WAIT_S:.0f}s", "no_server")


def check_status(resp: http.client.HTTPResponse) -> None:
    """Raise the typed error for a non-2xx response (its body is consumed)."""
    if resp.status // 100 != 2:
        _raise_for(resp)


__all__ = ["Transport", "socket_path", "check_status", "BlueboxError"]
