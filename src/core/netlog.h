/* `bluebox logs <name> --net`: the connection log (one JSON object per line, appended by the
 * VMM) as a table. The lines are guest-influenced (the names, ports and even the rules come
 * from what the guest asked for), so every field is escaped and a line that is not a JSON
 * object is counted and skipped, never an error. */
#pragma once

#include <stddef.h>

/* The header and one row per entry of the last `max_lines` entries of text[0..len):
 * TIME, DESTINATION (name:port), DECISION, RULE, BYTES (up/down), MS. Lines that could not be
 * read are counted in *ret_bad. */
char *netlog_render(const char *text, size_t len, size_t max_lines, size_t *ret_bad);
