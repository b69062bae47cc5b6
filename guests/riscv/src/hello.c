/* Arguments and environment in, a greeting out, a chosen exit code. */
#include "mini.h"
int main(int argc, char **argv, char **envp) {
    out_str("hello from riscv64\n");
    for (int i = 1; i < argc; i++) { out_str("arg "); out_i64(i); out_str(": "); out_str(argv[i]); out_char('\n'); }
    int n = 0;
    while (envp[n]) n++;
    out_str("env vars: "); out_i64(n); out_char('\n');
    return argc > 1 ? (int)parse_long(argv[argc - 1]) & 255 : 0;
}
