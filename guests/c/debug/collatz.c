/* A WASI program built with DWARF (-g) for `warpvisor simt`'s source-line report: each job
 * counts Collatz steps from its own start value, so lanes leave the loop at different times. */
#include <stdio.h>
#include <stdlib.h>

static unsigned steps_from(unsigned x) {
    unsigned steps = 0;
    while (x != 1) { /* the divergent loop */
        x = (x & 1) ? 3 * x + 1 : x / 2; /* the divergent body */
        steps++;
    }
    return steps;
}

int main(int argc, char **argv) {
    unsigned start = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 10) : 27;
    unsigned total = 0;
    for (unsigned i = 0; i < 16; i++) {
        total += steps_from(start + i);
    }
    printf("%u\n", total);
    return 0;
}
