//! Translator limits: small valid modules must not take the translator or the C compiler
//! down. The generated C grows linearly with the module, modules over wasmtime's
//! implementation limits are rejected naming the limit, and kernels too big for a compiler are
//! refused before one runs. (Modules are built with wasm-encoder; no C compiler runs here.)

use std::borrow::Cow;

use warpvisor::codegen::{self, KernelOptions};
use warpvisor::frontend;
use warpvisor::limits;
use wasm_encoder::{
    CodeSection, ConstExpr, ElementSection, Elements, EntityType, ExportKind, ExportSection,
    Function, FunctionSection, ImportSection, Instruction as I, Module, RefType, TableSection,
    TableType, TypeSection, ValType,
};

/// A module: function types, `imports` imported functions of type 0, tables of the given
/// sizes, functions for an element segment, and defined functions given as (type index,
/// locals, body); the first defined function is exported as `f`.
struct Builder {
    types: Vec<(Vec<ValType>, Vec<ValType>)>,
    imports: u32,
    tables: Vec<u64>,
    elems: Vec<u32>,
    funcs: Vec<Func>,
}

/// A defined function: type index, locals, body (without the final `end`).
type Func = (u32, Vec<(u32, ValType)>, Vec<I<'static>>);

impl Builder {
    fn new(types: Vec<(Vec<ValType>, Vec<ValType>)>) -> Self {
        Builder {
            types,
            imports: 0,
            tables: Vec::new(),
            elems: Vec::new(),
            funcs: Vec::new(),
        }
    }

    fn func(mut self, ty: u32, locals: Vec<(u32, ValType)>, body: Vec<I<'static>>) -> Self {
        self.funcs.push((ty, locals, body));
        self
    }

    fn encode(&self) -> Vec<u8> {
        let mut m = Module::new();
        let mut types = TypeSection::new();
        for (p, r) in &self.types {
            types.ty().function(p.iter().copied(), r.iter().copied());
        }
        m.section(&types);
        if self.imports > 0 {
            let mut imports = ImportSection::new();
            for i in 0..self.imports {
                imports.import("m", &format!("g{i}"), EntityType::Function(0));
            }
            m.section(&imports);
        }
        let mut funcs = FunctionSection::new();
        for (ty, _, _) in &self.funcs {
            funcs.function(*ty);
        }
        m.section(&funcs);
        if !self.tables.is_empty() {
            let mut tables = TableSection::new();
            for &n in &self.tables {
                tables.table(TableType {
                    element_type: RefType::FUNCREF,
                    table64: false,
                    minimum: n,
                    maximum: None,
                    shared: false,
                });
            }
            m.section(&tables);
        }
        let mut exports = ExportSection::new();
        exports.export("f", ExportKind::Func, self.imports);
        m.section(&exports);
        if !self.elems.is_empty() {
            // The first function in table slot 0, all of them declared (so `table.set` could
            // store any): the table stays small, every function is a possible target.
            let mut elems = ElementSection::new();
            elems.active(
                Some(0),
                &ConstExpr::i32_const(0),
                Elements::Functions(Cow::Borrowed(&self.elems[..1])),
            );
            elems.declared(Elements::Functions(Cow::Borrowed(&self.elems)));
            m.section(&elems);
        }
        let mut code = CodeSection::new();
        for (_, locals, body) in &self.funcs {
            let mut f = Function::new(locals.iter().copied());
            for op in body {
                f.instruction(op);
            }
            f.instruction(&I::End);
            code.function(&f);
        }
        m.section(&code);
        m.finish()
    }
}

/// The C of `wasm`'s kernel (one partition, host C), or the translator's error.
fn translate(wasm: &[u8]) -> Result<String, String> {
    let module = frontend::load(wasm).map_err(|e| e.to_string())?;
    let source = codegen::emit(&module, &KernelOptions::default()).map_err(|e| e.to_string())?;
    Ok(source.partitions.concat())
}

fn translate_ok(wasm: &[u8]) -> String {
    translate(wasm).unwrap_or_else(|e| panic!("translation failed: {e}"))
}

fn rejected(wasm: &[u8]) -> String {
    match translate(wasm) {
        Ok(c) => panic!("accepted, {} bytes of C", c.len()),
        Err(e) => e,
    }
}

/// `depth` nested `if/else`, each testing the parameter.
fn nested_if_else(depth: usize) -> Vec<u8> {
    let mut body = Vec::new();
    for _ in 0..depth {
        body.extend([I::LocalGet(0), I::If(wasm_encoder::BlockType::Empty)]);
    }
    body.push(I::Nop);
    for _ in 0..depth {
        body.extend([I::Else, I::Nop, I::End]);
    }
    Builder::new(vec![(vec![ValType::I32], vec![])])
        .func(0, vec![], body)
        .encode()
}

/// `depth` nested loops, each calling an import first (so the function is a continuation
/// with a resume point in every loop).
fn nested_loops_with_calls(depth: usize) -> Vec<u8> {
    let mut body = Vec::new();
    for _ in 0..depth {
        body.extend([I::Loop(wasm_encoder::BlockType::Empty), I::Call(0)]);
    }
    body.extend(std::iter::repeat_n(I::End, depth));
    let mut b = Builder::new(vec![(vec![], vec![])]).func(0, vec![], body);
    b.imports = 1;
    b.encode()
}

/// Before the fix, every line was indented two spaces per level and each loop label
/// rescanned the whole body: 4,000 levels made 65 MB of C.
#[test]
fn nested_if_else_make_c_linear_in_depth() {
    let small = translate_ok(&nested_if_else(1_000)).len();
    let large = translate_ok(&nested_if_else(4_000)).len();
    assert!(
        large * 2 <= small * 9,
        "4,000 levels make {large} bytes of C, 1,000 levels {small}: more than 4.5 times"
    );
}

/// A resume point in each of many nested loops: each loop header dispatches its own points
/// and inner loops, not every point inside it.
#[test]
fn resume_dispatch_is_linear_in_loop_nesting() {
    let small = translate_ok(&nested_loops_with_calls(500)).len();
    let large = translate_ok(&nested_loops_with_calls(2_000)).len();
    assert!(
        large * 2 <= small * 9,
        "2,000 loops make {large} bytes of C, 500 loops {small}: more than 4.5 times"
    );
}

/// A `br_table` with `targets` targets (all to the enclosing block), reachable or not.
fn br_table(targets: u32, reachable: bool) -> Vec<u8> {
    let mut body = vec![I::Block(wasm_encoder::BlockType::Empty)];
    if !reachable {
        body.push(I::Unreachable);
    }
    body.extend([
        I::LocalGet(0),
        I::BrTable(vec![0; targets as usize].into(), 0),
        I::End,
    ]);
    Builder::new(vec![(vec![ValType::I32], vec![])])
        .func(0, vec![], body)
        .encode()
}

#[test]
fn br_table_over_wasmtimes_limit_is_rejected() {
    let max = limits::MAX_BR_TABLE_TARGETS;
    assert_eq!(max, 65_520);
    for reachable in [true, false] {
        let e = rejected(&br_table(max + 1, reachable));
        assert!(
            e.contains("MAX_BR_TABLE_TARGETS") && e.contains("65521") && e.contains("65520"),
            "{e}"
        );
    }
    let c = translate_ok(&br_table(max, true));
    // Targets with the same destination share one copy of the branch.
    assert_eq!(c.matches("goto L1_end;").count(), 1, "{}", c.len());
}

/// The limit is wasmtime's own: its compiler takes 65,520 targets and refuses 65,521.
#[test]
fn wasmtime_has_the_same_br_table_limit() {
    let engine = wasmtime::Engine::default();
    wasmtime::Module::new(&engine, br_table(65_520, true)).expect("wasmtime accepts 65,520");
    let e = wasmtime::Module::new(&engine, br_table(65_521, true))
        .expect_err("wasmtime refuses 65,521");
    assert!(format!("{e:?}").contains("65520"), "{e:?}");
}

fn tables(n: u64) -> Vec<u8> {
    let mut b = Builder::new(vec![(vec![], vec![])]).func(0, vec![], vec![]);
    b.tables = vec![1; n as usize];
    b.encode()
}

#[test]
fn more_tables_than_wasmtime_takes_are_rejected() {
    let max = limits::MAX_TABLES as u64;
    let e = rejected(&tables(max + 1));
    assert!(e.contains("MAX_TABLES") && e.contains("101"), "{e}");
    translate_ok(&tables(max));
    let engine = wasmtime::Engine::default();
    wasmtime::Module::new(&engine, tables(max)).expect("wasmtime accepts 100 tables");
    let e = wasmtime::Module::new(&engine, tables(max + 1)).expect_err("and refuses 101");
    assert!(format!("{e:?}").contains("table"), "{e:?}");
}

/// `n` functions `() -> i32` that a table can hold, and an exported `f` that calls table entry
/// 0; `f` is a fastcall, or a continuation when `yielding` (it calls an import first). The
/// slot is computed (`0 + 0`): a constant slot would be a direct call (`codegen/devirt.rs`).
fn table_of_functions(n: u32, yielding: bool) -> Vec<u8> {
    let mut b = Builder::new(vec![(vec![], vec![]), (vec![], vec![ValType::I32])]);
    let mut body = Vec::new();
    if yielding {
        b.imports = 1;
        body.push(I::Call(0));
    }
    body.extend([
        I::I32Const(0),
        I::I32Const(0),
        I::I32Add,
        I::CallIndirect {
            type_index: 1,
            table_index: 0,
        },
    ]);
    b = b.func(1, vec![], body);
    for i in 0..n {
        b = b.func(1, vec![], vec![I::I32Const(i as i32)]);
    }
    b.tables = vec![1];
    b.elems = (b.imports + 1..b.imports + 1 + n).collect();
    b.encode()
}

/// Each fastcall `call_indirect` site calls one dispatch function per signature, instead of
/// a switch over every target at every site.
#[test]
fn call_indirect_dispatch_is_written_once_per_signature() {
    let c = translate_ok(&table_of_functions(1_000, false));
    assert_eq!(
        c.matches("case 1000u: return wv_f1000(WV_CTX_ARGS);")
            .count(),
        1
    );
    assert!(
        c.contains("wv_ci1(WV_CTX_ARGS, callee)"),
        "the call site calls the dispatch"
    );
}

/// 100,000 functions in a table: about 65 MB of C, over what one C compiler run should be
/// given; 20,000 (13 MB) are fine.
#[test]
fn a_table_of_100_000_functions_is_over_the_kernel_limit() {
    for yielding in [false, true] {
        let e = rejected(&table_of_functions(100_000, yielding));
        assert!(e.contains("MAX_KERNEL_SOURCE_BYTES"), "{e}");
        assert!(
            e.contains(&limits::MAX_KERNEL_SOURCE_BYTES.to_string()),
            "{e}"
        );
    }
    let c = translate_ok(&table_of_functions(20_000, true));
    assert!(c.len() < limits::MAX_KERNEL_SOURCE_BYTES);
}

/// A continuation with 50,000 locals that are all read after each of its calls: every yield
/// point saves them all (the module is too big for local liveness, so all count as live).
#[test]
fn function_over_the_source_limit_is_rejected() {
    let locals = 50_000u32;
    let calls = (limits::MAX_FUNCTION_SOURCE_BYTES / (locals as usize * 40)) + 1;
    let mut body: Vec<I<'static>> = std::iter::repeat_n(I::Call(0), calls).collect();
    for l in 0..locals {
        body.extend([I::LocalGet(l), I::Drop]);
    }
    let mut b = Builder::new(vec![(vec![], vec![])]).func(0, vec![(locals, ValType::I64)], body);
    b.imports = 1;
    let e = rejected(&b.encode());
    assert!(e.contains("MAX_FUNCTION_SOURCE_BYTES"), "{e}");
}
