/* Shell-safe rendering of a sandbox's settings. */
#include "envout.h"

#include "util/xalloc.h"

void shell_quote(strbuf *b, const char *s)
{
    sb_putc(b, '\'');
    for (; *s; s++) {
        if (*s == '\'')
            sb_puts(b, "'\\''");
        else
            sb_putc(b, *s);
    }
    sb_putc(b, '\'');
}

static void put(strbuf *b, const char *key, const char *value)
{
    sb_printf(b, "BLUEBOX_%s=", key);
    shell_quote(b, value);
    sb_putc(b, '\n');
}

static void put_int(strbuf *b, const char *key, int value)
{
    _cleanup_free_ char *s = xasprintf("%d", value);
    put(b, key, s);
}

char *envout_render(const char *name, const char *image, const char *data_dir, const bluefile *bf,
                    const envout_backend *be)
{
    _cleanup_sb_ strbuf b = {0};
    put(&b, "NAME", name);
    put(&b, "IMAGE", image);
    put(&b, "DATA", data_dir);
    put(&b, "BASE", bf->base);
    put_int(&b, "CPUS", bf->cpus);
    put_int(&b, "GUEST_CPUS", be->guest_cpus);
    put_int(&b, "RAM_MIB", bf->ram_mib);
    put(&b, "NETWORK", bf_network_name(bf->network));
    if (be->network)
        put(&b, "NETWORK_REACH", be->network);
    if (bf->has_allow) { /* the normalized list, and the secrets by name: never a value */
        _cleanup_sb_ strbuf list = {0}, names = {0};
        sb_puts(&list, "");
        sb_puts(&names, "");
        for (size_t i = 0; i < bf->allow.n; i++)
            sb_printf(&list, "%s%s", i ? "," : "", bf->allow.v[i]);
        for (size_t i = 0; i < bf->n_secrets; i++)
            sb_printf(&names, "%s%s", i ? "," : "", bf->secrets[i].name);
        put(&b, "ALLOW", list.s);
        put(&b, "SECRETS", names.s);
    }
    put(&b, "PASST", bf->passt ? "true" : "false");
    put(&b, "READONLY", bf->readonly ? "true" : "false");
    put_int(&b, "TIMEOUT_SECONDS", bf->timeout_seconds);
    put(&b, "ISOLATION", bf_isolation_name(bf->isolation));
    /* The one that boots, and why: a shell comment, so eval of the output still assigns only
     * BLUEBOX_* variables. */
    sb_puts(&b, "BLUEBOX_BACKEND=");
    shell_quote(&b, be->name);
    if (be->from_env)
        sb_printf(&b, "  # from BLUEBOX_BACKEND in the environment (the Bluefile says %s)\n",
                  bf_backend_name(bf->backend));
    else
        sb_puts(&b, "  # from the Bluefile\n");
    put_int(&b, "WARM", bf->warm);
    for (size_t i = 0; i < bf->n_env; i++) {
        _cleanup_free_ char *k = xasprintf("ENV_%s", bf->env[i].key);
        put(&b, k, bf->env[i].value);
    }
    return sb_steal(&b);
}
