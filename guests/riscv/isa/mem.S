#include "test.h"
#define LOAD(n, inst, off, expect) la x11, data; inst x14, off(x11); CHECK(n, expect)
CODE_BEGIN
    LOAD(1, lb, 0, 0xffffffffffffff80)
    LOAD(2, lbu, 0, 0x80)
    LOAD(3, lh, 0, 0xffffffffffff8180)
    LOAD(4, lhu, 0, 0x8180)
    LOAD(5, lw, 0, 0xffffffff83828180)
    LOAD(6, lwu, 0, 0x83828180)
    LOAD(7, ld, 0, 0x8786858483828180)
    LOAD(8, lb, 9, 0x01)
    LOAD(9, lh, 1, 0xffffffffffff8281)
    LOAD(10, lw, 3, 0xffffffff86858483)
    LOAD(11, ld, 5, 0x0403020188878685)
    /* stores of each width, read back as a doubleword */
    la x11, scratch
    li x12, -1
    sd x12, 0(x11)
    li x12, 0x1122334455667788
    sb x12, 0(x11)
    ld x14, 0(x11)
    CHECK(12, 0xffffffffffffff88)
    sh x12, 2(x11)
    ld x14, 0(x11)
    CHECK(13, 0xffffffff7788ff88)
    sw x12, 4(x11)
    ld x14, 0(x11)
    CHECK(14, 0x556677887788ff88)
    sd x12, 0(x11)
    ld x14, 0(x11)
    CHECK(15, 0x1122334455667788)
    /* negative offsets */
    addi x13, x11, 8
    lw x14, -8(x13)
    CHECK(16, 0x55667788)
    /* a load into x0 still happens and leaves x0 zero */
    lw x0, 0(x11)
    mv x14, x0
    CHECK(17, 0)
CODE_END
    .data
    .balign 8
data: .byte 0x80, 0x81, 0x82, 0x83, 0x84, 0x85, 0x86, 0x87, 0x88, 0x01, 0x02, 0x03, 0x04, 0, 0, 0
scratch: .dword 0
