/* What bluebox-vmm's own files share: the fds its machine inherits, the console log, and its
 * one way to fail before the guest runs. */
#pragma once

#include "abi/abi.h"
#include "util/macro.h"

/* The guest's console log on the exec tmpfs (uml's con0, qemu's hvc0 and QEMU's stderr). */
#define VMM_LOG       ABI_MEM_DIR "/uml.log"
#define VMM_SERIAL_FD 3 /* the control line, in the machine's process */
#define VMM_NET_FD    4 /* qemu: the network's stream socket (net/slirp.h) */

/* Print "bluebox-vmm: <message>" and exit with ABI_EXIT_SETUP: a setup step failed. */
void vmm_die(const char *fmt, ...) _printf_(1, 2) _noreturn_;
