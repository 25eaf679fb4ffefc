"""Shell completion, tested for real in bash, zsh and fish.

The scripts in completions/ are thin: each asks `bluebox __complete <words...>` for the
candidates. These tests load each script the two ways a user does (from
`bluebox completion <shell>` and from the standard install location), drive the real
shell's completion machinery, and check what the shell would offer.

The binary is $BLUEBOX_BIN, by default <repo>/build/bluebox. A shell that is not
installed is skipped; everything else must pass.
"""

import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
COMPLETIONS = REPO / "completions"
SCRIPT_FILES = {"bash": "bluebox.bash", "zsh": "_bluebox", "fish": "bluebox.fish"}
BASH_COMPLETION = Path("/usr/share/bash-completion/bash_completion")
TIMEOUT = 30

SANDBOXES = ["alpha", "box", "zeta"]  # what home_list gives: sorted
# Snapshots of "box", oldest first. Newest first is neither sorted nor reverse-sorted,
# so a shell that re-sorts the candidates is caught.
SNAPSHOTS_OLDEST_FIRST = ["b-first", "c-second", "a-third"]
SNAPSHOTS_NEWEST_FIRST = list(reversed(SNAPSHOTS_OLDEST_FIRST))
DECOYS = ["box.txt", "alpha-notes", "decoy-file"]  # files in the cwd that must never show
COMMANDS = {"new", "edit", "env", "rename", "destroy", "run", "restore", "completion"}


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def bluebox():
    path = Path(os.environ.get("BLUEBOX_BIN", REPO / "build" / "bluebox")).resolve()
    if not (path.is_file() and os.access(path, os.X_OK)):
        pytest.fail(f"no bluebox binary at {path} (build it, or set BLUEBOX_BIN)")
    return path


@pytest.fixture(scope="module")
def world(tmp_path_factory, bluebox):
    """A BLUEBOX_HOME with sandboxes and snapshots, a PATH whose `bluebox` is the binary
    under test, a cwd full of decoy files, and the scripts as the binary prints them."""
    tmp = tmp_path_factory.mktemp("completion")
    home = tmp / "bluebox-home"
    for name in SANDBOXES:
        (home / "sandboxes" / name).mkdir(parents=True)
        (home / "sandboxes" / name / "Bluefile").write_text("")
    snapdir = home / "snapshots" / "box"
    snapdir.mkdir(parents=True)
    for i, label in enumerate(SNAPSHOTS_OLDEST_FIRST):
        f = snapdir / f"{label}.tar.gz"
        f.write_bytes(b"")
        t = 1_600_000_000 + 1000 * i
        os.utime(f, (t, t))
    # Another sandbox's snapshot, which must not show for "box".
    (home / "snapshots" / "zeta").mkdir(parents=True)
    (home / "snapshots" / "zeta" / "zeta-only.tar.gz").write_bytes(b"")

    bindir = tmp / "bin"
    bindir.mkdir()
    (bindir / "bluebox").symlink_to(bluebox)

    cwd = tmp / "cwd"
    cwd.mkdir()
    for d in DECOYS:
        (cwd / d).write_text("")
    (cwd / "sub").mkdir()
    (cwd / "sub" / "saved.tar.gz").write_bytes(b"")

    userhome = tmp / "user"
    userhome.mkdir()
    env = {
        "PATH": f"{bindir}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "HOME": str(userhome),
        "BLUEBOX_HOME": str(home),
        "TERM": "xterm",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "XDG_CONFIG_HOME": str(userhome / ".config"),
        "XDG_DATA_HOME": str(userhome / ".local" / "share"),
        "XDG_CACHE_HOME": str(userhome / ".cache"),
    }

    printed = {}
    for shell in SCRIPT_FILES:
        r = subprocess.run([str(bluebox), "completion", shell], env=env, cwd=cwd,
                           capture_output=True, text=True, timeout=TIMEOUT)
        assert r.returncode == 0, f"bluebox completion {shell} failed: {r.stderr}"
        p = tmp / f"printed.{shell}"
        p.write_text(r.stdout)
        printed[shell] = p

    return {"tmp": tmp, "env": env, "cwd": cwd, "bin": bluebox, "printed": printed}


def need(shell):
    path = shutil.which(shell)
    if not path:
        pytest.skip(f"{shell} is not installed")
    return path


def binary_says(world, words):
    r = subprocess.run([str(world["bin"]), "__complete", *words], env=world["env"],
                       cwd=world["cwd"], capture_output=True, text=True, timeout=TIMEOUT)
    assert r.returncode == 0, r.stderr
    return [l for l in r.stdout.split("\n") if l]


def example_names():
    d = REPO / "examples"
    return sorted(p.name for p in d.iterdir() if (p / "Bluefile").is_file())


