//! Memory coalescing: the 32-byte sectors one warp memory instruction touches, computed
//! through the fleet's real layout ([`InterleavedLayout`]) for each interleave the report
//! compares. Lanes are VMs, so whether their accesses merge depends on where the fleet puts
//! each VM's bytes: with interleave 0 every VM's memory is its own slab and no two lanes
//! share a sector; with interleave 4 or 8 the same offset of consecutive VMs is adjacent.

use crate::layout::InterleavedLayout;

/// The interleaves compared (`--interleave`).
pub const INTERLEAVES: [u32; 3] = [0, 4, 8];
/// Bytes of a memory transaction (a sector of a GPU's L1/L2 line).
pub const SECTOR_BYTES: u64 = 32;
/// Bytes of one lane's bulk access (`memory.copy`/`fill`/`init`) counted exactly; the rest of
/// a longer one is counted in proportion.
const BULK_EXACT_BYTES: u64 = 64 << 10;

/// One lane's access within a warp memory instruction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaneAccess {
    /// The lane's VM in the fleet.
    pub vm: u32,
    /// First byte's address in its memory.
    pub addr: u32,
    /// Bytes.
    pub len: u32,
}

/// Counts sectors under each of [`INTERLEAVES`].
#[derive(Debug, Clone)]
pub struct SectorCounter {
    layouts: Vec<InterleavedLayout>,
    scratch: Vec<u64>,
}

impl SectorCounter {
    /// A counter for a fleet of `num_vms` VMs of `max_pages` pages each.
    pub fn new(num_vms: u32, max_pages: u32) -> SectorCounter {
        SectorCounter {
            layouts: INTERLEAVES
                .iter()
                .map(|&interleave| InterleavedLayout {
                    num_vms: num_vms.max(1),
                    interleave,
                    max_pages: max_pages.max(1),
                    stack_words: 1,
                    num_globals: 1,
                    guard_regions: false,
                })
                .collect(),
            scratch: Vec::new(),
        }
    }

    /// The sectors `accesses` (one warp instruction's) touch under each interleave.
    pub fn count(&mut self, accesses: &[LaneAccess]) -> [u64; 3] {
        let mut out = [0u64; 3];
        for (k, layout) in self.layouts.iter().enumerate() {
            self.scratch.clear();
            let mut scale_num = 0u64;
            let mut scale_den = 0u64;
            for a in accesses {
                let len = a.len as u64;
                let exact = len.min(BULK_EXACT_BYTES);
                scale_num += len;
                scale_den += exact;
                for r in layout.memory_ranges(a.vm, a.addr as u64, exact) {
                    if r.is_empty() {
                        continue;
                    }
                    let (first, last) = (r.start / SECTOR_BYTES, (r.end - 1) / SECTOR_BYTES);
                    self.scratch.extend(first..=last);
                }
            }
            // Consecutive VMs at one offset give ascending sectors: no sort needed then.
            if !self.scratch.is_sorted() {
                self.scratch.sort_unstable();
            }
            self.scratch.dedup();
            let n = self.scratch.len() as u64;
            out[k] = if scale_den == 0 || scale_num == scale_den {
                n
            } else {
                // Long bulk accesses: the exact part's sectors per byte, over every byte.
                (n as u128 * scale_num as u128).div_ceil(scale_den as u128) as u64
            };
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lanes(n: u32, addr: impl Fn(u32) -> u32, len: u32) -> Vec<LaneAccess> {
        (0..n)
            .map(|vm| LaneAccess {
                vm,
                addr: addr(vm),
                len,
            })
            .collect()
    }

    #[test]
    fn thirty_two_lanes_at_the_same_offset_coalesce_only_when_interleaved() {
        let mut c = SectorCounter::new(64, 1);
        // 4-byte accesses, same offset: 32 sectors apart; 128 bytes; 256 bytes (half used).
        assert_eq!(c.count(&lanes(32, |_| 100, 4)), [32, 4, 8]);
        // 8-byte accesses: two 4-byte cells 32*4*... apart at interleave 4.
        assert_eq!(c.count(&lanes(32, |_| 96, 8)), [32, 8, 8]);
        // One byte each: interleave 8 puts 32 bytes of use in 256.
        assert_eq!(c.count(&lanes(32, |_| 5, 1)), [32, 4, 8]);
    }

    #[test]
    fn strided_offsets_spread_over_more_sectors() {
        let mut c = SectorCounter::new(32, 1);
        // Lane v reads offset 4v: interleave 0 still one sector per lane (different slabs).
        assert_eq!(c.count(&lanes(32, |v| 4 * v, 4))[0], 32);
        // Interleave 4: offset 4v is row v; row v of the 32 lanes is 128 bytes; lane v's cell
        // is at v*128 + v*4: each in its own sector.
        assert_eq!(c.count(&lanes(32, |v| 4 * v, 4))[1], 32);
    }

    #[test]
    fn a_long_bulk_access_counts_in_proportion() {
        let mut c = SectorCounter::new(1, 4);
        let one = c.count(&lanes(1, |_| 0, 64 << 10));
        let two = c.count(&lanes(1, |_| 0, 128 << 10));
        assert_eq!(one[0], 2048);
        assert_eq!(two[0], 4096);
    }
}
