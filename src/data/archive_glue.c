/* One libarchive internal, defined here so that a static link of the tar writer does not
 * pull in archive_write_set_format.o: that object also holds the write-any-format switch,
 * which drags in the xar writer and with it libxml2 and ICU (tens of MiB, and link errors
 * without them). libarchive's tar writers call this only for an entry type they cannot
 * store; the snapshot writer never gives them one. Same behaviour as libarchive's own. */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>

/* libarchive's ARCHIVE_ERRNO_FILE_FORMAT (private header). */
#define EFTYPE_ARCHIVE EILSEQ

void __archive_write_entry_filetype_unsupported(struct archive *a, struct archive_entry *entry,
                                                const char *format);

void __archive_write_entry_filetype_unsupported(struct archive *a, struct archive_entry *entry,
                                                const char *format)
{
    archive_set_error(a, EFTYPE_ARCHIVE, "%s: %s format cannot archive this file type",
                      archive_entry_pathname(entry), format);
}
