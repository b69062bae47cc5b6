//! Linking for spec scripts: the `spectest` host module, registered instances, and the
//! import-type checks behind `assert_unlinkable`.

use std::sync::{Arc, Mutex};

use wasmparser::{FuncType, RefType, ValType};

use crate::frontend::{ExportKind, Module};
use crate::vmm::{Fleet, HostFunctions, HostStop, Imports, Outcome, TrapKind, Value, VmMemory};

/// An instance a script created, shared with the modules that import from it.
pub type InstanceRef = Arc<Mutex<Fleet>>;

/// Why a module cannot be linked or run here.
#[derive(Debug)]
pub enum LinkError {
    /// The import does not match what is provided (what `assert_unlinkable` expects).
    Unlinkable(String),
    /// warpvisor cannot share this kind of entity between instances.
    Unsupported(String),
}

/// What a registered name provides.
#[derive(Clone)]
pub enum Provider {
    /// The spec suite's host module.
    Spectest,
    /// An instance created by the script.
    Instance(InstanceRef),
    /// An instance the script created but warpvisor could not run, with the reason.
    Unavailable(String),
}

/// A function an import is bound to.
enum Bound {
    /// `spectest.print*`: does nothing.
    Print,
    /// An exported function of another instance.
    Export(InstanceRef, u32),
}

struct ScriptHost {
    funcs: Vec<Bound>,
}

impl HostFunctions for ScriptHost {
    fn call(
        &mut self,
        _: &mut VmMemory<'_>,
        import: u32,
        args: &[Value],
    ) -> Result<Vec<Value>, HostStop> {
        self.call_import(import, args).map_err(HostStop::Trap)
    }
}

impl ScriptHost {
    fn call_import(&mut self, import: u32, args: &[Value]) -> Result<Vec<Value>, TrapKind> {
        match self.funcs.get(import as usize) {
            Some(Bound::Print) => Ok(Vec::new()),
            Some(Bound::Export(instance, func)) => {
                // A call back into an instance that is itself running is not supported.
                let mut fleet = instance.try_lock().map_err(|_| TrapKind::HostError)?;
                let outcome = fleet
                    .invoke_function(*func, &[args.to_vec()])
                    .map_err(|_| TrapKind::HostError)?;
                match outcome.into_iter().next() {
                    Some(Outcome::Returned(values)) => Ok(values),
                    Some(Outcome::Trapped(kind)) => Err(kind),
                    _ => Err(TrapKind::HostError),
                }
            }
            None => Err(TrapKind::HostError),
        }
    }
}

fn func_type(params: &[ValType], results: &[ValType]) -> FuncType {
    FuncType::new(params.iter().copied(), results.iter().copied())
}

fn spectest_func(name: &str) -> Option<FuncType> {
    use ValType::*;
    Some(match name {
        "print" => func_type(&[], &[]),
        "print_i32" => func_type(&[I32], &[]),
        "print_i64" => func_type(&[I64], &[]),
        "print_f32" => func_type(&[F32], &[]),
        "print_f64" => func_type(&[F64], &[]),
        "print_i32_f32" => func_type(&[I32, F32], &[]),
        "print_f64_f64" => func_type(&[F64, F64], &[]),
        _ => return None,
    })
}

fn spectest_global(name: &str) -> Option<Value> {
    Some(match name {
        "global_i32" => Value::I32(666),
        "global_i64" => Value::I64(666),
        "global_f32" => Value::F32(666.6f32.to_bits()),
        "global_f64" => Value::F64(666.6f64.to_bits()),
        _ => return None,
    })
}

/// Limits `(initial, max)` satisfy an import declaring `(min, max)`.
fn limits_match(actual: (u64, Option<u64>), wanted: (u64, Option<u64>)) -> bool {
    actual.0 >= wanted.0
        && match (actual.1, wanted.1) {
            (_, None) => true,
            (Some(a), Some(w)) => a <= w,
            (None, Some(_)) => false,
        }
}

fn value_type(v: &Value) -> ValType {
    match v {
        Value::I32(_) => ValType::I32,
        Value::I64(_) => ValType::I64,
        Value::F32(_) => ValType::F32,
        Value::F64(_) => ValType::F64,
        Value::FuncRef(_) => ValType::Ref(RefType::FUNCREF),
        Value::ExternRef(_) => ValType::Ref(RefType::EXTERNREF),
    }
}

