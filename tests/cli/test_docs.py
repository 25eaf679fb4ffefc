"""The binary, the man page and the docs agree: every command `bluebox --help` lists, and
every flag its `-h` lists, is documented in both the man page and docs/commands.md's
command table; every docs page is linked from the README and the man page."""
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MAN = ROOT / "man" / "bluebox.1"
README = ROOT / "README.md"
COMMANDS = ROOT / "docs" / "commands.md"


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


def command_rows(command):
    return [line for line in COMMANDS.read_text().splitlines()
            if line.startswith(f"| `bluebox {command}")]


def test_help_lists_the_commands(bb):
    names = [c for c, _ in help_commands(bb)]
    # the parser above found the table, not a handful of stray words
    for c in ("new", "build", "run", "shell", "up", "exec", "down", "snapshot", "restore",
              "data", "doctor", "verify", "help"):
        assert c in names, names


def test_every_command_is_in_the_man_page_synopsis_and_the_command_table(bb):
    syn = synopsis(man_text())
    missing_man = [c for c, _ in help_commands(bb) if f"bluebox {c}" not in syn]
    missing_table = [c for c, _ in help_commands(bb) if not command_rows(c)]
    assert missing_man == [], f"not in the man page's SYNOPSIS: {missing_man}"
    assert missing_table == [], f"no row in docs/commands.md's command table: {missing_table}"


def test_every_flag_is_in_the_man_page_and_the_command_table(bb):
    man = man_text()
    missing = []
    for command, _ in help_commands(bb):
        rows = "\n".join(command_rows(command))
        for forms in command_flags(bb, command):
            if not any(re.search(rf"(?<![\w-]){re.escape(f)}(?![\w-])", man) for f in forms):
                missing.append(f"man: {command} {'/'.join(forms)}")
            if not any(re.search(rf"(?<![\w-]){re.escape(f)}(?![\w-])", rows) for f in forms):
                missing.append(f"docs/commands.md: {command} {'/'.join(forms)}")
    assert missing == []


@pytest.mark.parametrize("stale", ["does not build images yet", "not in this version",
                                   "starts filling the warm pool"])
def test_the_man_page_promises_nothing_this_version_lacks(stale):
    assert stale not in " ".join(man_text().split())


def docs_pages():
    pages = sorted(p.name for p in (ROOT / "docs").glob("*.md"))
    # the parser found the reference, not an empty folder
    assert {"commands.md", "bluefile.md", "API.md", "troubleshooting.md"} <= set(pages), pages
    return pages


def test_every_docs_page_is_linked_from_the_readme_and_the_man_page():
    readme = README.read_text()
    man = man_text()
    missing = [f"README: {p}" for p in docs_pages() if f"(docs/{p})" not in readme]
    missing += [f"man: {p}" for p in docs_pages() if f"docs/{p}" not in man]
    assert missing == []


def test_the_readme_stays_a_front_door():
    assert len(README.read_text().splitlines()) <= 250


def test_links_between_pages_name_files_that_exist():
    """A relative link in the README or a docs page names a file of the tree (anchors are
    not checked: GitHub makes them from headings)."""
    broken = []
    for page in [README, *sorted((ROOT / "docs").glob("*.md"))]:
        for target in re.findall(r"\]\(([^)#:\s]+)(?:#[^)]*)?\)", page.read_text()):
            if not (page.parent / target).exists():
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert broken == []
