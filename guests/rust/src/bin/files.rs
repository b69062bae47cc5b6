//! File system through a preopened directory mapped at `/data`. The first argument names a file
//! inside it (default `input.txt`). Reads it, writes `/data/out-<name>` (lines reversed in order,
//! ASCII upper-cased, each prefixed with its number), reads that back, appends a trailer, and lists
//! the directory sorted by name.
use std::fs;
use std::io::Write;

fn main() {
    let name = std::env::args().nth(1).unwrap_or_else(|| "input.txt".to_string());
    let src = format!("/data/{name}");
    let text = match fs::read_to_string(&src) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("cannot read {src}: {e}");
            std::process::exit(2);
        }
    };
    println!("read {src}: {} bytes, {} lines", text.len(), text.lines().count());
    let out: String = text
        .lines()
        .rev()
        .enumerate()
        .map(|(i, l)| format!("{:03}: {}\n", i + 1, l.to_ascii_uppercase()))
        .collect();
    let dst = format!("/data/out-{name}");
    fs::write(&dst, &out).expect("write output");
    println!("wrote {dst}: {} bytes", out.len());
    let back = fs::read(&dst).expect("read back");
    println!("read back {} bytes, identical={}", back.len(), back == out.as_bytes());
    let mut f = fs::OpenOptions::new().append(true).open(&dst).expect("open for append");
    writeln!(f, "-- {} lines from {name} --", text.lines().count()).expect("append");
    drop(f);
    println!("after append: {} bytes", fs::metadata(&dst).expect("metadata").len());
    let mut entries: Vec<(String, u64, bool)> = fs::read_dir("/data")
        .expect("read_dir")
        .map(|e| {
            let e = e.expect("dir entry");
            let md = e.metadata().expect("entry metadata");
            (e.file_name().to_string_lossy().into_owned(), md.len(), md.is_dir())
        })
        .collect();
    entries.sort();
    println!("/data has {} entries:", entries.len());
    for (n, len, dir) in &entries {
        if *dir {
            println!("  {n}/");
        } else {
            println!("  {n} {len}");
        }
    }
}
