//! Build script: a fingerprint of the RISC-V translator's sources, which keys cached
//! translations (`riscv::translate_cached`) so that a changed translator never reuses a
//! translation an older one made.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::Path;

fn hash_dir(dir: &Path, h: &mut DefaultHasher) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut paths: Vec<_> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    for p in paths {
        if p.is_dir() {
            hash_dir(&p, h);
        } else if let Ok(bytes) = std::fs::read(&p) {
            p.file_name().hash(h);
            bytes.hash(h);
        }
    }
}

fn main() {
    let dir = Path::new("src/riscv");
    println!("cargo:rerun-if-changed=src/riscv");
    let mut h = DefaultHasher::new();
    hash_dir(dir, &mut h);
    println!(
        "cargo:rustc-env=WARPVISOR_RISCV_TRANSLATOR={:016x}",
        h.finish()
    );
}
