/* The command table, argument parsing and the one place errors are printed. */
#include "cli.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "abi/abi.h"
#include "core/home.h"
#include "util/tty.h"
#include "util/xalloc.h"

#define OPT_YES                                                                                    \
    {                                                                                              \
        'y', "yes", NULL, "do not ask for confirmation"                                            \
    }

const cli_command cli_commands[] = {
    {"new",
     "define",
     "<name> [--from <example>]",
     "scaffold a sandbox and its Bluefile",
     "Creates ~/.bluebox/sandboxes/<name>/Bluefile and the sandbox's /data directory.\n"
     "With --from, starts from a shipped example (and copies its files into /data).",
     1,
     1,
     {ARG_NONE},
     {{0, "from", "example", "start from a shipped example"}},
     cmd_new},
    {"edit",
     "define",
     "<name> [-b|-c]",
     "open the Bluefile or Containerfile in $EDITOR",
     "Opens $VISUAL, $EDITOR or vi. Without a flag it asks which file. A saved Bluefile is\n"
     "parsed again at once, so a mistake shows now rather than at the next build.",
     1,
     1,
     {ARG_SANDBOX},
     {{'b', "bluefile", NULL, "edit the Bluefile"},
      {'c', "containerfile", NULL, "edit the generated Containerfile"}},
     cmd_edit},
    {"build",
     "define",
     "<name> [--dry-run] [-q]",
     "generate the Containerfile and build the image",
     "With --dry-run, prints the Containerfile the Bluefile renders to and changes nothing.\n"
     "podman's whole output of the last build is kept in ~/.bluebox/logs/build/<name>.log;\n"
     "-q shows only its step lines, then the isolation check and the posture line.\n"
     "On backend: uml every RUN step (packages, run:, runcmd) runs in a uml guest;\n"
     "--host-kernel runs them on the host's kernel in podman build's container instead.",
     1,
     1,
     {ARG_SANDBOX},
     {{0, "dry-run", NULL, "print the Containerfile, change nothing"},
      {'q', "quiet", NULL, "show one line per build step (the rest goes to the build log)"},
      {0, "host-kernel", NULL, "run the build steps on the host's kernel, not in a guest"}},
     cmd_build},
    {"ls", "define", "", "list sandboxes", NULL, 0, 0, {ARG_NONE}, {{0}}, cmd_ls},
    {"env",
     "inspect",
     "<name>",
     "print effective settings as shell assignments",
     "Every value is single-quoted and the Bluefile's env keys become BLUEBOX_ENV_<KEY>,\n"
     "so eval \"$(bluebox env <name>)\" only ever assigns BLUEBOX_* variables.",
     1,
     1,
     {ARG_SANDBOX},
     {{0}},
     cmd_env},
    {"logs",
     "inspect",
     "<name> [-n N] [--net]",
     "show recent runs, or the connection log",
     "Lines that start with '=== ' are bluebox's records (a command's time and quoted command\n"
     "line, the clip marker, its exit status); every line of a command's output starts with\n"
     "'| ', so nothing a command prints can pass for a record.\n\n"
     "With --net, shows the connection log of a sandbox with an allow: list as a table: one\n"
     "row per connection the VMM allowed or refused (time, name:port, decision, rule, bytes\n"
     "up/down, milliseconds). The log is ~/.bluebox/logs/net/<name>.log (JSON lines).",
     1,
     1,
     {ARG_SANDBOX},
     {{'n', "lines", "N", "how many lines (default 200)"},
      {0, "net", NULL, "show the connection log (allow:) instead of the runs"}},
     cmd_logs},
    {"rename",
     "remove",
     "<old> <new>",
     "rename, keeping data, logs, snapshots and the image",
     NULL,
     2,
     2,
     {ARG_SANDBOX, ARG_NONE},
     {{0}},
     cmd_rename},
    {"destroy",
     "remove",
     "<name> [--data] [-y]",
     "remove a sandbox; --data also deletes /data",
     "Keeps /data unless --data is given; asks before deleting data that is not empty.\n"
     "--data also removes the /data that a plain destroy kept, once the sandbox is gone.",
     1,
     1,
     {ARG_SANDBOX},
     {{0, "data", NULL, "also delete /data and snapshots"}, OPT_YES},
     cmd_destroy},
    {"nuke",
     "remove",
     "[--no-data] [-y]",
     "remove every sandbox; --no-data keeps data",
     "Always asks first (or needs -y), since it removes every sandbox at once.",
     0,
     0,
     {ARG_NONE},
     {{0, "no-data", NULL, "keep every sandbox's /data"}, OPT_YES},
     cmd_nuke},
    /* Commands of the runtime, known to help and completion before they can run here. */
    {"run",
     "run",
     "<name> [-i] [-t] -- <cmd…>",
     "run one command in a fresh VM",
     "Piped stdin is forwarded; a terminal's only with -i, and -i on a terminal also gives\n"
     "the command a pty (-t asks for one anyway, and needs a terminal on stdin). Without\n"
     "-i, a command that reads a terminal's stdin sees its end at once.",
     1,
     -1,
     {ARG_SANDBOX, ARG_NONE},
     {{'i', "interactive", NULL, "forward a terminal's stdin"},
      {'t', "tty", NULL, "allocate a pty"}},
     cmd_run},
    {"shell",
     "run",
     "<name>",
     "interactive session in one VM",
     NULL,
     1,
     1,
     {ARG_SANDBOX},
     {{0}},
     cmd_shell},
    {"up",
     "run",
     "<name>",
     "boot a long-lived VM",
     "Boots the sandbox with bluebox's agent as its main process and waits until it answers.\n"
     "exec then runs commands in it, and files, processes and /tmp carry over between them.\n"
     "The agent listens on a port published on 127.0.0.1 only and answers only to a random\n"
     "token kept in ~/.bluebox/run/<name>.json (0600).",
     1,
     1,
     {ARG_SANDBOX},
     {{0}},
     cmd_up},
    {"exec",
     "run",
     "<name> [-i] [-t] -- <cmd…>",
     "run a command in the up VM",
     "The command runs without a shell, in /data, with the image's environment; the exit\n"
     "code comes back, and timeout_seconds applies (" ABI_STR(
         ABI_EXIT_TIMEOUT) "). Piped stdin is forwarded; a\n"
                           "terminal's only with -i, and -i on a terminal also gives the command a "
                           "pty (-t asks\n"
                           "for one anyway). Ctrl-C reaches the remote command as SIGINT.",
     1,
     -1,
     {ARG_SANDBOX, ARG_NONE},
     {{'i', "interactive", NULL, "forward a terminal's stdin"},
      {'t', "tty", NULL, "allocate a pty"}},
     cmd_exec},
    {"down",
     "run",
     "<name>",
     "stop the long-lived VM",
     "Removes the VM started by up and its state. Not being up is not an error.",
     1,
     1,
     {ARG_SANDBOX},
     {{0}},
     cmd_down},
    {"serve",
     "run",
     "[--socket PATH] [--idle DUR]",
     "serve the local API for programs (SDKs, mcp)",
     "HTTP/1.1 + JSON on the Unix socket ~/.bluebox/bluebox.sock (docs/API.md): list, up,\n"
     "down, exec, run (also streamed), files in the guest, snapshots. Only your own user\n"
     "may connect (checked on every connection). --idle exits after that long without\n"
     "requests (e.g. 15m; 0, the default, never). Stops on SIGINT/SIGTERM; VMs stay up.",
     0,
     0,
     {ARG_NONE},
     {{0, "socket", "PATH", "listen on PATH instead"},
      {0, "idle", "DUR", "exit after this long without requests (0: never)"}},
     cmd_serve},
    {"reset",
     "state",
     "<name> [-y]",
     "empty /data, keeping the sandbox",
     "Asks first when /data is not empty. Refused while the sandbox is up.",
     1,
     1,
     {ARG_SANDBOX},
     {OPT_YES},
     cmd_reset},
    {"snapshot",
     "state",
     "<name> [label] [-l] [-y]",
     "archive /data under a label",
     "Writes ~/.bluebox/snapshots/<name>/<label>.tar.gz (.tar.zst with --zstd); the label\n"
     "defaults to the UTC time, YYYYMMDDTHHMMSSZ. Reusing a label asks first. Symlinks are\n"
     "archived as links; devices, fifos and sockets are skipped. -l lists oldest first.",
     1,
     2,
     {ARG_SANDBOX, ARG_NONE},
     {{'l', "list", NULL, "list snapshots"},
      {0, "zstd", NULL, "compress with zstd (faster) instead of gzip"},
      OPT_YES},
     cmd_snapshot},
    {"restore",
     "state",
     "<name> [snapshot] [-y]",
     "replace /data from a snapshot",
     "The snapshot is a label, a file name or a path (.tar, .tar.gz or .tar.zst); the newest\n"
     "by default. Every entry is checked before /data changes: an archive with an absolute\n"
     "or escaping name, a path through a symlink, a device or a fifo is refused whole.",
     1,
     2,
     {ARG_SANDBOX, ARG_SNAPSHOT},
     {OPT_YES},
     cmd_restore},
    {"data",
     "state",
     "export|import <name> <dir>",
     "copy /data out to a directory, or a directory in",
     "export copies /data into a new or empty directory; import merges a directory into\n"
     "/data. Symlinks are copied as links and never followed; devices, fifos, sockets and\n"
     "entries of another type than what is there are skipped and counted.",
     3,
     3,
     {ARG_DATAOP, ARG_SANDBOX, ARG_DIR},
     {{0}},
     cmd_data},
    {"fork",
     "state",
     "<name> <fork>",
     "make a sandbox whose /data is a copy-on-write layer over <name>'s",
     "The fork shares <name>'s image and Bluefile (edit its own copy freely, keeping the same\n"
     "isolation). In its guest, /data shows <name>'s /data with the fork's changes on top;\n"
     "<name>'s /data is never written. See the changes with diff, merge them with apply, drop\n"
     "them with discard. Forks need backend: uml and /data without data_limit.",
     2,
     2,
     {ARG_SANDBOX, ARG_NONE},
     {{0}},
     cmd_fork},
    {"diff",
     "state",
     "<fork>",
     "list a fork's changes to its parent's /data",
     "One line per change, sorted by path: A added, M modified, D deleted. Read from the\n"
     "fork's layer on the host; no VM is started. Control bytes in names are shown as \\ooo.",
     1,
     1,
     {ARG_SANDBOX},
     {{0}},
     cmd_diff},
    {"apply",
     "state",
     "<fork> [-y]",
     "merge a fork's changes into its parent's /data",
     "Shows the changes and asks first. All or nothing: the parent's /data is staged and\n"
     "swapped in whole. The fork's layer is hostile input: symlinks are copied as links and\n"
     "never followed, and nothing is written outside the parent's /data. Refused while the\n"
     "fork or its parent is up or running. The fork is left empty, ready for more work.",
     1,
     1,
     {ARG_SANDBOX},
     {OPT_YES},
     cmd_apply},
    {"discard",
     "state",
     "<fork> [-y]",
     "drop a fork's changes",
     "Asks first when there are changes. Refused while the fork is up or running.",
     1,
     1,
     {ARG_SANDBOX},
     {OPT_YES},
     cmd_discard},
    {"verify",
     "inspect",
     "<name>",
     "re-check that the sandbox has its own kernel",
     NULL,
     1,
     1,
     {ARG_SANDBOX},
     {{0}},
     cmd_verify},
    {"pool",
     "inspect",
     "<name>",
     "show a sandbox's warm pool",
     "Lists the VMs the Bluefile's warm: N keeps booted for run, with their state (booting,\n"
     "waiting, running, stale) and age. Each serves one run and is then thrown away; a tender\n"
     "boots its replacement. Each holds its RAM (ram_mib) while it waits.",
     1,
     1,
     {ARG_SANDBOX},
     {{0}},
     cmd_pool},
    {"ps",
     "inspect",
     "[name] [-q]",
     "list the containers running this home's sandboxes",
     "One row per container: its name, the sandbox, how it was started (direct: runc without\n"
     "podman, the default for uml/qemu run/shell; podman; pool: a warm VM), its state and the\n"
     "host pid of its init (the VMM). A direct run is not in `podman ps`; it is in\n"
     "`runc --root /run/bluebox-direct/runc list`. -q prints the names alone.",
     0,
     1,
     {ARG_SANDBOX},
     {{'q', "quiet", NULL, "print container names only"}},
     cmd_ps},
    {"doctor",
     "inspect",
     "",
     "check this host for what bluebox needs",
     NULL,
     0,
     0,
     {ARG_NONE},
     {{0}},
     cmd_doctor},
    {"mcp",
     "run",
     "[--allow-restore]",
     "serve MCP tools to an agent on stdin/stdout",
     "A Model Context Protocol server for coding agents and assistants: JSON-RPC 2.0, one\n"
     "message per line, protocol 2025-06-18. Tools: list_sandboxes, up, down, exec, run,\n"
     "write_file, read_file, snapshot, fork, diff, apply and discard; restore only with\n"
     "--allow-restore. Each tool is a\n"
     "request to the same handler as bluebox serve's API; sandboxes are made with the CLI.\n"
     "Logs go to stderr. An MCP client starts it as the command: bluebox mcp",
     0,
     0,
     {ARG_NONE},
     {{0, "allow-restore", NULL, "also offer the restore tool (replaces a sandbox's /data)"}},
     cmd_mcp},
    {"completion",
     "shell",
     "bash|zsh|fish",
     "print a shell completion script",
     "  bluebox completion bash > ~/.local/share/bash-completion/completions/bluebox\n"
     "  bluebox completion zsh  > \"${fpath[1]}/_bluebox\"\n"
     "  bluebox completion fish > ~/.config/fish/completions/bluebox.fish",
     1,
     1,
     {ARG_SHELL},
     {{0}},
     cmd_completion},
    {"help",
     "shell",
     "[command]",
     "show help for bluebox or a command",
     NULL,
     0,
     1,
     {ARG_COMMAND},
     {{0}},
     cmd_help},
};
const size_t cli_n_commands = ELEMENTSOF(cli_commands);

