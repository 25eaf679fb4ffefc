/* The Bluefile: one sandbox's YAML spec, parsed and validated into a typed struct. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "util/err.h"
#include "util/strv.h"

#define BLUEFILE_DEFAULT_BASE "docker.io/library/alpine:latest"
#define BLUEFILE_MAX_SIZE     (1024 * 1024)
#define BLUEFILE_MAX_WARM     8
/* The most any Bluefile may ask for; a backend may give less (backends/backend.h). */
#define BLUEFILE_MAX_CPUS    16
#define BLUEFILE_MAX_RAM_MIB (1024 * 1024)

typedef enum { NET_NONE, NET_BRIDGE } bf_network;
typedef enum { ISO_STANDARD, ISO_STRICT } bf_isolation;
typedef enum { BACKEND_KRUN, BACKEND_UML, BACKEND_QEMU } bf_backend;
typedef enum { PKG_NONE, PKG_APK, PKG_APT, PKG_DNF } bf_pkgmgr;

typedef struct {
    char *host; /* absolute, ~ expanded */
    char *guest;
    bool rw;
} bf_mount;

typedef struct {
    char *name;
    char *shell;
    bool sudo;
} bf_user;

typedef struct {
    char *path;
    char *content;
    char *mode; /* NULL when not given */
} bf_file;

typedef struct {
    char *key;
    char *value;
} bf_env;

/* A secret (Bluefile `secrets:`): the guest's variable `name` holds a placeholder; the value,
 * read at boot from the invoking process's environment or a file of the caller's, reaches
 * only the VMM, which puts it into requests to `hosts`. */
typedef struct {
    char *name;
    char *from_env;  /* NULL when from_file */
    char *from_file; /* absolute, ~ expanded; NULL when from_env */
    strv hosts;      /* lower-case names or "*.suffix", each covered by `allow:` */
    strv headers;    /* lower-case header names it goes into, beyond SECRET_HEADERS_DEFAULT */
} bf_secret;

/* The request headers a secret's placeholder is replaced in when it names no others (and
 * always): what APIs read credentials from. A placeholder anywhere else stays. */
#define SECRET_HEADERS_DEFAULT "Authorization, Proxy-Authorization and X-Api-Key"

/* The most `allow:` entries and secrets a Bluefile may name. */
#define BLUEFILE_MAX_ALLOW   256
#define BLUEFILE_MAX_SECRETS 64

typedef struct bluefile {
    char *path; /* where it was read from, for messages */
    char *base;
    int cpus;
    int ram_mib;
    bf_network network;
    bool passt;
    bool readonly;
    int timeout_seconds;
    int warm;
    strv warmup;
    bf_isolation isolation;
    bf_backend backend;
    char *seccomp;    /* absolute path or NULL */
    bf_pkgmgr pkgmgr; /* explicit or inferred; PKG_NONE when neither */
    strv packages;
    strv run;
    bf_env *env; /* sorted by key */
    size_t n_env;
    bf_mount *mounts;
    size_t n_mounts;
    bf_user *users;
    size_t n_users;
    bf_file *files;
    size_t n_files;
    strv runcmd;
    /* data_limit: /data is a disk image of this many bytes (0: a host directory, no limit). */
    unsigned long long data_limit;
    /* `allow:` (needs network: bridge): when has_allow, only these destinations are
     * reachable. Normalized entries HOST[:PORT] as ABI_ENV_NET_ALLOW carries them (abi/abi.h):
     * a lower-case name, "*.suffix" or an IPv4 CIDR (a bare address becomes /32). */
    bool has_allow;
    strv allow;
    bf_secret *secrets;
    size_t n_secrets;
} bluefile;

/* data_limit's bounds: a small ext4 still has room for files; the top is ext4's own reach
 * with 4 KiB blocks and more than any host disk. */
#define DATA_LIMIT_MIN (16ULL << 20)
#define DATA_LIMIT_MAX (16ULL << 40)
/* Parse and validate a Bluefile held in memory. `path` names it in messages and anchors a
 * relative `seccomp:` path; `home` expands `~` in mounts and seccomp (NULL: $HOME). */
int bluefile_parse(const char *path, const char *buf, size_t len, const char *home, bluefile **ret,
                   bb_error **err);
/* Read and parse the Bluefile at path. */
int bluefile_load(const char *path, bluefile **ret, bb_error **err);
void bluefile_free(bluefile *bf);
static inline void bluefile_freep(bluefile **bf)
{
    bluefile_free(*bf);
}
#define _cleanup_bluefile_ _cleanup_(bluefile_freep)

const char *bf_network_name(bf_network n);
/* Whether an `allow:` entry (normalized) lets a secret be sent to `host` (a name or
 * "*.suffix"): the same name, or a wildcard above it. */
bool bf_allow_covers(const char *entry, const char *host);
const char *bf_isolation_name(bf_isolation i);
const char *bf_backend_name(bf_backend b);
/* The package manager a base image name implies, or PKG_NONE. */
bf_pkgmgr bf_pkgmgr_infer(const char *base);
