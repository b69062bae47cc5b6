//! Build script: fingerprints of the sources that key cached products, so that a changed
//! translator never reuses what an older one made — the RISC-V translator's for translations
//! (`riscv::translate_cached`), the whole crate's for generated kernel sources
//! (`codegen::emit_cached`).

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

fn fingerprint(dir: &str) -> String {
    let mut h = DefaultHasher::new();
    hash_dir(Path::new(dir), &mut h);
    format!("{:016x}", h.finish())
}

fn main() {
    println!("cargo:rerun-if-changed=src");
    println!(
        "cargo:rustc-env=WARPVISOR_RISCV_TRANSLATOR={}",
        fingerprint("src/riscv")
    );
    // Every source: generated kernel sources are cached under it (`codegen::emit_cached`).
    println!("cargo:rustc-env=WARPVISOR_SOURCES={}", fingerprint("src"));
}