const cli_command *cli_find(const char *name)
{
    for (size_t i = 0; i < cli_n_commands; i++)
        if (streq(cli_commands[i].name, name))
            return &cli_commands[i];
    return NULL;
}

static int opt_index(const cli_command *c, const char *long_name)
{
    for (int i = 0; i < CLI_MAX_OPTS && c->opts[i].long_name; i++)
        if (streq(c->opts[i].long_name, long_name))
            return i;
    return -1;
}

bool cli_flag(const cli_args *a, const char *long_name)
{
    int i = opt_index(a->cmd, long_name);
    return i >= 0 && a->set[i];
}

const char *cli_value(const cli_args *a, const char *long_name)
{
    int i = opt_index(a->cmd, long_name);
    return i >= 0 && a->set[i] ? a->value[i] : NULL;
}

static int usage(const cli_command *c, bb_error **err, const char *what)
{
    return bb_fail_usage(err, "%s; see: bluebox %s -h", what, c->name);
}

static int parse_short(const cli_command *c, cli_args *a, char **argv, int argc, int *i,
                       bb_error **err)
{
    const char *s = argv[*i] + 1;
    for (; *s; s++) {
        int k = -1;
        for (int j = 0; j < CLI_MAX_OPTS && c->opts[j].long_name; j++)
            if (c->opts[j].short_name == *s)
                k = j;
        if (k < 0) {
            _cleanup_free_ char *m = xasprintf("unknown flag -%c for %s", *s, c->name);
            return usage(c, err, m);
        }
        a->set[k] = true;
        if (!c->opts[k].arg)
            continue;
        if (s[1]) {
            a->value[k] = s + 1;
        } else if (*i + 1 < argc) {
            a->value[k] = argv[++*i];
        } else {
            _cleanup_free_ char *m = xasprintf("-%c needs a value", *s);
            return usage(c, err, m);
        }
        return 0;
    }
    return 0;
}

