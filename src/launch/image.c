/* Image housekeeping through podman, for commands that work on files but also own the
 * sandbox's image (destroy, rename). Missing podman or a missing image is not an error.
 *
 * Everything here touches only what is this home's: the tag carries the home's id and stray
 * containers are found by both labels. An image of the old naming (one tag per name,
 * whatever the home) is adopted — given this home's tag — when it is the very image this
 * home's last build recorded in sandboxes/<name>/image-id; its old tag is never removed,
 * because two homes that built the same Bluefile share one image ID, and the other may
 * still use the old tag. */
#include "image.h"

#include <errno.h>
#include <string.h>

#include "core/home.h"
#include "direct.h"
#include "util/fs.h"
#include "util/spawn.h"
#include "util/strv.h"
#include "util/xalloc.h"

#define IMAGE_REF_FILE "image-ref"

/* Before homes had an id: one tag per sandbox name, shared by every home. */
static char *legacy_ref(const char *name)
{
    return xasprintf("localhost/bluebox/%s:latest", name);
}

static int image_exists(const char *ref)
{
    if (!program_on_path("podman"))
        return 0;
    char *argv[] = {"podman", "image", "exists", (char *)ref, NULL};
    return spawn_quiet(argv, NULL) == 0;
}

bool image_present(const char *home_id, const char *name)
{
    if (!program_on_path("podman"))
        return true;
    _cleanup_free_ char *ref = image_ref_of(home_id, name);
    return image_exists(ref);
}

/* The image ID (hex, no "sha256:") podman has for ref; NULL when there is none. */
static char *image_id_of(const char *ref)
{
    char *argv[] = {"podman", "image", "inspect", "--format", "{{.Id}}", (char *)ref, NULL};
    _cleanup_free_ char *out = NULL;
    if (!program_on_path("podman") || spawn_capture(argv, &out, NULL, NULL) != 0)
        return NULL;
    out[strcspn(out, "\r\n")] = '\0';
    const char *id = strncmp(out, "sha256:", 7) == 0 ? out + 7 : out;
    return *id ? xstrdup(id) : NULL;
}

/* Whether the old-style tag of `legacy` names the image this home built for `name`. */
static bool legacy_is_ours(const char *sandbox_dir, const char *legacy)
{
    _cleanup_free_ char *ref = legacy_ref(legacy);
    _cleanup_free_ char *want = image_recorded_id_in(sandbox_dir);
    _cleanup_free_ char *have = want ? image_id_of(ref) : NULL;
    return have && streq(have, want);
}

/* Drop one tag. rmi without -f: an image that another home tagged too, or that some
 * container still uses, only loses this tag and stays for its other users. */
static int drop_tag(const char *ref, bb_error **err)
{
    char *rmi[] = {"podman", "rmi", (char *)ref, NULL};
    if (spawn_quiet(rmi, NULL) == 0)
        return 0;
    char *untag[] = {"podman", "untag", (char *)ref, (char *)ref, NULL};
    int r = spawn_quiet(untag, err);
    if (r < 0)
        return -1;
    if (r != 0 && image_exists(ref))
        return bb_fail(err, EIO, "podman could not remove %s (exit %d)", ref, r);
    return 0;
}

static void record_ref_in(const char *sandbox_dir, const char *ref)
{
    _cleanup_free_ char *path = path_join(sandbox_dir, IMAGE_REF_FILE);
    _cleanup_free_ char *text = xasprintf("%s\n", ref);
    (void)write_file_atomic(path, text, strlen(text), 0644, NULL);
}

void image_record_ref(const sandbox *sb)
{
    _cleanup_free_ char *ref = image_ref(sb);
    record_ref_in(sb->dir, ref);
}

/* Whether image-ref says the current tag was already put in place. */
static bool ref_recorded(const sandbox *sb, const char *ref)
{
    _cleanup_free_ char *path = path_join(sb->dir, IMAGE_REF_FILE);
    _cleanup_free_ char *text = NULL;
    if (read_file(path, 4096, &text, NULL, NULL) < 0)
        return false;
    text[strcspn(text, "\r\n")] = '\0';
    return streq(text, ref);
}

int image_adopt(const sandbox *sb, bb_error **err)
{
    const char *name = sb->name;
    _cleanup_free_ char *ref = image_ref(sb);
    if (ref_recorded(sb, ref) || !program_on_path("podman"))
        return 0;
    _cleanup_free_ char *want = image_recorded_id(sb);
    if (!want)
        return 0; /* never built here: boot says so */
    if (!image_exists(ref)) {
        /* Built under the old naming, or before the home moved: the recorded image ID is
         * this home's build whatever tags it carries now. */
        char *tag[] = {"podman", "tag", want, ref, NULL};
        int r = spawn_quiet(tag, err);
        if (r < 0)
            return -1;
        if (r != 0)
            return bb_fail(err, ENOENT,
                           "%s is not built: bluebox build %s (its image is gone from podman)",
                           name, name);
    }
    record_ref_in(sb->dir, ref);
    return 0;
}

