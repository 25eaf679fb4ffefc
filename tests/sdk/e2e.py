"""Shared by the SDKs' end-to-end tests (tests/integration/test_sdk_*.py): a throwaway
BLUEBOX_HOME with one built uml sandbox, that home's socket, and stopping the server an SDK
autostarted there (found by the socket's SO_PEERCRED, so only that process is signalled)."""
import os
import re
import signal
import socket
import struct
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SDKS = REPO / "docs" / "sdks.md"


def server_pid(sock_path):
    """The pid of the process serving sock_path, or None when nothing answers."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(sock_path)
        cred = s.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        return struct.unpack("3i", cred)[0]
    except OSError:
        return None
    finally:
        s.close()


def stop_server(sock_path):
    pid = server_pid(sock_path)
    if pid is None:
        return
    os.kill(pid, signal.SIGTERM)
    for _ in range(200):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)


def docs_block(heading, lang):
    """The first ```lang code block under the heading `heading` of docs/sdks.md."""
    text = SDKS.read_text()
    m = re.search(rf"^#+ {re.escape(heading)}\n(.*?)(?=^#+ |\Z)", text, flags=re.M | re.S)
    assert m, f"docs/sdks.md has no section {heading!r}"
    b = re.search(rf"^```{lang}\n(.*?)^```", m.group(1), flags=re.M | re.S)
    assert b, f"docs/sdks.md section {heading!r} has no ```{lang} block"
    return b.group(1)
