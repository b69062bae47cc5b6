/* Copies the file named by the first argument to the second (paths relative to the current
 * directory, which the runner maps with --dir), then reads the copy back and prints its size
 * and an FNV-1a checksum. Errors print the negative errno and exit 1. */
#include "mini.h"
#define AT_FDCWD (-100)
int main(int argc, char **argv) {
    if (argc < 3) { out_str("usage: filecopy FROM TO\n"); return 2; }
    int from = sys_openat(AT_FDCWD, argv[1], 0, 0);
    if (from < 0) { out_str("open source: "); out_i64(from); out_char('\n'); return 1; }
    int to = sys_openat(AT_FDCWD, argv[2], 01 | 0100 | 01000, 0644);
    if (to < 0) { out_str("open target: "); out_i64(to); out_char('\n'); return 1; }
    static u8 buf[1000];
    u64 total = 0;
    for (;;) {
        ssize_t got = sys_read(from, buf, sizeof buf);
        if (got < 0) { out_str("read: "); out_i64(got); out_char('\n'); return 1; }
        if (got == 0) break;
        for (ssize_t done = 0; done < got;) {
            ssize_t w = sys_write(to, buf + done, got - done);
            if (w <= 0) { out_str("write: "); out_i64(w); out_char('\n'); return 1; }
            done += w;
        }
        total += got;
    }
    sys_close(from);
    sys_close(to);
    int again = sys_openat(AT_FDCWD, argv[2], 0, 0);
    size_t n;
    u8 *data = read_all(again, &n);
    u64 h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) h = (h ^ data[i]) * 1099511628211ULL;
    out_str("copied "); out_u64(total); out_str(" bytes; copy has "); out_u64(n); out_str(" bytes, checksum ");
    out_hex(h, 16); out_char('\n');
    /* A file that is not there: the error number comes back negative. */
    out_str("missing: "); out_i64(sys_openat(AT_FDCWD, "no-such-file", 0, 0)); out_char('\n');
    return 0;
}
