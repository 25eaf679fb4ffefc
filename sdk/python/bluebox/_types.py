"""The values the API returns, as typed, immutable objects."""
from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any, Dict, Optional, Tuple

from ._errors import CommandFailed


@dataclass(frozen=True)
class Result:
    """What a command did: its exit code and output.

    A non-zero exit is a Result, not an exception; call ``check()`` to turn it into one.
    ``stdout``/``stderr`` are bytes, capped at 16 MiB each (``truncated`` is then True).
    A command killed by its timeout has ``exit_code`` 124 and ``timed_out`` True.
    """

    exit_code: int
    stdout: bytes = b""
    stderr: bytes = b""
    duration_ms: int = 0
    timed_out: bool = False
    truncated: bool = False

    @property
    def ok(self) -> bool:
        """True when the command exited 0 (and so did not time out)."""
        return self.exit_code == 0 and not self.timed_out

    @property
    def stdout_text(self) -> str:
        """stdout decoded as UTF-8 (invalid bytes replaced)."""
        return self.stdout.decode("utf-8", "replace")

    @property
    def stderr_text(self) -> str:
        """stderr decoded as UTF-8 (invalid bytes replaced)."""
        return self.stderr.decode("utf-8", "replace")

    def check(self) -> "Result":
        """Return self when ``ok``, else raise CommandFailed (which carries this Result)."""
        if not self.ok:
            raise CommandFailed(self)
        return self

    @classmethod
    def from_json(cls, obj: Dict[str, Any]) -> "Result":
        return cls(
            exit_code=int(obj["exit_code"]),
            stdout=base64.b64decode(obj.get("stdout") or ""),
            stderr=base64.b64decode(obj.get("stderr") or ""),
            duration_ms=int(obj.get("duration_ms") or 0),
            timed_out=bool(obj.get("timed_out")),
            truncated=bool(obj.get("truncated")),
        )


@dataclass(frozen=True)
class SandboxInfo:
    """One row of ``Client.sandboxes()``: a sandbox and its state."""

    name: str
    up: bool
    warm: int = 0
    warm_target: int = 0
    network: str = ""
    backend: str = ""
    base: str = ""
    error: Optional[str] = None

    @classmethod
    def from_json(cls, obj: Dict[str, Any]) -> "SandboxInfo":
        return cls(
            name=str(obj["name"]),
            up=bool(obj.get("up")),
            warm=int(obj.get("warm") or 0),
            warm_target=int(obj.get("warm_target") or 0),
            network=str(obj.get("network") or ""),
            backend=str(obj.get("backend") or ""),
            base=str(obj.get("base") or ""),
            error=obj.get("error"),
        )


@dataclass(frozen=True)
class Entry:
    """One entry of ``Sandbox.list_dir()``: type is file, dir, link or other; mode is
    octal text such as ``"0644"``."""

    name: str
    type: str
    size: int
    mode: str

    @classmethod
    def from_json(cls, obj: Dict[str, Any]) -> "Entry":
        return cls(name=str(obj["name"]), type=str(obj.get("type") or "other"),
                   size=int(obj.get("size") or 0), mode=str(obj.get("mode") or ""))


@dataclass(frozen=True)
class Snapshot:
    """One archive of a sandbox's /data (``Sandbox.snapshots()``)."""

    name: str
    created: str
    bytes: int

    @classmethod
    def from_json(cls, obj: Dict[str, Any]) -> "Snapshot":
        return cls(name=str(obj["name"]), created=str(obj.get("created") or ""),
                   bytes=int(obj.get("bytes") or 0))


@dataclass(frozen=True)
class Change:
    """One change in a fork's /data over its parent's: ``kind`` is "A" (added), "M"
    (modified) or "D" (deleted); control bytes and backslashes in ``path`` are ``\\ooo``."""

    kind: str
    path: str

    @classmethod
    def from_json(cls, obj: Dict[str, Any]) -> "Change":
        return cls(kind=str(obj["change"]), path=str(obj["path"]))


@dataclass(frozen=True)
class Changes:
    """A fork's changes (``Sandbox.diff()``), or those ``apply()`` merged into the parent's
    /data or ``discard()`` dropped. ``skipped`` counts entries too deep to take."""

    parent: str
    changes: Tuple[Change, ...] = ()
    skipped: int = 0

    def __len__(self) -> int:
        return len(self.changes)

    @classmethod
    def from_json(cls, obj: Dict[str, Any]) -> "Changes":
        return cls(parent=str(obj.get("parent") or ""),
                   changes=tuple(Change.from_json(c) for c in obj.get("changes", [])),
                   skipped=int(obj.get("skipped") or 0))
