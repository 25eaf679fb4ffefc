/* podman build in a staging context, swapped into place on success. */
#include "build.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/containerfile.h"
#include "image.h"
#include "launch.h"
#include "posture.h"
#include "util/fs.h"
#include "util/spawn.h"
#include "util/xalloc.h"

static int move_into_place(const char *stage, const char *dir, bb_error **err)
{
    static const char *const names[] = {"Containerfile", "image-id", "image-user", BLUEPRINT_DIR};
    for (size_t i = 0; i < ELEMENTSOF(names); i++) {
        _cleanup_free_ char *from = path_join(stage, names[i]), *to = path_join(dir, names[i]);
        if (!path_exists(from)) {
            if (rm_rf(to, err) < 0)
                return -1;
            continue;
        }
        /* A directory cannot replace a directory in one rename: clear the old one first. */
        if (is_dir(from) && rm_rf(to, err) < 0)
            return -1;
        if (rename(from, to) < 0)
            return bb_fail_errno(err, errno, "cannot move %s into place", to);
    }
    return 0;
}

/* What the build steps get, found by installing packages with apt and dpkg under podman
 * build: dpkg and apt's download sandbox need CHOWN, DAC_OVERRIDE, FOWNER, SETUID and SETGID
 * (each one dropped fails the install); without FSETID the setgid bits of crontab, plocate
 * and the like are silently dropped, and SETFCAP lets postinst scripts give ping a file
 * capability instead of setuid root. Everything else podman grants by default (NET_RAW,
 * MKNOD, SYS_CHROOT, KILL, NET_BIND_SERVICE, SETPCAP, AUDIT_WRITE) goes. */
#define BUILD_CAPS "CHOWN,DAC_OVERRIDE,FOWNER,FSETID,SETUID,SETGID,SETFCAP"
/* Processes per user in the build (podman build has no pids limit). */
#define BUILD_NPROC "1024"

void build_argv(const bluefile *bf, const build_spec *s, strv *ret)
{
    strv a = {0};
    strv_add(&a, "podman");
    strv_add(&a, "build");
    strv_add(&a, "--pull=never");
    strv_add(&a, "--layers");
    strv_add(&a, "--cap-drop=all");
    strv_add(&a, "--cap-add=" BUILD_CAPS);
    strv_add(&a, "--ulimit=nproc=" BUILD_NPROC ":" BUILD_NPROC);
    /* podman build fails outright on a limit it cannot enforce. */
    if (s->limits)
        strv_push(&a, xasprintf("--memory=%dm", launch_memory_mib(bf)));
    if (!s->network)
        strv_add(&a, "--network=none");
    /* Not --no-hosts: most base images have no /etc/hosts of their own, and build steps
     * that use localhost would fail; a bind-mounted one leaves an empty file in the image. */
    strv_add(&a, "-f");
    strv_add(&a, s->containerfile);
    if (s->tag) {
        strv_add(&a, "-t");
        strv_add(&a, s->tag);
    }
    strv_push(&a, xasprintf("--iidfile=%s", s->iidfile));
    strv_add(&a, s->context);
    *ret = a;
}

static int podman_build(const bluefile *bf, const build_spec *s, bb_error **err)
{
    _cleanup_strv_ strv argv = {0};
    build_argv(bf, s, &argv);
    int code = spawn_wait_escaped(argv.v, err);
    if (code < 0)
        return -1;
    if (code != 0)
        return bb_fail(err, EIO,
                       "podman build failed (exit %d); the previous image and Containerfile are "
                       "unchanged",
                       code);
    return 0;
}

/* An offline sandbox whose packages must be downloaded builds in two parts, since podman
 * build has no network per step (it refuses RUN --network): FROM through the package install
 * with the network, then the rest (run:, the blueprint) offline, FROM the first part's
 * image. The Containerfile kept beside the sandbox is the whole one. */
static int build_in_two(const bluefile *bf, const containerfile *cf, const build_spec *whole,
                        bb_error **err)
{
    _cleanup_free_ char *fetch = path_join(whole->context, "Containerfile.fetch");
    _cleanup_free_ char *fetch_iid = path_join(whole->context, "fetch-id");
    if (write_file_atomic(fetch, cf->text, cf->fetch_end, 0644, err) < 0)
        return -1;
    build_spec s = *whole;
    s.containerfile = fetch;
    s.tag = NULL;
    s.iidfile = fetch_iid;
    s.network = true;
    if (podman_build(bf, &s, err) < 0)
        return -1;
    _cleanup_free_ char *id = NULL;
    if (read_file(fetch_iid, 4096, &id, NULL, err) < 0)
        return -1;
    id[strcspn(id, "\r\n")] = '\0';
    if (!*id || strchr(id, ' '))
        return bb_fail(err, EIO, "podman build wrote no image id to %s", fetch_iid);
    _cleanup_free_ char *text = xasprintf("FROM %s\n%s", id, cf->text + cf->fetch_end);
    _cleanup_free_ char *rest = path_join(whole->context, "Containerfile.offline");
    if (write_file_atomic(rest, text, strlen(text), 0644, err) < 0)
        return -1;
    s = *whole;
    s.containerfile = rest;
    return podman_build(bf, &s, err);
}

int image_build(const sandbox *sb, const containerfile *cf, bb_error **err)
{
    const bluefile *bf = sb->bf;
    if (!program_on_path("podman"))
        return bb_fail(err, ENOENT,
                       "podman is not installed; install it (Debian: apt-get install podman)");
    const char *dir = sb->dir;
    _cleanup_free_ char *previous = image_recorded_id(sb->root, sb->name);
    _cleanup_free_ char *tmpl = xasprintf("%s/.build-XXXXXX", dir);
    if (!mkdtemp(tmpl))
        return bb_fail_errno(err, errno, "cannot create a build directory in %s", dir);
    int r = containerfile_write(cf, tmpl, err);
    if (r == 0) {
        _cleanup_free_ char *file = path_join(tmpl, "Containerfile");
        _cleanup_free_ char *iid = path_join(tmpl, "image-id");
        _cleanup_free_ char *ref = image_ref(sb->root, sb->name);
        build_spec spec = {.containerfile = file,
                           .context = tmpl,
                           .tag = ref,
                           .iidfile = iid,
                           .network = bf->network != NET_NONE,
                           .limits = limits_enforced()};
        r = !spec.network && cf->fetch_end ? build_in_two(bf, cf, &spec, err)
                                           : podman_build(bf, &spec, err);
        /* Beside image-id, so that launches need not ask podman (image_user); when podman
         * cannot say, the first launch asks. */
        if (r == 0)
            (void)image_user_record(tmpl, ref, NULL);
    }
    if (r == 0)
        r = move_into_place(tmpl, dir, err);
    if (r == 0)
        image_record_ref(sb->root, sb->name);
    if (r == 0)
        image_prune(previous); /* the image this build replaced, when nothing tags it now */
    (void)rm_rf(tmpl, NULL);
    return r;
}
