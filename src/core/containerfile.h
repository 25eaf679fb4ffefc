/* Rendering a Bluefile into a Containerfile and its build context. The output is
 * byte-stable for a given Bluefile, so podman's layer cache stays warm. */
#pragma once

#include <stddef.h>

#include "bluefile.h"
#include "util/err.h"

#define BLUEPRINT_DIR ".blueprint"

typedef struct {
    char *name;    /* file name inside .blueprint/ */
    char *content; /* copied into the image verbatim with COPY */
} cf_file;

typedef struct {
    char *text;
    cf_file *files;
    size_t n_files;
    /* The length of text's first part, FROM through the package install: the only part
     * that must download. 0 when there is no install. */
    size_t fetch_end;
} containerfile;

void containerfile_render(const bluefile *bf, containerfile *ret);
void containerfile_clear(containerfile *cf);
static inline void containerfile_clearp(containerfile *cf)
{
    containerfile_clear(cf);
}
#define _cleanup_containerfile_ _cleanup_(containerfile_clearp)

/* Write <dir>/Containerfile and recreate <dir>/.blueprint/ from a rendered containerfile. */
int containerfile_write(const containerfile *cf, const char *dir, bb_error **err);
