/* Prints its arguments (without argv[0]) and the NAME and GREETING environment variables. */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    const char *name = getenv("NAME");
    const char *greeting = getenv("GREETING");
    if (!name) name = "world";
    if (!greeting) greeting = "Hello";
    printf("%s, %s!\n", greeting, name);
    printf("argc=%d\n", argc - 1);
    for (int i = 1; i < argc; i++)
        printf("arg[%d]=\"%s\"\n", i - 1, argv[i]);
    for (int i = 1; i <= 10; i++)
        printf("line %2d: %s %s x%d\n", i, greeting, name, i * i);
    return 0;
}
