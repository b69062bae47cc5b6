//! Helpers of the PTX corpus tests (`ptx_corpus.rs`, `ptx_science.rs`): one runtime per test
//! binary, the programs loaded once, inputs from a fixed generator, buffers in and out.
#![allow(dead_code)]

use std::sync::OnceLock;

use warpvisor::ptx::{DeviceBuffer, PtxModule, PtxProgram, PtxRuntime};

/// The block sizes every program with a free block size runs with.
pub const BLOCKS: [u32; 6] = [32, 64, 128, 256, 512, 1024];

pub fn runtime() -> &'static PtxRuntime {
    static RT: OnceLock<PtxRuntime> = OnceLock::new();
    RT.get_or_init(|| PtxRuntime::new().expect("a C compiler"))
}

pub fn program(which: &str) -> &'static PtxProgram {
    static CORPUS: OnceLock<PtxProgram> = OnceLock::new();
    static BENCH: OnceLock<PtxProgram> = OnceLock::new();
    static SCIENCE: OnceLock<PtxProgram> = OnceLock::new();
    let (cell, text) = match which {
        "corpus" => (&CORPUS, include_str!("../ptx/corpus.ptx")),
        "science" => (&SCIENCE, include_str!("../ptx/science.ptx")),
        _ => (
            &BENCH,
            include_str!("../../../warpvisor-bench/cuda/bench.ptx"),
        ),
    };
    cell.get_or_init(|| {
        let m = PtxModule::parse(text).unwrap_or_else(|e| panic!("{which}: {e}"));
        runtime()
            .load(&m)
            .unwrap_or_else(|e| panic!("{which}: {e}"))
    })
}

pub fn xorshift(n: usize, seed: u32) -> Vec<u32> {
    let mut x = seed.max(1);
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x
        })
        .collect()
}

pub fn to_bytes<T: Copy>(v: &[T], f: impl Fn(T) -> [u8; 4]) -> Vec<u8> {
    v.iter().flat_map(|&x| f(x)).collect()
}

pub fn words(b: &DeviceBuffer) -> Vec<u32> {
    b.read()
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

pub fn floats(b: &DeviceBuffer) -> Vec<f32> {
    words(b).into_iter().map(f32::from_bits).collect()
}

pub fn buf(bytes: &[u8]) -> DeviceBuffer {
    runtime().buffer_from(bytes).expect("buffer")
}
