#include "test.h"
    .option rvc
CODE_BEGIN
    c.li x14, -32
    CHECK(1, -32)
    c.li x14, 31
    c.addi x14, -1
    CHECK(2, 30)
    c.lui x14, 0xfffe0
    CHECK(3, 0xfffffffffffe0000)
    li x14, 0x7fffffff
    c.addiw x14, 1
    CHECK(4, 0xffffffff80000000)
    li x14, 1
    c.slli x14, 63
    CHECK(5, 0x8000000000000000)
    li x8, -16
    c.srli x8, 60
    mv x14, x8
    CHECK(6, 15)
    li x8, -16
    c.srai x8, 2
    mv x14, x8
    CHECK(7, -4)
    li x8, 0xff
    c.andi x8, -16
    mv x14, x8
    CHECK(8, 0xf0)
    li x8, 10
    li x9, 3
    c.sub x8, x9
    mv x14, x8
    CHECK(9, 7)
    c.xor x8, x9
    mv x14, x8
    CHECK(10, 4)
    c.or x8, x9
    mv x14, x8
    CHECK(11, 7)
    c.and x8, x9
    mv x14, x8
    CHECK(12, 3)
    li x8, 0x7fffffff
    li x9, 1
    c.addw x8, x9
    mv x14, x8
    CHECK(13, 0xffffffff80000000)
    li x8, 0
    c.subw x8, x9
    mv x14, x8
    CHECK(14, -1)
    c.mv x14, x9
    CHECK(15, 1)
    c.add x14, x9
    CHECK(16, 2)
    /* stack-relative and register-relative loads and stores */
    addi sp, sp, -32
    li x8, 0x1122334455667788
    c.sdsp x8, 8(sp)
    c.ldsp x14, 8(sp)
    CHECK(17, 0x1122334455667788)
    c.lwsp x14, 12(sp)
    CHECK(18, 0x11223344)
    li x9, -2
    c.swsp x9, 16(sp)
    c.lwsp x14, 16(sp)
    CHECK(19, -2)
    c.addi4spn x10, sp, 8
    c.ld x11, 0(x10)
    mv x14, x11
    CHECK(20, 0x1122334455667788)
    c.sw x9, 4(x10)
    c.lw x11, 4(x10)
    mv x14, x11
    CHECK(21, -2)
    c.sd x9, 8(x10)
    c.ld x11, 8(x10)
    mv x14, x11
    CHECK(22, -2)
    c.addi16sp sp, 32
    /* jumps and branches */
    li x8, 0
    c.beqz x8, 1f
    j fail
1:  c.bnez x8, fail
    c.j 2f
    j fail
2:  la x8, 3f
    c.jalr x8
    CHECK(23, 99)
    j 4f
3:  li x14, 99
    c.jr ra
4:
CODE_END
