/* A tiny dynamic program linked like bluebox-vmm (interpreter /.bluebox/vmm/ld.so, rpath
 * /.bluebox/vmm), with one library beyond libc, to build and run a VMM bundle in tests. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    double x = argc > 1 ? strtod(argv[1], NULL) : 0.0;
    printf("hello from the bundle: cos(%g) = %g\n", x, cos(x));
    return 0;
}
