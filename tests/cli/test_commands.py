"""The commands, driven the way a user drives them: new, edit, ls, env, logs, rename,
destroy, nuke, completion, help, and the usage-error conventions."""
import json
import os
import re
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

EXAMPLES_DIR = Path(__file__).resolve().parents[2] / "examples"

COMMANDS = ["new", "edit", "build", "ls", "env", "logs", "rename", "destroy", "nuke",
            "completion", "help"]


def usage_error(r):
    """Exit 2, nothing on stdout, one "bluebox: " line on stderr."""
    assert r.rc == 2, r
    assert r.out == "", r
    return r.error_line()


def plain_error(r):
    assert r.rc == 1, r
    assert r.out == "", r
    return r.error_line()


# ---- new --------------------------------------------------------------------------

def test_new_prints_bluefile_path_and_creates_data(bb):
    r = bb.run("new", "demo")
    assert r.rc == 0, r
    assert r.out == f"{bb.bluefile('demo')}\n"
    assert bb.bluefile("demo").is_file()
    assert stat.S_IMODE(bb.bluefile("demo").stat().st_mode) == 0o644
    assert bb.data("demo").is_dir()
    assert list(bb.data("demo").iterdir()) == []


def test_new_makes_the_home_owner_only(bb):
    # Under root podman a guest's /data is host root's; no other user may reach into it.
    bb.new("demo")
    for d in (bb.home, bb.home / "data", bb.home / "sandboxes"):
        assert stat.S_IMODE(d.stat().st_mode) == 0o700, d


def test_an_older_homes_directories_are_tightened_on_use(bb):
    bb.new("demo")
    older = [bb.home, *(bb.home / d for d in ("data", "snapshots", "logs", "run"))]
    for d in older:
        d.mkdir(exist_ok=True)
        d.chmod(0o755)
    assert bb.run("ls").rc == 0
    for d in older:
        assert stat.S_IMODE(d.stat().st_mode) == 0o700, d
    assert bb.data("demo").is_dir()


def test_new_template_parses_and_says_network_none(bb):
    bb.new("demo")
    text = bb.bluefile("demo").read_text()
    assert re.search(r"^network:[ \t]*none[ \t]*(#.*)?$", text, re.M), text
    env = bb.env_of("demo")
    assert env["BLUEBOX_NETWORK"] == "none"
    assert env["BLUEBOX_NAME"] == "demo"
    assert bb.run("build", "--dry-run", "demo").rc == 0


def test_new_refuses_existing_name(bb):
    bb.new("demo")
    bb.bluefile("demo").write_text("cpus: 3\n")
    (bb.data("demo") / "keep").write_text("x")
    before = bb.tree()
    r = bb.run("new", "demo")
    msg = plain_error(r)
    assert 'sandbox "demo" already exists' in msg
    assert bb.tree() == before


def test_new_accepts_64_char_name_and_name_charset(bb):
    name = "A1._-" + "x" * 59
    assert len(name) == 64
    bb.new(name)
    assert bb.bluefile(name).is_file()


@pytest.mark.parametrize("name", ["../x", ".hidden", "a/b", "x" * 65, "-x", "_x", "a b", "",
                                  "é", "/abs", "..", "a\nb"],
                         ids=["dotdot", "hidden", "slash", "65", "dash", "underscore", "space",
                              "empty", "non-ascii", "abs", "dotdot-only", "newline"])
def test_new_invalid_names_refused_before_any_path(bb, name):
    r = bb.run("new", "--", name)
    msg = plain_error(r)
    assert msg.startswith("invalid sandbox name"), msg
    assert not bb.home.exists(), list(bb.home.rglob("*"))
    assert not (bb.tmp / "x").exists() and not (bb.tmp / "b").exists()


def test_new_dash_name_without_separator_is_usage_error(bb):
    msg = usage_error(bb.run("new", "-x"))
    assert "-x" in msg
    assert not bb.home.exists()


def test_new_after_destroy_adopts_kept_data(bb):
    bb.new("s")
    (bb.data("s") / "work.txt").write_text("kept\n")
    assert bb.run("destroy", "s").rc == 0
    bb.new("s")
    assert (bb.data("s") / "work.txt").read_text() == "kept\n"


def test_new_failure_leaves_no_half_made_sandbox(bb):
    (bb.home / "data").mkdir(parents=True)
    (bb.home / "data" / "s").write_text("a file where the data dir goes")
    r = bb.run("new", "s")
    plain_error(r)
    assert not bb.sandbox_dir("s").exists()
    assert (bb.home / "data" / "s").read_text() == "a file where the data dir goes"


def test_new_from_example_copies_bluefile_and_extras(bb, tmp_path):
    r = bb.run("new", "py", "--from", "tiny-python")
    assert r.rc == 0, r
    assert r.out == f"{bb.bluefile('py')}\n"
    assert bb.bluefile("py").read_bytes() == (EXAMPLES_DIR / "tiny-python" / "Bluefile").read_bytes()
    assert (bb.data("py") / "hello.py").read_bytes() == \
        (EXAMPLES_DIR / "tiny-python" / "hello.py").read_bytes()
    assert not (bb.data("py") / "Bluefile").exists()


