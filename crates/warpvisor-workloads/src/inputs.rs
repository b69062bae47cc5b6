//! The seeded generator of every benchmark's requests: synthetic pictures, passwords, tweets
//! and response-time logs. Nothing is downloaded; the same seed gives the same bytes on every
//! machine (ChaCha8 is specified to be reproducible across `rand_chacha` versions).

use image::{ImageFormat, RgbImage};
use rand::seq::IndexedRandom;
use rand::{RngExt, SeedableRng};

/// The generator's random stream.
pub type Rng = rand_chacha::ChaCha8Rng;

/// The stream of `seed` for the benchmark called `name` (each benchmark its own stream).
pub fn rng(seed: u64, name: &str) -> Rng {
    // FNV-1a of the name, mixed into the seed.
    let h = name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    });
    Rng::seed_from_u64(seed ^ h)
}

/// A random `width`×`height` picture: a two-colour gradient, a few filled discs and bars,
/// and per-pixel noise — something between a photo and white noise, so that codecs and
/// blurs do realistic work.
pub fn picture(rng: &mut Rng, width: u32, height: u32) -> RgbImage {
    let c0: [u8; 3] = rng.random();
    let c1: [u8; 3] = rng.random();
    let mut img = RgbImage::from_fn(width, height, |x, y| {
        let t = (x + y) as f32 / (width + height) as f32;
        image::Rgb(std::array::from_fn(|k| {
            (c0[k] as f32 * (1.0 - t) + c1[k] as f32 * t) as u8
        }))
    });
    for _ in 0..rng.random_range(4..10) {
        let colour: [u8; 3] = rng.random();
        let cx = rng.random_range(0..width) as i64;
        let cy = rng.random_range(0..height) as i64;
        let r = rng.random_range(4..width.max(8) as i64 / 3);
        let disc = rng.random_bool(0.5);
        for y in 0..height as i64 {
            for x in 0..width as i64 {
                let (dx, dy) = (x - cx, y - cy);
                let inside = if disc {
                    dx * dx + dy * dy <= r * r
                } else {
                    dx.abs() <= r && dy.abs() <= r / 3
                };
                if inside {
                    img.put_pixel(x as u32, y as u32, image::Rgb(colour));
                }
            }
        }
    }
    for p in img.pixels_mut() {
        for c in &mut p.0 {
            *c = c.saturating_add_signed(rng.random_range(-12i8..=12));
        }
    }
    img
}

/// `img` encoded as `format` (JPEG at quality 90).
pub fn encode(img: &RgbImage, format: ImageFormat) -> Vec<u8> {
    let mut out = std::io::Cursor::new(Vec::new());
    let written = if format == ImageFormat::Jpeg {
        image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, 90).encode_image(img)
    } else {
        img.write_to(&mut out, format)
    };
    // Encoding an in-memory RGB8 image into a Vec only fails on a bug in `image`.
    if let Err(e) = written {
        panic!("encoding a generated picture as {format:?}: {e}");
    }
    out.into_inner()
}

/// Characters of Cisco's and crypt's base64 alphabet.
pub const CRYPT_ALPHABET: &[u8] =
    b"./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// Whether `b` is in [`CRYPT_ALPHABET`]. Range comparisons without a search: a linear
/// search of the alphabet ends at a different place for every character, and on a GPU the
/// lanes that finish it early wait — `warpvisor simt` found that this check, as
/// `CRYPT_ALPHABET.contains(&b)`, left PBKDF2's warps 3% efficient (docs/simt.md).
pub fn is_crypt_char(b: u8) -> bool {
    (b'.'..=b'9').contains(&b) | b.is_ascii_uppercase() | b.is_ascii_lowercase()
}

/// A password of 8 to 20 printable ASCII characters.
pub fn password(rng: &mut Rng) -> String {
    let len = rng.random_range(8..=20);
    (0..len)
        .map(|_| rng.random_range(b'!'..=b'~') as char)
        .collect()
}

/// `len` characters of the crypt alphabet (a Cisco type 8 salt is 14).
pub fn salt(rng: &mut Rng, len: usize) -> String {
    (0..len)
        .map(|_| *CRYPT_ALPHABET.choose(rng).unwrap_or(&b'.') as char)
        .collect()
}

#[cfg(test)]
#[test]
fn the_crypt_character_test_is_the_alphabet() {
    for b in 0..=255u8 {
        assert_eq!(is_crypt_char(b), CRYPT_ALPHABET.contains(&b), "{b}");
    }
}

const STOP_WORDS_USED: &[&str] = &[
    "the", "a", "an", "and", "or", "but", "if", "of", "to", "in", "on", "at", "for", "with", "is",
    "are", "was", "be", "been", "it", "this", "that", "i", "you", "we", "they", "my", "your", "so",
    "just", "not", "no", "all", "can", "will", "do", "have", "has", "me", "our", "from", "about",
    "what", "when", "how", "out", "up", "more", "very", "too",
];

