/* Self-checking instruction tests in the manner of riscv-tests (written for warpvisor):
 * each TEST_* sets gp to its number, computes into x14 and compares with the expected
 * value; the first mismatch exits with that number, the end exits 0. */
#define CODE_BEGIN          \
    .text;                  \
    .globl _start;          \
_start:

#define CODE_END            \
    li a0, 0;               \
    li a7, 93;              \
    ecall;                  \
fail:                       \
    mv a0, gp;              \
    li a7, 93;              \
    ecall;

#define CHECK(n, expect)    \
    li gp, n;               \
    li x29, expect;         \
    bne x14, x29, fail;

/* rd = a OP b */
#define TEST_RR(n, inst, expect, a, b) \
    li x11, a; li x12, b; inst x14, x11, x12; CHECK(n, expect)
/* rd = a OP imm */
#define TEST_RI(n, inst, expect, a, imm) \
    li x11, a; inst x14, x11, imm; CHECK(n, expect)
/* rd = a OP a (source and destination the same register) */
#define TEST_SAME(n, inst, expect, a) \
    li x14, a; inst x14, x14, x14; CHECK(n, expect)
