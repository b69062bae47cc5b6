//! The kernel ABI is defined once in Rust (`warpvisor::abi`) and generated into C: the C
//! compiler must accept it, agree with Rust on every per-VM index, and refuse a struct whose
//! layout differs from Rust's.

use std::path::PathBuf;
use std::process::Command;

use warpvisor::abi::{FleetShape, PerVmArray, VmControl};
use warpvisor::codegen::Dialect;
use warpvisor::layout::InterleavedLayout;

const CONSTANTS: &str = "#define WV_NUM_GLOBALS 3u\n#define WV_NUM_TABLES 2u\n\
    #define WV_TABLE_WORDS 10u\n#define WV_NUM_SEGMENTS 4u\n#define WV_RET_WORDS 5u\n";

fn shape(interleave: u32) -> FleetShape {
    FleetShape {
        layout: InterleavedLayout {
            num_vms: 7,
            interleave,
            max_pages: 1,
            stack_words: 16,
            num_globals: 3,
            guard_regions: false,
        },
        num_tables: 2,
        table_words: 10,
        num_segments: 4,
        ret_words: 5,
        max_depth: 10,
        data_bytes: 1,
        elem_refs: 1,
    }
}

/// Compiles `source` with the system C compiler; runs it when it compiles.
fn build_and_run(source: &str, name: &str) -> Result<String, String> {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let c = dir.join(format!("{name}.c"));
    let exe = dir.join(name);
    std::fs::write(&c, source).unwrap();
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let out = Command::new(cc)
        .args(["-std=c11", "-O0", "-o"])
        .arg(&exe)
        .arg(&c)
        .arg("-lm")
        .output()
        .unwrap();
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    let run = Command::new(&exe).output().unwrap();
    Ok(String::from_utf8_lossy(&run.stdout).into_owned())
}

/// A C program that prints the element index every per-VM accessor computes.
fn index_program(interleave: u32, declarations: &str) -> String {
    let mut s = String::from("#include <stdio.h>\n");
    s.push_str(Dialect::C.header());
    s.push_str(&format!("#define WV_INTERLEAVE {interleave}\n"));
    s.push_str(CONSTANTS);
    s.push_str(declarations);
    s.push_str(
        "int main(void) {\n  static uint64_t stack[4096], globals[4096], ret[4096];\n\
         static uint32_t tables[4096], sizes[4096];\n  static uint8_t dropped[4096];\n\
         wv_fleet fl = {0};\n  fl.stack = stack; fl.globals = globals; fl.ret = ret;\n\
         fl.tables = tables; fl.table_sizes = sizes; fl.dropped = dropped;\n\
         fl.num_vms = 7; fl.stack_words = 16;\n  const wv_fleet *f = &fl;\n\
         for (uint32_t vm = 0; vm < 7; vm++) for (uint32_t i = 0; i < 3; i++)\n\
         printf(\"%ld %ld %ld %ld %ld %ld\\n\", (long)(&WV_STK(i) - stack), (long)(&WV_GLB(i) - globals),\n\
         (long)(&WV_RET(i) - ret), (long)(&WV_TABLE_WORD(i) - tables), (long)(&WV_TABLE_SIZE(i) - sizes),\n\
         (long)(&WV_DROPPED(i) - dropped));\n  return 0;\n}\n",
    );
    s
}

#[test]
fn generated_accessors_agree_with_rust_on_every_index() {
    let declarations = warpvisor::abi::c::declarations();
    for interleave in [0, 4, 8] {
        let out = build_and_run(&index_program(interleave, &declarations), "abi_index")
            .unwrap_or_else(|e| panic!("the generated ABI does not compile:\n{e}"));
        let shape = shape(interleave);
        let mut expected = String::new();
        for vm in 0..7 {
            for i in 0..3u64 {
                let at: Vec<String> = [
                    PerVmArray::STACK,
                    PerVmArray::GLOBALS,
                    PerVmArray::RET,
                    PerVmArray::TABLE_WORDS,
                    PerVmArray::TABLE_SIZES,
                    PerVmArray::DROPPED,
                ]
                .iter()
                .map(|a| a.index(&shape, vm, i).to_string())
                .collect();
                expected.push_str(&at.join(" "));
                expected.push('\n');
            }
        }
        assert_eq!(out, expected, "interleave {interleave}");
    }
}

#[test]
fn a_layout_that_differs_from_rust_fails_the_build() {
    let declarations = warpvisor::abi::c::declarations();
    // Swap two fields of wv_vm in the C declaration only: offsets no longer match Rust's.
    let first = VmControl::FIELDS[0].name;
    let second = VmControl::FIELDS[1].name;
    let line_of = |name: &str| {
        declarations
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("uint32_t {name};")))
            .unwrap()
            .to_string()
    };
    let (a, b) = (line_of(first), line_of(second));
    let swapped = declarations
        .replacen(&a, "@@", 1)
        .replacen(&b, &a, 1)
        .replacen("@@", &b, 1);
    assert_ne!(swapped, declarations);
    let err = build_and_run(&index_program(0, &swapped), "abi_mismatch")
        .expect_err("a wv_vm laid out differently from VmControl must not compile");
    assert!(err.contains(&format!("wv_vm_{first}")), "{err}");
}