# --------------------------------------------------------------------------- the cases
#
# (line typed after the prompt, check). Each check gets (candidates, world); the order of
# the candidates is the order the shell keeps.


def same_as_binary(line):
    def check(got, world):
        words = line.split(" ")[1:]
        assert got == binary_says(world, words)
    return check


def exactly(expected):
    def check(got, world):
        assert got == expected
    return check


def commands(got, world):
    assert COMMANDS <= set(got), f"missing commands: {COMMANDS - set(got)}"
    assert "__complete" not in got
    same_as_binary("bluebox ")(got, world)


def commands_re(got, world):
    assert {"rename", "restore"} <= set(got)
    assert all(c.startswith("re") for c in got)


def examples(got, world):
    assert got, "no example names after --from"
    if (REPO / "examples").is_dir():
        assert sorted(got) == example_names()
    same_as_binary("bluebox new x --from ")(got, world)


def examples_tiny(got, world):
    assert got and all(c.startswith("tiny-") for c in got)
    assert set(got) == {e for e in example_names() if e.startswith("tiny-")}


def files_in_sub(got, world):
    assert any(c.endswith("saved.tar.gz") for c in got), got


def directories(got, world):
    """The shell's directory completion: sub/ (a directory of the cwd), no plain files."""
    assert any(c.rstrip("/").endswith("sub") for c in got), got
    assert not [c for c in got if any(c.endswith(d) for d in DECOYS)], got


CASES = [
    ("bluebox ", commands),
    ("bluebox re", commands_re),
    ("bluebox run ", exactly(SANDBOXES)),
    ("bluebox run b", exactly(["box"])),
    ("bluebox destroy ", exactly(SANDBOXES)),
    ("bluebox env ", exactly(SANDBOXES)),
    ("bluebox edit ", exactly(SANDBOXES)),
    ("bluebox edit z", exactly(["zeta"])),
    ("bluebox new ", exactly([])),
    ("bluebox new b", exactly([])),
    ("bluebox rename alpha ", exactly([])),
    ("bluebox run box -- ", exactly([])),
    ("bluebox run box -- b", exactly([])),
    ("bluebox restore box ", exactly(SNAPSHOTS_NEWEST_FIRST)),
    ("bluebox restore box c", exactly(["c-second"])),
    ("bluebox restore box sub/", files_in_sub),
    ("bluebox new x --from ", examples),
    ("bluebox new x --from tiny-", examples_tiny),
    ("bluebox data export box ", directories),
    ("bluebox data import box s", directories),
    ("bluebox serve --", exactly(["--socket", "--idle", "--help"])),
    ("bluebox serve --socket sub/", files_in_sub),
    ("bluebox serve --idle ", exactly([])),
]
CASE_IDS = [c[0].replace(" ", "_") for c in CASES]


def test_printed_scripts_are_the_files(world):
    for shell, name in SCRIPT_FILES.items():
        assert world["printed"][shell].read_text() == (COMPLETIONS / name).read_text(), \
            f"`bluebox completion {shell}` is not completions/{name} verbatim"


def test_zsh_script_is_a_compdef_file():
    assert (COMPLETIONS / "_bluebox").read_text().startswith("#compdef bluebox\n")


# --------------------------------------------------------------------------- bash
#
# A non-interactive bash sets COMP_WORDS/COMP_CWORD/COMP_LINE/COMP_POINT the way
# readline would and calls the function that `complete -p bluebox` names. compopt is
# only allowed inside real completion, so it is wrapped to record what was asked.

BASH_DRIVER = r"""
set -u
if [[ -r $BB_BASH_COMPLETION ]]; then source "$BB_BASH_COMPLETION"; fi
case $BB_MODE in
printed) source <(bluebox completion bash) ;;
installed)
    if declare -F _completion_loader >/dev/null; then
        _completion_loader bluebox
    else
        source "$XDG_DATA_HOME/bash-completion/completions/bluebox"
    fi ;;
esac
spec=$(complete -p bluebox 2>/dev/null) || { echo "NOT-REGISTERED"; exit 3; }
printf 'SPEC:%s\n' "$spec"
fn=$(sed -n 's/.* -F \([^ ]*\) .*/\1/p' <<<"$spec")
[[ -n $fn ]] || { echo "NO-FUNCTION"; exit 3; }
compopt() { printf 'COMPOPT:%s\n' "$*"; }
eval "COMP_WORDS=($BB_WORDS)"
COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
COMP_LINE=$BB_LINE
COMP_POINT=${#COMP_LINE}
COMPREPLY=()
cur=${COMP_WORDS[COMP_CWORD]}
prev=${COMP_WORDS[COMP_CWORD-1]}
"$fn" bluebox "$cur" "$prev"
printf 'REPLY:%s\n' "${COMPREPLY[@]}"
"""


