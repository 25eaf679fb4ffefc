/* The uml guest's /proc/cpuinfo with the topology lines every x86 Linux has. UML's own lists
 * each processor without a "core id", and procps 4.0.2 (Debian 12's ps) refuses to work
 * without one ("ps: Unable to get system boot time"). See cpuinfo.c. */
#pragma once

#include "util/err.h"

/* The kernel's cpuinfo text with a "core id" line added to every processor entry that lacks
 * one (the entry's processor number: UML has one thread per core) and every entry ended by
 * an empty line. A new string; never fails (aborts on OOM). */
char *cpuinfo_with_topology(const char *text);
/* Put that text over the guest's /proc/cpuinfo: a read-only bind of a file on a tmpfs of its
 * own, reachable only there. Run in the guest's final root, with /proc mounted. */
int cpuinfo_setup(bb_error **err);
