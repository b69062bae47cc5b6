//! Random RV64IMA programs against `qemu-riscv64`: each program sets every register from a
//! table of edge-case and random values, runs a random sequence of integer, multiply/divide,
//! load/store, atomic and forward-branch instructions on a scratch buffer, then writes all 31
//! registers and the buffer to standard output. The translated module's output (wasmtime, and
//! `cpu` for a sample) must equal qemu's byte for byte.
//!
//! CI runs 300 programs; `WARPVISOR_RISCV_RANDOM=START..END` runs another range (the
//! acceptance run is 0..10000, docs/riscv.md). Without qemu (outside CI) the test prints
//! `NOT RUN`; CI sets `WARPVISOR_REQUIRE_RISCV_TOOLS=1`.

mod common;

use std::process::{Command, Stdio};
use std::sync::Arc;

use common::riscv::{link, tools_here};
use warpvisor::codegen::{CallMode, KernelOptions};
use warpvisor::riscv::{self, TranslateOptions};
use warpvisor::vmm::{FleetConfig, Program};
use warpvisor::wasi::program::{run_jobs, WasiRunConfig};
use warpvisor::wasi::WasiJob;

/// A small deterministic generator (SplitMix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn value(&mut self) -> u64 {
        const EDGES: [u64; 9] = [
            0,
            1,
            u64::MAX,
            1 << 63,
            (1 << 63) - 1,
            0x8000_0000,
            0x7fff_ffff,
            0xffff_ffff,
            0xffff_ffff_8000_0000,
        ];
        if self.below(3) == 0 {
            EDGES[self.below(EDGES.len() as u64) as usize]
        } else if self.below(2) == 0 {
            self.below(64).wrapping_sub(32)
        } else {
            self.next()
        }
    }
}

fn r_type(f7: u32, rs2: u32, rs1: u32, f3: u32, rd: u32, op: u32) -> u32 {
    f7 << 25 | rs2 << 20 | rs1 << 15 | f3 << 12 | rd << 7 | op
}
fn i_type(imm: i32, rs1: u32, f3: u32, rd: u32, op: u32) -> u32 {
    ((imm as u32) & 0xfff) << 20 | rs1 << 15 | f3 << 12 | rd << 7 | op
}
fn s_type(imm: i32, rs2: u32, rs1: u32, f3: u32, op: u32) -> u32 {
    let imm = imm as u32;
    (imm >> 5 & 0x7f) << 25 | rs2 << 20 | rs1 << 15 | f3 << 12 | (imm & 31) << 7 | op
}
fn b_type(imm: i32, rs2: u32, rs1: u32, f3: u32) -> u32 {
    let imm = imm as u32;
    (imm >> 12 & 1) << 31
        | (imm >> 5 & 0x3f) << 25
        | rs2 << 20
        | rs1 << 15
        | f3 << 12
        | (imm >> 1 & 0xf) << 8
        | (imm >> 11 & 1) << 7
        | 0x63
}
fn j_type(imm: i32, rd: u32) -> u32 {
    let imm = imm as u32;
    (imm >> 20 & 1) << 31
        | (imm >> 1 & 0x3ff) << 21
        | (imm >> 11 & 1) << 20
        | (imm >> 12 & 0xff) << 12
        | rd << 7
        | 0x6f
}

/// The register holding the data area's address; x30 addresses atomics.
const BASE: u32 = 31;
const AMO_ADDR: u32 = 30;
/// The loop counter (never written by the random instructions).
const COUNTER: u32 = 29;
/// Data area: the initial registers (31 words), the dump (31 words + padding), the scratch.
const INIT: i32 = 0;
const DUMP: i32 = 256;
const SCRATCH: i32 = 512;
const SCRATCH_LEN: i32 = 256;

