/* A VM's lifeline: a VM never outlives the bluebox that owns it.
 *
 * A pipe: bluebox-vmm inherits the read end (ABI_ENV_LIFELINE, passed by podman's and runc's
 * --preserve-fds) and the write end stays with the VM's owners only — the bluebox of a run or
 * shell (and so `serve`'s job, which is one), `up` and the pool's tender while they boot. It is
 * close-on-exec everywhere: podman, conmon, runc and the supervisor never hold it. When the
 * last owner dies, however it dies (kill -9 of its process group, the OOM killer), the VMM
 * reads EOF, stops the guest and exits at once; the container goes with its init.
 *
 * An up VM and a waiting pool VM outlive the process that booted them: their owner is a file
 * (run/<name>.json, the pool's <id>.waiting), which `down` and the pool's drain end. The booting
 * process holds the lifeline until that file names the VM, then releases it (one byte), so
 * that a boot killed half way leaves no VM. */
#pragma once

#include "util/err.h"

typedef struct {
    int hold; /* the owner's end (write), close-on-exec */
    int vm;   /* the VMM's end (read), to be placed by the spawn; close-on-exec here */
} lifeline;

#define LIFELINE_NONE ((lifeline){.hold = -1, .vm = -1})

int lifeline_open(lifeline *ret, bb_error **err);
/* The VMM's end was handed on (the spawn is done): only the owner's stays here. */
void lifeline_passed(lifeline *l);
/* Hand the VM to an owner that is no process: the VMM stops watching, then our end closes. */
void lifeline_release(lifeline *l);
/* Both ends closed: a VM still on this lifeline stops. Accepts LIFELINE_NONE. */
void lifeline_close(lifeline *l);
