"""A census of what a host holds, and the difference of two: what bluebox left behind.

take(home, markers) counts what a run of bluebox could leave on this host:
  proc    every process (pid + start time, comm, parent, argv), and which are ours
  fds     open fds per process and the host's allocated handles (/proc/sys/fs/file-nr)
  mount   /proc/self/mountinfo and /proc/1/mountinfo (mount point, type, source, options)
  run     /run (three levels; /run/bluebox* and /run/user/* deeper), /tmp, /dev/shm
  cgroup  /sys/fs/cgroup/<controller>/ three levels down
  podman  `podman ps -a` (root)
  runc    `runc list` under /run/runc and every --root bluebox uses (src/launch/direct.h)
  net     /sys/class/net interfaces, loop devices and their backing files
  home    BLUEBOX_HOME: every path with its size, the total allocated bytes
  mem     MemAvailable, Shmem, Slab (kB)

Attribution: an entry is *ours* when its text (a path, an argv, a cgroup, a mount's options, a
process's environment or working directory) contains one of `markers` (the home's path and the
soak's unique sandbox names: every container name, direct run, scratch dir and cgroup of a
sandbox carries the sandbox's name, src/launch/launch.c), or, for a process, when its parent is
ours. Other helpers' and CI workers' VMs run beside a soak, so a test asserts on ours; a bench on
a quiet host may assert on everything (diff(..., strict=True)).

diff(before, after) -> Diff: `ours` and `other` leftovers (one line each, naming the thing), and
the figures (fds, memory, home size) before and after."""
import json
import os
import re
import subprocess
import time
from collections import Counter
from dataclasses import dataclass, field

# Kept where runc keeps bluebox's direct launches (src/launch/direct.h).
DIRECT_RUNC_ROOT = "/run/bluebox-direct/runc"
RUNC_ROOTS = ("/run/runc", DIRECT_RUNC_ROOT)
# Processes a sandbox's life starts on the host; a new one of these that outlives the soak is a
# leftover even when nothing ties it to the soak (reported as `other` unless strict).
PROGRAMS = ("bluebox", "bluebox-vmm", "linux", "linux.uml", "vmlinux", "runc", "conmon",
            "slirp4netns", "pasta", "podman", "catatonit", "fuse-overlayfs", "qemu-system-x86",
            "qemu-system-aarch64", "exe")
# More than this is a file of the home that grows with use, not one that changed.
GROWTH = 64 * 1024
# Home files that grow by design with every run, bounded by rotation (src/core/runlog.h:
# 1 MiB before a rotation, two generations; the connection log likewise, core/home.h).
LOG_CAP = 4 * (1 << 20)


def _read(path, limit=1 << 16):
    try:
        with open(path, "rb") as f:
            return f.read(limit).decode(errors="replace")
    except OSError:
        return None


def _ours(text, markers):
    return bool(text) and any(m in text for m in markers)


def _procs(markers):
    procs, fds = {}, {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        stat = _read(f"/proc/{pid}/stat")
        if not stat:
            continue
        comm = stat[stat.index("(") + 1:stat.rindex(")")]
        rest = stat[stat.rindex(")") + 2:].split()
        ppid, start = rest[1], rest[19]
        if ppid == "2" or pid == "2":
            continue  # kernel threads
        argv = (_read(f"/proc/{pid}/cmdline") or "").replace("\0", " ").replace("\n", "\\n").strip()
        text = " ".join(x or "" for x in (argv, _read(f"/proc/{pid}/cgroup"),
                                           _read(f"/proc/{pid}/environ")))
        try:
            text += " " + os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            pass
        try:
            names = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            names = []
        targets = []
        for n in names:
            try:
                targets.append(os.readlink(f"/proc/{pid}/fd/{n}"))
            except OSError:
                pass
        key = f"{pid}@{start}"
        procs[key] = {"pid": int(pid), "ppid": int(ppid), "comm": comm, "argv": argv[:300],
                      "ours": _ours(text, markers) or _ours(" ".join(targets), markers)}
        fds[key] = len(names)
    # a child of ours is ours (a VMM under conmon, a runc init under a supervisor)
    by_pid = {p["pid"]: p for p in procs.values()}
    for p in procs.values():
        seen, q = set(), p
        while q and not p["ours"] and q["pid"] not in seen:
            seen.add(q["pid"])
            q = by_pid.get(q["ppid"])
            if q and q["ours"]:
                p["ours"] = True
    return procs, fds


def _mounts():
    out = Counter()
    for ns in ("self", "1"):
        for line in (_read(f"/proc/{ns}/mountinfo", 1 << 22) or "").splitlines():
            pre, post = line.split(" - ", 1)
            pre, post = pre.split(), post.split()
            # mount point, root within the source, type, source, super options (an overlay's
            # lower/upper dirs): not the mount id, which every mount changes
            out[f"{ns}: {pre[4]} {post[0]} {post[1]} root={pre[3]} {post[2] if len(post) > 2 else ''}"] += 1
    return out


def _tree(top, depth, deeper=()):
    """Paths under top down to depth; a path starting with one of `deeper` goes 3 further."""
    out = set()

    def walk(d, left):
        try:
            names = os.listdir(d)
        except OSError:
            return
        for n in names:
            p = os.path.join(d, n)
            out.add(p)
            more = left + (3 if any(p.startswith(x) for x in deeper) and left <= 1 else 0)
            if more > 1 and os.path.isdir(p) and not os.path.islink(p):
                walk(p, more - 1)
    walk(top, depth)
    return out


def _cmd(argv):
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd="/")
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, str(e)
    return (r.stdout if r.returncode == 0 else None), r.stderr.strip()


