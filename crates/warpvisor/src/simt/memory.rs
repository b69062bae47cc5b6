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
/// a longer one is counted in proportion (a byte-exact walk of a 64 KiB copy by 32 lanes at
/// interleave 4 visits half a million cells).
const BULK_EXACT_BYTES: u64 = 4 << 10;

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
        if accesses.iter().all(|a| a.len <= 8) && distinct_vms(accesses) {
            return self.count_scalar(accesses);
        }
        self.count_general(accesses)
    }

    /// Accesses of at most 8 bytes by distinct VMs (every warp's loads and stores): at
    /// interleave 0 no two VMs share a sector (a VM's memory is a slab of at least 64 KiB),
    /// so each lane counts its own; interleaved, a lane's bytes lie in at most three cells.
    fn count_scalar(&mut self, accesses: &[LaneAccess]) -> [u64; 3] {
        let mut out = [0u64; 3];
        let stride = self.layouts[0].mem_stride();
        out[0] = accesses
            .iter()
            .map(|a| {
                let start = a.vm as u64 * stride + a.addr as u64;
                let end = start + a.len.max(1) as u64 - 1;
                end / SECTOR_BYTES - start / SECTOR_BYTES + 1
            })
            .sum();
        for k in 1..3 {
            let cell = INTERLEAVES[k] as u64;
            let row = self.layouts[k].num_vms as u64 * cell;
            self.scratch.clear();
            for a in accesses {
                let mut at = a.addr as u64;
                let end = at + a.len.max(1) as u64;
                while at < end {
                    let n = (cell - at % cell).min(end - at);
                    let p = (at / cell) * row + a.vm as u64 * cell + at % cell;
                    let (first, last) = (p / SECTOR_BYTES, (p + n - 1) / SECTOR_BYTES);
                    self.scratch.push(first);
                    if last != first {
                        self.scratch.push(last);
                    }
                    at += n;
                }
            }
            out[k] = distinct(&mut self.scratch);
        }
        out
    }

    /// Any accesses: every byte range through the layout.
    fn count_general(&mut self, accesses: &[LaneAccess]) -> [u64; 3] {
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
            let n = distinct(&mut self.scratch);
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

/// The distinct sectors in `sectors`.
fn distinct(sectors: &mut Vec<u64>) -> u64 {
    // Consecutive VMs at one offset give ascending sectors: no sort needed then.
    if !sectors.is_sorted() {
        sectors.sort_unstable();
    }
    sectors.dedup();
    sectors.len() as u64
}

/// Whether no two accesses come from the same VM (lanes of a warp are distinct VMs unless
/// the traced fleet was smaller than the warp).
fn distinct_vms(accesses: &[LaneAccess]) -> bool {
    accesses.windows(2).all(|w| w[0].vm < w[1].vm) || {
        let mut vms: Vec<u32> = accesses.iter().map(|a| a.vm).collect();
        vms.sort_unstable();
        vms.windows(2).all(|w| w[0] != w[1])
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
    fn the_scalar_path_counts_as_the_general_one() {
        let mut c = SectorCounter::new(48, 2);
        for (len, stride, base) in [
            (1, 1, 0),
            (2, 2, 30),
            (4, 4, 62),
            (8, 4, 125),
            (8, 8, 4),
            (4, 36, 7),
        ] {
            for n in [1u32, 5, 32] {
                let a: Vec<LaneAccess> = (0..n)
                    .map(|v| LaneAccess {
                        vm: v + 3,
                        addr: base + stride * (v * 7 % n),
                        len,
                    })
                    .collect();
                assert_eq!(
                    c.count_scalar(&a),
                    c.count_general(&a),
                    "{len} {stride} {base} {n}"
                );
            }
        }
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
