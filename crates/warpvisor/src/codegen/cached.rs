//! Generated kernel sources kept on disk, so that running a module again skips code generation
//! (tens of milliseconds for a Rust program) and goes straight to the compiled-kernel cache.

use crate::backend::cache;
use crate::frontend::Module;

use super::{emit, CodegenError, KernelOptions, KernelSource};

/// A fingerprint of this crate's sources (`build.rs`): a rebuilt translator never reuses a
/// source an older one generated.
const SOURCES: &str = env!("WARPVISOR_SOURCES");

/// [`emit`] for `module`, parsed from `binary`, through the source cache
/// (`<cache dir>/source/`), keyed by the module's bytes, the options and a fingerprint of the
/// crate's sources (a rebuilt translator never reuses an older one's source). An entry
/// that cannot be read or parsed is generated again; a failure to store one only costs the
/// next run the generation.
pub fn emit_cached(
    binary: &[u8],
    module: &Module<'_>,
    options: &KernelOptions,
) -> Result<KernelSource, CodegenError> {
    let Ok(settings) = serde_json::to_vec(options) else {
        return emit(module, options);
    };
    let key = cache::key(&[SOURCES.as_bytes(), binary, &settings]);
    let dir = cache::cache_dir().join("source");
    let path = dir.join(format!("{key}.json"));
    if let Ok(bytes) = std::fs::read(&path) {
        if let Ok(source) = serde_json::from_slice::<KernelSource>(&bytes) {
            return Ok(source);
        }
    }
    let source = emit(module, options)?;
    if let Ok(bytes) = serde_json::to_vec(&source) {
        if std::fs::create_dir_all(&dir).is_ok() {
            let _ = cache::write_atomically(&path, &bytes);
        }
    }
    Ok(source)
}
