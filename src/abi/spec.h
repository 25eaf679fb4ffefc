/* The uml launch spec: what bluebox-vmm saw of its own OCI process (argv, env, cwd, ids,
 * hostname) and the mode, handed to the guest init through a 0600 file on the exec tmpfs
 * (never argv, never the kernel cmdline). Binary-safe (argv and env are bytes, not
 * necessarily UTF-8): a magic line, then records of 1 tag byte, a big-endian u32 length and
 * that many bytes. The reader takes the records in any order, but every single-valued one
 * exactly once and a non-empty argv; it refuses unknown tags and short or overlong records
 * and never trusts a length it has not checked against what is left. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "abi.h"
#include "util/err.h"
#include "util/strv.h"

/* bluebox-vmm writes the spec to ABI_SPEC_PATH and the guest init reads (and deletes) it
 * there: the guest sees the container's root and its mounts through hostfs, so the path is
 * the same. */
#define SPEC_MAX   (4u << 20)
#define SPEC_MAGIC "bluebox-spec 3\n"

typedef enum {
    SPEC_RUN = ABI_MODE_RUN,
    SPEC_SHELL = ABI_MODE_SHELL,
    SPEC_PROBE = ABI_MODE_PROBE,
    SPEC_AGENT = ABI_MODE_AGENT,
} spec_mode;

/* Root flags: the container's root is read-only (Bluefile readonly: true). */
#define SPEC_ROOT_RO 0x1u
/* A build step (ABI_ENV_BUILD): the root is written in place, no RAM layer. */
#define SPEC_ROOT_BUILD 0x2u

/* A container mount the guest gets as a mount of its own (/data and the Bluefile's
 * mounts), at the same path, with these flags; everything else of the root is the image
 * under a RAM layer. A writable directory is served by the file server (SPEC_MOUNT_FS:
 * virtio-fs, tag "bbfs<k>" for the k-th such mount in spec order, src/fsd); the rest are
 * hostfs mounts. */
#define SPEC_MOUNT_RO     0x1u
#define SPEC_MOUNT_NOSUID 0x2u
#define SPEC_MOUNT_NODEV  0x4u
#define SPEC_MOUNT_NOEXEC 0x8u
#define SPEC_MOUNT_FILE   0x10u /* a single file, not a directory */
#define SPEC_MOUNT_FS     0x20u /* served by the file server */
#define SPEC_MOUNT_FLAGS  0x3fu
#define SPEC_FS_TAG       "bbfs" /* + the mount's index among the SPEC_MOUNT_FS ones */
/* The sandbox CA (optional, at most once): one PEM certificate of at most this size. */
#define SPEC_CA_MAX   16384
#define SPEC_CA_BEGIN "-----BEGIN CERTIFICATE-----\n"

typedef struct spec_mount {
    char *path; /* absolute, normalised: no empty, "." or ".." component, not "/" */
    unsigned flags;
} spec_mount;

typedef struct launch_spec {
    spec_mode mode;
    strv argv; /* at least one element */
    strv env;  /* "NAME=value" */
    char *cwd; /* absolute */
    char *hostname;
    uid_t uid;
    gid_t gid;
    gid_t *groups;
    size_t n_groups;
    /* The image's USER (podman's syntax: name, uid, name:group, uid:gid), resolved by the
     * guest init in the image's /etc/passwd and /etc/group (guest/user.h) into uid, gid and
     * groups; "" keeps the ids above. */
    char *user;
    unsigned rows, cols; /* initial window size for a terminal; 0 when unknown */
    bool tty;            /* the command gets a pty (podman gave bluebox-vmm a terminal) */
    unsigned root_flags; /* SPEC_ROOT_* */
    spec_mount *mounts;  /* in mount order: a mount inside another comes after it */
    size_t n_mounts;
    /* The sandbox CA's certificate (PEM) when bluebox-vmm brokers secrets (net/tlsbroker.h):
     * the guest init adds it to the guest's trust store. NULL when there is none. */
    char *ca_pem;
} launch_spec;

/* Parse a mode name ("run", "shell", "probe", "agent"); -1 when unknown. */
int spec_mode_parse(const char *s, spec_mode *ret);

/* Serialise into a new buffer (never fails; aborts on OOM). */
char *spec_encode(const launch_spec *s, size_t *ret_len);
/* Append a mount (the path is copied). */
void spec_add_mount(launch_spec *s, const char *path, unsigned flags);
/* A path the reader accepts for a mount: absolute, normalised, not "/", below PATH_MAX. */
bool spec_mount_path_ok(const char *path);
/* Strict parse of len bytes. */
int spec_decode(const char *data, size_t len, launch_spec *ret, bb_error **err);

void spec_clear(launch_spec *s);
static inline void spec_clearp(launch_spec *s)
{
    spec_clear(s);
}
#define _cleanup_spec_ _cleanup_(spec_clearp)
