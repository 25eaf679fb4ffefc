#include "unit.h"
static void nothing(void **s) { (void)s; }
int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(nothing)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
