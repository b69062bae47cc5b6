//! The CUDA dialect, checked without a GPU: NVRTC compiles the emitted CUDA C++ of spec-test
//! modules and of the guest corpus to PTX for `compute_90`.
//!
//! NVRTC comes from PyPI in CI (`nvidia-cuda-nvrtc-cu12`, see `.ci/run`), which sets
//! `WARPVISOR_REQUIRE_NVRTC=1`: there a missing NVRTC fails these tests. Elsewhere they say
//! that they did not run.

mod common;

use std::path::{Path, PathBuf};

use warpvisor::backend::cuda::{compile_ptx, nvrtc_status, DEFAULT_ARCH};
use warpvisor::codegen::{self, Dialect, KernelOptions, KernelSource};
use warpvisor::frontend;
use warpvisor::work_queue;

/// Whether NVRTC is here; panics when CI requires it and it is not.
fn nvrtc_here() -> bool {
    match nvrtc_status() {
        Ok(_) => true,
        Err(e) if std::env::var_os("WARPVISOR_REQUIRE_NVRTC").is_some() => {
            panic!("WARPVISOR_REQUIRE_NVRTC is set but {e}")
        }
        Err(e) => {
            eprintln!("NOT RUN: {e}");
            false
        }
    }
}

/// Emits the CUDA kernel of `wasm` and compiles every partition with NVRTC; the error names
/// `what`.
fn compile(wasm: &[u8], options: &KernelOptions, what: &str) -> usize {
    compile_source(&emit(wasm, options, what), options, what)
}

/// The CUDA kernel of `wasm` (the source does not depend on the optimisation level).
fn emit(wasm: &[u8], options: &KernelOptions, what: &str) -> KernelSource {
    let module = frontend::load(wasm).unwrap_or_else(|e| panic!("{what}: {e}"));
    codegen::emit(&module, options).unwrap_or_else(|e| panic!("{what}: {e}"))
}

/// Compiles every partition of `source` with NVRTC; returns how many.
fn compile_source(source: &KernelSource, options: &KernelOptions, what: &str) -> usize {
    work_queue::map_indexed(
        source.partitions.len(),
        work_queue::default_workers(),
        |i| {
            let ptx = compile_ptx(&source.partitions[i], options, DEFAULT_ARCH)
                .unwrap_or_else(|e| panic!("{what} partition {i}: {e}"));
            assert!(
                ptx.contains(".entry wv_kernel") && ptx.contains(".target sm_90"),
                "{what}: PTX without the kernel entry"
            );
        },
    );
    source.partitions.len()
}

fn cuda(opt_level: u8, interleave: u32, partition_ops: u32) -> KernelOptions {
    KernelOptions {
        dialect: Dialect::Cuda,
        opt_level,
        interleave,
        partition_ops,
        ..KernelOptions::default()
    }
}

/// The Rust guests CI compiles besides the C ones: floats; trait objects and function pointers.
const CI_RUST_GUESTS: [&str; 2] = ["rust-fmt_floats.wasm", "rust-dyn_dispatch.wasm"];

/// Guests of the corpus, without device optimisation (`-G`: NVRTC's front end and code
/// generator see every line; optimising takes minutes per Rust guest on 2 cores). CI compiles
/// the C guests and [`CI_RUST_GUESTS`]; `WARPVISOR_CUDA_GUESTS=all` compiles every guest,
/// the benchmark programs included (docs/cuda.md has the run).
#[test]
fn guest_corpus_compiles_to_ptx() {
    if !nvrtc_here() {
        return;
    }
    let all = std::env::var("WARPVISOR_CUDA_GUESTS").is_ok_and(|v| v == "all");
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../guests/wasm");
    let mut corpus: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "wasm"))
        .collect();
    corpus.sort();
    assert!(
        corpus.len() >= 23,
        "guest corpus missing: {}",
        dir.display()
    );
    let name = |p: &PathBuf| p.file_name().unwrap().to_string_lossy().into_owned();
    let guests: Vec<PathBuf> = corpus
        .into_iter()
        .filter(|p| all || name(p).starts_with("c-") || CI_RUST_GUESTS.contains(&name(p).as_str()))
        .collect();
    if !all {
        // Every C guest and both Rust ones: the filter must not quietly drop the corpus.
        assert_eq!(guests.len(), 6, "{guests:?}");
    }
    for g in &guests {
        let wasm = std::fs::read(g).unwrap();
        let parts = compile(&wasm, &cuda(0, 4, 2000), &g.display().to_string());
        eprintln!("{}: {parts} partitions", g.display());
    }
}

