/* Unit tests for the guest init's USER resolver (src/guest/user.c): podman's forms, runc's
 * group rules, and image files written to hurt (long lines, missing fields, NULs, huge
 * member lists, more groups than the kernel takes). */
#include "unit.h"

#include <errno.h>
#include <string.h>

#include "guest/user.h"
#include "util/xalloc.h"

static const char PASSWD[] = "root:x:0:0:root:/root:/bin/sh\n"
                             "# a comment\n"
                             "\n"
                             "daemon:x:1:1::/usr/sbin:/usr/sbin/nologin\n"
                             "app:x:1000:1000:App:/home/app:/bin/sh\n"
                             "nohome:x:1001:100\n"
                             "broken\n"
                             "bad:x:12x:0::/:/bin/sh\n"
                             "+::::::\n"
                             "last:x:2000:2000::/home/last:/bin/sh"; /* no final newline */

static const char GROUP[] = "root:x:0:\n"
                            "users:x:100:app,nohome\n"
                            "wheel:x:10:root,app\n"
                            "app:x:1000:\n"
                            "audio:x:29:other,app\n"
                            "dup:x:10:app\n"
                            "junk\n"
                            "nogid:x::app\n"
                            "big:x:4294967295:app\n"
                            "staff:x:50:appx,xapp,ap\n";

static guest_user resolve_ok(const char *user)
{
    guest_user u;
    bb_error *e = NULL;
    int r = user_resolve(user, PASSWD, strlen(PASSWD), GROUP, strlen(GROUP), &u, &e);
    if (r < 0)
        fail_msg("%s: %s", user, e->msg);
    return u;
}

static char *resolve_fail(const char *user, const char *pw, const char *gr)
{
    guest_user u;
    bb_error *e = NULL;
    assert_int_equal(user_resolve(user, pw, strlen(pw), gr, strlen(gr), &u, &e), -1);
    assert_non_null(e);
    char *msg = xstrdup(e->msg);
    bb_error_free(e);
    return msg;
}

static void check_groups(const guest_user *u, const gid_t *want, size_t n)
{
    assert_int_equal(u->n_groups, n);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(u->groups[i], want[i]);
}

static void by_name(void **s)
{
    (void)s;
    guest_user u = resolve_ok("app");
    assert_int_equal(u.uid, 1000);
    assert_int_equal(u.gid, 1000);
    assert_string_equal(u.home, "/home/app");
    /* primary first, then every group listing "app" (sorted, 10 once, not "staff") */
    check_groups(&u, (const gid_t[]){1000, 10, 29, 100}, 4);
    user_clear(&u);
    u = resolve_ok("last");
    assert_int_equal(u.uid, 2000);
    assert_string_equal(u.home, "/home/last");
    check_groups(&u, (const gid_t[]){2000}, 1);
    user_clear(&u);
    u = resolve_ok("nohome");
    assert_string_equal(u.home, "/");
    check_groups(&u, (const gid_t[]){100}, 1); /* users is its primary group already */
    user_clear(&u);
}

static void by_uid(void **s)
{
    (void)s;
    guest_user u = resolve_ok("1000");
    assert_int_equal(u.uid, 1000);
    assert_int_equal(u.gid, 1000);
    check_groups(&u, (const gid_t[]){1000, 10, 29, 100}, 4);
    user_clear(&u);
    /* no entry: a numeric uid needs none; group 0 and home / as runc */
    u = resolve_ok("4242");
    assert_int_equal(u.uid, 4242);
    assert_int_equal(u.gid, 0);
    assert_string_equal(u.home, "/");
    check_groups(&u, (const gid_t[]){0}, 1);
    user_clear(&u);
    u = resolve_ok("0");
    assert_int_equal(u.uid, 0);
    assert_string_equal(u.home, "/root");
    user_clear(&u);
}

static void with_group(void **s)
{
    (void)s;
    /* an explicit group replaces the supplementary ones */
    guest_user u = resolve_ok("app:audio");
    assert_int_equal(u.uid, 1000);
    assert_int_equal(u.gid, 29);
    check_groups(&u, (const gid_t[]){29}, 1);
    user_clear(&u);
    u = resolve_ok("1000:1000");
    assert_int_equal(u.uid, 1000);
    check_groups(&u, (const gid_t[]){1000}, 1);
    user_clear(&u);
    u = resolve_ok("4242:777"); /* neither has an entry */
    assert_int_equal(u.uid, 4242);
    check_groups(&u, (const gid_t[]){777}, 1);
    user_clear(&u);
    u = resolve_ok("app:wheel");
    assert_int_equal(u.gid, 10);
    user_clear(&u);
}

static void refusals(void **s)
{
    (void)s;
    char *m = resolve_fail("nosuch", PASSWD, GROUP);
    assert_non_null(strstr(m, "\"nosuch\""));
    assert_non_null(strstr(m, "/etc/passwd"));
    free(m);
    m = resolve_fail("app:nosuch", PASSWD, GROUP);
    assert_non_null(strstr(m, "/etc/group"));
    free(m);
    /* lines that do not parse never match: no "broken" user with uid 0, as runc would make */
    free(resolve_fail("broken", PASSWD, GROUP));
    free(resolve_fail("bad", PASSWD, GROUP));
    free(resolve_fail("app:junk", PASSWD, GROUP));
    free(resolve_fail("app:nogid", PASSWD, GROUP));
    free(resolve_fail("app:big", PASSWD, GROUP)); /* (gid_t)-1 is never an id */
}