/// Resolves every import of `module` against the registered providers.
pub fn resolve(
    module: &Module<'_>,
    lookup: &dyn Fn(&str) -> Option<Provider>,
) -> Result<Imports, LinkError> {
    let mut funcs = Vec::new();
    let mut imports = Imports::default();
    for (name, kind) in &module.imports {
        let provider = lookup(&name.module).ok_or_else(|| {
            LinkError::Unlinkable(format!("unknown import module `{}`", name.module))
        })?;
        let what = format!("`{}`.`{}`", name.module, name.name);
        let unknown = || LinkError::Unlinkable(format!("unknown import {what}"));
        let mismatch = || LinkError::Unlinkable(format!("incompatible import type for {what}"));
        match (&provider, kind) {
            (Provider::Unavailable(why), _) => return Err(LinkError::Unsupported(why.clone())),
            (Provider::Spectest, ExportKind::Func(f)) => {
                let ty = spectest_func(&name.name).ok_or_else(unknown)?;
                if &ty != module.func_type(*f) {
                    return Err(mismatch());
                }
                funcs.push(Bound::Print);
            }
            (Provider::Spectest, ExportKind::Global(g)) => {
                let v = spectest_global(&name.name).ok_or_else(unknown)?;
                let decl = &module.globals[*g as usize];
                if decl.mutable || value_type(&v) != decl.ty {
                    return Err(mismatch());
                }
                imports.globals.push(v);
            }
            (Provider::Spectest, ExportKind::Table(t)) => {
                if name.name != "table" {
                    return Err(unknown());
                }
                let decl = &module.tables[*t as usize];
                if decl.element != RefType::FUNCREF
                    || !limits_match((10, Some(20)), (decl.initial, decl.maximum))
                {
                    return Err(mismatch());
                }
                imports.tables.push((10, Some(20)));
            }
            (Provider::Spectest, ExportKind::Memory(_)) => {
                if name.name != "memory" {
                    return Err(unknown());
                }
                let decl = module.memory.as_ref().ok_or_else(mismatch)?;
                if !limits_match((1, Some(2)), (decl.initial, decl.maximum)) {
                    return Err(mismatch());
                }
                imports.memory = Some((1, Some(2)));
            }
            (Provider::Instance(inst), kind) => {
                let mut fleet = inst
                    .try_lock()
                    .map_err(|_| LinkError::Unsupported("instance busy".into()))?;
                let program = fleet.program().clone();
                let exporter = &program.module;
                let export = exporter.export(&name.name).ok_or_else(unknown)?;
                match (export, kind) {
                    (ExportKind::Func(ef), ExportKind::Func(f)) => {
                        if exporter.func_type(ef) != module.func_type(*f) {
                            return Err(mismatch());
                        }
                        funcs.push(Bound::Export(inst.clone(), ef));
                    }
                    (ExportKind::Global(eg), ExportKind::Global(g)) => {
                        let have = &exporter.globals[eg as usize];
                        let want = &module.globals[*g as usize];
                        if have.ty != want.ty || have.mutable != want.mutable {
                            return Err(mismatch());
                        }
                        if want.mutable {
                            return Err(LinkError::Unsupported(format!(
                                "mutable global {what} shared between instances"
                            )));
                        }
                        let v = fleet
                            .global(0, &name.name)
                            .ok()
                            .flatten()
                            .ok_or_else(mismatch)?;
                        imports.globals.push(v);
                    }
                    (ExportKind::Table(et), ExportKind::Table(t)) => {
                        let have = &exporter.tables[et as usize];
                        let want = &module.tables[*t as usize];
                        let size = fleet.table_size(0, et).map_err(|_| mismatch())? as u64;
                        if have.element != want.element
                            || !limits_match((size, have.maximum), (want.initial, want.maximum))
                        {
                            return Err(mismatch());
                        }
                        return Err(LinkError::Unsupported(format!(
                            "table {what} shared between instances"
                        )));
                    }
                    (ExportKind::Memory(_), ExportKind::Memory(_)) => {
                        let have = exporter.memory.as_ref().ok_or_else(mismatch)?;
                        let want = module.memory.as_ref().ok_or_else(mismatch)?;
                        let size = fleet.memory_pages(0).ok_or_else(mismatch)? as u64;
                        if !limits_match((size, have.maximum), (want.initial, want.maximum)) {
                            return Err(mismatch());
                        }
                        return Err(LinkError::Unsupported(format!(
                            "memory {what} shared between instances"
                        )));
                    }
                    _ => return Err(mismatch()),
                }
            }
        }
    }
    imports.host = Box::new(ScriptHost { funcs });
    Ok(imports)
}