def bash_words(line):
    words = line.split(" ")  # a trailing space gives the empty current word
    return " ".join(shlex.quote(w) for w in words)


def run_bash(world, mode, line):
    bash = need("bash")
    env = dict(world["env"], BB_MODE=mode, BB_LINE=line, BB_WORDS=bash_words(line),
               BB_BASH_COMPLETION=str(BASH_COMPLETION))
    if mode == "installed":
        d = Path(env["XDG_DATA_HOME"]) / "bash-completion" / "completions"
        d.mkdir(parents=True, exist_ok=True)
        shutil.copy(COMPLETIONS / "bluebox.bash", d / "bluebox")
    r = subprocess.run([bash, "--norc", "--noprofile", "-c", BASH_DRIVER], env=env,
                       cwd=world["cwd"], capture_output=True, text=True, timeout=TIMEOUT)
    assert r.returncode == 0, f"bash driver failed ({r.returncode}):\n{r.stdout}\n{r.stderr}"
    out = r.stdout.split("\n")
    spec = [l[5:] for l in out if l.startswith("SPEC:")]
    replies = [l[6:] for l in out if l.startswith("REPLY:")]
    compopts = [l[8:] for l in out if l.startswith("COMPOPT:")]
    return spec[0], [c for c in replies if c], compopts


@pytest.mark.parametrize("mode", ["printed", "installed"])
def test_bash_registered(world, mode):
    spec, _, _ = run_bash(world, mode, "bluebox ")
    assert re.search(r"-F \S+ bluebox$", spec), spec
    # No fallback to file names when the binary offers nothing.
    assert "-o default" not in spec and "-o bashdefault" not in spec, spec


@pytest.mark.parametrize("mode", ["printed", "installed"])
@pytest.mark.parametrize("line,check", CASES, ids=CASE_IDS)
def test_bash(world, mode, line, check):
    _, got, compopts = run_bash(world, mode, line)
    check(got, world)
    if got and check not in (files_in_sub, directories):
        assert "-o nosort" in compopts, "bash must keep the binary's order (compopt -o nosort)"


def test_bash_word_breaks_are_glued_back(world):
    """Bash splits "--from=t" at "=" into three words; the binary must get one word,
    and readline (which replaces only the text after "=") must get the rest."""
    bash = need("bash")
    spydir = world["tmp"] / "spy"
    spydir.mkdir(exist_ok=True)
    spy = spydir / "bluebox"
    spy.write_text('#!/bin/sh\nprintf "%s|" "$@" >> "$0.log"\necho --from=tiny-x\n')
    spy.chmod(0o755)
    driver = (f"source {shlex.quote(str(COMPLETIONS / 'bluebox.bash'))}\n"
              "COMP_WORDS=(bluebox new x --from = t); COMP_CWORD=5\n"
              "COMP_LINE='bluebox new x --from=t'; COMP_POINT=${#COMP_LINE}\n"
              "_bluebox bluebox t =\n"
              "printf 'REPLY:%s\\n' \"${COMPREPLY[@]}\"\n")
    env = dict(world["env"], PATH=f"{spydir}:{world['env']['PATH']}")
    r = subprocess.run([bash, "--norc", "--noprofile", "-c", driver], env=env,
                       cwd=world["cwd"], capture_output=True, text=True, timeout=TIMEOUT)
    assert r.returncode == 0, r.stdout + r.stderr
    assert (spydir / "bluebox.log").read_text() == "__complete|new|x|--from=t|"
    assert [l[6:] for l in r.stdout.split("\n") if l.startswith("REPLY:")] == ["tiny-x"]


# --------------------------------------------------------------------------- zsh
#
# An outer `zsh -f` drives an interactive `zsh -f -i` through zpty and presses TAB.
# compadd is wrapped (functions shadow builtins) to print each match that really gets
# added, with the kind of group (-V unsorted / -J sorted), then to call the builtin.

ZSH_SETUP = r"""
PS1='' PROMPT='' RPROMPT='' PROMPT_EOL_MARK=''
unsetopt beep
[[ $BB_MODE == installed ]] && fpath=("$BB_FPATH_DIR" $fpath)
autoload -Uz compinit
compinit -u -D
[[ $BB_MODE == printed ]] && eval "$(bluebox completion zsh)"
compadd() {
  local a g=J
  for a in "$@"; do
    [[ $a == -- ]] && break
    # Calls that only compute matches (-O/-A/-D) pass straight through.
    [[ $a == -[a-zA-Z]#[OAD]* ]] && { builtin compadd "$@"; return; }
    [[ $a == -V* ]] && g=V
  done
  local -a __bb_m
  builtin compadd -O __bb_m "$@"
  for a in "${__bb_m[@]}"; do print -r -- $'\n'"<<BB-M>>$g:$a"; done
  builtin compadd "$@"
}
_bb_capture() {
  print -r -- $'\n<<BB-BEGIN>>'
  _main_complete
  print -r -- $'\n<<BB-END>>'
}
zle -C bb-capture complete-word _bb_capture
bindkey '^I' bb-capture
print -r -- '<<BB-''READY>>'
"""

