/* The command-line layer: a command table, argument parsing, help, and printing errors. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "runtime/isolation.h"
#include "util/err.h"

#define CLI_MAX_OPTS 6

typedef struct {
    char short_name; /* 0 when there is none */
    const char *long_name;
    const char *arg; /* value placeholder, NULL for a flag */
    const char *help;
} cli_opt;

/* What a positional argument is, for completion. */
typedef enum {
    ARG_NONE,     /* invented by the user: complete to nothing */
    ARG_SANDBOX,  /* an existing sandbox name */
    ARG_SNAPSHOT, /* a snapshot of the sandbox named before it */
    ARG_COMMAND,  /* a bluebox command name */
    ARG_SHELL,    /* bash, zsh or fish */
    ARG_DATAOP,   /* export or import */
    ARG_DIR,      /* a directory on the host: the shell's own completion */
} cli_argkind;

typedef struct cli_args cli_args;

typedef struct {
    const char *name;
    const char *group; /* define, run, state, inspect, remove, shell; NULL: hidden */
    const char *usage; /* argument synopsis, e.g. "<name> [-n N]" */
    const char *summary;
    const char *details;    /* extra help text, may be NULL */
    int min_args, max_args; /* positional arguments; max -1 = any */
    cli_argkind args[3];
    cli_opt opts[CLI_MAX_OPTS];
    int (*run)(cli_args *a, bb_error **err);
} cli_command;

struct cli_args {
    const cli_command *cmd;
    const char *root; /* BLUEBOX_HOME */
    int argc;
    char **argv; /* positional arguments */
    bool set[CLI_MAX_OPTS];
    const char *value[CLI_MAX_OPTS];
};

extern const cli_command cli_commands[];
extern const size_t cli_n_commands;

const cli_command *cli_find(const char *name);
/* Whether the option with this long name was given, and its value. */
bool cli_flag(const cli_args *a, const char *long_name);
const char *cli_value(const cli_args *a, const char *long_name);

int cli_main(int argc, char **argv);
void cli_print_root_help(void);
/* Print "bluebox: <prefix><msg>" on stderr, control characters escaped. */
void cli_print_error(const char *prefix, const char *msg);
/* Write text that holds untrusted bytes (a Bluefile's values, a guest's output, archive
 * names) to f: byte-exact when f is not a terminal, through tty_escape (lines kept) when it
 * is. Returns whether anything was shown escaped. */
bool cli_show(FILE *f, const char *text, size_t len);
/* cli_show of a formatted string. */
bool cli_showf(FILE *f, const char *fmt, ...) _printf_(2, 3);
void cli_print_command_help(const cli_command *c);

struct boot;
/* "isolated: host <r>, guest <r> (<backend>)" and the posture line, on stdout. */
void print_isolated(const struct boot *b);
/* On stderr, when this boot had to re-run the isolation check, and when it boots an image
 * older than the Bluefile. */
void cli_say_rechecked(const struct boot *b);
/* The same for exec, which has only the cached check's state and result: "re-verified
 * isolation (<what> changed since the last check)" when the runtime changed. */
void cli_say_reverified(isolation_state was, const isolation_result *iso);

/* The commands. */
int cmd_new(cli_args *a, bb_error **err);
int cmd_edit(cli_args *a, bb_error **err);
int cmd_build(cli_args *a, bb_error **err);
int cmd_ls(cli_args *a, bb_error **err);
int cmd_env(cli_args *a, bb_error **err);
int cmd_logs(cli_args *a, bb_error **err);
int cmd_rename(cli_args *a, bb_error **err);
int cmd_destroy(cli_args *a, bb_error **err);
int cmd_nuke(cli_args *a, bb_error **err);
int cmd_completion(cli_args *a, bb_error **err);
int cmd_run(cli_args *a, bb_error **err);
int cmd_shell(cli_args *a, bb_error **err);
int cmd_up(cli_args *a, bb_error **err);
int cmd_exec(cli_args *a, bb_error **err);
int cmd_down(cli_args *a, bb_error **err);
int cmd_verify(cli_args *a, bb_error **err);
int cmd_doctor(cli_args *a, bb_error **err);
int cmd_help(cli_args *a, bb_error **err);
int cmd_reset(cli_args *a, bb_error **err);
int cmd_snapshot(cli_args *a, bb_error **err);
int cmd_restore(cli_args *a, bb_error **err);
int cmd_data(cli_args *a, bb_error **err);
int cmd_fork(cli_args *a, bb_error **err);
int cmd_pool(cli_args *a, bb_error **err);
int cmd_ps(cli_args *a, bb_error **err);
struct ops_command;
struct ops_run_result;
/* run's and exec's command from the arguments after the name, with exec's stdio rules and
 * the CLI's words for what happens before the command starts (cmd_run.c). */
void cli_ops_command(cli_args *a, const char *log_as, struct ops_command *ret);
/* Say what the agent reported and a timeout, clear r; the exit code to pass on. */
int cli_command_done(struct ops_run_result *r);
int cmd_diff(cli_args *a, bb_error **err);
int cmd_apply(cli_args *a, bb_error **err);
int cmd_discard(cli_args *a, bb_error **err);
int cmd_serve(cli_args *a, bb_error **err);
int cmd_mcp(cli_args *a, bb_error **err);
/* Hidden: `bluebox __complete <words…>` prints completion candidates. */
int cli_complete(int argc, char **argv);