/// A C guest with the backend's default options (optimised, 2,000-operator partitions).
/// `WARPVISOR_CUDA_OPTIMISED=rust-hello.wasm` (any guest) checks another; a Rust guest takes
/// minutes of NVVM optimisation on 2 cores (docs/cuda.md has the run).
#[test]
fn guest_compiles_optimised_for_compute_90() {
    if !nvrtc_here() {
        return;
    }
    let name = std::env::var("WARPVISOR_CUDA_OPTIMISED").unwrap_or_else(|_| "c-hello.wasm".into());
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../guests/wasm")
        .join(&name);
    let wasm = std::fs::read(&path).unwrap();
    compile(&wasm, &cuda(2, 0, 2000), &name);
}

/// The modules of a spec script that warpvisor accepts.
fn spec_modules(file: &Path) -> Vec<Vec<u8>> {
    let text = std::fs::read_to_string(file).unwrap();
    let mut lexer = wast::lexer::Lexer::new(&text);
    lexer.allow_confusing_unicode(true); // names.wast
    let buf = wast::parser::ParseBuffer::new_with_lexer(lexer).unwrap();
    let script = wast::parser::parse::<wast::Wast<'_>>(&buf).unwrap();
    let mut out = Vec::new();
    for d in script.directives {
        if let wast::WastDirective::Module(mut m) = d {
            if let Ok(bytes) = m.encode() {
                if frontend::load(&bytes).is_ok() {
                    out.push(bytes);
                }
            }
        }
    }
    out
}

#[test]
fn spec_modules_compile_to_ptx() {
    if !nvrtc_here() {
        return;
    }
    let dir = common::testsuite().join("wasm-spec");
    let mut n = 0;
    let mut scripts: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            name.ends_with(".wast") && !name.starts_with("simd_")
        })
        .collect();
    scripts.sort();
    // Every module, without device optimisation, except kernels with a partition over 256 KiB
    // of source: NVRTC -G takes 210 s on br_table.wast's first module (a 16,000-entry
    // `br_table`), -O2 well under 22 s, so those compile optimised.
    let mut modules = Vec::new();
    for script in &scripts {
        let name = script.file_name().unwrap().to_string_lossy().into_owned();
        for (i, wasm) in spec_modules(script).into_iter().enumerate() {
            modules.push((name.clone(), i, wasm));
        }
    }
    // CI compiles every other module (the dialect's code paths are the same in each half;
    // over 1,000 modules took most of this test's 75 s cold); `WARPVISOR_CUDA_SPEC_MODULES=all`
    // compiles every one.
    if !std::env::var("WARPVISOR_CUDA_SPEC_MODULES").is_ok_and(|v| v == "all") {
        modules = modules.into_iter().step_by(2).collect();
    }
    n += modules.len();
    // One module at a time per core: NVRTC is most of the time, and a module is one partition.
    let big = work_queue::map_indexed(modules.len(), work_queue::default_workers(), |k| {
        let (name, i, wasm) = &modules[k];
        let what = format!("{name} module {i}");
        // Interleave and partitioning vary so that each code path of the dialect is seen.
        let mut options = cuda(0, [0, 4, 8][k % 3], if k % 2 == 1 { 40 } else { 0 });
        let source = emit(wasm, &options, &what);
        let big = source.partitions.iter().map(String::len).max() > Some(256 << 10);
        if big {
            options.opt_level = 2;
        }
        compile_source(&source, &options, &what);
        big.then_some(what)
    });
    let big: Vec<String> = big.into_iter().flatten().collect();
    eprintln!("compiled optimised for their size: {big:?}");
    assert!(big.len() <= 3, "{big:?}");
    eprintln!("{n} spec modules compiled");
    assert!(n >= 500, "only {n} modules");
}