/// A random program, as assembly (instruction words and data).
fn program(seed: u64) -> String {
    let mut rng = Rng(seed);
    let mut body: Vec<u32> = Vec::new();
    let n = 20 + rng.below(60);
    while (body.len() as u64) < n {
        if rng.below(10) == 0 {
            // A counted loop of straight-line instructions: x29 counts up from 0 (it is 0
            // outside loops, so a branch that skips into the body still ends the loop), x28
            // holds the comparison.
            let iterations = 1 + rng.below(5) as i32;
            body.push(i_type(0, 0, 0, COUNTER, 0x13));
            let start = body.len();
            for _ in 0..1 + rng.below(6) {
                instruction(&mut rng, &mut body, true);
            }
            body.push(i_type(1, COUNTER, 0, COUNTER, 0x13));
            body.push(i_type(iterations, COUNTER, 3, 28, 0x13)); // sltiu x28, x29, n
            let back = -4 * (body.len() - start) as i32;
            body.push(b_type(back, 0, 28, 1)); // bne x28, x0, start
            body.push(i_type(0, 0, 0, COUNTER, 0x13));
        } else {
            instruction(&mut rng, &mut body, false);
        }
    }
    // Branches past the end land on the epilogue's first instructions: pad with nops.
    body.extend([0x13; 4]);
    assemble(&mut rng, &body)
}

/// One random instruction (two for an atomic: its address first); no control flow when
/// `straight`.
fn instruction(rng: &mut Rng, body: &mut Vec<u32>, straight: bool) {
    let reg = |rng: &mut Rng| 1 + rng.below(28) as u32; // x1..x28
    let src = |rng: &mut Rng| rng.below(30) as u32; // x0..x29
    match rng.below(if straight { 10 } else { 12 }) {
        0..=3 => {
            // OP and OP-32 (M included)
            let word = rng.below(3) == 0;
            let ops: &[(u32, u32)] = if word {
                &[
                    (0, 0),
                    (0x20, 0),
                    (0, 1),
                    (0, 5),
                    (0x20, 5),
                    (1, 0),
                    (1, 4),
                    (1, 5),
                    (1, 6),
                    (1, 7),
                ]
            } else {
                &[
                    (0, 0),
                    (0x20, 0),
                    (0, 1),
                    (0, 2),
                    (0, 3),
                    (0, 4),
                    (0, 5),
                    (0x20, 5),
                    (0, 6),
                    (0, 7),
                    (1, 0),
                    (1, 1),
                    (1, 2),
                    (1, 3),
                    (1, 4),
                    (1, 5),
                    (1, 6),
                    (1, 7),
                ]
            };
            let (f7, f3) = ops[rng.below(ops.len() as u64) as usize];
            let op = if word { 0x3b } else { 0x33 };
            body.push(r_type(f7, src(rng), src(rng), f3, reg(rng), op));
        }
        4..=5 => {
            // OP-IMM and OP-IMM-32
            let word = rng.below(3) == 0;
            let f3 = if word {
                [0, 1, 5][rng.below(3) as usize]
            } else {
                rng.below(8) as u32
            };
            let imm = match f3 {
                1 => rng.below(if word { 32 } else { 64 }) as i32,
                5 => {
                    let sh = rng.below(if word { 32 } else { 64 }) as i32;
                    if rng.below(2) == 0 {
                        sh
                    } else {
                        sh | 0x400
                    }
                }
                _ => rng.below(4096) as i32 - 2048,
            };
            let op = if word { 0x1b } else { 0x13 };
            body.push(i_type(imm, src(rng), f3, reg(rng), op));
        }
        6 => {
            // lui / auipc
            let op = if rng.below(2) == 0 { 0x37 } else { 0x17 };
            body.push((rng.next() as u32 & 0xffff_f000) | reg(rng) << 7 | op);
        }
        7 => {
            // a load from the scratch buffer (any alignment)
            let f3 = [0, 1, 2, 3, 4, 5, 6][rng.below(7) as usize];
            let off = SCRATCH + rng.below(SCRATCH_LEN as u64 - 8) as i32;
            body.push(i_type(off, BASE, f3, reg(rng), 0x03));
        }
        8 => {
            let f3 = rng.below(4) as u32;
            let off = SCRATCH + rng.below(SCRATCH_LEN as u64 - 8) as i32;
            body.push(s_type(off, src(rng), BASE, f3, 0x23));
        }
        9 => {
            // an atomic on an aligned scratch word: x30 = base + offset, then the AMO
            let double = rng.below(2) == 0;
            let off = SCRATCH + 8 * rng.below(SCRATCH_LEN as u64 / 8) as i32;
            body.push(i_type(off, BASE, 0, AMO_ADDR, 0x13));
            let f5 = [0x01, 0x00, 0x04, 0x0c, 0x08, 0x10, 0x14, 0x18, 0x1c][rng.below(9) as usize];
            let f3 = if double { 3 } else { 2 };
            body.push(r_type(f5 << 2, src(rng), AMO_ADDR, f3, reg(rng), 0x2f));
        }
        10 => {
            // a forward branch over 1-3 instructions
            let skip = 1 + rng.below(3) as i32;
            let f3 = [0, 1, 4, 5, 6, 7][rng.below(6) as usize];
            body.push(b_type(4 * (skip + 1), src(rng), src(rng), f3));
        }
        _ => {
            // a forward jal that links into a random register
            let skip = 1 + rng.below(2) as i32;
            let rd = if rng.below(2) == 0 { 0 } else { reg(rng) };
            body.push(j_type(4 * (skip + 1), rd));
        }
    }
}

