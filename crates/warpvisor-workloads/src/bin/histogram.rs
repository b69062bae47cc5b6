//! The histogram benchmark as a WASI program: one request on stdin, the reply on stdout.
fn main() -> std::process::ExitCode {
    warpvisor_workloads::serve(warpvisor_workloads::histogram::run)
}
