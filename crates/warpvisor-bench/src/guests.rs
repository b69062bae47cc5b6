//! The benchmark programs as WebAssembly: the `guests/wasm/bench-NAME.wasm` modules built by
//! `guests/build.sh bench`, compiled into the runner so that it works from any directory.

use std::borrow::Cow;
use std::path::Path;

macro_rules! guest {
    ($name:literal) => {
        (
            $name,
            include_bytes!(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../guests/wasm/bench-",
                $name,
                ".wasm"
            ))
            .as_slice(),
        )
    };
}

/// Every benchmark's module, by workload name.
const BUILT_IN: [(&str, &[u8]); 10] = [
    guest!("scrypt"),
    guest!("pbkdf2"),
    guest!("blur_jpeg"),
    guest!("blur_bmp"),
    guest!("phash"),
    guest!("phash_modified"),
    guest!("bill_pdf"),
    guest!("histogram"),
    guest!("lz4"),
    guest!("strings"),
];

/// The module of benchmark `name`: `DIR/bench-NAME.wasm` when `dir` is given, else the one
/// built into the runner (borrowed, not copied).
pub fn module(name: &str, dir: Option<&Path>) -> Result<Cow<'static, [u8]>, String> {
    match dir {
        Some(dir) => {
            let path = dir.join(format!("bench-{name}.wasm"));
            std::fs::read(&path)
                .map(Cow::Owned)
                .map_err(|e| format!("cannot read {}: {e}", path.display()))
        }
        None => BUILT_IN
            .iter()
            .find(|(n, _)| *n == name)
            .map(|&(_, bytes)| Cow::Borrowed(bytes))
            .ok_or_else(|| format!("no built-in module for benchmark `{name}`")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_workload_has_a_valid_module() {
        for w in &warpvisor_workloads::WORKLOADS {
            let wasm = module(w.name, None).unwrap();
            warpvisor::frontend::load(&wasm).unwrap_or_else(|e| panic!("{}: {e}", w.name));
        }
        assert!(module("nope", None).is_err());
        let e = module("scrypt", Some(Path::new("/nonexistent"))).unwrap_err();
        assert!(e.contains("/nonexistent/bench-scrypt.wasm"), "{e}");
    }
}
