//! VM status codes and trap codes: the values of `wv_vm.status` and `wv_vm.trap`.

use crate::vmm::TrapKind;

/// VM status values (`WV_RUNNING`, ...). Who sets each is part of the contract: the kernel
/// sets `DONE`, `TRAPPED`, `HYPERCALL`, `ELSEWHERE` and `HOST_CALL`; the host sets `ENTRY`,
/// `RESUME` and `RESET`, and may stop any VM by setting `TRAPPED`.
pub mod status {
    /// Running, or ready to run in the partition the host launches next.
    pub const RUNNING: u32 = 0;
    /// Returned from its entry function; its results are in its result words.
    pub const DONE: u32 = 1;
    /// Stopped by a trap (`wv_vm.trap` says which).
    pub const TRAPPED: u32 = 2;
    /// Waiting for the host to serve a call to import `wv_vm.hypercall`; the arguments are in
    /// its result words.
    pub const HYPERCALL: u32 = 3;
    /// Waiting for the partition that holds function `wv_vm.func`.
    pub const ELSEWHERE: u32 = 4;
    /// Set by the host: start function `wv_vm.func` with the arguments in the result words.
    pub const ENTRY: u32 = 5;
    /// Set by the host: the hypercall returned, its results are in the result words; the
    /// kernel pops the import's frame and continues the caller (`wv_vm.func`).
    pub const RESUME: u32 = 6;
    /// Set by the host before a reset launch: the reset kernel puts this VM back to the
    /// instantiation image (and leaves it `DONE`); VMs with any other status are left alone.
    pub const RESET: u32 = 7;
    /// Waiting inside the running kernel for the host to serve import `wv_vm.hypercall`, whose
    /// arguments are in its result words (synchronous imports on a device, `--calls direct` on
    /// OpenCL). The host answers with `RUNNING` and the results, or stops it with `TRAPPED`.
    /// Never seen after a launch.
    pub const HOST_CALL: u32 = 8;
}

/// Every status code with its C name and meaning, in code order.
pub const STATUS_CODES: [(&str, u32, &str); 9] = [
    (
        "RUNNING",
        status::RUNNING,
        "running, or ready to run in this partition",
    ),
    ("DONE", status::DONE, "returned from its entry function"),
    ("TRAPPED", status::TRAPPED, "stopped by a trap"),
    (
        "HYPERCALL",
        status::HYPERCALL,
        "waiting for the host to serve an import",
    ),
    (
        "ELSEWHERE",
        status::ELSEWHERE,
        "its next frame belongs to another kernel partition",
    ),
    (
        "ENTRY",
        status::ENTRY,
        "host: start wv_vm.func with the arguments in the result words",
    ),
    (
        "RESUME",
        status::RESUME,
        "host: the hypercall's results are in the result words",
    ),
    (
        "RESET",
        status::RESET,
        "host: the reset kernel restores this VM to the image",
    ),
    (
        "HOST_CALL",
        status::HOST_CALL,
        "waiting in the kernel for the host to serve an import",
    ),
];

/// The traps a kernel raises, with their C names; a trap's code is its position plus one
/// (0 means no trap). Traps the host raises (`timeout`, `host_error`) have no code.
pub const KERNEL_TRAPS: [(TrapKind, &str); 11] = [
    (TrapKind::Unreachable, "UNREACHABLE"),
    (TrapKind::MemoryOutOfBounds, "MEMORY_OOB"),
    (TrapKind::TableOutOfBounds, "TABLE_OOB"),
    (TrapKind::IndirectCallToNull, "INDIRECT_NULL"),
    (TrapKind::BadSignature, "BAD_SIGNATURE"),
    (TrapKind::IntegerOverflow, "INT_OVERFLOW"),
    (TrapKind::IntegerDivisionByZero, "INT_DIV_ZERO"),
    (TrapKind::BadConversionToInteger, "BAD_CONVERSION"),
    (TrapKind::StackOverflow, "STACK_OVERFLOW"),
    (TrapKind::NullReference, "NULL_REFERENCE"),
    (TrapKind::OutOfFuel, "OUT_OF_FUEL"),
];

/// The trap kind of kernel trap code `code` (`host_error` for a code no kernel raises).
pub fn trap_kind(code: u32) -> TrapKind {
    code.checked_sub(1)
        .and_then(|i| KERNEL_TRAPS.get(i as usize))
        .map_or(TrapKind::HostError, |(k, _)| *k)
}

/// The kernel trap code of `kind`, if kernels raise it.
pub fn trap_code(kind: TrapKind) -> Option<u32> {
    KERNEL_TRAPS
        .iter()
        .position(|(k, _)| *k == kind)
        .map(|i| i as u32 + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_and_status_codes_are_distinct() {
        for (i, (kind, _)) in KERNEL_TRAPS.iter().enumerate() {
            assert_eq!(trap_code(*kind), Some(i as u32 + 1));
            assert_eq!(trap_kind(i as u32 + 1), *kind);
        }
        assert_eq!(trap_kind(0), TrapKind::HostError);
        assert_eq!(trap_code(TrapKind::Timeout), None);
        for (i, (_, code, _)) in STATUS_CODES.iter().enumerate() {
            assert_eq!(*code, i as u32);
        }
    }
}
