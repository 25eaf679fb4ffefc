/* Terminal facts, and text made safe to show on a terminal. Nothing here fails. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

struct strbuf;

/* stdin is a character device (a terminal or /dev/tty-like), so a person can answer. */
bool stdin_is_interactive(void);

/* tty_escape flags. */
enum {
    /* Keep line structure: \n, \t and \r\n pass through as they are (else \n and \t are
     * shown as "\n" and "\t", so the text stays on one line). */
    TTY_KEEP_LINES = 1 << 0,
};

/* Append s[0..len) to b with everything that could drive a terminal shown escaped: C0
 * controls and DEL as \xNN, C1 controls (which terminals also obey as UTF-8) as \u00NN, and
 * bytes that are not well-formed UTF-8 as \xNN. The one escaper for untrusted text (Bluefile
 * values, guest output, archive names) on its way to a terminal. Returns whether anything
 * was escaped. */
bool tty_escape(struct strbuf *b, const char *s, size_t len, unsigned flags);