def test_new_from_unknown_example_lists_choices(bb):
    r = bb.run("new", "x", "--from", "no-such-example")
    msg = plain_error(r)
    assert msg.startswith('no example "no-such-example"; choose one of: '), msg
    assert "tiny-alpine" in msg and "ai-agent" in msg
    assert not bb.sandbox_dir("x").exists() and not bb.data("x").exists()


def test_new_from_needs_a_value(bb):
    usage_error(bb.run("new", "x", "--from"))


# ---- edit -------------------------------------------------------------------------

def editor_writing(bb_editor, text, log=None):
    """An editor that replaces the file (its last argument) and logs its arguments."""
    body = 'for f; do :; done\n'
    if log:
        body += f'printf "%s\\n" "$@" >> {log}\n'
    body += f"cat > \"$f\" <<'EOF'\n{text}EOF\n"
    return bb_editor(body)


def test_edit_b_reparses_ok(bb, bb_editor, tmp_path):
    bb.new("s")
    ed = editor_writing(bb_editor, "cpus: 3\n", tmp_path / "args")
    r = bb.run("edit", "s", "-b", env={"EDITOR": ed})
    assert r.rc == 0, r
    assert r.out == "ok — run: bluebox build s\n"
    assert (tmp_path / "args").read_text() == f"{bb.bluefile('s')}\n"
    assert bb.env_of("s")["BLUEBOX_CPUS"] == "3"


def test_edit_b_no_longer_parses(bb, bb_editor):
    bb.new("s")
    ed = editor_writing(bb_editor, "cpus: 99\n")
    r = bb.run("edit", "s", "--bluefile", env={"EDITOR": ed})
    assert r.rc == 1, r
    assert "ok" not in r.out
    msg = r.error_line()
    assert msg.startswith(f"saved, but it no longer parses: {bb.bluefile('s')}:1:7: cpus"), msg
    # the edit is kept, not rolled back
    assert bb.bluefile("s").read_text() == "cpus: 99\n"


def test_edit_prefers_VISUAL_and_splits_on_whitespace(bb, bb_editor, tmp_path):
    bb.new("s")
    visual = editor_writing(bb_editor, "cpus: 4\n", tmp_path / "visual-args")
    editor = editor_writing(bb_editor, "cpus: 5\n", tmp_path / "editor-args")
    r = bb.run("edit", "s", "-b", env={"VISUAL": f"{visual} --wait -x", "EDITOR": editor})
    assert r.rc == 0, r
    assert (tmp_path / "visual-args").read_text() == f"--wait\n-x\n{bb.bluefile('s')}\n"
    assert not (tmp_path / "editor-args").exists()
    assert bb.env_of("s")["BLUEBOX_CPUS"] == "4"


def test_edit_editor_failure_is_an_error(bb, bb_editor):
    bb.new("s")
    r = bb.run("edit", "s", "-b", env={"EDITOR": bb_editor("exit 3")})
    msg = plain_error(r)
    assert "3" in msg


def test_edit_c_without_containerfile(bb, bb_editor, tmp_path):
    bb.new("s")
    ed = editor_writing(bb_editor, "x\n", tmp_path / "args")
    r = bb.run("edit", "s", "-c", env={"EDITOR": ed})
    msg = plain_error(r)
    assert msg == "no Containerfile yet; it is written by: bluebox build s"
    assert not (tmp_path / "args").exists()
    assert not bb.containerfile("s").exists()


def test_edit_c_opens_containerfile_with_note(bb, bb_editor, tmp_path):
    bb.new("s")
    bb.containerfile("s").write_text("FROM x\n")
    ed = editor_writing(bb_editor, "FROM y\n", tmp_path / "args")
    r = bb.run("edit", "s", "--containerfile", env={"EDITOR": ed})
    assert r.rc == 0, r
    assert "note: generated file" in r.err
    assert (tmp_path / "args").read_text() == f"{bb.containerfile('s')}\n"


def test_edit_b_and_c_together_is_usage_error(bb, bb_editor, tmp_path):
    bb.new("s")
    ed = editor_writing(bb_editor, "x\n", tmp_path / "args")
    msg = usage_error(bb.run("edit", "s", "-b", "-c", env={"EDITOR": ed}))
    assert "pass -b or -c, not both" in msg
    assert not (tmp_path / "args").exists()


@pytest.mark.parametrize("answer,target", [("2\n", "Containerfile"), ("c\n", "Containerfile"),
                                           ("1\n", "Bluefile"), ("\n", "Bluefile"),
                                           ("b\n", "Bluefile")])
