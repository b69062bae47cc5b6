//! Values crossing between host and VMs, and trap kinds.

use wasmparser::ValType;

use crate::abi::NULL_REF;

/// A WebAssembly value as the host sees it. Floats are kept as bits so NaN payloads survive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Value {
    /// `i32`
    I32(i32),
    /// `i64`
    I64(i64),
    /// `f32`, as bits.
    F32(u32),
    /// `f64`, as bits.
    F64(u64),
    /// `funcref`: a function index of the module, or null.
    FuncRef(Option<u32>),
    /// `externref`: a host value, or null.
    ExternRef(Option<u32>),
}

impl Value {
    /// The value as a 64-bit frame word (the kernel's `wv_enc_*`).
    pub fn to_word(self) -> u64 {
        match self {
            Value::I32(v) => v as u32 as u64,
            Value::I64(v) => v as u64,
            Value::F32(b) => b as u64,
            Value::F64(b) => b,
            Value::FuncRef(r) | Value::ExternRef(r) => r.unwrap_or(NULL_REF) as u64,
        }
    }

    /// Decodes a frame word of type `ty` (the kernel's `wv_dec_*`).
    pub fn from_word(ty: ValType, w: u64) -> Value {
        let r = |w: u64| (w as u32 != NULL_REF).then_some(w as u32);
        match ty {
            ValType::I32 => Value::I32(w as u32 as i32),
            ValType::I64 => Value::I64(w as i64),
            ValType::F32 => Value::F32(w as u32),
            ValType::F64 => Value::F64(w),
            ValType::Ref(rt) if rt.is_func_ref() => Value::FuncRef(r(w)),
            _ => Value::ExternRef(r(w)),
        }
    }

    /// Whether the value has type `ty`.
    pub fn has_type(&self, ty: ValType) -> bool {
        match (self, ty) {
            (Value::I32(_), ValType::I32)
            | (Value::I64(_), ValType::I64)
            | (Value::F32(_), ValType::F32)
            | (Value::F64(_), ValType::F64) => true,
            (Value::FuncRef(_), ValType::Ref(r)) => r.is_func_ref(),
            (Value::ExternRef(_), ValType::Ref(r)) => r.is_extern_ref(),
            _ => false,
        }
    }

    /// The zero value of `ty`.
    pub fn zero(ty: ValType) -> Value {
        Value::from_word(
            ty,
            if matches!(ty, ValType::Ref(_)) {
                NULL_REF as u64
            } else {
                0
            },
        )
    }
}

/// Why a VM stopped before returning. Names follow wasmtime's trap codes in snake case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TrapKind {
    /// `unreachable` executed.
    Unreachable,
    /// A memory access outside the VM's memory.
    MemoryOutOfBounds,
    /// A table access outside the table.
    TableOutOfBounds,
    /// `call_indirect` of a null entry.
    IndirectCallToNull,
    /// `call_indirect` of a function with another signature.
    BadSignature,
    /// Integer overflow (division or float conversion).
    IntegerOverflow,
    /// Integer division by zero.
    IntegerDivisionByZero,
    /// NaN converted to an integer.
    BadConversionToInteger,
    /// Call depth or call-stack space exhausted.
    StackOverflow,
    /// Null reference dereferenced.
    NullReference,
    /// The VM ran past its time limit.
    Timeout,
    /// The VM ran out of fuel.
    OutOfFuel,
    /// A host function failed while servicing the VM's call.
    HostError,
}

impl TrapKind {
    /// The kind for a kernel trap code (`WV_TRAP_*`, [`crate::abi::KERNEL_TRAPS`]).
    pub fn from_code(code: u32) -> TrapKind {
        crate::abi::codes::trap_kind(code)
    }

    /// The snake-case name (`integer_division_by_zero`, ...).
    pub fn name(self) -> &'static str {
        match self {
            TrapKind::Unreachable => "unreachable",
            TrapKind::MemoryOutOfBounds => "memory_out_of_bounds",
            TrapKind::TableOutOfBounds => "table_out_of_bounds",
            TrapKind::IndirectCallToNull => "indirect_call_to_null",
            TrapKind::BadSignature => "bad_signature",
            TrapKind::IntegerOverflow => "integer_overflow",
            TrapKind::IntegerDivisionByZero => "integer_division_by_zero",
            TrapKind::BadConversionToInteger => "bad_conversion_to_integer",
            TrapKind::StackOverflow => "stack_overflow",
            TrapKind::NullReference => "null_reference",
            TrapKind::Timeout => "timeout",
            TrapKind::OutOfFuel => "out_of_fuel",
            TrapKind::HostError => "host_error",
        }
    }
}

impl std::fmt::Display for TrapKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// How one VM's invocation ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The function returned these values.
    Returned(Vec<Value>),
    /// The VM trapped.
    Trapped(TrapKind),
    /// The VM exited with this code (WASI `proc_exit`).
    Exited(u32),
}
