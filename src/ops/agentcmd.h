/* What run's warm path and exec share: a command given to an agent that is already running
 * (a warm-pool VM, an up VM). */
#pragma once

#include "runtime/agent_client.h"
#include "abi/msg.h"
#include "ops.h"

/* The cheap isolation check before a command goes to a running agent: the cached result,
 * re-run when the runtime changed; c->ev.checked hears which. */
int ops_check_cached(sandbox *sb, const ops_command *c, bb_error **err);
/* The hello and the session's stdio for c, under the Bluefile's timeout and TERM. */
void ops_hello(const bluefile *bf, const ops_command *c, agent_hello *ret_h, agent_io *ret_io);
/* Run the session that agent_open started, logged as c->log_as; fills ret's code, timed_out
 * and agent_err. */
int ops_session(sandbox *sb, const ops_command *c, agent_conn *conn, agent_io *io, char **argv,
                ops_run_result *ret, bb_error **err);
