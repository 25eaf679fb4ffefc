/* `bluebox completion bash|zsh|fish`: print the shell completion script built into the binary. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "core/embedded.h"

int cmd_completion(cli_args *a, bb_error **err)
{
    for (const embedded_file *f = embedded_completions; f->group; f++) {
        if (!streq(f->group, a->argv[0]))
            continue;
        if (!f->len)
            return bb_fail(err, 0, "this build has no %s completion script", f->group);
        fwrite(f->data, 1, f->len, stdout);
        return 0;
    }
    return bb_fail_usage(err, "completion takes bash, zsh or fish, got \"%s\"", a->argv[0]);
}
