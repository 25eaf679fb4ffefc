/* podman build in a staging context, swapped into place on success. */
#include "build.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/containerfile.h"
#include "core/home.h"
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

/* -q: of podman's output only its step lines ("STEP 2/5: RUN ..."). */
static bool step_line(const char *line, size_t len)
{
    return len >= 5 && memcmp(line, "STEP ", 5) == 0;
}

static int podman_build(const bluefile *bf, const build_spec *s, const spawn_tee *out,
                        bb_error **err)
{
    _cleanup_strv_ strv argv = {0};
    build_argv(bf, s, &argv);
    int code = spawn_wait_tee(argv.v, out, err);
    if (code < 0)
        return -1;
    if (code != 0)
        return bb_fail(err, EIO,
                       "podman build failed (exit %d); the previous image and Containerfile are "
                       "unchanged; podman's whole output is in %s",
                       code, s->log);
    return 0;
}

/* An offline sandbox whose packages must be downloaded builds in two parts, since podman
 * build has no network per step (it refuses RUN --network): FROM through the package install
 * with the network, then the rest (run:, the blueprint) offline, FROM the first part's
 * image. The Containerfile kept beside the sandbox is the whole one. */
static int build_in_two(const bluefile *bf, const containerfile *cf, const build_spec *whole,
                        const spawn_tee *out, bb_error **err)
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
    if (podman_build(bf, &s, out, err) < 0)
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
    return podman_build(bf, &s, out, err);
}

/* podman build runs with --pull=never, so no build step ever fetches an image by itself: the
 * Bluefile's base is pulled here, once and in the open, when it is not local yet (podman's own
 * progress shows on a terminal). */
static int base_ensure(const char *base, const spawn_tee *out, bb_error **err)
{
    char *exists[] = {"podman", "image", "exists", (char *)base, NULL};
    int code = spawn_quiet(exists, err);
    if (code < 0)
        return -1;
    if (code == 0)
        return 0;
    fprintf(stderr, "bluebox: the base image %s is not here yet; pulling it\n", base);
    char *pull[] = {"podman", "pull", (char *)base, NULL};
    code = spawn_wait_tee(pull, out, err);
    if (code < 0)
        return -1;
    if (code != 0)
        return bb_fail(err, EIO,
                       "cannot get the base image %s: podman pull failed (exit %d; its message is "
                       "above: no network, no such image, or the registry wants a login). Get it "
                       "and build again: podman pull %s, or make it locally and name it so "
                       "(podman tag <image> %s)",
                       base, code, base, base);
    return 0;
}

/* podman's whole output of this build, replaced by the next one (owner-only, like the run
 * log: it shows what the build steps printed). */
static int build_log_open(const sandbox *sb, bb_error **err)
{
    _cleanup_free_ char *dir = path_join(sb->root, "logs/build");
    if (mkdir_p(dir, HOME_DIR_MODE, err) < 0)
        return -1;
    int fd = open(sb->build_log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return bb_fail_errno(err, errno, "cannot write the build log %s", sb->build_log);
    return fd;
}

int image_build(const sandbox *sb, const containerfile *cf, bool quiet, bb_error **err)
{
    const bluefile *bf = sb->bf;
    if (!program_on_path("podman"))
        return bb_fail(err, ENOENT,
                       "podman is not installed; install it (Debian: apt-get install podman)");
    _cleanup_close_ int log = build_log_open(sb, err);
    if (log < 0)
        return -1;
    spawn_tee out = {.log_fd = log, .show_line = quiet ? step_line : NULL};
    if (base_ensure(bf->base, &out, err) < 0)
        return -1;
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
                           .log = sb->build_log,
                           .context = tmpl,
                           .tag = ref,
                           .iidfile = iid,
                           .network = bf->network != NET_NONE,
                           .limits = limits_enforced()};
        r = !spec.network && cf->fetch_end ? build_in_two(bf, cf, &spec, &out, err)
                                           : podman_build(bf, &spec, &out, err);
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
