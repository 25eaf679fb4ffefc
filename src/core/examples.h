/* The example Bluefiles shipped inside the binary (for bluebox new --from). */
#pragma once

#include "core/embedded.h"
#include "util/err.h"
#include "util/strv.h"

/* Names of the shipped examples, sorted. */
void examples_names(strv *ret);
/* The example's Bluefile, or NULL when there is no such example. */
const embedded_file *examples_bluefile(const char *name);
/* Copy the example's other files into the directory data_dir (never overwriting, never
 * following a symlink already there). Returns how many were written. */
int examples_install_extras(const char *name, const char *data_dir, bb_error **err);
