//! PHash-Modified: blockhash written for this suite so that every VM takes the same branches
//! (the paper's "modified blockhash library", `vectorvisor.md` Table 2). Control flow depends
//! only on the picture's size, never on its pixels:
//!
//! - block sums use exact integer weights: a pixel's share of each of the (at most two by two)
//!   blocks it overlaps, so no "is this pixel on a block edge" branch;
//! - each band's median comes from ranks counted over all pairs (a fixed 64×64 loop) instead
//!   of a data-dependent sort;
//! - a bit is `2·value > low + high` of the two middle values, exactly, without floats.
//!
//! Requests are the same PNGs as PHash's; the decoder still branches on the data.

use crate::phash::{decode, HASH_SIDE};
use crate::{hex, WorkloadError};

const BITS: usize = HASH_SIDE as usize;
const BLOCKS: usize = BITS * BITS;
/// Blocks per band: the median is taken over each quarter of the hash.
const BAND: usize = BLOCKS / 4;

/// Replies with the 256-bit hash in hex and a newline.
pub fn run(request: &[u8]) -> Result<Vec<u8>, WorkloadError> {
    let img = decode(request)?.to_rgb8();
    let (w, h) = img.dimensions();
    if (w as usize) < BITS || (h as usize) < BITS {
        return Err(WorkloadError::new(format!(
            "the picture is {w}x{h}; blockhash needs at least {BITS}x{BITS}"
        )));
    }
    let blocks = block_sums(&img);
    let mut hash = [0u8; BLOCKS / 8];
    for band in 0..4 {
        let values = &blocks[band * BAND..(band + 1) * BAND];
        let (low, high) = middle_pair(values);
        for (i, &v) in values.iter().enumerate() {
            let bit = band * BAND + i;
            hash[bit / 8] |= u8::from(2 * v > low + high) << (7 - bit % 8);
        }
    }
    Ok(format!("{}\n", hex(&hash)).into_bytes())
}

/// The block (first block index, weight in it, weight in the next) of pixel `p` along an axis
/// of `size` pixels, in units where a pixel is `BITS` wide and a block `size` wide.
fn split(p: u32, size: u32) -> (usize, u64, u64) {
    let start = p as u64 * BITS as u64;
    let first = (start / size as u64) as usize;
    let in_first = ((first as u64 + 1) * size as u64).min(start + BITS as u64) - start;
    (first, in_first, BITS as u64 - in_first)
}

/// Sum of R+G+B over each block, each pixel weighted by the area it shares with the block.
fn block_sums(img: &image::RgbImage) -> [u64; BLOCKS] {
    let (w, h) = img.dimensions();
    let mut blocks = [0u64; BLOCKS];
    for y in 0..h {
        let (by, wy0, wy1) = split(y, h);
        let by1 = (by + 1).min(BITS - 1);
        for x in 0..w {
            let (bx, wx0, wx1) = split(x, w);
            let bx1 = (bx + 1).min(BITS - 1);
            let [r, g, b] = img.get_pixel(x, y).0;
            let v = r as u64 + g as u64 + b as u64;
            // A zero weight adds nothing, so the clamped indices at the last block are harmless.
            blocks[by * BITS + bx] += v * wy0 * wx0;
            blocks[by * BITS + bx1] += v * wy0 * wx1;
            blocks[by1 * BITS + bx] += v * wy1 * wx0;
            blocks[by1 * BITS + bx1] += v * wy1 * wx1;
        }
    }
    blocks
}

/// The two middle values of `values` in sorted order, found by rank: value i's rank counts the
/// values below it, ties broken by position, so ranks are a permutation.
fn middle_pair(values: &[u64]) -> (u64, u64) {
    let n = values.len();
    let (mut low, mut high) = (0u64, 0u64);
    for (i, &v) in values.iter().enumerate() {
        let rank: usize = values
            .iter()
            .enumerate()
            .map(|(j, &u)| usize::from(u < v || (u == v && j < i)))
            .sum();
        low += v * u64::from(rank == n / 2 - 1);
        high += v * u64::from(rank == n / 2);
    }
    (low, high)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pixel_weights_cover_every_pixel_once() {
        for size in [16u32, 17, 200, 256] {
            let mut per_block = vec![0u64; BITS];
            for p in 0..size {
                let (b, w0, w1) = split(p, size);
                assert_eq!(w0 + w1, BITS as u64);
                per_block[b] += w0;
                if w1 > 0 {
                    per_block[b + 1] += w1;
                }
            }
            assert!(
                per_block.iter().all(|&c| c == size as u64),
                "{size}: {per_block:?}"
            );
        }
    }

    #[test]
    fn the_middle_pair_is_the_sorted_middle() {
        let values: Vec<u64> = (0..64u64).map(|i| (i * 37) % 11).collect();
        let mut sorted = values.clone();
        sorted.sort_unstable();
        assert_eq!(middle_pair(&values), (sorted[31], sorted[32]));
    }

    #[test]
    fn the_hash_sees_bright_and_dark_halves() {
        let img = image::RgbImage::from_fn(200, 200, |x, _| {
            image::Rgb(if x < 100 { [250; 3] } else { [5; 3] })
        });
        let png = crate::inputs::encode(&img, image::ImageFormat::Png);
        let reply = String::from_utf8(run(&png).unwrap()).unwrap();
        // Every row: the left 8 blocks are bright (1 bits), the right 8 dark.
        assert_eq!(reply.trim_end(), "ff00".repeat(16));
    }
}
