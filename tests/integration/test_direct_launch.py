"""The direct OCI launch path (the default; BLUEBOX_LAUNCH=podman turns it off): a
uml run started by runc itself from the config.json podman generated once. Run semantics on
that path, the VMM's confinement read back from the host and compared with the podman path's,
`bluebox ps`, a hostname per run, templates removed with their sandbox, and cleanup (runc
state, cgroups, mounts, scratch, processes) after a timeout, a guest crash and kill -9 of
bluebox (and of its supervisor). Needs root, podman, runc,
build/bluebox-vmm and user-mode-linux.

    python3 -m pytest -q tests/integration/test_direct_launch.py
"""
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from test_podman_build import env, podman  # noqa: F401  (session fixture + helper)
from test_runtime import IMAGE, UML, home  # noqa: F401  (fixture)
from test_runtime import podman_containers_of as containers_of

RUNC_ROOT = "/run/bluebox-direct/runc"
RUNS = Path("/run/bluebox-direct/runs")
DIRECT = {"BLUEBOX_LAUNCH": "direct"}
PODMAN = {"BLUEBOX_LAUNCH": "podman"}
# No launch asked for, whatever the test run's own environment says (empty is unset).
DEFAULT = {"BLUEBOX_LAUNCH": ""}

pytestmark = [UML, pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("runc"),
                                      reason="the direct launch needs root and runc")]


def runc_ids():
    r = subprocess.run(["runc", "--root", RUNC_ROOT, "list", "--format", "json"],
                       capture_output=True, text=True, check=True)
    return [c["id"] for c in json.loads(r.stdout or "null") or []]


def runs_of(name):
    return [p.name for p in RUNS.glob(f"bluebox-{name}-*")] if RUNS.exists() else []


def cgroup_dirs(cid):
    """Every cgroup directory of a direct container (v1 hierarchies and v2)."""
    return [p for p in Path("/sys/fs/cgroup").glob(f"**/bluebox-direct/{cid}")]


def leftovers(home, name, cid):  # noqa: F811
    out = []
    if cid in runc_ids():
        out.append("runc state")
    if (RUNS / cid).exists():
        out.append("run directory")
    if (home.dir / "home" / "direct" / "scratch" / cid).exists():
        out.append("scratch")
    if cgroup_dirs(cid):
        out.append(f"cgroups {cgroup_dirs(cid)}")
    if cid in Path("/proc/self/mountinfo").read_text():
        out.append("mount")
    # the rootfs is mounted in the supervisor's own mount namespace: it lasts while any
    # process holds that namespace (the supervisor or runc)
    if supervisors_of(cid):
        out.append(f"supervisor or runc {supervisors_of(cid)}")
    if vmm_pids_of(cid):
        out.append("processes")
    return out


