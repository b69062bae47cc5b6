//! A recovered RISC-V program as one WebAssembly module (WAT text, then bytes through `wat`):
//! the runtime (`runtime.wat`: system calls, arithmetic helpers, the start-up stack), the
//! register file (31 globals), one function per guest function (`function.rs`), `$run_at`
//! (any address → the function holding it), `_start`, and the executable's segments as data.
//!
//! Memory: the runtime's scratch data below 0x10000, the executable at its own addresses,
//! the stack above it, then the program break and anonymous mappings, grown on demand.

mod dirty;
pub mod float;
mod function;
mod layout;
mod ops;

use std::collections::BTreeMap;
use std::fmt::Write;

use super::elf::ElfImage;
use super::program::{Function, Program};

/// The runtime spliced into every translated module: system calls and integer helpers, then
/// the floating-point helpers.
const RUNTIME: &str = include_str!("runtime.wat");
const FLOAT_RUNTIME: &str = include_str!("float.wat");
/// The floating-point environment's runtime: flags and the rounding modes.
const FENV_RUNTIME: &str = include_str!("fenv.wat");

/// The default size of a translated program's stack.
pub const DEFAULT_STACK_SIZE: u64 = 1 << 20;

/// How to translate.
#[derive(Clone, Copy, Debug)]
pub struct TranslateOptions {
    /// The stack's size in bytes (rounded up to 64 KiB).
    pub stack_size: u64,
}

impl Default for TranslateOptions {
    fn default() -> Self {
        TranslateOptions {
            stack_size: DEFAULT_STACK_SIZE,
        }
    }
}

/// Linux's errno for each WASI errno (preview 1 numbering), by index.
const LINUX_ERRNO: [u8; 77] = [
    0, 7, 13, 98, 99, 97, 11, 114, 9, 74, 16, 125, 10, 103, 111, 104, 35, 89, 33, 122, 17, 14, 27,
    113, 43, 84, 115, 4, 22, 5, 106, 21, 40, 24, 31, 90, 72, 36, 100, 102, 101, 23, 105, 19, 2, 8,
    37, 67, 12, 42, 92, 28, 38, 107, 20, 39, 131, 88, 95, 25, 6, 75, 130, 1, 32, 71, 93, 91, 34,
    30, 29, 3, 116, 110, 26, 18, 1,
];

/// The messages `$die` prints, at their addresses, and the functions that print them.
const MESSAGES: [(u32, &str, &str); 5] = [
    (
        0x900,
        "bad_jump",
        "warpvisor-riscv: jump to an untranslated address ",
    ),
    (0x940, "illegal", "warpvisor-riscv: illegal instruction at "),
    (
        0x970,
        "unsupported",
        "warpvisor-riscv: unsupported instruction at ",
    ),
    (0x9a0, "ebreak", "warpvisor-riscv: ebreak at "),
    (0x9c0, "", "warpvisor-riscv: arguments exceed the stack of "),
];

/// `bytes` as a WAT string literal's contents.
fn wat_bytes(bytes: &[u8], out: &mut String) {
    for &b in bytes {
        if (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\' {
            out.push(b as char);
        } else {
            let _ = write!(out, "\\{b:02x}");
        }
    }
}

fn align_up(v: u64, to: u64) -> u64 {
    v.div_ceil(to) * to
}

