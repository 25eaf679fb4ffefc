/* The host's own addresses, which a bridge guest must not reach (src/net/netpolicy.h). */
#pragma once

/* Every address of the host's interfaces but loopback and IPv6 link-local (refused as whole
 * ranges anyway), each followed by its subnet as a CIDR (the host's LAN, whatever its range)
 * when that is no wider than /16 or /48; comma-separated, for ABI_ENV_NET_DENY; "" when there
 * are none. */
char *host_addresses(void);
