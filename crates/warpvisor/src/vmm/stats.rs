//! Where a fleet's time went, and what crossed between host and device.

use std::time::Duration;

/// Where a fleet's time went, summed over its life (allocation included).
#[derive(Debug, Clone, Copy, Default)]
pub struct FleetStats {
    /// Kernel launches.
    pub launches: u64,
    /// Creating the fleet's storage on the device.
    pub allocate: Duration,
    /// Time the kernels ran.
    pub execute: Duration,
    /// Time spent moving control blocks, arguments and results between host and device
    /// (host functions' own memory accesses count as hypercall service).
    pub transfer: Duration,
    /// Hypercalls serviced.
    pub hypercalls: u64,
    /// Time spent servicing them on the host.
    pub hypercall_service: Duration,
    /// Time spent (re)instantiating VMs: the image, the reset entry on the device, the start
    /// function.
    pub instantiate: Duration,
    /// The host's bookkeeping between launches: choosing partitions, preparing entries,
    /// collecting outcomes.
    pub schedule: Duration,
    /// Bytes written to the device.
    pub bytes_to_device: u64,
    /// Bytes read from the device.
    pub bytes_from_device: u64,
    /// Gathered transfers between host and device.
    pub transfers: u64,
    /// Calls that went through the trampoline: continuation calls and hypercalls.
    pub slow_calls: u64,
    /// `call_indirect`s that reached a function.
    pub indirect_calls: u64,
    /// Live values saved in continuation frames (each restored once when the call returns).
    pub saved_words: u64,
}

impl FleetStats {
    /// What happened between `earlier` (a snapshot of the same fleet) and `self`.
    pub fn since(&self, earlier: &FleetStats) -> FleetStats {
        FleetStats {
            launches: self.launches.saturating_sub(earlier.launches),
            allocate: self.allocate.saturating_sub(earlier.allocate),
            execute: self.execute.saturating_sub(earlier.execute),
            transfer: self.transfer.saturating_sub(earlier.transfer),
            hypercalls: self.hypercalls.saturating_sub(earlier.hypercalls),
            hypercall_service: self
                .hypercall_service
                .saturating_sub(earlier.hypercall_service),
            instantiate: self.instantiate.saturating_sub(earlier.instantiate),
            schedule: self.schedule.saturating_sub(earlier.schedule),
            bytes_to_device: self.bytes_to_device.saturating_sub(earlier.bytes_to_device),
            bytes_from_device: self
                .bytes_from_device
                .saturating_sub(earlier.bytes_from_device),
            transfers: self.transfers.saturating_sub(earlier.transfers),
            slow_calls: self.slow_calls.saturating_sub(earlier.slow_calls),
            indirect_calls: self.indirect_calls.saturating_sub(earlier.indirect_calls),
            saved_words: self.saved_words.saturating_sub(earlier.saved_words),
        }
    }

    /// Bytes moved per launch, both ways.
    pub fn bytes_per_launch(&self) -> u64 {
        (self.bytes_to_device + self.bytes_from_device) / self.launches.max(1)
    }

    /// The time accounted for: every phase above.
    pub fn accounted(&self) -> Duration {
        self.allocate
            + self.execute
            + self.transfer
            + self.hypercall_service
            + self.instantiate
            + self.schedule
    }
}
