/* Anonymous mappings given back and taken again: 48 rounds of mmap, touch, munmap of about
 * 8 MiB each (384 MiB in all, more than a VM of 32 MiB holds unless munmap frees), a tail
 * trimmed off a mapping, and every fresh mapping reading as zeros. */
#include "mini.h"

#define SYS_MMAP 222
#define SYS_MUNMAP 215

/* mmap takes six arguments (the mini libc's sys_call passes four): fd -1, offset 0. */
static long mmap6(long len) {
    register long a0 __asm__("a0") = 0;
    register long a1 __asm__("a1") = len;
    register long a2 __asm__("a2") = 3;    /* read, write */
    register long a3 __asm__("a3") = 0x22; /* private, anonymous */
    register long a4 __asm__("a4") = -1;
    register long a5 __asm__("a5") = 0;
    register long a7 __asm__("a7") = SYS_MMAP;
    __asm__ volatile("ecall" : "+r"(a0) : "r"(a1), "r"(a2), "r"(a3), "r"(a4), "r"(a5), "r"(a7) : "memory");
    return a0;
}

static u8 *map(size_t len) {
    long p = mmap6((long)len);
    if (p < 0 && p > -4096) {
        out_str("mmap failed: ");
        out_i64(p);
        out_char('\n');
        sys_exit(1);
    }
    return (u8 *)p;
}

int main(void) {
    u64 sum = 0;
    for (u64 round = 0; round < 48; round++) {
        size_t len = (8ul << 20) + round * 4096;
        u8 *p = map(len);
        for (size_t i = 0; i < len; i += 4096)
            if (p[i] || p[len - 1]) {
                out_str("a fresh mapping is not zero\n");
                return 2;
            }
        for (size_t i = 0; i < len; i += 4096) p[i] = (u8)(round * 7 + i / 4096);
        p[len - 1] = 1;
        for (size_t i = 0; i < len; i += 4096) sum += p[i];
        /* Half the rounds give back the tail first, then the rest. */
        if (round % 2 && sys_call(SYS_MUNMAP, (long)(p + len / 2 / 4096 * 4096), (long)(len - len / 2 / 4096 * 4096), 0, 0)) {
            out_str("munmap of a tail failed\n");
            return 3;
        }
        size_t rest = round % 2 ? len / 2 / 4096 * 4096 : len;
        if (sys_call(SYS_MUNMAP, (long)p, (long)rest, 0, 0)) {
            out_str("munmap failed\n");
            return 3;
        }
    }
    out_str("mapped 48 times, sum ");
    out_u64(sum);
    out_str("; unaligned munmap: ");
    out_i64(sys_call(SYS_MUNMAP, 4097, 4096, 0, 0));
    out_char('\n');
    return 0;
}