/// The WAT module of `program`, loaded from `image`.
pub fn module(image: &ElfImage, program: &Program, options: &TranslateOptions) -> String {
    let stack_size = align_up(options.stack_size.max(0x1_0000), 0x1_0000);
    let stack_top = align_up(image.end(), 0x1_0000) + stack_size;
    let mut out = String::with_capacity(1 << 20);
    out.push_str("(module\n");
    out.push_str(RUNTIME);
    out.push_str(FLOAT_RUNTIME);
    out.push_str(FENV_RUNTIME);
    let _ = writeln!(
        out,
        "\n  ;; ---- this executable ----\n  (memory (export \"memory\") {})",
        stack_top / 0x1_0000
    );
    for (name, value) in [
        ("STACK_TOP", stack_top),
        ("STACK_SIZE", stack_size),
        ("BRK_START", stack_top),
        ("ENTRY", image.entry),
        ("AT_PHDR", image.phdr.0),
        ("AT_PHNUM", image.phdr.1),
        ("AT_PHENT", image.phdr.2),
    ] {
        let _ = writeln!(out, "  (global ${name} i64 (i64.const {value:#x}))");
    }
    out.push_str("  ;; the integer registers x1..x31 between functions\n ");
    for r in 1..32 {
        let _ = write!(out, " (global $r{r} (mut i64) (i64.const 0))");
    }
    out.push_str("\n  ;; the floating-point registers f0..f31 (raw bits)\n ");
    for r in 0..32 {
        let _ = write!(out, " (global $fr{r} (mut i64) (i64.const 0))");
    }
    out.push('\n');
    for (addr, func, text) in MESSAGES {
        if !func.is_empty() {
            let _ = writeln!(
                out,
                "  (func ${func} (param $pc i64) (call $die (i32.const {addr:#x}) (i32.const {}) (local.get $pc)))",
                text.len()
            );
        }
    }

    // $run_at: a binary search over the functions' ranges.
    out.push_str(
        "  ;; the function holding any address\n  (func $run_at (param $pc i64) (result i64)\n",
    );
    search(&program.functions, 2, &mut out);
    out.push_str("    unreachable)\n");

    let _ = writeln!(
        out,
        "  (func $_start (export \"_start\")\n    (local $pc i64)\n    (global.set $brk (global.get $BRK_START))\n    (global.set $r2 (call $initial_stack))\n    (local.set $pc (global.get $ENTRY))\n    (loop $run (local.set $pc (call $run_at (local.get $pc))) (br $run)))"
    );

    let starts: BTreeMap<u64, String> = program
        .functions
        .iter()
        .map(|f| (f.start, function::func_name(f.start)))
        .collect();
    let leaves: BTreeMap<u64, function::Registers> = program
        .functions
        .iter()
        .filter(|f| function::is_leaf(f))
        .map(|f| (f.start, function::Registers::of(f)))
        .collect();
    let ctx = function::Context {
        leaders: &program.leaders,
        starts: &starts,
        leaves: &leaves,
        fenv: float::FloatEnv::of(program.functions.iter().flat_map(|f| &f.insts)),
    };
    for f in &program.functions {
        function::emit(f, &ctx, &mut out);
    }

    // Data: the runtime's tables, then each segment's file bytes (trailing zeros left out).
    out.push_str("  (data (i32.const 0x800) \"");
    wat_bytes(&LINUX_ERRNO, &mut out);
    out.push_str("\")\n");
    for (addr, _, text) in MESSAGES {
        let _ = write!(out, "  (data (i32.const {addr:#x}) \"");
        wat_bytes(text.as_bytes(), &mut out);
        out.push_str("\")\n");
    }
    let mut uts = [0u8; 390];
    for (i, field) in ["Linux", "warpvisor", "6.1.0", "#1 SMP", "riscv64", "(none)"]
        .iter()
        .enumerate()
    {
        uts[i * 65..i * 65 + field.len()].copy_from_slice(field.as_bytes());
    }
    out.push_str("  (data (i32.const 0xa00) \"");
    wat_bytes(&uts, &mut out);
    out.push_str("\")\n  (data (i32.const 0xc00) \".\")\n");
    for seg in &image.segments {
        let used = seg.data.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
        if used == 0 {
            continue;
        }
        let _ = write!(out, "  (data (i32.const {:#x}) \"", seg.vaddr);
        wat_bytes(&seg.data[..used], &mut out);
        out.push_str("\")\n");
    }
    out.push_str(")\n");
    out
}

/// The nested `if`s that find the function holding `$pc` among `fs`.
fn search(fs: &[Function], depth: usize, out: &mut String) {
    let pad = " ".repeat(depth * 2);
    match fs {
        [] => {}
        [f] => {
            let _ = writeln!(
                out,
                "{pad}(if (i64.ge_u (i64.sub (local.get $pc) (i64.const {:#x})) (i64.const {:#x})) (then (call $bad_jump (local.get $pc))))\n{pad}(return (call {} (local.get $pc)))",
                f.start,
                f.end - f.start,
                function::func_name(f.start)
            );
        }
        _ => {
            let mid = fs.len() / 2;
            let _ = writeln!(
                out,
                "{pad}(if (i64.lt_u (local.get $pc) (i64.const {:#x})) (then",
                fs[mid].start
            );
            search(&fs[..mid], depth + 1, out);
            let _ = writeln!(out, "{pad}) (else");
            search(&fs[mid..], depth + 1, out);
            let _ = writeln!(out, "{pad}))");
        }
    }
}
