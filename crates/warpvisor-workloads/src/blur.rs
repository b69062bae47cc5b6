//! Blur-JPEG and Blur-BMP: decode a picture, Gaussian-blur it with `image`, encode it again in
//! the same format. JPEG adds a real codec (Huffman coding, DCT, and the indirect calls of
//! `image`'s decoder plumbing); BMP leaves mostly the blur.

use std::io::Cursor;

use image::{DynamicImage, ImageFormat};

use crate::inputs::{self, Rng};
use crate::WorkloadError;

/// Side of the benchmark's square pictures.
const SIDE: u32 = 256;
/// Standard deviation of the blur, in pixels.
const SIGMA: f32 = 2.0;
/// Quality of the re-encoded JPEG.
const JPEG_QUALITY: u8 = 85;

/// A random 256×256 picture as a JPEG.
pub fn jpeg_request(rng: &mut Rng) -> Vec<u8> {
    inputs::encode(&inputs::picture(rng, SIDE, SIDE), ImageFormat::Jpeg)
}

/// A random 256×256 picture as a 24-bit BMP.
pub fn bmp_request(rng: &mut Rng) -> Vec<u8> {
    inputs::encode(&inputs::picture(rng, SIDE, SIDE), ImageFormat::Bmp)
}

fn decode(request: &[u8], format: ImageFormat) -> Result<DynamicImage, WorkloadError> {
    image::load_from_memory_with_format(request, format)
        .map_err(|e| WorkloadError::new(format!("not a {format:?} image: {e}")))
}

/// Blurs a JPEG; replies with the blurred picture as a JPEG (quality 85).
pub fn blur_jpeg(request: &[u8]) -> Result<Vec<u8>, WorkloadError> {
    let blurred = decode(request, ImageFormat::Jpeg)?.blur(SIGMA);
    let mut out = Cursor::new(Vec::new());
    image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, JPEG_QUALITY)
        .encode_image(&blurred)
        .map_err(|e| WorkloadError::new(format!("encoding the JPEG: {e}")))?;
    Ok(out.into_inner())
}

/// Blurs a BMP; replies with the blurred picture as a BMP.
pub fn blur_bmp(request: &[u8]) -> Result<Vec<u8>, WorkloadError> {
    let blurred = decode(request, ImageFormat::Bmp)?.blur(SIGMA);
    let mut out = Cursor::new(Vec::new());
    blurred
        .write_to(&mut out, ImageFormat::Bmp)
        .map_err(|e| WorkloadError::new(format!("encoding the BMP: {e}")))?;
    Ok(out.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blurring_smooths_and_keeps_the_size() {
        let mut rng = inputs::rng(5, "blur");
        let request = bmp_request(&mut rng);
        let before = image::load_from_memory(&request).unwrap().to_rgb8();
        let reply = blur_bmp(&request).unwrap();
        let after = image::load_from_memory(&reply).unwrap().to_rgb8();
        assert_eq!(after.dimensions(), (SIDE, SIDE));
        // Neighbouring pixels differ less after a blur.
        let roughness = |img: &image::RgbImage| -> u64 {
            img.pixels()
                .zip(img.pixels().skip(1))
                .map(|(a, b)| a.0[0].abs_diff(b.0[0]) as u64)
                .sum()
        };
        assert!(roughness(&after) * 2 < roughness(&before));
        let jpeg = blur_jpeg(&jpeg_request(&mut rng)).unwrap();
        assert_eq!(&jpeg[..2], &[0xff, 0xd8]);
    }
}
