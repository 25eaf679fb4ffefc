"""A BLUEBOX_HOME's id as bluebox computes it (src/core/home.c home_id; tests/cli/conftest.py
loads this file): FNV-1a over the canonical path (NUL included) and, when it exists, its
st_dev and st_ino; the top 48 bits as 12 hex digits. Image tags are
localhost/bluebox/<name>:<id>, up VMs bluebox-up-<name>-<id>."""
import os


def home_id(root):
    path = os.path.realpath(root)
    data = path.encode() + b"\0"
    try:
        st = os.stat(path)
        data += st.st_dev.to_bytes(8, "little") + st.st_ino.to_bytes(8, "little")
    except FileNotFoundError:
        pass
    h = 0xcbf29ce484222325
    for c in data:
        h = ((h ^ c) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return "%012x" % (h >> 16)
