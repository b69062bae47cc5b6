# The entry point of the freestanding guests: Linux's start-up stack → main(argc, argv, envp),
# then sys_exit (which flushes standard output) with main's result.
    .section .text._start
    .globl _start
_start:
    .option push
    .option norelax
    la gp, __global_pointer$
    .option pop
    ld a0, 0(sp)
    addi a1, sp, 8
    slli t0, a0, 3
    add a2, a1, t0
    addi a2, a2, 8
    call main
    call sys_exit
