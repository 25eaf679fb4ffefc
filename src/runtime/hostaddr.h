/* The host's own addresses, which a bridge guest must not reach (src/vmm/netpolicy.h). */
#pragma once

/* Every address of the host's interfaces but loopback and IPv6 link-local (refused as whole
 * ranges anyway), comma-separated, for ABI_ENV_NET_DENY; "" when there are none. */
char *host_addresses(void);
