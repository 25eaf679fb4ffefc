/* Confirmation prompts. The CLI layer owns the terminal, but the wording of a confirmation
 * is part of the rule "ask before deleting", so it lives here. */
#include "prompt.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "util/tty.h"
#include "util/xalloc.h"

int prompt_read_line(char **ret)
{
    _cleanup_sb_ strbuf b = {0};
    for (;;) {
        int c = getchar();
        if (c == EOF) {
            if (!b.len)
                return 0;
            break;
        }
        if (c == '\n')
            break;
        if (b.len < 4096)
            sb_putc(&b, (char)c);
    }
    *ret = sb_steal(&b);
    return 1;
}

int prompt_confirm(bool yes, const char *question, bb_error **err)
{
    if (yes)
        return 0;
    if (!stdin_is_interactive())
        return bb_fail(err, EPERM, "refusing without a terminal; pass --yes to confirm");
    /* The question quotes names and paths (a snapshot's file name, say) that may hold
     * control characters; a person reads it on a terminal. */
    _cleanup_sb_ strbuf q = {0};
    tty_escape(&q, question, strlen(question), 0);
    fprintf(stderr, "%s [y/N] ", q.s ? q.s : "");
    fflush(stderr);
    _cleanup_free_ char *answer = NULL;
    if (prompt_read_line(&answer) > 0 && (streq(answer, "y") || streq(answer, "Y")))
        return 0;
    if (!answer)
        fputc('\n', stderr);
    return bb_fail(err, ECANCELED, "cancelled");
}
