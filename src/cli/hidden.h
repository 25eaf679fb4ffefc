/* The hidden sub-commands main.c dispatches: roles this same binary plays when bluebox runs
 * it again somewhere else (inside a container, under `podman unshare`). Not for users. */
#pragma once

/* `__probe`: print "<release>\n<boot_id>\n" on stdout (backends/probe.h). */
int probe_main(void);
/* `__reown <uid> <gid> <path>`: chown a tree, run through `podman unshare`. */
int reown_main(int argc, char **argv);
/* `__data <op> [--owner=U:G] <args…>`: run one /data operation here (data/dataop.h); prints
 * the tally line on stdout, or the error on stderr and exits 1. */
int data_main(int argc, char **argv);
/* `__oci <conf> <runc args…>` and, in a uml build guest, `__step <caps> <command…>`
 * (runtime/buildvm.h). */
int oci_main(int argc, char **argv);
int step_main(int argc, char **argv);
/* `__tend <name>`: one pass of the warm pool's tender (runtime/pool.h), detached. */
int tend_main(int argc, char **argv);
