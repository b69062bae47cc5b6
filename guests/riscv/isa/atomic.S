#include "test.h"
#define AMO(n, inst, init, src, old, new) \
    la x11, word; li x12, init; sd x12, 0(x11); li x12, src; inst x14, x12, (x11); CHECK(n, old); \
    ld x14, 0(x11); CHECK(n, new)
#define AMOW(n, inst, init, src, old, new) \
    la x11, word; li x12, init; sd x12, 0(x11); li x12, src; inst x14, x12, (x11); CHECK(n, old); \
    ld x14, 0(x11); CHECK(n, new)
CODE_BEGIN
    AMO(1, amoswap.d, 5, 9, 5, 9)
    AMO(2, amoadd.d, 5, -9, 5, -4)
    AMO(3, amoxor.d, 0xff, 0x0f, 0xff, 0xf0)
    AMO(4, amoand.d, 0xff, 0x0f, 0xff, 0x0f)
    AMO(5, amoor.d, 0xf0, 0x0f, 0xf0, 0xff)
    AMO(6, amomin.d, -1, 1, -1, -1)
    AMO(7, amomax.d, -1, 1, -1, 1)
    AMO(8, amominu.d, -1, 1, -1, 1)
    AMO(9, amomaxu.d, -1, 1, -1, -1)
    /* word forms sign-extend the old value and leave the upper word alone */
    AMOW(10, amoadd.w, 0x123456787fffffff, 1, 0x7fffffff, 0x1234567880000000)
    AMOW(11, amoswap.w, 0x1111111180000000, 5, 0xffffffff80000000, 0x1111111100000005)
    AMOW(12, amomin.w, 0x00000000ffffffff, 1, -1, 0x00000000ffffffff)
    AMOW(13, amominu.w, 0x00000000ffffffff, 1, -1, 0x0000000000000001)
    AMOW(14, amomax.w, 0x0000000080000000, 0, 0xffffffff80000000, 0)
    AMOW(15, amomaxu.w, 0x0000000080000000, 0, 0xffffffff80000000, 0x0000000080000000)
    /* lr/sc: a reserved store succeeds (0), a second one fails (1) */
    la x11, word
    li x12, 41
    sd x12, 0(x11)
    lr.d x13, (x11)
    addi x13, x13, 1
    sc.d x14, x13, (x11)
    CHECK(16, 0)
    ld x14, 0(x11)
    CHECK(17, 42)
    sc.d x14, x13, (x11)
    CHECK(18, 1)
    lr.w x14, (x11)
    CHECK(19, 42)
    li x12, -7
    sc.w x14, x12, (x11)
    CHECK(20, 0)
    lw x14, 0(x11)
    CHECK(21, -7)
CODE_END
    .data
    .balign 8
word: .dword 0
