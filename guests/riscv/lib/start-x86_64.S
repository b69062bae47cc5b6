# The native-x86 baseline's entry point (scripts/riscv-throughput.sh): the same start-up as
# start.S on x86-64.
    .text
    .globl _start
_start:
    mov (%rsp), %rdi
    lea 8(%rsp), %rsi
    lea 8(%rsi,%rdi,8), %rdx
    and $-16, %rsp
    call main
    mov %eax, %edi
    call sys_exit
