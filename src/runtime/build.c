/* podman build in a staging context, swapped into place on success. */
#include "build.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/containerfile.h"
#include "core/home.h"
#include "image.h"
#include "posture.h"
#include "util/fs.h"
#include "util/spawn.h"
#include "util/xalloc.h"

static int move_into_place(const char *stage, const char *dir, bb_error **err)
{
    static const char *const names[] = {"Containerfile", "image-id", BLUEPRINT_DIR};
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
        strv_push(&a, xasprintf("--memory=%dm", bf->ram_mib + 256));
    /* Offline sandboxes build offline, unless a package install must download. */
    if (bf->network == NET_NONE && !containerfile_fetches(bf))
        strv_add(&a, "--network=none");
    /* The base image's /etc/hosts, not one naming this host. */
    strv_add(&a, "--no-hosts");
    strv_add(&a, "-f");
    strv_add(&a, s->containerfile);
    strv_add(&a, "-t");
    strv_add(&a, s->tag);
    strv_push(&a, xasprintf("--iidfile=%s", s->iidfile));
    strv_add(&a, s->context);
    *ret = a;
}

int image_build(const char *root, const char *name, const bluefile *bf, bb_error **err)
{
    if (!program_on_path("podman"))
        return bb_fail(err, ENOENT,
                       "podman is not installed; install it (Debian: apt-get install podman)");
    _cleanup_free_ char *dir = home_path_of(root, HP_SANDBOX, name);
    _cleanup_free_ char *tmpl = xasprintf("%s/.build-XXXXXX", dir);
    if (!mkdtemp(tmpl))
        return bb_fail_errno(err, errno, "cannot create a build directory in %s", dir);
    _cleanup_containerfile_ containerfile cf = {0};
    containerfile_render(bf, &cf);
    int r = containerfile_write(&cf, tmpl, err);
    if (r == 0) {
        _cleanup_free_ char *file = path_join(tmpl, "Containerfile");
        _cleanup_free_ char *iid = path_join(tmpl, "image-id");
        _cleanup_free_ char *ref = image_ref(name);
        build_spec spec = {.containerfile = file,
                           .context = tmpl,
                           .tag = ref,
                           .iidfile = iid,
                           .limits = limits_enforced()};
        _cleanup_strv_ strv argv = {0};
        build_argv(bf, &spec, &argv);
        int code = spawn_wait_escaped(argv.v, err);
        if (code < 0)
            r = -1;
        else if (code != 0)
            r = bb_fail(err, EIO,
                        "podman build failed (exit %d); the previous image and Containerfile "
                        "are unchanged",
                        code);
    }
    if (r == 0)
        r = move_into_place(tmpl, dir, err);
    (void)rm_rf(tmpl, NULL);
    return r;
}
