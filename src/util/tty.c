/* Terminal facts. */
#include "tty.h"

#include <sys/stat.h>
#include <unistd.h>

bool stdin_is_interactive(void)
{
    struct stat st;
    return fstat(STDIN_FILENO, &st) == 0 && S_ISCHR(st.st_mode) && isatty(STDIN_FILENO);
}
