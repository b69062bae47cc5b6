#include "test.h"
CODE_BEGIN
    TEST_RR(1, add, 3, 1, 2)
    TEST_RR(2, add, 0x0000000080000000, 0x7fffffff, 1)
    TEST_RR(3, add, 0, -1, 1)
    TEST_RR(4, sub, -1, 1, 2)
    TEST_RR(5, sub, 0x8000000000000000, 0x7fffffffffffffff, -1)
    TEST_RR(6, addw, 0xffffffff80000000, 0x7fffffff, 1)
    TEST_RR(7, subw, 0x7fffffff, 0x80000000, 1)
    TEST_RR(8, sll, 0x8000000000000000, 1, 63)
    TEST_RR(9, sll, 2, 1, 65)
    TEST_RR(10, srl, 1, 0x8000000000000000, 63)
    TEST_RR(11, sra, -1, 0x8000000000000000, 63)
    TEST_RR(12, sllw, 0xffffffff80000000, 1, 31)
    TEST_RR(13, srlw, 1, 0x80000000, 31)
    TEST_RR(14, sraw, -1, 0x80000000, 31)
    TEST_RR(15, srlw, 0x40000000, 0xffffffff80000000, 33)
    TEST_RR(16, slt, 1, -1, 0)
    TEST_RR(17, sltu, 0, -1, 0)
    TEST_RR(18, sltu, 1, 0, -1)
    TEST_RR(19, xor, 0xff00ff0000ff00ff, 0xff00ff00ff00ff00, 0x00000000ffffffff)
    TEST_RR(20, or, 0xff00ff00ffffffff, 0xff00ff00ff00ff00, 0x00000000ffffffff)
    TEST_RR(21, and, 0x00000000ff00ff00, 0xff00ff00ff00ff00, 0x00000000ffffffff)
    TEST_RI(22, addi, -2048, 0, -2048)
    TEST_RI(23, addi, 2047, 0, 2047)
    TEST_RI(24, addiw, 0xffffffff80000000, 0x7fffffff, 1)
    TEST_RI(25, slti, 1, -5, -4)
    TEST_RI(26, sltiu, 1, 5, -1)
    TEST_RI(27, xori, 0xffffffffffffff0f, 0xf0, -1)
    TEST_RI(28, ori, -1, 0, -1)
    TEST_RI(29, andi, 0x7ff, -1, 2047)
    TEST_RI(30, slli, 0x8000000000000000, 1, 63)
    TEST_RI(31, srli, 1, 0x8000000000000000, 63)
    TEST_RI(32, srai, -1, 0x8000000000000000, 63)
    TEST_RI(33, slliw, 0xffffffff80000000, 1, 31)
    TEST_RI(34, srliw, 1, 0x80000000, 31)
    TEST_RI(35, sraiw, -1, 0x80000000, 31)
    TEST_RI(36, sraiw, 0x7fffffff, 0x7fffffff, 0)
    TEST_SAME(37, add, 4, 2)
    TEST_SAME(38, sub, 0, 7)
    /* lui and auipc */
    lui x14, 0x80000
    CHECK(39, 0xffffffff80000000)
    lui x14, 0x7ffff
    CHECK(40, 0x7ffff000)
1:  auipc x14, 0
    la x29, 1b
    li gp, 41
    bne x14, x29, fail
    /* writes to x0 are dropped */
    li x11, 5
    add x0, x11, x11
    mv x14, x0
    CHECK(42, 0)
CODE_END
