/* bluebox-vmm's relay: agent frames between the machine's control line and our own stdio
 * (stdin → I/i, its bytes through the stdin ring once the guest has it; O/E → stdout/stderr;
 * X → our exit code), the network's fds in the same poll, the lifeline and our signals. */
#pragma once

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <termios.h>

#include "abi/proto.h"
#include "net/slirp.h"
#include "vmm/disklimit.h"
#include "vmm/machine.h"
#include "vmm/stdin_ring_writer.h"

typedef struct relay {
    int sock, sigfd;
    int log_fd; /* the console log (VMM_LOG), opened before boot */
    const machine *m;
    pid_t vm; /* the machine's process */
    bool vm_alive;
    int vm_status;
    bool stdin_open, sock_open, tty_raw;
    bool ready; /* the guest set its end of the line raw (R frame): input may flow */
    int64_t started_ms;
    const char *failure; /* why we stopped the guest ourselves */
    uint8_t *out;
    size_t out_len, out_off, out_cap;
    frame_decoder dec;
    bool have_exit;
    int exit_code;
    int64_t exit_at_ms;
    struct termios saved_tty;
    vmm_net *net; /* NULL for network: none */
    int lifeline; /* -1: none, or released to a file that owns the VM (lifeline.h) */
    const disk_limit *disk;
    stdin_ring ring; /* stdin in bulk, once the guest said it reads it */
    pollvec pv;
} relay;

/* Block the signals the relay takes through its signalfd (returned), saving the mask the
 * machine is to start with in *old. */
int relay_signals(sigset_t *old);
/* Relay until the guest is done; our exit code. `tty`: our stdin is the user's terminal, set
 * raw meanwhile. Frees what the relay holds (not the network). */
int relay_run(relay *r, bool tty);
