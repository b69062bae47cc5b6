//! `warpvisor riscv translate`: a static RISC-V Linux executable → a WebAssembly module.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand};

use warpvisor::riscv::{self, TranslateOptions};

use super::read_limited;

/// Largest executable read.
const MAX_ELF_SIZE: u64 = 256 << 20;

/// The `riscv` subcommands.
#[derive(Subcommand)]
pub enum RiscvCommand {
    /// Translate a static RV64 Linux executable into a WebAssembly (WASI) module.
    Translate(TranslateArgs),
}

/// `warpvisor riscv translate`.
#[derive(Args)]
pub struct TranslateArgs {
    /// The executable (ELF, RV64, statically linked).
    pub elf: PathBuf,
    /// Where to write the module.
    #[arg(short, long)]
    pub output: PathBuf,
    /// Write WebAssembly text instead of binary.
    #[arg(long)]
    pub wat: bool,
    /// The guest stack's size in bytes (rounded up to 64 KiB).
    #[arg(long, default_value_t = riscv::translate::DEFAULT_STACK_SIZE,
          value_parser = clap::value_parser!(u64).range(0x1_0000..=1 << 30))]
    pub stack_size: u64,
}

/// Runs a `riscv` subcommand.
pub fn run(command: RiscvCommand) -> anyhow::Result<i32> {
    match command {
        RiscvCommand::Translate(args) => {
            let bytes = read_limited(&args.elf, MAX_ELF_SIZE, "executable")?;
            let options = TranslateOptions {
                stack_size: args.stack_size,
            };
            let context = || format!("cannot translate {}", args.elf.display());
            let out = if args.wat {
                riscv::translate_to_wat(&bytes, &options)
                    .with_context(context)?
                    .into_bytes()
            } else {
                riscv::translate(&bytes, &options).with_context(context)?
            };
            std::fs::write(&args.output, out)
                .with_context(|| format!("cannot write {}", args.output.display()))?;
            Ok(0)
        }
    }
}

/// `bytes` as a WebAssembly module: a RISC-V executable is translated first (or its
/// translation taken from the cache).
pub fn module_bytes(bytes: Vec<u8>, path: &std::path::Path) -> anyhow::Result<Vec<u8>> {
    if !riscv::is_elf(&bytes) {
        return Ok(bytes);
    }
    riscv::translate_cached(&bytes, &TranslateOptions::default())
        .with_context(|| format!("cannot translate {}", path.display()))
}
