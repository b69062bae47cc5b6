//! The strings benchmark as a resident handler: one VM answers request after request
//! through warpvisor's guest API (`warpvisor serve`).
fn main() {
    warpvisor_workloads::serve_resident(warpvisor_workloads::strings::run)
}