def test_edit_asks_which_file(bb, bb_editor, tmp_path, answer, target):
    bb.new("s")
    bb.containerfile("s").write_text("FROM x\n")
    ed = bb_editor(f'printf "%s\\n" "$@" > {tmp_path / "args"}')
    r = bb.run("edit", "s", input=answer, env={"EDITOR": ed})
    assert r.rc == 0, r
    assert "choose [1]:" in r.err
    assert (tmp_path / "args").read_text() == f"{bb.sandbox_dir('s') / target}\n"


def test_edit_asks_eof_is_an_error(bb, bb_editor, tmp_path):
    bb.new("s")
    ed = bb_editor(f'touch {tmp_path / "ran"}')
    r = bb.run("edit", "s", input="", env={"EDITOR": ed})
    assert r.rc == 2, r
    assert "no answer; pass -b" in r.err
    assert r.err.splitlines()[-1].startswith("bluebox: ")
    assert not (tmp_path / "ran").exists()


def test_edit_asks_unknown_choice(bb, bb_editor, tmp_path):
    bb.new("s")
    ed = bb_editor(f'touch {tmp_path / "ran"}')
    r = bb.run("edit", "s", input="3\n", env={"EDITOR": ed})
    assert r.rc == 2, r
    assert not (tmp_path / "ran").exists()


def test_edit_missing_sandbox(bb, bb_editor):
    msg = plain_error(bb.run("edit", "nope", "-b", env={"EDITOR": bb_editor("exit 0")}))
    assert 'no sandbox "nope"' in msg


# ---- ls ---------------------------------------------------------------------------

HEADER = "NAME          STATE       BACKEND CPUS RAM    NET    RO    TIMEOUT WARM  BASE"
NO_SANDBOXES = "no sandboxes yet; create one: bluebox new <name>\n"


def test_ls_empty_prints_a_hint_and_no_rows(bb):
    """stdout stays empty (the original printed nothing); a person sees what to do."""
    r = bb.run("ls")
    assert (r.rc, r.out, r.err) == (0, "", NO_SANDBOXES)
    (bb.home / "sandboxes").mkdir(parents=True)
    r = bb.run("ls")
    assert (r.rc, r.out, r.err) == (0, "", NO_SANDBOXES)


def test_ls_table(bb):
    bb.new("beta")
    bb.write_bluefile("alpha", "cpus: 1\nram_mib: 512\nnetwork: bridge\nreadonly: true\n"
                               "timeout_seconds: 60\nbase: debian:12\nbackend: uml\nwarm: 2\n")
    r = bb.run("ls")
    assert r.rc == 0, r
    lines = r.out.splitlines()
    assert lines[0].rstrip() == HEADER
    assert lines[1].split() == ["alpha", "not", "built", "uml", "1", "512M", "bridge", "yes",
                                "60s", "0/2", "debian:12"]
    assert lines[2].split() == ["beta", "not", "built", "krun", "2", "2048M", "none", "no", "-",
                                "-", "docker.io/library/alpine:latest"]
    assert len(lines) == 3


def later(path, seconds):
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + seconds * 1_000_000_000))


def test_ls_state_built_stale_and_backend_from_the_environment(bb):
    bb.new("s")
    image_id = bb.sandbox_dir("s") / "image-id"
    image_id.write_text("sha256:" + "ab" * 32 + "\n")
    later(image_id, 2)
    row = bb.run("ls").out.splitlines()[1].split()
    assert row[:3] == ["s", "built", "krun"], row
    later(bb.bluefile("s"), 5)  # edited after the build
    row = bb.run("ls").out.splitlines()[1].split()
    assert row[:2] == ["s", "stale"], row
    row = bb.run("ls", env={"BLUEBOX_BACKEND": "uml"}).out.splitlines()[1].split()
    assert row[2] == "uml", row
    assert bb.podman_calls() == [], "ls asks podman nothing for sandboxes that are not up"


def test_ls_invalid_bluefile_row(bb):
    bb.new("good")
    bb.write_bluefile("bad", "cpus: 0\n")
    r = bb.run("ls")
    assert r.rc == 0, r
    lines = r.out.splitlines()
    assert lines[0].rstrip() == HEADER
    assert lines[1].split(None, 1) == ["bad", "invalid Bluefile"]
    assert lines[2].split()[0] == "good"


def test_ls_shows_up_state(bb):
    bb.new("s")
    vm = bb.up_container("s")
    state = {"container": vm, "addr": "127.0.0.1:40000", "token": "t" * 64, "kernel": "6.1",
             "started": 1}
    bb.run_file("s").parent.mkdir(parents=True)
    bb.run_file("s").write_text(json.dumps(state))
    r = bb.run("ls", env={"BB_TEST_CONTAINERS": f"{vm}=c0ffee|true|s|{bb.home_id()}|0"})
    assert r.out.splitlines()[1].split()[:3] == ["s", "up", "krun"], r
    assert r.err == "", r


def test_ls_takes_no_arguments(bb):
    usage_error(bb.run("ls", "extra"))


