//! LZ4: block compression (`lz4_flex`) of a batch of tweets — fast, byte-heavy work.

use crate::inputs::{self, Rng};
use crate::WorkloadError;

/// Bytes of text per request.
const TEXT: usize = 32 << 10;

/// At least 32 KiB of tweets, one per line.
pub fn request(rng: &mut Rng) -> Vec<u8> {
    inputs::tweet_text(rng, TEXT).into_bytes()
}

/// Replies with the LZ4 block of the request, its length prepended (`compress_prepend_size`).
pub fn run(request: &[u8]) -> Result<Vec<u8>, WorkloadError> {
    Ok(lz4_flex::compress_prepend_size(request))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compression_round_trips_and_shrinks_text() {
        let text = request(&mut inputs::rng(4, "lz4"));
        let packed = run(&text).unwrap();
        assert!(
            packed.len() < text.len() * 3 / 4,
            "{} of {}",
            packed.len(),
            text.len()
        );
        assert_eq!(lz4_flex::decompress_size_prepended(&packed).unwrap(), text);
    }
}
