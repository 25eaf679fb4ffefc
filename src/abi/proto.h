/* Agent frames: one codec for the agent's TCP channel and the uml
 * control line. A frame is 1 type byte, a big-endian u32 payload length, the payload
 * (at most FRAME_MAX bytes). The decoder sees bytes from a hostile guest: it never
 * allocates more than the bytes that actually arrived plus one bounded frame, never blocks,
 * and refuses unknown types and oversized lengths. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

#define FRAME_MAX    (1u << 20)
#define FRAME_HEADER 5

typedef enum {
    FRAME_CHALLENGE = 'C', /* JSON: epoch, index, rotate (agent → host, first on a connection) */
    FRAME_HELLO = 'H',     /* JSON: proof, next_head, argv, env, dir, timeout_seconds, tty, rows,
                              cols */
    FRAME_READY = 'R',     /* JSON: kernel */
    FRAME_GO = 'G',        /* empty */
    FRAME_STDIN = 'I',     /* bytes */
    FRAME_STDIN_EOF = 'i', /* empty */
    FRAME_STDOUT = 'O',    /* bytes */
    FRAME_STDERR = 'E',    /* bytes */
    FRAME_WINSIZE = 'W',   /* JSON: rows, cols */
    FRAME_EXIT = 'X',      /* JSON: code, timed_out, err */
    FRAME_SIGNAL = 'K',    /* JSON: signal (host → agent: Ctrl-C and friends for the group) */
    FRAME_RING = 'J',      /* uml: u32 offset, u32 length of stdin in the ring (abi/abi.h) */
    FRAME_RING_ACK = 'j',  /* uml: u32 ring bytes the guest has read (guest → host) */
} frame_type;

bool frame_type_valid(uint8_t type);

/* Write the 5-byte header for a frame of `type` with `len` payload bytes. */
void frame_header(uint8_t hdr[FRAME_HEADER], uint8_t type, uint32_t len);

/* Write one whole frame to a blocking fd (retries on EINTR and short writes). */
int frame_write(int fd, uint8_t type, const void *data, size_t len, bb_error **err);
/* Write a frame's payload to a user's stdout or stderr (or a log), waiting out EAGAIN on a
 * non-blocking fd. A reader that went away loses the rest: the session goes on to its exit
 * code. */
void payload_write(int fd, const void *data, size_t len);

/* Append one whole frame to a buffer owned by the caller (for non-blocking writers):
 * *buf is grown with xrealloc, *len and *cap updated. */
void frame_append(uint8_t **buf, size_t *len, size_t *cap, uint8_t type, const void *data,
                  size_t n);

typedef struct frame {
    uint8_t type;
    uint32_t len;
    uint8_t *data; /* owned by the decoder; valid until the next frame_decoder_* call;
                      never NULL, and data[len] is a NUL byte (JSON payloads parse as-is) */
} frame;

typedef struct frame_decoder {
    uint8_t hdr[FRAME_HEADER];
    size_t hdr_have;
    uint8_t *buf; /* payload being assembled; grows with what arrives, never to the
                     declared length up front */
    size_t have, cap;
    uint32_t want;
    bool in_payload;
    bool failed;
} frame_decoder;

void frame_decoder_init(frame_decoder *d);
void frame_decoder_done(frame_decoder *d);

/* Feed up to n bytes. Consumes bytes until one frame is complete or the input ends.
 * Returns 1 with *out filled when a frame completed (*consumed says how many input bytes
 * were used; feed the rest again), 0 when more input is needed (all n consumed), -1 on a
 * protocol error (unknown type, length > FRAME_MAX); after an error the decoder stays
 * failed. */
int frame_decoder_feed(frame_decoder *d, const uint8_t *in, size_t n, size_t *consumed, frame *out,
                       bb_error **err);

/* Blocking read of exactly one frame from fd (for simple request/response steps). Returns 1
 * with a frame, 0 on clean EOF before any byte of a frame, -1 on error or truncated frame. */
int frame_read(int fd, frame_decoder *d, frame *out, bb_error **err);
