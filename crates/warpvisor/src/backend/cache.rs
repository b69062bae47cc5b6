//! The on-disk kernel cache shared by the backends.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// Where compiled kernels are cached: `$WARPVISOR_CACHE_DIR`, else `$XDG_CACHE_HOME/warpvisor`,
/// else `~/.cache/warpvisor`, else a folder in the system temp dir.
pub fn cache_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("WARPVISOR_CACHE_DIR") {
        return PathBuf::from(d);
    }
    if let Some(d) = std::env::var_os("XDG_CACHE_HOME") {
        return PathBuf::from(d).join("warpvisor");
    }
    if let Some(h) = std::env::var_os("HOME") {
        return PathBuf::from(h).join(".cache").join("warpvisor");
    }
    std::env::temp_dir().join("warpvisor-cache")
}

/// Hex SHA-256 of the parts, each length-prefixed so that no two part lists collide.
pub fn key(parts: &[&[u8]]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update((p.len() as u64).to_le_bytes());
        h.update(p);
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// Writes `bytes` to `path` through a temporary file and a rename, so that concurrent
/// processes never see a half-written entry.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension(format!(
        "tmp{}.{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}
