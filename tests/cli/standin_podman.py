#!/usr/bin/python3
"""A STAND-IN for podman, installed as `podman` first on PATH by tests/cli/test_run.py.

It is not podman and it isolates nothing. It exists to check bluebox's process plumbing —
the argv bluebox builds, exit codes, stdout/stderr, stdin, timeouts, signal cleanup, the
isolation cache — without a container runtime. The real podman (and the uml kernel) path is
tested in tests/integration.

What it does:
  - appends every argv it gets (JSON, one line) to $BB_TEST_PODMAN_LOG;
  - `run`: parses podman's options the way bluebox emits them (`--x=y`, `--rm`,
    `--read-only`, `-v <arg>`, `-i`, `-t`), then takes the image and the command after it.
      * a probe (`__probe` in the command) prints "<kernel release>\\n<boot_id>\\n":
        the plain launch (no `--entrypoint=/.bluebox/vmm/bluebox-vmm`, no `--runtime=`)
        prints the host's; the backend's launch prints $BB_STANDIN_GUEST_KERNEL and
        $BB_STANDIN_GUEST_BOOT_ID (defaults: a fake kernel that differs from the host);
      * anything else is the workload: the stand-in starts a new session, records
        "<container name> <pid>" in $BB_STANDIN_STATE and execs the command on the host
        (the host plays the guest). stdin is passed only with `-i`, else /dev/null. A
        missing command exits 127 like podman does;
  - `rm [-f] [-t N] [--ignore] NAME…`: SIGKILLs the recorded session of each NAME (the
    whole "container") and appends "killed NAME PID" to $BB_STANDIN_STATE/killed;
  - `ps`: prints $BB_STANDIN_PS_IDS (one id per line) when it is set; else the recorded
    containers whose workload is still alive and that carry every `--filter label=K=V`
    (the name is the ID; `--format {{.Names}}` prints the same);
  - `build … --iidfile=F`: writes a fake image id to F and exits 0 (it builds nothing);
  - `image exists REF`: as the conftest stub (bluebox's own images only when in
    $BB_TEST_IMAGES, other images unless in $BB_TEST_MISSING); `pull` exits $BB_TEST_PULL_EXIT;
  - $BB_STANDIN_GONE_IMAGES: refs deleted behind bluebox's back (podman rmi): `run` of one
    fails as podman does ("Error: REF: image not known", exit 125);
  - $BB_STANDIN_RLIMITS set: `run` plays runc on a host where root cannot raise a limit:
    a container whose nofile or nproc (its `--ulimit=`, else podman's defaults: 1048576 and
    pid_max) exceeds the hard limit this process inherited fails as runc does (exit 126);
  - `images`: prints $BB_STANDIN_LOCAL_IMAGES, one per line;
  - `--version`: prints a version line; everything else (`rmi`, `unshare`, …) exits 0
    quietly.
"""
import json
import os
import resource
import signal
import sys

HOST_BOOT_ID_FILE = "/proc/sys/kernel/random/boot_id"
FAKE_KERNEL = "6.1.0-standin"
FAKE_BOOT_ID = "00000000-5afe-4bad-8000-57a9d1e0b0a7"
VMM_ENTRYPOINT = "--entrypoint=/.bluebox/vmm/bluebox-vmm"


def log_argv(argv):
    path = os.environ.get("BB_TEST_PODMAN_LOG")
    if not path:
        return
    with open(path, "a") as f:
        f.write(json.dumps(argv) + "\n")


def state_dir():
    d = os.environ.get("BB_STANDIN_STATE")
    if not d:
        sys.stderr.write("standin podman: BB_STANDIN_STATE is not set\n")
        sys.exit(125)
    os.makedirs(d, exist_ok=True)
    return d


def parse_run(args):
    """podman run's options as bluebox emits them → (opts, image, cmd)."""
    opts = {"flags": set(), "kv": [], "volumes": []}
    i = 0
    while i < len(args):
        a = args[i]
        if a in ("-i", "-t", "--rm", "--read-only", "--no-hosts"):
            opts["flags"].add(a)
        elif a == "-v":
            if i + 1 >= len(args):
                raise SystemExit("standin podman: -v needs an argument")
            i += 1
            opts["volumes"].append(args[i])
        elif a.startswith("--") and "=" in a:
            k, _, v = a.partition("=")
            opts["kv"].append((k, v))
        elif a.startswith("-"):
            sys.stderr.write(f"standin podman: unexpected run option {a!r}\n")
            sys.exit(125)
        else:
            return opts, a, args[i + 1:]
        i += 1
    sys.stderr.write("standin podman: run without an image\n")
    sys.exit(125)


def kv(opts, key):
    return [v for k, v in opts["kv"] if k == key]


def host_kernel():
    with open(HOST_BOOT_ID_FILE) as f:
        return os.uname().release, f.read().strip()