def _containers():
    podman, runc = set(), set()
    out, _ = _cmd(["podman", "ps", "-a", "--format", "json"])
    for c in json.loads(out or "[]"):
        names = ",".join(c.get("Names") or [])
        podman.add(f"podman {c.get('Id', '')[:12]} {names} {c.get('State', '')} "
                   f"labels={','.join(f'{k}={v}' for k, v in (c.get('Labels') or {}).items() if k.startswith('bluebox'))}")
    for root in RUNC_ROOTS:
        out, _ = _cmd(["runc", "--root", root, "list", "--format", "json"])
        for c in json.loads(out or "null") or []:
            runc.add(f"runc --root {root}: {c['id']} {c['status']} pid {c['pid']} "
                     f"bundle {c['bundle']}")
    return podman, runc


def _net():
    out = {f"if {n}" for n in os.listdir("/sys/class/net")}
    for n in os.listdir("/sys/block"):
        back = _read(f"/sys/block/{n}/loop/backing_file")
        if back:
            out.add(f"loop {n} -> {back.strip()}")
    return out


def _home(home):
    files, total = {}, 0
    for d, dirs, names in os.walk(home):
        for n in dirs + names:
            p = os.path.join(d, n)
            try:
                st = os.lstat(p)
            except OSError:
                continue
            total += st.st_blocks * 512
            files[os.path.relpath(p, home)] = st.st_size
    return files, total


def _mem():
    out = {}
    for line in (_read("/proc/meminfo") or "").splitlines():
        k, v = line.split(":", 1)
        if k in ("MemAvailable", "Shmem", "Slab", "MemFree"):
            out[k] = int(v.split()[0])
    return out


@dataclass
class Census:
    at: float
    procs: dict
    fds: dict
    file_nr: int
    mounts: Counter
    paths: set
    cgroups: set
    podman: set
    runc: set
    net: set
    home: dict
    home_bytes: int
    mem: dict
    markers: tuple


def take(home, markers):
    """The host now. home: BLUEBOX_HOME (may not exist yet); markers: strings that mark what is
    the soak's (the home's path is added)."""
    markers = tuple(m for m in (str(home), *markers) if m)
    procs, fds = _procs(markers)
    paths = set()
    for top, depth in (("/run", 3), ("/tmp", 1), ("/dev/shm", 1)):
        paths |= _tree(top, depth, deeper=("/run/bluebox", "/run/user/", "/run/netns"))
    cgroups = set()
    for ctl in os.listdir("/sys/fs/cgroup"):
        cgroups |= {p for p in _tree(f"/sys/fs/cgroup/{ctl}", 3)
                    if os.path.isdir(p) and not os.path.islink(p)}
    podman, runc = _containers()
    files, total = _home(home) if os.path.isdir(home) else ({}, 0)
    return Census(time.time(), procs, fds, int((_read("/proc/sys/fs/file-nr") or "0").split()[0]),
                  _mounts(), paths, cgroups, podman, runc, _net(), files, total, _mem(), markers)


@dataclass
class Diff:
    ours: list = field(default_factory=list)    # leftovers of the soak's, one line each
    other: list = field(default_factory=list)   # new things nothing ties to the soak
    figures: list = field(default_factory=list)  # before -> after lines (fds, memory, home)

    def leftovers(self, strict=False):
        return self.ours + (self.other if strict else [])

    def report(self):
        out = [f"  {x}" for x in self.figures]
        out += [f"  LEFTOVER {x}" for x in self.ours] or ["  nothing of the soak's is left"]
        out += [f"  new, not the soak's: {x}" for x in self.other]
        return "\n".join(out)


def _shape(path):
    """A path with its 16-hex cache key made generic: direct/tpl/<name>-<key> is one template
    per sandbox (the older are pruned), however often the key changes, and the names of its
    copies of podman's files (file-<index of the mount>) follow podman's mount order."""
    path = re.sub(r"-[0-9a-f]{16}(?=/|$)", "-<key>", path)
    return re.sub(r"^(direct/tpl/[^/]+/)file-\d+$", r"\1file-<n>", path)


