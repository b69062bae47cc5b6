#include "mini.h"

/* System call numbers: RISC-V's (asm-generic) and, for the native-x86 baseline of the
 * throughput script, x86-64's. */
#if defined(__riscv)
enum { SYS_READ = 63, SYS_WRITE = 64, SYS_OPENAT = 56, SYS_CLOSE = 57, SYS_EXIT_GROUP = 94, SYS_BRK = 214 };
long sys_call(long n, long a0, long a1, long a2, long a3) {
    register long r0 __asm__("a0") = a0;
    register long r1 __asm__("a1") = a1;
    register long r2 __asm__("a2") = a2;
    register long r3 __asm__("a3") = a3;
    register long r7 __asm__("a7") = n;
    __asm__ volatile("ecall" : "+r"(r0) : "r"(r1), "r"(r2), "r"(r3), "r"(r7) : "memory");
    return r0;
}
#elif defined(__x86_64__)
enum { SYS_READ = 0, SYS_WRITE = 1, SYS_OPENAT = 257, SYS_CLOSE = 3, SYS_EXIT_GROUP = 231, SYS_BRK = 12 };
long sys_call(long n, long a0, long a1, long a2, long a3) {
    long r;
    register long r10 __asm__("r10") = a3;
    __asm__ volatile("syscall" : "=a"(r) : "a"(n), "D"(a0), "S"(a1), "d"(a2), "r"(r10) : "rcx", "r11", "memory");
    return r;
}
#endif
ssize_t sys_read(int fd, void *buf, size_t len) { return sys_call(SYS_READ, fd, (long)buf, len, 0); }
ssize_t sys_write(int fd, const void *buf, size_t len) { return sys_call(SYS_WRITE, fd, (long)buf, len, 0); }
int sys_openat(int dirfd, const char *path, int flags, int mode) {
    return sys_call(SYS_OPENAT, dirfd, (long)path, flags, mode);
}
int sys_close(int fd) { return sys_call(SYS_CLOSE, fd, 0, 0, 0); }
void sys_exit(int code) {
    out_flush();
    sys_call(SYS_EXIT_GROUP, code, 0, 0, 0);
    for (;;) {}
}

void *memcpy(void *d, const void *s, size_t n) {
    u8 *a = d;
    const u8 *b = s;
    while (n--) *a++ = *b++;
    return d;
}
void *memmove(void *d, const void *s, size_t n) {
    u8 *a = d;
    const u8 *b = s;
    if (a < b) { while (n--) *a++ = *b++; }
    else { while (n--) a[n] = b[n]; }
    return d;
}
void *memset(void *d, int c, size_t n) {
    u8 *a = d;
    while (n--) *a++ = (u8)c;
    return d;
}
int memcmp(const void *a, const void *b, size_t n) {
    const u8 *x = a, *y = b;
    for (; n; n--, x++, y++) if (*x != *y) return *x - *y;
    return 0;
}
size_t strlen(const char *s) { size_t n = 0; while (s[n]) n++; return n; }
int strcmp(const char *a, const char *b) {
    while (*a && *a == *b) { a++; b++; }
    return (u8)*a - (u8)*b;
}

static u8 *heap_end;
void *malloc(size_t n) {
    if (!heap_end) heap_end = (u8 *)sys_call(SYS_BRK, 0, 0, 0, 0);
    u8 *p = (u8 *)(((u64)heap_end + 15) & ~15UL);
    u8 *end = p + n;
    if ((u8 *)sys_call(SYS_BRK, (long)end, 0, 0, 0) != end) return 0;
    heap_end = end;
    return p;
}
void free(void *p) { (void)p; }

u8 *read_all(int fd, size_t *len) {
    size_t cap = 4096, n = 0;
    u8 *buf = malloc(cap);
    for (;;) {
        if (n == cap) {
            u8 *bigger = malloc(cap * 2);
            memcpy(bigger, buf, n);
            buf = bigger;
            cap *= 2;
        }
        ssize_t got = sys_read(fd, buf + n, cap - n);
        if (got <= 0) break;
        n += got;
    }
    *len = n;
    return buf;
}

static char obuf[4096];
static size_t olen;
void out_flush(void) {
    size_t done = 0;
    while (done < olen) {
        ssize_t w = sys_write(1, obuf + done, olen - done);
        if (w <= 0) break;
        done += w;
    }
    olen = 0;
}
void out_bytes(const void *p, size_t n) {
    const char *s = p;
    while (n--) {
        if (olen == sizeof obuf) out_flush();
        obuf[olen++] = *s++;
    }
}
void out_char(char c) { out_bytes(&c, 1); }
void out_str(const char *s) { out_bytes(s, strlen(s)); }
void out_u64(u64 v) {
    char d[24];
    int i = 24;
    do { d[--i] = '0' + v % 10; v /= 10; } while (v);
    out_bytes(d + i, 24 - i);
}
void out_i64(i64 v) {
    if (v < 0) { out_char('-'); out_u64(-(u64)v); } else out_u64(v);
}
void out_hex(u64 v, int digits) {
    for (int i = digits - 1; i >= 0; i--) out_char("0123456789abcdef"[(v >> (4 * i)) & 15]);
}
long parse_long(const char *s) {
    long sign = 1, v = 0;
    if (*s == '-') { sign = -1; s++; }
    while (*s >= '0' && *s <= '9') v = v * 10 + (*s++ - '0');
    return sign * v;
}
