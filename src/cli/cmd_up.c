/* Commands of long-lived sandboxes: up, exec, down. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "core/home.h"
#include "core/sandbox.h"
#include "core/runlog.h"
#include "runtime/boot.h"
#include "ops/ops.h"

static void print_vm_log(char *log)
{
    if (!log || !*log)
        return;
    fprintf(stderr, "bluebox: the VM's last messages:\n");
    char *save = NULL;
    for (char *line = strtok_r(log, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
        cli_print_error("vm: ", line);
}

static void on_starting(void *opaque, const boot *b)
{
    (void)opaque;
    cli_say_rechecked(b);
}

int cmd_up(cli_args *a, bb_error **err)
{
    const char *name = a->argv[0];
    _cleanup_sandbox_ sandbox *sb = NULL;
    if (sandbox_open(a->root, name, &sb, err) < 0)
        return -1;
    ops_events ev = {.starting = on_starting};
    _cleanup_(ops_up_result_clear) ops_up_result r = {0};
    if (ops_up(sb, &ev, &r, err) < 0) {
        print_vm_log(r.vm_log);
        return -1;
    }
    if (r.already)
        printf("%s is already up\n", name);
    else
        cli_showf(stdout, "up %s (ready in %.2fs)\n%s\n", name, r.seconds, r.posture);
    return 0;
}

int cmd_down(cli_args *a, bb_error **err)
{
    const char *name = a->argv[0];
    bool was = false;
    _cleanup_sandbox_ sandbox *sb = NULL;
    if (sandbox_open(a->root, name, &sb, err) < 0 || ops_down(sb, &was, err) < 0)
        return -1;
    printf(was ? "down %s\n" : "%s is not up\n", name);
    return 0;
}

int cmd_exec(cli_args *a, bb_error **err)
{
    const char *name = a->argv[0];
    if (a->argc < 2)
        return bb_fail_usage(err, "exec needs a command: bluebox exec %s -- <cmd…>", name);
    _cleanup_sandbox_ sandbox *sb = NULL;
    if (sandbox_open(a->root, name, &sb, err) < 0)
        return -1;
    ops_command c;
    cli_ops_command(a, "exec", &c);
    ops_run_result r;
    if (ops_exec(sb, &c, &r, err) < 0) {
        ops_run_result_clear(&r);
        return -1;
    }
    return cli_command_done(&r);
}
