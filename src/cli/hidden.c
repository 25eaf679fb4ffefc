/* The hidden sub-commands: thin mains over the library's work, each printing its own
 * result or error (the host that ran it reads both). */
#include "hidden.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "abi/abi.h"
#include "data/dataop.h"
#include "runtime/buildvm.h"
#include "backends/probe.h"
#include "util/fs.h"
#include "util/macro.h"

int probe_main(void)
{
    kernel_id k;
    bb_error *err = NULL;
    if (kernel_id_self(&k, &err) < 0) {
        fprintf(stderr, "bluebox __probe: %s\n", err->msg);
        bb_error_free(err);
        return 1;
    }
    printf("%s\n%s\n", k.release, k.boot_id);
    return fflush(stdout) == 0 ? 0 : 1;
}

int reown_main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: bluebox __reown <uid> <gid> <path>\n");
        return 2;
    }
    bb_error *err = NULL;
    if (chown_tree(argv[3], (uid_t)strtoul(argv[1], NULL, 10), (gid_t)strtoul(argv[2], NULL, 10),
                   &err) < 0) {
        fprintf(stderr, "bluebox __reown: %s\n", err->msg);
        bb_error_free(err);
        return 1;
    }
    return 0;
}

int data_main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bluebox __data <op> [--owner=U:G] <args…>\n");
        return 2;
    }
    data_job j = {.op = argv[1]};
    int i = 2;
    if (i < argc && strncmp(argv[i], "--owner=", 8) == 0) {
        unsigned u, g;
        if (sscanf(argv[i] + 8, "%u:%u", &u, &g) != 2) {
            fprintf(stderr, "bad owner %s\n", argv[i]);
            return 2;
        }
        j.chown = true;
        j.uid = (uid_t)u;
        j.gid = (gid_t)g;
        i++;
    }
    for (int k = 0; k < 3 && i < argc; k++)
        j.arg[k] = argv[i++];
    data_tally t;
    bb_error *err = NULL;
    _cleanup_free_ char *text = NULL;
    j.text = &text;
    if (data_job_run(&j, false, NULL, &t, &err) < 0) {
        fprintf(stderr, "%s\n", err->msg);
        bb_error_free(err);
        return 1;
    }
    if (streq(j.op, "pack")) /* stdout was the archive */
        return 0;
    if (text)
        fputs(text, stdout);
    _cleanup_free_ char *line = tally_format(&t);
    printf("%s\n", line);
    return 0;
}

static int hidden_fail(const char *role, bb_error *err)
{
    fprintf(stderr, "bluebox %s: %s\n", role, err->msg);
    bb_error_free(err);
    return ABI_EXIT_SETUP;
}

int oci_main(int argc, char **argv)
{
    bb_error *err = NULL;
    buildvm_oci(argc, argv, &err);
    return hidden_fail("__oci", err);
}

int step_main(int argc, char **argv)
{
    bb_error *err = NULL;
    buildvm_step(argc, argv, &err);
    return hidden_fail("__step", err);
}
