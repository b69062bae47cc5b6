//! RISC-V Linux executables as WebAssembly modules, ahead of time (the Multi-V VM idea,
//! `../shared/papers/multi-v-vm.md`): a static RV64 ELF → [`elf::ElfImage`] → decoded and
//! partitioned into functions and blocks ([`program::Program`]) → one WebAssembly module
//! ([`translate()`]) whose Linux system calls run on WASI preview 1, which every warpvisor
//! backend then runs as a fleet. `docs/riscv.md` lists what is supported.

pub mod compressed;
pub mod decode;
pub mod disasm;
pub mod elf;
pub mod program;
pub mod translate;

pub use translate::TranslateOptions;

/// Why an executable could not be translated.
#[derive(Debug, thiserror::Error)]
pub enum RiscvError {
    /// The file is not a static RV64 Linux executable warpvisor can load.
    #[error("{0}")]
    Elf(String),
    /// The program has more code than warpvisor translates.
    #[error("the executable has more than {0} instructions")]
    TooLarge(usize),
    /// The generated module did not assemble (a translator defect).
    #[error("the translated module does not assemble: {0}")]
    Assemble(String),
}

/// Whether `bytes` start like an ELF file.
pub fn is_elf(bytes: &[u8]) -> bool {
    bytes.starts_with(b"\x7fELF")
}

/// The WAT text of the module translated from the executable `bytes`.
pub fn translate_to_wat(bytes: &[u8], options: &TranslateOptions) -> Result<String, RiscvError> {
    let image = elf::ElfImage::parse(bytes)?;
    let program = program::Program::recover(&image)?;
    Ok(translate::module(&image, &program, options))
}

/// The WebAssembly module translated from the executable `bytes`.
pub fn translate(bytes: &[u8], options: &TranslateOptions) -> Result<Vec<u8>, RiscvError> {
    let wat = translate_to_wat(bytes, options)?;
    wat::parse_str(&wat).map_err(|e| RiscvError::Assemble(e.to_string()))
}

/// [`translate()`], through the on-disk cache kernels use (`backend::cache`): keyed by the
/// executable, the options and a fingerprint of the translator's sources. A cache that cannot
/// be read or written only costs the translation.
pub fn translate_cached(bytes: &[u8], options: &TranslateOptions) -> Result<Vec<u8>, RiscvError> {
    use crate::backend::cache;
    let key = cache::key(&[
        b"riscv-translation",
        env!("WARPVISOR_RISCV_TRANSLATOR").as_bytes(),
        bytes,
        &options.stack_size.to_le_bytes(),
    ]);
    let dir = cache::cache_dir().join("riscv");
    let path = dir.join(format!("{key}.wasm"));
    if let Ok(wasm) = std::fs::read(&path) {
        if wasm.starts_with(b"\0asm") {
            return Ok(wasm);
        }
    }
    let wasm = translate(bytes, options)?;
    if std::fs::create_dir_all(&dir).is_ok() {
        let _ = cache::write_atomically(&path, &wasm);
    }
    Ok(wasm)
}