const WORDS: &[&str] = &[
    "gpu",
    "kernel",
    "server",
    "latency",
    "throughput",
    "coffee",
    "morning",
    "deploy",
    "friday",
    "rust",
    "compiler",
    "bug",
    "fixed",
    "release",
    "today",
    "team",
    "launch",
    "great",
    "love",
    "hate",
    "waiting",
    "build",
    "cloud",
    "cost",
    "fast",
    "slow",
    "memory",
    "cache",
    "benchmark",
    "numbers",
    "results",
    "paper",
    "conference",
    "deadline",
    "weekend",
    "music",
    "game",
    "match",
    "city",
    "rain",
    "sunny",
    "traffic",
    "train",
    "flight",
    "delayed",
    "pizza",
    "lunch",
    "dinner",
    "meeting",
    "email",
    "phone",
    "battery",
    "update",
    "security",
    "password",
    "database",
    "query",
    "index",
    "thread",
    "warp",
    "vector",
    "image",
    "blur",
    "hash",
    "compress",
    "café",
    "naïve",
    "résumé",
    "straße",
    "日本",
    "東京",
];

const HASHTAGS: &[&str] = &[
    "#rustlang",
    "#gpu",
    "#cuda",
    "#opencl",
    "#webassembly",
    "#serverless",
    "#cloud",
    "#devops",
    "#100DaysOfCode",
    "#MondayMotivation",
    "#tbt",
    "#coffee",
    "#weekend",
    "#benchmark",
    "#ai",
];

const EMOJI: &[&str] = &["🚀", "🔥", "😂", "👍", "🎉", "☕", "🤔"];

/// A tweet-like line: 8 to 30 tokens of words, stop words, hashtags, mentions, links and
/// emoji, with some capitals and punctuation.
pub fn tweet(rng: &mut Rng) -> String {
    let n = rng.random_range(8..=30);
    let mut out = String::new();
    for i in 0..n {
        if i > 0 {
            out.push(' ');
        }
        let pick = rng.random_range(0..100);
        let token = match pick {
            0..=34 => pick_from(rng, STOP_WORDS_USED).to_string(),
            35..=74 => pick_from(rng, WORDS).to_string(),
            75..=86 => pick_from(rng, HASHTAGS).to_string(),
            87..=92 => format!("@user{}", rng.random_range(0..5000)),
            93..=95 => format!("https://t.co/{}", salt(rng, 10)),
            _ => pick_from(rng, EMOJI).to_string(),
        };
        let token = if i == 0 || rng.random_bool(0.08) {
            capitalize(&token)
        } else {
            token
        };
        out.push_str(&token);
        if rng.random_bool(0.1) {
            out.push(*[',', '.', '!', '?'].choose(rng).unwrap_or(&'.'));
        }
    }
    out
}

fn pick_from<'a>(rng: &mut Rng, words: &[&'a str]) -> &'a str {
    words.choose(rng).copied().unwrap_or("")
}

fn capitalize(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(first) => first.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

/// Tweets, one per line, until at least `bytes` bytes.
pub fn tweet_text(rng: &mut Rng, bytes: usize) -> String {
    let mut out = String::new();
    while out.len() < bytes {
        out.push_str(&tweet(rng));
        out.push('\n');
    }
    out
}

/// `n` response times in microseconds: mostly log-normal around a few milliseconds, with a
/// slow tail (1% of requests 20 to 200 times slower).
pub fn response_times(rng: &mut Rng, n: usize) -> Vec<u64> {
    let median_us = rng.random_range(800.0..4000.0f64);
    (0..n)
        .map(|_| {
            // Sum of uniforms: close enough to a normal for a synthetic log.
            let z: f64 = (0..6).map(|_| rng.random::<f64>()).sum::<f64>() - 3.0;
            let mut t = median_us * (0.6 * z).exp();
            if rng.random_bool(0.01) {
                t *= rng.random_range(20.0..200.0);
            }
            t.max(1.0) as u64
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pictures_are_seeded_and_varied() {
        let a = picture(&mut rng(1, "t"), 64, 48);
        assert_eq!(a, picture(&mut rng(1, "t"), 64, 48));
        assert_ne!(a, picture(&mut rng(2, "t"), 64, 48));
        assert_eq!(a.dimensions(), (64, 48));
        let distinct: std::collections::BTreeSet<_> = a.pixels().map(|p| p.0).collect();
        assert!(distinct.len() > 100, "only {} colours", distinct.len());
    }

    #[test]
    fn text_generators_follow_their_formats() {
        let mut r = rng(3, "t");
        let s = salt(&mut r, 14);
        assert_eq!(s.len(), 14);
        assert!(s.bytes().all(|b| CRYPT_ALPHABET.contains(&b)));
        assert!(s.bytes().all(is_crypt_char));
        let p = password(&mut r);
        assert!((8..=20).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_graphic()));
        let t = tweet_text(&mut r, 2000);
        assert!(t.len() >= 2000 && t.lines().count() > 10);
        assert!(t.contains('#'));
        let times = response_times(&mut r, 1000);
        assert!(times.iter().all(|&t| t >= 1));
        assert!(times.iter().max() > times.iter().min());
    }
}
