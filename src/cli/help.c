/* Help text: the root listing by group, and each command's own page. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "util/macro.h"

static const char *const groups[] = {"define", "run", "state", "inspect", "remove", "shell"};

void cli_print_root_help(void)
{
    printf("bluebox %s — throwaway machines with their own kernel for code you do not trust\n\n",
           BLUEBOX_VERSION);
    printf("   usage: bluebox <command> [flags]\n\n");
    for (size_t g = 0; g < ELEMENTSOF(groups); g++) {
        bool first = true;
        for (size_t i = 0; i < cli_n_commands; i++) {
            const cli_command *c = &cli_commands[i];
            if (!c->group || !c->run || !streq(c->group, groups[g]))
                continue;
            char head[64];
            snprintf(head, sizeof head, "%s %s", c->name, c->usage);
            /* pad by characters, not bytes: usages hold "…" */
            int extra = 0;
            for (const char *p = head; *p; p++)
                extra += ((unsigned char)*p & 0xc0) == 0x80;
            printf("   %-8s %-*s %s\n", first ? groups[g] : "", 36 + extra, head, c->summary);
            first = false;
        }
        if (!first)
            printf("\n");
    }
    printf("   bluebox <command> -h   flags and detail\n");
    printf("   bluebox --version      print the version\n");
}

void cli_print_command_help(const cli_command *c)
{
    printf("usage: bluebox %s %s\n\n%s.\n", c->name, c->usage, c->summary);
    if (c->details)
        printf("\n%s\n", c->details);
    bool any = false;
    for (int i = 0; i < CLI_MAX_OPTS && c->opts[i].long_name; i++) {
        if (!any)
            printf("\nflags:\n");
        any = true;
        char head[64];
        snprintf(head, sizeof head, "%s%c%s--%s%s%s", c->opts[i].short_name ? "-" : "",
                 c->opts[i].short_name ? c->opts[i].short_name : ' ',
                 c->opts[i].short_name ? ", " : "  ", c->opts[i].long_name,
                 c->opts[i].arg ? " " : "", c->opts[i].arg ? c->opts[i].arg : "");
        printf("  %-24s %s\n", head + (c->opts[i].short_name ? 0 : 1), c->opts[i].help);
    }
    printf("  %-24s %s\n", "-h, --help", "show this help");
}

int cmd_help(cli_args *a, bb_error **err)
{
    if (a->argc == 0) {
        cli_print_root_help();
        return 0;
    }
    const cli_command *c = cli_find(a->argv[0]);
    if (!c)
        return bb_fail_usage(err, "unknown command \"%s\"; see: bluebox help", a->argv[0]);
    cli_print_command_help(c);
    return 0;
}
