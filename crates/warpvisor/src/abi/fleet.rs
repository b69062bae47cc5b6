//! The fleet's state as host and kernel share it: the per-VM control block, the buffers and
//! scalars of `wv_fleet` (also the kernels' entry parameters, in this order), the
//! instantiation image and the per-VM index computations. [`super::c`] writes the C side.

use std::mem::{offset_of, size_of};

use crate::layout::InterleavedLayout;

/// The frame link of an entry frame (`WV_NO_FRAME`).
pub const NO_FRAME: u64 = 0xffff_ffff;
/// Words of a frame header (`WV_FRAME_HEADER`): caller frame, function id, resume point.
pub const FRAME_HEADER: u32 = 3;
/// A null reference (`WV_NULL_REF`).
pub const NULL_REF: u32 = 0xffff_ffff;
/// log2 of the bytes one entry of a fleet's dirty-page map covers (`WV_DIRTY_SHIFT`):
/// 4 KiB, the host's page. A store of up to 8 bytes at `ea` marks page `ea >> 12` only, so a
/// page's restore also covers the 7 bytes after it.
pub const DIRTY_PAGE_SHIFT: u32 = 12;

/// A Rust type with a C spelling in kernels.
pub trait CType {
    /// The C type name.
    const C: &'static str;
}
impl CType for u8 {
    const C: &'static str = "uint8_t";
}
impl CType for u32 {
    const C: &'static str = "uint32_t";
}
impl CType for u64 {
    const C: &'static str = "uint64_t";
}
impl CType for VmControl {
    const C: &'static str = "wv_vm";
}

/// One field of a struct shared with kernels, as [`super::c`] declares and checks it.
#[derive(Debug, Clone, Copy)]
pub struct CField {
    /// Field name (the same in Rust and C).
    pub name: &'static str,
    /// C type of the field, or of what it points to.
    pub c_type: &'static str,
    /// Whether the field points into a device buffer.
    pub pointer: bool,
    /// Byte offset in the Rust struct.
    pub offset: usize,
    /// Size in bytes.
    pub size: usize,
    /// What it holds.
    pub doc: &'static str,
}

