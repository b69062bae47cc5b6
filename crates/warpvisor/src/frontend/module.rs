//! The validated module model: what the later stages need to know about a module, with the
//! function bodies kept as `wasmparser` operators borrowed from the module bytes.

use wasmparser::{FuncType, Operator, RefType, ValType};

/// A constant expression of WebAssembly 2.0 (one instruction).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ConstExpr {
    /// `i32.const`
    I32(i32),
    /// `i64.const`
    I64(i64),
    /// `f32.const`, as bits.
    F32(u32),
    /// `f64.const`, as bits.
    F64(u64),
    /// `ref.null`
    RefNull,
    /// `ref.func`
    RefFunc(u32),
    /// `global.get` of an (imported) global.
    GlobalGet(u32),
}

/// Where an entity comes from.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct ImportName {
    /// Module name of the import.
    pub module: String,
    /// Field name of the import.
    pub name: String,
}

/// A function of the function index space.
#[derive(Debug, Clone)]
pub struct FuncDecl {
    /// Index into [`Module::types`].
    pub type_index: u32,
    /// `Some` for an imported function.
    pub import: Option<ImportName>,
    /// Name from the name section, if any.
    pub name: Option<String>,
    /// Its first export: an index into [`Module::exports`].
    pub first_export: Option<usize>,
}

/// A table of the table index space.
#[derive(Debug, Clone)]
pub struct TableDecl {
    /// Element type.
    pub element: RefType,
    /// Initial size in elements.
    pub initial: u64,
    /// Declared maximum in elements.
    pub maximum: Option<u64>,
    /// `Some` for an imported table.
    pub import: Option<ImportName>,
}

/// The (single) linear memory.
#[derive(Debug, Clone)]
pub struct MemoryDecl {
    /// Initial size in 64 KiB pages.
    pub initial: u64,
    /// Declared maximum in pages.
    pub maximum: Option<u64>,
    /// `Some` for an imported memory.
    pub import: Option<ImportName>,
}

/// A global of the global index space.
#[derive(Debug, Clone)]
pub struct GlobalDecl {
    /// Value type.
    pub ty: ValType,
    /// Whether `global.set` may change it.
    pub mutable: bool,
    /// Initializer (`None` for an imported global).
    pub init: Option<ConstExpr>,
    /// `Some` for an imported global.
    pub import: Option<ImportName>,
}

/// What an export refers to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportKind {
    /// A function index.
    Func(u32),
    /// A table index.
    Table(u32),
    /// The memory.
    Memory(u32),
    /// A global index.
    Global(u32),
}

/// One export.
#[derive(Debug, Clone)]
pub struct Export {
    /// The export name.
    pub name: String,
    /// What it refers to.
    pub kind: ExportKind,
}

/// How an element or data segment is used.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SegmentMode {
    /// Only used by `table.init`/`memory.init`.
    Passive,
    /// Copied into a table or the memory at instantiation.
    Active {
        /// Table index (0 for data segments).
        target: u32,
        /// Offset expression.
        offset: ConstExpr,
    },
    /// Declares functions for `ref.func`; dropped at instantiation.
    Declared,
}

/// An element segment.
#[derive(Debug, Clone)]
pub struct ElemSegment {
    /// Mode of the segment.
    pub mode: SegmentMode,
    /// Element type.
    pub element: RefType,
    /// The items, each a constant expression (`ref.func`, `ref.null` or `global.get`).
    pub items: Vec<ConstExpr>,
}

/// A data segment.
#[derive(Debug, Clone)]
pub struct DataSegment {
    /// Mode of the segment.
    pub mode: SegmentMode,
    /// The bytes.
    pub bytes: Vec<u8>,
}

/// A function body.
#[derive(Debug, Clone)]
pub struct FuncBody<'a> {
    /// Declared locals (not parameters), expanded one entry per local.
    pub locals: Vec<ValType>,
    /// The operators, ending with the function's final `end`.
    pub ops: Vec<Operator<'a>>,
}

/// A parsed and validated WebAssembly module.
#[derive(Debug, Clone, Default)]
pub struct Module<'a> {
    /// Function types by type index.
    pub types: Vec<FuncType>,
    /// The function index space (imports first).
    pub funcs: Vec<FuncDecl>,
    /// Number of imported functions.
    pub imported_funcs: usize,
    /// The table index space (imports first).
    pub tables: Vec<TableDecl>,
    /// The memory, if any.
    pub memory: Option<MemoryDecl>,
    /// The global index space (imports first).
    pub globals: Vec<GlobalDecl>,
    /// Exports in declaration order.
    pub exports: Vec<Export>,
    /// The start function.
    pub start: Option<u32>,
    /// Element segments.
    pub elems: Vec<ElemSegment>,
    /// Data segments.
    pub datas: Vec<DataSegment>,
    /// Bodies of the defined functions (function index minus `imported_funcs`).
    pub bodies: Vec<FuncBody<'a>>,
    /// Imports in declaration order with what they bind.
    pub imports: Vec<(ImportName, ExportKind)>,
}

impl<'a> Module<'a> {
    /// The type of function `index`.
    pub fn func_type(&self, index: u32) -> &FuncType {
        &self.types[self.funcs[index as usize].type_index as usize]
    }

    /// A printable name for function `index` (name section, export, or `func[N]`).
    pub fn func_display_name(&self, index: u32) -> String {
        if let Some(name) = &self.funcs[index as usize].name {
            return name.clone();
        }
        match self.funcs[index as usize]
            .first_export
            .and_then(|e| self.exports.get(e))
        {
            Some(e) => e.name.clone(),
            None => format!("func[{index}]"),
        }
    }

    /// The module without its function bodies: what the VMM keeps after translation.
    pub fn into_shape(self) -> Module<'static> {
        Module {
            types: self.types,
            funcs: self.funcs,
            imported_funcs: self.imported_funcs,
            tables: self.tables,
            memory: self.memory,
            globals: self.globals,
            exports: self.exports,
            start: self.start,
            elems: self.elems,
            datas: self.datas,
            bodies: Vec::new(),
            imports: self.imports,
        }
    }

    /// Looks up an export by name.
    pub fn export(&self, name: &str) -> Option<ExportKind> {
        self.exports.iter().find(|e| e.name == name).map(|e| e.kind)
    }

    /// The body of a defined function.
    pub fn body(&self, index: u32) -> Option<&FuncBody<'a>> {
        (index as usize)
            .checked_sub(self.imported_funcs)
            .and_then(|i| self.bodies.get(i))
    }
}
