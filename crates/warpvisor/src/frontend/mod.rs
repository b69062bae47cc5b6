//! Front end: bytes (binary or text) → validated [`Module`].
//!
//! Validation is `wasmparser`'s, with the feature set warpvisor translates (WebAssembly 2.0
//! without SIMD). A module that is valid only with more features is reported as *unsupported*,
//! naming the feature and the function where it occurs, rather than as invalid.

mod module;

pub use module::*;

use crate::limits;
use wasmparser::{
    ElementItems, ElementKind, ExternalKind, Name, Operator, Parser, Payload, TypeRef, Validator,
    WasmFeatures,
};

/// Why a module was not accepted.
#[derive(Debug, thiserror::Error)]
pub enum FrontendError {
    /// The text format did not parse.
    #[error("malformed module text: {0}")]
    Text(String),
    /// The binary did not decode or did not validate.
    #[error("invalid module: {message} (at byte offset {offset:#x})")]
    Invalid {
        /// What wasmparser reported.
        message: String,
        /// Byte offset in the binary.
        offset: u64,
    },
    /// The module is valid but over one of wasmtime's implementation limits, which warpvisor
    /// enforces too (see [`crate::limits`]).
    #[error(
        "implementation limit exceeded in {location}: {value} {what}, more than {limit} ({max}, wasmtime's limit too)"
    )]
    Limit {
        /// The limit, as named in [`crate::limits`].
        limit: &'static str,
        /// What was counted (plural).
        what: &'static str,
        /// How many the module has.
        value: u64,
        /// The most allowed.
        max: u64,
        /// Where: a function name or `module`.
        location: String,
    },
    /// The module is valid WebAssembly but uses a feature warpvisor does not translate.
    #[error("unsupported WebAssembly feature in {location}: {feature}")]
    Unsupported {
        /// The feature, as wasmparser names it.
        feature: String,
        /// Where: a function name or `module`.
        location: String,
    },
}

/// The features warpvisor translates: WebAssembly 2.0 without SIMD.
pub fn accepted_features() -> WasmFeatures {
    WasmFeatures::WASM2.difference(WasmFeatures::SIMD)
}

/// Turns `.wat` text or `.wasm` bytes into a binary module.
pub fn to_binary(bytes: &[u8]) -> Result<std::borrow::Cow<'_, [u8]>, FrontendError> {
    if bytes.starts_with(b"\0asm") {
        return Ok(std::borrow::Cow::Borrowed(bytes));
    }
    let text = std::str::from_utf8(bytes)
        .map_err(|_| FrontendError::Text("neither a binary module nor UTF-8 text".into()))?;
    wat::parse_str(text)
        .map(std::borrow::Cow::Owned)
        .map_err(|e| FrontendError::Text(first_line(&e.to_string())))
}

/// The signature of the exported function `name`, read without validating the module (so
/// that it also answers for modules only wasmtime runs); `None` when there is no such export.
pub fn export_func_type(
    wasm: &[u8],
    name: &str,
) -> Result<Option<wasmparser::FuncType>, FrontendError> {
    use wasmparser::{Parser, Payload, TypeRef};
    let invalid = |e: wasmparser::BinaryReaderError| FrontendError::Invalid {
        message: e.message().to_string(),
        offset: e.offset(),
    };
    let mut types = Vec::new();
    let mut funcs = Vec::new(); // type index of every function, imports first
    let mut export = None;
    for payload in Parser::new(0).parse_all(wasm) {
        match payload.map_err(invalid)? {
            Payload::TypeSection(r) => {
                for group in r {
                    for sub in group.map_err(invalid)?.into_types() {
                        types.push(match &sub.composite_type.inner {
                            wasmparser::CompositeInnerType::Func(f) => Some(f.clone()),
                            _ => None,
                        });
                    }
                }
            }
            Payload::ImportSection(r) => {
                for i in r.into_imports() {
                    if let TypeRef::Func(t) | TypeRef::FuncExact(t) = i.map_err(invalid)?.ty {
                        funcs.push(t);
                    }
                }
            }
            Payload::FunctionSection(r) => {
                for t in r {
                    funcs.push(t.map_err(invalid)?);
                }
            }
            Payload::ExportSection(r) => {
                for e in r {
                    let e = e.map_err(invalid)?;
                    if e.name == name && e.kind == wasmparser::ExternalKind::Func {
                        export = Some(e.index);
                    }
                }
            }
            _ => {}
        }
    }
    Ok(export
        .and_then(|f| funcs.get(f as usize))
        .and_then(|t| types.get(*t as usize))
        .cloned()
        .flatten())
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or("").to_string()
}

