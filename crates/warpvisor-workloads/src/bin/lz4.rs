//! The lz4 benchmark as a WASI program: one request on stdin, the reply on stdout.
fn main() -> std::process::ExitCode {
    warpvisor_workloads::serve(warpvisor_workloads::lz4::run)
}
