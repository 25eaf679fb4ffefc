/* bluebox: one binary, several roles. Internal roles start with "__"; everything else is
 * the CLI. */
#include <string.h>

#include "cli/cli.h"
#include "runtime/dataown.h"
#include "runtime/probe.h"

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "__complete") == 0)
        return cli_complete(argc - 2, argv + 2);
    if (argc >= 2 && strcmp(argv[1], "__probe") == 0)
        return probe_main();
    if (argc >= 2 && strcmp(argv[1], "__reown") == 0)
        return reown_main(argc - 1, argv + 1);
    return cli_main(argc, argv);
}
