/* The host side of a sandbox's egress policy (Bluefile `allow:` and `secrets:`). The VMM
 * enforces it (SECURITY.md, "Egress"); the host hands it what it needs at each boot: the
 * normalized list, the connection log to append to, and the secrets' values, read at boot
 * from the caller's environment or files into a sealed memfd that only the VMM receives
 * (podman --preserve-fds; never an argv, an environment or podman's container config). The
 * guest gets a placeholder per secret instead. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "core/bluefile.h"
#include "core/sandbox.h"
#include "util/err.h"
#include "util/strv.h"

/* The connection log is rotated (to <log>.1, older ones to .2 and .3: NETLOG_GENERATIONS,
 * core/home.h) at a boot that finds it larger than this. */
#define EGRESS_LOG_ROTATE (4u << 20)
/* The largest secret value, and the largest a secret file may be. */
#define EGRESS_SECRET_MAX (64u << 10)
/* The fd number the secrets reach podman at, and so the container: the first that
 * --preserve-fds=1 passes on. */
#define EGRESS_SECRETS_FD 3
/* A placeholder: ABI_SECRET_PREFIX and this many hex digits. */
#define EGRESS_PLACEHOLDER_HEX 32

typedef struct egress {
    char *log; /* the connection log this boot appends to (0600, rotated); NULL: none */
    /* The sealed memfd of the secrets JSON (abi/abi.h); no secrets when not above 2, so that a
     * zeroed egress owns nothing. */
    int secrets_fd;
    strv env; /* NAME=<placeholder>, one per secret, in Bluefile order */
} egress;

#define EGRESS_NONE ((egress){.secrets_fd = -1})

/* Everything a boot of sb (run, shell, up) needs for its egress policy: nothing without
 * `allow:`. A secret that cannot be read is an error naming the secret and where its value
 * was to come from, never the value. Variables named by from_env are taken out of this
 * process's environment, so that podman and what it starts never inherit them. The caller
 * hands the log (ret->log, when set) to the sandbox's root (runtime/dataown.h). */
int egress_prepare(const sandbox *sb, egress *ret, bb_error **err);
void egress_done(egress *e);
/* Whether e holds secrets for the guest. */
bool egress_has_secrets(const egress *e);

/* ABI_ENV_NET_ALLOW's value: the normalized entries, comma-separated. */
char *egress_allow_value(const bluefile *bf);
/* Open (creating, 0600) the connection log at path for a boot, first moving a log larger
 * than EGRESS_LOG_ROTATE to path.1 (path.1 to path.2, path.2 to path.3, dropping the
 * oldest). */
int egress_log_rotate(const char *path, bb_error **err);
/* A fresh placeholder: ABI_SECRET_PREFIX and EGRESS_PLACEHOLDER_HEX random hex digits. */
char *egress_placeholder(void);
/* The value of one secret, read now: from the environment (taken out of it) or from a file
 * that is the caller's and nobody else's (no group or other permission bits). One trailing
 * newline of a file is dropped. Values are printable ASCII (they go into HTTP headers).
 * The caller frees *ret with egress_secret_free. */
int egress_secret_read(const bf_secret *s, char **ret, bb_error **err);
void egress_secret_free(char *value);
/* The sealed memfd holding `[{"name","placeholder","value","hosts":[…]}]` for bf's secrets
 * (values[i] and placeholders[i] belong to bf->secrets[i]). */
int egress_secrets_memfd(const bluefile *bf, char *const *values, char *const *placeholders,
                         int *ret_fd, bb_error **err);
