#include "test.h"
#define TAKEN(n, inst, a, b) li gp, n; li x11, a; li x12, b; inst x11, x12, 1f; j fail; 1:
#define NOT_TAKEN(n, inst, a, b) li gp, n; li x11, a; li x12, b; inst x11, x12, fail
CODE_BEGIN
    TAKEN(1, beq, 3, 3)
    NOT_TAKEN(2, beq, 3, 4)
    TAKEN(3, bne, 3, 4)
    NOT_TAKEN(4, bne, -1, -1)
    TAKEN(5, blt, -1, 0)
    NOT_TAKEN(6, blt, 0, -1)
    TAKEN(7, bge, 0, -1)
    TAKEN(8, bge, 5, 5)
    NOT_TAKEN(9, bge, -2, -1)
    TAKEN(10, bltu, 0, -1)
    NOT_TAKEN(11, bltu, -1, 0)
    TAKEN(12, bgeu, -1, 0)
    NOT_TAKEN(13, bgeu, 0, 1)
    /* a backward loop: sum 1..100 */
    li x11, 0
    li x12, 100
2:  add x11, x11, x12
    addi x12, x12, -1
    bnez x12, 2b
    mv x14, x11
    CHECK(14, 5050)
    /* jal links the next address */
    jal x13, 3f
4:  j fail
3:  la x29, 4b
    li gp, 15
    bne x13, x29, fail
    /* jalr clears bit 0 of the target and links before jumping (rd = rs1) */
    la x11, 5f
    addi x11, x11, 1
    jalr x11, 0(x11)
6:  j fail
5:  la x29, 6b
    li gp, 16
    bne x11, x29, fail
    /* a call and a return through a function */
    li a0, 20
    call double_it
    mv x14, a0
    CHECK(17, 40)
    /* recursion: factorial 10 */
    li a0, 10
    call fact
    mv x14, a0
    CHECK(18, 3628800)
    /* an indirect jump through a table */
    la x11, table
    ld x12, 16(x11)
    jr x12
    j fail
t0: j fail
t1: j fail
t2: li x14, 77
    CHECK(19, 77)
CODE_END

double_it:
    add a0, a0, a0
    ret

fact:
    li t0, 1
    ble a0, t0, 1f
    addi sp, sp, -16
    sd ra, 8(sp)
    sd a0, 0(sp)
    addi a0, a0, -1
    call fact
    ld t1, 0(sp)
    ld ra, 8(sp)
    addi sp, sp, 16
    mul a0, a0, t1
    ret
1:  li a0, 1
    ret

    .data
    .balign 8
table: .dword t0, t1, t2