# One interactive shell per mode completes every case in turn (a shell each took ~46 zsh
# starts and compinits a tier): after each TAB, ^G abandons the line (and any question zsh
# asks), and a printed marker says the shell is back at an empty prompt.
ZSH_DRIVER = r"""
zmodload zsh/zpty || exit 9
zpty bb zsh -f -i
zpty -w bb "source ${(q)BB_SETUP}"
zpty -r bb out '*<<BB-READY>>*' || exit 8
for line in "${(@f)$(<$BB_LINES)}"; do
  zpty -n -w bb "$line"$'\t'
  zpty -r bb out '*<<BB-END>>*' || exit 7
  print -r -- "<<BB-CASE>>$out"
  zpty -n -w bb $'\C-g'
  zpty -w bb "print -r -- '<<BB-''IDLE>>'"
  zpty -r bb idle '*<<BB-IDLE>>*' || exit 6
done
zpty -d bb
"""


def run_zsh(world, mode, lines):
    """{line: (matches, groups)} for every line, completed in one shell."""
    zsh = need("zsh")
    tmp = world["tmp"]
    setup = tmp / "zsh-setup.zsh"
    setup.write_text(ZSH_SETUP)
    fpdir = tmp / "zsh-fpath"
    fpdir.mkdir(exist_ok=True)
    shutil.copy(COMPLETIONS / "_bluebox", fpdir / "_bluebox")
    linefile = tmp / f"zsh-lines-{mode}"
    linefile.write_text("".join(line + "\n" for line in lines))
    env = dict(world["env"], BB_MODE=mode, BB_LINES=str(linefile), BB_SETUP=str(setup),
               BB_FPATH_DIR=str(fpdir))
    r = subprocess.run([zsh, "-f", "-c", ZSH_DRIVER], env=env, cwd=world["cwd"],
                       capture_output=True, text=True, timeout=TIMEOUT * 4)
    assert r.returncode == 0, f"zsh driver failed ({r.returncode}):\n{r.stdout}\n{r.stderr}"
    cases = r.stdout.replace("\r", "").split("<<BB-CASE>>")[1:]
    assert len(cases) == len(lines), r.stdout
    got = {}
    for line, out in zip(lines, cases):
        assert "<<BB-BEGIN>>" in out, (line, out)
        body = out.split("<<BB-BEGIN>>", 1)[1].split("<<BB-END>>", 1)[0]
        matches = re.findall(r"^<<BB-M>>([VJ]):(.*)$", body, re.M)
        got[line] = ([m for _, m in matches], {g for g, _ in matches})
    return got


@pytest.fixture(scope="module")
def zsh_completions(world):
    lines = [line for line, _ in CASES]
    return {mode: run_zsh(world, mode, lines) for mode in ("printed", "installed")}


@pytest.mark.parametrize("mode", ["printed", "installed"])
@pytest.mark.parametrize("line,check", CASES, ids=CASE_IDS)
def test_zsh(world, zsh_completions, mode, line, check):
    got, groups = zsh_completions[mode][line]
    check(got, world)
    if got and check not in (files_in_sub, directories):
        assert groups == {"V"}, "zsh must add the candidates unsorted (compadd -V)"


# --------------------------------------------------------------------------- fish
#
# `complete -C LINE` asks fish's real completion machinery what it would offer.


def run_fish(world, mode, line):
    fish = need("fish")
    tmp = world["tmp"]
    if mode == "printed":
        load = "bluebox completion fish | source"
    else:
        d = tmp / "fish-vendor" / "vendor_completions.d"
        d.mkdir(parents=True, exist_ok=True)
        shutil.copy(COMPLETIONS / "bluebox.fish", d / "bluebox.fish")
        load = f"set -p fish_complete_path {shlex.quote(str(d))}"
    cmd = f"{load}; complete -C {shlex.quote(line)}"
    r = subprocess.run([fish, "--no-config", "-c", cmd], env=world["env"], cwd=world["cwd"],
                       capture_output=True, text=True, timeout=TIMEOUT)
    assert r.returncode == 0, f"fish failed ({r.returncode}):\n{r.stdout}\n{r.stderr}"
    return [l.split("\t", 1)[0] for l in r.stdout.split("\n") if l]


@pytest.mark.parametrize("mode", ["printed", "installed"])
@pytest.mark.parametrize("line,check", CASES, ids=CASE_IDS)
def test_fish(world, mode, line, check):
    check(run_fish(world, mode, line), world)
