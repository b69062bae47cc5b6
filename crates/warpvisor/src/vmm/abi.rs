//! The host's view of the kernel's data structures (`wv_fleet` and `wv_vm` in the prelude).

/// VM status values (`WV_RUNNING`, ...).
pub mod status {
    /// Running or ready to run.
    pub const RUNNING: u32 = 0;
    /// Returned from its entry function.
    pub const DONE: u32 = 1;
    /// Stopped by a trap.
    pub const TRAPPED: u32 = 2;
    /// Waiting for the host to service a call to an import.
    pub const HYPERCALL: u32 = 3;
    /// Waiting for another kernel partition to run its next frame.
    pub const ELSEWHERE: u32 = 4;
}

/// The frame link of an entry frame (`WV_NO_FRAME`).
pub const NO_FRAME: u64 = 0xffff_ffff;
/// Words of a frame header (`WV_FRAME_HEADER`): caller frame, function id, resume point.
pub const FRAME_HEADER: u32 = 3;
/// A null reference (`WV_NULL_REF`).
pub const NULL_REF: u32 = 0xffff_ffff;

/// Control state of one VM (`wv_vm`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VmControl {
    /// One of [`status`].
    pub status: u32,
    /// Trap kind code when trapped.
    pub trap: u32,
    /// Stack word of the current frame.
    pub fp: u32,
    /// Frames on the call stack.
    pub depth: u32,
    /// Import index of a pending hypercall.
    pub hypercall: u32,
    /// Fuel left when the kernel meters fuel.
    pub fuel: u32,
    /// Calls through the trampoline (continuation calls and hypercalls) since the last
    /// invocation started.
    pub slow_calls: u64,
    /// `call_indirect`s that reached a function.
    pub indirect_calls: u64,
    /// Live values saved in frames at yield points (each restored once).
    pub saved_words: u64,
}

/// The fleet as the kernel sees it (`wv_fleet`): raw pointers into the host's buffers.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct FleetAbi {
    /// Linear memories.
    pub mem: *mut u8,
    /// Pages per VM.
    pub mem_pages: *mut u32,
    /// Globals.
    pub globals: *mut u64,
    /// Table elements.
    pub tables: *mut u32,
    /// Table sizes.
    pub table_sizes: *mut u32,
    /// Dropped-segment flags.
    pub dropped: *mut u8,
    /// Data segment bytes.
    pub data_blob: *const u8,
    /// Element segment references.
    pub elem_blob: *const u32,
    /// Call stacks.
    pub stack: *mut u64,
    /// Result words.
    pub ret: *mut u64,
    /// VM control states.
    pub vms: *mut VmControl,
    /// Bytes reserved per VM.
    pub mem_stride: u64,
    /// VMs in the fleet.
    pub num_vms: u32,
    /// Page limit per VM.
    pub max_pages: u32,
    /// Call-stack words per VM.
    pub stack_words: u32,
    /// Frame limit per VM.
    pub max_depth: u32,
}

// The pointers refer to buffers owned by `FleetBuffers`; workers touch disjoint VMs.
unsafe impl Send for FleetAbi {}
unsafe impl Sync for FleetAbi {}
