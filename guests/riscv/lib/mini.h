/* A minimal libc for the freestanding RISC-V guests: Linux system calls, strings, numbers,
 * a bump allocator on brk. Small on purpose: every function here becomes kernel code. */
#ifndef MINI_H
#define MINI_H
typedef unsigned long size_t;
typedef long ssize_t;
typedef unsigned char u8;
typedef unsigned int u32;
typedef unsigned long u64;
typedef long i64;

long sys_call(long n, long a0, long a1, long a2, long a3);
ssize_t sys_read(int fd, void *buf, size_t len);
ssize_t sys_write(int fd, const void *buf, size_t len);
int sys_openat(int dirfd, const char *path, int flags, int mode);
int sys_close(int fd);
void sys_exit(int code) __attribute__((noreturn));

void *memcpy(void *d, const void *s, size_t n);
void *memmove(void *d, const void *s, size_t n);
void *memset(void *d, int c, size_t n);
int memcmp(const void *a, const void *b, size_t n);
size_t strlen(const char *s);
int strcmp(const char *a, const char *b);

void *malloc(size_t n);
void free(void *p);

/* Reads all of a descriptor into a fresh buffer; its length in *len. */
u8 *read_all(int fd, size_t *len);

/* Buffered standard output. */
void out_bytes(const void *p, size_t n);
void out_str(const char *s);
void out_u64(u64 v);
void out_i64(i64 v);
void out_hex(u64 v, int digits);
void out_char(char c);
void out_flush(void);
long parse_long(const char *s);
#endif