def test_symlink_in_sandboxes_is_not_a_sandbox(bb, tmp_path):
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "Bluefile").write_text("cpus: 1\n")
    bb.new("real")
    bb.sandbox_dir("evil").symlink_to(victim)
    assert [l.split()[0] for l in bb.run("ls").out.splitlines()[1:]] == ["real"]
    for args in (["env", "evil"], ["destroy", "evil", "--data", "-y"],
                 ["rename", "evil", "other"]):
        assert 'no sandbox "evil"' in plain_error(bb.run(*args))
    assert (victim / "Bluefile").read_text() == "cpus: 1\n"


# ---- env --------------------------------------------------------------------------

QUOTED_LINE = re.compile(r"^BLUEBOX_[A-Za-z0-9_]+='(?:[^']|'\\'')*'(  # [^'`$\\\n]*)?$")


def test_env_every_value_single_quoted(bb):
    bb.write_bluefile("s", "env:\n  A: \"it's\"\n  B: plain\n")
    r = bb.run("env", "s")
    assert r.rc == 0, r
    lines = r.out.splitlines()
    assert lines[0] == "BLUEBOX_NAME='s'"
    for line in lines:
        assert QUOTED_LINE.match(line), line
    assert "BLUEBOX_ENV_A='it'\\''s'" in lines
    env = bb.env_of("s")
    assert env["BLUEBOX_IMAGE"] == bb.image("s")
    assert env["BLUEBOX_DATA"] == str(bb.data("s"))


HOSTILE = {
    "CMDSUB": "$(touch {canary})",
    "BACKTICK": "`touch {canary}`",
    "QUOTES": "'; touch {canary}; echo '\"",
    "MIXED": "a'b\"c\\d$HOME${X}`x`$(x) ; | & > {canary}",
    "NEWVAR": "x'; PWNED=1; '",
    "TRAILING": "\\",
}


@pytest.mark.parametrize("shell", ["sh", "bash"])
def test_env_eval_assigns_only_bluebox_vars(bb, tmp_path, shell):
    if not shutil.which(shell):
        pytest.skip(f"no {shell}")
    canary = tmp_path / "CANARY"
    values = {k: v.replace("{canary}", str(canary)) for k, v in HOSTILE.items()}
    # BLUEBOX_DATA comes from the home path: make that hostile too.
    bb.home = tmp_path / f"it's $(touch {canary}) `touch {canary}`"
    bb.env["BLUEBOX_HOME"] = str(bb.home)
    bb.write_bluefile("s", "env:\n" + "".join(f"  {k}: {json.dumps(v)}\n"
                                              for k, v in values.items()))
    r = bb.run("env", "s")
    assert r.rc == 0, r
    out_file = tmp_path / "env.out"
    out_file.write_text(r.out)
    script = 'set -a; if [ -n "$1" ]; then eval "$(cat "$1")"; fi; set +a; exec env -0'

    def run(arg):
        p = subprocess.run(["env", "-i", "PATH=/usr/bin:/bin", shell, "-c", script, "sh", arg],
                           cwd=tmp_path, capture_output=True, timeout=10)
        assert p.returncode == 0, p
        return dict(kv.split("=", 1) for kv in p.stdout.decode().split("\0") if kv)

    base, after = run(""), run(str(out_file))
    assert not canary.exists()
    added = {k for k in after if k not in base or after[k] != base[k]}
    assert added and all(k.startswith("BLUEBOX_") for k in added), added
    assert "PWNED" not in after
    for k, v in values.items():
        assert after[f"BLUEBOX_ENV_{k}"] == v
    assert after["BLUEBOX_NAME"] == "s"
    assert after["BLUEBOX_DATA"] == str(bb.data("s"))


def test_env_backend_is_the_effective_one_and_says_why(bb):
    bb.write_bluefile("s", "backend: krun\n")
    r = bb.run("env", "s")
    assert "BLUEBOX_BACKEND='krun'  # from the Bluefile\n" in r.out, r
    r = bb.run("env", "s", env={"BLUEBOX_BACKEND": "uml"})
    assert ("BLUEBOX_BACKEND='uml'  # from BLUEBOX_BACKEND in the environment "
            "(the Bluefile says krun)\n") in r.out, r
    assert bb.env_of("s")["BLUEBOX_BACKEND"] == "krun"
    p = subprocess.run(["sh", "-c", 'eval "$1"; printf %s "$BLUEBOX_BACKEND"', "sh", r.out],
                       capture_output=True, timeout=10)
    assert p.stdout == b"uml", p


def test_env_missing_sandbox(bb):
    msg = plain_error(bb.run("env", "ghost"))
    assert msg == 'no sandbox "ghost"; create it: bluebox new ghost'


def test_env_invalid_name(bb):
    assert plain_error(bb.run("env", "../etc")).startswith("invalid sandbox name")


# ---- logs -------------------------------------------------------------------------

@pytest.fixture
def logged(bb):
    bb.new("s")
    bb.log("s").parent.mkdir(parents=True, exist_ok=True)
    bb.log("s").write_text("".join(f"line {i}\n" for i in range(1, 301)))
    return bb


