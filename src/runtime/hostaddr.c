/* The host's own addresses for bluebox-vmm's network policy. See hostaddr.h. */
#include "hostaddr.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "util/xalloc.h"

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

char *host_addresses(void)
{
    _cleanup_sb_ strbuf s = {0};
    sb_puts(&s, "");
    struct ifaddrs *ifs = NULL;
    if (getifaddrs(&ifs) < 0)
        return sb_steal(&s);
    for (const struct ifaddrs *i = ifs; i; i = i->ifa_next) {
        char a[INET6_ADDRSTRLEN];
        if (i->ifa_addr && wanted(i->ifa_addr, a, sizeof a))
            sb_printf(&s, "%s%s", s.len ? "," : "", a);
    }
    freeifaddrs(ifs);
    return sb_steal(&s);
}
