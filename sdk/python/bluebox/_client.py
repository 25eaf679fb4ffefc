"""Client (one server) and Sandbox (one sandbox on it)."""
from __future__ import annotations

import base64
import http.client
import json
import re
import time
from types import TracebackType
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Type, Union
from urllib.parse import quote

from ._errors import BlueboxError, error_for
from ._transport import Transport, check_status
from ._types import Changes, Entry, Result, SandboxInfo, Snapshot

Command = Union[str, Sequence[str]]
"""A command: a string runs as ``sh -c <string>``; a list is an argv (no shell)."""

Data = Union[bytes, bytearray, memoryview, str]

STREAM_CAP = 16 << 20  # what a Result keeps of each stream, as the server does


class Client:
    """A connection to the local bluebox API (``bluebox serve``).

    socket: the server's socket path (default: where ``bluebox serve`` listens for this
        BLUEBOX_HOME). binary: the bluebox executable to start the server with (default
        ``$BLUEBOX_BIN``, else ``bluebox`` on PATH). autostart: start ``bluebox serve``
        when no server answers. idle: the started server's ``--idle`` (exits after that
        long without requests).
    """

    def __init__(self, socket: Optional[str] = None, binary: Optional[str] = None,
                 autostart: bool = True, idle: str = "15m"):
        self._t = Transport(socket, binary, autostart, idle)

    @property
    def socket(self) -> str:
        """The socket path this client talks to."""
        return self._t.socket

    def version(self) -> str:
        """The server's bluebox version."""
        return str(self._t.request("GET", "/v1/version")["version"])

    def sandboxes(self) -> List[SandboxInfo]:
        """Every sandbox in this BLUEBOX_HOME, with its up/warm state."""
        return [SandboxInfo.from_json(o) for o in self._t.request("GET", "/v1/sandboxes")]

    def sandbox(self, name: str) -> "Sandbox":
        """A handle on the sandbox ``name`` (nothing is checked until it is used)."""
        return Sandbox(name, client=self)

    def _call(self, method: str, name: str, route: str, body: Any = None) -> Any:
        return self._t.request(method, _route(name, route), body)


_default: Optional[Client] = None


def _default_client() -> Client:
    global _default
    if _default is None:
        _default = Client()
    return _default


def _route(name: str, route: str) -> str:
    return f"/v1/sandboxes/{quote(name, safe='')}" + (f"/{route}" if route else "")


def _b64(data: Data) -> str:
    if isinstance(data, str):
        data = data.encode()
    return base64.b64encode(bytes(data)).decode()


def _command(cmd: Command, stdin: Optional[Data], timeout: Optional[float],
             env: Optional[Mapping[str, str]], cwd: Optional[str]) -> Dict[str, Any]:
    if isinstance(cmd, str):
        body: Dict[str, Any] = {"command": cmd}
    elif isinstance(cmd, (bytes, bytearray)):
        raise TypeError("a command is a str (run by sh -c) or a list of str (an argv)")
    else:
        argv = [str(a) for a in cmd]
        if not argv or not argv[0]:
            raise ValueError("an argv needs a non-empty first element")
        body = {"argv": argv}
    if stdin is not None:
        body["stdin"] = _b64(stdin)
    if timeout is not None:
        if timeout <= 0:
            raise ValueError("timeout must be > 0 seconds")
        body["timeout_seconds"] = timeout
    if env:
        body["env"] = {str(k): str(v) for k, v in env.items()}
    if cwd is not None:
        body["cwd"] = cwd
    return body


