//! PHash: the blockhash.io perceptual hash of a picture, computed by `image_hasher` as a real
//! service would call it (`vectorvisor.md` §4.1, "Example Functions").

use image::ImageFormat;
use image_hasher::{HashAlg, HasherConfig};

use crate::inputs::{self, Rng};
use crate::WorkloadError;

/// Side of the benchmark's square pictures (the paper's 200×200).
const SIDE: u32 = 200;
/// Bits per side of the hash: 16×16 = 256 bits.
pub const HASH_SIDE: u32 = 16;

/// A random 200×200 picture as a PNG (both PHash benchmarks use these requests).
pub fn request(rng: &mut Rng) -> Vec<u8> {
    inputs::encode(&inputs::picture(rng, SIDE, SIDE), ImageFormat::Png)
}

/// Decodes a PNG request.
pub(crate) fn decode(request: &[u8]) -> Result<image::DynamicImage, WorkloadError> {
    image::load_from_memory_with_format(request, ImageFormat::Png)
        .map_err(|e| WorkloadError::new(format!("not a PNG image: {e}")))
}

/// Replies with the 256-bit blockhash of a PNG in base64 and a newline.
pub fn run(request: &[u8]) -> Result<Vec<u8>, WorkloadError> {
    let img = decode(request)?;
    let hasher = HasherConfig::new()
        .hash_alg(HashAlg::Blockhash)
        .hash_size(HASH_SIDE, HASH_SIDE)
        .to_hasher();
    Ok(format!("{}\n", hasher.hash_image(&img).to_base64()).into_bytes())
}
