/* libFuzzer target: the uml launch spec reader. bluebox-vmm writes the spec, but the guest
 * init reads it from a file on a tmpfs the container could have touched, so the decoder must
 * refuse or accept any bytes without crashing or leaking. Checks: a failure comes with an
 * error and leaves nothing behind; an accepted spec obeys the documented rules (known mode,
 * argv non-empty with a non-empty argv[0], cwd absolute, env entries NAME=value, no NUL
 * inside any string, hostname within 64 bytes, the image's USER within 1024, ids never
 * (uid_t)-1, window size within 16 bits, tty 0 or 1, root flags known, mounts with known flags and
 * normalised absolute paths) and survives encode -> decode unchanged, with the encoding
 * canonical and exactly as long as the input. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "abi/spec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        if (!(x))                                                                                  \
            abort();                                                                               \
    } while (0)

/* "No NUL inside" is checked through the length: the encoder writes strlen() bytes, so a
 * string cut short by an embedded NUL makes the re-encoding shorter than the input. */
static void check_strv(const strv *v, int need_eq)
{
    CHECK((v->n == 0) == (v->v == NULL));
    for (size_t i = 0; i < v->n; i++) {
        CHECK(v->v[i] != NULL);
        if (need_eq) {
            const char *eq = strchr(v->v[i], '=');
            CHECK(eq != NULL && eq != v->v[i]);
        }
    }
    CHECK(v->n == 0 || v->v[v->n] == NULL);
}

static void check_valid(const launch_spec *s)
{
    CHECK(s->mode == SPEC_RUN || s->mode == SPEC_SHELL || s->mode == SPEC_PROBE ||
          s->mode == SPEC_AGENT);
    CHECK(s->argv.n >= 1 && s->argv.v[0][0] != '\0');
    check_strv(&s->argv, 0);
    check_strv(&s->env, 1);
    CHECK(s->cwd != NULL && s->cwd[0] == '/');
    CHECK(s->hostname != NULL && strlen(s->hostname) <= 64);
    CHECK(s->uid != (uid_t)-1 && s->gid != (gid_t)-1);
    CHECK((s->n_groups == 0) || s->groups != NULL);
    for (size_t i = 0; i < s->n_groups; i++)
        CHECK(s->groups[i] != (gid_t)-1);
    CHECK(s->rows <= 65535 && s->cols <= 65535);
    CHECK(s->user != NULL && strlen(s->user) <= 1024);
    CHECK((s->root_flags & ~(SPEC_ROOT_RO | SPEC_ROOT_BUILD)) == 0);
    CHECK((s->n_mounts == 0) == (s->mounts == NULL));
    for (size_t i = 0; i < s->n_mounts; i++) {
        CHECK((s->mounts[i].flags & ~SPEC_MOUNT_FLAGS) == 0);
        CHECK(spec_mount_path_ok(s->mounts[i].path));
        CHECK(strstr(s->mounts[i].path, "/../") == NULL && strstr(s->mounts[i].path, "//") == NULL);
    }
}

static int mounts_eq(const launch_spec *a, const launch_spec *b)
{
    if (a->n_mounts != b->n_mounts)
        return 0;
    for (size_t i = 0; i < a->n_mounts; i++)
        if (a->mounts[i].flags != b->mounts[i].flags ||
            strcmp(a->mounts[i].path, b->mounts[i].path) != 0)
            return 0;
    return 1;
}

static int strv_eq(const strv *a, const strv *b)
{
    if (a->n != b->n)
        return 0;
    for (size_t i = 0; i < a->n; i++)
        if (strcmp(a->v[i], b->v[i]) != 0)
            return 0;
    return 1;
}

static int spec_eq(const launch_spec *a, const launch_spec *b)
{
    return a->mode == b->mode && strv_eq(&a->argv, &b->argv) && strv_eq(&a->env, &b->env) &&
           strcmp(a->cwd, b->cwd) == 0 && strcmp(a->hostname, b->hostname) == 0 &&
           a->uid == b->uid && a->gid == b->gid && a->n_groups == b->n_groups &&
           (a->n_groups == 0 ||
            memcmp(a->groups, b->groups, a->n_groups * sizeof *a->groups) == 0) &&
           a->rows == b->rows && a->cols == b->cols && a->root_flags == b->root_flags &&
           mounts_eq(a, b) && strcmp(a->user, b->user) == 0 && a->tty == b->tty;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    launch_spec s = {0};
    bb_error *err = NULL;
    if (spec_decode((const char *)data, size, &s, &err) < 0) {
        CHECK(err != NULL && err->msg != NULL);
        /* A refused spec leaves the output untouched. */
        CHECK(s.argv.v == NULL && s.env.v == NULL && s.cwd == NULL && s.hostname == NULL &&
              s.groups == NULL && s.mounts == NULL && s.user == NULL);
        bb_error_free(err);
        return 0;
    }
    CHECK(err == NULL);
    check_valid(&s);

    size_t len;
    char *enc = spec_encode(&s, &len);
    /* Every accepted record re-encodes to the same number of bytes (strings are exactly
     * their record, numbers exactly 4 bytes, nothing optional is dropped or added). */
    CHECK(len == size);
    launch_spec t = {0};
    CHECK(spec_decode(enc, len, &t, &err) == 0);
    CHECK(err == NULL);
    check_valid(&t);
    CHECK(spec_eq(&s, &t));

    /* The encoding is canonical: encoding the re-decoded spec gives the same bytes. */
    size_t len2;
    char *enc2 = spec_encode(&t, &len2);
    CHECK(len2 == len && memcmp(enc, enc2, len) == 0);

    free(enc2);
    free(enc);
    spec_clear(&t);
    spec_clear(&s);
    return 0;
}