def supervisors_of(cid):
    """Processes whose command line names the run: `bluebox __direct <cid>`, `runc ... <cid>`."""
    pids = []
    for p in Path("/proc").iterdir():
        if not p.name.isdigit() or int(p.name) == os.getpid():
            continue
        try:
            args = (p / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if cid.encode() in args:
            pids.append(int(p.name))
    return pids


def comm(pid):
    """A process's comm, or "" once it has gone (a run's processes come and go as it is read:
    UML makes and ends a host process for each guest address space)."""
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def vmm_pids_of(cid):
    pids = []
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            if f"/bluebox-direct/{cid}" in (p / "cgroup").read_text():
                pids.append(int(p.name))
        except OSError:
            pass
    return pids


@pytest.fixture
def box(home):  # noqa: F811
    name = home.sandbox(f"direct-{os.getpid()}", f"base: {IMAGE}\nbackend: uml\nram_mib: 256\n")
    r = home("build", name)
    assert r.returncode == 0, r
    return name


def start(home, name, env, script="echo ready; sleep 30"):  # noqa: F811
    """A run in the background, returned once its command is running in the guest."""
    p = subprocess.Popen(home.cmd("run", name, "--", "sh", "-c", script),
                         env=dict(home.env, **env), stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    line = p.stdout.readline()
    assert line == b"ready\n", (line, p.stderr.read1(4096) if line == b"" else b"")
    return p


def the_run(name, bluebox_pid):
    ids = [i for i in runs_of(name) if i.startswith(f"bluebox-{name}-{bluebox_pid}-")]
    assert len(ids) == 1, runs_of(name)
    return ids[0]


def run_semantics(home, box):  # noqa: F811
    """A direct run as a user sees it: output, exit code, stdin byte-exact, a missing command,
    /data kept and the root not (any backend)."""
    r = home("run", box, "--", "sh", "-c", "echo out; echo err >&2; exit 3", env=DIRECT)
    assert (r.returncode, r.stdout, r.stderr) == (3, b"out\n", b"err\n"), r
    blob = os.urandom(200000) + b"\0end"
    r = home("run", box, "--", "cat", input=blob, env=DIRECT)
    assert r.returncode == 0 and r.stdout == blob, (r.returncode, len(r.stdout), r.stderr)
    r = home("run", box, "--", "no-such-command", env=DIRECT)
    assert r.returncode == 127, r
    r = home("run", box, "--", "sh", "-c", "echo kept > /data/f; echo gone > /root-file",
             env=DIRECT)
    assert r.returncode == 0, r
    assert (home.data(box) / "f").read_text() == "kept\n"


def test_direct_run_semantics(home, box):  # noqa: F811
    run_semantics(home, box)
    r = home("run", box, "--", "sh", "-c", "cat /data/f; test ! -e /root-file", env=DIRECT)
    assert (r.returncode, r.stdout) == (0, b"kept\n"), r
    # the podman path sees what the direct one wrote, and the reverse
    r = home("run", box, "--", "sh", "-c", "cat /data/f; echo back > /data/g", env=PODMAN)
    assert (r.returncode, r.stdout) == (0, b"kept\n"), r
    r = home("run", box, "--", "cat", "/data/g", env=DIRECT)
    assert (r.returncode, r.stdout) == (0, b"back\n"), r
    assert runs_of(box) == [] and not [i for i in runc_ids() if box in i]


def test_direct_run_is_runc_not_podman(home, box):  # noqa: F811
    """While a direct run runs, runc knows it (with the sandbox in its annotations) and
    podman does not."""
    p = start(home, box, DIRECT)
    try:
        cid = the_run(box, p.pid)
        assert cid in runc_ids()
        state = json.loads(subprocess.run(["runc", "--root", RUNC_ROOT, "state", cid],
                                          capture_output=True, check=True).stdout)
        assert state["annotations"]["bluebox.sandbox"] == box
        assert state["annotations"]["bluebox.launch"] == "direct"
        assert containers_of(box) == []
    finally:
        p.terminate()
        p.communicate(timeout=60)


def test_direct_timeout_is_124_and_leaves_nothing(home):  # noqa: F811
    name = home.sandbox(f"directto-{os.getpid()}",
                        f"base: {IMAGE}\nbackend: uml\nram_mib: 256\ntimeout_seconds: 2\n")
    assert home("build", name).returncode == 0
    t = time.monotonic()
    r = home("run", name, "--", "sleep", "60", env=DIRECT)
    assert r.returncode == 124, r
    assert b"bluebox: killed after 2s (timeout_seconds)" in r.stderr
    assert time.monotonic() - t < 30
    assert runs_of(name) == []
    assert not [i for i in runc_ids() if name in i]
    # nor a cgroup, a mount, scratch or a process of it
    assert not list(Path("/sys/fs/cgroup").glob(f"**/bluebox-direct/bluebox-{name}-*"))
    assert f"bluebox-{name}-" not in Path("/proc/self/mountinfo").read_text()
    assert not list((home.dir / "home" / "direct" / "scratch").glob(f"bluebox-{name}-*"))
    assert not [p for p in Path("/proc").glob("[0-9]*/cgroup")
                if f"/bluebox-direct/bluebox-{name}-" in _read(p)]


def _read(p):
    try:
        return p.read_text()
    except OSError:
        return ""


def _status(pid):
    return dict(line.split(":\t", 1) for line in
                Path(f"/proc/{pid}/status").read_text().splitlines() if ":\t" in line)


def _cgroup_limits(pid):
    lim = {}
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, ctrls, path = line.split(":", 2)
        for ctrl, file in (("pids", "pids.max"), ("memory", "memory.limit_in_bytes")):
            if ctrl in ctrls.split(","):
                lim[ctrl] = (Path("/sys/fs/cgroup") / ctrl / path.lstrip("/") / file).read_text()
        if ctrls == "":  # cgroup v2 only
            base = Path("/sys/fs/cgroup") / path.lstrip("/")
            for f in ("pids.max", "memory.max"):
                if (base / f).exists():
                    lim.setdefault(f, (base / f).read_text())
    return lim


def _limits(pid):
    keep = ("Max open files", "Max processes", "Max locked memory", "Max core file size")
    return [ln for ln in Path(f"/proc/{pid}/limits").read_text().splitlines()
            if ln.startswith(keep)]


def _children(pid):
    out = []
    for t in Path(f"/proc/{pid}/task").iterdir():
        out += [int(c) for c in (t / "children").read_text().split()]
    return out


def confinement(pid):
    """What the host sees of one process: the whole record the two paths must agree on."""
    st = _status(pid)
    fields = ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp",
              "Seccomp_filters", "Uid", "Gid")
    rec = {f: st.get(f, "").strip() for f in fields}
    for ns in ("ipc", "mnt", "net", "pid", "uts", "user", "cgroup"):
        rec["own " + ns] = (os.readlink(f"/proc/{pid}/ns/{ns}")
                           != os.readlink(f"/proc/self/ns/{ns}"))
    rec["uid_map"] = " ".join(Path(f"/proc/{pid}/uid_map").read_text().split())
    rec["limits"] = _limits(pid)
    rec["cgroup"] = _cgroup_limits(pid)
    return rec


def vmm_records(home, name, env, vmm="linux.uml"):  # noqa: F811
    """The container's init (bluebox-vmm) and the VMM it runs (the UML kernel, or QEMU:
    `vmm` is its comm), as the host sees them, while the guest's command runs."""
    p = start(home, name, env)
    try:
        if env is DIRECT:
            cid = the_run(name, p.pid)
            state = json.loads(subprocess.run(["runc", "--root", RUNC_ROOT, "state", cid],
                                              capture_output=True, check=True).stdout)
            init = state["pid"]
        else:
            ids = containers_of(name)
            assert len(ids) == 1, ids
            init = json.loads(podman("inspect", ids[0]).stdout)[0]["State"]["Pid"]
        kernels = [c for c in _children(init)
                   if comm(c) == vmm[:15]]
        assert kernels, _children(init)
        return {"bluebox-vmm": confinement(init), vmm: confinement(kernels[0])}
    finally:
        p.terminate()
        p.communicate(timeout=60)


def test_direct_confinement_is_podmans(home, box):  # noqa: F811
    """The VMM processes of the two paths, read from /proc on the host: capabilities,
    no_new_privs, seccomp mode and filter count, namespaces, uid map, rlimits, and the pids
    and memory limits of their cgroups."""
    via_podman = vmm_records(home, box, PODMAN)
    direct = vmm_records(home, box, DIRECT)
    assert direct == via_podman
    kern = direct["linux.uml"]
    assert kern["CapEff"] == "00000000000004cb" and kern["NoNewPrivs"] == "1"
    assert kern["Seccomp"] == "2" and kern["own net"] and kern["own pid"]
    assert kern["cgroup"].get("pids", kern["cgroup"].get("pids.max", "")).strip() == "512"


def _gone(home, name, cid):  # noqa: F811
    """Nothing of the run left, waiting up to 60 s: the teardown is asynchronous, and on a
    loaded slow host (a whole test run beside TCG guests) 20 s was once not enough."""
    left = []
    for _ in range(300):
        left = leftovers(home, name, cid)
        if not left:
            return []
        time.sleep(0.2)
    return left


def test_kill9_of_bluebox_leaves_nothing(home, box):  # noqa: F811
    p = start(home, box, DIRECT)
    cid = the_run(box, p.pid)
    assert leftovers(home, box, cid)  # it is there while it runs
    os.kill(p.pid, signal.SIGKILL)
    p.communicate(timeout=60)
    assert _gone(home, box, cid) == []


def test_kill9_of_bluebox_and_supervisor_is_reaped_next_start(home, box):  # noqa: F811
    """Both killed outright: the container outlives them, and the next direct launch (of any
    sandbox) reaps it."""
    p = start(home, box, DIRECT)
    cid = the_run(box, p.pid)
    sup = int((RUNS / cid / "pid").read_text())
    os.kill(sup, signal.SIGKILL)
    os.kill(p.pid, signal.SIGKILL)
    p.communicate(timeout=60)
    time.sleep(0.5)
    # the container outlives them (unless another direct launch on this machine, which
    # reaps every orphan, came first), until the next direct launch
    r = home("run", box, "--", "true", env=DIRECT)
    assert r.returncode == 0, r
    assert _gone(home, box, cid) == []


def test_direct_falls_back_to_podman_where_it_cannot(home):  # noqa: F811
    """isolation: strict (podman's id-mapped copy of the layers) stays on podman in this
    stage: the run works, through podman. (bridge, allow: and secrets: go direct:
    test_direct_net.py.)"""
    name = home.sandbox(f"directbr-{os.getpid()}",
                        f"base: {IMAGE}\nbackend: uml\nram_mib: 256\nisolation: strict\n")
    assert home("build", name).returncode == 0
    p = start(home, name, DIRECT)
    try:
        assert runs_of(name) == []
        assert len(containers_of(name)) == 1
    finally:
        p.terminate()
        p.communicate(timeout=60)


def test_direct_is_the_default(home, box):  # noqa: F811
    """Without BLUEBOX_LAUNCH a uml run as root goes the direct way; =podman keeps podman."""
    p = start(home, box, DEFAULT)
    try:
        assert runc_ids() and the_run(box, p.pid) in runc_ids()
        assert containers_of(box) == []
    finally:
        p.terminate()
        p.communicate(timeout=60)
    p = start(home, box, PODMAN)
    try:
        assert runs_of(box) == [] and len(containers_of(box)) == 1
    finally:
        p.terminate()
        p.communicate(timeout=60)


def ps_rows(home, *args):  # noqa: F811
    r = home("ps", *args)
    assert r.returncode == 0, r
    lines = r.stdout.decode().splitlines()
    assert lines[0].split() == ["CONTAINER", "SANDBOX", "LAUNCH", "STATUS", "PID"], lines
    return [ln.split() for ln in lines[1:]]


def test_bluebox_ps_lists_direct_and_podman_runs(home, box):  # noqa: F811
    """`podman ps` cannot see a direct run; `bluebox ps` lists both kinds, with the pid of
    the container's init (bluebox-vmm) as runc or podman has it."""
    other = home.sandbox(f"directps-{os.getpid()}", f"base: {IMAGE}\nbackend: uml\nram_mib: 256\n")
    assert home("build", other).returncode == 0
    d = start(home, box, DIRECT)
    p = start(home, other, PODMAN)
    try:
        cid = the_run(box, d.pid)
        state = json.loads(subprocess.run(["runc", "--root", RUNC_ROOT, "state", cid],
                                          capture_output=True, check=True).stdout)
        pod = containers_of(other)
        assert len(pod) == 1
        pod_name = podman("inspect", "--format", "{{.Name}}", pod[0]).stdout.strip()
        pod_pid = podman("inspect", "--format", "{{.State.Pid}}", pod[0]).stdout.strip()
        rows = ps_rows(home)
        assert [cid, box, "direct", "running", str(state["pid"])] in rows, rows
        assert [pod_name, other, "podman", "running", pod_pid] in rows, rows
        assert ps_rows(home, box) == [[cid, box, "direct", "running", str(state["pid"])]]
        r = home("ps", "-q", other)
        assert r.stdout.decode().split() == [pod_name], r
        # another home sees none of them
        assert home("ps", env={"BLUEBOX_HOME": str(home.dir / "elsewhere")}).stdout.decode() \
            .splitlines()[1:] == []
    finally:
        for q in (d, p):
            q.terminate()
            q.communicate(timeout=60)
    assert ps_rows(home) == []


def guest_hostname(home, name, env):  # noqa: F811
    r = home("run", name, "--", "hostname", env=env)
    assert r.returncode == 0, r
    return r.stdout.decode().strip()


def test_each_direct_run_has_its_own_hostname(home, box):  # noqa: F811
    """As podman names each container afresh, each direct run of one template gets its own."""
    names = {guest_hostname(home, box, DIRECT) for _ in range(3)}
    assert len(names) == 3, names
    assert all(len(n) == 12 for n in names), names


def templates_of(home, name):  # noqa: F811
    return sorted(p.name for p in (home.dir / "home" / "direct" / "tpl").glob(f"{name}-*"))


def test_destroy_and_rename_remove_the_templates(home):  # noqa: F811
    a = home.sandbox(f"directtpl-{os.getpid()}", f"base: {IMAGE}\nbackend: uml\nram_mib: 256\n")
    assert home("build", a).returncode == 0
    assert home("run", a, "--", "true", env=DIRECT).returncode == 0
    assert len(templates_of(home, a)) == 1
    b = f"{a}-moved"
    assert home("rename", a, b).returncode == 0
    home.names.append(b)
    assert templates_of(home, a) == []
    assert home("run", b, "--", "true", env=DIRECT).returncode == 0
    assert len(templates_of(home, b)) == 1
    r = home("destroy", b, "--data", "-y")
    assert r.returncode == 0, r
    assert templates_of(home, b) == []


def test_guest_crash_leaves_nothing(home, box):  # noqa: F811
    """The UML kernel killed from the host (a crashed guest): the run ends with an error and
    its container, cgroup, mount and scratch go with it."""
    p = start(home, box, DIRECT)
    cid = the_run(box, p.pid)
    kernels = [pid for pid in vmm_pids_of(cid) if comm(pid) == "linux.uml"]
    assert kernels
    for k in kernels:
        try:
            os.kill(k, signal.SIGKILL)
        except ProcessLookupError:  # one of UML's processes, gone with the first
            pass
    p.communicate(timeout=60)
    assert p.returncode != 0
    assert _gone(home, box, cid) == []


def _uml_kernel(cid):
    """The UML kernel of a run: its linux.uml process whose parent is not linux.uml (the host
    processes it makes for guest processes are its clones)."""
    for pid in vmm_pids_of(cid):
        try:
            ppid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if comm(pid) == "linux.uml" and comm(ppid) not in ("linux.uml", ""):
            return pid
    return None


def test_kernel_killed_while_the_guest_forks_leaves_nothing(home, box):  # noqa: F811
    """The UML kernel alone killed while the guest makes processes as fast as it can: a host
    process UML cloned for a guest process just as it died is left behind, holding UML's files
    (the agent socket among them). The run must still end, and leave nothing, every time."""
    for _ in range(3):
        p = start(home, box, DIRECT, script="echo ready; while :; do /bin/true; done")
        cid = the_run(box, p.pid)
        kernel = _uml_kernel(cid)
        assert kernel, vmm_pids_of(cid)
        time.sleep(0.5)
        os.kill(kernel, signal.SIGKILL)
        try:
            p.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            left = {pid: comm(pid) for pid in vmm_pids_of(cid)}
            p.kill()
            pytest.fail(f"the run did not end after its kernel was killed; left: {left}")
        assert p.returncode != 0
        assert _gone(home, box, cid) == []