static int parse_long(const cli_command *c, cli_args *a, char **argv, int argc, int *i,
                      bb_error **err)
{
    const char *name = argv[*i] + 2;
    const char *eq = strchr(name, '=');
    _cleanup_free_ char *key = eq ? xstrndup(name, (size_t)(eq - name)) : xstrdup(name);
    int k = opt_index(c, key);
    if (k < 0) {
        _cleanup_free_ char *m = xasprintf("unknown flag --%s for %s", key, c->name);
        return usage(c, err, m);
    }
    a->set[k] = true;
    if (!c->opts[k].arg) {
        if (eq) {
            _cleanup_free_ char *m = xasprintf("--%s takes no value", key);
            return usage(c, err, m);
        }
        return 0;
    }
    if (eq)
        a->value[k] = eq + 1;
    else if (*i + 1 < argc)
        a->value[k] = argv[++*i];
    else {
        _cleanup_free_ char *m = xasprintf("--%s needs a value", key);
        return usage(c, err, m);
    }
    return 0;
}

static bool is_help(const char *s)
{
    return streq(s, "-h") || streq(s, "--help");
}

/* Parse argv (after the command name). Returns 1 when help was printed. */
static int parse_args(const cli_command *c, int argc, char **argv, cli_args *a, bb_error **err)
{
    a->cmd = c;
    a->argv = xcalloc((size_t)argc + 1, sizeof *a->argv);
    for (int i = 0; i < argc; i++)
        if (is_help(argv[i])) {
            cli_print_command_help(c);
            return 1;
        } else if (streq(argv[i], "--"))
            break;
    bool dashdash = false;
    for (int i = 0; i < argc; i++) {
        const char *s = argv[i];
        int r = 0;
        if (!dashdash && streq(s, "--"))
            dashdash = true;
        else if (!dashdash && s[0] == '-' && s[1] == '-')
            r = parse_long(c, a, argv, argc, &i, err);
        else if (!dashdash && s[0] == '-' && s[1])
            r = parse_short(c, a, argv, argc, &i, err);
        else
            a->argv[a->argc++] = argv[i];
        if (r < 0)
            return -1;
    }
    if (a->argc < c->min_args || (c->max_args >= 0 && a->argc > c->max_args)) {
        _cleanup_free_ char *m =
            a->argc < c->min_args
                ? xasprintf("%s needs %s", c->name, c->usage)
                : xasprintf("%s takes %s; got an extra argument \"%s\"", c->name,
                            *c->usage ? c->usage : "no arguments", a->argv[c->max_args]);
        return usage(c, err, m);
    }
    return 0;
}