class Sandbox:
    """One sandbox, by name, as ``bluebox new``/``build`` made it (the API creates none).

    As a context manager it is up inside the ``with`` block: brought up on enter and down
    on exit, unless it was already up (then it is left up)::

        with Sandbox("demo") as box:
            print(box.exec("uname -a").check().stdout_text)
    """

    def __init__(self, name: str, client: Optional[Client] = None):
        self.name = name
        self.client = client or _default_client()
        self._started = False

    def __repr__(self) -> str:
        return f"Sandbox({self.name!r})"

    def _call(self, method: str, route: str, body: Any = None) -> Any:
        return self.client._call(method, self.name, route, body)

    # -- lifecycle ------------------------------------------------------------------------

    def up(self) -> bool:
        """Boot the sandbox's long-lived VM. Returns True when this call booted it, False
        when it was already up."""
        r = self._call("POST", "up", {})
        return not r.get("already", False)

    def down(self) -> None:
        """Stop the sandbox's VM (not an error when it is not up)."""
        self._call("POST", "down", {})

    def __enter__(self) -> "Sandbox":
        self._started = self.up()
        return self

    def __exit__(self, et: Optional[Type[BaseException]], ev: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        if self._started:
            self._started = False
            self.down()

    # -- commands -------------------------------------------------------------------------

    def exec(self, cmd: Command, stdin: Optional[Data] = None, timeout: Optional[float] = None,
             env: Optional[Mapping[str, str]] = None, cwd: Optional[str] = None) -> Result:
        """Run ``cmd`` in the up VM (state carries over between calls) and wait for it.

        stdin: bytes or text fed to the command. timeout: seconds (overrides the Bluefile's
        ``timeout_seconds``). Raises NotUp when the sandbox is not up.
        """
        return Result.from_json(self._call("POST", "exec", _command(cmd, stdin, timeout, env, cwd)))

    def run(self, cmd: Command, stdin: Optional[Data] = None, timeout: Optional[float] = None,
            env: Optional[Mapping[str, str]] = None, cwd: Optional[str] = None) -> Result:
        """Run ``cmd`` in a fresh VM (as ``bluebox run``) and wait for it."""
        return Result.from_json(self._call("POST", "run", _command(cmd, stdin, timeout, env, cwd)))

    def stream(self, cmd: Command, stdin: Optional[Data] = None, timeout: Optional[float] = None,
               env: Optional[Mapping[str, str]] = None, cwd: Optional[str] = None,
               fresh: bool = False) -> "ExecStream":
        """Run ``cmd`` and see its output as it happens.

        Returns an ExecStream: iterate it for ``(stream, chunk)`` pairs (``"stdout"`` or
        ``"stderr"``, bytes) as the command writes them; then ``.result`` is the Result.
        On the up VM (as exec), or in a fresh VM with ``fresh=True`` (as run). Leaving the
        loop early (or ``close()``, or a ``with`` block's end) kills the command.
        """
        route = "run/stream" if fresh else "exec/stream"
        conn, resp = self.client._t.open("POST", _route(self.name, route),
                                         _command(cmd, stdin, timeout, env, cwd))
        try:
            check_status(resp)
        except BaseException:
            conn.close()
            raise
        return ExecStream(conn, resp)

    # -- files (inside the guest; the sandbox must be up) ---------------------------------

    def write_file(self, path: str, data: Data, mode: Union[str, int] = "0644") -> int:
        """Write ``data`` to ``path`` in the guest (created or replaced) with ``mode``
        (octal text such as ``"0644"``, or an int such as 0o644). Returns the bytes written."""
        if isinstance(mode, int):
            mode = f"{mode:04o}"
        if not re.fullmatch(r"[0-7]{3,4}", mode):
            raise ValueError(f"mode must be octal such as \"0644\", got {mode!r}")
        r = self._call("POST", "files/write", {"path": path, "content": _b64(data), "mode": mode})
        return int(r.get("bytes", 0))

    def read_file(self, path: str) -> bytes:
        """The content of ``path`` in the guest."""
        return base64.b64decode(self._call("POST", "files/read", {"path": path})["content"])

    def list_dir(self, path: str) -> List[Entry]:
        """The entries of the directory ``path`` in the guest."""
        r = self._call("POST", "files/list", {"path": path})
        return [Entry.from_json(e) for e in r.get("entries", [])]

    # -- snapshots of /data ---------------------------------------------------------------

    def snapshot(self, name: Optional[str] = None) -> str:
        """Archive /data as a snapshot (default label: a UTC time stamp); returns its name."""
        return str(self._call("POST", "snapshots", {"name": name} if name else {})["snapshot"])

    def snapshots(self) -> List[Snapshot]:
        """The sandbox's snapshots."""
        return [Snapshot.from_json(o) for o in self._call("GET", "snapshots")]

    def restore(self, snapshot: str) -> str:
        """Replace /data with a snapshot (refused with IsUp while up); returns its name."""
        return str(self._call("POST", "restore", {"snapshot": snapshot})["restored"])

    # -- forks: a copy-on-write /data over this sandbox's -----------------------------------

    def fork(self, name: str) -> "Sandbox":
        """Make ``name`` a fork of this sandbox (its /data a layer over this one's); returns it.
        Refused (``Refused``) for a fork, or a sandbox whose backend cannot fork."""
        r = self._call("POST", "fork", {"fork": name})
        return Sandbox(str(r["fork"]), self.client)

    def diff(self) -> Changes:
        """This fork's changes over its parent's /data (``Refused`` when it is not a fork)."""
        return Changes.from_json(self._call("POST", "diff", {}))

    def apply(self) -> Changes:
        """Merge this fork's changes into its parent's /data, all or nothing; returns them.
        Nothing asks first: call ``diff()`` to see them. ``IsUp``/``Refused`` while the fork or
        its parent is up or in use."""
        return Changes.from_json(self._call("POST", "apply", {}))

    def discard(self) -> Changes:
        """Drop this fork's changes; returns them. ``Refused`` while the fork is in use."""
        return Changes.from_json(self._call("POST", "discard", {}))


class ExecStream:
    """The live output of one command: iterate (once) for ``(stream, chunk)`` pairs; when
    the iteration ends, ``result`` holds the Result (stdout/stderr collected as well, up to
    16 MiB each). Leaving the loop early, ``close()``, or leaving a ``with`` block closes the
    connection, which kills a command still running."""

    def __init__(self, conn: http.client.HTTPConnection, resp: http.client.HTTPResponse):
        self._conn = conn
        self._resp = resp
        self._out: List[bytearray] = [bytearray(), bytearray()]
        self._truncated = False
        self._buf = bytearray()
        self._scan = 0
        self._t0 = time.monotonic()
        self.result: Optional[Result] = None

    def __iter__(self) -> Iterator[Tuple[str, bytes]]:
        try:
            while self.result is None:
                line = self._line()
                if not line.strip():
                    continue
                ev = self._event(line)
                if ev is not None:
                    yield ev
        finally:
            # done, failed, or the loop was left early (GeneratorExit): in that last case
            # closing the connection is what tells the server to kill the command
            self.close()

    def _line(self) -> bytes:
        # read1 takes what has arrived, up to 1 MiB, in one call: readline() on a chunked
        # response goes a few bytes at a time and cost most of a fast stream's time
        while True:
            nl = self._buf.find(b"\n", self._scan)
            if nl >= 0:
                line = bytes(self._buf[:nl])
                del self._buf[:nl + 1]
                self._scan = 0
                return line
            self._scan = len(self._buf)
            more = self._resp.read1(1 << 20)
            if not more:
                raise BlueboxError("the server closed the stream before the command's exit",
                                   "internal", self._resp.status)
            self._buf += more

    def _event(self, line: bytes) -> Optional[Tuple[str, bytes]]:
        try:
            obj = json.loads(line)
        except ValueError:
            self.close()
            raise BlueboxError(f"the server sent a malformed stream line: {line[:80]!r}",
                               "internal", self._resp.status) from None
        for i, key in enumerate(("stdout", "stderr")):
            if key in obj:
                chunk = base64.b64decode(obj[key])
                buf = self._out[i]
                room = STREAM_CAP - len(buf)
                if len(chunk) > room:
                    self._truncated = True
                buf += chunk[:max(room, 0)]
                return key, chunk
        if "error" in obj:
            self.close()
            raise error_for(str(obj["error"]), str(obj.get("code") or "internal"), self._resp.status)
        if "exit_code" in obj:
            self.result = Result(
                exit_code=int(obj["exit_code"]), stdout=bytes(self._out[0]),
                stderr=bytes(self._out[1]), duration_ms=int(obj.get("duration_ms") or 0),
                timed_out=bool(obj.get("timed_out")),
                truncated=self._truncated or bool(obj.get("truncated")))
        return None

    def wait(self) -> Result:
        """Read the stream to its end (discarding nothing: the Result keeps the output)."""
        for _ in self:
            pass
        assert self.result is not None
        return self.result

    def close(self) -> None:
        """Close the connection (a command still running is killed by the server)."""
        self._resp.close()
        self._conn.close()

    def __enter__(self) -> "ExecStream":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


__all__ = ["Client", "Sandbox", "ExecStream", "Command"]
