/* A stand-in for the egress proxy's per-connection child, to drive secrets_relay() over real
 * sockets (tests/integration/test_secrets.py): it loads the secrets as bluebox-vmm does,
 * starts the TLS broker with the given upstream trust, writes the sandbox CA's certificate to
 * a file, then for each of N connections on 127.0.0.1 (port printed on stdout): reads the
 * first bytes, connects to the upstream port and relays them as `host`, and prints the
 * connection's stats as one JSON line. Never installed. `auto` decides per connection as the
 * egress proxy does: TLS when the first bytes are a TLS handshake record, plain otherwise.
 *
 * usage: tlsbroker_driver SECRETS.json TRUST.pem CA_OUT.pem UPSTREAM_PORT tls|plain|auto N
 *        HOST... */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net/secrets.h"
#include "net/tlsbroker.h"

static int die(const char *what, const char *msg)
{
    fprintf(stderr, "tlsbroker_driver: %s: %s\n", what, msg);
    return 2;
}

static int listen_local(unsigned *port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || listen(fd, 8) < 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) < 0)
        return -1;
    *port = ntohs(a.sin_port);
    return fd;
}

static int connect_local(unsigned port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) < 0)
        return -1;
    return fd;
}

int main(int argc, char **argv)
{
    if (argc < 8)
        return die("usage", "SECRETS.json TRUST.pem CA_OUT.pem PORT tls|plain N HOST...");
    int sfd = open(argv[1], O_RDONLY | O_CLOEXEC);
    if (sfd < 0)
        return die(argv[1], strerror(errno));
    secrets s = {0};
    bb_error *err = NULL;
    if (secrets_load_fd(sfd, &s, &err) < 0)
        return die("secrets", err->msg);
    const char *trust[] = {argv[2]};
    if (tlsbroker_start(&s, trust, 1, &err) < 0)
        return die("broker", err->msg);
    FILE *ca = fopen(argv[3], "we");
    if (!ca || fputs(tlsbroker_ca_pem(s.broker), ca) < 0 || fclose(ca) != 0)
        return die(argv[3], strerror(errno));
    unsigned up_port = (unsigned)atoi(argv[4]);
    const char *mode = argv[5];
    int n = atoi(argv[6]);
    unsigned port;
    int lfd = listen_local(&port);
    if (lfd < 0)
        return die("listen", strerror(errno));
    printf("%u\n", port);
    fflush(stdout);
    for (int i = 0; i < n; i++) {
        const char *host = argv[7 + i % (argc - 7)];
        int g = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (g < 0)
            return die("accept", strerror(errno));
        char pre[4096];
        ssize_t k = read(g, pre, sizeof pre);
        int u = connect_local(up_port);
        if (k <= 0 || u < 0)
            return die("first bytes or upstream", strerror(errno));
        relay_stats st;
        bool tls = strcmp(mode, "tls") == 0 || (strcmp(mode, "auto") == 0 && pre[0] == 0x16);
        int r = secrets_relay(g, pre, (size_t)k, u, host, tls, &s, &st);
        close(g);
        close(u);
        printf("{\"ret\":%d,\"host\":\"%s\",\"up\":%llu,\"down\":%llu,\"requests\":%llu,"
               "\"substituted\":%llu,\"leaks\":%llu,\"held\":%llu,\"cleartext\":%s,"
               "\"error\":\"%s\"}\n",
               r, host, (unsigned long long)st.up, (unsigned long long)st.down,
               (unsigned long long)st.requests, (unsigned long long)st.substituted,
               (unsigned long long)st.leaks, (unsigned long long)st.held,
               st.cleartext ? "true" : "false", st.error ? st.error : "");
        fflush(stdout);
    }
    tlsbroker_free(s.broker);
    secrets_clear(&s);
    return 0;
}
