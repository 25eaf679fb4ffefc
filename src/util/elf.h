/* A small ELF64 reader for the VMM bundle: the program interpreter, the DT_NEEDED list and
 * an in-place PT_INTERP rewrite. Reads only the headers it needs (pread, bounded), checks
 * every offset against the file size, and refuses anything that is not an ELF64 file of
 * this machine.
 *
 * Errors: every function that can fail takes `bb_error **err` and returns -1. */
#pragma once

#include <stdint.h>

#include "err.h"
#include "strv.h"

typedef struct elf_info {
    char *interp;         /* PT_INTERP up to its first NUL; NULL when there is none */
    uint64_t interp_off;  /* file offset of the PT_INTERP bytes */
    uint64_t interp_size; /* their length (p_filesz), including the NUL padding */
    strv needed;          /* DT_NEEDED names, in order */
    char *runpath;        /* DT_RUNPATH, else DT_RPATH; NULL when neither */
    char *soname;         /* DT_SONAME or NULL */
} elf_info;

void elf_info_clear(elf_info *e);
static inline void elf_info_clearp(elf_info *e)
{
    elf_info_clear(e);
}
#define _cleanup_elf_info_ _cleanup_(elf_info_clearp)

/* Inspect an open ELF file; `what` names it in errors. */
int elf_inspect_fd(int fd, const char *what, elf_info *ret, bb_error **err);
int elf_inspect(const char *path, elf_info *ret, bb_error **err);

/* Overwrite the PT_INTERP string of the file open read-write on fd with `interp`, padded with
 * NULs to the segment's size; the file size and every other byte stay as they are. Refuses
 * when the file has no PT_INTERP or the new string (with its NUL) does not fit. */
int elf_set_interp_fd(int fd, const char *what, const char *interp, bb_error **err);
