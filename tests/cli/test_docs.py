"""The binary, the man page and the README agree: every command `bluebox --help` lists, and
every flag its `-h` lists, is documented in both (issue: "the docs match the binary")."""
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MAN = ROOT / "man" / "bluebox.1"
README = ROOT / "README.md"


def man_text():
    """The man page as words: roff escapes for hyphens and fonts dropped."""
    t = MAN.read_text()
    t = t.replace("\\-", "-").replace("\\(em", "—")
    t = re.sub(r"\\f[BIRP]", "", t)
    t = re.sub(r"^\.(?:B|I|BI|BR|RB|IR|RI|IB)\s+", "", t, flags=re.M)
    return t.replace('"', "")


def synopsis(text):
    m = re.search(r"^\.SH SYNOPSIS\n(.*?)^\.SH ", text, flags=re.M | re.S)
    assert m, "no SYNOPSIS section"
    # one line per roff request; join each `bluebox <cmd>` line with its arguments
    return " ".join(m.group(1).split())


def help_commands(bb):
    """(command, usage) of each row of `bluebox --help`."""
    r = bb.run("--help")
    assert r.rc == 0, r
    rows = []
    for line in r.out.splitlines():
        parts = [p for p in re.split(r"\s{2,}", line.strip()) if p]
        if len(parts) < 2 or line.lstrip().startswith(("usage:", "bluebox ")):
            continue
        usage = parts[-2]
        word = usage.split()[0]
        if re.fullmatch(r"[a-z]+", word):
            rows.append((word, usage))
    return rows


def command_flags(bb, command):
    """The flags (short and long forms) that `bluebox <command> -h` lists, minus -h."""
    r = bb.run(command, "-h")
    assert r.rc == 0, r
    flags = []
    for line in r.out.splitlines():
        m = re.match(r"^\s+(?:(-\w), )?(--[\w-]+)", line) or re.match(r"^\s+(-\w)\b()", line)
        if m and m.group(2) != "--help":
            flags.append(tuple(f for f in m.groups() if f))
    return flags


def readme_rows(command):
    return [line for line in README.read_text().splitlines()
            if line.startswith(f"| `bluebox {command}")]


def test_help_lists_the_commands(bb):
    names = [c for c, _ in help_commands(bb)]
    # the parser above found the table, not a handful of stray words
    for c in ("new", "build", "run", "shell", "up", "exec", "down", "snapshot", "restore",
              "data", "doctor", "verify", "help"):
        assert c in names, names


def test_every_command_is_in_the_man_page_synopsis_and_the_readme(bb):
    syn = synopsis(man_text())
    missing_man = [c for c, _ in help_commands(bb) if f"bluebox {c}" not in syn]
    missing_readme = [c for c, _ in help_commands(bb) if not readme_rows(c)]
    assert missing_man == [], f"not in the man page's SYNOPSIS: {missing_man}"
    assert missing_readme == [], f"no row in the README's command table: {missing_readme}"


def test_every_flag_is_in_the_man_page_and_the_readme(bb):
    man = man_text()
    missing = []
    for command, _ in help_commands(bb):
        rows = "\n".join(readme_rows(command))
        for forms in command_flags(bb, command):
            if not any(re.search(rf"(?<![\w-]){re.escape(f)}(?![\w-])", man) for f in forms):
                missing.append(f"man: {command} {'/'.join(forms)}")
            if not any(re.search(rf"(?<![\w-]){re.escape(f)}(?![\w-])", rows) for f in forms):
                missing.append(f"README: {command} {'/'.join(forms)}")
    assert missing == []


@pytest.mark.parametrize("stale", ["does not build images yet", "not in this version",
                                   "starts filling the warm pool"])
def test_the_man_page_promises_nothing_this_version_lacks(stale):
    assert stale not in " ".join(man_text().split())
