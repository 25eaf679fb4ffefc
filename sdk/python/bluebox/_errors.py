"""The errors the SDK raises: one base class with the API's error code and HTTP status."""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:  # pragma: no cover
    from ._types import Result


class BlueboxError(Exception):
    """An error from the bluebox API or from the SDK itself.

    ``code`` is the API's machine-readable code (``no_sandbox``, ``not_up``, ``is_up``,
    ``refused``, ``not_built``, ``bad_name``, ``bad_request``, ``too_large``, ``not_found``, ``method``, ``internal``)
    or one of the SDK's own (``no_server``, ``bad_socket``, ``command_failed``).
    ``status`` is the HTTP status, or None when no response was received.
    """

    def __init__(self, message: str, code: str = "internal", status: Optional[int] = None):
        super().__init__(message)
        self.message = message
        self.code = code
        self.status = status

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, code={self.code!r}, status={self.status!r})"


class NotFound(BlueboxError):
    """No sandbox by that name (``no_sandbox``), or an unknown route (``not_found``)."""


class NotUp(BlueboxError):
    """The sandbox must be up for this (``not_up``): call ``Sandbox.up()`` first."""


class NotBuilt(BlueboxError):
    """The sandbox was never built (``not_built``): run ``bluebox build NAME`` first."""


class IsUp(BlueboxError):
    """The sandbox must be down for this (``is_up``), e.g. ``restore``."""


class Refused(BlueboxError):
    """A guard of the operation said no (``refused``): a fork asked to reset or snapshot, a
    sandbox that is not a fork asked to diff/apply/discard, /data in use by a run. The
    message says why and what to do instead."""


class BadRequest(BlueboxError):
    """The server refused the request as malformed (``bad_request``, ``bad_name``,
    ``too_large``, ``method``)."""


class NoServer(BlueboxError):
    """No ``bluebox serve`` answers on the socket and none could be started."""


class BadSocket(BlueboxError):
    """The socket path cannot be used (too long, or no directory to put it in)."""


class CommandFailed(BlueboxError):
    """Raised by ``Result.check()`` for a command that exited non-zero or timed out.

    ``result`` is the failed Result (its stdout/stderr are there to inspect).
    """

    def __init__(self, result: "Result"):
        what = "timed out" if result.timed_out else f"exited {result.exit_code}"
        tail = result.stderr_text.strip().splitlines()[-1:] if result.stderr else []
        msg = f"command {what}" + (f": {tail[0]}" if tail else "")
        super().__init__(msg, "command_failed", None)
        self.result = result


_BY_CODE = {
    "no_sandbox": NotFound,
    "not_found": NotFound,
    "not_up": NotUp,
    "is_up": IsUp,
    "refused": Refused,
    "not_built": NotBuilt,
    "bad_request": BadRequest,
    "bad_name": BadRequest,
    "too_large": BadRequest,
    "method": BadRequest,
    "no_server": NoServer,
    "bad_socket": BadSocket,
}


# a body that is not JSON (the HTTP layer's own 413, say): the code from the status
CODE_OF_STATUS = {400: "bad_request", 404: "not_found", 405: "method", 413: "too_large"}


def error_for(message: str, code: str, status: Optional[int]) -> BlueboxError:
    """The typed error for an API error code (BlueboxError for codes it does not know)."""
    return _BY_CODE.get(code, BlueboxError)(message, code, status)
