/* Everything that happens before a sandbox boots, in one place for run, shell, up, build
 * and the /data disk jobs: the Bluefile, the backend and its preflight, a built image, the
 * mount check, /data ownership and the cached isolation check. */
#pragma once

#include <stdbool.h>

#include "launch/egress.h"
#include "launch/launch.h"
#include "core/inuse.h"
#include "core/sandbox.h"
#include "isolation.h"

/* The handle's backend: its Bluefile loaded (once) and backend_for() asked (once). */
int sandbox_resolve_backend(sandbox *sb, bb_error **err);

typedef struct boot {
    sandbox *sb;        /* the caller's; it outlives the boot */
    const bluefile *bf; /* sb->bf */
    const backend *b;   /* sb->backend */
    char *self;         /* the bluebox the guest runs */
    char *container;    /* a fresh, unique container name */
    launch l;
    isolation_state was;  /* the cache before this boot; ISOCHECK_CACHED: no check ran */
    isolation_result iso; /* filled when it ran */
    inuse use;            /* /data held for a run or shell until boot_done */
    bool stale;           /* the Bluefile changed since the image was built (boot_stale) */
    egress eg;            /* allow:'s log and the secrets (run, shell, up); l.egress points here */
} boot;

typedef enum {
    BOOT_CACHED, /* the cached isolation check: run, shell, up */
    BOOT_VERIFY, /* always the full check: build, verify */
} boot_check;

/* Prepare a boot of the sandbox; `mode` and the command are filled into ret->l by the caller.
 * A boot with `use` also prepares its egress (launch/egress.h): the secrets are read now.
 * `use` ("run", "shell", "up") holds /data in use until boot_done, so that reset, restore and
 * destroy refuse meanwhile (core/inuse.h); NULL for boots that do not need it. The steps
 * after the preflight run under the sandbox's lock: the caller's when it holds it, else
 * taken here and released before returning (core/sandbox.h). */
int boot_prepare(sandbox *sb, boot_check check, const char *use, boot *ret, bb_error **err);
/* The part of boot_prepare that exec repeats before every command, and nothing more: the
 * backend and the cached isolation check (no image, no /data, no lock). */
int boot_check_cached(sandbox *sb, isolation_state *ret_was, isolation_result *ret, bb_error **err);
void boot_done(boot *b);
/* The posture line for this boot (see posture.h). */
char *boot_posture(const boot *b);
/* A booted command's exit code, or -1 with "<name> is not built: bluebox build <name>" when
 * podman failed (125) because the image is gone from podman. */
int boot_exit_code(const boot *b, int code, bb_error **err);
/* Whether the Bluefile is newer than the built image: a run boots what the last build made. */
bool boot_stale(const sandbox *sb);