static void malformed_user(void **s)
{
    (void)s;
    static const char *const bad[] = {":",          "app:",      ":100", "a:b:c",
                                      "4294967295", "app\nroot", "-1"};
    for (size_t i = 0; i < ELEMENTSOF(bad); i++)
        free(resolve_fail(bad[i], PASSWD, GROUP));
    /* no files at all (a scratch image): numbers still work, names do not */
    guest_user u;
    assert_int_equal(user_resolve("5:6", "", 0, "", 0, &u, NULL), 0);
    assert_int_equal(u.uid, 5);
    check_groups(&u, (const gid_t[]){6}, 1);
    user_clear(&u);
    free(resolve_fail("app", "", ""));
}

static void hostile_files(void **s)
{
    (void)s;
    /* A NUL hides nothing: the line is skipped, the next one still found. */
    static const char nul_pw[] = "evil:x:0:0::/:/bin/sh\0app:x:9:9::/:/x\napp:x:7:7::/h:/x\n";
    guest_user u;
    assert_int_equal(user_resolve("app", nul_pw, sizeof nul_pw - 1, "", 0, &u, NULL), 0);
    assert_int_equal(u.uid, 7);
    user_clear(&u);
    /* A line of 8 MiB before the entry, and a group listing a million members. */
    strbuf pw = {0}, gr = {0};
    for (size_t i = 0; i < (8u << 20); i++)
        sb_putc(&pw, 'a');
    sb_puts(&pw, ":x:1:1::/:/x\nworker:x:3000:3000::/w:/x\n");
    sb_puts(&gr, "crowd:x:42:");
    for (unsigned i = 0; i < 1000000; i++)
        sb_printf(&gr, "u%u,", i);
    sb_puts(&gr, "worker\n");
    assert_int_equal(user_resolve("worker", pw.s, pw.len, gr.s, gr.len, &u, NULL), 0);
    assert_int_equal(u.uid, 3000);
    check_groups(&u, (const gid_t[]){3000, 42}, 2);
    user_clear(&u);
    /* More groups than the kernel allows: refused, with a reason. */
    sb_freep(&gr);
    gr = (strbuf){0};
    for (unsigned i = 0; i <= USER_GROUPS_MAX; i++)
        sb_printf(&gr, "g%u:x:%u:worker\n", i, 10000 + i);
    char *m = resolve_fail("worker", pw.s, gr.s);
    assert_non_null(strstr(m, "more than 65536 groups"));
    free(m);
    /* Exactly the most it may have, duplicates folded: accepted. */
    sb_freep(&gr);
    gr = (strbuf){0};
    for (unsigned i = 0; i < USER_GROUPS_MAX - 1; i++)
        sb_printf(&gr, "g%u:x:%u:worker\n", i, 10000 + i % 1000);
    assert_int_equal(user_resolve("worker", pw.s, pw.len, gr.s, gr.len, &u, NULL), 0);
    assert_int_equal(u.n_groups, 1001);
    user_clear(&u);
    sb_freep(&pw);
    sb_freep(&gr);
}

static void apply_keeps_ids_without_user(void **s)
{
    (void)s;
    launch_spec spec = {.uid = 5, .gid = 6, .user = xstrdup("")};
    assert_int_equal(user_apply(&spec, NULL), 0);
    assert_int_equal(spec.uid, 5);
    assert_int_equal(spec.gid, 6);
    spec_clear(&spec);
}

static void shell_entry(void **s)
{
    (void)s;
    const char *pw = "root:x:0:0:root:/root:/bin/bash\n"
                     "short:x:7:7\n"
                     "noshell:x:8:8::/home/n:\n"
                     "# comment:x:9:9::/:/bin/zsh\n"
                     "agent:x:1000:1000::/home/agent:/bin/sh\n"
                     "dup:x:1000:1000::/:/bin/fish\n";
    size_t n = strlen(pw);
    char *sh = user_shell_entry(pw, n, 0);
    assert_string_equal(sh, "/bin/bash");
    free(sh);
    sh = user_shell_entry(pw, n, 1000); /* the first entry with the uid, as pw_find */
    assert_string_equal(sh, "/bin/sh");
    free(sh);
    assert_null(user_shell_entry(pw, n, 7)); /* too few fields */
    assert_null(user_shell_entry(pw, n, 8)); /* empty shell */
    assert_null(user_shell_entry(pw, n, 9)); /* commented out */
    assert_null(user_shell_entry(pw, n, 4242));
    assert_null(user_shell_entry("", 0, 0));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(by_name),
        cmocka_unit_test(by_uid),
        cmocka_unit_test(with_group),
        cmocka_unit_test(refusals),
        cmocka_unit_test(malformed_user),
        cmocka_unit_test(hostile_files),
        cmocka_unit_test(apply_keeps_ids_without_user),
        cmocka_unit_test(shell_entry),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
