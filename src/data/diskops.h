/* The /data operations of a sandbox whose /data is a disk image (data_limit). The host never
 * reads that file system, so snapshot, restore and data import run these inside the guest,
 * on the guest's own /data, as the `__data` role of the guest's bluebox; data export and
 * snapshot's archive come back to the host as a tar stream that the host reads with safetar
 * only. See dataop.c for the table that names them. */
#pragma once

#include "datajob.h"
#include "tally.h"
#include "util/err.h"

/* pack <dir> <compression>: an archive of dir on stdout (what snapshot writes). */
int op_pack(const data_job *j, data_tally *t, bb_error **err);
/* unpack <dir> <archive|-> <merge|replace>: extract the archive (- is stdin) into a staging
 * directory inside dir, then move it in: replace removes what dir held first (restore),
 * merge copies over it (import). An archive that is refused leaves dir as it was. */
int op_unpack(const data_job *j, data_tally *t, bb_error **err);
/* extract <archive> <dir>: extract into dir, an empty directory (data export on the host). */
int op_extract(const data_job *j, data_tally *t, bb_error **err);