/// Declares a `#[repr(C)]` struct of integers shared with kernels: the Rust struct, its field
/// table for the C declaration, and a compile-time check that it has no padding (so every C
/// compiler lays it out as Rust does; the generated C checks each offset as well).
macro_rules! shared_struct {
    ($(#[doc = $doc:literal])* $name:ident { $($(#[doc = $fdoc:literal])+ $field:ident : $ty:ty,)* }) => {
        $(#[doc = $doc])*
        #[repr(C)]
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
        pub struct $name { $($(#[doc = $fdoc])+ pub $field: $ty,)* }

        impl $name {
            /// The fields as kernels see them.
            pub const FIELDS: &'static [CField] = &[$(CField {
                name: stringify!($field),
                c_type: <$ty as CType>::C,
                pointer: false,
                offset: offset_of!($name, $field),
                size: size_of::<$ty>(),
                doc: concat!($($fdoc),+),
            },)*];
        }

        const _: () = assert!(
            size_of::<$name>() == 0 $(+ size_of::<$ty>())*,
            concat!(stringify!($name), " has padding: C compilers may lay it out differently")
        );
    };
}

shared_struct! {
    /// Control block of one VM (`wv_vm`): what the host reads after every launch and writes
    /// before the next. The counters tell where continuations cost time (the paper's
    /// "slowcalls", vectorvisor.md Table 3).
    VmControl {
        /// Status code (WV_RUNNING, ...; abi::status).
        status: u32,
        /// Trap code when trapped (WV_TRAP_*; abi::KERNEL_TRAPS).
        trap: u32,
        /// Stack word of the current frame.
        fp: u32,
        /// Frames on the call stack.
        depth: u32,
        /// Import index of a pending hypercall.
        hypercall: u32,
        /// Fuel left when the kernel meters fuel.
        fuel: u32,
        /// Current memory size in pages.
        mem_pages: u32,
        /// The function the VM runs next: the entry (ENTRY), the top frame's (ELSEWHERE), the caller's after a hypercall (or NO_FRAME).
        func: u32,
        /// Calls through the trampoline (continuation calls and hypercalls) since the invocation started.
        slow_calls: u64,
        /// call_indirect operators that reached a function.
        indirect_calls: u64,
        /// Live values saved in frames at yield points (each restored once).
        saved_words: u64,
        /// Where a guard-region fault of this VM resumes the device thread running it (OpenCL
        /// on a CPU device with guard regions): the address of its trampoline's fault point,
        /// 0 while no trampoline runs it (backend/opencl/guard.rs).
        unwind: u64,
    }
}

/// Declares the fleet's buffers and scalars: [`FleetBuffer`], [`FleetAbi`] (`wv_fleet`),
/// [`FleetScalars`] and the kernels' entry parameters, all in one order.
macro_rules! fleet_abi {
    (
        buffers { $($(#[doc = $bdoc:literal])+ $buf:ident : $bty:ty => $variant:ident,)* }
        scalars { $($(#[doc = $sdoc:literal])+ $sc:ident : $sty:ty => $arg:ident,)* }
    ) => {
        /// One of the fleet's device buffers.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum FleetBuffer { $($(#[doc = $bdoc])+ $variant,)* }

        impl FleetBuffer {
            /// Every buffer, in the order of `wv_fleet` and of the entry parameters.
            pub const ALL: &'static [FleetBuffer] = &[$(FleetBuffer::$variant),*];

            /// The field and parameter name.
            pub fn name(self) -> &'static str {
                match self { $(FleetBuffer::$variant => stringify!($buf),)* }
            }

            /// Bytes per element.
            pub fn elem_bytes(self) -> usize {
                match self { $(FleetBuffer::$variant => size_of::<$bty>(),)* }
            }
        }

        /// The fleet as the `cpu` kernel receives it (`wv_fleet`): the buffers' addresses,
        /// then the scalars. Device kernels receive the same fields as entry parameters.
        #[repr(C)]
        #[derive(Debug, Clone, Copy)]
        pub struct FleetAbi {
            $($(#[doc = $bdoc])+ pub $buf: *mut $bty,)*
            $($(#[doc = $sdoc])+ pub $sc: $sty,)*
        }

        /// The fleet's scalar parameters.
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
        pub struct FleetScalars { $($(#[doc = $sdoc])+ pub $sc: $sty,)* }

        impl FleetAbi {
            /// The fields as kernels see them, in order.
            pub const FIELDS: &'static [CField] = &[
                $(CField {
                    name: stringify!($buf),
                    c_type: <$bty as CType>::C,
                    pointer: true,
                    offset: offset_of!(FleetAbi, $buf),
                    size: size_of::<*mut $bty>(),
                    doc: concat!($($bdoc),+),
                },)*
                $(CField {
                    name: stringify!($sc),
                    c_type: <$sty as CType>::C,
                    pointer: false,
                    offset: offset_of!(FleetAbi, $sc),
                    size: size_of::<$sty>(),
                    doc: concat!($($sdoc),+),
                },)*
            ];

            /// The kernel's view of buffers at `base(buffer)` with `scalars`.
            pub fn new(base: impl Fn(FleetBuffer) -> *mut u8, scalars: &FleetScalars) -> Self {
                FleetAbi {
                    $($buf: base(FleetBuffer::$variant).cast(),)*
                    $($sc: scalars.$sc,)*
                }
            }
        }

        impl FleetScalars {
            /// The entry parameters, in order: every buffer, then every scalar.
            pub fn params(&self) -> Vec<KernelParam> {
                let mut out: Vec<KernelParam> =
                    FleetBuffer::ALL.iter().map(|b| KernelParam::Buffer(*b)).collect();
                $(out.push(KernelParam::Scalar(ScalarArg::$arg(self.$sc)));)*
                out
            }
        }
    };
}

fleet_abi! {
    buffers {
        /// Linear memories, interleaved by WV_INTERLEAVE.
        mem: u8 => Mem,
        /// Globals as 64-bit words (WV_GLB).
        globals: u64 => Globals,
        /// Table elements (WV_TABLE_WORD).
        tables: u32 => Tables,
        /// Current table sizes (WV_TABLE_SIZE).
        table_sizes: u32 => TableSizes,
        /// Dropped flags of data then element segments (WV_DROPPED).
        dropped: u8 => Dropped,
        /// Bytes of every data segment.
        data_blob: u8 => DataBlob,
        /// References of every element segment.
        elem_blob: u32 => ElemBlob,
        /// Call stacks of continuation frames (WV_STK).
        stack: u64 => Stack,
        /// Result words: results of the last return, a hypercall's arguments and results, an entry's arguments (WV_RET).
        ret: u64 => Ret,
        /// Control blocks, one per VM.
        vms: VmControl => Vms,
        /// The instantiation image the reset entry copies into every VM (WV_IMG_*).
        image: u64 => Image,
        /// Dirty-page map (interleave 0): one byte per 2^DIRTY_PAGE_SHIFT bytes of the memory buffer, set by every write to guest memory (kernel and host), so that a reset restores only what a VM wrote.
        dirty: u8 => Dirty,
    }
    scalars {
        /// Bytes reserved per VM (contiguous layout).
        mem_stride: u64 => U64,
        /// VMs in the fleet.
        num_vms: u32 => U32,
        /// Per-VM page limit: module maximum and configured limit.
        max_pages: u32 => U32,
        /// Call-stack words per VM.
        stack_words: u32 => U32,
        /// Most frames per VM.
        max_depth: u32 => U32,
        /// Host address of the memory reservation a CPU device computes in with guard regions
        /// (OpenCL, `backend/opencl/guard.rs`), which no device buffer could hold; 0 elsewhere,
        /// where the kernel uses `mem`.
        mem_host: u64 => U64,
    }
}

// The pointers refer to a fleet's storage, owned by its backend; workers touch disjoint VMs.
unsafe impl Send for FleetAbi {}
unsafe impl Sync for FleetAbi {}

shared_struct! {
    /// What the `cpu` kernel receives after the fleet's fields (the tail of `wv_fleet` on the
    /// host): the host's import service and the native stack budget of direct calls
    /// (`CallMode::Direct`). Device kernels have neither.
    HostServices {
        /// Address of the host's import service (`wv_host`); 0 when there is none.
        host: u64,
        /// Lowest native stack address a VM's frame may use (direct calls), set per worker.
        stack_floor: u64,
        /// Where a trap in the running VM's fastcalls jumps to (direct calls): the kernel's
        /// own unwind point, set by the kernel for each VM it starts.
        unwind: u64,
        /// Index of the VM the worker runs (direct calls), set with `unwind`: the fault
        /// handler's answer to whose native stack overflowed.
        running: u64,
    }
}

/// The `cpu` kernel's launch argument: `wv_fleet` as the host dialect declares it.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct HostLaunch {
    /// The fleet's buffers and scalars, as every dialect sees them.
    pub fleet: FleetAbi,
    /// What only the host dialect has.
    pub services: HostServices,
}

const _: () = assert!(
    offset_of!(HostLaunch, services) == size_of::<FleetAbi>()
        && size_of::<HostLaunch>() == size_of::<FleetAbi>() + size_of::<HostServices>(),
    "HostLaunch must be FleetAbi's fields followed by HostServices' without padding"
);

impl HostLaunch {
    /// Every field of the host dialect's `wv_fleet`, offsets from the start of the struct.
    pub fn fields() -> Vec<CField> {
        let base = size_of::<FleetAbi>();
        let tail = HostServices::FIELDS.iter().map(|f| CField {
            offset: base + f.offset,
            ..*f
        });
        FleetAbi::FIELDS.iter().copied().chain(tail).collect()
    }
}

/// A scalar entry parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScalarArg {
    /// A `uint32_t`.
    U32(u32),
    /// A `uint64_t`.
    U64(u64),
}

/// One entry parameter of a kernel: a buffer or a scalar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KernelParam {
    /// The device buffer.
    Buffer(FleetBuffer),
    /// The value.
    Scalar(ScalarArg),
}

/// How many of each per-VM thing a fleet has: the sizes of all its buffers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FleetShape {
    /// Memory and stack layout.
    pub layout: InterleavedLayout,
    /// Tables per VM (at least 1).
    pub num_tables: u32,
    /// Table element words per VM (at least 1).
    pub table_words: u32,
    /// Data plus element segments (at least 1).
    pub num_segments: u32,
    /// Result words per VM (at least 1).
    pub ret_words: u32,
    /// Most frames per VM.
    pub max_depth: u32,
    /// Bytes of the data blob.
    pub data_bytes: u64,
    /// References in the element blob.
    pub elem_refs: u64,
}

impl FleetShape {
    /// Elements of `buffer` (at least 1: devices have no empty buffers).
    pub fn len(&self, buffer: FleetBuffer) -> u64 {
        let n = self.layout.num_vms as u64;
        let len = match buffer {
            FleetBuffer::Mem => self.layout.mem_bytes(),
            FleetBuffer::Globals => n * self.layout.num_globals as u64,
            FleetBuffer::Tables => n * self.table_words as u64,
            FleetBuffer::TableSizes => n * self.num_tables as u64,
            FleetBuffer::Dropped => n * self.num_segments as u64,
            FleetBuffer::DataBlob => self.data_bytes,
            FleetBuffer::ElemBlob => self.elem_refs,
            FleetBuffer::Stack => n * self.layout.stack_words as u64,
            FleetBuffer::Ret => n * self.ret_words as u64,
            FleetBuffer::Vms => n,
            FleetBuffer::Image => self.image().words() as u64,
            FleetBuffer::Dirty => match self.layout.interleave {
                0 => self.layout.mem_bytes() >> DIRTY_PAGE_SHIFT,
                _ => 1,
            },
        };
        len.max(1)
    }

    /// Bytes of `buffer`.
    pub fn bytes(&self, buffer: FleetBuffer) -> u64 {
        self.len(buffer).saturating_mul(buffer.elem_bytes() as u64)
    }

    /// The scalar parameters.
    pub fn scalars(&self) -> FleetScalars {
        FleetScalars {
            mem_stride: self.layout.mem_stride(),
            num_vms: self.layout.num_vms,
            max_pages: self.layout.max_pages,
            stack_words: self.layout.stack_words,
            max_depth: self.max_depth,
            mem_host: 0,
        }
    }

    /// Where things are in the instantiation image.
    pub fn image(&self) -> ImageLayout {
        ImageLayout {
            globals: self.layout.num_globals,
            tables: self.num_tables,
            segments: self.num_segments,
        }
    }

    /// The byte range of VM `vm`'s control block in [`FleetBuffer::Vms`].
    pub fn control_bytes(&self, vm: u32) -> std::ops::Range<u64> {
        let size = size_of::<VmControl>() as u64;
        vm as u64 * size..(vm as u64 + 1) * size
    }
}

/// Where each part of the instantiation image lives (a word array the reset entry reads): the
/// initial pages, each global's initial word, each table's
/// initial size, and three words per segment (mode, offset, target table).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageLayout {
    globals: u32,
    tables: u32,
    segments: u32,
}

/// Segment modes in the image.
pub mod segment_mode {
    /// Passive: kept for `memory.init`/`table.init`.
    pub const PASSIVE: u64 = 0;
    /// Declared: dropped at instantiation, nothing copied.
    pub const DECLARED: u64 = 1;
    /// Active: copied at instantiation, then dropped.
    pub const ACTIVE: u64 = 2;
}

impl ImageLayout {
    /// Word: initial memory pages.
    pub const PAGES: usize = 0;
    const GLOBALS: usize = 1;

    /// Word of global `g`'s initial value.
    pub fn global(&self, g: u32) -> usize {
        Self::GLOBALS + g as usize
    }

    /// Word of table `t`'s initial size.
    pub fn table_size(&self, t: u32) -> usize {
        Self::GLOBALS + self.globals as usize + t as usize
    }

    /// First of segment `s`'s three words: mode ([`segment_mode`]), offset, target table.
    pub fn segment(&self, s: u32) -> usize {
        Self::GLOBALS + self.globals as usize + self.tables as usize + 3 * s as usize
    }

    /// Words of the image.
    pub fn words(&self) -> usize {
        self.segment(self.segments)
    }

    /// The C macros the reset entry reads the image with.
    pub(super) fn c_macros() -> String {
        format!(
            "#define WV_IMG_PAGES {}\n#define WV_IMG_GLOBAL(g) ({} + (g))\n\
             #define WV_IMG_TABLE_SIZE(t) ({} + WV_NUM_GLOBALS + (t))\n\
             #define WV_IMG_SEGMENT(s) ({} + WV_NUM_GLOBALS + WV_NUM_TABLES + 3 * (s)) /* mode, offset, table */\n\
             #define WV_SEGMENT_PASSIVE {}u\n#define WV_SEGMENT_DECLARED {}u\n#define WV_SEGMENT_ACTIVE {}u\n",
            Self::PAGES,
            Self::GLOBALS,
            Self::GLOBALS,
            Self::GLOBALS,
            segment_mode::PASSIVE,
            segment_mode::DECLARED,
            segment_mode::ACTIVE,
        )
    }
}

/// How many words per VM a per-VM array has: a kernel constant or a fleet scalar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PerVmWords {
    /// `stack_words`.
    Stack,
    /// `WV_NUM_GLOBALS`.
    Globals,
    /// `WV_RET_WORDS`.
    Ret,
    /// `WV_TABLE_WORDS`.
    TableWords,
    /// `WV_NUM_TABLES`.
    Tables,
    /// `WV_NUM_SEGMENTS`.
    Segments,
}

impl PerVmWords {
    fn c(self) -> &'static str {
        match self {
            PerVmWords::Stack => "f->stack_words",
            PerVmWords::Globals => "WV_NUM_GLOBALS",
            PerVmWords::Ret => "WV_RET_WORDS",
            PerVmWords::TableWords => "WV_TABLE_WORDS",
            PerVmWords::Tables => "WV_NUM_TABLES",
            PerVmWords::Segments => "WV_NUM_SEGMENTS",
        }
    }

    fn value(self, shape: &FleetShape) -> u64 {
        match self {
            PerVmWords::Stack => shape.layout.stack_words as u64,
            PerVmWords::Globals => shape.layout.num_globals as u64,
            PerVmWords::Ret => shape.ret_words as u64,
            PerVmWords::TableWords => shape.table_words as u64,
            PerVmWords::Tables => shape.num_tables as u64,
            PerVmWords::Segments => shape.num_segments as u64,
        }
    }
}

/// A per-VM array in one of the fleet's buffers: element `i` of VM `vm` is at
/// `vm * words + i`, or — for arrays that follow the interleave — word-interleaved at
/// `i * num_vms + vm` when the fleet interleaves (adjacent VMs touch adjacent words).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PerVmArray {
    /// The C accessor macro (`WV_STK`), which takes the element index.
    pub macro_name: &'static str,
    /// The buffer.
    pub buffer: FleetBuffer,
    /// Elements per VM.
    pub words: PerVmWords,
    /// Whether the array is word-interleaved when the fleet's memory is.
    pub follows_interleave: bool,
}

impl PerVmArray {
    /// Call-stack words.
    pub const STACK: PerVmArray = PerVmArray {
        macro_name: "WV_STK",
        buffer: FleetBuffer::Stack,
        words: PerVmWords::Stack,
        follows_interleave: true,
    };
    /// Globals.
    pub const GLOBALS: PerVmArray = PerVmArray {
        macro_name: "WV_GLB",
        buffer: FleetBuffer::Globals,
        words: PerVmWords::Globals,
        follows_interleave: true,
    };
    /// Result words.
    pub const RET: PerVmArray = PerVmArray {
        macro_name: "WV_RET",
        buffer: FleetBuffer::Ret,
        words: PerVmWords::Ret,
        follows_interleave: false,
    };
    /// Table element words (all tables of a VM, table `t` from `wv_table_base[t]`).
    pub const TABLE_WORDS: PerVmArray = PerVmArray {
        macro_name: "WV_TABLE_WORD",
        buffer: FleetBuffer::Tables,
        words: PerVmWords::TableWords,
        follows_interleave: false,
    };
    /// Table sizes.
    pub const TABLE_SIZES: PerVmArray = PerVmArray {
        macro_name: "WV_TABLE_SIZE",
        buffer: FleetBuffer::TableSizes,
        words: PerVmWords::Tables,
        follows_interleave: false,
    };
    /// Segment dropped flags.
    pub const DROPPED: PerVmArray = PerVmArray {
        macro_name: "WV_DROPPED",
        buffer: FleetBuffer::Dropped,
        words: PerVmWords::Segments,
        follows_interleave: false,
    };
    /// Every per-VM array.
    pub const ALL: [PerVmArray; 6] = [
        Self::STACK,
        Self::GLOBALS,
        Self::RET,
        Self::TABLE_WORDS,
        Self::TABLE_SIZES,
        Self::DROPPED,
    ];

    /// Element index of element `i` of VM `vm`.
    pub fn index(&self, shape: &FleetShape, vm: u32, i: u64) -> u64 {
        if self.follows_interleave && shape.layout.interleave != 0 {
            i * shape.layout.num_vms as u64 + vm as u64
        } else {
            vm as u64 * self.words.value(shape) + i
        }
    }

    /// Byte range of elements `[i, i + count)` of VM `vm`, when they are contiguous (always,
    /// unless the array is interleaved and `count > 1`).
    pub fn bytes(&self, shape: &FleetShape, vm: u32, i: u64, count: u64) -> std::ops::Range<u64> {
        let size = self.buffer.elem_bytes() as u64;
        let start = self.index(shape, vm, i) * size;
        start..start + count * size
    }

    /// The C accessor: `#define WV_STK(i) f->stack[...]`, for one setting of interleave.
    pub(super) fn c_macro(&self, interleaved: bool) -> String {
        let at = if self.follows_interleave && interleaved {
            "(uint64_t)(i) * f->num_vms + vm".to_string()
        } else {
            format!("(uint64_t)vm * {} + (i)", self.words.c())
        };
        format!(
            "#define {}(i) f->{}[{at}]",
            self.macro_name,
            self.buffer.name()
        )
    }
}

/// The bytes of control blocks, as they cross between host and device.
pub fn controls_as_bytes(controls: &[VmControl]) -> &[u8] {
    // SAFETY: `VmControl` is `repr(C)` integers without padding (checked at compile time), so
    // every byte is initialised; the slice covers exactly the blocks.
    unsafe { std::slice::from_raw_parts(controls.as_ptr().cast(), std::mem::size_of_val(controls)) }
}

/// The bytes of control blocks, writable: any bytes make valid blocks.
pub fn controls_as_bytes_mut(controls: &mut [VmControl]) -> &mut [u8] {
    // SAFETY: as above, and every bit pattern is a valid `VmControl` (all fields integers).
    unsafe {
        std::slice::from_raw_parts_mut(
            controls.as_mut_ptr().cast(),
            std::mem::size_of_val(controls),
        )
    }
}
