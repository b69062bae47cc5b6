/* Deep non-tail recursion. Arguments: [depth=3000] [fib_n=20] [ack_n=6]. */
#include <stdio.h>
#include <stdlib.h>

static unsigned long long calls;

__attribute__((noinline)) static unsigned long long chain(unsigned n) {
    if (n == 0) return 1;
    unsigned long long r = chain(n - 1);
    return (r * 31 + n) ^ (r >> 7);
}

__attribute__((noinline)) static unsigned long long fib(unsigned n) {
    return n < 2 ? n : fib(n - 1) + fib(n - 2);
}

__attribute__((noinline)) static unsigned long long ack(unsigned long long m, unsigned long long n) {
    calls++;
    if (m == 0) return n + 1;
    if (n == 0) return ack(m - 1, 1);
    return ack(m - 1, ack(m, n - 1));
}

/* The local array lives on the shadow stack (linear memory), so this recursion uses it too. */
__attribute__((noinline)) static int frames(int n, volatile int *out) {
    volatile int buf[8];
    for (int i = 0; i < 8; i++) buf[i] = n * i;
    if (n == 0) { *out = 0; return 0; }
    int r = frames(n - 1, out);
    return r + buf[n % 8];
}

int main(int argc, char **argv) {
    unsigned depth = argc > 1 ? (unsigned)atoi(argv[1]) : 3000;
    unsigned fib_n = argc > 2 ? (unsigned)atoi(argv[2]) : 20;
    unsigned ack_n = argc > 3 ? (unsigned)atoi(argv[3]) : 6;
    volatile int sink;
    printf("chain(%u) = %016llx\n", depth, chain(depth));
    printf("fib(%u) = %llu\n", fib_n, fib(fib_n));
    calls = 0;
    unsigned long long a = ack(2, ack_n);
    printf("ack(2, %u) = %llu calls=%llu\n", ack_n, a, calls);
    calls = 0;
    a = ack(3, ack_n);
    printf("ack(3, %u) = %llu calls=%llu\n", ack_n, a, calls);
    printf("frames(%u) = %d\n", depth, frames((int)depth, &sink));
    return 0;
}