def tail(n):
    return "".join(f"line {i}\n" for i in range(301 - n, 301))


def test_logs_default_200(logged):
    r = logged.run("logs", "s")
    assert r.rc == 0, r
    assert r.out == tail(200)


@pytest.mark.parametrize("args,n", [(["-n", "5"], 5), (["-n5"], 5), (["--lines", "1"], 1),
                                    (["--lines=12"], 12), (["-n", "0"], 0),
                                    (["-n", "300"], 300), (["-n", "1000"], 300)])
def test_logs_n(logged, args, n):
    r = logged.run("logs", "s", *args)
    assert r.rc == 0, r
    assert r.out == tail(n)


def test_logs_last_line_without_newline(bb):
    bb.new("s")
    bb.log("s").parent.mkdir(parents=True)
    bb.log("s").write_text("a\nb\nc")
    assert bb.run("logs", "s", "-n", "1").out == "c"
    assert bb.run("logs", "s", "-n", "2").out == "b\nc"


def test_logs_missing_log_prints_nothing(bb):
    bb.new("s")
    r = bb.run("logs", "s")
    assert (r.rc, r.out, r.err) == (0, "", "")


@pytest.mark.parametrize("value", ["abc", "-1", "", "1.5", "5x", "99999999999999999999999"])
def test_logs_bad_n_is_usage_error(logged, value):
    msg = usage_error(logged.run("logs", "s", "-n", value))
    assert "-n" in msg


def test_logs_n_needs_value(logged):
    usage_error(logged.run("logs", "s", "-n"))


def test_logs_missing_sandbox(bb):
    plain_error(bb.run("logs", "ghost"))


# ---- rename -----------------------------------------------------------------------

@pytest.fixture
def full(bb):
    """Sandbox "old" with data, a log and a snapshot."""
    bb.new("old")
    bb.bluefile("old").write_text("cpus: 3\n")
    (bb.data("old") / "work.txt").write_text("data\n")
    bb.mkdir(bb.log("old").parent)
    bb.log("old").write_text("=== run\n")
    bb.mkdir(bb.snapshots("old"))
    (bb.snapshots("old") / "20240101T000000Z.tar.gz").write_bytes(b"snap")
    return bb


def test_rename_moves_everything(full):
    bb = full
    r = bb.run("rename", "old", "new")
    assert r.rc == 0, r
    assert r.out == "old -> new\n"
    for p in (bb.sandbox_dir("old"), bb.data("old"), bb.log("old"), bb.snapshots("old")):
        assert not p.exists(), p
    assert bb.bluefile("new").read_text() == "cpus: 3\n"
    assert (bb.data("new") / "work.txt").read_text() == "data\n"
    assert bb.log("new").read_text() == "=== run\n"
    assert (bb.snapshots("new") / "20240101T000000Z.tar.gz").read_bytes() == b"snap"
    env = bb.env_of("new")
    assert env["BLUEBOX_DATA"] == str(bb.data("new")) and env["BLUEBOX_CPUS"] == "3"


def test_rename_retags_the_image(full):
    bb = full
    r = bb.run("rename", "old", "new", env={"BB_TEST_IMAGES": bb.image("old")})
    assert r.rc == 0, r
    calls = bb.podman_calls()
    assert f"tag {bb.image('old')} {bb.image('new')}" in calls
    assert any(c.split()[0] in ("untag", "rmi") and bb.image("old") in c
               for c in calls), calls


@pytest.mark.parametrize("target", ["sandbox", "data", "log", "snapshots"])
def test_rename_refuses_when_any_target_exists(full, target):
    bb = full
    p = {"sandbox": bb.sandbox_dir, "data": bb.data, "log": bb.log,
         "snapshots": bb.snapshots}[target]("new")
    if target == "log":
        p.write_text("stale\n")
    else:
        p.mkdir(parents=True)
    before = bb.tree()
    msg = plain_error(bb.run("rename", "old", "new"))
    assert "already exists" in msg and str(p) in msg
    assert bb.tree() == before


def test_rename_refuses_while_up(full):
    bb = full
    bb.mark_up("old")
    before = bb.tree()
    msg = plain_error(bb.run("rename", "old", "new"))
    assert "old is up" in msg
    assert bb.tree() == before


@pytest.mark.parametrize("new", ["../x", ".x", "a/b", "x" * 65], ids=["dotdot", "hidden", "slash", "65"])
def test_rename_invalid_new_name(full, new):
    bb = full
    before = bb.tree()
    assert plain_error(bb.run("rename", "old", new)).startswith("invalid sandbox name")
    assert bb.tree() == before


def test_rename_to_same_name_and_missing_source(full):
    plain_error(full.run("rename", "old", "old"))
    assert 'no sandbox "ghost"' in plain_error(full.run("rename", "ghost", "new"))


def test_rename_without_log_or_snapshots(bb):
    bb.new("a")
    assert bb.run("rename", "a", "b").rc == 0
    assert bb.bluefile("b").exists() and bb.data("b").is_dir()
    assert not bb.log("b").exists() and not bb.snapshots("b").exists()


