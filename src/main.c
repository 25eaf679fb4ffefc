/* bluebox: one binary, several roles. Internal roles start with "__"; everything else is
 * the CLI. */
#include <string.h>

#include "cli/cli.h"

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "__complete") == 0)
        return cli_complete(argc - 2, argv + 2);
    return cli_main(argc, argv);
}
