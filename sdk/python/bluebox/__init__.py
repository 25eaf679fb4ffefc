"""bluebox: drive bluebox sandboxes from Python through the local API (``bluebox serve``).

    from bluebox import Sandbox

    with Sandbox("demo") as box:                 # up on enter, down on exit
        r = box.exec(["python3", "-c", "print(6*7)"])
        print(r.exit_code, r.stdout_text)

The server is started on first use when none answers (``bluebox serve --idle 15m``).
Standard library only.
"""
from ._client import Client, Command, ExecStream, Sandbox
from ._errors import (BadRequest, BadSocket, BlueboxError, CommandFailed, IsUp, NoServer,
                      NotBuilt, NotFound, NotUp, Refused)
from ._transport import socket_path
from ._types import Change, Changes, Entry, Result, SandboxInfo, Snapshot

__version__ = "0.1.0"

__all__ = [
    "Client", "Sandbox", "ExecStream", "Command", "Result", "SandboxInfo", "Entry", "Snapshot",
    "Change", "Changes", "BlueboxError", "NotFound", "NotUp", "NotBuilt", "IsUp", "Refused", "BadRequest", "NoServer", "BadSocket",
    "CommandFailed", "socket_path",
]