/// The program around `body`: the prologue that sets the registers, the epilogue that dumps
/// them, and the data area.
fn assemble(rng: &mut Rng, body: &[u32]) -> String {
    // Prologue: x31 = data area (`la`, below); every other register from the table.
    let mut code: Vec<u32> = Vec::new();
    for r in 1..31u32 {
        code.push(i_type(INIT + 8 * r as i32, BASE, 3, r, 0x03));
    }
    // x30 holds an aligned scratch address from the start: a branch may skip the `addi` that
    // sets it before an atomic.
    code.push(i_type(SCRATCH, BASE, 0, AMO_ADDR, 0x13));
    code.push(i_type(0, 0, 0, COUNTER, 0x13));
    code.extend(body);
    // Epilogue: dump x1..x31, write the dump and the scratch, exit 0.
    for r in 1..32u32 {
        code.push(s_type(DUMP + 8 * r as i32, r, BASE, 3, 0x23));
    }
    code.push(i_type(1, 0, 0, 10, 0x13)); // a0 = 1
    code.push(i_type(DUMP + 8, BASE, 0, 11, 0x13)); // a1 = the dump of x1
    code.push(i_type(8 * 31 + SCRATCH_LEN, 0, 0, 12, 0x13)); // a2: 31 registers, the scratch
    code.push(i_type(64, 0, 0, 17, 0x13)); // a7 = write
    code.push(0x73);
    code.push(i_type(0, 0, 0, 10, 0x13));
    code.push(i_type(93, 0, 0, 17, 0x13)); // exit
    code.push(0x73);

    let mut data = vec![0u8; (SCRATCH + SCRATCH_LEN) as usize];
    for r in 1..31 {
        data[8 * r..8 * r + 8].copy_from_slice(&rng.value().to_le_bytes());
    }
    for b in &mut data[SCRATCH as usize..] {
        *b = rng.next() as u8;
    }
    // The instructions as words: the assembler only lays them out and builds the ELF file
    // (qemu-user refuses hand-made files without the sections a linker writes).
    let mut asm = String::from(
        ".section .text\n.globl _start\n_start:\n.option push\n.option norelax\nla x31, data\n.option pop\n",
    );
    for w in &code {
        asm.push_str(&format!(".word {w:#010x}\n"));
    }
    asm.push_str(".section .data\n.balign 8\ndata:\n");
    for chunk in data.chunks(16) {
        let bytes: Vec<String> = chunk.iter().map(|b| b.to_string()).collect();
        asm.push_str(&format!(".byte {}\n", bytes.join(",")));
    }
    asm
}