/// Validates `wasm` and builds the module model.
pub fn load(wasm: &[u8]) -> Result<Module<'_>, FrontendError> {
    if let Err(e) = Validator::new_with_features(accepted_features()).validate_all(wasm) {
        // Valid with every feature on: the module is fine, warpvisor lacks the feature.
        let with_all = Validator::new_with_features(WasmFeatures::all()).validate_all(wasm);
        if with_all.is_ok() {
            let location = function_at(wasm, e.offset()).unwrap_or_else(|| "module".into());
            return Err(FrontendError::Unsupported {
                feature: e.message().to_string(),
                location,
            });
        }
        return Err(FrontendError::Invalid {
            message: e.message().to_string(),
            offset: e.offset(),
        });
    }
    build(wasm)
}

/// Names the function whose body contains byte `offset`, if any.
fn function_at(wasm: &[u8], offset: u64) -> Option<String> {
    let module = build(wasm).ok();
    let mut imported = 0u32;
    let mut index = 0u32;
    for payload in Parser::new(0).parse_all(wasm) {
        match payload.ok()? {
            Payload::ImportSection(r) => {
                for imp in r.into_imports() {
                    if matches!(imp.ok()?.ty, TypeRef::Func(_) | TypeRef::FuncExact(_)) {
                        imported += 1;
                    }
                }
            }
            Payload::CodeSectionEntry(body) => {
                let range = body.range();
                if range.contains(&offset) {
                    let func = imported + index;
                    return Some(match &module {
                        Some(m) if (func as usize) < m.funcs.len() => {
                            format!("function {} ({func})", m.func_display_name(func))
                        }
                        _ => format!("function {func}"),
                    });
                }
                index += 1;
            }
            _ => {}
        }
    }
    None
}

type ParseResult<T> = Result<T, FrontendError>;

impl From<wasmparser::BinaryReaderError> for FrontendError {
    fn from(e: wasmparser::BinaryReaderError) -> Self {
        FrontendError::Invalid {
            message: e.message().to_string(),
            offset: e.offset(),
        }
    }
}

fn import_name(module: &str, name: &str) -> Option<ImportName> {
    Some(ImportName {
        module: module.to_string(),
        name: name.to_string(),
    })
}

fn const_expr(expr: &wasmparser::ConstExpr<'_>) -> ParseResult<ConstExpr> {
    let mut reader = expr.get_operators_reader();
    let op = reader.read()?;
    Ok(match op {
        Operator::I32Const { value } => ConstExpr::I32(value),
        Operator::I64Const { value } => ConstExpr::I64(value),
        Operator::F32Const { value } => ConstExpr::F32(value.bits()),
        Operator::F64Const { value } => ConstExpr::F64(value.bits()),
        Operator::RefNull { .. } => ConstExpr::RefNull,
        Operator::RefFunc { function_index } => ConstExpr::RefFunc(function_index),
        Operator::GlobalGet { global_index } => ConstExpr::GlobalGet(global_index),
        _ => {
            return Err(FrontendError::Invalid {
                message: "unsupported constant expression".into(),
                offset: reader.original_position(),
            })
        }
    })
}

