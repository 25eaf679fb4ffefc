/* The host's own addresses for bluebox-vmm's network policy. See hostaddr.h. */
#include "hostaddr.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdint.h>
#include <sys/socket.h>

#include "xalloc.h"

static bool wanted(const struct sockaddr *sa, char *out, size_t cap)
{
    if (sa->sa_family == AF_INET) {
        const struct in_addr *a = &((const struct sockaddr_in *)(const void *)sa)->sin_addr;
        return (ntohl(a->s_addr) >> 24) != 127 && inet_ntop(AF_INET, a, out, (socklen_t)cap);
    }
    if (sa->sa_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr;
        return !IN6_IS_ADDR_LOOPBACK(a) && !IN6_IS_ADDR_LINKLOCAL(a) &&
               inet_ntop(AF_INET6, a, out, (socklen_t)cap);
    }
    return false;
}

/* The netmask's prefix length; the subnet is refused only when no wider than /16 (IPv4) or
 * /48 (IPv6), else the address alone: a host whose interface claims half the internet must
 * not take the internet away. */
static unsigned subnet_bits(const struct sockaddr *mask, unsigned max)
{
    if (!mask || mask->sa_family != (max == 32 ? AF_INET : AF_INET6))
        return max;
    const uint8_t *m =
        max == 32 ? (const uint8_t *)&((const struct sockaddr_in *)(const void *)mask)->sin_addr
                  : (const uint8_t *)&((const struct sockaddr_in6 *)(const void *)mask)->sin6_addr;
    unsigned bits = 0;
    for (unsigned i = 0; i < max / 8; i++)
        bits += (unsigned)__builtin_popcount(m[i]);
    return bits < (max == 32 ? 16u : 48u) ? max : bits;
}

char *host_addresses(void)
{
    _cleanup_sb_ strbuf s = {0};
    sb_puts(&s, "");
    struct ifaddrs *ifs = NULL;
    if (getifaddrs(&ifs) < 0)
        return sb_steal(&s);
    for (const struct ifaddrs *i = ifs; i; i = i->ifa_next) {
        char a[INET6_ADDRSTRLEN];
        if (!i->ifa_addr || !wanted(i->ifa_addr, a, sizeof a))
            continue;
        unsigned max = i->ifa_addr->sa_family == AF_INET ? 32 : 128;
        sb_printf(&s, "%s%s", s.len ? "," : "", a);
        unsigned bits = subnet_bits(i->ifa_netmask, max);
        if (bits < max) /* and its subnet: the host's LAN */
            sb_printf(&s, ",%s/%u", a, bits);
    }
    freeifaddrs(ifs);
    return sb_steal(&s);
}