# ---- destroy ----------------------------------------------------------------------

def test_destroy_keeps_data_by_default(full):
    bb = full
    r = bb.run("destroy", "old")
    assert r.rc == 0, r
    assert r.out == f"destroyed old (data kept: {bb.data('old')})\n"
    assert "data kept" in r.out
    assert not bb.sandbox_dir("old").exists()
    assert not bb.log("old").exists()
    assert (bb.data("old") / "work.txt").read_text() == "data\n"
    assert bb.snapshots("old").exists()


def test_destroy_data_removes_what_a_plain_destroy_left(full):
    """destroy kept /data; destroy --data of the same name removes it (asking first) instead
    of `no sandbox`."""
    bb = full
    assert bb.run("destroy", "old").rc == 0
    msg = plain_error(bb.run("destroy", "old"))
    assert msg == (f'no sandbox "old"; only its data is left ({bb.data("old")}): '
                   "bluebox destroy --data old removes it"), msg
    before = bb.tree()
    msg = plain_error(bb.run("destroy", "old", "--data"))
    assert msg == "refusing without a terminal; pass --yes to confirm", msg
    assert bb.tree() == before
    r = bb.run("destroy", "old", "--data", "-y")
    assert (r.rc, r.out, r.err) == (0, "destroyed the data of old\n", ""), r
    assert not bb.data("old").exists() and not bb.snapshots("old").exists()
    assert 'no sandbox "old"; create it' in plain_error(bb.run("destroy", "old", "--data"))
    assert not list((bb.home / "locks").glob("old*")), list((bb.home / "locks").iterdir())


def test_new_over_kept_data_says_it_keeps_it(full):
    bb = full
    assert bb.run("destroy", "old").rc == 0
    r = bb.run("new", "old")
    assert r.rc == 0, r
    assert r.err == ("keeping the existing /data of old (1 entry); bluebox destroy --data old "
                     "removes it\n"), r
    assert (bb.data("old") / "work.txt").read_text() == "data\n"
    # a plain new says nothing of the kind
    r = bb.run("new", "fresh")
    assert (r.rc, r.err) == (0, ""), r


def test_destroy_removes_the_lock_files(bb):
    bb.new("s")
    assert bb.run("destroy", "s").rc == 0
    assert bb.run("destroy", "s", "--data", "-y").rc == 0
    left = sorted(p.name for p in (bb.home / "locks").iterdir())
    assert not [n for n in left if n.startswith("s.")], left


def test_destroy_data_with_empty_data_needs_no_confirmation(bb):
    bb.new("s")
    r = bb.run("destroy", "s", "--data")
    assert r.rc == 0, r
    assert r.out == "destroyed s\n"
    assert not bb.data("s").exists() and not bb.sandbox_dir("s").exists()


def test_destroy_data_refuses_without_terminal(full):
    bb = full
    before = bb.tree()
    for inp in (None, "y\n"):  # /dev/null, then a pipe that says y
        msg = plain_error(bb.run("destroy", "old", "--data", input=inp))
        assert msg == "refusing without a terminal; pass --yes to confirm"
        assert bb.tree() == before


@pytest.mark.parametrize("flag", ["-y", "--yes"])
def test_destroy_data_yes(full, flag):
    bb = full
    r = bb.run("destroy", "old", "--data", flag)
    assert r.rc == 0, r
    assert r.out == "destroyed old\n"
    for p in (bb.sandbox_dir("old"), bb.data("old"), bb.log("old"), bb.snapshots("old")):
        assert not p.exists(), p


def test_destroy_data_does_not_follow_symlinks_out(bb, tmp_path):
    outside = tmp_path / "outside"
    (outside / "sub").mkdir(parents=True)
    (outside / "precious.txt").write_text("keep me\n")
    (outside / "sub" / "deep.txt").write_text("keep me too\n")
    bb.new("s")
    (bb.data("s") / "link-dir").symlink_to(outside)
    (bb.data("s") / "link-file").symlink_to(outside / "precious.txt")
    (bb.data("s") / "nested").mkdir()
    (bb.data("s") / "nested" / "link").symlink_to(outside / "sub")
    r = bb.run("destroy", "s", "--data", "-y")
    assert r.rc == 0, r
    assert not bb.data("s").exists()
    assert (outside / "precious.txt").read_text() == "keep me\n"
    assert (outside / "sub" / "deep.txt").read_text() == "keep me too\n"


