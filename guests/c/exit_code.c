/* Returns the exit code given as first argument (default 0) from main; with a second argument
   "exit" it calls exit() instead, and with "abort" it calls abort() (a wasm trap). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    int code = argc > 1 ? atoi(argv[1]) : 0;
    printf("exit code %d\n", code);
    fprintf(stderr, "stderr: exit code %d\n", code);
    if (argc > 2 && strcmp(argv[2], "exit") == 0) { fflush(stdout); exit(code); }
    if (argc > 2 && strcmp(argv[2], "abort") == 0) abort();
    return code;
}
