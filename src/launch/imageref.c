/* What a launch needs of a sandbox's image: its tag, its recorded ID and its USER. */
#include "imageref.h"

#include <errno.h>
#include <string.h>

#include "core/home.h"
#include "util/fs.h"
#include "util/spawn.h"
#include "util/xalloc.h"

#define IMAGE_USER_FILE "image-user"
/* Longer than any USER podman accepts; the guest's spec reader allows as much. */
#define IMAGE_USER_MAX 1024

char *image_ref_of(const char *home_id, const char *name)
{
    return xasprintf("localhost/bluebox/%s:%s", name, home_id);
}

char *image_ref(const sandbox *sb)
{
    return image_ref_of(sb->home_id, sb->name);
}

static char *recorded_id(const char *path)
{
    _cleanup_free_ char *text = NULL;
    if (read_file(path, 4096, &text, NULL, NULL) < 0)
        return NULL;
    text[strcspn(text, "\r\n")] = '\0';
    const char *id = strncmp(text, "sha256:", 7) == 0 ? text + 7 : text;
    return *id ? xstrdup(id) : NULL;
}

char *image_recorded_id(const sandbox *sb)
{
    return recorded_id(sb->image_id);
}

char *image_recorded_id_in(const char *sandbox_dir)
{
    _cleanup_free_ char *path = path_join(sandbox_dir, "image-id");
    return recorded_id(path);
}

/* podman's answer, one line: the USER as the image config has it. */
static int inspect_user(const char *ref, char **ret, bb_error **err)
{
    char *argv[] = {"podman",           "image",     "inspect", "--format",
                    "{{.Config.User}}", (char *)ref, NULL};
    _cleanup_free_ char *out = NULL;
    int r = program_on_path("podman") ? spawn_capture(argv, &out, NULL, err) : -1;
    if (r < 0 && err && !*err)
        bb_fail(err, ENOENT, "podman is not installed");
    if (r < 0)
        return bb_prefix(err, "cannot read the USER of the image %s", ref);
    if (r != 0)
        return bb_fail(err, EIO, "cannot read the USER of the image %s (podman exit %d)", ref, r);
    size_t n = strlen(out);
    while (n && (out[n - 1] == '\n' || out[n - 1] == '\r'))
        out[--n] = '\0';
    if (n > IMAGE_USER_MAX || strpbrk(out, "\n\r"))
        return bb_fail(err, EINVAL,
                       "the image %s has a USER that is not one line of at most %d "
                       "bytes; fix USER in the image and rebuild",
                       ref, IMAGE_USER_MAX);
    *ret = steal_pointer(&out);
    return 0;
}

static int record_user(const char *dir, const char *ref, char **ret, bb_error **err)
{
    _cleanup_free_ char *user = NULL;
    if (inspect_user(ref, &user, err) < 0)
        return -1;
    _cleanup_free_ char *path = path_join(dir, IMAGE_USER_FILE);
    _cleanup_free_ char *text = xasprintf("%s\n", user);
    if (write_file_atomic(path, text, strlen(text), 0644, err) < 0)
        return -1;
    if (ret)
        *ret = steal_pointer(&user);
    return 0;
}

int image_user_record(const char *dir, const char *ref, bb_error **err)
{
    return record_user(dir, ref, NULL, err);
}

int image_user(const sandbox *sb, const char *image, char **ret, bb_error **err)
{
    if (image)
        return inspect_user(image, ret, err);
    _cleanup_free_ char *path = path_join(sb->dir, IMAGE_USER_FILE);
    _cleanup_free_ char *text = NULL;
    if (read_file(path, IMAGE_USER_MAX + 2, &text, NULL, NULL) == 0) {
        text[strcspn(text, "\r\n")] = '\0';
        *ret = steal_pointer(&text);
        return 0;
    }
    /* Built before build recorded it. */
    _cleanup_free_ char *ref = image_ref(sb);
    if (record_user(sb->dir, ref, ret, err) < 0)
        return bb_prefix(err,
                         "%s was built by an older bluebox and its image's USER is not "
                         "known; rebuild it (bluebox build %s)",
                         sb->name, sb->name);
    return 0;
}