def test_destroy_data_when_data_dir_itself_is_a_symlink(bb, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious.txt").write_text("keep me\n")
    bb.new("s")
    bb.data("s").rmdir()
    bb.data("s").symlink_to(outside)
    r = bb.run("destroy", "s", "--data", "-y")
    assert r.rc == 0, r
    assert (outside / "precious.txt").read_text() == "keep me\n"
    assert not bb.data("s").is_symlink()


def test_destroy_data_handles_unwritable_dirs(bb):
    bb.new("s")
    d = bb.data("s") / "locked"
    d.mkdir()
    (d / "f").write_text("x")
    d.chmod(0o000)
    try:
        r = bb.run("destroy", "s", "--data", "-y")
        assert r.rc == 0, r
        assert not bb.data("s").exists()
    finally:
        if d.exists():
            d.chmod(0o755)


def test_destroy_brings_an_up_sandbox_down_first(full):
    bb = full
    bb.mark_up("old")
    vm = f"{bb.up_container('old')}=c0ffee|true|old|{bb.home_id()}|0"
    r = bb.run("destroy", "old", "--data", "-y", env={"BB_TEST_CONTAINERS": vm})
    assert r.rc == 0, r
    assert "rm -f -t 0 --ignore c0ffee" in bb.podman_calls()
    assert not bb.run_file("old").exists() and not bb.sandbox_dir("old").exists()


def test_destroy_removes_image(bb):
    bb.new("s")
    r = bb.run("destroy", "s", env={"BB_TEST_IMAGES": bb.image("s")})
    assert r.rc == 0, r
    assert f"rmi {bb.image('s')}" in bb.podman_calls()


def test_destroy_missing_sandbox(bb):
    plain_error(bb.run("destroy", "ghost", "-y"))


# ---- prompts on a real terminal -----------------------------------------------------

@pytest.mark.parametrize("answer", ["y\n", "Y\n"])
def test_destroy_prompt_yes(full, answer):
    bb = full
    r = bb.run_tty("destroy", "old", "--data", answer=answer)
    assert r.rc == 0, r
    assert "Delete old and its data? [y/N] " in r.err
    assert r.out == "destroyed old\n"
    assert not bb.data("old").exists()


@pytest.mark.parametrize("answer", ["n\n", "\n", "yes\n", "no\n", "\x04"],
                         ids=["n", "empty", "yes-word", "no", "eof"])
def test_destroy_prompt_anything_else_cancels(full, answer):
    bb = full
    before = bb.tree()
    r = bb.run_tty("destroy", "old", "--data", answer=answer)
    assert r.rc == 1, r
    assert r.out == ""
    assert r.err.endswith("bluebox: cancelled\n"), r
    assert bb.tree() == before


def test_nuke_prompt_yes(bb):
    bb.new("a")
    bb.new("b")
    r = bb.run_tty("nuke", answer="y\n")
    assert r.rc == 0, r
    assert "Remove 2 sandboxes (a, b), and their data? [y/N] " in r.err
    assert r.out == "removed 2 sandboxes\n"
    assert not bb.sandbox_dir("a").exists() and not bb.data("b").exists()


def test_nuke_prompt_no_data_wording_and_cancel(bb):
    bb.new("a")
    before = bb.tree()
    r = bb.run_tty("nuke", "--no-data", answer="n\n")
    assert r.rc == 1, r
    assert "Remove 1 sandbox (a), keeping their data? [y/N] " in r.err
    assert r.err.endswith("bluebox: cancelled\n"), r
    assert bb.tree() == before


# ---- nuke -------------------------------------------------------------------------

def test_nuke_yes_removes_everything(bb):
    for n in ("a", "b", "c"):
        bb.new(n)
        (bb.data(n) / "f").write_text(n)
    bb.log("a").parent.mkdir(parents=True, exist_ok=True)
    bb.log("a").write_text("x\n")
    r = bb.run("nuke", "-y")
    assert r.rc == 0, r
    assert r.out == "removed 3 sandboxes\n"
    for n in ("a", "b", "c"):
        assert not bb.sandbox_dir(n).exists() and not bb.data(n).exists()
    assert not bb.log("a").exists()
    assert bb.run("ls").out == ""


def test_nuke_no_data_keeps_data(bb):
    bb.new("a")
    (bb.data("a") / "f").write_text("keep")
    r = bb.run("nuke", "--no-data", "--yes")
    assert r.rc == 0, r
    assert r.out == "removed 1 sandbox\n"
    assert not bb.sandbox_dir("a").exists()
    assert (bb.data("a") / "f").read_text() == "keep"


def test_nuke_refuses_without_terminal(bb):
    bb.new("a")
    bb.new("b")
    before = bb.tree()
    msg = plain_error(bb.run("nuke"))
    assert msg == "refusing without a terminal; pass --yes to confirm"
    assert plain_error(bb.run("nuke", "--no-data", input="y\n")) == msg
    assert bb.tree() == before


def test_nuke_with_nothing_to_remove(bb):
    r = bb.run("nuke")
    assert r.rc == 0, r
    assert r.err == ""


def test_nuke_brings_up_sandboxes_down(bb):
    bb.new("a")
    bb.new("b")
    bb.mark_up("a")
    vm = f"{bb.up_container('a')}=c0ffee|true|a|{bb.home_id()}|0"
    r = bb.run("nuke", "-y", env={"BB_TEST_CONTAINERS": vm})
    assert r.rc == 0, r
    assert "removed 2 sandboxes\n" in r.out
    assert "rm -f -t 0 --ignore c0ffee" in bb.podman_calls()
    assert not bb.sandbox_dir("a").exists() and not bb.run_file("a").exists()


# ---- completion, help, version ------------------------------------------------------

@pytest.mark.parametrize("shell,marker", [("bash", "complete"), ("zsh", "#compdef"),
                                          ("fish", "complete -c bluebox")])
def test_completion_prints_script(bb, shell, marker):
    r = bb.run("completion", shell)
    assert r.rc == 0, r
    assert marker in r.out and len(r.out) > 100
    assert r.err == ""


@pytest.mark.parametrize("args", [["completion", "powershell"], ["completion"],
                                  ["completion", "bash", "zsh"]])
def test_completion_other_shells_usage_error(bb, args):
    usage_error(bb.run(*args))


@pytest.mark.parametrize("args", [["help"], ["--help"], ["-h"]])
def test_root_help(bb, args):
    r = bb.run(*args)
    assert r.rc == 0, r
    assert "usage: bluebox <command>" in r.out
    for c in COMMANDS:
        assert re.search(rf"^\s+(\w+\s+)?{c} ", r.out, re.M), c


def test_version(bb):
    r = bb.run("--version")
    assert r.rc == 0, r
    assert re.fullmatch(r"bluebox \d+\.\d+\.\d+\S*\n", r.out), r.out


@pytest.mark.parametrize("cmd,flag", [(c, "-h") for c in COMMANDS] + [("logs", "--help")])
def test_command_help_exits_0(bb, cmd, flag):
    r = bb.run(cmd, flag)
    assert r.out.startswith(f"usage: bluebox {cmd}"), r
    assert r.rc == 0, r
    assert not bb.home.exists()


def test_help_for_a_command(bb):
    r = bb.run("help", "logs")
    assert r.rc == 0, r
    assert r.out.startswith("usage: bluebox logs") and "--lines" in r.out


def test_help_unknown_command(bb):
    usage_error(bb.run("help", "frobnicate"))


# ---- usage errors and exit codes -----------------------------------------------------

@pytest.mark.parametrize("args", [
    ["frobnicate"], ["Ls"],
    ["ls", "--bogus"], ["env", "s", "-z"], ["destroy", "s", "--force"], ["nuke", "-q"],
    ["build", "s", "--dry-run=yes"],
    ["new"], ["env"], ["logs"], ["rename", "a"], ["destroy"], ["build"], ["edit"],
    ["env", "a", "b"], ["rename", "a", "b", "c"], ["new", "a", "b"],
], ids=lambda a: " ".join(a))
def test_usage_errors_exit_2_one_line(bb, args):
    bb.new("s")
    before = bb.tree()
    msg = usage_error(bb.run(*args))
    assert msg
    assert bb.tree() == before


def test_unknown_command_message(bb):
    assert usage_error(bb.run("frobnicate")) == 'unknown command "frobnicate"; see: bluebox help'


def test_relative_BLUEBOX_HOME_refused(bb):
    r = bb.run("ls", env={"BLUEBOX_HOME": "relative/dir"})
    plain_error(r)


def test_default_home_is_under_HOME(bb):
    r = bb.run("new", "s", env={"BLUEBOX_HOME": None})
    assert r.rc == 0, r
    assert r.out == f"{bb.user_home}/.bluebox/sandboxes/s/Bluefile\n"


# ---- up / exec / down without a VM --------------------------------------------------

def test_up_refuses_network_none_on_krun_before_booting(bb):
    bb.new("s")
    r = bb.run("up", "s", env={"BLUEBOX_BACKEND": "krun"})
    assert r.rc == 1, r
    assert "needs a network to reach its agent" in r.err and "bluebox run" in r.err, r
    assert not any(c.startswith("run ") for c in bb.podman_calls())
    assert not bb.run_file("s").exists()


def test_exec_and_down_when_not_up(bb):
    bb.new("s")
    r = bb.run("exec", "s", "--", "true")
    assert (r.rc, r.err) == (1, "bluebox: s is not up; start it: bluebox up s\n"), r
    r = bb.run("down", "s")
    assert (r.rc, r.out) == (0, "s is not up\n"), r
    usage_error(bb.run("exec", "s"))


def test_rotated_logs_follow_rename_and_go_with_destroy(full):
    """The run log's older generations (logs/<name>.log.1, .2) are the sandbox's too."""
    bb = full
    for n in (1, 2):
        Path(f"{bb.log('old')}.{n}").write_text(f"=== gen {n}\n")
    assert bb.run("rename", "old", "new").rc == 0
    assert sorted(p.name for p in bb.log("new").parent.iterdir()) == \
        ["new.log", "new.log.1", "new.log.2"]
    assert Path(f"{bb.log('new')}.2").read_text() == "=== gen 2\n"
    assert bb.run("destroy", "new").rc == 0
    assert list(bb.log("new").parent.iterdir()) == []
