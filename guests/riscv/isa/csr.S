#include "test.h"
CODE_BEGIN
    /* fcsr holds frm (bits 7..5) and fflags (bits 4..0) */
    li x11, 0xff
    csrw fcsr, x11
    csrr x14, fcsr
    CHECK(1, 0xff)
    csrr x14, frm
    CHECK(2, 7)
    csrr x14, fflags
    CHECK(3, 0x1f)
    csrwi frm, 1
    csrr x14, fcsr
    CHECK(4, 0x3f)
    csrci fflags, 0x10
    csrr x14, fflags
    CHECK(5, 0x0f)
    li x11, 0x10
    csrrs x14, fflags, x11
    CHECK(6, 0x0f)
    csrr x14, fflags
    CHECK(7, 0x1f)
    csrrw x14, fcsr, x0
    CHECK(8, 0x3f)
    csrr x14, fcsr
    CHECK(9, 0)
    /* the time counter moves forward */
    rdtime x11
    li x12, 1000
1:  addi x12, x12, -1
    bnez x12, 1b
    rdtime x13
    sltu x14, x11, x13
    CHECK(10, 1)
    rdcycle x11
    sltu x14, x0, x11
    CHECK(11, 1)
    fence
    fence.i
CODE_END
