//! Reads all of stdin and prints line, word and byte counts plus FNV-1a and Adler-32 checksums.
use std::io::Read;

fn main() {
    let mut data = Vec::new();
    std::io::stdin().read_to_end(&mut data).expect("read stdin");
    let lines = data.iter().filter(|&&b| b == b'\n').count();
    let words = data.split(|b| b.is_ascii_whitespace()).filter(|w| !w.is_empty()).count();
    let mut fnv: u32 = 0x811c_9dc5;
    let (mut a, mut b) = (1u32, 0u32);
    for &byte in &data {
        fnv = (fnv ^ byte as u32).wrapping_mul(0x0100_0193);
        a = (a + byte as u32) % 65521;
        b = (b + a) % 65521;
    }
    let longest = data.split(|&c| c == b'\n').map(|l| l.len()).max().unwrap_or(0);
    println!("lines={lines} words={words} bytes={}", data.len());
    println!("longest_line={longest}");
    println!("fnv1a32={fnv:08x} adler32={:08x}", (b << 16) | a);
}