/* Containers left by a run that was killed with SIGKILL (or a crashed podman) still carry
 * the sandbox's labels; they would keep the image in use. Only this home's. */
static void containers_remove(const sandbox *sb)
{
    _cleanup_free_ char *fs = xasprintf("label=bluebox.sandbox=%s", sb->name);
    _cleanup_free_ char *fh = xasprintf("label=bluebox.home=%s", sb->home_id);
    char *ps[] = {"podman", "ps", "-aq", "--filter", fs, "--filter", fh, NULL};
    _cleanup_free_ char *ids = NULL;
    if (spawn_capture(ps, &ids, NULL, NULL) != 0 || !*ids)
        return;
    _cleanup_strv_ strv argv = {0};
    strv_add(&argv, "podman");
    strv_add(&argv, "rm");
    strv_add(&argv, "-f");
    strv_add(&argv, "-t");
    strv_add(&argv, "0");
    char *save = NULL;
    for (char *c = strtok_r(ids, "\n", &save); c; c = strtok_r(NULL, "\n", &save))
        strv_add(&argv, c);
    (void)spawn_quiet(argv.v, NULL);
}

/* Whether no tag names the image `id`, and its parent's ID (NULL at the base); false when
 * podman cannot say. */
static bool untagged(const char *id, char **ret_parent)
{
    char *argv[] = {"podman",   "image", "inspect", "--format", "{{len .RepoTags}} {{.Parent}}",
                    (char *)id, NULL};
    _cleanup_free_ char *out = NULL;
    if (spawn_capture(argv, &out, NULL, NULL) != 0)
        return false;
    out[strcspn(out, "\r\n")] = '\0';
    char *parent = strchr(out, ' ');
    if (!parent || parent == out || strncmp(out, "0 ", 2) != 0)
        return false;
    parent++;
    *ret_parent = *parent ? xstrdup(parent) : NULL;
    return true;
}

void image_prune(const char *id)
{
    if (!id || !program_on_path("podman"))
        return;
    _cleanup_free_ char *cur = xstrdup(id);
    /* Up the chain while untagged: `--layers` keeps one image per build step. rmi without -f
     * refuses an image that a container uses or that is another image's parent (a layer
     * another build shares), and so stops the walk. */
    for (int depth = 0; cur && depth < 512; depth++) {
        char *parent = NULL;
        if (!untagged(cur, &parent))
            return;
        char *rmi[] = {"podman", "rmi", cur, NULL};
        if (spawn_quiet(rmi, NULL) != 0) {
            free(parent);
            return;
        }
        free(cur);
        cur = parent;
    }
}

int image_remove(const sandbox *sb, bb_error **err)
{
    if (program_on_path("podman"))
        containers_remove(sb);
    direct_forget(sb); /* its prepared direct launches */
    _cleanup_free_ char *ref = image_ref(sb);
    _cleanup_free_ char *id = image_recorded_id(sb);
    if (image_exists(ref) && drop_tag(ref, err) < 0)
        return -1;
    image_prune(id); /* what the tag's rmi left: its build layers, unless shared or tagged */
    return 0;
}

/* Tag `from` as `to`; with `untag`, drop `from` too. */
static int retag(const char *from, const char *to, bool untag, bb_error **err)
{
    char *tag[] = {"podman", "tag", (char *)from, (char *)to, NULL};
    /* untag with no tag named would drop every tag of the image, the new one too */
    char *untag_argv[] = {"podman", "untag", (char *)from, (char *)from, NULL};
    int r = spawn_quiet(tag, err);
    if (r == 0 && untag)
        r = spawn_quiet(untag_argv, err);
    if (r < 0)
        return -1;
    if (r != 0)
        return bb_fail(err, EIO, "podman could not retag %s as %s (exit %d)", from, to, r);
    return 0;
}

int image_rename(const sandbox *old_sb, const char *new, bb_error **err)
{
    const char *old = old_sb->name;
    direct_forget(old_sb);
    _cleanup_free_ char *from = image_ref(old_sb), *to = image_ref_of(old_sb->home_id, new);
    _cleanup_free_ char *new_dir = home_path_of(old_sb->root, HP_SANDBOX, new);
    if (image_exists(from)) {
        if (retag(from, to, true, err) < 0)
            return -1;
    } else {
        /* Old naming: the sandbox has moved to `new` already, its image-id with it. The old
         * tag stays (see the top of this file). */
        _cleanup_free_ char *legacy = legacy_ref(old);
        if (legacy_is_ours(new_dir, old) && retag(legacy, to, false, err) < 0)
            return -1;
    }
    if (image_exists(to))
        record_ref_in(new_dir, to);
    return 0;
}
