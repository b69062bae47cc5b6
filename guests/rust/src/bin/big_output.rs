//! Prints N lines (default 2000) of 60 characters plus a newline.
//! Second argument `buf` writes through a 64 KiB BufWriter (few large fd_write calls) instead of
//! the default line-buffered stdout (one fd_write per line).
use std::io::{self, BufWriter, Write};

fn main() {
    let n: u64 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(2000);
    let buffered = std::env::args().nth(2).as_deref() == Some("buf");
    let stdout = io::stdout();
    let mut out: Box<dyn Write> = if buffered {
        Box::new(BufWriter::with_capacity(1 << 16, stdout.lock()))
    } else {
        Box::new(stdout.lock())
    };
    const ALPHA: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    let mut sum: u64 = 0;
    for i in 0..n {
        let tail: String = (0..40).map(|j| ALPHA[((i * 7 + j * 13) % ALPHA.len() as u64) as usize] as char).collect();
        let line = format!("{i:08} {:08x} {tail} |", i.wrapping_mul(2654435761) & 0xffff_ffff);
        sum = sum.wrapping_add(line.bytes().map(u64::from).sum::<u64>());
        writeln!(out, "{line}").expect("write stdout");
    }
    out.flush().expect("flush");
    drop(out);
    eprintln!("big_output: {n} lines, byte sum {sum}");
}
