"""Whether this host has a KVM device: /dev/kvm a character device that opens read-write.

A regular file at /dev/kvm opens too (a shell's `<>/dev/kvm` makes one where there is no
device), and bluebox rightly refuses it, so a test must not count it as KVM."""
import os
import stat


def kvm_openable():
    try:
        fd = os.open("/dev/kvm", os.O_RDWR | os.O_NOCTTY)
    except OSError:
        return False
    try:
        return stat.S_ISCHR(os.fstat(fd).st_mode)
    finally:
        os.close(fd)
