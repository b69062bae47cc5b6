//! Fleet layout: where each VM's bytes and words live in the fleet's buffers. The kernel
//! prelude computes the same addresses (`wv_cell`, `WV_STK`, `WV_GLB`); the two are tested
//! against each other.

/// Bytes in a WebAssembly page.
pub const PAGE: u64 = 65536;

/// Bytes of inaccessible memory after a VM's 4 GiB of addresses when memories have guard
/// regions (`WV_GUARD_BYTES`): an access whose static offset and width together fit in it
/// needs no check. wasmtime's default guard size.
pub const GUARD_BYTES: u64 = 32 << 20;

/// Bytes reserved per VM when memories have guard regions: every address a 32-bit memory can
/// name (`addr + offset` with `offset + width <=` [`GUARD_BYTES`]) lies inside.
pub const GUARD_STRIDE: u64 = (4 << 30) + GUARD_BYTES;

/// The interleaved layout of one fleet (DESIGN.md, decision 2):
/// `cell_addr = (offset / I) * (num_vms * I) + vm * I`, or contiguous per VM when `I = 0`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InterleavedLayout {
    /// VMs in the fleet.
    pub num_vms: u32,
    /// Bytes per cell: 0, 4 or 8.
    pub interleave: u32,
    /// Pages reserved per VM.
    pub max_pages: u32,
    /// Call-stack words per VM.
    pub stack_words: u32,
    /// Globals per VM (at least 1).
    pub num_globals: u32,
    /// Whether each VM's memory sits in a reservation of [`GUARD_STRIDE`] bytes, accessible
    /// only up to its current size (`MemoryChecks::Guard`; interleave 0 only).
    pub guard_regions: bool,
}

impl InterleavedLayout {
    /// Bytes reserved for one VM's memory.
    pub fn mem_stride(&self) -> u64 {
        if self.guard_regions {
            GUARD_STRIDE
        } else {
            self.max_pages as u64 * PAGE
        }
    }

    /// Bytes of the whole memory buffer.
    pub fn mem_bytes(&self) -> u64 {
        self.mem_stride() * self.num_vms as u64
    }

    /// Buffer index of byte `offset` of VM `vm`'s memory.
    pub fn cell_addr(&self, vm: u32, offset: u64) -> usize {
        let addr = match std::num::NonZeroU64::new(self.interleave as u64) {
            None => vm as u64 * self.mem_stride() + offset,
            Some(i) => {
                let i = i.get();
                (offset / i) * (self.num_vms as u64 * i) + vm as u64 * i + offset % i
            }
        };
        addr as usize
    }

    /// The byte ranges of the memory buffer that hold VM `vm`'s bytes `[offset, offset + len)`,
    /// in order: one range without interleaving, one per cell with it.
    pub fn memory_ranges(
        &self,
        vm: u32,
        offset: u64,
        len: u64,
    ) -> impl Iterator<Item = std::ops::Range<u64>> + '_ {
        let mut done = 0u64;
        std::iter::from_fn(move || {
            if done >= len {
                return None;
            }
            let at = offset + done;
            let n = match self.interleave as u64 {
                0 => len - done,
                cell => (cell - at % cell).min(len - done),
            };
            let start = self.cell_addr(vm, at) as u64;
            done += n;
            Some(start..start + n)
        })
    }

    /// Buffer index of call-stack word `word` of VM `vm`.
    pub fn stack_index(&self, vm: u32, word: u32) -> usize {
        if self.interleave == 0 {
            vm as usize * self.stack_words as usize + word as usize
        } else {
            word as usize * self.num_vms as usize + vm as usize
        }
    }

    /// Buffer index of global `g` of VM `vm`.
    pub fn global_index(&self, vm: u32, g: u32) -> usize {
        if self.interleave == 0 {
            vm as usize * self.num_globals as usize + g as usize
        } else {
            g as usize * self.num_vms as usize + vm as usize
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(interleave: u32) -> InterleavedLayout {
        InterleavedLayout {
            num_vms: 3,
            interleave,
            max_pages: 1,
            stack_words: 16,
            num_globals: 2,
            guard_regions: false,
        }
    }

    #[test]
    fn cells_of_different_vms_never_collide() {
        for i in [0, 4, 8] {
            let l = layout(i);
            let mut seen = std::collections::HashSet::new();
            for vm in 0..3 {
                for off in 0..PAGE {
                    assert!(
                        seen.insert(l.cell_addr(vm, off)),
                        "interleave {i}: collision"
                    );
                    assert!((l.cell_addr(vm, off) as u64) < l.mem_bytes());
                }
            }
        }
    }

    #[test]
    fn memory_ranges_cover_the_bytes_in_order() {
        for i in [0, 4, 8] {
            let l = layout(i);
            let ranges: Vec<_> = l.memory_ranges(1, 5, 37).collect();
            let bytes: Vec<u64> = ranges.iter().flat_map(|r| r.clone()).collect();
            let expected: Vec<u64> = (5..42).map(|o| l.cell_addr(1, o) as u64).collect();
            assert_eq!(bytes, expected, "interleave {i}");
        }
    }

    #[test]
    fn interleave_follows_the_design_formula() {
        let l = layout(4);
        // VM 1, offset 5: cell 1 of VM 1 = (5/4)*(3*4) + 1*4 + 1
        assert_eq!(l.cell_addr(1, 5), 12 + 4 + 1);
        let l = layout(8);
        assert_eq!(l.cell_addr(2, 17), 2 * 24 + 16 + 1);
        let l = layout(0);
        assert_eq!(l.cell_addr(2, 17), 2 * 65536 + 17);
    }
}