fn qemu(path: &std::path::Path) -> Vec<u8> {
    let out = Command::new("qemu-riscv64")
        .arg(path)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", path.display());
    out.stdout
}

fn range() -> std::ops::Range<u64> {
    std::env::var("WARPVISOR_RISCV_RANDOM")
        .ok()
        .and_then(|r| {
            let (a, b) = r.split_once("..")?;
            Some(a.parse().ok()?..b.parse().ok()?)
        })
        .unwrap_or(0..300)
}

#[test]
fn random_programs_dump_the_registers_qemu_dumps() {
    if !tools_here() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("wv-riscv-random-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let engine = warpvisor::backend::wasmtime::WasmtimeBackend::new(Default::default()).unwrap();
    let setup = warpvisor::backend::wasmtime::WasiSetup {
        program_name: "prog".into(),
        preopens: Vec::new(),
        allow_unknown_imports: false,
        max_memory_pages: 64,
    };
    let seeds = range();
    let failures: Vec<(Option<u64>, bool)> = warpvisor::work_queue::map_indexed(
        (seeds.end - seeds.start) as usize,
        warpvisor::work_queue::default_workers(),
        |i| {
            let seed = seeds.start + i as u64;
            let path = dir.join(format!("p{seed}.elf"));
            link(&program(seed), &path);
            let bytes = std::fs::read(&path).unwrap();
            let theirs = qemu(&path);
            let wasm = riscv::translate(&bytes, &TranslateOptions::default())
                .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
            let ours = engine
                .run_wasi(&wasm, &setup, &[WasiJob::default()])
                .unwrap()
                .0;
            let _ = std::fs::remove_file(&path);
            // Whether a loop ran as a `loop` of its own block (not through the dispatch).
            let looped = riscv::translate_to_wat(&bytes, &TranslateOptions::default())
                .is_ok_and(|w| w.contains("(loop $C"));
            let differs = ours[0].stdout != theirs || ours[0].exit_code != 0;
            if differs {
                eprintln!("seed {seed}: differs from qemu");
            }
            (differs.then_some(seed), looped)
        },
    );
    let looped = failures.iter().filter(|(_, l)| *l).count();
    let failures: Vec<u64> = failures.into_iter().filter_map(|(f, _)| f).collect();
    assert!(looped > 0, "no program had a loop");
    let _ = std::fs::remove_dir_all(&dir);
    eprintln!(
        "{} random programs compared with qemu ({looped} with loops), {} differ",
        seeds.end - seeds.start,
        failures.len()
    );
    assert!(failures.is_empty(), "seeds {failures:?}");
}

/// A sample of the random programs as one `cpu` fleet job each (their kernels differ).
#[test]
fn random_programs_on_cpu_dump_what_qemu_dumps() {
    if !tools_here() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("wv-riscv-random-cpu-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for seed in 1_000_000..1_000_012 {
        let path = dir.join("p.elf");
        link(&program(seed), &path);
        let bytes = std::fs::read(&path).unwrap();
        let theirs = qemu(&path);
        let wasm = riscv::translate(&bytes, &TranslateOptions::default()).unwrap();
        let kernel = KernelOptions {
            calls: CallMode::Direct,
            ..KernelOptions::default()
        };
        let program = Arc::new(Program::compile(&wasm, &kernel, common::cpu().as_ref()).unwrap());
        let config = WasiRunConfig {
            fleet: FleetConfig {
                num_vms: 2,
                max_memory_pages: 64,
                ..FleetConfig::default()
            },
            program_name: "prog".into(),
            preopens: Vec::new(),
            allow_unknown_imports: false,
        };
        let ours = run_jobs(program, &config, &[WasiJob::default(), WasiJob::default()]).unwrap();
        for r in &ours {
            assert_eq!(r.stdout, theirs, "seed {seed}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