fn build(wasm: &[u8]) -> ParseResult<Module<'_>> {
    let mut m = Module::default();
    let mut defined_types: Vec<u32> = Vec::new();
    for payload in Parser::new(0).parse_all(wasm) {
        match payload? {
            Payload::TypeSection(r) => {
                for group in r {
                    for sub in group?.into_types() {
                        m.types.push(sub.unwrap_func().clone());
                    }
                }
            }
            Payload::ImportSection(r) => {
                for imp in r.into_imports() {
                    let imp = imp?;
                    let name = import_name(imp.module, imp.name);
                    let kind = match imp.ty {
                        TypeRef::Func(t) | TypeRef::FuncExact(t) => {
                            m.funcs.push(FuncDecl {
                                type_index: t,
                                import: name.clone(),
                                name: None,
                                first_export: None,
                            });
                            m.imported_funcs += 1;
                            ExportKind::Func(m.funcs.len() as u32 - 1)
                        }
                        TypeRef::Table(t) => {
                            m.tables.push(TableDecl {
                                element: t.element_type,
                                initial: t.initial,
                                maximum: t.maximum,
                                import: name.clone(),
                            });
                            ExportKind::Table(m.tables.len() as u32 - 1)
                        }
                        TypeRef::Memory(t) => {
                            m.memory = Some(MemoryDecl {
                                initial: t.initial,
                                maximum: t.maximum,
                                import: name.clone(),
                            });
                            ExportKind::Memory(0)
                        }
                        TypeRef::Global(g) => {
                            m.globals.push(GlobalDecl {
                                ty: g.content_type,
                                mutable: g.mutable,
                                init: None,
                                import: name.clone(),
                            });
                            ExportKind::Global(m.globals.len() as u32 - 1)
                        }
                        TypeRef::Tag(_) => continue,
                    };
                    if let Some(name) = name {
                        m.imports.push((name, kind));
                    }
                }
            }
            Payload::FunctionSection(r) => {
                for t in r {
                    let t = t?;
                    defined_types.push(t);
                    m.funcs.push(FuncDecl {
                        type_index: t,
                        import: None,
                        name: None,
                        first_export: None,
                    });
                }
            }
            Payload::TableSection(r) => {
                for t in r {
                    let t = t?.ty;
                    m.tables.push(TableDecl {
                        element: t.element_type,
                        initial: t.initial,
                        maximum: t.maximum,
                        import: None,
                    });
                }
            }
            Payload::MemorySection(r) => {
                for mem in r {
                    let mem = mem?;
                    m.memory = Some(MemoryDecl {
                        initial: mem.initial,
                        maximum: mem.maximum,
                        import: None,
                    });
                }
            }
            Payload::GlobalSection(r) => {
                for g in r {
                    let g = g?;
                    m.globals.push(GlobalDecl {
                        ty: g.ty.content_type,
                        mutable: g.ty.mutable,
                        init: Some(const_expr(&g.init_expr)?),
                        import: None,
                    });
                }
            }
            Payload::ExportSection(r) => {
                for e in r {
                    let e = e?;
                    let kind = match e.kind {
                        ExternalKind::Func | ExternalKind::FuncExact => {
                            if let Some(f) = m.funcs.get_mut(e.index as usize) {
                                f.first_export.get_or_insert(m.exports.len());
                            }
                            ExportKind::Func(e.index)
                        }
                        ExternalKind::Table => ExportKind::Table(e.index),
                        ExternalKind::Memory => ExportKind::Memory(e.index),
                        ExternalKind::Global => ExportKind::Global(e.index),
                        ExternalKind::Tag => continue,
                    };
                    m.exports.push(Export {
                        name: e.name.to_string(),
                        kind,
                    });
                }
            }
            Payload::StartSection { func, .. } => m.start = Some(func),
            Payload::ElementSection(r) => {
                for e in r {
                    let e = e?;
                    let mode = match &e.kind {
                        ElementKind::Passive => SegmentMode::Passive,
                        ElementKind::Declared => SegmentMode::Declared,
                        ElementKind::Active {
                            table_index,
                            offset_expr,
                        } => SegmentMode::Active {
                            target: table_index.unwrap_or(0),
                            offset: const_expr(offset_expr)?,
                        },
                    };
                    let (element, items) = match e.items {
                        ElementItems::Functions(r) => {
                            let mut items = Vec::new();
                            for f in r {
                                items.push(ConstExpr::RefFunc(f?));
                            }
                            (wasmparser::RefType::FUNCREF, items)
                        }
                        ElementItems::Expressions(ty, r) => {
                            let mut items = Vec::new();
                            for x in r {
                                items.push(const_expr(&x?)?);
                            }
                            (ty, items)
                        }
                    };
                    m.elems.push(ElemSegment {
                        mode,
                        element,
                        items,
                    });
                }
            }
            Payload::DataSection(r) => {
                for d in r {
                    let d = d?;
                    let mode = match &d.kind {
                        wasmparser::DataKind::Passive => SegmentMode::Passive,
                        wasmparser::DataKind::Active {
                            memory_index,
                            offset_expr,
                        } => SegmentMode::Active {
                            target: *memory_index,
                            offset: const_expr(offset_expr)?,
                        },
                    };
                    m.datas.push(DataSegment {
                        mode,
                        bytes: d.data.to_vec(),
                    });
                }
            }
            Payload::CodeSectionEntry(body) => {
                let mut locals = Vec::new();
                for l in body.get_locals_reader()? {
                    let (count, ty) = l?;
                    locals.extend(std::iter::repeat_n(ty, count as usize));
                }
                let mut ops = Vec::new();
                let mut reader = body.get_operators_reader()?;
                while !reader.eof() {
                    let op = reader.read()?;
                    if let Operator::BrTable { targets } = &op {
                        if targets.len() > limits::MAX_BR_TABLE_TARGETS {
                            let func = (m.imported_funcs + m.bodies.len()) as u32;
                            return Err(FrontendError::Limit {
                                limit: "MAX_BR_TABLE_TARGETS",
                                what: "targets in one br_table",
                                value: targets.len().into(),
                                max: limits::MAX_BR_TABLE_TARGETS.into(),
                                location: format!(
                                    "function {} ({func})",
                                    m.func_display_name(func)
                                ),
                            });
                        }
                    }
                    ops.push(op);
                }
                m.bodies.push(FuncBody { locals, ops });
            }
            Payload::CustomSection(c) => {
                if let wasmparser::KnownCustom::Name(names) = c.as_known() {
                    // Names are a debugging aid: a broken name section is ignored.
                    for name in names.into_iter().flatten() {
                        if let Name::Function(map) = name {
                            for naming in map.into_iter().flatten() {
                                if let Some(f) = m.funcs.get_mut(naming.index as usize) {
                                    f.name = Some(naming.name.to_string());
                                }
                            }
                        }
                    }
                }
            }
            _ => {}
        }
    }
    if m.tables.len() > limits::MAX_TABLES {
        return Err(FrontendError::Limit {
            limit: "MAX_TABLES",
            what: "tables",
            value: m.tables.len() as u64,
            max: limits::MAX_TABLES as u64,
            location: "module".into(),
        });
    }
    Ok(m)
}