# The note a SIGKILLed run leaves in locks/<name>.users/ (src/core/inuse.h): the next run's
# hold removes it, but a case that ends at the kill has no next run.
KILLED_NOTE = r"locks/[^/]+\.users/\d+"

# Home files of a fixed name that appear on a first use the warm-up may not reach, one each
# whatever the counts: the socket a SIGKILLed `serve` could not remove (the next serve
# replaces it), and the flock file a second tender waits on (docs/ARCHITECTURE.md).
FIXED = (r"bluebox\.sock", r"pool/[^/]+/\.waiter")


def _is_log(path):
    parts = path.split(os.sep)
    return parts[0] in ("logs", "log") or ".log" in parts[-1] or parts[-1].startswith("log")


def diff(before, after, allow=()):
    """allow: regular expressions of home paths that are no leftover for this caller."""
    d = Diff()
    m = after.markers

    def put(text, ours):
        (d.ours if ours else d.other).append(text)
    for key, p in sorted(after.procs.items()):
        if key in before.procs:
            continue
        if p["ours"]:
            put(f"process {p['pid']} ({p['comm']}, parent {p['ppid']}): {p['argv']}", True)
        elif p["comm"] in PROGRAMS or p["comm"].startswith("bluebox"):
            put(f"process {p['pid']} ({p['comm']}, parent {p['ppid']}): {p['argv']}", False)
    for key, n in sorted(after.fds.items()):
        was = before.fds.get(key)
        if was is not None and n > was + 2 and after.procs[key]["ours"]:
            put(f"fds of process {after.procs[key]['pid']} ({after.procs[key]['comm']}): "
                f"{was} -> {n}", True)
    for mnt, n in sorted((after.mounts - before.mounts).items()):
        put(f"mount{'' if n == 1 else f' x{n}'} {mnt}", _ours(mnt, m))
    for kind, a, b in (("path", after.paths, before.paths), ("cgroup", after.cgroups, before.cgroups),
                       ("container", after.podman, before.podman),
                       ("container", after.runc, before.runc), ("host", after.net, before.net)):
        for x in sorted(a - b):
            put(f"{kind} {x}", _ours(x, m))
    new = sorted(p for p in set(after.home) - set(before.home) if not _is_log(p))
    fresh = set(new)
    shapes = Counter(map(_shape, after.home)) - Counter(map(_shape, before.home))
    for path in new:  # a new directory names its tree once
        if os.path.dirname(path) in fresh:
            continue
        if _shape(path) != path and not shapes[_shape(path)]:
            d.figures.append(f"home path {path} replaced one of its kind (as many as before)")
            continue
        if any(re.fullmatch(f, path) for f in FIXED):
            d.figures.append(f"home path {path}: one of a fixed name, made on a first use")
            continue
        if any(re.fullmatch(f, path) for f in allow):
            d.figures.append(f"home path {path}: allowed here")
            continue
        under = [p for p in new if p.startswith(path + os.sep)]
        put(f"home path {path} ({after.home[path]} bytes"
            f"{f', {len(under)} paths under it' if under else ''})", True)
    logs = sum(s for p, s in after.home.items() if _is_log(p) and os.sep in p)
    for p, s in sorted(after.home.items()):
        if _is_log(p) and s > LOG_CAP:
            put(f"home log {p} is {s} bytes (cap {LOG_CAP})", True)
        elif not _is_log(p) and s > before.home.get(p, s) + GROWTH:
            put(f"home path {p} grew {before.home[p]} -> {s} bytes", True)
    d.figures = [
        f"host file handles (file-nr): {before.file_nr} -> {after.file_nr} "
        f"({after.file_nr - before.file_nr:+d})",
        f"fds of all processes: {sum(before.fds.values())} -> {sum(after.fds.values())}",
        f"processes: {len(before.procs)} -> {len(after.procs)}",
        f"mounts: {sum(before.mounts.values())} -> {sum(after.mounts.values())}",
        f"BLUEBOX_HOME: {before.home_bytes // 1024} -> {after.home_bytes // 1024} KiB allocated, "
        f"{len(before.home)} -> {len(after.home)} paths (logs now {logs // 1024} KiB)",
    ] + [f"{k}: {before.mem.get(k, 0) // 1024} -> {after.mem.get(k, 0) // 1024} MiB "
         f"({(after.mem.get(k, 0) - before.mem.get(k, 0)) // 1024:+d})"
         for k in ("MemAvailable", "Shmem", "Slab")]
    return d


def settle(before, home, markers, timeout=20, every=0.5, allow=()):
    """Census until nothing of the soak's is left, or timeout: (Diff, seconds it took)."""
    t0 = time.monotonic()
    while True:
        d = diff(before, take(home, markers), allow)
        if not d.ours or time.monotonic() - t0 >= timeout:
            return d, time.monotonic() - t0
        time.sleep(every)


def fd_count(pid):
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None
