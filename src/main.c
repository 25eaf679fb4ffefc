/* bluebox: one binary, several roles. Internal roles start with "__"; everything else is
 * the CLI. */
#include <string.h>
#include <unistd.h>

#include "guest/agent.h"
#include "cli/cli.h"
#include "cli/hidden.h"
#include "guest/init.h"
#include "launch/direct.h"

int main(int argc, char **argv)
{
    /* PID 1 is the uml guest init (init=/.bluebox/bluebox), unless it names an internal
     * role: a plain container runs `bluebox __probe` as its PID 1 too. */
    if (getpid() == 1 && !(argc >= 2 && strncmp(argv[1], "__", 2) == 0))
        return guest_init_main(argc, argv);
    if (argc >= 2 && strcmp(argv[1], "__complete") == 0)
        return cli_complete(argc - 2, argv + 2);
    if (argc >= 2 && strcmp(argv[1], "__probe") == 0)
        return probe_main();
    if (argc >= 2 && strcmp(argv[1], "__agent") == 0)
        return agent_main(argc - 1, argv + 1);
    if (argc >= 2 && strcmp(argv[1], "__reown") == 0)
        return reown_main(argc - 1, argv + 1);
    if (argc >= 2 && strcmp(argv[1], "__tend") == 0)
        return tend_main(argc - 1, argv + 1);
    if (argc >= 2 && strcmp(argv[1], "__direct") == 0)
        return direct_main(argc - 1, argv + 1);
    if (argc >= 2 && strcmp(argv[1], "__oci") == 0)
        return oci_main(argc - 1, argv + 1);
    if (argc >= 2 && strcmp(argv[1], "__step") == 0)
        return step_main(argc - 1, argv + 1);
    if (argc >= 2 && strcmp(argv[1], "__data") == 0)
        return data_main(argc - 1, argv + 1);
    return cli_main(argc, argv);
}
