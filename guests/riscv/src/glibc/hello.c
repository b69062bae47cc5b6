/* glibc's start-up, stdio and malloc: arguments, environment and an exit code. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(int argc, char **argv) {
    printf("hello from glibc on riscv64, %d arguments\n", argc - 1);
    for (int i = 1; i < argc; i++) {
        char *copy = malloc(strlen(argv[i]) + 1);
        strcpy(copy, argv[i]);
        printf("  %d: %s (%zu bytes)\n", i, copy, strlen(copy));
        free(copy);
    }
    const char *who = getenv("WHO");
    printf("WHO=%s\n", who ? who : "(unset)");
    fprintf(stderr, "to stderr\n");
    return argc > 1 ? atoi(argv[argc - 1]) & 255 : 0;
}