def rlimit_refused(opts):
    """The resource runc could not set (7 nofile, 6 nproc), or None."""
    with open("/proc/sys/kernel/pid_max") as f:
        pid_max = int(f.read())
    want = {"nofile": 1048576, "nproc": pid_max}
    for u in kv(opts, "--ulimit"):
        name, _, value = u.partition("=")
        want[name] = int(value.rpartition(":")[2])
    for name, res, number in (("nofile", resource.RLIMIT_NOFILE, 7),
                              ("nproc", resource.RLIMIT_NPROC, 6)):
        hard = resource.getrlimit(res)[1]
        if hard != resource.RLIM_INFINITY and want[name] > hard:
            return number
    return None


def do_run(args):
    opts, image, cmd = parse_run(args)
    refused = os.environ.get("BB_STANDIN_RLIMITS") and rlimit_refused(opts)
    if refused:
        sys.stderr.write("Error: runc: runc create failed: unable to start container process: "
                         "error during container init: error setting rlimits for ready "
                         f"process: error setting rlimit type {refused}: operation not "
                         "permitted: OCI permission denied\n")
        return 126
    if image in os.environ.get("BB_STANDIN_GONE_IMAGES", "").split():
        sys.stderr.write(f"Error: {image}: image not known\n")
        return 125
    if not cmd:
        sys.stderr.write("standin podman: run without a command\n")
        return 125
    if "__probe" in cmd:
        plain = VMM_ENTRYPOINT not in args and not kv(opts, "--runtime")
        if plain:
            release, boot_id = host_kernel()
        else:
            release = os.environ.get("BB_STANDIN_GUEST_KERNEL") or FAKE_KERNEL
            boot_id = os.environ.get("BB_STANDIN_GUEST_BOOT_ID") or FAKE_BOOT_ID
        sys.stdout.write(f"{release}\n{boot_id}\n")
        return 0
    names = kv(opts, "--name")
    name = names[-1] if names else "unnamed"
    d = state_dir()
    try:
        os.setsid()  # the session is the "container": rm kills all of it
    except OSError:
        pass
    with open(os.path.join(d, "containers"), "a") as f:
        f.write(f"{name} {os.getpid()}\n")
    with open(os.path.join(d, "labels"), "a") as f:
        f.write(json.dumps([name, kv(opts, "--label")]) + "\n")
    if "-i" not in opts["flags"]:
        fd = os.open("/dev/null", os.O_RDONLY)
        os.dup2(fd, 0)
        os.close(fd)
    try:
        os.execvp(cmd[0], cmd)
    except FileNotFoundError:
        sys.stderr.write(f"Error: {cmd[0]}: executable file not found in $PATH\n")
        return 127
    except PermissionError:
        sys.stderr.write(f"Error: {cmd[0]}: permission denied\n")
        return 126


def do_rm(args):
    names = []
    i = 0
    while i < len(args):
        if args[i] in ("-t", "--time"):
            i += 1  # its value
        elif not args[i].startswith("-"):
            names.append(args[i])
        i += 1
    d = state_dir()
    path = os.path.join(d, "containers")
    known = {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                n, _, pid = line.strip().partition(" ")
                known[n] = int(pid)
    for n in names:
        pid = known.get(n)
        if pid is None:
            continue
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            continue
        with open(os.path.join(d, "killed"), "a") as f:
            f.write(f"killed {n} {pid}\n")
    return 0


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def do_ps(args):
    ids = os.environ.get("BB_STANDIN_PS_IDS")
    if ids is not None:
        for i in ids.split():
            print(i)
        return 0
    want = [a[len("label="):] for a in args if a.startswith("label=")]
    d = os.environ.get("BB_STANDIN_STATE")
    if not d or not os.path.exists(os.path.join(d, "labels")):
        return 0
    pids = {}
    with open(os.path.join(d, "containers")) as f:
        for line in f:
            n, _, pid = line.strip().partition(" ")
            pids[n] = int(pid)
    with open(os.path.join(d, "labels")) as f:
        for line in f:
            name, labels = json.loads(line)
            if all(w in labels for w in want) and alive(pids.get(name, 0)):
                print(name)
    return 0


def main():
    argv = sys.argv[1:]
    log_argv(argv)
    if not argv:
        return 125
    if argv[0] == "--version":
        print("podman version 0.0.0-standin")
        return 0
    if argv[0] == "run":
        return do_run(argv[1:])
    if argv[0] == "rm":
        return do_rm(argv[1:])
    if argv[0] == "ps":
        return do_ps(argv[1:])
    if argv[0] == "build":
        # `podman build … --iidfile=F`: write a fake image id, as if it had built.
        for a in argv:
            if a.startswith("--iidfile="):
                with open(a[len("--iidfile="):], "w") as f:
                    f.write("sha256:" + "5a" * 32)
        return 0
    if argv[0:2] == ["image", "exists"] and len(argv) > 2:
        if argv[2] in os.environ.get("BB_TEST_IMAGES", "").split():
            return 0
        if argv[2].startswith("localhost/bluebox/"):
            return 1
        return 1 if argv[2] in os.environ.get("BB_TEST_MISSING", "").split() else 0
    if argv[0] == "images":
        for ref in os.environ.get("BB_STANDIN_LOCAL_IMAGES", "").split():
            print(ref)
        return 0
    if argv[0] == "pull":
        return int(os.environ.get("BB_TEST_PULL_EXIT", "0"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
