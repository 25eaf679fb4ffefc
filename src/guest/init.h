/* The uml guest init: bluebox as PID 1 in a UML guest. */
#pragma once

/* Set up the guest, run the launch spec's command with its stdio relayed over the control
 * serial line as agent frames, report its exit code, power off. Never returns. */
int guest_init_main(int argc, char **argv);
