/* Unit tests for the guest's /proc/cpuinfo text (src/guest/cpuinfo.c): UML's entries gain the
 * "core id" procps 4.0.2 needs, entries that have one are left alone. */
#include "unit.h"

#include <stdlib.h>

#include "guest/cpuinfo.h"

/* Debian 12's UML 6.1, as the guest reads it (the host line as bluebox-uname.so leaves it). */
#define UML_ENTRY(n)                                                                               \
    "processor\t: " #n "\nvendor_id\t: User Mode Linux\nmodel name\t: UML\nmode\t\t: skas\n"       \
    "host\t\t: Linux (hidden) (hidden) (hidden) x86_64\nfpu\t\t: no\nflags\t\t:\n"                 \
    "cache_alignment\t: 64\nbogomips\t: 2564.09\n"

static void adds_core_id_to_uml_entry(void **state)
{
    (void)state;
    char *t = cpuinfo_with_topology(UML_ENTRY(0) "\n");
    assert_string_equal(t, UML_ENTRY(0) "core id\t\t: 0\n\n");
    free(t);
}

static void every_entry_and_a_missing_last_empty_line(void **state)
{
    (void)state;
    char *t = cpuinfo_with_topology(UML_ENTRY(0) "\n" UML_ENTRY(1));
    assert_string_equal(t, UML_ENTRY(0) "core id\t\t: 0\n\n" UML_ENTRY(1) "core id\t\t: 1\n\n");
    free(t);
}

static void leaves_an_entry_with_core_id(void **state)
{
    (void)state;
    const char *x86 = "processor\t: 3\nvendor_id\t: GenuineIntel\ncore id\t\t: 1\n"
                      "cpu cores\t: 2\n\n";
    char *t = cpuinfo_with_topology(x86);
    assert_string_equal(t, x86);
    free(t);
}

static void nothing_in_nothing_out(void **state)
{
    (void)state;
    char *t = cpuinfo_with_topology("");
    assert_string_equal(t, "");
    free(t);
    t = cpuinfo_with_topology("\n\nflags\t: x\n");
    assert_string_equal(t, "flags\t: x\n\n"); /* no processor line: no core id invented */
    free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(adds_core_id_to_uml_entry),
        cmocka_unit_test(every_entry_and_a_missing_last_empty_line),
        cmocka_unit_test(leaves_an_entry_with_core_id),
        cmocka_unit_test(nothing_in_nothing_out),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