void cli_print_error(const char *prefix, const char *msg)
{
    /* Messages quote untrusted text (Bluefile values, names, what a guest reports): escaped,
     * newlines too, so an error is always one line and never drives the terminal. */
    _cleanup_sb_ strbuf b = {0};
    if (!msg)
        msg = BB_ERROR_NO_MESSAGE;
    tty_escape(&b, msg, strlen(msg), 0);
    fprintf(stderr, "bluebox: %s%s\n", prefix ? prefix : "", b.s ? b.s : "");
}

bool cli_show(FILE *f, const char *text, size_t len)
{
    if (!isatty(fileno(f))) {
        fwrite(text, 1, len, f);
        return false;
    }
    _cleanup_sb_ strbuf b = {0};
    bool escaped = tty_escape(&b, text, len, TTY_KEEP_LINES);
    fwrite(b.s ? b.s : "", 1, b.len, f);
    return escaped;
}

bool cli_showf(FILE *f, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    _cleanup_free_ char *text = xvasprintf(fmt, ap);
    va_end(ap);
    return cli_show(f, text, strlen(text));
}

static int print_error(const bb_error *e)
{
    cli_print_error(NULL, bb_error_message(e));
    return bb_error_exit(e);
}

static int run_command(const cli_command *c, int argc, char **argv)
{
    _cleanup_error_ bb_error *err = NULL;
    cli_args a = {0};
    _cleanup_free_ char *root = NULL;
    int r = parse_args(c, argc, argv, &a, &err);
    if (r > 0) {
        free(a.argv);
        return 0; /* help was asked for and printed */
    }
    if (r == 0 && home_root(&root, &err) < 0)
        r = -1;
    if (r == 0)
        home_tighten(root);
    a.root = root;
    if (r == 0)
        r = c->run(&a, &err);
    free(a.argv);
    if (r < 0)
        return print_error(err);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        /* A closed pipe on stdout is the reader's choice, not our failure. */
        if (errno == EPIPE)
            return 0;
        fprintf(stderr, "bluebox: cannot write output: %s\n", strerror(errno));
        return 1;
    }
    return r;
}

int cli_main(int argc, char **argv)
{
    if (argc < 2 || is_help(argv[1])) {
        cli_print_root_help();
        return argc < 2 ? 2 : 0;
    }
    if (streq(argv[1], "--version") || streq(argv[1], "version")) {
        printf("bluebox %s\n", BLUEBOX_VERSION);
        return 0;
    }
    const cli_command *c = cli_find(argv[1]);
    if (c && !c->run) {
        fprintf(stderr,
                "bluebox: %s needs the runtime (podman and a guest kernel), which this version "
                "of bluebox does not have yet\n",
                c->name);
        return 1;
    }
    if (!c) {
        _cleanup_free_ char *m = xasprintf("unknown command \"%s\"; see: bluebox help", argv[1]);
        cli_print_error(NULL, m);
        return 2;
    }
    return run_command(c, argc - 2, argv + 2);
}
